"""Unitree G1 / H1 low level over DDS: the IDL and CRC against unitree_sdk2's, the driver's
LowCmd, and the twin and driver end to end on loopback (plus a short benchmark run)."""

from __future__ import annotations

import dataclasses
import importlib.util
import struct
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cyclonedds")
pytest.importorskip("mujoco")

from fixtures import bundles as T  # noqa: E402
from simreal.errors import ConfigError  # noqa: E402
from simreal.hardware.robot import HardwareError  # noqa: E402
from simreal.hardware.unitree import msgs as um  # noqa: E402
from simreal.hardware.unitree.driver import (  # noqa: E402
    MOTORS,
    UnitreeConfig,
    UnitreeRobot,
    base_to_imu,
    imu_to_base,
    low_level,
    motor_slots,
)
from simreal.robot_spec import load_robot_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = (um.HgLowCmd_, um.HgLowState_, um.GoLowCmd_, um.GoLowState_)


def sdk_crc32_core(words) -> int:
    """unitree_sdk2py.utils.crc.CRC._crc_py, restated: the bitwise reference."""
    crc, poly = 0xFFFFFFFF, 0x04C11DB7
    for current in words:
        bit = 1 << 31
        for _ in range(32):
            crc = ((crc << 1) & 0xFFFFFFFF) ^ (poly if crc & 0x80000000 else 0)
            if current & bit:
                crc ^= poly
            bit >>= 1
    return crc


def fixed_hg_lowcmd() -> np.ndarray:
    """mode_machine 5; motor i < 29: mode 1, q 0.01 i - 0.1, tau 0.5 every third, kp 40 + i, kd 1 + 0.1 i."""
    cmd = um.codec(um.HgLowCmd_).zeros()
    cmd["mode_machine"] = 5
    mc, i = cmd["motor_cmd"], np.arange(29)
    mc["mode"][:29], mc["q"][:29], mc["tau"][:29] = 1, 0.01 * i - 0.1, np.where(i % 3 == 0, 0.5, 0.0)
    mc["kp"][:29], mc["kd"][:29] = 40.0 + i, 1.0 + 0.1 * i
    return cmd


def fixed_go_lowcmd() -> np.ndarray:
    """head FE EF, level_flag FF; motor i: mode 0x0A (i < 10) or 1, q 0.02 i, kp 100, kd 2."""
    cmd = um.codec(um.GoLowCmd_).zeros()
    cmd["head"], cmd["level_flag"] = (0xFE, 0xEF), 0xFF
    mc, i = cmd["motor_cmd"], np.arange(20)
    mc["mode"], mc["q"], mc["kp"], mc["kd"] = np.where(i < 10, 0x0A, 1), 0.02 * i, 100.0, 2.0
    return cmd


def random_record(cls, rng: np.random.Generator) -> np.ndarray:
    rec = um.codec(cls).zeros()

    def fill(a):
        if a.dtype.names:
            for n in a.dtype.names:
                fill(a[n])
        elif a.dtype.kind == "f":
            a[...] = rng.normal(size=a.shape)
        else:
            a[...] = rng.integers(0, min(np.iinfo(a.dtype).max, 10_000), size=a.shape)

    fill(rec)
    return rec


# -- CRC ---------------------------------------------------------------------------------------------
def test_crc32_core_is_the_sdks_bitwise_crc():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 64):
        words = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        assert um.crc32_core(words) == sdk_crc32_core(words.tolist())
    assert um.crc32_core(np.zeros(0, np.uint32)) == 0xFFFFFFFF


def test_crc_covers_the_sdks_packing_and_matches_its_values():
    """The C layout is the SDK's struct.pack format byte for byte; the CRCs are what
    unitree_sdk2py's crc_amd64.so returned for the same messages."""
    cmd = fixed_hg_lowcmd()
    mc = cmd["motor_cmd"]
    values = [int(cmd["mode_pr"]), int(cmd["mode_machine"])]
    for k in range(35):
        values += [
            int(mc["mode"][k]),
            *(float(mc[f][k]) for f in ("q", "dq", "tau", "kp", "kd")),
            int(mc["reserve"][k]),
        ]
    values += [0, 0, 0, 0, 0]  # reserve[4], crc
    assert cmd.tobytes() == struct.pack("<2B2x" + "B3x5fI" * 35 + "5I", *values)  # unitree_sdk2py/utils/crc.py
    assert um.message_crc(cmd) == 1586150051
    assert um.message_crc(fixed_go_lowcmd()) == 2991010909
    words = np.frombuffer(cmd.tobytes(), "<u4")[:-1]
    assert um.message_crc(cmd) == sdk_crc32_core(words.tolist())


