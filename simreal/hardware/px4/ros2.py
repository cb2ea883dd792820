"""PX4 over ROS 2 ``px4_msgs``: PX4's uXRCE-DDS bridge spoken directly with the ``cyclonedds`` wheel.

    >>> cfg = PX4Ros2Config("crazyflie2", domain_id=0, px4_version="1.16")
    >>> with PX4Ros2Robot(cfg) as px4:
    ...     s = px4.observation()                  # pos_w, quat_wxyz, lin_vel_w, ang_vel_b (ENU / FLU), t_s
    ...     px4.engage()                           # set-points streaming, OFFBOARD, armed
    ...     ...                                    # hardware.drive(px4, runner) sends a command per tick

PX4 v1.14 and later reach ROS 2 through the uXRCE-DDS client on the flight controller and
``MicroXRCEAgent`` on the companion computer, which publishes PX4's uORB topics as ROS 2
topics of ``px4_msgs`` types. ``px4_msgs`` has no wheel, and its layout must match the PX4
release exactly, or a sample deserialises into garbage. This driver needs neither a ROS
install nor ``px4_msgs``: the messages it speaks are Cyclone DDS classes in
:mod:`simreal.deploy.ros_types` with the type names ROS 2 registers, checked against rosbags'
independent CDR serializer (``tests/deploy/test_dds_wire.py``). Their layouts were compared across
``px4_msgs`` release/1.15 to release/1.18 and agree; v1.14's ``VehicleCommand`` and
``OffboardControlMode`` differ, so ``px4_version`` takes 1.15 to 1.18.

Wire (ROS 2 names; DDS adds ``rt/``; ``namespace`` goes in front for a multi-vehicle setup):

==================================  ======================  ==========================================
topic                                type                    use
==================================  ======================  ==========================================
``/fmu/out/vehicle_odometry``        ``VehicleOdometry``     the state: NED position and velocity,
                                                             ``q`` body FRD to NED, FRD body rates
``/fmu/out/vehicle_status[_vN]``     ``VehicleStatus``       armed and navigation state (the first
                                                             nine fields, the same in every release;
                                                             ``_v1`` from PX4 1.16 on: message
                                                             versioning renamed the topic)
``/fmu/out/vehicle_command_ack``     ``VehicleCommandAck``   the commander's answer, MAV_RESULT
``/fmu/in/vehicle_command``          ``VehicleCommand``      arm, DO_SET_MODE (MAV_CMD numbers)
``/fmu/in/vehicle_rates_setpoint``   ``VehicleRatesSetpoint`` FRD body rates, ``thrust_body`` =
                                                             ``(0, 0, -T / sum f_max)``
``/fmu/in/offboard_control_mode``    ``OffboardControlMode`` ``body_rate`` = true with every
                                                             set-point: PX4's proof of life
==================================  ======================  ==========================================

PX4's publishers are best effort (the reader here is too); the set-points are written reliable,
which a best-effort reader accepts. ``timestamp`` fields carry the host's clock in µs, as
``rclcpp``'s default clock gives them; the bridge's time sync maps them to PX4's.

Set-points, commands and frames are the MAVLink driver's (:mod:`~simreal.hardware.px4.mavlink`;
:mod:`~simreal.hardware.px4.common` for the hand-over and frames): a background thread
repeats the newest set-point at ``setpoint_rate_hz`` for at most ``setpoint_hold_s``, so
``set_offboard()`` and ``arm()`` see a stream while a dead controller stops it and PX4's
offboard-loss failsafe takes over. Each command waits for its ``VehicleCommandAck`` and is sent
again, with ``confirmation`` + 1, when none came. ``disconnect()`` sends zero thrust and zero
rates once and stops the stream.

``t_s`` is the host's receive time of the newest odometry; ``observation()`` refuses a state
older than ``state_timeout_s``, so the drive loop's watchdog acts. Imports numpy, cyclonedds
and the core.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from simreal.config import field
from simreal.deploy import ros_types as R
from simreal.deploy.adapters import StateDecoder, StateMessageError
from simreal.hardware.px4.common import COMMAND_NAMES, PX4Vehicle
from simreal.hardware.robot import HardwareError, RobotConfig, State, time_stamp
from simreal.robot_spec import RobotSpec

#: ``VehicleStatus``'s topic per PX4 release: message versioning (v1.16) appends ``_v`` and the
#: message's version to the topic of a message whose version is above 0.
STATUS_TOPICS = {
    "1.15": "vehicle_status",
    "1.16": "vehicle_status_v1",
    "1.17": "vehicle_status_v1",
    "1.18": "vehicle_status_v4",
}
#: PX4's navigation states (``VehicleStatus.NAVIGATION_STATE_*``) as the commander's mode names.
NAV_STATES = {
    0: "MANUAL",
    1: "ALTCTL",
    2: "POSCTL",
    3: "AUTO.MISSION",
    4: "AUTO.LOITER",
    5: "AUTO.RTL",
    10: "ACRO",
    14: "OFFBOARD",
    15: "STABILIZED",
    17: "AUTO.TAKEOFF",
    18: "AUTO.LAND",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class PX4Ros2Config(RobotConfig):
    """A PX4 vehicle behind MicroXRCEAgent on a DDS domain (see module docstring)."""

    action_mode: str = field("ctbr", choices=("ctbr",), doc="collective thrust [N] and FLU body rates [rad/s]")
    px4_version: str = field("1.16", choices=tuple(STATUS_TOPICS), doc="the PX4 release on the vehicle")
    domain_id: int = field(0, min=0, max=232, doc="ROS_DOMAIN_ID of the agent")
    loopback: bool = field(False, doc="discover and talk on 127.0.0.1 only (PX4 SITL and the agent on this computer)")
    namespace: str = field("", doc="topic prefix of a multi-vehicle setup (uxrce_dds_ns, e.g. /px4_1)")
    system_id: int = field(1, min=1, max=255, doc="the vehicle's MAV_SYS_ID (VehicleCommand.target_system)")
    source_system: int = field(255, min=1, max=255, doc="our system id in VehicleCommand")
    source_component: int = field(191, min=1, max=65535, doc="our component id (191: onboard computer)")
    connect_timeout_s: float = field(5.0, min=0.01, doc="wait for the first odometry and status [s]")
    command_timeout_s: float = field(0.5, min=0.01, doc="wait for one VehicleCommandAck [s]")
    command_retries: int = field(2, min=0, doc="re-sends of a command whose ack did not come")
    state_timeout_s: float = field(0.1, min=0.001, doc="observation() refuses a state older than this [s]")
    setpoint_rate_hz: float = field(20.0, min=2.5, doc="least rate the newest set-point is repeated at [Hz]")
    setpoint_hold_s: float = field(0.5, min=0.0, doc="repeat a set-point at most this long after send_action [s]")


#: The bridge's topics the driver and its twin speak: role -> (topic, message class); the status
#: topic's name depends on the release (:data:`STATUS_TOPICS`).
TOPICS: dict[str, tuple[str, type]] = {
    "odometry": ("/fmu/out/vehicle_odometry", R.VehicleOdometry),
    "status": ("/fmu/out/vehicle_status", R.VehicleStatusHead),
    "ack": ("/fmu/out/vehicle_command_ack", R.VehicleCommandAck),
    "command": ("/fmu/in/vehicle_command", R.VehicleCommand),
    "rates": ("/fmu/in/vehicle_rates_setpoint", R.VehicleRatesSetpoint),
    "offboard": ("/fmu/in/offboard_control_mode", R.OffboardControlMode),
}


def topic(namespace: str, name: str) -> str:
    """``/fmu/...`` under ``namespace`` (``""`` or ``/px4_1``)."""
    return "/" + "/".join(p for p in (namespace.strip("/"), name.strip("/")) if p)


def px4_topics(namespace: str, px4_version: str) -> dict[str, str]:
    """Role -> the topic of :data:`TOPICS` for a release, under ``namespace``."""
    names = {k: v[0] for k, v in TOPICS.items()}
    names["status"] = f"/fmu/out/{STATUS_TOPICS[px4_version]}"
    return {k: topic(namespace, v) for k, v in names.items()}


def _now_us() -> int:
    return time.time_ns() // 1000


class PX4Ros2Robot(PX4Vehicle):
    """The vehicle over ``px4_msgs`` (see module docstring)."""

    config_class = PX4Ros2Config
    setpoint_wire = "VehicleRatesSetpoint"

    def __init__(self, config: PX4Ros2Config, spec: RobotSpec | None = None):
        super().__init__(config, spec)
        self.config: PX4Ros2Config = config
        self.where = f"PX4 {config.px4_version} on DDS domain {config.domain_id}"
        self.topics = px4_topics(config.namespace, config.px4_version)
        self.odometry_decoder = StateDecoder("px4_msgs/msg/VehicleOdometry")
        self.transport: Any = None
        self._reset()

    def ros_topics(self) -> dict[str, type]:
        """Every topic the driver speaks whose whole layout it knows (not VehicleStatus)."""
        return {self.topics[k]: cls for k, (_, cls) in TOPICS.items() if k != "status"}

    def _reset(self) -> None:
        super()._reset()
        self.odometry: tuple[R.VehicleOdometry, float] | None = None
        self.status: R.VehicleStatusHead | None = None
        self.received = {"odometry": 0, "status": 0, "ack": 0}

    # -- connect / disconnect ------------------------------------------------------------------
    def _open(self) -> None:
        from simreal.deploy.transport_dds import DdsTransport

        cfg = self.config
        self._reset()
        self.transport = DdsTransport(cfg.domain_id, loopback=cfg.loopback)
        t = self.topics
        for k in ("odometry", "status", "ack"):
            self.transport.subscribe(t[k], TOPICS[k][1], self._on(k))
        self._pubs = {k: self.transport.publisher(t[k], TOPICS[k][1]) for k in ("command", "rates", "offboard")}
        self._thread = threading.Thread(target=self._serve, name=f"px4-ros2 {cfg.domain_id}", daemon=True)
        self._thread.start()
        with self._lock:
            ok = self._lock.wait_for(
                lambda: self.odometry is not None and self.status is not None, cfg.connect_timeout_s
            )
            missing = [t[k] for k, v in (("odometry", self.odometry), ("status", self.status)) if v is None]
        if not ok:
            self._close()  # outside the lock: the thread it joins takes the lock for every sample
            raise HardwareError(
                f"{self.where}: no {' or '.join(missing)} within {cfg.connect_timeout_s:g} s; "
                f"is MicroXRCEAgent running (MicroXRCEAgent udp4 -p 8888) on this domain, "
                f"and px4_version {cfg.px4_version} the vehicle's release?"
            )

    def _close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    # -- the bridge's thread -------------------------------------------------------------------
    def _on(self, kind: str):
        def take(msg: Any, t_rx: float, data: bytes) -> None:
            with self._lock:
                if kind == "odometry":
                    self.odometry = (msg, t_rx)
                elif kind == "status":
                    self.status = msg
                else:
                    self._acks[msg.command] = msg.result
                self.received[kind] += 1
                self._lock.notify_all()
            if self.wire_tap is not None and kind != "status":
                self.wire_tap(self.topics[kind], data)

        return take

    def _serve(self) -> None:
        """Take every sample in; repeat the newest set-point (module docstring)."""
        while not self._stop.is_set():
            self.transport.poll(0.005)
            self._repeat_setpoint(time.monotonic())

    def _publish(self, kind: str, msg: Any) -> None:
        data = self._pubs[kind].publish(msg)
        if self.wire_tap is not None:
            self.wire_tap(self.topics[kind], data)

    def _send_setpoint(self, thrust: float, rates_frd: list[float]) -> None:
        """OffboardControlMode (body rates), then VehicleRatesSetpoint; the caller holds ``_send_lock``."""
        stamp = _now_us()
        self._publish("offboard", R.OffboardControlMode(timestamp=stamp, body_rate=True))
        self._publish(
            "rates",
            R.VehicleRatesSetpoint(
                timestamp=stamp,
                roll=rates_frd[0],
                pitch=rates_frd[1],
                yaw=rates_frd[2],
                thrust_body=[0.0, 0.0, -thrust],  # type: ignore[arg-type]  # cyclonedds IDL array[float32, 3]: a list
            ),
        )

    # -- the commander -------------------------------------------------------------------------
    def _command(self, command: int, *params: float) -> int:
        cfg = self.config
        p = list(params) + [0.0] * (7 - len(params))
        name = COMMAND_NAMES.get(command, f"command {command}")
        for confirmation in range(cfg.command_retries + 1):
            with self._lock:
                self._acks.pop(command, None)
            msg = R.VehicleCommand(
                timestamp=_now_us(),
                param1=p[0],
                param2=p[1],
                param3=p[2],
                param4=p[3],
                param5=p[4],
                param6=p[5],
                param7=p[6],
                command=command,
                target_system=cfg.system_id,
                target_component=1,
                source_system=cfg.source_system,
                source_component=cfg.source_component,
                confirmation=confirmation,
                from_external=True,
            )
            with self._send_lock:
                self._publish("command", msg)
            with self._lock:
                if self._lock.wait_for(lambda: command in self._acks, cfg.command_timeout_s):
                    return self._acks.pop(command)
        raise HardwareError(
            f"{self.where}: no VehicleCommandAck to {name} on {self.topics['ack']} within "
            f"{cfg.command_timeout_s:g} s ({cfg.command_retries + 1} tries)"
        )

    @property
    def armed(self) -> bool:
        """The newest VehicleStatus's arming state."""
        s = self.status
        return s is not None and s.arming_state == R.VehicleStatusHead.ARMING_STATE_ARMED

    @property
    def flight_mode(self) -> str:
        """The newest VehicleStatus's navigation state as PX4's mode name."""
        s = self.status
        return "" if s is None else NAV_STATES.get(s.nav_state, f"nav_state {s.nav_state}")

    # -- state and commands --------------------------------------------------------------------
    def _read(self) -> State:
        now = time.monotonic()
        with self._lock:
            assert self.odometry is not None  # _open returned only once odometry had come; _reset is in _open
            odom, t_s = self.odometry
        if now - t_s > self.config.state_timeout_s:
            raise HardwareError(
                f"{self.where}: no {self.topics['odometry']} for {(now - t_s) * 1e3:.0f} ms "
                f"(state_timeout_s {self.config.state_timeout_s:g})"
            )
        try:
            state = self.odometry_decoder(odom)  # the deploy runner's: NED/FRD -> ENU/FLU, NED frames only
        except StateMessageError as e:
            raise HardwareError(f"{self.where}: {e}") from None
        return {**state, "t_s": time_stamp(t_s)}
