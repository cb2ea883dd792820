"""The generated ROS 2 node under real rclpy, against the rehearsal robot over Cyclone DDS.

Two DDS implementations on one private domain, as on a robot: the node from `simreal deploy
ros2` runs with rclpy and ``rmw_fastrtps_cpp`` (the pip wheels of the ``[ros2]`` extra, no
colcon build: its ``policy_node.py`` is run as a file, the bundle passed as a ROS parameter);
the robot is ``simreal deploy sim --external``, a real-time MuJoCo arm speaking ROS 2 over
Cyclone DDS Python. A third participant in this process (Cyclone, best effort, so it cannot
slow the writer) listens to the command topic, to time the Ctrl-C and see what went out after.

Checked: the robot received and applied the policy's commands at about the control rate, the
arm went where the policy holds it, and Ctrl-C made the node publish the safe command (hold
the measured pose) and exit with code 0.

Skipped, with the reason, when rclpy cannot start a node with rmw_fastrtps_cpp in a
subprocess (``pip install -e ".[ros2]"`` installs it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("onnxruntime")
pytest.importorskip("cyclonedds")
pytest.importorskip("mujoco")

from fixtures import bundles as T  # noqa: E402
from simreal.bundle import BUNDLE_YAML, Bundle, OnnxPolicy, load_bundle, write_bundle_yaml  # noqa: E402
from simreal.deploy.ros2_package import NODE_NAME, generate_ros2_package  # noqa: E402
from simreal.deploy.runner import PolicyRunner  # noqa: E402
from simreal.deploy.transport_dds import DdsTransport  # noqa: E402
from simreal.observations import build_observation  # noqa: E402

RUN_S = 2.0  # policy running on the robot before Ctrl-C [s]
HOLD_S = 1.0  # the robot runs on after it, holding the safe command [s]
FIND_S = 90.0  # the node's start-up (imports, ONNX, a VLA's tokenizer) and discovery of the robot [s]


def ros_env(domain_id: int, pythonpath: str = "", localhost: bool = True) -> dict[str, str]:
    """The environment of an rclpy process on wheels: the ROS libraries are in the venv's lib/ and
    in site-packages/ros_*.libs, found through LD_LIBRARY_PATH, which must be set before the
    process starts (the loader reads it once). ``localhost``: ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST,
    as the README advises for a rehearsal on one machine (with the test's own listener, a third
    participant, discovery without it failed now and then under load); without it, Fast DDS
    announces itself by multicast only."""
    site = Path(sysconfig.get_paths()["platlib"])
    libs = [str(Path(sys.prefix) / "lib"), *sorted(str(p) for p in site.glob("ros_*.libs"))]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    env.update(RMW_IMPLEMENTATION="rmw_fastrtps_cpp", ROS_DOMAIN_ID=str(domain_id))
    env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
    env.pop("ROS_LOCALHOST_ONLY", None)  # deprecated in Jazzy; the range replaces it
    if localhost:
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH", "")) if p)
    return env


@pytest.fixture(scope="module")
def rclpy_ok() -> None:
    probe = (
        "import rclpy, std_msgs.msg, sensor_msgs.msg, trajectory_msgs.msg, rcl_interfaces.msg\n"
        "rclpy.init(); rclpy.create_node('simreal_probe').destroy_node(); rclpy.shutdown()"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", probe], env=ros_env(T.random_domain_id()), capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.skip("rclpy probe (rclpy.init + a node with rmw_fastrtps_cpp) hung for 60 s")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"rclpy with rmw_fastrtps_cpp does not start here (pip install -e '.[ros2]'): {last}")


def _so100(tmp: Path) -> Path:
    """LeRobot's SO-100 arm, JointState in: the arm holds about its start pose, the defaults."""
    return T.make_holding_bundle(tmp / "bundle", "so100")


def _arm_trajectory(tmp: Path) -> Path:
    """The two-joint test arm, JointTrajectory out, JointState + Imu in. Its policy pulls the
    joints to their defaults, where the robot starts; the action offset moved by (+0.3, -0.3)
    makes it hold the arm away from there, so only applied commands bring the arm to that pose."""
    bundle = T.make_joint_bundle(tmp / "bundle", command_type="trajectory_msgs/msg/JointTrajectory")
    data = yaml.safe_load((bundle / BUNDLE_YAML).read_text())
    data["action"]["offset"] = [o + d for o, d in zip(data["action"]["offset"], (0.3, -0.3))]
    write_bundle_yaml(bundle, data)
    return bundle


