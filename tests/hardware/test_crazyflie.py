"""The Crazyflie: the twin's firmware side of CRTP by hand over a raw UDP socket, cflib's
connection sequence and the driver against it, and the deploy runner driving it."""

from __future__ import annotations

import math
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from fixtures import bundles
from fixtures.flying import fly, wait_for
from simreal.action_modes import hover_thrust_n
from simreal.errors import ConfigError
from simreal.hardware.crazyflie.driver import CrazyflieConfig, CrazyflieRobot
from simreal.hardware.crazyflie.twin import COMMANDER, E2BIG, EEXIST, ENOENT, LOG, PARAM, CrazyflieTwin, header
from simreal.hardware.robot import HardwareError
from simreal.robot_spec import load_robot_spec

SPEC = load_robot_spec("crazyflie2")
HOVER = np.array([hover_thrust_n(SPEC) * 4, 0.0, 0.0, 0.0])


@pytest.fixture()
def cache(tmp_path):
    return str(tmp_path / "toc")


def crazyflie(twin: CrazyflieTwin, cache: str, **kw) -> CrazyflieRobot:
    return CrazyflieRobot(
        CrazyflieConfig(robot="crazyflie2", uri=twin.uri, toc_cache=cache, connect_timeout_s=5.0, **kw)
    )


class Radio:
    """A raw CRTP client: one packet per datagram, as cflib's UDP link sends them."""

    def __init__(self, twin: CrazyflieTwin):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(5.0)  # a reply, not its latency: on a loaded CI core the twin may start late
        self.sock.connect(("127.0.0.1", twin.port))

    def ask(self, port: int, channel: int, payload: bytes) -> bytes:
        self.sock.send(bytes([header(port, channel)]) + payload)
        while True:
            reply = self.sock.recv(64)
            if reply[0] == header(port, channel):
                return reply[1:]

    def send(self, port: int, channel: int, payload: bytes) -> None:
        self.sock.send(bytes([header(port, channel)]) + payload)


# -- the twin, by hand -----------------------------------------------------------------------------
def test_headers_and_the_link_handshake_by_hand():
    assert header(COMMANDER, 0) == 0x3C and header(LOG, 2) == 0x5E and header(15, 1) == 0xFD
    with CrazyflieTwin() as twin:
        radio = Radio(twin)
        assert radio.ask(15, 1, b"\x00") == b"Bitcraze Crazyflie"  # link source: who is there
        assert radio.ask(13, 1, b"\x00")[0] == 0 and radio.ask(13, 1, b"\x00")[1] >= 4  # protocol version
        assert radio.ask(4, 0, b"\x01") == b"\x01\x00"  # no memories
        assert radio.ask(15, 0, b"ping") == b"ping"  # echo
        count, crc = struct.unpack("<HI", radio.ask(LOG, 0, b"\x03")[1:7])
        assert count == 13
        item = radio.ask(LOG, 0, bytes([2, 12, 0]))  # the last log variable
        assert item == bytes([2, 12, 0, 7]) + b"gyro\x00z\x00"  # float gyro.z
        assert radio.ask(PARAM, 0, bytes([2, 1, 0])) == bytes([2, 1, 0, 0x08]) + b"flightmode\x00stabModePitch\x00"
        assert radio.ask(PARAM, 1, bytes([1, 0])) == bytes([1, 0, 0, 1])  # ANGLE, the firmware's default
        assert radio.ask(PARAM, 2, bytes([1, 0, 0])) == bytes([1, 0, 0])  # write RATE: echoed
        assert twin.param("flightmode.stabModePitch") == 0


