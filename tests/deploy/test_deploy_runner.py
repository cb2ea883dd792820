"""PolicyRunner, SafetyLayer, deploy config and message adapters, without a transport."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

pytest.importorskip("cyclonedds")
pytest.importorskip("onnxruntime")

from fixtures import bundles as T  # noqa: E402
from simreal.bundle import load_bundle  # noqa: E402
from simreal.deploy import ros_types as R  # noqa: E402
from simreal.deploy.adapters import CommandCodec, StateDecoder, encode_state  # noqa: E402
from simreal.deploy.config import resolve_deploy_config  # noqa: E402
from simreal.deploy.runner import PolicyRunner  # noqa: E402
from simreal.deploy.safety import ESTOP, FAULT, RAMP, RUNNING, STALE, WAITING, SafetyLayer  # noqa: E402
from simreal.errors import BundleError, ConfigError  # noqa: E402
from simreal.rotations import quat_to_rotmat  # noqa: E402


@pytest.fixture(scope="module")
def hover_bundle(tmp_path_factory):
    return load_bundle(T.make_pd_hover_bundle(tmp_path_factory.mktemp("pd")))


@pytest.fixture(scope="module")
def joint_bundle(tmp_path_factory):
    return load_bundle(T.make_joint_bundle(tmp_path_factory.mktemp("arm")))


def odom(pos=(0.0, 0.0, 1.0), quat_wxyz=(1.0, 0.0, 0.0, 0.0), v_w=(0.0, 0.0, 0.0), w_b=(0.0, 0.0, 0.0)):
    s = {
        "pos_w": np.array(pos, float),
        "quat_wxyz": np.array(quat_wxyz, float),
        "lin_vel_w": np.array(v_w, float),
        "ang_vel_b": np.array(w_b, float),
    }
    return encode_state("nav_msgs/msg/Odometry", s, 0, R.msg_class)


def joints(q, dq=(0.0, 0.0), names=("shoulder", "elbow")):
    return R.JointState(name=list(names), position=list(q), velocity=list(dq))


# -- safety layer ------------------------------------------------------------------------------


def _layer(**kw):
    args = dict(
        ramp_s=0.5,
        latch_watchdog=False,
        max_nan_ticks=3,
        safe_command=lambda s: np.zeros(2),
        initial_command=lambda s: np.zeros(2),
    )
    args.update(kw)
    return SafetyLayer(np.array([-1.0, 0.0]), np.array([1.0, 2.0]), np.array([10.0, np.inf]), **args)


def test_safety_clamps_rate_limits_and_ramps():
    s = _layer()
    st = {"x": np.zeros(1)}
    assert s.mode == WAITING
    u = s.step(0.0, np.array([0.5, 1.0]), fresh=True, state=st)  # ramp starts: u = initial command
    assert s.mode == RAMP and np.allclose(u, 0.0)
    u = s.step(0.25, np.array([0.5, 1.0]), fresh=True, state=st)  # half way
    assert np.allclose(u, [0.25, 0.5])
    u = s.step(0.5, np.array([5.0, 5.0]), fresh=True, state=st)  # ramp done; clamped to high
    assert s.mode == RUNNING and np.allclose(u, [1.0, 2.0])
    u = s.step(0.51, np.array([-1.0, 0.0]), fresh=True, state=st)  # channel 0 slews at 10/s
    assert np.allclose(u, [0.9, 0.0])
    assert s.stats.rate_limited_ticks >= 1 and s.stats.clamped_ticks >= 1


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_safety_never_outputs_non_finite_and_faults(bad):
    s = _layer(ramp_s=0.0)
    st = {"x": np.zeros(1)}
    s.step(0.0, np.array([0.3, 0.3]), fresh=True, state=st)
    u1 = s.step(0.01, np.array([0.3, 0.3]), fresh=True, state=st)
    outs = [s.step(0.02 + 0.01 * k, np.array([bad, 0.1]), fresh=True, state=st) for k in range(5)]
    assert all(np.all(np.isfinite(u)) for u in outs)
    assert np.allclose(outs[0], u1) and np.allclose(outs[1], u1)  # hold the last good command
    assert s.mode == FAULT and np.allclose(outs[-1], 0.0)  # then latched safe command
    assert s.stats.nan_proposals >= 3 and s.stats.faults == 1
    s.release()
    assert s.mode == WAITING


def test_safety_watchdog_estop_and_latch():
    s = _layer(ramp_s=0.0, safe_command=lambda st: np.array([0.0, 1.5]))
    st = {"x": np.zeros(1)}
    s.step(0.0, np.array([0.5, 0.5]), fresh=True, state=st)
    s.step(0.01, np.array([0.5, 0.5]), fresh=True, state=st)
    u = s.step(0.02, np.array([0.5, 0.5]), fresh=False, state=st)
    assert s.mode == STALE and np.allclose(u, [0.0, 1.5]) and s.stats.watchdog_trips == 1
    s.step(0.03, np.array([0.5, 0.5]), fresh=True, state=st)  # not latched: ramps again
    assert s.mode in (RAMP, RUNNING)
    s.estop(True, st)
    u = s.step(0.04, np.array([0.5, 0.5]), fresh=True, state=st)
    assert s.mode == ESTOP and np.allclose(u, [0.0, 1.5])
    s.estop(False)
    s.step(0.05, np.array([0.5, 0.5]), fresh=True, state=st)
    assert s.mode in (RAMP, RUNNING)
    latched = _layer(ramp_s=0.0, latch_watchdog=True)
    latched.step(0.0, np.array([0.5, 0.5]), fresh=True, state=st)
    latched.step(0.1, None, fresh=False, state=st)
    latched.step(0.2, np.array([0.5, 0.5]), fresh=True, state=st)
    assert latched.mode == FAULT


class _Descent:
    """A recovery that commands (9, 9) while state is fresh, until told it touched down."""

    outcome = ""

    def start(self, now_s):
        self.started = now_s

    def command(self, now_s, state):
        if state["z"][0] <= 0.0:
            self.outcome = "touchdown"
            return None
        return np.array([0.9, 1.9])


def test_safety_blind_hold_then_recovery_or_the_safe_command():
    """With a recovery: a watchdog trip holds the hold command while the state is stale, for at
    most hold_s from the last fresh state; state back in time, the latched fault recovers; the
    e-stop, a recovery's end and an expired hold all give the safe command at once."""

    def layer():
        return _layer(
            ramp_s=0.0,
            latch_watchdog=True,
            recovery=_Descent(),
            hold_s=0.5,
            hold_command=lambda st: np.array([0.2, 1.2]),
            safe_command=lambda st: np.array([0.0, 0.5]),
        )

    up, down = {"z": np.ones(1)}, {"z": np.zeros(1)}
    s = layer()
    s.step(0.0, np.array([0.5, 0.5]), fresh=True, state=up)
    u = s.step(0.1, np.array([0.5, 0.5]), fresh=False, state=up)  # trip: held, not recovering blind
    assert s.mode == FAULT and np.allclose(u, [0.2, 1.2]) and s.stats.watchdog_trips == 1
    assert np.allclose(s.step(0.45, None, fresh=False, state=up), [0.2, 1.2])
    u = s.step(0.48, None, fresh=True, state=up)  # back within 0.5 s of the last fresh tick (0.0)
    assert np.allclose(u, [0.9, 1.9]) and s.stats.recovery_ticks == 1
    assert np.allclose(s.step(0.6, None, fresh=False, state=up), [0.2, 1.2])  # a second dropout: held
    assert np.allclose(s.step(0.62, None, fresh=True, state=down), [0.0, 0.5])  # touchdown: safe
    assert s.stats.recovery_end == "touchdown"
    assert np.allclose(s.step(0.64, None, fresh=False, state=down), [0.0, 0.5])  # nothing held after it
    assert s.stats.hold_ticks == 3

    s = layer()
    s.step(0.0, np.array([0.5, 0.5]), fresh=True, state=up)
    s.step(0.1, None, fresh=False, state=up)
    assert np.allclose(s.step(0.51, None, fresh=False, state=up), [0.0, 0.5])  # 0.51 s blind: safe
    assert np.allclose(s.step(0.52, None, fresh=True, state=up), [0.0, 0.5])  # and no recovery after it
    assert s.stats.recovery_end == "state stale" and s.stats.recovery_ticks == 0

    s = layer()
    s.step(0.0, np.array([0.5, 0.5]), fresh=True, state=up)
    s.step(0.1, None, fresh=False, state=up)
    s.estop(True, up)
    assert np.allclose(s.step(0.2, None, fresh=False, state=up), [0.0, 0.5])  # the operator's stop: at once
    no_recovery = _layer(ramp_s=0.0, latch_watchdog=True, hold_s=0.5, hold_command=lambda st: np.array([0.2, 1.2]))
    no_recovery.step(0.0, np.array([0.5, 0.5]), fresh=True, state=up)
    assert np.allclose(no_recovery.step(0.1, None, fresh=False, state=up), 0.0)  # nothing to wait for


