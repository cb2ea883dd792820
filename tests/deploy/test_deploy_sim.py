"""Sim-in-the-loop, end to end: `simreal deploy sim` runs a real-time MuJoCo quadrotor in one
process and the policy runner in another, over DDS on loopback, and records both sides."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("cyclonedds")
pytest.importorskip("mujoco")
pytest.importorskip("rosbags")

from fixtures import bundles as T  # noqa: E402
from simreal.deploy.bag import read_bag_counts  # noqa: E402


@pytest.mark.parametrize("gl", ["", "egl"])
def test_hover_rehearsal_with_latency_and_drops(tmp_path, monkeypatch, gl):
    """With ``MUJOCO_GL=egl`` (the headless setting users export for ``simreal play``) every
    rehearsal once failed: a 0.12-0.19 s full garbage collection of the robot process's larger heap
    came in the middle of the run, the state stopped for that long and the watchdog cut the thrust."""
    if gl:
        monkeypatch.setenv("MUJOCO_GL", gl)
    else:
        monkeypatch.delenv("MUJOCO_GL", raising=False)
    # when a full collection falls depends on how much each process allocated and kept (with EGL:
    # at about 8 s; without, after the run): here one comes every 1.5 s in both processes, each one
    # walking the whole heap unless the loop froze it. The thread ends before the interpreter
    # finalizes: a daemon thread still collecting then is ended by pthread_exit inside whatever C++
    # destructor the collection ran, and the process aborted ("FATAL: exception not rethrown", -6)
    (tmp_path / "gc").mkdir()
    (tmp_path / "gc" / "sitecustomize.py").write_text(
        "import atexit, gc, threading\n"
        "_stop = threading.Event()\n"
        "def _collect():\n"
        "    while not _stop.wait(1.5):\n"
        "        gc.collect()\n"
        "_thread = threading.Thread(target=_collect, daemon=True)\n"
        "_thread.start()\n"
        "def _join():\n"
        "    _stop.set()\n"
        "    _thread.join()\n"
        "atexit.register(_join)\n"
    )
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "gc"), os.environ.get("PYTHONPATH")]))
    )
    # with its task recorded, as an exported bundle: the robot process builds the training env (JAX,
    # the task), whose heap made the collection that long
    bundle = T.make_pd_hover_bundle(
        tmp_path / "bundle", task_config={"action_mode": "rotor_thrust", "action_history_steps": 0}
    )
    # a host the other test worker kept busy makes a rehearsal INVALID (a loop woke later than the
    # budget: 50 ms against 45 seen under the full suite), not failed: that one runs once more
    for attempt in range(2):
        rec = tmp_path / f"bags{attempt}"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "simreal.cli",
                "deploy",
                "sim",
                str(bundle),
                "--duration",
                "10",
                "--latency-ms",
                "10",
                "--drop",
                "0.05",
                "--json",
                "--record",
                str(rec),
                "--domain-id",
                str(T.random_domain_id()),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.stdout.strip(), (proc.returncode, proc.stderr[-2000:])  # a report, or why there is none
        report = json.loads(proc.stdout)
        if report["host"]["valid"]:
            break
    hover = report["robot"]["hover"]
    assert proc.returncode == 0 and report["passed"], (hover, report["host"], proc.stderr[-2000:])
    assert report["host"]["valid"] and report["host"]["robot_late_s"] < report["host"]["budget_s"], report["host"]
    assert hover["max_error_after_settle_m"] < 0.10 and hover["flight_s"] >= 9.5
    robot = report["robot"]
    assert 0.02 < robot["states_dropped"] / robot["states_published"] < 0.09  # ~5 % injected each way
    assert 0.02 < robot["commands_dropped"] / robot["commands_received"] < 0.09
    # the rehearsal ends with the commanded stop, not a watchdog trip when the robot's state stops
    safety = report["runner"]["safety"]
    assert safety["watchdog_trips"] == 0 and safety["mode"] == "estop", safety
    assert safety["last_reason"] == "end of the rehearsal" and report["runner"]["envelope_trip_s"] is None
    # both sides recorded; rosbags reads every message back
    robot_bag = read_bag_counts(rec / "robot")
    # the bag holds what went on the wire: made, less the dropped and those still inside their
    # latency when the run ended (one of them once failed this count)
    sent = robot["states_published"] - robot["states_dropped"] - robot["states_in_flight_at_end"]
    assert robot_bag["/cf/odom"] == sent and robot["states_in_flight_at_end"] <= 2
    assert robot_bag["/fmu/in/actuator_motors"] == robot["commands_received"]
    runner_bag = read_bag_counts(rec / "runner")
    assert runner_bag["/cf/odom"] == report["runner"]["state_msgs"]
    assert runner_bag["/fmu/in/actuator_motors"] >= robot["commands_received"]


def test_ctrl_c_stops_the_rehearsal_and_its_robot_process_without_a_traceback(tmp_path):
    import os
    import signal
    import time

    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")
    domain = str(T.random_domain_id())
    robot = ["pgrep", "-f", f"simreal.deploy.sim_loop.*--domain-id {domain} "]
    # its own process group, which a terminal's Ctrl-C reaches as a whole
    rec = tmp_path / "bags"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simreal.cli",
            "deploy",
            "sim",
            str(bundle),
            "--duration",
            "60",
            "--domain-id",
            domain,
            "--record",
            str(rec),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while subprocess.run(robot, capture_output=True).returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3.0)  # the robot process up and flying
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert "stopped by SIGINT before the end of the rehearsal" in err and out == ""
    assert subprocess.run(robot, capture_output=True).returncode == 1  # no robot process left
    # both sides' recordings of the seconds before are kept, closed and readable (the robot's was 0 bytes)
    assert read_bag_counts(rec / "robot")["/cf/odom"] > 50 and read_bag_counts(rec / "runner")["/cf/odom"] > 50


def test_external_rehearsal_fails_when_the_controller_dies_halfway(tmp_path):
    """The robot side alone (--external) with a controller killed (kill -9: no safe command)
    halfway through: a controller that went quiet is a failed rehearsal, however it flew."""
    import time

    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")
    domain = str(T.random_domain_id())
    robot = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simreal.cli",
            "deploy",
            "sim",
            str(bundle),
            "--external",
            "--duration",
            "10",
            "--domain-id",
            domain,
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runner = subprocess.Popen(
        [sys.executable, "-m", "simreal.cli", "deploy", "run", str(bundle), "--domain-id", domain, "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(8.0)  # start-up (a few seconds), then flight
    runner.kill()
    runner.wait()
    out, err = robot.communicate(timeout=120)
    report = json.loads(out)
    gap = report["robot"]["commands"]
    assert robot.returncode == 1 and not report["passed"] and report["robot"]["handover"], err[-2000:]
    assert gap["max_gap_s"] > 1.0 and gap["gap_ends_s"] >= 9.9, gap


def _no_robot_process(monkeypatch) -> None:
    """Fail the test if `deploy sim` starts its robot process."""
    import subprocess as sp

    def spawned(*a, **k):
        raise AssertionError(f"a robot process was started: {a}")

    monkeypatch.setattr(sp, "Popen", spawned)


@pytest.mark.parametrize(
    "flag, value, says",
    [
        ("--drop", "1.5", "--drop: must be <= 1.0, got 1.5"),
        ("--duration", "-1", "--duration: must be >= 0.1, got -1.0"),
        ("--latency-ms", "-5", "--latency-ms: must be >= 0.0, got -5.0"),
        ("--noise", "-1", "--noise: must be >= 0.0, got -1.0"),
        ("--startup-timeout", "0", "--startup-timeout: must be >= 1.0, got 0.0"),
        ("--state-outage", "1:90", "--state-outage: must be <= 60.0, got 90.0"),
        ("--state-rate-hz", "-1", "--state-rate-hz: must be >= 0.0, got -1.0"),
    ],
)
def test_bad_rehearsal_flags_are_one_line_naming_the_flag(tmp_path, monkeypatch, capsys, flag, value, says):
    """Once the robot process's traceback ending in `config key 'sim.drop'`, then 'the simulated
    robot process failed': now refused in the parent, before any process starts."""
    from simreal.cli import main

    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")
    _no_robot_process(monkeypatch)
    assert main(["deploy", "sim", str(bundle), flag, value]) == 2
    assert capsys.readouterr().err.strip() == f"simreal deploy: error: {says}"


