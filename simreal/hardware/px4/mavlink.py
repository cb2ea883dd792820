"""PX4 over MAVLink: collective thrust and body rates out, PX4's estimate in (``pymavlink``).

    >>> cfg = PX4Config("crazyflie2", connection="udpin:0.0.0.0:14540")   # or udpout:HOST:PORT, /dev/ttyACM0
    >>> with PX4Robot(cfg) as px4:
    ...     s = px4.observation()                  # pos_w, quat_wxyz, lin_vel_w, ang_vel_b (ENU / FLU), t_s
    ...     px4.send_action(px4.mode.hover_command(px4.spec, px4.names))   # the stream offboard needs
    ...     px4.set_offboard()                     # explicit, never implied by connect
    ...     px4.arm()
    ...     ...                                    # hardware.drive(px4, runner) sends a command per tick

The path without ROS (the ROS 2 path, ``px4_msgs`` over PX4's uXRCE-DDS bridge, is
:mod:`~simreal.hardware.px4.ros2`). MAVLink messages carry a checksum seeded by their
definition, and the ones used here have been stable in ``common.xml`` across PX4 releases.

Wire (MAVLink 2, ``common`` dialect; PX4's own ids: system ``MAV_SYS_ID``, component 1):

- ``connect()`` sends our HEARTBEAT (``MAV_TYPE_ONBOARD_CONTROLLER``, 1 Hz from then on: PX4
  learns a UDP peer from its first packet) and waits for the autopilot's HEARTBEAT; then asks
  for ATTITUDE_QUATERNION and LOCAL_POSITION_NED at ``stream_rate_hz`` with
  ``MAV_CMD_SET_MESSAGE_INTERVAL`` and waits for the first of each. ATTITUDE_QUATERNION carries
  the body rates too (``rollspeed`` ...), so no third stream is needed. It never arms and never
  changes the mode.
- ``send_action([T, p, q, r])`` sends SET_ATTITUDE_TARGET with ``type_mask`` =
  ``ATTITUDE_IGNORE`` (128): body rates [rad/s] in FRD and ``thrust = T / sum(f_max)`` in
  [0, 1]. The normalisation assumes that set-point is linear in rotor thrust, with full scale
  the spec's ``sum(f_max)``: PX4 inverts its motor model ``rel_thrust = f rel_signal^2 + (1 - f)
  rel_signal`` (``f`` = ``THR_MDL_FAC``), so it holds when that parameter matches the motors;
  otherwise expect the thrust to be off. A background thread repeats the newest
  set-point at ``setpoint_rate_hz`` for at most ``setpoint_hold_s`` after it was given, so
  offboard mode sees a stream (PX4 wants more than 2 Hz) while ``arm()`` or
  ``set_offboard()`` wait for their answer, yet a dead controller stops the stream and PX4's
  offboard-loss failsafe takes over.
- ``arm()`` / ``disarm()``: COMMAND_LONG ``MAV_CMD_COMPONENT_ARM_DISARM``; ``set_offboard()``:
  ``MAV_CMD_DO_SET_MODE`` with ``MAV_MODE_FLAG_CUSTOM_MODE_ENABLED`` and PX4's custom main mode
  OFFBOARD (6). Each waits for its COMMAND_ACK (re-sent with ``confirmation`` + 1 when none came)
  and raises :class:`HardwareError` naming PX4's answer when it is not ACCEPTED. PX4 refuses
  OFFBOARD (TEMPORARILY_REJECTED) until a set-point stream is running: send one first.
- ``disconnect()`` sends the safe command, zero thrust and zero rates, once, and stops the
  stream. What PX4 then does: armed in offboard, it spins the motors at idle on the zero thrust
  set-point (the vehicle falls); after ``COM_OF_LOSS_T`` (1 s by default) without set-points it
  leaves offboard for the failsafe ``COM_OBL_RC_ACT`` names (Position, Hold or Land by what
  the vehicle can fly; the twin lands). On the ground the land detector disarms it.

Frames: PX4's NED / FRD become ENU / FLU (:mod:`simreal.ned_frames`).

``t_s`` is the host's monotonic time at which the older of the two newest state messages
arrived: the state is as old as its stalest part, and the watchdog sees that. ``observation()``
raises when it is older than ``state_timeout_s`` (a silent link), so the drive loop's watchdog
acts. Imports numpy, pymavlink and the core (the robot's runtime).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from pymavlink import mavutil
from pymavlink.dialects.v20 import common as mavlink

from simreal.config import field
from simreal.errors import MissingDependencyError
from simreal.hardware.px4.common import CMD_SET_MESSAGE_INTERVAL, COMMAND_NAMES, PX4Vehicle, mode_name, result_name
from simreal.hardware.robot import HardwareError, RobotConfig, State, time_stamp
from simreal.ned_frames import swap_attitude, swap_frd_flu, swap_ned_enu
from simreal.robot_spec import RobotSpec

#: The state streams the driver asks for, in the order ``_read`` combines them.
STATE_MESSAGES = ("ATTITUDE_QUATERNION", "LOCAL_POSITION_NED")


def custom_mode(main: int, sub: int = 0) -> int:
    """HEARTBEAT ``custom_mode`` of PX4 mode (main, sub): bytes 2 and 3 of the uint32."""
    return (main << 16) | (sub << 24)


def mode_of(custom: int) -> tuple[int, int]:
    """(main, sub) of a HEARTBEAT ``custom_mode``."""
    return (custom >> 16) & 0xFF, (custom >> 24) & 0xFF


def open_link(connection: str, source_system: int, source_component: int, baud: int = 921600):
    """A pymavlink connection speaking MAVLink 2 with the ``common`` dialect.

    pymavlink picks its protocol and dialect from process-wide environment variables when it is
    imported (``MAVLINK20``, ``MAVLINK_DIALECT``); the link's encoder is replaced instead, so
    this module neither depends on nor changes them.
    """
    conn = mavutil.mavlink_connection(
        connection, baud=baud, source_system=source_system, source_component=source_component, autoreconnect=False
    )
    conn.mav = mavlink.MAVLink(conn, srcSystem=source_system, srcComponent=source_component)
    conn.mav.robust_parsing = True
    conn.WIRE_PROTOCOL_VERSION = "2.0"  # no switch back to pymavlink's default encoder
    return conn


# -- the driver ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class PX4Config(RobotConfig):
    """A PX4 autopilot on a MAVLink link (see module docstring)."""

    action_mode: str = field("ctbr", choices=("ctbr",), doc="collective thrust [N] and FLU body rates [rad/s]")
    connection: str = field(
        "udpin:0.0.0.0:14540",
        doc="pymavlink connection: udpin:IP:PORT (listen, PX4 SITL's offboard port 14540), "
        "udpout:HOST:PORT (PX4's own port), tcp:HOST:PORT, or a serial device",
    )
    baudrate: int = field(921600, min=1, doc="serial links only [bit/s]")
    system_id: int = field(0, min=0, max=255, doc="the vehicle's MAV_SYS_ID; 0: the first autopilot heard")
    source_system: int = field(255, min=1, max=255, doc="our MAVLink system id")
    source_component: int = field(191, min=1, max=255, doc="our component id (191: MAV_COMP_ID_ONBOARD_COMPUTER)")
    connect_timeout_s: float = field(5.0, min=0.01, doc="wait for the HEARTBEAT and the first state [s]")
    command_timeout_s: float = field(0.5, min=0.01, doc="wait for one COMMAND_ACK [s]")
    command_retries: int = field(2, min=0, doc="re-sends of a command whose COMMAND_ACK did not come")
    stream_rate_hz: float = field(100.0, min=1.0, max=1000.0, doc="ATTITUDE_QUATERNION and LOCAL_POSITION_NED rate")
    state_timeout_s: float = field(0.1, min=0.001, doc="observation() refuses a state older than this [s]")
    setpoint_rate_hz: float = field(20.0, min=2.5, doc="least rate the newest set-point is repeated at [Hz]")
    setpoint_hold_s: float = field(0.5, min=0.0, doc="repeat a set-point at most this long after send_action [s]")


class PX4Robot(PX4Vehicle):
    """The vehicle (see module docstring); :meth:`arm`, :meth:`disarm` and :meth:`set_offboard`
    (:class:`~simreal.hardware.px4.common.PX4Vehicle`) are the explicit mode changes."""

    config_class = PX4Config
    setpoint_wire = "SET_ATTITUDE_TARGET body rates and thrust"

    def __init__(self, config: PX4Config, spec: RobotSpec | None = None):
        super().__init__(config, spec)
        self.config: PX4Config = config
        self.where = f"PX4 on {config.connection}"
        self.conn: Any = None  # pymavlink's mavfile (untyped) while open, None while closed
        self._t0 = time.monotonic()
        self._reset()

    def _reset(self) -> None:
        """Forget the previous connection's vehicle, messages and set-point."""
        super()._reset()
        self.target = (self.config.system_id, 1)
        self.received: dict[str, int] = dict.fromkeys(STATE_MESSAGES + ("HEARTBEAT",), 0)
        self._newest: dict[str, tuple[Any, float]] = {}  # pymavlink messages (untyped), arrival times
        self._heartbeat = None

    # -- connect / disconnect ------------------------------------------------------------------
    def _open(self) -> None:
        cfg = self.config
        self._reset()
        try:
            self.conn = open_link(cfg.connection, cfg.source_system, cfg.source_component, cfg.baudrate)
        except (OSError, ValueError, OverflowError) as e:  # OverflowError: a port beyond 65535
            raise HardwareError(f"{self.where}: cannot open the link ({e})") from None
        except ModuleNotFoundError as e:  # pymavlink imports pyserial for serial links only
            raise MissingDependencyError(
                e.name or "serial", "pip install pyserial", f"for the serial link {cfg.connection}"
            ) from None
        try:
            self._handshake()
        except BaseException:
            self._close()
            raise

    def _handshake(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.connect_timeout_s
        beat_at = 0.0
        while self._heartbeat is None:
            now = time.monotonic()
            if now > deadline:
                raise HardwareError(
                    f"{self.where}: no HEARTBEAT from an autopilot"
                    f"{f' with system id {cfg.system_id}' if cfg.system_id else ''} within "
                    f"{cfg.connect_timeout_s:g} s; check the connection string, the cable or "
                    f"radio, and that PX4's MAVLink instance sends to this port"
                )
            if now - beat_at >= 1.0:
                self._send_heartbeat()
                beat_at = now
            m = self.conn.recv_match(type="HEARTBEAT", blocking=True, timeout=min(0.05, deadline - now))
            if (
                m is not None
                and m.autopilot != mavlink.MAV_AUTOPILOT_INVALID
                and (not cfg.system_id or m.get_srcSystem() == cfg.system_id)
            ):
                self.target = (m.get_srcSystem(), m.get_srcComponent())
                self._take(m, time.monotonic())
        self._thread = threading.Thread(target=self._serve, name=f"px4-mavlink {cfg.connection}", daemon=True)
        self._thread.start()
        interval_us = 1e6 / cfg.stream_rate_hz
        for name in STATE_MESSAGES:
            msg_id = getattr(mavlink, f"MAVLINK_MSG_ID_{name}")
            result = self._command(CMD_SET_MESSAGE_INTERVAL, msg_id, interval_us)
            if result != mavlink.MAV_RESULT_ACCEPTED:
                raise HardwareError(
                    f"{self.where}: PX4 answered {result_name(result)} to streaming {name} at "
                    f"{cfg.stream_rate_hz:g} Hz (MAV_CMD_SET_MESSAGE_INTERVAL)"
                )
        with self._lock:
            if not self._lock.wait_for(
                lambda: all(n in self._newest for n in STATE_MESSAGES), max(0.0, deadline - time.monotonic())
            ):
                missing = [n for n in STATE_MESSAGES if n not in self._newest]
                raise HardwareError(
                    f"{self.where}: no {' or '.join(missing)} within {cfg.connect_timeout_s:g} s "
                    f"though PX4 accepted the stream request; is its estimator running?"
                )

    def _close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- the link's thread ---------------------------------------------------------------------
    def _serve(self) -> None:
        """Take every message in, keep the newest of each kind; send our 1 Hz HEARTBEAT and
        repeat the newest set-point (module docstring)."""
        beat_at = 0.0
        while not self._stop.is_set():
            m = self.conn.recv_match(blocking=True, timeout=0.01)
            now = time.monotonic()
            while m is not None:
                self._take(m, now)
                m = self.conn.recv_match(blocking=False)
            if now - beat_at >= 1.0:
                self._send_heartbeat()
                beat_at = now
            self._repeat_setpoint(now)

    def _take(self, m, now: float) -> None:
        if (m.get_srcSystem(), m.get_srcComponent()) != self.target:
            return
        kind = m.get_type()
        with self._lock:
            if kind == "COMMAND_ACK":
                self._acks[m.command] = m.result
            elif kind == "HEARTBEAT":
                self._heartbeat = m
            elif kind in STATE_MESSAGES:
                self._newest[kind] = (m, now)
            else:
                return
            self.received[kind] = self.received.get(kind, 0) + 1
            self._lock.notify_all()

    def _send_heartbeat(self) -> None:
        with self._send_lock:
            self.conn.mav.heartbeat_send(
                mavlink.MAV_TYPE_ONBOARD_CONTROLLER, mavlink.MAV_AUTOPILOT_INVALID, 0, 0, mavlink.MAV_STATE_ACTIVE
            )

    def _send_setpoint(self, thrust: float, rates_frd: list[float]) -> None:
        """SET_ATTITUDE_TARGET with body rates and thrust; the caller holds ``_send_lock``."""
        self.conn.mav.set_attitude_target_send(
            int((time.monotonic() - self._t0) * 1e3) & 0xFFFFFFFF,
            *self.target,
            mavlink.ATTITUDE_TARGET_TYPEMASK_ATTITUDE_IGNORE,
            [1.0, 0.0, 0.0, 0.0],
            *rates_frd,
            thrust,
        )

    # -- commands ------------------------------------------------------------------------------
    def _command(self, command: int, *params: float) -> int:
        p = list(params) + [0.0] * (7 - len(params))
        name = COMMAND_NAMES.get(command, f"MAV_CMD {command}")
        for confirmation in range(self.config.command_retries + 1):
            with self._lock:
                self._acks.pop(command, None)
            with self._send_lock:
                self.conn.mav.command_long_send(*self.target, command, confirmation, *p)
            with self._lock:
                if self._lock.wait_for(lambda: command in self._acks, self.config.command_timeout_s):
                    return self._acks.pop(command)
        raise HardwareError(
            f"{self.where}: no COMMAND_ACK to {name} within {self.config.command_timeout_s:g} s "
            f"({self.config.command_retries + 1} tries)"
        )

    @property
    def armed(self) -> bool:
        """The newest HEARTBEAT's armed flag."""
        hb = self._heartbeat
        return hb is not None and bool(hb.base_mode & mavlink.MAV_MODE_FLAG_SAFETY_ARMED)

    @property
    def flight_mode(self) -> str:
        """PX4's mode in the newest HEARTBEAT (``OFFBOARD``, ``AUTO.LAND`` ...)."""
        hb = self._heartbeat
        return mode_name(*mode_of(hb.custom_mode)) if hb is not None else ""

    # -- state and commands --------------------------------------------------------------------
    def _read(self) -> State:
        now = time.monotonic()
        with self._lock:
            (att, t_att), (pos, t_pos) = (self._newest[n] for n in STATE_MESSAGES)
        t_s = min(t_att, t_pos)
        if now - t_s > self.config.state_timeout_s:
            stale = STATE_MESSAGES[0] if t_att <= t_pos else STATE_MESSAGES[1]
            raise HardwareError(
                f"{self.where}: no {stale} for {(now - t_s) * 1e3:.0f} ms (streamed at "
                f"{self.config.stream_rate_hz:g} Hz; state_timeout_s {self.config.state_timeout_s:g})"
            )
        return {
            "pos_w": swap_ned_enu([pos.x, pos.y, pos.z]),
            "quat_wxyz": swap_attitude([att.q1, att.q2, att.q3, att.q4]),
            "lin_vel_w": swap_ned_enu([pos.vx, pos.vy, pos.vz]),
            "ang_vel_b": swap_frd_flu([att.rollspeed, att.pitchspeed, att.yawspeed]),
            "t_s": time_stamp(t_s),
        }
