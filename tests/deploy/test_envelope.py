"""The state envelope (simreal/deploy/envelope.py): bounds, config, the runner's latched fault, and a
bad bundle stopped in the rehearsal."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("cyclonedds")

from fixtures import bundles as T  # noqa: E402
from simreal.bundle import load_bundle  # noqa: E402
from simreal.deploy import ros_types as R  # noqa: E402
from simreal.deploy.adapters import encode_state  # noqa: E402
from simreal.deploy.config import EnvelopeConfig, resolve_deploy_config  # noqa: E402
from simreal.deploy.envelope import Envelope  # noqa: E402
from simreal.deploy.runner import PolicyRunner  # noqa: E402
from simreal.deploy.safety import FAULT, RAMP, WAITING  # noqa: E402
from simreal.errors import ConfigError  # noqa: E402
from simreal.robot_spec import load_robot_spec  # noqa: E402

UPRIGHT = np.array([1.0, 0.0, 0.0, 0.0])


def _quad_state(pos=(0.0, 0.0, 1.0), quat=UPRIGHT, v=(0.0, 0.0, 0.0), w=(0.0, 0.0, 0.0)):
    return {
        "pos_w": np.array(pos, float),
        "quat_wxyz": np.array(quat, float),
        "lin_vel_w": np.array(v, float),
        "ang_vel_b": np.array(w, float),
    }


@pytest.fixture(scope="module")
def hover_bundle(tmp_path_factory):
    return load_bundle(T.make_pd_hover_bundle(tmp_path_factory.mktemp("pd")))


@pytest.fixture(scope="module")
def quad_envelope(hover_bundle):
    cfg = resolve_deploy_config(hover_bundle)
    return Envelope.from_config(cfg.envelope, load_robot_spec("crazyflie2"))


def _tilted(deg: float) -> np.ndarray:
    h = math.radians(deg) / 2
    return np.array([math.cos(h), math.sin(h), 0.0, 0.0])


@pytest.mark.parametrize(
    "state, words",
    [
        (_quad_state(pos=(3.2, 0.0, 1.0)), "geofence: x 3.20 m above 3.00"),
        (_quad_state(pos=(0.0, 0.0, -0.6)), "geofence: z -0.60 m below -0.50"),
        (_quad_state(quat=_tilted(70.0)), "tilt 70.0 deg above 60.0"),
        (_quad_state(quat=_tilted(60.3)), "tilt 60.3 deg above 60.0"),  # not "60 above 60"
        (_quad_state(v=(3.0, 3.0, 0.0)), "speed 4.24 m/s above 4.00"),
        (_quad_state(w=(0.0, 0.0, 16.0)), "body rate 16.00 rad/s above 15.00"),
    ],
)
def test_a_quadrotor_leaving_its_default_envelope_is_named(quad_envelope, state, words):
    assert quad_envelope.violation(state) == words


def test_inside_the_envelope_nothing_trips(quad_envelope):
    assert (
        quad_envelope.violation(
            _quad_state(pos=(2.9, -2.9, 2.9), quat=_tilted(55.0), v=(2.0, 2.0, 2.0), w=(8.0, 8.0, 8.0))
        )
        is None
    )


@pytest.mark.parametrize(
    "state, words",
    [
        (
            _quad_state(quat=(0.0, 0.0, 0.0, 0.0)),
            "cannot judge the state: quat_wxyz has norm 0.000, not an orientation",
        ),
        (
            _quad_state(quat=(0.5, 0.0, 0.0, 0.0)),
            "cannot judge the state: quat_wxyz has norm 0.500, not an orientation",
        ),
        (_quad_state(v=(np.nan, 0.0, 0.0)), "cannot judge the state: lin_vel_w is not finite"),
        (_quad_state(pos=(np.inf, 0.0, 1.0)), "cannot judge the state: pos_w is not finite"),
    ],
)
def test_a_state_the_envelope_cannot_judge_is_outside_it(quad_envelope, state, words):
    """An all-zero IMU quaternion (a stand-in G1's, every tick) made the tilt NaN, which no bound
    fails: the check was off without a word. NaN in a checked key was as silent."""
    with np.errstate(all="raise"):  # and no RuntimeWarning from a division by a zero norm
        assert quad_envelope.violation(state) == words
    assert (
        Envelope.from_config(EnvelopeConfig(max_tilt_rad=math.inf), load_robot_spec("crazyflie2")).violation(
            _quad_state(quat=(0.0, 0.0, 0.0, 0.0))
        )
        is not None
    )  # with the tilt bound off, still no orientation
    assert (
        quad_envelope.violation({"joint_pos": np.array([np.nan])}) == "cannot judge the state: joint_pos is not finite"
    )


def test_a_zero_quaternion_latches_the_fault_counts_and_gives_the_landing_no_state(hover_bundle):
    """What the runner does with it: the fault latched on that tick and reported, every such tick
    counted, the policy not run on it, and the landing not steered by it (the blind hold, as on
    stale state, then the safe command)."""
    spec = load_robot_spec("crazyflie2")
    runner = PolicyRunner(hover_bundle, msg_class=R.msg_class)
    good = encode_state("nav_msgs/msg/Odometry", _quad_state(), 0, R.msg_class)
    zero = encode_state("nav_msgs/msg/Odometry", _quad_state(quat=(0.0, 0.0, 0.0, 0.0)), 0, R.msg_class)
    for t in (0.0, 0.01):
        runner.on_state("odometry", good, t)
        assert runner.tick(t).mode == RAMP
    runs = runner.stats.policy_runs
    runner.on_state("odometry", zero, 0.02)
    res = runner.tick(0.02)
    assert res.mode == FAULT and res.action is None and runner.stats.policy_runs == runs
    assert runner.stats.envelope_trip == "cannot judge the state: quat_wxyz has norm 0.000, not an orientation"
    assert runner.safety.stats.first_takeover.startswith("envelope: cannot judge the state")
    hover = np.full(4, spec.physical["mass_kg"] * 9.81 / 4)
    np.testing.assert_allclose(res.command, hover, rtol=1e-6)  # held blind, not landed on a garbage attitude
    for t in (0.03, 0.04):
        runner.on_state("odometry", zero, t)
        runner.tick(t)
    assert runner.stats.unjudged_ticks == 3 and runner.safety.stats.recovery_ticks == 0
    runner.on_state("odometry", zero, 0.6)
    assert np.all(runner.tick(0.6).command == 0.0)  # past hold_s without a state to judge: thrust cut
    assert runner.snapshot()["unjudged_ticks"] == 4


def test_joint_margins_come_from_the_spec_ranges():
    spec = T.joint_robot_spec()
    env = Envelope.from_config(EnvelopeConfig(joint_margin_rad=0.1), spec)
    hi = spec.actuators[1].range[1]
    assert env.violation({"joint_pos": np.array([0.0, hi + 0.05])}) is None
    why = env.violation({"joint_pos": np.array([0.0, hi + 0.15])})
    assert why is not None and why.startswith(f"joint {spec.actuators[1].name} at")
    assert Envelope.from_config(EnvelopeConfig(), spec).violation({"joint_pos": np.array([0.0, 99.0])}) is None


@pytest.mark.parametrize(
    "env, key",
    [
        ({"geofence_min_m": [0.0, 0.0]}, "envelope.geofence_min_m"),
        ({"geofence_min_m": [0, 0, 5], "geofence_max_m": [1, 1, 1]}, "envelope.geofence_min_m"),
        ({"max_tilt_rad": -1.0}, "envelope.max_tilt_rad"),
    ],
)
def test_a_bad_envelope_config_names_its_key(hover_bundle, env, key):
    with pytest.raises(ConfigError) as e:
        resolve_deploy_config(hover_bundle, {"envelope": env})
    assert e.value.key == key


def _tripping_runner(bundle, **overrides):
    """A runner two ticks into its start ramp that then sees the state leave the envelope (z 3.5 m)."""
    runner = PolicyRunner(bundle, msg_class=R.msg_class, overrides=overrides)
    good = encode_state("nav_msgs/msg/Odometry", _quad_state(), 0, R.msg_class)
    bad = encode_state("nav_msgs/msg/Odometry", _quad_state(pos=(0.0, 0.0, 3.5)), 0, R.msg_class)
    for t in (0.0, 0.01):
        runner.on_state("odometry", good, t)
        assert runner.tick(t).mode == RAMP
    runner.on_state("odometry", bad, 0.02)
    return runner, runner.tick(0.02)


def test_the_runner_latches_the_safe_command_on_the_tick_the_state_leaves(hover_bundle):
    runner, res = _tripping_runner(hover_bundle, fault={"response": "safe"})
    assert res.mode == FAULT and np.all(res.command == 0.0)  # zero thrust, this very tick
    assert runner.stats.envelope_trip.startswith("geofence: z 3.50 m above")
    assert runner.stats.envelope_trip_s == pytest.approx(0.02)
    good = encode_state("nav_msgs/msg/Odometry", _quad_state(), 0, R.msg_class)
    runner.on_state("odometry", good, 0.03)  # latched: back inside is not enough
    assert runner.tick(0.03).mode == FAULT
    runner.on_estop(False)
    assert runner.tick(0.04).mode in (WAITING, RAMP)


def test_a_quadrotor_trip_lands_then_cuts_thrust_at_touchdown(hover_bundle):
    """The quadrotor default ``fault.response: land``: the descent's command on the trip's own
    tick (level, at rest: four equal thrusts summing to m (g - 1.5 m/s^2), K_v 3/s times the 0.5
    m/s sink rate), zero thrust once the base is below ``touchdown_m``; on stale state, hover thrust
    blind for ``watchdog.hold_s`` (0.5 s), then zero thrust."""
    spec = load_robot_spec("crazyflie2")
    runner, res = _tripping_runner(hover_bundle)
    assert res.mode == FAULT
    mass = spec.physical["mass_kg"]
    np.testing.assert_allclose(res.command, np.full(4, mass * (9.81 - 1.5) / 4), rtol=1e-6)
    low = encode_state("nav_msgs/msg/Odometry", _quad_state(pos=(0.0, 0.0, 0.04)), 0, R.msg_class)
    runner.on_state("odometry", low, 0.03)
    res = runner.tick(0.03)
    assert res.mode == FAULT and np.all(res.command == 0.0)
    assert runner.safety.stats.recovery_end == "touchdown after 0.01 s"
    assert runner.safety.stats.recovery_ticks == 1
    runner2, _ = _tripping_runner(hover_bundle)
    res = runner2.tick(0.2)  # no state since 0.02 s: stale, never land blind; hold it in the air
    assert res.mode == FAULT
    np.testing.assert_allclose(res.command, np.full(4, mass * 9.81 / 4), rtol=1e-6)
    res = runner2.tick(0.53)  # held for longer than hold_s: the safe command
    assert res.mode == FAULT and np.all(res.command == 0.0)
    assert runner2.safety.stats.recovery_end == "state stale" and runner2.safety.stats.hold_ticks == 1


def test_land_is_refused_for_a_robot_that_cannot_fly(tmp_path):
    bundle = load_bundle(T.make_joint_bundle(tmp_path / "j"))
    with pytest.raises(ConfigError) as e:
        resolve_deploy_config(bundle, {"fault": {"response": "land"}})
    assert e.value.key == "fault.response"


@pytest.fixture(scope="module")
def bad_bundles(tmp_path_factory):
    """Two policies that fail: a random MLP (tumbles at once) and a PD hover controller with its
    horizontal position gain inverted (flies away from the target, ever faster)."""
    d = tmp_path_factory.mktemp("bad")
    return {
        "random": load_bundle(
            T.make_mlp_bundle(d / "mlp", hidden=(32, 32), control_rate_hz=100.0, target_pos_w=(0.0, 0.0, 2.0))
        ),
        "inverted": load_bundle(
            T.make_pd_hover_bundle(d / "inv", gains=T.PDHoverGains(kp_xy=-4.0), target_pos_w=(0.0, 0.0, 1.5))
        ),
    }


FENCE = {"geofence_min_m": [-1.0, -1.0, 0.0], "geofence_max_m": [1.0, 1.0, 3.0]}


@pytest.mark.parametrize("policy", ["random", "inverted"])
def test_a_bad_policy_is_stopped_near_the_fence_and_lands(bad_bundles, policy):
    """10 ms latency, 5% drops: the envelope trips, the landing rights the vehicle and touches
    down below 1.5 m/s (cutting thrust instead: about 6 m/s), never 1 m beyond the fence."""
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    sim = SimLoopConfig(duration_s=6.0, latency_ms=10.0, drop=0.05)
    report = run_offline(bad_bundles[policy], sim, overrides={"envelope": FENCE})
    runner = report["runner"]
    assert runner["envelope_trip_s"] is not None and runner["safety"]["mode"] == FAULT, runner
    assert runner["safety"]["recovery_end"].startswith("touchdown"), runner["safety"]
    assert not report["passed"]
    assert report["geofence"]["max_outside_m"] < 1.0, report["geofence"]
    assert report["geofence"]["ground_speed_m_s"] < 1.5, report["geofence"]
    cut = run_offline(bad_bundles[policy], sim, overrides={"envelope": FENCE, "fault": {"response": "safe"}})
    assert cut["runner"]["safety"]["recovery_ticks"] == 0
    assert cut["geofence"]["ground_speed_m_s"] > 3.0, cut["geofence"]


@pytest.mark.parametrize("outage_s, lands", [(0.3, True), (0.8, False)])
def test_a_state_outage_in_flight_is_held_then_landed_not_dropped(hover_bundle, outage_s, lands):
    """A dropout of the state (``--state-outage``) 3 s into a hover at 1 m: before the blind hold,
    the watchdog's thrust cut met the ground at 4.4 m/s after any dropout of 0.1 s or more. Now
    the vehicle hovers blind for up to ``hold_s`` (0.5 s); state back within it, the latched fault
    lands it (below 1.5 m/s); a longer outage still ends in the cut, after the hold."""
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    sim = SimLoopConfig(duration_s=7.0, latency_ms=10.0, drop=0.05, outage_at_s=3.0, outage_s=outage_s)
    report = run_offline(hover_bundle, sim)
    safety = report["runner"]["safety"]
    assert safety["watchdog_trips"] == 1 and safety["mode"] == FAULT and not report["passed"]
    assert safety["hold_ticks"] > 0
    speed = report["geofence"]["ground_speed_m_s"]
    if lands:
        assert safety["recovery_end"].startswith("touchdown") and speed < 1.5, (safety, speed)
        assert report["envelope"]["left_s"] is None  # a flight ends on the ground: no fall through it after
        cut = run_offline(hover_bundle, sim, overrides={"watchdog": {"hold_s": 0.0}})
        assert cut["runner"]["safety"]["hold_ticks"] == 0
        assert cut["geofence"]["ground_speed_m_s"] > 3.0, cut["geofence"]
    else:
        assert safety["recovery_end"] == "state stale" and speed > 3.0, (safety, speed)


def test_a_blind_hold_needs_a_landing_to_wait_for(hover_bundle):
    with pytest.raises(ConfigError) as e:
        resolve_deploy_config(hover_bundle, {"fault": {"response": "safe"}, "watchdog": {"hold_s": 0.5}})
    assert e.value.key == "watchdog.hold_s"
    assert resolve_deploy_config(hover_bundle).watchdog.hold_s == 0.5  # the quadrotor's default
    assert resolve_deploy_config(hover_bundle, {"fault": {"response": "safe"}}).watchdog.hold_s == 0.0
