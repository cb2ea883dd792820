"""Unitree G1 / H1 low-level driver: ``LowCmd`` out, ``LowState`` in, over DDS, as the SDK speaks it.

The robot's motor controller publishes ``rt/lowstate`` at 500 Hz and applies the newest
``rt/lowcmd`` whose CRC checks out, per motor::

    tau = tau_ff + kp (q_des - q) + kd (dq_des - dq)        [N m], clipped to the motor's limit

so every action mode is one choice of the five fields (:data:`MOTOR_LAWS`): ``joint_position``
sends ``q_des = u`` with the config's ``kp``, ``kd`` (the spec's by default), ``joint_velocity``
``dq_des = u`` with ``kd`` only, ``joint_effort`` ``tau_ff = u`` with ``kp = kd = 0``. The
spec's ``held`` joints (a 12-DoF G1's waist and arms, a 10-DoF H1's torso and arms) get
``q_des = target`` with their own gains in every LowCmd, the safe one included: the policy
drives the legs, the driver holds the rest.

Messages: ``unitree_hg`` (G1: 35 motor slots, 29 used, ``mode_machine`` echoed from the
LowState, ``mode_pr`` = 0: the spec's ankle joints are pitch and roll) or ``unitree_go`` (H1:
20 slots, slot 9 unused, ``head`` 0xFE 0xEF, ``level_flag`` 0xFF, motor mode 0x0A for the big
motors and 0x01 for the weak ones, as Unitree's ``h1_low_level_example.py``). Motor slots are
found by joint name (:data:`MOTORS`), so the spec's actuator order is free. H1's IMU sits in
the torso: its reading is turned into the pelvis (base) frame through ``torso_joint``, as
unitree_rl_gym's deploy does (``imu_type: torso``), whose position comes from its motor slot in
the LowState whether the policy drives it (``h1``) or the driver holds it (``h1_10dof``).

DDS: domain 0 and the robot's network interface (``network_interface: enp3s0``) on hardware,
loopback for the twin (:mod:`simreal.hardware.unitree.twin`); raw samples both ways through
the numpy codec of :mod:`simreal.hardware.unitree.msgs` (a few microseconds, where the
bindings' generic serializer takes half a millisecond).

    with UnitreeRobot(UnitreeConfig("g1", domain_id=0, network_interface="enp3s0")) as robot:
        s = robot.observation()          # newest LowState: joint_pos, joint_vel, quat_wxyz, ang_vel_b, t_s
        robot.send_action(pose)          # one LowCmd with its CRC
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
from cyclonedds.core import DDSException, InstanceState, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

from simreal.deploy.ros_types import ros_topic_name
from simreal.deploy.transport_dds import ddspy_take, ddspy_write, domain, qos_profile
from simreal.errors import ConfigError
from simreal.hardware.robot import HardwareError, Robot, RobotConfig, State, time_stamp
from simreal.hardware.unitree import msgs as um
from simreal.robot_spec import RobotSpec
from simreal.rotations import quat_mul, rot_z, yaw_quat

_ANY = SampleState.Any | ViewState.Any | InstanceState.Any


# -- the two message families ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LowLevel:
    """One Unitree message family.

    Attributes:
      name: ``unitree_hg`` or ``unitree_go``.
      cmd, state: the LowCmd and LowState codecs.
      motors: the joint on each motor slot (Unitree's motor index), None where unused.
      enable: the MotorCmd ``mode`` that enables each slot's motor.
      constants: LowCmd fields every command carries.
      imu_yaw_joint: the joint between the base and an IMU mounted above it ("" = IMU on the base).
    """

    name: str
    cmd: um.Codec
    state: um.Codec
    motors: tuple[str | None, ...]
    enable: tuple[int, ...]
    constants: tuple[tuple[str, object], ...] = ()
    imu_yaw_joint: str = ""


_G1 = (
    "left_hip_pitch_joint",
    "left_hip_roll_joint",
    "left_hip_yaw_joint",
    "left_knee_joint",
    "left_ankle_pitch_joint",
    "left_ankle_roll_joint",
    "right_hip_pitch_joint",
    "right_hip_roll_joint",
    "right_hip_yaw_joint",
    "right_knee_joint",
    "right_ankle_pitch_joint",
    "right_ankle_roll_joint",
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    "left_shoulder_pitch_joint",
    "left_shoulder_roll_joint",
    "left_shoulder_yaw_joint",
    "left_elbow_joint",
    "left_wrist_roll_joint",
    "left_wrist_pitch_joint",
    "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint",
    "right_shoulder_roll_joint",
    "right_shoulder_yaw_joint",
    "right_elbow_joint",
    "right_wrist_roll_joint",
    "right_wrist_pitch_joint",
    "right_wrist_yaw_joint",
)  # unitree_sdk2 G1JointIndex 0..28
_H1 = (
    "right_hip_roll_joint",
    "right_hip_pitch_joint",
    "right_knee_joint",
    "left_hip_roll_joint",
    "left_hip_pitch_joint",
    "left_knee_joint",
    "torso_joint",
    "left_hip_yaw_joint",
    "right_hip_yaw_joint",
    None,
    "left_ankle_joint",
    "right_ankle_joint",
    "right_shoulder_pitch_joint",
    "right_shoulder_roll_joint",
    "right_shoulder_yaw_joint",
    "right_elbow_joint",
    "left_shoulder_pitch_joint",
    "left_shoulder_roll_joint",
    "left_shoulder_yaw_joint",
    "left_elbow_joint",
)  # unitree_sdk2 H1JointIndex 0..19

MOTORS: dict[str, LowLevel] = {
    "unitree_hg": LowLevel(
        "unitree_hg", um.codec(um.HgLowCmd_), um.codec(um.HgLowState_), _G1 + (None,) * 6, (1,) * 35
    ),
    "unitree_go": LowLevel(
        "unitree_go",
        um.codec(um.GoLowCmd_),
        um.codec(um.GoLowState_),
        _H1,
        (0x0A,) * 10 + (0x01,) * 10,  # M107 joints in servo mode 0x0A, the weak motors 0x01
        (("head", (0xFE, 0xEF)), ("level_flag", 0xFF)),
        imu_yaw_joint="torso_joint",
    ),
}

#: action mode -> (LowCmd field carrying the command, kp used, kd used)
MOTOR_LAWS: dict[str, tuple[str, bool, bool]] = {
    "joint_position": ("q", True, True),
    "joint_velocity": ("dq", False, True),
    "joint_effort": ("tau", False, False),
}


def low_level(messages: str, spec: RobotSpec) -> LowLevel:
    """The message family named ``messages``, or ("") the one whose motor slots hold every
    actuator and held joint of the spec; a ConfigError names the field and the valid families."""
    joints = set(spec.actuator_names) | set(spec.held_names)
    if messages:
        if messages not in MOTORS:
            raise ConfigError("messages", f"unknown Unitree message family '{messages}'; valid: {', '.join(MOTORS)}")
        fits = [messages] if joints <= set(MOTORS[messages].motors) else []
    else:
        fits = [k for k, f in MOTORS.items() if joints <= set(f.motors)]
    if len(fits) != 1:
        raise ConfigError(
            "messages",
            f"robot '{spec.name}': {'no' if not fits else 'more than one'} Unitree message "
            f"family has a motor for every actuator; set messages to one of {', '.join(MOTORS)}",
        )
    return MOTORS[fits[0]]


def motor_slots(wire: LowLevel, names: tuple[str, ...]) -> np.ndarray:
    """The motor index of each named joint."""
    return np.array([wire.motors.index(n) for n in names], np.intp)


# -- an IMU above a yaw joint (H1's torso) ---------------------------------------------------------


def imu_to_base(
    quat_imu: np.ndarray, gyro_imu: np.ndarray, yaw: float, yaw_rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Base orientation (wxyz) and body rate [rad/s] from an IMU on a link that turns about the
    base's z axis by ``yaw`` [rad] at ``yaw_rate`` [rad/s]: R_base = R_imu Rz(yaw)^T,
    w_base = Rz(yaw) w_imu - (0, 0, yaw_rate) (unitree_rl_gym's ``transform_imu_data``)."""
    q = quat_mul(quat_imu, yaw_quat(-yaw, np), np)
    return q, rot_z(gyro_imu, yaw, np) - np.array([0.0, 0.0, yaw_rate])


def base_to_imu(
    quat_base: np.ndarray, gyro_base: np.ndarray, yaw: float, yaw_rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of :func:`imu_to_base` (what the IMU reads, for a twin)."""
    q = quat_mul(quat_base, yaw_quat(yaw, np), np)
    return q, rot_z(gyro_base + np.array([0.0, 0.0, yaw_rate]), -yaw, np)


# -- the DDS endpoint pair --------------------------------------------------------------------------
class Channel:
    """A DDS participant reading one Unitree topic and writing another, as raw samples.

    ``on_sample(data, t_rx_s)`` is called from :meth:`drain` / :meth:`poll` with each sample's
    bytes and the monotonic time it was taken. QoS: best-effort reader (matches any writer), the
    ROS 2 default (reliable, keep last 10) writer, XCDR1 both ways.
    """

    def __init__(
        self,
        domain_id: int,
        interface: str,
        read: tuple[str, um.Codec],
        write: tuple[str, um.Codec],
        on_sample: Callable[[bytes, float], None],
    ):
        if ddspy_take is None or ddspy_write is None:
            raise HardwareError("this cyclonedds build lacks raw sample access (cyclonedds._clayer.ddspy_take)")
        try:
            self._domain = domain(domain_id, interface)
            self.participant: DomainParticipant | None = DomainParticipant(domain_id)
        except DDSException as e:  # most often a mistyped network card: name it and list the real ones
            import socket

            cards = ", ".join(name for _, name in socket.if_nameindex())
            raise ConfigError(
                "network_interface",
                f"Cyclone DDS cannot start on {interface!r} ({e}); this machine's network interfaces: {cards}",
            ) from None
        self.reader: DataReader[IdlStruct] | None = DataReader(
            self.participant, Topic(self.participant, read[0], read[1].idl), qos=qos_profile("sensor_data")
        )
        self.writer: DataWriter[IdlStruct] | None = DataWriter(
            self.participant, Topic(self.participant, write[0], write[1].idl), qos=qos_profile("default")
        )
        self.waitset: WaitSet | None = WaitSet(self.participant)
        self.waitset.attach(ReadCondition(self.reader, _ANY))
        self.on_sample = on_sample

    def drain(self) -> int:
        """Take every waiting sample; returns how many."""
        assert self.reader is not None  # None only after close(), which ends the channel's use
        ret = ddspy_take(self.reader._ref, _ANY, 64)
        if isinstance(ret, int):
            raise HardwareError(f"DDS take failed ({ret})")
        t = time.monotonic()
        n = 0
        for data, info in ret:
            if info.valid_data:
                self.on_sample(data, t)
                n += 1
        return n

    def poll(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for a sample (GIL released), then :meth:`drain`."""
        if timeout_s > 0:
            assert self.waitset is not None  # None only after close(), which ends the channel's use
            self.waitset.wait(max(1, int(timeout_s * 1e9)))
        return self.drain()

    def write(self, data: bytes) -> None:
        assert self.writer is not None  # None only after close(), which ends the channel's use
        ret = ddspy_write(self.writer._ref, data)
        if ret < 0:
            raise HardwareError(f"DDS write failed ({ret})")

    def close(self) -> None:
        self.waitset = self.reader = self.writer = None
        self.participant = None  # its finaliser deletes the reader and writer


# -- the driver ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class UnitreeConfig(RobotConfig):
    """A Unitree G1 / H1 on its low-level DDS topics.

    Attributes:
      network_interface: ``lo`` (loopback: the twin), the NIC facing the robot (``enp3s0``), or
        "" to take Cyclone's configuration from ``CYCLONEDDS_URI``.
      domain_id: DDS domain (Unitree robots use 0).
      topic_prefix: prefix of ``lowcmd`` / ``lowstate`` (Unitree: ``rt/``).
      messages: ``unitree_hg`` | ``unitree_go``; "" picks the family whose motors the spec's joints are.
      kp, kd: PD gains per joint in spec order [N m/rad, N m s/rad]; () = the spec's.
      connect_timeout_s: how long ``connect()`` waits for the first LowState.
      state_wait_s: how long ``observation()`` waits for a LowState newer than the one it returned
        last (at 500 Hz one comes every 2 ms); without one it returns the newest it has, with the
        time it arrived, so the control loop keeps its rate and the runner's watchdog ages it.
      state_timeout_s: a newest LowState older than this is a read error (no new LowState).
      check_state_crc: drop LowStates whose CRC is wrong (Unitree's own examples do not check).
      tick_probe: write the answered LowState's ``tick`` into LowCmd ``reserve[0]`` (the twin
        measures state-to-command latency with it); off on hardware.
    """

    network_interface: str = "lo"
    domain_id: int = 0
    topic_prefix: str = "rt/"
    messages: str = ""
    kp: tuple[float, ...] = ()
    kd: tuple[float, ...] = ()
    connect_timeout_s: float = 5.0
    state_wait_s: float = 0.004
    state_timeout_s: float = 0.1
    check_state_crc: bool = False
    tick_probe: bool = False


class UnitreeRobot(Robot):
    """The driver (see module docstring).

    Attributes:
      low_state: the newest LowState record (every field: ``tick``, ``wireless_remote``, motor
        temperatures ...), None before the first.
      states_received, states_bad (CRC or encoding), commands_sent: counters.
    """

    config_class = UnitreeConfig
    families = ("humanoid",)

    def __init__(self, config: UnitreeConfig, spec: RobotSpec | None = None):
        super().__init__(config, spec)
        self.config: UnitreeConfig = config
        c = config
        if self.mode.name not in MOTOR_LAWS:
            raise ConfigError("action_mode", f"a Unitree LowCmd carries {', '.join(MOTOR_LAWS)}, not {self.mode.name}")
        if not 0 <= c.domain_id <= 232:
            raise ConfigError("domain_id", f"must be in 0..232, got {c.domain_id}")
        for key in ("connect_timeout_s", "state_timeout_s"):
            if not getattr(c, key) > 0:
                raise ConfigError(key, f"must be > 0 [s], got {getattr(c, key)}")
        if not 0 <= c.state_wait_s < c.state_timeout_s:
            raise ConfigError(
                "state_wait_s",
                f"must be >= 0 and below state_timeout_s ({c.state_timeout_s:g} s) [s], got {c.state_wait_s}",
            )
        self.wire = low_level(c.messages, self.spec)
        self.slots = motor_slots(self.wire, self.names)
        gains = {}
        for key in ("kp", "kd"):
            g = getattr(c, key) or tuple(getattr(self.spec.actuator(n), key) for n in self.names)
            if len(g) != len(self.names) or not all(np.isfinite(g)) or min(g) < 0:
                raise ConfigError(
                    key,
                    f"expected {len(self.names)} finite gains >= 0 (one per joint, "
                    f"{', '.join(self.names)}), got {list(g)}",
                )
            gains[key] = np.asarray(g, np.float32)
        self.field, use_kp, use_kd = MOTOR_LAWS[self.mode.name]
        self.cmd = self._template(gains["kp"] * use_kp, gains["kd"] * use_kd)
        self._yaw_slot = self.wire.motors.index(self.wire.imu_yaw_joint) if self.wire.imu_yaw_joint else None
        self.chan: Channel | None = None
        self._fresh: tuple[np.ndarray, float] | None = None  # the newest LowState not yet returned
        self._newest: tuple[np.ndarray, float] | None = None  # the newest LowState, and when it came
        self.low_state: np.ndarray | None = None
        self.states_received = self.states_bad = self.commands_sent = 0

    def _template(self, kp: np.ndarray, kd: np.ndarray) -> np.ndarray:
        """The LowCmd every write starts from: constants, motor modes and gains set, and the held
        joints' targets and gains (module docstring)."""
        cmd = self.wire.cmd.zeros()
        for key, value in self.wire.constants:
            cmd[key] = value
        mc = cmd["motor_cmd"]
        held = self.spec.held
        hold = motor_slots(self.wire, tuple(h.name for h in held))
        for slots in (self.slots, hold):
            mc["mode"][slots] = np.asarray(self.wire.enable)[slots]
        mc["kp"][self.slots], mc["kd"][self.slots] = kp, kd
        mc["q"][hold] = [h.target for h in held]
        mc["kp"][hold], mc["kd"][hold] = [h.kp for h in held], [h.kd for h in held]
        return cmd

    @property
    def topics(self) -> tuple[str, str]:
        """(command topic, state topic), as DDS names them."""
        p = self.config.topic_prefix
        return p + "lowcmd", p + "lowstate"

    def ros_topics(self) -> dict[str, type]:
        """The two topics as ROS 2 names them (``rt/lowcmd`` is ``/lowcmd``: rmw's prefix), with
        Unitree's ROS 2 types (``unitree_hg/msg/LowCmd``, as unitree_ros2 declares them)."""
        cmd, state = (ros_topic_name(t) for t in self.topics)
        return {cmd: self.wire.cmd.idl, state: self.wire.state.idl}

    # -- Robot ---------------------------------------------------------------------------------
    def _open(self) -> None:
        c = self.config
        cmd_topic, state_topic = self.topics
        # a LowState of an earlier connection is not this one's: connect waits for a new one
        self._fresh = self._newest = self.low_state = None
        self.chan = Channel(
            c.domain_id, c.network_interface, (state_topic, self.wire.state), (cmd_topic, self.wire.cmd), self._on_state
        )
        deadline = time.monotonic() + c.connect_timeout_s
        while self._fresh is None and time.monotonic() < deadline:
            self.chan.poll(min(0.05, deadline - time.monotonic()))
        if self._fresh is None:
            self._close()
            raise HardwareError(
                f"no {self.wire.name} LowState on {state_topic} (domain {c.domain_id}, interface "
                f"'{c.network_interface}') within {c.connect_timeout_s:g} s; is the robot on and in "
                f"low-level mode?"
            )

    def _close(self) -> None:
        if self.chan is not None:
            self.chan.close()
            self.chan = None

    def _on_state(self, data: bytes, t_rx: float) -> None:
        self.states_received += 1
        if self.wire_tap is not None:
            self.wire_tap(ros_topic_name(self.topics[1]), data)
        try:
            rec = self.wire.state.decode(data, check_crc=self.config.check_state_crc)
        except um.WireError:
            self.states_bad += 1
            return
        self._fresh = self._newest = (rec, t_rx)
        self.low_state = rec

    def _read(self) -> State:
        """The newest LowState, waiting up to ``state_wait_s`` for one not returned before; a
        HardwareError when the newest is older than ``state_timeout_s`` (config docstring). It
        once waited the whole timeout for a new one, every tick: with the robot silent the loop
        fell to 8.5 Hz and its watchdog acted 0.25 s late, two policy commands after the last state."""
        assert self.chan is not None  # set by _open; connected (Robot._require) until _close
        self.chan.drain()
        deadline = time.monotonic() + self.config.state_wait_s
        while self._fresh is None and (left := deadline - time.monotonic()) > 0:
            self.chan.poll(left)
        assert self._newest is not None  # _open returned only once a LowState had come
        age = time.monotonic() - self._newest[1]
        if age > self.config.state_timeout_s:
            raise HardwareError(
                f"no new LowState on {self.topics[1]} for {age:.2f} s (state_timeout_s {self.config.state_timeout_s:g})"
            )
        rec, t_rx = self._newest
        self._fresh = None
        ms, imu = rec["motor_state"], rec["imu_state"]
        quat = imu["quaternion"].astype(np.float64)
        gyro = imu["gyroscope"].astype(np.float64)
        if self._yaw_slot is not None:
            quat, gyro = imu_to_base(quat, gyro, float(ms["q"][self._yaw_slot]), float(ms["dq"][self._yaw_slot]))
        return {
            "joint_pos": ms["q"][self.slots].astype(np.float64),
            "joint_vel": ms["dq"][self.slots].astype(np.float64),
            "quat_wxyz": quat,
            "ang_vel_b": gyro,
            "t_s": time_stamp(t_rx),
        }

    def _write(self, u: np.ndarray) -> np.ndarray:
        """Fill the LowCmd (the action mode's field, gains from the template), echo
        ``mode_machine``, set the CRC, publish; returns ``u`` as the wire's float32 carried it."""
        cmd = self.cmd
        cmd["motor_cmd"][self.field][self.slots] = u
        if self.low_state is not None:
            if "mode_machine" in (cmd.dtype.names or ()):  # a message record: names is never None
                cmd["mode_machine"] = self.low_state["mode_machine"]
            if self.config.tick_probe:
                cmd["reserve"].reshape(-1)[0] = self.low_state["tick"]
        cmd["crc"] = um.message_crc(cmd)
        data = self.wire.cmd.encode(cmd)
        assert self.chan is not None  # set by _open; connected (Robot._require) until _close
        self.chan.write(data)
        self.commands_sent += 1
        if self.wire_tap is not None:
            self.wire_tap(ros_topic_name(self.topics[0]), data)
        return cmd["motor_cmd"][self.field][self.slots].astype(np.float64)