def test_a_corrupted_message_fails_its_crc():
    cmd = fixed_hg_lowcmd()
    cmd["crc"] = um.message_crc(cmd)
    codec = um.codec(um.HgLowCmd_)
    data = bytearray(codec.encode(cmd))
    assert um.crc_ok(codec.decode(bytes(data)))
    data[40] ^= 0x04  # one bit of motor 1's fields
    assert not um.crc_ok(codec.decode(bytes(data)))
    with pytest.raises(um.CrcError, match="crc"):
        codec.decode(bytes(data), check_crc=True)
    with pytest.raises(um.WireError, match="LowCmd_"):
        codec.decode(b"\x01\x01\x00\x00" + bytes(data[4:]))  # big endian: not what the robot sends


# -- IDL ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_codec_bytes_are_the_bindings_serialization(cls):
    rec = random_record(cls, np.random.default_rng(1))
    codec = um.codec(cls)
    data = codec.encode(rec)
    msg = cls.deserialize(data)  # cyclonedds's own XCDR1 reader
    assert msg.serialize(use_version_2=False) == data  # and writer, byte for byte
    assert codec.decode(data).tobytes() == rec.tobytes()
    assert float(msg.motor_state[3].q if hasattr(msg, "motor_state") else msg.motor_cmd[3].q) == float(
        rec["motor_state" if "motor_state" in rec.dtype.names else "motor_cmd"]["q"][3]
    )


def test_type_names_and_sizes_are_unitrees():
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.topic import Topic

    # (DDS type name, C struct size as unitree_sdk2py/utils/crc.py states it, wire payload)
    want = {
        um.HgLowCmd_: ("unitree_hg::msg::dds_::LowCmd_", 1004, 1000),
        um.HgLowState_: ("unitree_hg::msg::dds_::LowState_", 2092, 2088),
        um.GoLowCmd_: ("unitree_go::msg::dds_::LowCmd_", 812, 808),
        um.GoLowState_: ("unitree_go::msg::dds_::LowState_", 1180, 1176),
    }
    dp = DomainParticipant(T.random_domain_id())
    for cls, (name, c_size, wire) in want.items():
        codec = um.codec(cls)
        assert (codec.typename, codec.dtype.itemsize, len(codec.wire_from_c)) == (name, c_size, wire)
        assert Topic(dp, "rt/test_" + cls.__name__, cls).get_type_name() == name
    assert [f.name for f in um.HgMotorCmd_.__dataclass_fields__.values()] == [
        "mode",
        "q",
        "dq",
        "tau",
        "kp",
        "kd",
        "reserve",
    ]


# -- the driver's tables and LowCmd --------------------------------------------------------------------
def test_motor_slots_follow_unitrees_index():
    g1, h1, g1_23 = (load_robot_spec(n) for n in ("g1", "h1", "g1_23dof"))
    assert low_level("", g1).name == "unitree_hg" and low_level("", h1).name == "unitree_go"
    assert motor_slots(MOTORS["unitree_hg"], g1.actuator_names).tolist() == list(range(29))
    assert motor_slots(MOTORS["unitree_go"], h1.actuator_names).tolist() == [*range(9), *range(10, 20)]
    assert motor_slots(MOTORS["unitree_hg"], g1_23.actuator_names).tolist() == [
        *range(13),
        *range(15, 20),
        *range(22, 27),
    ]
    with pytest.raises(ConfigError, match="messages.*unitree_hg"):
        low_level("unitree_go", g1)


class _Capture:
    def __init__(self):
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)


