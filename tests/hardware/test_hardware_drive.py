"""The robot interface (clamping, refusal, safe command on exit) and the deploy runner driving
a robot through it (hardware.drive), on a fake joint robot and a simulated clock."""

from __future__ import annotations

import numpy as np
import pytest

from fixtures import bundles
from fixtures.fake_robot import FakeJointRobot
from simreal.bundle import load_bundle
from simreal.deploy.runner import PolicyRunner
from simreal.errors import ConfigError
from simreal.hardware.drive import drive
from simreal.hardware.robot import HardwareError


class SimClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s + 1e-4  # the loop itself takes a little time


@pytest.fixture()
def arm(tmp_path):
    spec = bundles.joint_robot_spec()
    bundle = load_bundle(bundles.make_joint_bundle(tmp_path / "b", gain=2.0))
    return spec, bundle


def test_send_action_clamps_refuses_and_needs_connect(arm):
    spec, _ = arm
    robot = FakeJointRobot(spec)
    with pytest.raises(HardwareError, match="not connected"):
        robot.send_action(np.zeros(2))
    with robot:
        sent = robot.send_action(np.array([9.0, -9.0]))
        np.testing.assert_allclose(sent, [1.5, -2.0])  # the spec's joint ranges
        with pytest.raises(HardwareError, match="non-finite"):
            robot.send_action(np.array([np.nan, 0.0]))
        with pytest.raises(HardwareError, match=r"takes 2 joint_position channels \(shoulder, elbow\), got 3"):
            robot.send_action(np.zeros(3))
        robot.observation()
    assert robot.closed == 1 and not robot.connected
    np.testing.assert_allclose(robot.written[-1], robot.last_state["joint_pos"])  # the safe command: hold


def test_exit_on_exception_sends_safe_command(arm):
    spec, _ = arm
    robot = FakeJointRobot(spec)
    with pytest.raises(RuntimeError):
        with robot:
            robot.observation()
            robot.send_action(np.array([1.0, 1.0]))
            raise RuntimeError("policy crashed")
    np.testing.assert_allclose(robot.written[-1], robot.last_state["joint_pos"])
    assert robot.closed == 1


def test_runner_drives_robot_to_policy_pose(arm):
    spec, bundle = arm
    clock = SimClock()
    robot = FakeJointRobot(spec, clock=clock)
    robot.q[:] = [1.0, 0.8]
    runner = PolicyRunner(bundle, spec=spec)
    with robot:
        report = drive(robot, runner, duration_s=3.0, clock=clock, sleep=clock.sleep)
    home = np.array([a.default for a in spec.actuators])
    assert np.abs(robot.q - home).max() < 0.05, robot.q
    assert report.ticks >= 140 and report.sent == report.ticks and report.read_errors == 0
    assert report.final_mode == "estop"  # the shutdown tick
    # every command within the spec's range and rate-limited by the joints' velocity limits
    w = np.array(robot.written[:-2])
    assert np.all(np.abs(np.diff(w, axis=0)) <= np.array([2.0, 3.0]) * runner.cfg.period_s + 1e-9)


def test_lost_state_puts_safe_command_on_the_wire(arm):
    spec, bundle = arm
    clock = SimClock()
    robot = FakeJointRobot(spec, clock=clock)
    runner = PolicyRunner(bundle, spec=spec)
    seen: list[tuple[str, np.ndarray]] = []

    def on_tick(result, sent):
        seen.append((result.mode, robot.q.copy()))
        if len(seen) == 150:  # the cable is pulled 3 s in
            robot.fail_reads = 10**6

    with robot:
        report = drive(robot, runner, duration_s=5.0, clock=clock, sleep=clock.sleep, on_tick=on_tick)
    modes = [m for m, _ in seen]
    assert modes[149] == "running"
    assert report.read_errors == report.ticks - 150
    lost = modes[150:]
    # the watchdog acts within its timeout (+ one tick), and then only the held pose goes out
    k = next(i for i, m in enumerate(lost) if m in ("stale", "fault"))
    assert k * runner.cfg.period_s <= runner.cfg.watchdog.timeout_s + runner.cfg.period_s
    np.testing.assert_allclose(robot.written[-1], seen[149][1], atol=0.05)