# -- adapters ----------------------------------------------------------------------------------


def test_odometry_round_trip_and_frames():
    rng = np.random.default_rng(0)
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    s = {
        "pos_w": rng.standard_normal(3),
        "quat_wxyz": q,
        "lin_vel_w": rng.standard_normal(3),
        "ang_vel_b": rng.standard_normal(3),
    }
    for frame in ("body", "world"):
        msg = encode_state("nav_msgs/msg/Odometry", s, 123, R.msg_class, twist_frame=frame)
        d = StateDecoder("nav_msgs/msg/Odometry", twist_frame=frame)(msg)
        for k in s:
            assert np.allclose(d[k], s[k]), (frame, k)
    body = encode_state("nav_msgs/msg/Odometry", s, 0, R.msg_class)
    v_b = np.array([body.twist.twist.linear.x, body.twist.twist.linear.y, body.twist.twist.linear.z])
    assert np.allclose(quat_to_rotmat(q, np) @ v_b, s["lin_vel_w"])  # nav_msgs: twist in the child frame
    assert (body.pose.pose.orientation.w, body.pose.pose.orientation.x) == (q[0], q[1])  # xyzw on the wire


def test_px4_vehicle_odometry_in_ned_decodes_to_enu_and_feeds_the_runner(hover_bundle):
    """PX4's own estimate as the runner's state: NED/FRD on the wire, ENU/FLU inside; a level
    vehicle facing north (q = 1 in NED) faces +90 deg about ENU z; a non-NED frame or a NaN
    (PX4's invalid) is refused; a runner configured for it observes what nav_msgs would give."""
    from simreal.deploy.adapters import StateMessageError
    from simreal.deploy.runner import PolicyRunner

    rng = np.random.default_rng(1)
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    s = {
        "pos_w": rng.standard_normal(3),
        "quat_wxyz": q,
        "lin_vel_w": rng.standard_normal(3),
        "ang_vel_b": rng.standard_normal(3),
    }
    msg = encode_state("px4_msgs/msg/VehicleOdometry", s, 5_000_000, R.msg_class)
    assert msg.timestamp == 5000 and msg.position[2] == pytest.approx(-s["pos_w"][2], abs=1e-6)  # z down
    d = StateDecoder("px4_msgs/msg/VehicleOdometry")(msg)
    for k in s:
        np.testing.assert_allclose(d[k], s[k], atol=1e-6)  # float32 on the wire
    level_north = R.VehicleOdometry(pose_frame=1, velocity_frame=1, q=[1.0, 0.0, 0.0, 0.0])
    q_enu = StateDecoder("px4_msgs/msg/VehicleOdometry")(level_north)["quat_wxyz"]
    np.testing.assert_allclose(quat_to_rotmat(q_enu, np)[:, 0], [0.0, 1.0, 0.0], atol=1e-12)  # nose north
    for bad in (
        R.VehicleOdometry(pose_frame=2, velocity_frame=1, q=[1.0, 0, 0, 0]),
        R.VehicleOdometry(pose_frame=1, velocity_frame=1, q=[float("nan"), 0, 0, 0]),
    ):
        with pytest.raises(StateMessageError):
            StateDecoder("px4_msgs/msg/VehicleOdometry")(bad)

    state = {"odometry": {"topic": "/fmu/out/vehicle_odometry", "type": "px4_msgs/msg/VehicleOdometry"}}
    via_px4 = PolicyRunner(hover_bundle, overrides={"state": state})
    via_nav = PolicyRunner(hover_bundle)
    for k in range(1, 40):
        via_px4.on_state("odometry", encode_state("px4_msgs/msg/VehicleOdometry", s, 0, R.msg_class), 0.01 * k - 0.001)
        via_nav.on_state("odometry", encode_state("nav_msgs/msg/Odometry", s, 0, R.msg_class), 0.01 * k - 0.001)
        a, b = via_px4.tick(0.01 * k), via_nav.tick(0.01 * k)
    assert a.mode == b.mode and a.publish and np.allclose(a.command, b.command, atol=1e-4)
    assert via_px4.stats.bad_state_msgs == 0