def held_pose(bundle: Bundle, default: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Where a joint-position policy holds a settled arm: the fixed point of
    q = offset + scale * a, a = pi(obs(q, joint_vel = 0, level base, last_action = a)) [rad]."""
    policy, a = OnnxPolicy(bundle), np.zeros(bundle.action.size)
    still = {
        "joint_vel": np.zeros(a.size),
        "quat_wxyz": np.array([1.0, 0.0, 0.0, 0.0]),
        "ang_vel_b": np.zeros(3),
        "default_joint_pos": default,
    }
    for _ in range(iterations):
        q = bundle.action.to_physical(a)
        a = np.asarray(policy(build_observation(bundle.obs_names, {**still, "joint_pos": q, "last_action": a}, np)))
    return bundle.action.to_physical(a)


def _start(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Popen writing stdout to ``out`` and stderr to ``out`` + '.err': files, not pipes, so a
    chatty child never blocks on a full pipe."""
    with open(out, "w") as f, open(f"{out}.err", "w") as e:
        return subprocess.Popen(cmd, env=env, stdout=f, stderr=e, text=True)


def _tail(path: Path) -> str:
    return "".join(p.read_text()[-2000:] for p in (path, Path(f"{path}.err")) if p.exists())


def _kill(*procs: subprocess.Popen | None) -> None:
    """Kill and reap each process still running."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def _ctrl_c_at(t_sig: float, node: subprocess.Popen, sim: subprocess.Popen, listener: DdsTransport) -> None:
    """Poll ``listener`` until ``t_sig`` (monotonic [s]), Ctrl-C the node, then poll on while it
    exits (15 s at most) and while the robot finishes its rehearsal (30 s at most)."""
    while time.monotonic() < t_sig:
        listener.poll(0.02)
    node.send_signal(signal.SIGINT)
    while node.poll() is None and time.monotonic() < t_sig + 15:
        listener.poll(0.02)
    while sim.poll() is None and time.monotonic() < t_sig + 30:
        listener.poll(0.05)


def _robot_then_node(
    bundle_dir: Path,
    pkg: Path,
    domain: int,
    duration_s: float,
    listener: DdsTransport,
    robot_up: list,
    received: list,
    tmp: Path,
) -> tuple[subprocess.Popen, subprocess.Popen]:
    """Start the rehearsal robot (``sim.json``), wait until ``listener`` fills ``robot_up``, start the
    generated node (``node.log``) and wait until it fills ``received``: (robot, node) processes.
    The robot first, as on hardware: its command reader exists before the node's writer does, so
    the robot and the listener see the node's first command alike."""
    node_log, sim_out = tmp / "node.log", tmp / "sim.json"
    sim = _start(
        [
            sys.executable,
            "-m",
            "simreal.cli",
            "deploy",
            "sim",
            str(bundle_dir),
            "--external",
            "--domain-id",
            str(domain),
            "--duration",
            str(duration_s),
            "--no-realtime",
            "--json",
            "--max-command-gap",
            str(HOLD_S + 1.0),
        ],
        sim_out,
    )  # the node is stopped HOLD_S before the end
    deadline, node = time.monotonic() + 90, None
    try:
        while not robot_up:
            assert sim.poll() is None and time.monotonic() < deadline, f"no robot output: {_tail(sim_out)}"
            listener.poll(0.05)
        node = _start(
            [
                sys.executable,
                str(pkg / pkg.name / f"{NODE_NAME}.py"),
                "--ros-args",  # as the README
                "--params-file",
                str(pkg / "config" / f"{pkg.name}.yaml"),
                "-p",
                f"bundle_path:={bundle_dir}",
            ],
            node_log,
            ros_env(domain, str(pkg)),
        )
        found_by = time.monotonic() + FIND_S
        while not received:  # the robot answers the first command with its hand-over
            assert node.poll() is None and sim.poll() is None and time.monotonic() < found_by, (
                f"no command within {FIND_S:g} s of the node's start\nnode: {_tail(node_log)}\nsim: {_tail(sim_out)}"
            )
            listener.poll(0.05)
    except BaseException:
        _kill(node, sim)
        raise
    return sim, node


def test_a_ros_process_started_after_the_robot_finds_it_within_seconds(rclpy_ok):
    """deploy sim's loopback participant announces itself every second. A Fast DDS process started
    after it, as the README starts the node (no ROS_AUTOMATIC_DISCOVERY_RANGE), announces itself by
    multicast, which loopback lacks, so it found the robot only at Cyclone's next announcement, 30 s
    later: a rehearsal had given up by then (no hand-over)."""
    domain = T.random_domain_id()
    got: list[float] = []
    talker = (
        "import time, rclpy\nfrom std_msgs.msg import String\nrclpy.init()\n"
        "pub = rclpy.create_node('talker').create_publisher(String, '/chatter', 10)\n"
        "while True:\n    pub.publish(String(data='x'))\n    time.sleep(0.05)"
    )
    with DdsTransport(domain) as listener:
        listener.subscribe("/chatter", "std_msgs/msg/String", lambda msg, t, data: got.append(t), "default")
        t_end = time.monotonic() + 3.0  # past the listener's own start-up announcements
        while time.monotonic() < t_end:
            listener.poll(0.05)
        proc = subprocess.Popen(
            [sys.executable, "-c", talker],
            env=ros_env(domain, localhost=False),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        t_start = time.monotonic()
        try:
            while not got and time.monotonic() < t_start + 40 and proc.poll() is None:
                listener.poll(0.05)
        finally:
            proc.kill()
            err = proc.communicate()[1]
    assert got, f"nothing from the rclpy process in 40 s: {err[-2000:]}"
    assert got[0] - t_start < 12.0, got[0] - t_start  # its start-up (rclpy's import), then a second at most


@pytest.mark.timeout(180)
@pytest.mark.parametrize("make", [_so100, _arm_trajectory], ids=["so100-float64multiarray", "arm-jointtrajectory"])
def test_generated_node_drives_the_rehearsal_robot(make, rclpy_ok, tmp_path):
    bundle_dir = make(tmp_path)
    pkg = generate_ros2_package(bundle_dir, tmp_path / "src")
    bundle = load_bundle(bundle_dir)
    runner = PolicyRunner(bundle)  # the node's config and command codec, read from the same bundle
    cfg, codec, rate_hz = runner.cfg, runner.codec, runner.cfg.control_rate_hz
    assert list(bundle.action.names) == list(runner.spec.actuator_names)  # poses below in one order
    domain = T.random_domain_id()

    received: list[tuple[float, np.ndarray]] = []  # (t_rx monotonic [s], physical command)
    robot_up: list[float] = []
    listener = DdsTransport(domain)
    listener.subscribe(
        cfg.command.topic, cfg.command.type, lambda msg, t, data: received.append((t, codec.decode(msg))), "sensor_data"
    )
    first_state = next(iter(cfg.state.values()))
    listener.subscribe(first_state.topic, first_state.type, lambda msg, t, data: robot_up.append(t), "sensor_data")
    node_log, sim_out = tmp_path / "node.log", tmp_path / "sim.json"
    node = sim = None
    try:
        sim, node = _robot_then_node(bundle_dir, pkg, domain, RUN_S + HOLD_S, listener, robot_up, received, tmp_path)
        t_first = received[0][0]
        while time.monotonic() < t_first + RUN_S:
            listener.poll(0.02)
        t_sig = time.monotonic()
        node.send_signal(signal.SIGINT)
        while node.poll() is None and time.monotonic() < t_sig + 15:
            listener.poll(0.02)
        n_after_exit = len(received)
        while sim.poll() is None and time.monotonic() < t_sig + HOLD_S + 30:
            listener.poll(0.05)
    finally:
        _kill(node, sim)
        listener.close()

    log = node_log.read_text() + Path(f"{node_log}.err").read_text()  # rclpy logs to stderr
    assert node.returncode == 0, log[-3000:]
    assert sim.returncode == 0, _tail(sim_out)  # exit 0: the rehearsal passed
    out = json.loads(sim_out.read_text())
    report = out["robot"]
    assert out["passed"] and report["handover"], out

    # the robot got the commands, at about the control rate (the timer is rclpy's)
    before = [u for t, u in received if t < t_sig]
    expected = rate_hz * (t_sig - t_first)
    assert len(before) >= 0.7 * expected, (len(before), expected)
    assert report["commands_applied"] >= 0.7 * expected, (report, expected)
    assert len(received) == n_after_exit  # nothing after the node exited

    # Ctrl-C: the safe command went out (the node's log says which), the robot holds it
    after = [u for t, u in received if t >= t_sig]
    assert 1 <= len(after) <= 2, after  # the safe command, maybe behind one tick already in flight
    assert "shutdown: published the safe command" in log, log[-3000:]
    safe = json.loads(log.split("published the safe command", 1)[1].splitlines()[0])
    final = np.asarray(report["final_state"]["joint_pos"])
    np.testing.assert_allclose(after[-1], safe, atol=1e-3)
    np.testing.assert_allclose(final, after[-1], atol=0.02)  # hold the measured pose: the arm stops there

    # where the policy holds the arm
    default = np.array([a.default for a in runner.spec.actuators])  # the robot's start pose
    target = held_pose(bundle, default)
    np.testing.assert_allclose(final, target, atol=0.03)
    if make is _arm_trajectory:
        assert np.abs(target - default).min() > 0.15  # it had to move there


def _tilt_rad(q: object) -> float:
    """Angle between the body z axis and world z of a geometry_msgs/Quaternion [rad]."""
    x, y = q.x, q.y
    return float(np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y) / (q.w**2 + x * x + y * y + q.z**2), -1.0, 1.0)))