def test_the_state_rate_flag_sets_the_rehearsals_state_rate():
    """`--state-rate-hz 500` (a Unitree humanoid's rt/lowstate) reaches the robot process's
    config; 0, the default, publishes at the control rate."""
    import argparse

    from simreal.cli import deploy

    parser = argparse.ArgumentParser()
    deploy.add_arguments(parser)
    args = parser.parse_args(["sim", "b", "--state-rate-hz", "500"])
    assert deploy._sim_config(args).state_rate_hz == 500.0
    assert deploy._sim_config(parser.parse_args(["sim", "b"])).state_rate_hz == 0.0


@pytest.mark.parametrize("external", [False, True])
def test_record_into_an_earlier_recording_is_refused_before_starting(tmp_path, monkeypatch, capsys, external):
    """`--record DIR` where DIR holds an earlier rehearsal's bags: one line naming the bag, and no
    robot process (once: that line, then the child's traceback about its vanished temp folder)."""
    from simreal.cli import main

    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")
    (tmp_path / "bags" / "robot").mkdir(parents=True)
    _no_robot_process(monkeypatch)
    argv = ["deploy", "sim", str(bundle), "--record", str(tmp_path / "bags")] + (["--external"] if external else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"simreal deploy: error: {tmp_path / 'bags' / 'robot'}: bag folder exists already (rosbag2 bags "
        "are never overwritten); give --record a new folder"
    ), err