def test_log_blocks_answer_with_the_firmwares_errno():
    with CrazyflieTwin() as twin:
        radio = Radio(twin)
        create = lambda block, ids: radio.ask(LOG, 1, bytes([6, block]) + b"".join(bytes([7, i, 0]) for i in ids))  # noqa: E731
        assert create(1, [0, 1, 2]) == bytes([6, 1, 0])
        assert create(1, [3]) == bytes([6, 1, EEXIST])
        assert create(2, [99]) == bytes([6, 2, ENOENT])
        assert create(3, range(7)) == bytes([6, 3, E2BIG])  # 28 bytes of floats > 26
        assert radio.ask(LOG, 1, bytes([3, 9, 5])) == bytes([3, 9, ENOENT])  # start an unknown block
        assert radio.ask(LOG, 1, bytes([3, 1, 5])) == bytes([3, 1, 0])  # every 50 ms
        data = radio.ask(LOG, 2, b"")  # nothing sent: the next log packet
        assert data[0] == 1 and len(data) == 4 + 12
        x, y, z = struct.unpack("<fff", data[4:])
        assert (x, y, z) == pytest.approx((0.0, 0.0, 1.0))
        assert radio.ask(LOG, 1, bytes([5]))[0] == 5 and not twin.blocks  # reset


def test_rpyt_thrust_lock_and_rate_mode_as_the_firmware_decodes_them():
    with CrazyflieTwin() as twin:
        radio = Radio(twin)
        rpyt = lambda r, p, y, t: radio.send(COMMANDER, 0, struct.pack("<fffH", r, p, y, t))  # noqa: E731
        for i in range(3):
            radio.ask(PARAM, 2, bytes([i, 0, 0]))  # roll, pitch, yaw in RATE mode
        rpyt(10.0, 20.0, 30.0, 30000)
        assert wait_for(lambda: twin.setpoints == 1, 1.0)
        assert twin.setpoint[0] == 0.0 and not twin.released  # thrust locked: no zero-thrust packet yet
        rpyt(0.0, 0.0, 0.0, 0)
        rpyt(10.0, 20.0, 30.0, 30000)
        assert wait_for(lambda: twin.setpoints == 3, 1.0)
        np.testing.assert_allclose(twin.setpoint, [30000 / 65535 * 0.6, *np.radians([10.0, -20.0, -30.0])])
        assert twin.released
        rpyt(0.0, 0.0, 0.0, 500)  # below MIN_THRUST: 0
        rpyt(0.0, 0.0, 0.0, 65000)  # above MAX_THRUST: 60000
        assert wait_for(lambda: twin.setpoints == 5, 1.0)
        assert twin.setpoint[0] == pytest.approx(60000 / 65535 * 0.6)
        radio.ask(PARAM, 2, bytes([0, 0, 1]))  # roll back in ANGLE mode: no attitude loop here
        rpyt(5.0, 0.0, 0.0, 30000)
        assert wait_for(lambda: twin.unsupported == 1, 1.0)


# -- the driver through cflib ----------------------------------------------------------------------
def test_connect_sets_rate_mode_and_logs_at_the_requested_period(cache):
    with CrazyflieTwin(start_pos_w=(0.3, -0.2, 1.5)) as twin, crazyflie(twin, cache, log_period_ms=20) as robot:
        assert [twin.param(f"flightmode.stabMode{a}") for a in ("Roll", "Pitch", "Yaw")] == [0, 0, 0]
        assert sorted(twin.periods.values()) == [0.02] * 3
        s = robot.observation()
        np.testing.assert_allclose(s["pos_w"], [0.3, -0.2, 1.5], atol=1e-6)
        np.testing.assert_allclose(s["quat_wxyz"], [1.0, 0.0, 0.0, 0.0], atol=1e-6)
        assert time.monotonic() - s["t_s"] < 0.05
        before = dict(robot.received)
        time.sleep(1.0)
        counts = {k: robot.received[k] - before[k] for k in before}
        assert all(38 <= n <= 52 for n in counts.values()), counts  # 50 Hz; a loaded machine delays some
        assert twin.setpoints == 0 and not twin.released  # connect flies nothing