@pytest.mark.timeout(240)
def test_generated_node_latches_the_safe_command_when_a_humanoid_falls(rclpy_ok, tmp_path):
    """Unitree G1 (29 joints, a free base): JointState + Imu in, Float64MultiArray out. The policy
    holds the home pose, which the G1's own PD gains cannot balance (ankle pitch kp 40 N m/rad
    each, against m g h of about 240 N m/rad for the toppling body), so it tips over about 1.3 s
    after the hand-over. The node's envelope (a humanoid's 1 rad of base tilt) trips on the Imu
    it reads: the safe command (the pose measured then) is on the wire within two control
    periods of the first Imu message past the bound, and stays there; the robot's own report
    says its true state left the envelope, and fails the rehearsal."""
    bundle_dir = T.make_holding_bundle(tmp_path / "bundle", "g1")
    pkg = generate_ros2_package(bundle_dir, tmp_path / "src")
    runner = PolicyRunner(load_bundle(bundle_dir))
    cfg, codec, period = runner.cfg, runner.codec, runner.cfg.period_s
    max_tilt = runner.cfg.envelope.max_tilt_rad
    assert runner.spec.family == "humanoid" and max_tilt == pytest.approx(1.0)
    imu = next(st for st in cfg.state.values() if st.type == "sensor_msgs/msg/Imu")
    domain = T.random_domain_id()
    received: list[tuple[float, np.ndarray]] = []
    tilts: list[tuple[float, float]] = []  # (t_rx [s], base tilt the Imu reports [rad])
    listener = DdsTransport(domain)
    listener.subscribe(
        cfg.command.topic, cfg.command.type, lambda msg, t, data: received.append((t, codec.decode(msg))), "sensor_data"
    )
    listener.subscribe(
        imu.topic, imu.type, lambda msg, t, data: tilts.append((t, _tilt_rad(msg.orientation))), "sensor_data"
    )
    node_log, sim_out = tmp_path / "node.log", tmp_path / "sim.json"
    node = sim = None
    try:
        sim, node = _robot_then_node(bundle_dir, pkg, domain, 3.0, listener, tilts, received, tmp_path)
        t_sig = received[0][0] + 2.6
        _ctrl_c_at(t_sig, node, sim, listener)
    finally:
        _kill(node, sim)
        listener.close()

    log = node_log.read_text() + Path(f"{node_log}.err").read_text()
    assert node.returncode == 0, log[-3000:]
    assert "safety mode: fault (envelope: tilt" in log, log[-3000:]
    out = json.loads(sim_out.read_text())
    assert sim.returncode == 1 and not out["passed"], _tail(sim_out)
    left = out["robot"]["envelope"]
    assert left["left_s"] is not None and left["reason"].startswith("tilt"), left

    t_exit = next(t for t, tilt in tilts if tilt > max_tilt)
    running = [(t, u) for t, u in received if t < t_sig]
    # the safe command is latched: from the trip to the Ctrl-C every command is the same vector
    k = len(running) - 1
    while k > 0 and np.array_equal(running[k - 1][1], running[-1][1]):
        k -= 1
    t_safe = running[k][0]
    assert k > 10 and t_sig - t_safe > 0.5, (k, t_sig - t_safe)  # the policy ran, then the safe command held
    assert -period <= t_safe - t_exit <= 2 * period, (t_safe - t_exit, period)
    assert len({u.tobytes() for _, u in running[:k]}) > 10  # the policy's commands were not that one vector