# -- the ground ends a flight (the quadrotor model has no contacts) -------------------------------


def _falling_rehearsal():
    """A quadrotor rehearsal's samples: on the target until 3 s, then free fall (z = 1 - g/2
    (t-3)^2 reaches the ground at 3.45 s and, with no contacts, -39 m by 6 s)."""
    import types

    import numpy as np

    from simreal.deploy.sim_loop import Rehearsal

    t = np.round(np.arange(0.0, 6.0 + 1e-9, 0.01), 2)
    z = np.where(t < 3.0, 1.0, 1.0 - 4.905 * (t - 3.0) ** 2)
    vz = np.where(t < 3.0, 0.0, -9.81 * (t - 3.0))
    samples = [
        (ti, {"pos_w": np.array([0.0, 0.0, zi]), "lin_vel_w": np.array([0.0, 0.0, vi])}) for ti, zi, vi in zip(t, z, vz)
    ]
    from simreal.robot_spec import load_robot_spec

    robot = types.SimpleNamespace(spec=load_robot_spec("crazyflie2"), time_s=6.0, diverged_s=None)
    return Rehearsal(
        bundle=types.SimpleNamespace(reference=None, task_config={}),
        robot=robot,
        start=None,
        target=np.array([0.0, 0.0, 1.0]),
        env=None,
        deployment=None,
        samples=samples,
    )