def test_the_firmwares_units_on_the_wire_then_arm_and_hover(cache):
    with CrazyflieTwin() as twin, crazyflie(twin, cache) as robot:
        u = np.array([0.3, 0.5, -0.25, 1.0])
        sent = robot.send_action(u)
        assert wait_for(lambda: twin.setpoints == 1, 1.0)
        # roll deg(p); pitch deg(q), which cflib negates on the wire; yaw rate -deg(r); thrust 0.3 of 0.6 N
        np.testing.assert_allclose(twin.rpyt, [28.64789, 14.32394, -57.29578, 32768], rtol=1e-6)
        np.testing.assert_allclose(sent, [32768 / 65535 * 0.6, 0.5, -0.25, 1.0], rtol=1e-6)
        np.testing.assert_allclose(twin.setpoint[1:], sent[1:], rtol=1e-6)  # the firmware reads the same FLU rates
        assert twin.setpoint[0] == 0.0 and not twin.released  # but thrust stays locked until arm()
        robot.arm()
        z0 = robot.observation()["pos_w"][2]
        fly(robot, HOVER, 1.0)
        s = robot.observation()
        assert twin.released
        assert abs(s["pos_w"][2] - z0) < 0.05 and np.linalg.norm(s["pos_w"][:2]) < 0.02, s["pos_w"]
        np.testing.assert_allclose(s["pos_w"], twin.true_state()["pos_w"], atol=0.01)


def test_body_rate_commands_turn_the_vehicle_the_right_way(cache):
    with CrazyflieTwin() as twin, crazyflie(twin, cache) as robot:
        robot.arm()
        fly(robot, HOVER + [0.0, 0.0, 0.0, 1.0], 0.4)  # yaw left (FLU +z)
        s = robot.observation()
        assert 0.7 < s["ang_vel_b"][2] < 1.1, s["ang_vel_b"]
        assert 0.15 < 2 * math.atan2(s["quat_wxyz"][3], s["quat_wxyz"][0]) < 0.45
        fly(robot, HOVER + [0.0, 0.0, 0.5, 0.0], 0.3)  # pitch about +y (left): nose down
        s = robot.observation()
        assert s["ang_vel_b"][1] > 0.3, s["ang_vel_b"]
        nose_w = twin.true_state()["quat_wxyz"]
        w, x, y, z = nose_w
        assert 2 * (x * z - w * y) < -0.05  # the nose (body x) points below the horizon


def test_the_commander_watchdog_levels_then_stops_the_motors(cache):
    with CrazyflieTwin(watchdog_s=(0.2, 0.8)) as twin, crazyflie(twin, cache) as robot:
        robot.arm()
        fly(robot, HOVER + [0.0, 1.0, 0.0, 0.0], 0.25)  # roll right wing down, then fall silent
        tilt = lambda: abs(twin.true_state()["quat_wxyz"][1])  # noqa: E731
        tilted = tilt()
        assert tilted > 0.05
        time.sleep(0.5)  # levelled for 0.3 s
        assert tilt() < tilted / 2, (tilted, tilt())
        assert wait_for(
            lambda: twin.true_state()["lin_vel_w"][2] < -0.5 or twin.true_state()["pos_w"][2] == 0.0, 1.5
        )  # motors stopped: it falls
        n = twin.setpoints
        robot.send_action(HOVER)  # thrust locked again: the commander had shut down
        assert wait_for(lambda: twin.setpoints == n + 1, 1.0) and twin.setpoint[0] == 0.0
        robot.arm()
        robot.send_action(HOVER)
        assert wait_for(lambda: twin.setpoints == n + 3, 1.0) and twin.setpoint[0] == pytest.approx(HOVER[0], 1e-4)


def test_disconnect_sends_zero_thrust(cache):
    with CrazyflieTwin() as twin:
        with crazyflie(twin, cache) as robot:
            robot.arm()
            fly(robot, HOVER, 0.2)
        assert wait_for(lambda: twin.rpyt == (0.0, 0.0, 0.0, 0), 1.0)  # zero thrust and rates
        assert wait_for(lambda: twin.true_state()["pos_w"][2] < 0.8, 1.0)  # motors off: it falls