def test_command_codecs_round_trip():
    u = np.array([0.01, 0.05, 0.1, 0.15])
    c = CommandCodec(
        "px4_msgs/msg/ActuatorMotors",
        "rotor_thrust",
        ("m1", "m2", "m3", "m4"),
        [0.15] * 4,
        [0, 3, 1, 2],
        topic="/fmu/in/actuator_motors",
        heartbeat_topic="/fmu/in/offboard_control_mode",
    )
    out = c.encode(u, 2_000_000_123, R.msg_class)
    (topic, msg), (hb_topic, hb) = out
    assert topic == "/fmu/in/actuator_motors" and hb_topic == "/fmu/in/offboard_control_mode"
    assert hb.direct_actuator and not hb.body_rate and hb.timestamp == 2_000_000
    assert np.allclose(msg.control[:4], [u[0] / 0.15, u[2] / 0.15, u[3] / 0.15, u[1] / 0.15])
    assert msg.control[4:] == [0.0] * 8 and msg.timestamp == 2_000_000
    assert np.allclose(c.decode(msg), u)
    rates = CommandCodec(
        "px4_msgs/msg/VehicleRatesSetpoint", "ctbr", ("thrust", "p", "q", "r"), [0.6, 1, 1, 1], [0, 1, 2, 3]
    )
    ((_, m),) = rates.encode(np.array([0.3, 1.0, 2.0, -3.0]), 0, R.msg_class)
    assert (m.roll, m.pitch, m.yaw) == (1.0, -2.0, 3.0) and m.thrust_body == [0.0, 0.0, -0.5]  # FLU -> FRD
    assert np.allclose(rates.decode(m), [0.3, 1.0, 2.0, -3.0])
    traj = CommandCodec(
        "trajectory_msgs/msg/JointTrajectory", "joint_position", ("a", "b"), [1, 1], [0, 1], period_s=0.02
    )
    ((_, jt),) = traj.encode(np.array([0.1, -0.2]), 5, R.msg_class)
    assert jt.joint_names == ["a", "b"] and jt.points[0].positions == [0.1, -0.2]
    assert jt.points[0].time_from_start.nanosec == 20_000_000
    with pytest.raises(ValueError, match="non-finite"):
        c.encode(np.array([np.nan, 0, 0, 0]), 0, R.msg_class)