def _offline(cfg: UnitreeConfig) -> UnitreeRobot:
    """A driver whose channel only records what it writes."""
    robot = UnitreeRobot(cfg)
    robot.chan, robot.connected = _Capture(), True
    return robot


def test_lowcmd_per_action_mode():
    spec = load_robot_spec("g1")
    kp = np.array([a.kp for a in spec.actuators])
    pos = _offline(UnitreeConfig("g1"))
    u = np.array([a.default for a in spec.actuators])
    u[3] = 99.0  # beyond the knee's range: clamped
    sent = pos.send_action(u)
    cmd = um.codec(um.HgLowCmd_).decode(pos.chan.sent[-1])
    mc = cmd["motor_cmd"]
    assert um.crc_ok(cmd) and sent[3] == pytest.approx(spec.actuators[3].range[1], abs=1e-6)
    np.testing.assert_allclose(mc["q"][:29], sent, atol=1e-6)
    np.testing.assert_allclose(mc["kp"][:29], kp)
    assert (mc["mode"][:29] == 1).all() and (mc["mode"][29:] == 0).all() and not mc["tau"].any()

    eff = _offline(UnitreeConfig("g1", action_mode="joint_effort"))
    eff.send_action(np.full(29, 1000.0))
    mc = um.codec(um.HgLowCmd_).decode(eff.chan.sent[-1])["motor_cmd"]
    np.testing.assert_allclose(mc["tau"][:29], [a.effort_limit for a in spec.actuators])
    assert not mc["kp"].any() and not mc["kd"].any() and not mc["q"].any()

    h1 = _offline(UnitreeConfig("h1", kp=(10.0,) * 19))
    h1.send_action(np.zeros(19))
    cmd = um.codec(um.GoLowCmd_).decode(h1.chan.sent[-1])
    assert um.crc_ok(cmd) and cmd["head"].tolist() == [0xFE, 0xEF] and cmd["level_flag"] == 0xFF
    assert cmd["motor_cmd"]["mode"].tolist() == [0x0A] * 9 + [0] + [0x01] * 10
    assert cmd["motor_cmd"]["kp"][9] == 0 and cmd["motor_cmd"]["kp"][10] == 10.0

    with pytest.raises(ConfigError, match="kd.*29"):
        UnitreeRobot(UnitreeConfig("g1", kd=(1.0, 2.0)))
    with pytest.raises(ConfigError, match="action_mode"):
        UnitreeRobot(UnitreeConfig("g1", action_mode="rotor_thrust"))


def test_a_mistyped_network_card_is_one_line_naming_the_setting(capfd):
    with pytest.raises(
        ConfigError,
        match=r"'network_interface': Cyclone DDS cannot start on 'nosuch0' .*"
        r"this machine's network interfaces: lo",
    ):
        UnitreeRobot(
            UnitreeConfig("g1", domain_id=T.random_domain_id(), network_interface="nosuch0", connect_timeout_s=0.2)
        ).connect()


def test_torso_imu_round_trip():
    rng = np.random.default_rng(2)
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w = rng.normal(size=3)
    qi, wi = base_to_imu(q, w, 0.7, -1.3)
    qb, wb = imu_to_base(qi, wi, 0.7, -1.3)
    np.testing.assert_allclose(qb, q, atol=1e-12)
    np.testing.assert_allclose(wb, w, atol=1e-12)
    qi, _ = base_to_imu(np.array([1.0, 0, 0, 0]), np.zeros(3), np.pi / 2, 0.0)  # torso turned 90 deg left
    np.testing.assert_allclose(qi, [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)], atol=1e-12)


