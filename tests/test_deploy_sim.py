"""Sim-in-the-loop, end to end: `simreal deploy sim` runs a real-time MuJoCo quadrotor in one
process and the policy runner in another, over DDS on loopback, and records both sides."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("cyclonedds")
pytest.importorskip("mujoco")
pytest.importorskip("rosbags")

from fixtures import bundles as T  # noqa: E402
from simreal.deploy.bag import read_bag_counts  # noqa: E402


def test_hover_rehearsal_with_latency_and_drops(tmp_path):
    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")
    rec = tmp_path / "bags"
    proc = subprocess.run(
        [sys.executable, "-m", "simreal.cli", "deploy", "sim", str(bundle), "--duration", "10", "--latency-ms", "10",
         "--drop", "0.05", "--json", "--record", str(rec), "--domain-id", str(T.random_domain_id())],
        capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout)
    hover = report["robot"]["hover"]
    assert proc.returncode == 0 and report["passed"], (hover, proc.stderr[-2000:])
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
    assert robot_bag["/cf/odom"] == robot["states_published"] - robot["states_dropped"]
    assert robot_bag["/fmu/in/actuator_motors"] == robot["commands_received"]
    runner_bag = read_bag_counts(rec / "runner")
    assert runner_bag["/cf/odom"] == report["runner"]["state_msgs"]
    assert runner_bag["/fmu/in/actuator_motors"] >= robot["commands_received"]