def test_a_fall_is_on_the_ground_not_a_hover_error_of_metres():
    """Once 'hover max error 23.95 m' after a touchdown: now the hover error is measured until
    the base reaches z <= 0, and the check fails because it is on the ground. The envelope is read
    up to the ground too: the model has no ground, and falling through the fence's floor after a
    landing's touchdown once read as leaving the envelope."""
    from simreal.cli.deploy import _sim_lines
    from simreal.deploy.config import EnvelopeConfig
    from simreal.deploy.sim_loop import SimLoopConfig

    fence = EnvelopeConfig(geofence_min_m=(-3.0, -3.0, -0.5), geofence_max_m=(3.0, 3.0, 3.0))
    report = _falling_rehearsal().report(SimLoopConfig(duration_s=6.0), fence, None)  # env None: no gate
    hover = report["hover"]
    assert report["on_ground_s"] == pytest.approx(3.46) and report["geofence"]["ground_s"] == pytest.approx(3.46)
    assert not hover["passed"] and hover["reason"] == "on the ground after 3.46 s", hover
    assert hover["flight_s"] == pytest.approx(3.46) and hover["max_error_after_settle_m"] < 1.05, hover  # not 39 m
    assert report["geofence"]["ground_speed_m_s"] == pytest.approx(9.81 * 0.46)
    robot = {"robot": "crazyflie2", "handover": True, **report}
    lines = _sim_lines({"domain_id": 7, "passed": False}, robot)
    assert "ground     on the ground at 3.46 s after the hand-over, 4.51 m/s" in lines, lines
    assert any(line.startswith("hover") and line.endswith("-> FAIL: on the ground after 3.46 s") for line in lines)
    # z = 1 - g/2 (t - 3)^2 < -0.5 from t = 3.553 s, after the ground (3.46 s): not an envelope exit
    assert report["envelope"] == {"left_s": None, "reason": ""}
    assert not any(line.startswith("state ") for line in lines), lines


def test_a_hover_that_stays_up_has_no_ground_time():
    import numpy as np

    from simreal.deploy.sim_loop import SimLoopConfig, hover_metrics

    errors = [(0.01 * k, 0.02) for k in range(601)]
    hover = hover_metrics(
        errors, np.array([0.0, 0.0, 1.0]), SimLoopConfig(duration_s=6.0, settle_s=2.0, success_radius_m=0.1)
    )
    assert hover["passed"] and "reason" not in hover


def test_a_cut_thrust_rehearsal_ends_on_the_ground(tmp_path):
    """The real model in simulated time: a random policy trips the fence, thrust is cut, the
    vehicle hits the ground; the report says when, and the hover error stops there (metres
    below the floor once)."""
    from simreal.bundle import load_bundle
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    bundle = load_bundle(
        T.make_mlp_bundle(tmp_path / "mlp", hidden=(32, 32), control_rate_hz=100.0, target_pos_w=(0.0, 0.0, 2.0))
    )
    fence = {"geofence_min_m": [-1.0, -1.0, 0.0], "geofence_max_m": [1.0, 1.0, 3.0]}
    r = run_offline(bundle, SimLoopConfig(duration_s=6.0), overrides={"envelope": fence, "fault": {"response": "safe"}})
    assert r["on_ground_s"] is not None and r["on_ground_s"] < 3.0, r["on_ground_s"]
    assert r["hover"]["reason"] == f"on the ground after {r['on_ground_s']:.2f} s" and not r["passed"]
    assert r["hover"]["flight_s"] == r["on_ground_s"] and r["hover"]["final_error_m"] < 3.0, r["hover"]