# -- twin and driver over DDS ---------------------------------------------------------------------------
def _until(cond, timeout_s: float = 2.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


def _read_until_stale(robot: UnitreeRobot, within_s: float = 1.0) -> None:
    """Read until the newest LowState is older than ``state_timeout_s`` (the read raises), for at
    most ``within_s``."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        robot.observation()


def test_twin_and_driver_end_to_end():
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    spec = load_robot_spec("g1")
    home = np.array([a.default for a in spec.actuators])
    twin = UnitreeTwin(TwinConfig("g1", domain_id=domain, gantry="always"))
    with pytest.raises(HardwareError, match="no unitree_hg LowState on rt/lowstate"):
        UnitreeRobot(UnitreeConfig("g1", domain_id=domain, connect_timeout_s=0.2)).connect()
    with twin:
        robot = UnitreeRobot(UnitreeConfig("g1", domain_id=domain, check_state_crc=True))
        with robot:
            s = robot.observation()
            assert s["joint_pos"].shape == (29,) and set(s) == {
                "joint_pos",
                "joint_vel",
                "quat_wxyz",
                "ang_vel_b",
                "t_s",
            }
            np.testing.assert_allclose(s["joint_pos"], home, atol=0.02)  # the twin starts at home: spec order
            np.testing.assert_allclose(s["quat_wxyz"], [1, 0, 0, 0], atol=1e-3)  # on the gantry, upright
            target = home.copy()
            moved = [spec.actuator_names.index(n) for n in ("left_knee_joint", "right_elbow_joint", "waist_yaw_joint")]
            target[moved] += [0.5, -0.4, 0.3]
            for _ in range(250):  # 0.5 s at the state rate
                robot.observation()
                robot.send_action(target)
            err = np.abs(twin.joint_pos() - target)
            assert err[moved].max() < 0.1, err  # from 0.3-0.5 rad away
            assert robot.cmd["mode_machine"] == 5 and robot.states_bad == 0

            bad = robot.cmd.copy()  # a wild pose with a wrong CRC: ignored
            bad["motor_cmd"]["q"][moved] = -1.0
            bad["crc"] = um.message_crc(bad) ^ 1
            before = twin.stats.commands_bad_crc
            robot.chan.write(robot.wire.cmd.encode(bad))
            assert _until(lambda: twin.stats.commands_bad_crc == before + 1)
            time.sleep(0.1)
            assert np.abs(twin.joint_pos() - target)[moved].max() < 0.1
            applied = twin.stats.commands_applied
            held = robot.observation()["joint_pos"]
        assert _until(lambda: twin.stats.commands_applied == applied + 1)  # disconnect: hold the measured pose
        last = twin.last_command["motor_cmd"]
        np.testing.assert_allclose(last["q"][:29], held, atol=1e-6)
        np.testing.assert_allclose(last["kp"][:29], [a.kp for a in spec.actuators])
        robot.connect()
    with pytest.raises(HardwareError, match="no new LowState"):  # the twin stopped (after what was in flight)
        _read_until_stale(robot)
    robot.disconnect()
    assert twin.stats.commands_malformed == 0 and twin.stats.commands_bad_crc == 1


def test_a_reconnect_waits_for_a_new_lowstate_not_the_last_connections():
    """LowStates that came after the last read of one connection (the twin sends at 500 Hz) are
    not the next connection's: with the robot gone, connect() says so instead of returning on
    them (and the first read handing the old connection's state on as new)."""
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    robot = UnitreeRobot(UnitreeConfig("g1", domain_id=domain, connect_timeout_s=2.0))  # DDS discovery under load
    with UnitreeTwin(TwinConfig("g1", domain_id=domain, gantry="always")):
        robot.connect()
        robot.observation()
        assert _until(lambda: robot.chan.poll(0.01) > 0 and robot._fresh is not None)  # newer than the one read
        robot.disconnect()
    with pytest.raises(HardwareError, match="no unitree_hg LowState on rt/lowstate"):
        robot.connect()


def test_a_session_bag_is_the_wire_as_rosbags_reads_it(tmp_path):
    """``open_robot(..., bag=DIR)``: every LowState received and LowCmd sent, from connect to the
    safe command at disconnect, in a rosbag2 (MCAP) that rosbags, an independent CDR reader,
    deserializes as Unitree's ROS 2 types (``unitree_hg/msg/LowCmd`` on ``/lowcmd``) with the
    values the driver put on the wire."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    from simreal.hardware.drivers import open_robot

    spec = load_robot_spec("g1")
    target = np.array([a.default for a in spec.actuators])
    knee = spec.actuator_names.index("left_knee_joint")
    target[knee] += 0.4
    bag = tmp_path / "session"
    with open_robot("unitree", "g1", twin=True, bag=str(bag)) as robot:
        for _ in range(50):
            robot.observation()
            robot.send_action(target)
        held = robot.observation()["joint_pos"]
    slots = robot.slots
    # a plain Jazzy type store: Unitree's types come from the definitions the bag carries
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        assert {c.topic: c.msgtype for c in reader.connections} == {
            "/lowcmd": "unitree_hg/msg/LowCmd",
            "/lowstate": "unitree_hg/msg/LowState",
        }
        msgs = {"/lowcmd": [], "/lowstate": []}
        for conn, _t, raw in reader.messages():
            msgs[conn.topic].append((reader.deserialize(raw, conn.msgtype), raw))
    assert len(msgs["/lowcmd"]) == robot.commands_sent == 51  # 50 commands and the safe one
    # about one per observation: each waits up to state_wait_s (4 ms) for a new one, published every 2 ms
    assert len(msgs["/lowstate"]) == robot.states_received >= 40
    first, raw = msgs["/lowcmd"][0]
    q = np.array([m.q for m in first.motor_cmd], np.float32)
    np.testing.assert_array_equal(q[slots], target.astype(np.float32))
    assert first.crc == um.message_crc(um.codec(um.HgLowCmd_).decode(raw)) and first.mode_machine == 5
    assert [m.kp for m in first.motor_cmd][slots[knee]] == pytest.approx(spec.actuators[knee].kp)
    last = msgs["/lowcmd"][-1][0]  # disconnect: hold the measured pose
    np.testing.assert_allclose(np.array([m.q for m in last.motor_cmd])[slots], held, atol=1e-6)
    state = msgs["/lowstate"][-1][0]
    # standing on the floor, let go at the first command 0.1 s before: upright within a few degrees
    assert len(state.motor_state) == 35 and state.imu_state.quaternion[0] == pytest.approx(1.0, abs=1e-2)


def test_a_bag_of_a_driver_without_dds_is_refused_naming_the_flag(tmp_path):
    from simreal.hardware.drivers import open_robot

    with pytest.raises(ConfigError, match="'--bag'.*so100.*no DDS"):
        with open_robot("so100", "so100", twin=True, bag=str(tmp_path / "bag")):
            pass
    assert not (tmp_path / "bag").exists()


def test_twin_holds_the_robot_standing_until_a_command_then_lets_it_go():
    """What `simreal drive --twin` gets: the G1 stands at home, feet on the floor, held until the
    first LowCmd that turns a motor on; then it is free, so bent knees lower its base (the twin
    once pinned it 0.3 m up for the whole run: a walking policy never touched the floor)."""
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    spec = load_robot_spec("g1")
    crouch = np.array([a.default for a in spec.actuators])
    for name, delta in (("hip_pitch", -0.35), ("knee", 0.7), ("ankle_pitch", -0.35)):
        for side in ("left", "right"):
            crouch[spec.actuator_names.index(f"{side}_{name}_joint")] += delta
    twin = UnitreeTwin(TwinConfig("g1", domain_id=domain))
    z_home = twin.sim.true_state()["pos_w"][2]
    feet = [twin.m.body(f"{side}_ankle_roll_link").id for side in ("left", "right")]
    with twin, UnitreeRobot(UnitreeConfig("g1", domain_id=domain)) as robot:
        for _ in range(100):  # 0.2 s of state, no command: held
            robot.observation()
        assert not twin.handed_over and twin.sim.true_state()["pos_w"][2] == pytest.approx(z_home, abs=1e-3)
        for _ in range(150):  # 0.3 s of the crouch
            robot.observation()
            robot.send_action(crouch)
        s = twin.sim.true_state()
    assert twin.handed_over
    assert s["pos_w"][2] < z_home - 0.05, (s["pos_w"][2], z_home)  # the free base went down with the knees
    assert twin.d.xpos[feet, 2].max() < 0.1  # the feet on the floor, not hung 0.3 m up


def test_a_diverged_twin_stops_its_lowstate(tmp_path, monkeypatch):
    """MuJoCo resets a diverged G1 to its start pose; the twin once went on publishing it as if
    the robot had jumped back. Now its LowState stops, as a dead robot's, and the driver's reads
    fail."""
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    spec = load_robot_spec("g1")
    home = np.array([a.default for a in spec.actuators])
    monkeypatch.chdir(tmp_path)  # MuJoCo's warning writes MUJOCO_LOG.TXT where it runs
    twin = UnitreeTwin(TwinConfig("g1", domain_id=domain))
    with twin, UnitreeRobot(UnitreeConfig("g1", domain_id=domain)) as robot:
        for _ in range(50):  # handed over: free on its PD gains
            robot.observation()
            robot.send_action(home)
        assert twin.handed_over and twin.sim.diverged_s is None
        twin.sim.d.qvel[6:] = np.nan
        assert _until(lambda: twin.sim.diverged_s is not None)
        with pytest.raises(HardwareError, match="no new LowState"):
            _read_until_stale(robot)


def test_twin_gantry_setting_is_checked():
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    with pytest.raises(ConfigError, match="gantry.*until_command, always, never"):
        UnitreeTwin(TwinConfig("g1", gantry="yes"))


def test_h1_torso_imu_reads_as_the_base():
    """H1's IMU is in the torso: the twin publishes it there, the driver turns it back."""
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    spec = load_robot_spec("h1")
    torso = spec.actuator_names.index("torso_joint")
    pose = np.array([a.default for a in spec.actuators])
    pose[torso] = 0.6
    with (
        UnitreeTwin(TwinConfig("h1", domain_id=domain, gantry="always")),
        UnitreeRobot(UnitreeConfig("h1", domain_id=domain)) as robot,
    ):
        for _ in range(250):
            s = robot.observation()
            robot.send_action(pose)
        assert s["joint_pos"][torso] == pytest.approx(0.6, abs=0.05)
        yaw_imu = 2 * np.arctan2(
            robot.low_state["imu_state"]["quaternion"][3], robot.low_state["imu_state"]["quaternion"][0]
        )
        assert yaw_imu == pytest.approx(s["joint_pos"][torso], abs=1e-3)  # the torso turned, the IMU with it
        np.testing.assert_allclose(s["quat_wxyz"], [1, 0, 0, 0], atol=1e-3)  # the base (on the gantry) did not


def test_benchmark_loop_short_run():
    spec = importlib.util.spec_from_file_location("bench_unitree_dds", ROOT / "bench" / "bench_unitree_dds.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    r = bench.measure("g1", 2.5, domain=T.random_domain_id(), realtime=False)
    assert r["n"] > 0.7 * 2.0 * bench.RATE_HZ, r
    # none lost on a quiet machine (docs/benchmarks-log.md); a few under a load of 6 on 2 cores
    assert r["commands_lost"] <= 0.01 * r["n"] and r["commands_bad_crc"] == 0, r
    assert r["p99_us"] < 20_000, r  # loose: the 2-core machine is shared; docs/benchmarks-log.md has the real numbers


def test_a_silent_robot_gets_the_hold_within_the_timeout_and_at_the_control_rate(tmp_path):
    """The G1 stops publishing halfway through `drive`: the driver's read once waited the whole
    0.1 s timeout for a new LowState every tick, so the loop fell to 8.5 Hz and the hold went out
    about 0.25 s after the last state, two policy commands late. Now the safe mode is on the wire
    within ``watchdog.timeout_s`` plus one tick of the last LowState, no policy command after the
    timeout, and the loop keeps its 50 Hz while nothing arrives."""
    from simreal.bundle import load_bundle
    from simreal.deploy.runner import PolicyRunner
    from simreal.hardware.drive import drive
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    runner = PolicyRunner(load_bundle(T.make_holding_bundle(tmp_path / "b", "g1")))
    period, timeout = runner.cfg.period_s, runner.cfg.watchdog.timeout_s
    twin = UnitreeTwin(TwinConfig("g1", domain_id=domain, gantry="always")).start()
    states: list[float] = []
    ticks: list[tuple[float, str, bool]] = []

    def on_tick(result, sent) -> None:
        ticks.append((result.t_s, result.mode, result.action is not None))
        if len(ticks) == 50:  # 1 s in: the robot goes silent
            twin.stop()

    try:
        with UnitreeRobot(UnitreeConfig("g1", domain_id=domain)) as robot:
            robot.wire_tap = lambda topic, data: states.append(time.monotonic()) if topic == "/lowstate" else None
            report = drive(robot, runner, duration_s=2.5, on_tick=on_tick)
    finally:
        twin.stop()
    last_state = states[-1]
    after = [(t, mode, ran) for t, mode, ran in ticks if t > last_state]
    first_safe = next(t for t, mode, _ in after if mode in ("stale", "fault"))
    assert first_safe - last_state <= timeout + period + 0.005, first_safe - last_state
    assert not any(ran for t, _, ran in after if t > last_state + timeout)
    silent = [t for t, _, _ in after if t > last_state + 0.2]
    rate = (len(silent) - 1) / (silent[-1] - silent[0])
    assert rate > 0.9 / period, rate  # it was 8.5 Hz of 50
    assert report.read_errors > 0 and report.last_error.startswith("no new LowState on rt/lowstate")


def test_a_12dof_g1_holds_its_waist_and_arms_through_the_driver_on_the_whole_robot():
    """g1_12dof's driver commands the 12 leg motors and, in every LowCmd, holds the 17 others at
    their targets with their own gains (unitree_rl_gym's arm_waist_kps/kds); its twin is the
    29-DoF G1, whose arms the hold then keeps where it says."""
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    spec = load_robot_spec("g1_12dof")
    legs = np.array([a.default for a in spec.actuators])
    twin = UnitreeTwin(TwinConfig("g1_12dof", domain_id=domain, gantry="always"))
    assert twin.spec.name == "g1" and len(twin.slots) == 29
    np.testing.assert_allclose(twin.joint_pos()[12:], 0.0, atol=1e-9)  # starts where the hold will keep them
    with twin, UnitreeRobot(UnitreeConfig("g1_12dof", domain_id=domain)) as robot:
        s = robot.observation()
        assert s["joint_pos"].shape == (12,)
        for _ in range(250):  # 0.5 s at the state rate
            robot.observation()
            robot.send_action(legs)
        arms = twin.joint_pos()[12:]
        last = twin.last_command["motor_cmd"]
    held = {h.name: h for h in spec.held}
    for slot, name in enumerate(MOTORS["unitree_hg"].motors[:29]):
        if name in held:
            assert (last["mode"][slot], last["q"][slot]) == (1, held[name].target)
            assert (last["kp"][slot], last["kd"][slot]) == pytest.approx((held[name].kp, held[name].kd))
    np.testing.assert_allclose(arms, 0.0, atol=0.05)  # the 29-DoF's home has them at 0.3/0.25/0.97 rad
    np.testing.assert_allclose(twin.joint_pos()[:12], legs, atol=0.05)


def _h1_10dof_torso_at(target: float):
    """h1_10dof with its held torso at ``target`` [rad]."""
    spec = load_robot_spec("h1_10dof")
    return dataclasses.replace(
        spec, held=tuple(dataclasses.replace(h, target=target) if h.name == "torso_joint" else h for h in spec.held)
    )


@pytest.mark.parametrize("torso", [0.0, 0.6])
def test_a_10dof_h1_holds_its_torso_and_arms_and_reads_the_held_torso_imu_as_the_base(torso):
    """h1_10dof's driver commands the 10 leg motors on the unitree_go wire and, in every LowCmd,
    holds the torso (slot 6) and arms (12-19) at their targets with their own gains (unitree_rl_gym's
    arm_waist_kps / kds); its twin is the 19-DoF H1. The IMU is in the torso: with the torso held
    at 0.6 rad the IMU turns with it, and the driver, reading the held torso's angle off the
    LowState, still reports the base (pinned on the gantry, level)."""
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    domain = T.random_domain_id()
    spec = _h1_10dof_torso_at(torso)
    legs = np.array([a.default for a in spec.actuators])
    twin = UnitreeTwin(TwinConfig("h1_10dof", domain_id=domain, gantry="always"), spec)
    assert twin.spec.name == "h1" and len(twin.slots) == 19
    with twin, UnitreeRobot(UnitreeConfig("h1_10dof", domain_id=domain), spec) as robot:
        assert robot.wire.name == "unitree_go" and robot.observation()["joint_pos"].shape == (10,)
        for _ in range(250):  # 0.5 s at the state rate
            s = robot.observation()
            robot.send_action(legs)
        whole = dict(zip(twin.spec.actuator_names, twin.joint_pos()))
        last = twin.last_command["motor_cmd"]
        imu = robot.low_state["imu_state"]["quaternion"].astype(np.float64)
    held = {h.name: h for h in spec.held}
    for slot, name in enumerate(MOTORS["unitree_go"].motors):
        if name in held:
            assert (last["mode"][slot], last["q"][slot]) == pytest.approx(
                (MOTORS["unitree_go"].enable[slot], held[name].target)
            )
            assert (last["kp"][slot], last["kd"][slot]) == pytest.approx((held[name].kp, held[name].kd))
    assert {MOTORS["unitree_go"].motors[i] for i in robot.slots} == set(spec.actuator_names)
    for name, h in held.items():  # h1.yaml's home had the shoulders at 0.2, the elbows at 0.32 rad
        assert whole[name] == pytest.approx(h.target, abs=0.05), name
    np.testing.assert_allclose([whole[n] for n in spec.actuator_names], legs, atol=0.05)
    assert 2 * np.arctan2(imu[3], imu[0]) == pytest.approx(whole["torso_joint"], abs=1e-3)  # the IMU turned with it
    np.testing.assert_allclose(s["quat_wxyz"], [1, 0, 0, 0], atol=1e-3)  # the base did not


def test_the_twin_in_its_own_process_serves_the_driver_over_dds():
    """`python -m simreal.hardware.unitree.twin`: the twin as a separate process (as
    unitree_mujoco's bridge runs), found by the driver on the same domain; the 12-DoF driver's
    stand command reaches it (the 29-DoF G1 stands at the legs' default pose, the hold at 0).
    A robot that is not a Unitree's is one line, exit 2."""
    import subprocess
    import sys

    bad = subprocess.run(
        [sys.executable, "-m", "simreal.hardware.unitree.twin", "--robot", "franka"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    domain = T.random_domain_id()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simreal.hardware.unitree.twin",
            "--robot",
            "g1",
            "--domain-id",
            str(domain),
            "--gantry",
            "always",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        banner = proc.stdout.readline()
        assert f"Unitree twin of g1 on DDS domain {domain}" in banner, (
            banner,
            proc.stderr.read() if proc.poll() else "",
        )
        spec = load_robot_spec("g1_12dof")
        legs = np.array([a.default for a in spec.actuators])
        with UnitreeRobot(UnitreeConfig("g1_12dof", domain_id=domain, connect_timeout_s=10.0)) as robot:
            for _ in range(500):  # 1 s at the state rate
                s = robot.observation()
                robot.send_action(legs)
        np.testing.assert_allclose(s["joint_pos"], legs, atol=0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_twin_says_where_the_robot_is():
    """The twin's status line (printed every 2 s by ``python -m simreal.hardware.unitree.twin``):
    the base's position, yaw and tilt from vertical, and the LowCmds applied."""
    import mujoco

    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    twin = UnitreeTwin(TwinConfig("g1_12dof"))
    z = twin.d.qpos[2]
    assert twin.status_line() == f"twin 0 s | base (0.00, 0.00, {z:.2f}) m | yaw 0 deg, tilt 0 deg | LowCmds 0 applied"
    yaw, roll = np.radians(90.0), np.radians(30.0)  # turned left, then rolled 30 deg about its own x
    qz = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
    qx = np.array([np.cos(roll / 2), np.sin(roll / 2), 0.0, 0.0])
    mujoco.mju_mulQuat(twin.d.qpos[3:7], qz, qx)
    twin.d.qpos[:3] = [1.234, -0.5, 0.1]
    twin.stats.commands_applied = 7
    assert twin.status_line() == "twin 0 s | base (1.23, -0.50, 0.10) m | yaw 90 deg, tilt 30 deg | LowCmds 7 applied"