def test_a_link_that_dies_ends_in_a_watchdog_trip_and_a_report_not_an_error(arm):
    """Reads and writes both fail from 2 s on (a serial bus unplugged): drive() once raised the
    first failed write out of the loop (the CLI's exit 2, no report). Now the sends are counted,
    the watchdog takes over, the run returns its report, and the robot is released with the safe
    command's failure kept."""
    spec, bundle = arm
    clock = SimClock()
    robot = FakeJointRobot(spec, clock=clock)
    runner = PolicyRunner(bundle, spec=spec)
    ticks = [0]

    def on_tick(result, sent):
        ticks[0] += 1
        if ticks[0] == 100:
            robot.fail_reads = robot.fail_writes = 10**6

    with robot:
        report = drive(robot, runner, duration_s=4.0, clock=clock, sleep=clock.sleep, on_tick=on_tick)
    assert report.send_errors >= report.ticks - 101 > 0 and report.last_error == "fake: the link is gone"
    assert runner.safety.stats.took_over and runner.safety.stats.watchdog_trips == 1
    assert not robot.connected and robot.closed == 1 and robot.disconnect_error == "fake: the link is gone"


def test_bundle_for_another_mode_is_refused(arm):
    import dataclasses

    spec, bundle = arm
    robot = FakeJointRobot(spec)
    robot.mode = dataclasses.replace(robot.mode, name="joint_effort")
    with robot, pytest.raises(ConfigError, match="action_mode"):
        drive(robot, PolicyRunner(bundle, spec=spec), duration_s=0.1)


