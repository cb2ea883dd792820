"""What a control loop needs from its host (simreal/deploy/realtime.py), and how a rehearsal tells a late
host from a bad policy (``host_deadlines``)."""

from __future__ import annotations

import gc
import threading
import time
from types import SimpleNamespace

import pytest

from simreal.deploy.realtime import frozen_heap


def _full_collection_s() -> float:
    t = time.perf_counter()
    gc.collect()
    return time.perf_counter() - t


def test_a_full_collection_inside_a_frozen_heap_skips_what_existed_before():
    """A rehearsal's robot process holds 200-250k tracked objects; one full collection walked them
    all in 0.13-0.15 s, longer than the watchdog's 0.1 s. Inside ``frozen_heap`` it walks only what
    the loop allocated."""
    heap = [[i] for i in range(400_000)]  # a process after importing MuJoCo, JAX and a training env
    outside = min(_full_collection_s() for _ in range(3))
    with frozen_heap() as frozen:
        assert frozen >= len(heap) and gc.get_freeze_count() >= len(heap)
        inside = min(_full_collection_s() for _ in range(3))
    assert gc.get_freeze_count() == 0  # lifted after the loop
    assert inside < 0.2 * outside, (inside, outside)
    del heap


def test_nested_and_concurrent_loops_share_one_freeze():
    """A driver and its twin in one process (``simreal drive --twin``): the freeze holds until the
    last loop ends."""
    entered, release = threading.Event(), threading.Event()

    def twin_loop() -> None:
        with frozen_heap():
            entered.set()
            release.wait(5.0)

    th = threading.Thread(target=twin_loop)
    th.start()
    assert entered.wait(5.0)
    with frozen_heap():
        with frozen_heap():
            pass
        assert gc.get_freeze_count() > 0  # the inner block's end did not lift it
    assert gc.get_freeze_count() > 0  # the twin's loop still runs
    release.set()
    th.join(5.0)
    assert gc.get_freeze_count() == 0


def _cfg(timeout_s: float = 0.1, period_s: float = 0.01) -> SimpleNamespace:
    return SimpleNamespace(watchdog=SimpleNamespace(timeout_s=timeout_s), period_s=period_s)


@pytest.mark.parametrize(
    "robot_lag_s, runner_gap_s, passed, valid, missed",
    [
        (0.003, 0.012, False, True, []),  # an on-time host: a failure is the policy's
        (0.142, 0.012, False, False, ["robot_late_s"]),  # the robot process stalled 142 ms: invalid
        (0.003, 0.140, False, False, ["runner_late_s"]),  # the runner stalled: invalid
        (0.142, 0.140, True, True, ["robot_late_s", "runner_late_s"]),  # a pass despite a late host stays a pass
    ],
)
def test_a_failure_on_a_host_that_missed_its_deadlines_is_invalid(robot_lag_s, runner_gap_s, passed, valid, missed):
    from simreal.cli.deploy import host_deadlines

    node = SimpleNamespace(max_tick_gap_s=runner_gap_s, timer_overruns=3)
    host = host_deadlines({"host": {"max_lag_s": robot_lag_s}}, _cfg(), node, passed)
    assert host["budget_s"] == pytest.approx(0.045)  # half of (timeout - period)
    assert host["missed"] == missed and host["valid"] is valid
    assert host["runner_late_s"] == pytest.approx(runner_gap_s - 0.01)


def test_invalid_is_its_own_verdict_in_the_text_and_the_exit_code():
    from simreal.cli.deploy import INVALID_EXIT, _sim_lines

    robot = {"robot": "crazyflie2", "family": "quadrotor", "handover": True}
    host = {
        "budget_s": 0.045,
        "robot_late_s": 0.142,
        "runner_late_s": 0.002,
        "missed": ["robot_late_s"],
        "valid": False,
    }
    lines = _sim_lines({"domain_id": 7, "passed": False, "host": host}, robot)
    assert (
        lines[-2]
        == "host       latest wake-up robot 142 ms, runner 2 ms (budget 45 ms): this host missed its deadlines"
    )
    assert lines[-1].startswith("result     INVALID: it failed on a host that missed its own deadlines")
    assert INVALID_EXIT == 3


def test_the_node_measures_how_late_its_own_ticks_came(tmp_path):
    """A tick held up for 0.15 s after the hand-over (the GC pause of the EGL rehearsal) is the
    node's ``max_tick_gap_s``; before the hand-over nothing counts (the robot process starting)."""
    pytest.importorskip("cyclonedds")
    from fixtures import bundles as T
    from simreal.bundle import load_bundle
    from simreal.deploy.runner import PolicyRunner

    runner = PolicyRunner(load_bundle(T.make_pd_hover_bundle(tmp_path / "b")), overrides={"start": {"ramp_s": 0.0}})
    policy = runner.policy
    runs = {"n": 0}

    def slow_once(obs):
        runs["n"] += 1
        if runs["n"] == 30:
            time.sleep(0.15)
        return policy(obs)

    runner.policy = slow_once
    domain = T.random_domain_id()
    robot = T.FakeRobot(domain)
    try:
        with T.node_in_thread(runner, domain) as node:
            assert robot.wait_for_runner()
            robot.spin(1.0, rate_hz=100.0)
    finally:
        robot.close()
    assert runs["n"] > 40
    assert 0.15 <= node.max_tick_gap_s < 0.5, node.max_tick_gap_s