def test_connect_errors_are_one_line(cache):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # a bound port nobody answers on
        silent.bind(("127.0.0.1", 0))
        uri = f"udp://127.0.0.1:{silent.getsockname()[1]}"
        robot = CrazyflieRobot(CrazyflieConfig(robot="crazyflie2", uri=uri, toc_cache=cache, connect_timeout_s=0.3))
        t0 = time.monotonic()
        with pytest.raises(HardwareError) as e:
            robot.connect()
        assert time.monotonic() - t0 < 2.5 and not robot.connected
        assert silent.recv(64)[0] == header(15, 1)  # cflib asked who is there
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"Crazyflie on {uri}: no answer to cflib's connection sequence")
    with pytest.raises(HardwareError, match=r"Crazyflie on usb:/nowhere: the link failed \(No driver found"):
        CrazyflieRobot(CrazyflieConfig(robot="crazyflie2", uri="usb:/nowhere", toc_cache=cache)).connect()
    with pytest.raises(ConfigError, match="log_period_ms.*10 ms"):
        CrazyflieRobot(CrazyflieConfig(robot="crazyflie2", log_period_ms=15))


def test_a_refused_link_is_our_one_line_not_cflib_s_traceback(cache):
    """cflib logged the failure with its traceback through Python's last-resort handler, and the
    radio's reason ended in 'Traceback (most recent call last):'."""
    import subprocess
    import sys

    from simreal.hardware.crazyflie.driver import link_error_reason

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # a port with nobody bound to it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "from simreal.hardware.crazyflie.driver import CrazyflieConfig, CrazyflieRobot\n"
        "from simreal.hardware.robot import HardwareError\n"
        f"r = CrazyflieRobot(CrazyflieConfig(robot='crazyflie2', uri='udp://127.0.0.1:{port}', "
        f"toc_cache={str(cache)!r}, connect_timeout_s=1.0))\n"
        "try:\n    r.connect()\nexcept HardwareError as e:\n    print(e)\n"
    )
    # a process of its own: pytest's log capture would stand in for the last-resort handler
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("Crazyflie on udp://") and "Traceback" not in out.stdout, out
    assert out.stderr == "", out.stderr
    assert (
        link_error_reason("Cannot find a Crazyradio Dongle\nTraceback (most recent call last):\n  File x")
        == "Cannot find a Crazyradio Dongle"
    )


def test_a_firmware_without_a_log_variable_is_named(cache):
    with CrazyflieTwin() as twin:
        twin.log_toc = twin.log_toc[:10]  # no gyro group
        with pytest.raises(HardwareError, match="the firmware has no gyro.x, gyro.y, gyro.z"):
            crazyflie(twin, cache).connect()


# -- the deploy runner on the twin -----------------------------------------------------------------
def test_drive_runs_a_ctbr_hover_bundle_through_the_drivers_table(tmp_path, cache):
    from simreal.bundle import load_bundle
    from simreal.deploy.runner import PolicyRunner
    from simreal.hardware.drive import drive
    from simreal.hardware.drivers import open_robot

    bundle = load_bundle(bundles.make_ctbr_hover_bundle(tmp_path / "b"))
    runner = PolicyRunner(bundle, overrides={"start": {"initial_command": "hover", "ramp_s": 0.2}})
    with open_robot("crazyflie", "crazyflie2", {"toc_cache": cache}, twin=True) as robot:
        robot.arm()
        report = drive(robot, runner, duration_s=1.5)
        s = robot.observation()
    assert report.read_errors == 0 and report.sent == report.ticks and report.ticks >= 100
    assert report.final_mode == "estop"
    assert abs(s["pos_w"][2] - 1.0) < 0.1 and np.linalg.norm(s["pos_w"][:2]) < 0.05, s["pos_w"]


def test_twin_serves_from_its_command_line(cache):
    proc = subprocess.Popen(
        [sys.executable, "-m", "simreal.hardware.crazyflie.twin", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        uri = line.split(" on ")[1].split(";")[0]
        robot = CrazyflieRobot(CrazyflieConfig(robot="crazyflie2", uri=uri, toc_cache=cache, connect_timeout_s=5.0))
        with robot:
            np.testing.assert_allclose(robot.observation()["pos_w"], [0.0, 0.0, 1.0], atol=1e-6)
    finally:
        proc.terminate()
        proc.wait(10)
    assert line.startswith("Crazyflie twin of crazyflie2 on udp://127.0.0.1:")
