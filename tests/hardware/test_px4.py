"""PX4 over MAVLink: the NED/FRD <-> ENU/FLU conversions by hand and against rotation matrices,
the driver against the twin over UDP loopback, and the deploy runner driving it."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from fixtures import bundles
from fixtures.flying import fly, wait_for
from simreal.action_modes import hover_thrust_n, total_thrust_n
from simreal.errors import ConfigError
from simreal.hardware.px4.common import AUTO, AUTO_LAND, OFFBOARD, mode_name
from simreal.hardware.px4.mavlink import PX4Config, PX4Robot, custom_mode, mavlink, mode_of
from simreal.hardware.px4.mavlink_twin import PX4Twin
from simreal.hardware.robot import HardwareError
from simreal.ned_frames import swap_attitude, swap_frd_flu, swap_ned_enu
from simreal.robot_spec import load_robot_spec
from simreal.rotations import quat_to_rotmat

SPEC = load_robot_spec("crazyflie2")
HOVER = np.array([hover_thrust_n(SPEC) * 4, 0.0, 0.0, 0.0])
P = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # ENU from NED
D = np.diag([1.0, -1.0, -1.0])  # FRD from FLU (and back)


def px4(twin: PX4Twin, **kw) -> PX4Robot:
    """The driver on the twin; state_timeout_s 0.5 s unless given: on a loaded 2-core machine the
    twin's stream stalled 0.27 s once inside a hover (the stale check's own test sets 0.05 s)."""
    kw.setdefault("state_timeout_s", 0.5)
    return PX4Robot(PX4Config(robot="crazyflie2", connection=twin.connection, **kw))


def take_off(robot: PX4Robot) -> None:
    """The hand-over: a set-point stream, OFFBOARD, armed."""
    robot.send_action(HOVER)
    robot.set_offboard()
    robot.arm()


# -- frames ----------------------------------------------------------------------------------------
def axis_angle(axis, angle: float) -> np.ndarray:
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    return np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])


def test_level_vehicle_facing_north_is_yaw_90_deg_in_enu():
    np.testing.assert_allclose(swap_attitude([1.0, 0.0, 0.0, 0.0]), axis_angle([0, 0, 1], math.pi / 2))
    # facing east is yaw 90 deg for PX4 (about z down) and yaw 0 in ENU
    np.testing.assert_allclose(swap_attitude(axis_angle([0, 0, 1], math.pi / 2)), [1.0, 0.0, 0.0, 0.0], atol=1e-15)


def test_pitched_nose_up_moving_north_maps_to_enu_and_flu():
    theta = 0.3  # nose up, heading north; PX4: pitch > 0 about FRD y (right)
    q_ned = axis_angle([0, 1, 0], theta)
    R = quat_to_rotmat(swap_attitude(q_ned), np)
    np.testing.assert_allclose(R[:, 0], [0.0, math.cos(theta), math.sin(theta)], atol=1e-12)  # nose: north and up
    np.testing.assert_allclose(R[:, 1], [-1.0, 0.0, 0.0], atol=1e-12)  # left wing: west
    np.testing.assert_allclose(swap_ned_enu([2.0, 0.0, 0.0]), [0.0, 2.0, 0.0])  # 2 m/s north
    np.testing.assert_allclose(swap_ned_enu([1.0, 2.0, -3.0]), [2.0, 1.0, 3.0])  # 3 m up
    # pitching further up (q > 0 in FRD) is a negative rate about FLU y (left)
    np.testing.assert_allclose(swap_frd_flu([0.0, 0.5, 0.0]), [0.0, -0.5, 0.0])


def test_roll_right_lifts_the_left_wing():
    phi = 0.2  # right wing down: +roll about FRD x (forward) is +roll about FLU x too
    R = quat_to_rotmat(swap_attitude(axis_angle([1, 0, 0], phi)), np)
    assert R[2, 1] == pytest.approx(math.sin(phi))  # FLU y (left) gains height
    np.testing.assert_allclose(swap_frd_flu([0.4, 0.0, -0.1]), [0.4, 0.0, 0.1])  # yaw right (r > 0) is yaw -z in FLU


def test_conversions_match_rotation_matrices_and_are_their_own_inverse():
    rng = np.random.default_rng(0)
    for q in rng.normal(size=(20, 4)):
        q /= np.linalg.norm(q)
        q_enu = swap_attitude(q)
        np.testing.assert_allclose(quat_to_rotmat(q_enu, np), P @ quat_to_rotmat(q, np) @ D, atol=1e-12)
        np.testing.assert_allclose(swap_attitude(q_enu), q, atol=1e-15)
    v = rng.normal(size=(5, 3))
    np.testing.assert_allclose(swap_ned_enu(v), v @ P.T)
    np.testing.assert_allclose(swap_ned_enu(swap_ned_enu(v)), v)
    np.testing.assert_allclose(swap_frd_flu(swap_frd_flu(v)), v)


def test_body_rates_by_finite_difference():
    """Turn a NED attitude by an FRD body rate for dt; the ENU attitudes differ by the FLU rate."""
    rng = np.random.default_rng(1)
    dt = 1e-6
    for _ in range(5):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        w_frd = rng.normal(size=3)
        R0 = quat_to_rotmat(q, np)
        R1 = R0 @ quat_to_rotmat(axis_angle(w_frd, np.linalg.norm(w_frd) * dt), np)  # body-frame increment
        E0, E1 = quat_to_rotmat(swap_attitude(q), np), P @ R1 @ D
        skew = E0.T @ (E1 - E0) / dt  # [w_flu]_x
        np.testing.assert_allclose([skew[2, 1], skew[0, 2], skew[1, 0]], swap_frd_flu(w_frd), atol=1e-5)


def test_custom_mode_bytes():
    assert custom_mode(OFFBOARD) == 393216  # the number every offboard example compares with
    assert custom_mode(AUTO, AUTO_LAND) == (4 << 16) | (6 << 24)
    assert mode_of(custom_mode(AUTO, AUTO_LAND)) == (AUTO, AUTO_LAND)
    assert mode_name(*mode_of(393216)) == "OFFBOARD" and mode_name(AUTO, AUTO_LAND) == "AUTO.LAND"


# -- the driver against the twin -------------------------------------------------------------------
def test_connect_streams_state_at_the_requested_rate():
    with PX4Twin("crazyflie2", start_pos_w=(0.5, -0.25, 1.2)) as twin, px4(twin, stream_rate_hz=50.0) as robot:
        assert twin.intervals == {
            mavlink.MAVLINK_MSG_ID_ATTITUDE_QUATERNION: 0.02,
            mavlink.MAVLINK_MSG_ID_LOCAL_POSITION_NED: 0.02,
        }
        s = robot.observation()
        np.testing.assert_allclose(s["pos_w"], [0.5, -0.25, 1.2], atol=1e-6)
        np.testing.assert_allclose(s["quat_wxyz"], [1.0, 0.0, 0.0, 0.0], atol=1e-6)  # the model's start: facing east
        np.testing.assert_allclose(s["lin_vel_w"], 0.0, atol=1e-6)
        assert time.monotonic() - s["t_s"] < 0.05
        before = dict(robot.received)
        time.sleep(1.0)
        counts = {k: robot.received[k] - before[k] for k in ("ATTITUDE_QUATERNION", "LOCAL_POSITION_NED")}
        assert all(38 <= n <= 52 for n in counts.values()), counts  # 50 Hz; a loaded machine delays some
        assert robot.flight_mode == "AUTO.LOITER" and not robot.armed  # connect changed nothing
        assert twin.setpoints == 0 and not twin.released


def test_offboard_is_refused_without_a_setpoint_stream_then_hover_holds_altitude():
    with PX4Twin("crazyflie2") as twin, px4(twin) as robot:
        with pytest.raises(HardwareError, match="TEMPORARILY_REJECTED to OFFBOARD .*send_action"):
            robot.set_offboard()
        assert twin.mode != (OFFBOARD, 0)
        take_off(robot)
        assert twin.armed and twin.mode == (OFFBOARD, 0) and twin.released
        z0 = robot.observation()["pos_w"][2]
        fly(robot, HOVER, 1.0)
        s = robot.observation()
        assert abs(s["pos_w"][2] - z0) < 0.05 and np.linalg.norm(s["pos_w"][:2]) < 0.02, s["pos_w"]
        np.testing.assert_allclose(s["pos_w"], twin.true_state()["pos_w"], atol=0.01)  # the stream is fresh
        assert wait_for(lambda: robot.flight_mode == "OFFBOARD" and robot.armed, 1.5)  # the next HEARTBEAT says so


def test_body_rate_command_turns_the_vehicle_the_right_way():
    with PX4Twin("crazyflie2") as twin, px4(twin) as robot:
        take_off(robot)
        fly(robot, HOVER + [0.0, 0.0, 0.0, 1.0], 0.5)  # yaw left (FLU +z) at 1 rad/s
        s = robot.observation()
        assert 0.7 < s["ang_vel_b"][2] < 1.1, s["ang_vel_b"]
        yaw = 2 * math.atan2(s["quat_wxyz"][3], s["quat_wxyz"][0])
        assert 0.25 < yaw < 0.55  # about half a second at up to 1 rad/s, counter-clockwise from above
        assert twin.true_state()["ang_vel_b"][2] > 0.7


def test_send_action_returns_the_float32_setpoint_the_twin_received():
    with PX4Twin("crazyflie2") as twin, px4(twin) as robot:
        u = np.array([0.2, 0.3, -0.7, 1.1])
        sent = robot.send_action(u)
        np.testing.assert_allclose(sent, u, rtol=1e-6)
        assert wait_for(lambda: twin.setpoints > 0, 1.0)
        np.testing.assert_allclose(twin.setpoint, sent, rtol=1e-12)  # FLU in, FRD on the wire, FLU out
        over = robot.send_action(np.array([9.0, 99.0, 0.0, 0.0]))  # clamped to the spec's limits first
        assert over[0] == pytest.approx(total_thrust_n(SPEC)) and over[1] == SPEC.physical["max_body_rate_rad_s"]


def test_disconnect_sends_zero_thrust_and_the_twin_fails_over_to_land():
    with PX4Twin("crazyflie2", offboard_loss_s=0.3) as twin:
        with px4(twin) as robot:
            take_off(robot)
            fly(robot, HOVER, 0.2)
        assert wait_for(lambda: not twin.setpoint.any(), 0.5)  # zero thrust, zero rates
        n = twin.setpoints
        time.sleep(0.15)
        np.testing.assert_array_equal(twin.setpoint, 0.0)  # ... and the last set-point
        assert twin.setpoints == n  # the stream stopped with the link
        assert twin.true_state()["lin_vel_w"][2] < -0.8  # falling
        assert wait_for(lambda: twin.mode == (AUTO, AUTO_LAND), 1.0)  # COM_OF_LOSS_T later: the failsafe
        assert wait_for(lambda: not twin.armed, 3.0)  # landed (or fell) and disarmed


def test_reconnect_after_disconnect():
    with PX4Twin("crazyflie2") as twin:
        robot = px4(twin)
        with robot:
            robot.send_action(HOVER)
        assert wait_for(lambda: twin.setpoints >= 2 and not twin.setpoint.any(), 1.0)  # hover, then the safe command
        with robot:  # a fresh handshake: streams, state, a new set-point
            assert robot.received["HEARTBEAT"] >= 1 and robot.observation()["pos_w"][2] == pytest.approx(1.0)
            robot.send_action(HOVER)
            assert wait_for(lambda: twin.setpoint[0] == pytest.approx(HOVER[0], rel=1e-6), 1.0)
        assert wait_for(lambda: not twin.setpoint.any(), 1.0)  # the safe command again


def test_disarm_in_the_air_needs_force():
    with PX4Twin("crazyflie2") as twin, px4(twin) as robot:
        take_off(robot)
        fly(robot, HOVER, 0.1)
        with pytest.raises(HardwareError, match="TEMPORARILY_REJECTED to disarm; PX4 disarms only when landed"):
            robot.disarm()
        assert twin.armed
        robot.disarm(force=True)
        assert not twin.armed
        assert wait_for(lambda: twin.true_state()["lin_vel_w"][2] < -0.5, 1.0)  # motors off: it falls


def test_a_silent_stream_makes_observation_raise():
    with PX4Twin("crazyflie2") as twin, px4(twin, state_timeout_s=0.05) as robot:
        robot.observation()
        assert (
            robot.command(mavlink.MAV_CMD_SET_MESSAGE_INTERVAL, mavlink.MAVLINK_MSG_ID_LOCAL_POSITION_NED, -1)
            == mavlink.MAV_RESULT_ACCEPTED
        )
        time.sleep(0.1)
        with pytest.raises(HardwareError, match=r"no LOCAL_POSITION_NED for \d+ ms"):
            robot.observation()
        # a stream the twin does not have, and a command it does not know, are answered as PX4 does
        assert (
            robot.command(mavlink.MAV_CMD_SET_MESSAGE_INTERVAL, mavlink.MAVLINK_MSG_ID_HIGHRES_IMU, 1e4)
            == mavlink.MAV_RESULT_FAILED
        )
        assert robot.command(mavlink.MAV_CMD_NAV_TAKEOFF) == mavlink.MAV_RESULT_UNSUPPORTED


def test_connect_timeout_is_one_line_naming_the_connection():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # a bound port nobody answers on
        silent.bind(("127.0.0.1", 0))
        connection = f"udpout:127.0.0.1:{silent.getsockname()[1]}"
        robot = PX4Robot(PX4Config(robot="crazyflie2", connection=connection, connect_timeout_s=0.3))
        t0 = time.monotonic()
        with pytest.raises(HardwareError) as e:
            robot.connect()
        assert time.monotonic() - t0 < 1.0 and not robot.connected
        assert silent.recv(512)[0] == 0xFD  # it did say hello, in MAVLink 2
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"PX4 on {connection}: no HEARTBEAT from an autopilot within 0.3 s")


def test_a_bad_connection_string_and_action_mode_are_one_line():
    with pytest.raises(HardwareError, match="PX4 on udpout:nowhere: cannot open the link"):
        PX4Robot(PX4Config(robot="crazyflie2", connection="udpout:nowhere")).connect()
    with pytest.raises(HardwareError, match="PX4 on /dev/ttyNOPE: cannot open the link .*No such file"):
        PX4Robot(PX4Config(robot="crazyflie2", connection="/dev/ttyNOPE")).connect()
    with pytest.raises(HardwareError, match="PX4 on udpin:0.0.0.0:99999: cannot open the link .*port"):
        PX4Robot(PX4Config(robot="crazyflie2", connection="udpin:0.0.0.0:99999")).connect()  # was OverflowError
    with pytest.raises(ConfigError, match="action_mode.*takes ctbr"):
        PX4Robot(PX4Config(robot="crazyflie2", action_mode="rotor_thrust"))


# -- the deploy runner on the twin -----------------------------------------------------------------
def test_drive_runs_a_ctbr_hover_bundle_through_the_drivers_table(tmp_path):
    from simreal.bundle import load_bundle
    from simreal.deploy.runner import PolicyRunner
    from simreal.hardware.drive import drive
    from simreal.hardware.drivers import open_robot

    bundle = load_bundle(bundles.make_ctbr_hover_bundle(tmp_path / "b"))
    runner = PolicyRunner(bundle, overrides={"start": {"initial_command": "hover", "ramp_s": 0.2}})
    with open_robot("px4", "crazyflie2", twin=True) as robot:
        report = drive(robot, runner, duration_s=1.5)  # drive's hand-over: OFFBOARD, armed
        s = robot.observation()
    assert report.read_errors == 0 and report.sent == report.ticks and report.ticks >= 100
    assert report.final_mode == "estop"
    assert abs(s["pos_w"][2] - 1.0) < 0.1 and np.linalg.norm(s["pos_w"][:2]) < 0.05, s["pos_w"]


def test_twin_serves_from_its_command_line():
    proc = subprocess.Popen(
        [sys.executable, "-m", "simreal.hardware.px4.mavlink_twin", "--robot", "crazyflie2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        connection = line.split("connection=")[1].split(")")[0]
        with PX4Robot(PX4Config(robot="crazyflie2", connection=connection)) as robot:
            np.testing.assert_allclose(robot.observation()["pos_w"], [0.0, 0.0, 1.0], atol=1e-6)
    finally:
        proc.terminate()
        proc.wait(10)
    assert line.startswith("PX4 twin of crazyflie2 on udp 127.0.0.1:")
