"""The policy runner over real DDS on loopback: `simreal deploy run` in its own process,
a fake robot here. Watchdog timing, NaN filtering, e-stop, recording."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("cyclonedds")
pytest.importorskip("rosbags")

from fixtures import bundles as T  # noqa: E402


@pytest.fixture
def domain() -> int:
    return T.random_domain_id()


def start_runner(bundle, domain: int, *extra: str, duration: float = 6.0) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "simreal.cli",
        "deploy",
        "run",
        str(bundle),
        "--transport",
        "dds",
        "--domain-id",
        str(domain),
        "--duration",
        str(duration),
        "--json",
        *extra,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, code: int) -> dict:
    """The runner's report once it exits with ``code`` (1: the safety layer took over)."""
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    return json.loads(out)


def test_watchdog_safe_command_within_timeout_and_bag(tmp_path, domain):
    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")
    bag = tmp_path / "session_bag"
    timeout_s = 0.1
    proc = start_runner(
        bundle,
        domain,
        "--record",
        str(bag),
        "--set",
        f"watchdog.timeout_s={timeout_s}",
        "--set",
        "start.ramp_s=0.1",
        duration=4.5,
    )
    robot = T.FakeRobot(domain)
    try:
        assert robot.wait_for_runner(), "runner did not come up"
        robot.spin(1.5, rate_hz=100.0)  # hover at the target: the runner flies
        t_stop_ns = time.time_ns()  # ... then the state stream stops
        robot.spin(1.0)
        report = finish(proc, 1)
        robot.spin(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
        robot.close()
    cmds = [(t_ns, m) for _, t_ns, m in robot.commands]
    flying = [m for t, m in cmds if t < t_stop_ns]
    assert flying and np.all(np.array(flying[-1].control[:4]) > 0.3)  # about hover thrust (0.52 of max)
    after = [(m.timestamp * 1000, m) for t, m in cmds if t >= t_stop_ns]
    first_safe = next(t for t, m in after if max(m.control) == 0.0)
    # the runner stamps ActuatorMotors.timestamp [us] when it publishes. A quadrotor is held at
    # hover thrust (the blind hold, watchdog.hold_s 0.5 s, waiting for state to land with), and
    # the safe (zero thrust) command is on the wire within timeout + hold of the last state message
    last_state_ns = t_stop_ns
    hold_s = 0.5
    held = [m for t, m in after if t < first_safe]
    assert held and np.allclose(held[-1].control[:4], 0.032 * 9.81 / 4 / 0.15, atol=1e-4)  # m g / 4 of 0.15 N
    # (the hold counts from the runner's last tick with fresh state, at most a period before t_stop)
    assert (hold_s - 0.02) * 1e9 <= first_safe - last_state_ns <= (timeout_s + hold_s) * 1e9, (
        first_safe - last_state_ns
    ) / 1e6
    assert all(max(m.control) == 0.0 for t, m in after if t >= first_safe)  # and stays (latched)
    assert report["runner"]["safety"]["watchdog_trips"] == 1 and report["runner"]["safety"]["mode"] == "estop"
    # why it exits 1, though the end of the run overwrote the last reason (the text report's line)
    from simreal.deploy.runner import runner_lines

    assert report["runner"]["safety"]["first_takeover"] == "watchdog: state stale"
    assert "took over  0 faults, 1 watchdog trips; the first: watchdog: state stale" in runner_lines(
        {"ticks": report["ticks"], **report["runner"]}
    )
    # the bag: read back by rosbags, one message per recorded send/receive
    from simreal.deploy.bag import read_bag_counts

    counts = read_bag_counts(bag)
    assert counts == report["recorded"]
    assert counts["/cf/odom"] == report["runner"]["state_msgs"] >= 0.95 * robot.sent_states
    assert counts["/fmu/in/actuator_motors"] == counts["/fmu/in/offboard_control_mode"] >= 150
    assert (bag / "metadata.yaml").is_file() and list(bag.glob("*.mcap"))


def test_nan_actions_never_reach_the_wire(tmp_path, domain):
    bundle = T.make_nan_bundle(tmp_path / "bundle")
    proc = start_runner(bundle, domain, "--set", "start.ramp_s=0.0", duration=4.5)
    robot = T.FakeRobot(domain)
    try:
        assert robot.wait_for_runner()
        for k in range(150):  # NaN on every other tick: held, no fault
            robot.publish_state(pos_w=(-0.01 if k % 2 else 0.01, 0.0, 1.0))  # pos_error_w[0] = -x
            robot.spin(0.01)
        robot.spin(0.5, rate_hz=100.0, pos_w=(-0.5, 0.0, 1.0))  # NaN on every tick: fault, zero thrust
        report = finish(proc, 1)
        robot.spin(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
        robot.close()
    values = np.array([m.control for _, _, m in robot.commands], dtype=np.float64)
    assert len(values) > 100 and np.all(np.isfinite(values))
    ok = (0.075 + 0.075 * 0.1) / 0.15  # a = 0.1 as ActuatorMotors.control
    assert np.any(np.isclose(values[:, 0], ok))  # the finite actions did get through
    assert np.all(values[-10:] == 0.0)  # and the fault stopped the rotors
    safety = report["runner"]["safety"]
    # about 75 NaNs in the first phase at 100 Hz; fewer ticks when the machine is loaded (43 seen)
    assert report["runner"]["nonfinite_actions"] >= 20 and safety["faults"] == 1


def test_estop_and_state_triggered_loop(tmp_path, domain):
    """In-process DdsPolicyNode with trigger=state: one command per state message; e-stop latches."""
    from simreal.bundle import load_bundle
    from simreal.deploy.runner import PolicyRunner

    runner = PolicyRunner(
        load_bundle(T.make_pd_hover_bundle(tmp_path / "b")), overrides={"trigger": "state", "start": {"ramp_s": 0.0}}
    )
    robot = T.FakeRobot(domain)
    try:
        with T.node_in_thread(runner, domain):
            assert robot.wait_for_runner()
            time.sleep(0.2)
            n0 = len(robot.commands)
            for _ in range(20):
                robot.publish_state()
                robot.spin(0.02)
            deadline = time.monotonic() + 1.0  # the last replies, on a loaded CI core late
            while len(robot.commands) - n0 < 20 and time.monotonic() < deadline:
                robot.spin(0.01)
            n_state_cmds = len(robot.commands) - n0
            robot.estop(True)
            robot.spin(0.2, rate_hz=50.0)
            estopped = [m for _, _, m in robot.commands[-3:]]
    finally:
        robot.close()
    assert 20 <= n_state_cmds <= 20 + 2  # one per state message (timer ticks only when going stale)
    assert all(max(m.control) == 0.0 for m in estopped) and runner.safety.mode == "estop"
    assert all(math.isfinite(v) for _, _, m in robot.commands for v in m.control)


def test_a_tests_random_domain_is_one_this_process_has_not_configured(monkeypatch):
    """Cyclone keeps a domain's first configuration for the process: a test given a domain an
    earlier test had opened on loopback could not get a network card's (or Cyclone's own) there."""
    import simreal.deploy.transport_dds as dds

    dds.domain(232, "lo")
    dds.domain(231, None)  # Cyclone's own configuration is fixed too
    assert {231, 232} <= dds.configured_domains()
    monkeypatch.setattr(dds, "configured_domains", lambda: set(range(1, 99)))
    assert {T.random_domain_id() for _ in range(20)} == {99}