def test_node_without_bundle_path_or_colcon_install_says_so(rclpy_ok, tmp_path):
    pkg = generate_ros2_package(T.make_joint_bundle(tmp_path / "bundle"), tmp_path / "src")
    env = ros_env(T.random_domain_id(), str(pkg))
    env.pop("AMENT_PREFIX_PATH", None)
    proc = subprocess.run(
        [sys.executable, str(pkg / pkg.name / f"{NODE_NAME}.py")], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "[FATAL]" in lines[0] and "bundle_path:=" in lines[0], proc.stderr


@pytest.mark.parametrize(
    "param, says",
    [
        (
            "watchdog.timeout:=0.05",
            "'watchdog.timeout': not a parameter of this node (did you mean 'watchdog.timeout_s'?)",
        ),
        ("state_topics:=odom", "'state.odom.topic'"),  # one name, not the letters o, d, o, m
    ],
)
def test_node_refuses_a_parameter_it_does_not_have(rclpy_ok, tmp_path, param, says):
    """A typo in a parameter (a safety one: the watchdog) used to be ignored, the default kept."""
    bundle = T.make_joint_bundle(tmp_path / "bundle")
    pkg = generate_ros2_package(bundle, tmp_path / "src")
    proc = subprocess.run(
        [
            sys.executable,
            str(pkg / pkg.name / f"{NODE_NAME}.py"),
            "--ros-args",
            "-p",
            f"bundle_path:={bundle}",
            "-p",
            param,
        ],
        env=ros_env(T.random_domain_id(), str(pkg)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "[FATAL]" in lines[0] and says in lines[0], proc.stderr


@pytest.mark.timeout(240)
def test_generated_node_runs_a_vla_on_camera_images_and_an_instruction(rclpy_ok, tmp_path):
    """A VLA bundle's node under rclpy: it reads sensor_msgs/Image and std_msgs/String from the
    rehearsal robot (Cyclone DDS, images rendered from the scene, the episode's instruction) and
    commands the arm at about the control rate."""
    pytest.importorskip("transformers")
    bundle_dir = T.make_vla_bundle(tmp_path)
    pkg = generate_ros2_package(bundle_dir, tmp_path / "src")
    runner = PolicyRunner(load_bundle(bundle_dir))
    cfg, rate_hz = runner.cfg, runner.cfg.control_rate_hz
    domain = T.random_domain_id()
    received: list[float] = []  # receive times [s] of the node's commands and the robot's images
    images: list[float] = []
    listener = DdsTransport(domain)
    listener.subscribe(cfg.command.topic, cfg.command.type, lambda msg, t, data: received.append(t), "sensor_data")
    listener.subscribe(
        cfg.perception.image_topics["front"],
        "sensor_msgs/msg/Image",
        lambda msg, t, data: images.append(t),
        "sensor_data",
    )
    node_log, sim_out = tmp_path / "node.log", tmp_path / "sim.json"
    node = sim = None
    try:
        sim, node = _robot_then_node(bundle_dir, pkg, domain, RUN_S, listener, images, received, tmp_path)
        _ctrl_c_at(received[0] + RUN_S / 2, node, sim, listener)
    finally:
        _kill(node, sim)
        listener.close()
    log = node_log.read_text() + Path(f"{node_log}.err").read_text()
    assert node.returncode == 0, log[-3000:]
    runs = int(log.split("runner: the policy ran ", 1)[1].split(" ", 1)[0])
    assert runs >= 0.6 * rate_hz * RUN_S / 2, log[-3000:]  # it ran on the images and words it received
    assert len(images) >= 0.6 * rate_hz * RUN_S / 2
    report = json.loads(sim_out.read_text())["robot"]
    assert report["handover"] and report["commands_applied"] >= 0.6 * rate_hz * RUN_S / 2, report