def test_joint_state_is_matched_by_name():
    d = StateDecoder("sensor_msgs/msg/JointState", joint_names=("shoulder", "elbow"))
    out = d(joints([0.5, -0.1], [1.0, 2.0], names=("elbow", "shoulder")))
    assert np.allclose(out["joint_pos"], [-0.1, 0.5]) and np.allclose(out["joint_vel"], [2.0, 1.0])
    with pytest.raises(Exception, match="lacks joints"):
        d(joints([0.5], names=("elbow",)))


# -- config ------------------------------------------------------------------------------------


def test_config_defaults_and_errors_name_the_key(hover_bundle):
    cfg = resolve_deploy_config(hover_bundle)
    assert cfg.command.type == "px4_msgs/msg/ActuatorMotors" and cfg.command.channel_map == (0, 1, 2, 3)
    assert cfg.limits.low == (0.0,) * 4 and cfg.limits.high == (0.15,) * 4
    assert cfg.limits.max_rate == pytest.approx((0.15 / 0.03,) * 4)
    assert cfg.start.initial_command == "hover" and cfg.control_rate_hz == 100.0
    tight = resolve_deploy_config(hover_bundle, {"limits": {"high": [0.1, 0.1, 0.2, 0.1]}})
    assert tight.limits.high == (0.1, 0.1, 0.15, 0.1)  # user limits only tighten
    with pytest.raises(ConfigError, match="watchdog.timeout_s"):
        resolve_deploy_config(hover_bundle, {"watchdog": {"timeout_s": 0.001}})
    with pytest.raises(ConfigError, match="command.type.*cannot carry"):
        resolve_deploy_config(hover_bundle, {"command": {"type": "trajectory_msgs/msg/JointTrajectory"}})
    with pytest.raises(ConfigError, match="watchdog.timeot_s"):
        resolve_deploy_config(hover_bundle, {"watchdog": {"timeot_s": 1.0}})
    with pytest.raises(ConfigError, match="state.odometry.topic"):
        resolve_deploy_config(hover_bundle, {"state": {"odometry": {"topic": "no slash"}}})
    with pytest.raises(ConfigError, match="needs.*lin_vel_w"):
        PolicyRunner(hover_bundle, overrides={"state": {"odometry": {"type": "geometry_msgs/msg/PoseStamped"}}})
    # a policy runs at the rate it was trained at (the node took -p control_rate_hz:=5000)
    with pytest.raises(ConfigError, match="control_rate_hz.*50 Hz, and the policy was trained at 100 Hz"):
        resolve_deploy_config(hover_bundle, {"control_rate_hz": 50})