def test_the_robot_process_ignores_a_simreal_folder_in_the_working_directory(tmp_path):
    """``python -m`` puts the working directory first on sys.path: run from a folder holding
    another ``simreal`` (an older checkout), the rehearsal's robot process imported that one and
    died in a traceback. It must import the installed package wherever it is started."""
    from simreal.cli.deploy import ROBOT_PROCESS

    (tmp_path / "simreal").mkdir()
    (tmp_path / "simreal" / "__init__.py").write_text("raise ImportError('the wrong simreal')\n")
    r = subprocess.run([*ROBOT_PROCESS, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--domain-id" in r.stdout, r.stderr[-2000:]


def test_a_humanoid_that_falls_fails_even_with_the_tilt_bound_switched_off(tmp_path):
    """docs/deploy.md: a robot that falls over fails the rehearsal whoever drives it. A G1 holding
    its home pose on its own PD gains tips over; with the envelope's tilt bound off (`.inf`) the
    envelope cannot see it, and the sim-to-sim gate would not either (the training simulator falls
    too): the fall itself fails it."""
    import math

    from simreal.bundle import load_bundle
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    bundle = load_bundle(T.make_holding_bundle(tmp_path / "g1", "g1"))
    report = run_offline(bundle, SimLoopConfig(duration_s=3.0), overrides={"envelope": {"max_tilt_rad": math.inf}})
    assert report["envelope"]["left_s"] is None, report["envelope"]
    assert report["fall_s"] is not None and 0.5 < report["fall_s"] < 3.0, report.get("fall_s")
    assert not report["passed"]
    arm = run_offline(load_bundle(T.make_holding_bundle(tmp_path / "so100", "so100")), SimLoopConfig(duration_s=1.0))
    assert "fall_s" not in arm and arm["passed"]  # an arm on its base has no fall to fail


def test_a_diverged_simulation_stops_the_rehearsal_and_fails_it(tmp_path, monkeypatch):
    """An arm holding its pose passes; with its state made NaN 0.5 s in, MuJoCo resets it to the
    model's start and would step on from there (a teleport the report could not see). The
    rehearsal stops at that step, fails, and says when."""
    from simreal.bundle import load_bundle
    from simreal.cli.deploy import _sim_lines
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline
    from simreal.deploy.sim_robot import SimRobot

    bundle = load_bundle(T.make_holding_bundle(tmp_path / "so100", "so100"))
    healthy = run_offline(bundle, SimLoopConfig(duration_s=1.0))
    assert healthy["passed"] and healthy["diverged_s"] is None
    step = SimRobot.step

    def blow_up_at_half_a_second(robot):
        if 0.5 <= robot.d.time < 0.5 + robot.m.opt.timestep:
            robot.d.qvel[:] = np.nan
        step(robot)

    monkeypatch.chdir(tmp_path)  # MuJoCo's warning writes MUJOCO_LOG.TXT where it runs
    monkeypatch.setattr(SimRobot, "step", blow_up_at_half_a_second)
    r = run_offline(bundle, SimLoopConfig(duration_s=1.0))
    assert r["diverged_s"] == pytest.approx(0.5, abs=0.01) and not r["passed"]
    assert r["sim_time_s"] < 0.51 + 0.01, r["sim_time_s"]  # stopped there, not replayed from the reset
    lines = _sim_lines({"domain_id": 0, "passed": False}, {**r, "handover": True})
    assert any(line.startswith("physics    the simulation diverged at 0.50") for line in lines), lines


def test_a_non_finite_policy_fails_the_gate_in_one_line_and_leaves_no_mujoco_log(tmp_path, monkeypatch):
    """The gate's reference once fed the policy's NaN to MuJoCo, which went on with NaN and wrote
    MUJOCO_LOG.TXT into the user's working directory; now the reference stops at the first
    non-finite action and the gate says so."""
    import yaml

    from simreal.bundle import load_bundle
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    path = T.make_nan_bundle(tmp_path / "nan")
    data = yaml.safe_load((path / "bundle.yaml").read_text())  # recorded as trained: the task's env
    data["task_config"] = {"action_mode": "rotor_thrust", "action_history_steps": 0}
    (path / "bundle.yaml").write_text(yaml.safe_dump(data))
    bundle = load_bundle(path)
    monkeypatch.chdir(tmp_path)
    report = run_offline(bundle, SimLoopConfig(duration_s=1.0, noise_scale=0.0, start_offset_m=(-0.3, 0.0, 0.0)))
    assert report["gate"]["passed"] is False and report["gate"]["value"] is None
    assert report["gate"]["reason"].startswith("the policy's action is not finite in the training simulator at ")
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