@pytest.mark.parametrize(
    "make, driver, says",
    [
        (
            lambda d: bundles.make_pd_hover_bundle(d),
            "so100",
            "driver 'so100' drives so100, not robot 'crazyflie2'; robot 'crazyflie2' is driven by crazyflie",
        ),
        (
            lambda d: bundles.make_joint_mlp_bundle(d, "so100"),
            "px4",
            "driver 'px4' drives crazyflie2, not robot 'so100'",
        ),
    ],
)
def test_a_driver_for_another_robot_is_one_line_before_anything_starts(tmp_path, capsys, make, driver, says):
    from simreal.cli import main

    assert main(["drive", str(make(tmp_path / "b")), "--driver", driver, "--twin", "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err


def test_drive_gives_a_goal_driven_policy_its_goal_or_refuses_it(tmp_path, capsys):
    """An arm policy that observes a goal from a topic: drive reads no topics, so without
    --task-param it would wait forever, command nothing and report success (it did)."""
    import json

    from simreal.cli import main

    b = bundles.make_goal_bundle(tmp_path / "b", "so100")
    assert main(["drive", str(b), "--twin", "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--task-param target_pos_w=[x,y,z]" in err, err
    assert (
        main(["drive", str(b), "--twin", "--duration", "1", "--json", "--task-param", "target_pos_w=[0.2,0.0,0.15]"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["runner"]["policy_runs"] >= 15 and out["sent"] == out["ticks"]  # 30 Hz for 1 s of wall clock, or fewer


class _LinkLostRobot(FakeJointRobot):
    """Reads fail from the 20th on: the link's error is the drive loop's, not the runner's."""

    def _read(self):
        self.reads = getattr(self, "reads", 0) + 1
        if self.reads >= 20:
            raise HardwareError("fake: no new state for 0.1 s")
        return super()._read()


def _fake_driver(monkeypatch, robot_cls):
    import contextlib

    import simreal.hardware.drivers as drivers

    @contextlib.contextmanager
    def open_robot(name, robot, settings, twin=False, bag=None):
        with robot_cls(bundles.joint_robot_spec()) as r:
            yield r

    monkeypatch.setattr(drivers, "open_robot", open_robot)
    monkeypatch.setattr(drivers, "default_driver", lambda robot, name: "fake")


def test_drive_json_and_text_report_the_same_errors_from_one_source(tmp_path, capsys, monkeypatch):
    """The text said `last error: no new LowState on rt/lowstate for 0.1 s` (the drive loop's),
    the JSON's last_error was the runner's own, empty; now one dict makes both: the loop's at the
    top, the runner's under `runner`, as deploy run --json has it, and the text prints each."""
    import json

    from simreal.cli import main

    _fake_driver(monkeypatch, _LinkLostRobot)
    b = bundles.make_joint_bundle(tmp_path / "b")
    assert main(["drive", str(b), "--duration", "1", "--json"]) == 1  # the watchdog took over
    out = json.loads(capsys.readouterr().out)
    assert out["last_error"] == "fake: no new state for 0.1 s" and out["read_errors"] > 0
    assert out["runner"]["ticks"] == out["ticks"] and out["runner"]["safety"]["watchdog_trips"] == 1
    assert main(["drive", str(b), "--duration", "1"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "last error (robot link): fake: no new state for 0.1 s" in lines, lines
    assert not any("last error (runner)" in line for line in lines)  # the runner's is empty: said in neither
    assert lines[0].endswith(" safety faults") and "last error" not in lines[0], lines[0]


def test_drive_says_what_runs_and_how_it_goes_while_it_runs(tmp_path, capsys, monkeypatch):
    """Without --duration drive printed nothing until Ctrl-C (600 s of silence): a banner names
    the run and its stop, and a status line comes every 2 s."""
    from simreal.cli import main

    _fake_driver(monkeypatch, FakeJointRobot)
    # this loop runs on the wall clock: a 1 s watchdog, so a stall of the loaded CI machine (80 ms
    # tripped the default 0.1 s one) is not what this test is about
    b = bundles.make_joint_bundle(tmp_path / "b")
    assert main(["drive", str(b), "--duration", "4.5", "--deploy-set", "watchdog.timeout_s=1.0"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("simreal drive: ") and "for 4.5 s (Ctrl-C stops it sooner)" in err[0], err
    status = [line for line in err if line.startswith("drive ")]
    assert len(status) == 2 and all(" Hz | safety running" in line for line in status), err


def test_the_keyboard_banner_names_the_keys_that_steer():
    """drive --teleop keyboard showed no keys; the banner's keys are the ones VelocityCommand reads."""
    import re

    from simreal.hardware.drive_status import banner
    from simreal.hardware.teleop.devices import KEY_AXES
    from simreal.hardware.teleop.teleoperator import DeviceInput, VelocityCommand

    text = banner("walk", "unitree", True, 50.0, None, "keyboard")
    assert "until Ctrl-C" in text and "keys (held; none: stand still): " in text, text
    pairs = re.findall(r"(\w)/(\w) ([\w ]+?)/(\w+)", text.splitlines()[1])
    assert [p[2] for p in pairs] == ["forward", "left", "turn left"], pairs

    class Held:  # one key held
        def __init__(self, key):
            axis, sign = KEY_AXES[key.encode()]
            self.axes = np.zeros(6)
            self.axes[axis] = sign

        def read(self):
            return DeviceInput(self.axes, ())

    for i, (plus, minus, _, _) in enumerate(pairs):
        up = VelocityCommand(Held(plus), [(-1.0, 1.0)] * 3)()["command"]
        down = VelocityCommand(Held(minus), [(-1.0, 1.0)] * 3)()["command"]
        assert up[i] == 1.0 and down[i] == -1.0 and np.count_nonzero(up) == 1, (plus, minus, up, down)


def test_ctrl_c_ends_drive_with_its_report(tmp_path):
    """Ctrl-C once ended `drive` with one line and no report; now the loop stops at its next tick,
    the safe command goes out, and the same report as at a normal end is printed, exit 130."""
    import json
    import signal
    import subprocess
    import sys
    import time

    b = bundles.make_joint_mlp_bundle(tmp_path / "b", "so100")
    proc = subprocess.Popen(
        [sys.executable, "-m", "simreal.cli", "drive", str(b), "--twin", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        err = ""
        while "waiting for the robot's state" not in err and time.monotonic() < deadline:
            err += proc.stderr.readline()
        time.sleep(2.0)  # driving
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err + rest
    report = json.loads(out)
    assert report["ticks"] >= 20 and report["runner"]["policy_runs"] >= 20 and report["final_mode"] == "estop"
    assert "stopped by SIGINT; the safe command was sent" in rest


def test_drive_cli_runs_a_bundle_on_the_so100_twin(tmp_path):
    """`simreal drive BUNDLE --twin`: the runner drives the SO-100 over the Feetech protocol."""
    import json
    import subprocess
    import sys

    b = bundles.make_joint_mlp_bundle(tmp_path / "b", "so100")
    r = subprocess.run(
        [sys.executable, "-m", "simreal.cli", "drive", str(b), "--twin", "--duration", "1.5", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ticks"] >= 30 and out["sent"] == out["ticks"] and out["read_errors"] == 0
    assert (
        out["runner"]["policy_runs"] >= 30 and out["runner"]["safety"]["faults"] == 0 and out["final_mode"] == "estop"
    )


def test_drive_cli_on_the_g1_twin_records_the_dds_session(tmp_path):
    """`simreal drive BUNDLE --twin --bag DIR` on a Unitree G1: the runner's commands and the
    twin's states, as ROS 2 names them, in a rosbag2 that rosbags reads back."""
    import json
    import subprocess
    import sys

    from simreal.deploy.bag import read_bag_counts

    b = bundles.make_joint_mlp_bundle(tmp_path / "b", "g1")
    bag = tmp_path / "bag"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "simreal.cli",
            "drive",
            str(b),
            "--twin",
            "--duration",
            "1",
            "--bag",
            str(bag),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    counts = read_bag_counts(bag)
    assert set(counts) == {"/lowcmd", "/lowstate"}
    assert counts["/lowcmd"] >= out["sent"] + 1 >= 30  # every tick's command and the safe one at disconnect
    assert counts["/lowstate"] >= out["runner"]["state_msgs"]


def test_drive_cli_on_the_g1_twin_stands_it_on_the_floor_and_says_why_it_faulted(tmp_path):
    """The twin lets the G1 go at the hand-over (it once kept it on a gantry for the whole run,
    so nothing could fall): a policy that holds the home pose cannot balance it, the envelope
    trips on its tilt, and the summary says so (it once read "1 safety faults (last: shutdown)")."""
    import subprocess
    import sys

    b = bundles.make_holding_bundle(tmp_path / "b", "g1")
    r = subprocess.run(
        [sys.executable, "-m", "simreal.cli", "drive", str(b), "--twin", "--duration", "2.5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].endswith("; 1 safety faults"), lines
    trip = next(line for line in lines if line.startswith("envelope"))
    assert "s after the hand-over: tilt" in trip and trip.endswith("safe command latched"), lines


def test_tick_times_keep_fixed_memory_and_a_quantile_within_one_bin():
    from simreal.hardware.drive import TickTimes

    times = TickTimes()
    assert times.quantile(0.99) == 0.0
    rng = np.random.default_rng(0)
    samples = np.concatenate([rng.lognormal(np.log(300e-6), 0.4, 20_000), [0.0, 25.0]])  # and two off the ends
    size = times.counts.nbytes
    for s in samples:
        times.add(float(s))
    assert times.counts.nbytes == size and times.counts.sum() == len(samples)
    for q in (0.5, 0.99):
        exact = float(np.quantile(samples, q))
        assert exact <= times.quantile(q) <= exact * 10 ** (1 / TickTimes.BINS_PER_DECADE) * 1.0001


def test_a_teleoperated_velocity_command_reaches_the_policy_within_its_trained_range(tmp_path):
    """`drive(..., task_input=VelocityCommand(device, ranges))`: the device's axes become the
    `command` the policy observes, full deflection at the ends of the trained range."""
    from fixtures.scripted_device import ScriptedDevice
    from simreal.bundle import write_bundle_yaml
    from simreal.hardware.teleop.teleoperator import DeviceInput
    from simreal.yaml_io import load_yaml

    spec = bundles.joint_robot_spec()
    terms = [("joint_pos_rel", 2), ("joint_vel", 2), ("command", 3), ("last_action", 2)]
    d = bundles.write_bundle(
        tmp_path / "walk",
        spec=spec,
        model=bundles.mlp_onnx(9, 2, (8,)),
        task="walk-like",
        obs_terms=terms,
        mode="joint_position",
        names=spec.actuator_names,
        units=["rad"] * 2,
        scale=[0.5, 0.5],
        offset=[a.default for a in spec.actuators],
        low=[a.range[0] for a in spec.actuators],
        high=[a.range[1] for a in spec.actuators],
        control_rate_hz=spec.control_rate_hz,
    )
    raw = load_yaml(d / "bundle.yaml")
    raw["task_config"] = {"cmd_vx_m_s": [-0.5, 1.5], "cmd_vy_m_s": [-0.2, 0.2], "cmd_yaw_rad_s": [-1.0, 1.0]}
    write_bundle_yaml(d, raw)
    from simreal.cli.drive import velocity_teleop

    stick = ScriptedDevice()
    steer = velocity_teleop(stick, load_bundle(d))
    seen = []
    clock = SimClock()
    for axes, want in (
        ([-1.0, 1.0, 0, 0, 0, 0.5], [1.5, 0.2, 0.5]),  # full forward, full left, half yaw
        ([0.5, -1.0, 0, 0, 0, 0.0], [-0.5, -0.1, 0.0]),
    ):  # full back, half right
        stick.now = DeviceInput(np.array(axes))
        seen.clear()
        runner = PolicyRunner(
            load_bundle(d), spec=spec, policy=lambda obs: (seen.append(obs[4:7].copy()), np.zeros(2))[1]
        )
        with FakeJointRobot(spec, clock=clock) as robot:
            report = drive(robot, runner, duration_s=0.5, clock=clock, sleep=clock.sleep, task_input=steer)
        assert len(seen) > 10 and np.allclose(seen, want), (seen[-1], want)
        # the report says what was commanded (drive --json), so a run shows whether a key was taken
        assert np.allclose(report.task_input_last["command"], want)
        assert np.allclose(report.task_input_peak["command"], want)
    with pytest.raises(ConfigError, match="'--teleop'.*observes no velocity command"):
        velocity_teleop(stick, load_bundle(bundles.make_joint_bundle(tmp_path / "hold")))