def test_a_config_for_another_robot_names_the_file_and_the_slot_count(tmp_path, capsys):
    """The Crazyflie's PX4 config on a 2-joint arm bundle: the error names the config file and
    says its channel map has 4 slots for the arm's 2 joints (once: 'expected 2 distinct slot
    indices, got [0, 3, 1, 2]', no file)."""
    from simreal.cli import main
    from simreal.config import configs_dir

    bundle = T.make_joint_bundle(tmp_path / "arm")
    cf = configs_dir() / "deploy" / "crazyflie2_px4.yaml"
    assert main(["deploy", "ros2", str(bundle), "--out", str(tmp_path / "ws"), "--config", str(cf)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"simreal deploy: error: {cf}: config key 'command.channel_map': the config's channel map "
        "has 4 slots [0, 3, 1, 2] for the 2 joints of robot 'test_arm2' (a config for another "
        "robot?); expected 2 distinct slot indices, one per channel"
    ), err
    assert not (tmp_path / "ws").exists()
    # the same key given with --set is named as such
    argv = ["deploy", "ros2", str(bundle), "--out", str(tmp_path / "ws"), "--set", "command.channel_map=[1,1]"]
    assert main(argv) == 2
    assert (
        "--deploy-set: config key 'command.channel_map': expected 2 distinct slot indices >= 0, got [1, 1]"
        in capsys.readouterr().err
    )


def test_family_names_take_their_article(joint_bundle):
    with pytest.raises(ConfigError, match="robot 'test_arm2' is an arm with action mode"):
        resolve_deploy_config(joint_bundle, {"fault": {"response": "land"}})
    with pytest.raises(ConfigError, match="'hover' is for quadrotors; robot 'test_arm2' is an arm$"):
        resolve_deploy_config(joint_bundle, {"start": {"initial_command": "hover"}})


@pytest.mark.parametrize("make", [T.make_pd_hover_bundle, T.make_ctbr_hover_bundle])
def test_an_edited_bundle_cannot_loosen_its_robots_limits(tmp_path, make):
    """bundle.yaml's own robot spec and action bounds raised tenfold: the limits stay the shipped
    crazyflie2's (rotor thrust 0.15 N, body rate 10 rad/s), whatever the bundle says."""
    from simreal.yaml_io import dump_yaml, load_yaml

    plain = resolve_deploy_config(load_bundle(make(tmp_path / "plain"))).limits
    path = make(tmp_path / "edited") / "bundle.yaml"
    data = load_yaml(path)
    for a in data["robot_spec"]["actuators"]:
        a["effort_limit"] *= 10.0
    data["robot_spec"]["physical"]["max_body_rate_rad_s"] = 100.0
    data["action"]["low"] = [10.0 * v for v in data["action"]["low"]]
    data["action"]["high"] = [10.0 * v for v in data["action"]["high"]]
    dump_yaml(path, data)
    edited = resolve_deploy_config(load_bundle(path.parent)).limits
    assert edited.low == plain.low and edited.high == plain.high and edited.max_rate == plain.max_rate
    assert max(plain.high) <= 10.0


def test_runner_refuses_mismatched_bundle(tmp_path):
    b = load_bundle(T.make_pd_hover_bundle(tmp_path / "b"))
    import dataclasses

    bad = dataclasses.replace(b, obs_history=3)  # three frames said, a graph of one frame's width
    with pytest.raises(BundleError, match=r"observation.size.*\(batch, 22\); expected the policy graph obs \(N, 66\)"):
        PolicyRunner(bad)


# -- runner ------------------------------------------------------------------------------------


def test_runner_quadrotor_path_matches_reference_controller(hover_bundle):
    from simreal.bundle import OnnxPolicy

    onnx, seen = OnnxPolicy(hover_bundle), []

    def policy(obs):
        seen.append(np.array(obs))
        return onnx(obs)

    r = PolicyRunner(hover_bundle, policy=policy)
    res = r.tick(0.0)
    assert not res.publish and r.messages(res, 0) == []  # silent until it sees the robot
    state = dict(pos=(0.1, -0.1, 0.9), v_w=(0.2, 0.0, -0.1), w_b=(0.1, 0.2, 0.3))
    r.on_state("odometry", odom(**state), 0.005)
    res = r.tick(0.01)
    hover = 0.032 * 9.81 / 4
    assert res.mode == RAMP and res.publish and np.allclose(res.command, hover)  # ramp starts at hover thrust
    assert np.allclose(seen[0][18:], (hover - 0.075) / 0.075)  # last_action = the initial command, normalised
    for k in range(2, 40):
        r.on_state("odometry", odom(**state), 0.01 * k - 0.001)
        prev = r.last_action.copy()
        res = r.tick(0.01 * k)
    assert res.mode == RUNNING
    expected_obs = np.concatenate([[-0.1, 0.1, 0.1], np.eye(3).reshape(-1), [0.2, 0.0, -0.1], [0.1, 0.2, 0.3], prev])
    assert np.allclose(seen[-1], expected_obs)  # the simulation's observation terms, from nav_msgs/Odometry
    assert np.allclose(res.action, T.pd_hover_reference(expected_obs, r.spec), atol=1e-5)
    assert np.allclose(res.command, 0.075 + 0.075 * res.action)  # within limits, slew and ramp done
    msgs = r.messages(res, 1_000_000_000)
    assert [t for t, _ in msgs] == ["/fmu/in/actuator_motors", "/fmu/in/offboard_control_mode"]
    assert np.allclose(np.array(msgs[0][1].control[:4]) * 0.15, res.command, atol=1e-6)


def test_runner_watchdog_in_simulated_time(hover_bundle):
    r = PolicyRunner(hover_bundle, overrides={"watchdog": {"timeout_s": 0.05}})
    t = 0.0
    for k in range(30):
        t = 0.01 * k
        r.on_state("odometry", odom(), t)
        res = r.tick(t + 0.001)
    assert res.mode == RUNNING and np.all(res.command > 0.05)
    last_state = t
    for k in range(1, 10):
        res = r.tick(last_state + 0.001 + 0.01 * k)
        if res.mode != RUNNING:
            break
    assert res.mode == FAULT and np.allclose(res.command, 0.032 * 9.81 / 4)  # hover thrust, blind
    assert res.t_s - last_state <= 0.05  # on the wire within the timeout
    t = res.t_s + 0.5  # more than hold_s after the last tick with fresh state
    assert np.allclose(r.tick(t).command, 0.0)  # held for watchdog.hold_s: zero thrust
    r.on_state("odometry", odom(), t + 0.01)
    assert r.tick(t + 0.011).mode == FAULT  # latched
    r.on_estop(R.Bool(data=False))
    assert r.tick(t + 0.02).mode == RAMP


def test_runner_refuses_non_finite_state_and_estops(hover_bundle):
    r = PolicyRunner(hover_bundle)
    assert not r.on_state("odometry", odom(pos=(np.nan, 0, 1)), 0.0)
    assert r.stats.bad_state_msgs == 1
    r.on_state("odometry", odom(), 0.0)
    r.tick(0.001)
    r.on_estop(R.Bool(data=True))
    res = r.tick(0.01)
    assert res.mode == ESTOP and np.allclose(res.command, 0.0)
    res = r.shutdown(0.02)
    assert res.mode == ESTOP and np.allclose(res.command, 0.0)


def test_runner_nan_policy_never_reaches_messages(hover_bundle):
    calls = []

    def flaky(obs):
        calls.append(1)
        return np.array([np.nan, 0.0, 0.0, 0.0]) if len(calls) % 2 else np.zeros(4)

    r = PolicyRunner(hover_bundle, policy=flaky, overrides={"start": {"ramp_s": 0.0}})
    for k in range(20):
        r.on_state("odometry", odom(), 0.01 * k)
        res = r.tick(0.01 * k + 0.001)
        for _, msg in r.messages(res, k):
            vals = getattr(msg, "control", [])
            assert all(math.isfinite(v) for v in vals)
    assert r.stats.nonfinite_actions == 10 and res.mode == RUNNING  # never 3 in a row


def test_runner_joint_robot_hold_and_ramp(joint_bundle):
    r = PolicyRunner(joint_bundle, msg_class=R.msg_class, overrides={"start": {"ramp_s": 0.1}})
    subs = {s.topic: s.type for s in r.subscriptions()}
    assert subs == {
        "/joint_states": "sensor_msgs/msg/JointState",
        "/imu/data": "sensor_msgs/msg/Imu",
        "/simreal/estop": "std_msgs/msg/Bool",
    }
    imu = R.Imu()
    q0 = np.array([0.6, -0.9])
    r.on_state("joints", joints(q0), 0.0)
    r.on_state("imu", imu, 0.0)
    res = r.tick(0.001)
    assert res.mode == RAMP and np.allclose(res.command, q0)  # ramps from the current pose
    ((topic, msg),) = r.messages(res, 0)
    assert topic == "/forward_position_controller/commands" and np.allclose(msg.data, q0)
    for k in range(1, 30):
        r.on_state("joints", joints(q0), 0.02 * k)
        r.on_state("imu", imu, 0.02 * k)
        res = r.tick(0.02 * k + 0.001)
    assert res.mode == RUNNING
    # policy a = tanh(-0.5 (q - q_default)); command = q_default + 0.5 a, slewed at the joint velocity limits
    expected = np.array([0.2, -0.3]) + 0.5 * np.tanh(-0.5 * (q0 - np.array([0.2, -0.3])))
    assert np.allclose(res.command, expected, atol=1e-5)
    res = r.tick(0.02 * 29 + 0.2)  # state stale -> hold the last measured pose
    assert res.mode == FAULT and np.allclose(res.command, q0)


def test_offline_closed_loop_hover(hover_bundle):
    """Runner + MuJoCo quadrotor in simulated time with 10 ms latency and 5 % drops."""
    pytest.importorskip("mujoco")
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    report = run_offline(hover_bundle, SimLoopConfig(duration_s=6.0, latency_ms=10.0, drop=0.05, seed=3))
    h = report["hover"]
    assert h["passed"], h
    assert h["max_error_after_settle_m"] < 0.05


def test_offline_closed_loop_joint_arm(joint_bundle):
    """Runner + MuJoCo two-joint arm: ramps from a displaced pose, then the policy returns it home."""
    pytest.importorskip("mujoco")
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    report = run_offline(
        joint_bundle, SimLoopConfig(duration_s=3.0, latency_ms=10.0, drop=0.05, start_joint_pos=(0.8, -1.2))
    )
    assert report["runner"]["safety"]["mode"] == RUNNING
    assert np.allclose(report["final_state"]["joint_pos"], [0.2, -0.3], atol=0.02)


def _joint_robots():
    from simreal.robot_spec import available_robots, load_robot_spec

    return [r for r in available_robots() if load_robot_spec(r).family not in ("quadrotor", "classic")]


@pytest.mark.parametrize("robot", _joint_robots())
def test_every_shipped_joint_robot_deploys(robot, tmp_path):
    """Each shipped robot spec's topics resolve, and a random policy's commands stay in its limits."""
    from simreal.robot_spec import load_robot_spec

    spec = load_robot_spec(robot)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # vendor state topics deploy does not read (warned, skipped)
        r = PolicyRunner(
            load_bundle(T.make_joint_mlp_bundle(tmp_path / "b", spec)), overrides={"start": {"ramp_s": 0.0}}
        )
    names = list(spec.actuator_names)[::-1]  # drivers may order JointState differently
    q = [a.default for a in spec.actuators][::-1]
    for k in range(5):
        for sub in r.subscriptions():
            if sub.type == "sensor_msgs/msg/JointState":
                r.on_state(sub.name, R.JointState(name=names, position=q, velocity=[0.1] * len(q)), 0.01 * k)
            elif sub.type == "sensor_msgs/msg/Imu":
                r.on_state(sub.name, R.Imu(), 0.01 * k)
        res = r.tick(0.01 * k + 0.001)
    assert res.mode == RUNNING and np.all(np.isfinite(res.command))
    assert np.all(res.command >= np.array(r.cfg.limits.low)) and np.all(res.command <= np.array(r.cfg.limits.high))
    ((topic, msg),) = r.messages(res, 0)
    assert topic == r.cfg.command.topic and len(msg.data) == len(spec.actuators)


def test_offline_ctbr_path_holds_a_level_hover(tmp_path):
    """Collective thrust + body rates: PX4 VehicleRatesSetpoint (FRD) out, the onboard rate loop in."""
    pytest.importorskip("mujoco")
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    b = load_bundle(T.make_ctbr_hover_bundle(tmp_path / "ctbr"))
    r = PolicyRunner(b, msg_class=R.msg_class)
    assert r.cfg.command.type == "px4_msgs/msg/VehicleRatesSetpoint"
    report = run_offline(b, SimLoopConfig(duration_s=2.0, noise_scale=0.0, start_offset_m=(0.0, 0.0, 0.0)), runner=r)
    assert report["runner"]["safety"]["mode"] == RUNNING
    assert report["hover"]["final_error_m"] < 0.05  # open loop: only the rate loop keeps it level


def test_shipped_deploy_configs_resolve(hover_bundle):
    from simreal.config import configs_dir
    from simreal.yaml_io import load_yaml

    files = sorted((configs_dir() / "deploy").glob("*.yaml"))
    assert files
    for f in files:
        resolve_deploy_config(hover_bundle, load_yaml(f))


def test_default_yaml_lists_every_deploy_key(hover_bundle):
    """configs/deploy/default.yaml says it lists every key: uncommented, its sections hold exactly
    the config classes' fields (envelope and fault were once missing), and its values resolve."""
    import dataclasses

    import yaml

    from simreal.config import configs_dir
    from simreal.deploy import config as C

    text = (configs_dir() / "deploy" / "default.yaml").read_text()
    body = text[text.index("# control_rate_hz") :].splitlines()
    tree = yaml.safe_load("\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body))
    names = lambda cls: {f.name for f in dataclasses.fields(cls)}  # noqa: E731
    assert set(tree) == names(C.DeployConfig)
    sections = {
        "command": C.CommandTopicConfig,
        "limits": C.LimitsConfig,
        "watchdog": C.WatchdogConfig,
        "start": C.StartConfig,
        "envelope": C.EnvelopeConfig,
        "fault": C.FaultConfig,
        "perception": C.PerceptionConfig,
    }
    for key, cls in sections.items():
        assert set(tree[key]) == names(cls), key
    assert set(tree["state"]["odometry"]) == names(C.StateTopicConfig)
    resolve_deploy_config(hover_bundle, tree)  # the documented values are valid ones


def test_runner_keeps_the_action_history_as_the_training_env_does(tmp_path):
    """The runner's ``action_history`` input: the actions before ``last_action``, newest first,
    each starting at the initial command (as ``last_action`` does); as ``simreal/sim/env.py`` keeps it."""
    from simreal.robot_spec import load_robot_spec

    spec = load_robot_spec("crazyflie2")
    terms = T.HOVER_TERMS + (("action_history", 8),)
    path = T.write_bundle(
        tmp_path / "b",
        spec=spec,
        model=T.mlp_onnx(30, 4, (8,)),
        task="quadrotor-hover",
        obs_terms=terms,
        control_rate_hz=100.0,
        task_params={"target_pos_w": [0.0, 0.0, 1.0]},
        **T._rotor_layout(spec),
    )
    actions = [np.array([0.01, 0.02, 0.03, 0.04]) + 0.1 * k for k in range(6)]
    seen: list[np.ndarray] = []

    def policy(obs):
        seen.append(np.array(obs))
        return actions[len(seen) - 1]

    r = PolicyRunner(load_bundle(path), policy=policy)
    for k in range(1, 7):
        r.on_state("odometry", odom(), 0.01 * k - 0.001)
        r.tick(0.01 * k)
    assert len(seen) == 6
    init = seen[0][18:22]  # the initial command, normalised
    np.testing.assert_allclose(seen[0][22:], np.concatenate([init, init]))
    np.testing.assert_allclose(seen[1][18:], np.concatenate([actions[0], init, init]))
    for j in range(3, 6):
        np.testing.assert_allclose(seen[j][18:], np.concatenate([actions[j - 1], actions[j - 2], actions[j - 3]]))


def _history_bundle(tmp_path, history: int = 3):
    from simreal.robot_spec import load_robot_spec

    spec = load_robot_spec("crazyflie2")
    return T.write_bundle(
        tmp_path / "b",
        spec=spec,
        model=T.mlp_onnx(22 * history, 4, (8,)),
        task="quadrotor-hover",
        obs_terms=T.HOVER_TERMS,
        control_rate_hz=100.0,
        task_params={"target_pos_w": [0.0, 0.0, 1.0]},
        obs_history=history,
        **T._rotor_layout(spec),
    )


def test_runner_stacks_observation_frames_as_the_training_env_does(tmp_path):
    """``latency.obs_history`` 3: the policy sees [f_t, f_t-1, f_t-2] of the frames it was given,
    the first policy run (out of the start's safe mode) its own frame three times (a new
    episode's, ``simreal/sim/env.py``); a tick on stale state runs no policy."""
    seen: list[np.ndarray] = []

    def policy(obs):
        seen.append(np.array(obs))
        return np.zeros(4)

    r = PolicyRunner(load_bundle(_history_bundle(tmp_path)), policy=policy)
    heights = [1.0, 1.1, 1.2, 1.3]
    for k, z in enumerate(heights, start=1):
        r.on_state("odometry", odom(pos=(0.0, 0.0, z)), 0.01 * k - 0.001)
        r.tick(0.01 * k)
    assert [s.shape for s in seen] == [(66,)] * 4
    frame_z = [[s[2 + 22 * i] for i in range(3)] for s in seen]  # pos_error_w z = 1 - z of each frame
    np.testing.assert_allclose(frame_z[0], [0.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(frame_z[1], [-0.1, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(frame_z[3], [-0.3, -0.2, -0.1], atol=1e-12)
    r.tick(0.05 + r.cfg.watchdog.timeout_s)  # stale: no policy run, the watchdog holds
    assert len(seen) == 4 and r.safety.mode != "running"


def test_a_bundle_whose_size_is_not_its_history_of_frames_names_the_field(tmp_path):
    from simreal.yaml_io import dump_yaml, load_yaml

    path = _history_bundle(tmp_path) / "bundle.yaml"
    data = load_yaml(path)
    data["latency"]["obs_history"] = 2
    dump_yaml(path, data)
    with pytest.raises(BundleError, match=r"observation.size.*66 != latency.obs_history 2 x the sum of term sizes 22"):
        load_bundle(path.parent)


@pytest.mark.parametrize(
    "mode, names",
    [("rotor_thrust", ["thrust", "roll_rate", "pitch_rate", "yaw_rate"]), ("ctbr", ["m1", "m2", "m3", "m4"])],
)
def test_action_channels_that_do_not_fit_the_mode_name_the_field(tmp_path, mode, names):
    """An edited action.mode: one line naming action.names and what the mode expects (it was
    'unknown actuator of robot 'crazyflie2' 'thrust'; valid actuator of robot 'crazyflie2's')."""
    from simreal.yaml_io import dump_yaml, load_yaml

    path = T.make_pd_hover_bundle(tmp_path / "b") / "bundle.yaml"
    data = load_yaml(path)
    data["action"].update(mode=mode, names=names)
    dump_yaml(path, data)
    with pytest.raises(BundleError, match=rf"bundle field 'action.names': .* for action mode '{mode}'; expected "):
        resolve_deploy_config(load_bundle(path.parent))


def test_a_run_directory_given_for_a_bundle_is_named_as_one(tmp_path):
    """RUN_DIR instead of RUN_DIR/bundle: the message says where its bundle is, or that it has none yet."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("task: quadrotor-hover\n")
    with pytest.raises(BundleError, match=r"a run directory: `simreal export .*run` writes its bundle"):
        load_bundle(run)
    T.make_pd_hover_bundle(run / "bundle")
    with pytest.raises(BundleError, match=r"a run directory: its bundle is .*run/bundle"):
        load_bundle(run)
    with pytest.raises(BundleError) as e:
        load_bundle(tmp_path)
    assert str(e.value).endswith(f"no bundle.yaml in {tmp_path}")  # a plain folder: no guess
