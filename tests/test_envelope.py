"""The state envelope (deploy/envelope.py): bounds, config, the runner's latched fault, and a
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
    return {"pos_w": np.array(pos, float), "quat_wxyz": np.array(quat, float), "lin_vel_w": np.array(v, float),
            "ang_vel_b": np.array(w, float)}


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


@pytest.mark.parametrize("state, words", [
    (_quad_state(pos=(3.2, 0.0, 1.0)), "geofence: x 3.20 m above 3.00"),
    (_quad_state(pos=(0.0, 0.0, -0.6)), "geofence: z -0.60 m below -0.50"),
    (_quad_state(quat=_tilted(70.0)), "tilt 70 deg above 60"),
    (_quad_state(v=(3.0, 3.0, 0.0)), "speed 4.24 m/s above 4.00"),
    (_quad_state(w=(0.0, 0.0, 16.0)), "body rate 16.00 rad/s above 15.00"),
])
def test_a_quadrotor_leaving_its_default_envelope_is_named(quad_envelope, state, words):
    assert quad_envelope.violation(state) == words


def test_inside_the_envelope_nothing_trips(quad_envelope):
    assert quad_envelope.violation(_quad_state(pos=(2.9, -2.9, 2.9), quat=_tilted(55.0), v=(2.0, 2.0, 2.0),
                                               w=(8.0, 8.0, 8.0))) is None


def test_joint_margins_come_from_the_spec_ranges():
    spec = T.joint_robot_spec()
    env = Envelope.from_config(EnvelopeConfig(joint_margin_rad=0.1), spec)
    hi = spec.actuators[1].range[1]
    assert env.violation({"joint_pos": np.array([0.0, hi + 0.05])}) is None
    why = env.violation({"joint_pos": np.array([0.0, hi + 0.15])})
    assert why is not None and why.startswith(f"joint {spec.actuators[1].name} at")
    assert Envelope.from_config(EnvelopeConfig(), spec).violation({"joint_pos": np.array([0.0, 99.0])}) is None


@pytest.mark.parametrize("env, key", [({"geofence_min_m": [0.0, 0.0]}, "envelope.geofence_min_m"),
                                      ({"geofence_min_m": [0, 0, 5], "geofence_max_m": [1, 1, 1]},
                                       "envelope.geofence_min_m"),
                                      ({"max_tilt_rad": -1.0}, "envelope.max_tilt_rad")])
def test_a_bad_envelope_config_names_its_key(hover_bundle, env, key):
    with pytest.raises(ConfigError) as e:
        resolve_deploy_config(hover_bundle, {"envelope": env})
    assert e.value.key == key


def test_the_runner_latches_the_safe_command_on_the_tick_the_state_leaves(hover_bundle):
    runner = PolicyRunner(hover_bundle, msg_class=R.msg_class)
    good = encode_state("nav_msgs/msg/Odometry", _quad_state(), 0, R.msg_class)
    bad = encode_state("nav_msgs/msg/Odometry", _quad_state(pos=(0.0, 0.0, 3.5)), 0, R.msg_class)
    runner.on_state("odometry", good, 0.0)
    assert runner.tick(0.0).mode == RAMP
    runner.on_state("odometry", good, 0.01)
    assert runner.tick(0.01).mode == RAMP
    runner.on_state("odometry", bad, 0.02)
    res = runner.tick(0.02)
    assert res.mode == FAULT and np.all(res.command == 0.0)  # zero thrust, this very tick
    assert runner.stats.envelope_trip.startswith("geofence: z 3.50 m above")
    assert runner.stats.envelope_trip_s == pytest.approx(0.02)
    runner.on_state("odometry", good, 0.03)  # latched: back inside is not enough
    assert runner.tick(0.03).mode == FAULT
    runner.on_estop(False)
    assert runner.tick(0.04).mode in (WAITING, RAMP)


def test_a_random_policy_is_stopped_near_the_fence_in_the_rehearsal(tmp_path):
    """A random MLP bundle tumbles the quadrotor; the envelope cuts thrust and the vehicle
    stays within 1 m of the (tight) geofence until it reaches the ground."""
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    bundle = load_bundle(T.make_mlp_bundle(tmp_path / "mlp", hidden=(32, 32), control_rate_hz=100.0))
    fence = {"geofence_min_m": [-1.0, -1.0, 0.0], "geofence_max_m": [1.0, 1.0, 2.0]}
    report = run_offline(bundle, SimLoopConfig(duration_s=3.0, noise_scale=0.0),
                         overrides={"envelope": fence})
    runner = report["runner"]
    assert runner["envelope_trip_s"] is not None and runner["safety"]["mode"] == FAULT, runner
    assert not report["passed"]
    assert report["geofence"]["max_outside_m"] < 1.0, report["geofence"]
