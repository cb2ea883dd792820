"""What PX4's two wires share: frames, modes, command results, and the offboard hand-over.

A PX4 vehicle is reached over MAVLink (:mod:`~simreal.hardware.px4.mavlink`, no ROS) or over
its uXRCE-DDS bridge as ROS 2 ``px4_msgs`` (:mod:`~simreal.hardware.px4.ros2`). Both carry the
same commander: ``VehicleCommand`` has MAVLink's ``MAV_CMD`` numbers and ``VehicleCommandAck``
MAVLink's ``MAV_RESULT`` values, so arming, the mode switch and their answers are written once
here (:class:`PX4Vehicle`); a driver implements the wire (``_command`` and the state).

Frames: PX4's NED / FRD against simreal's ENU / FLU, :mod:`simreal.ned_frames`. Imports numpy
and the core.
"""

from __future__ import annotations

import abc
import threading
import time
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from simreal.action_modes import total_thrust_n
from simreal.errors import ConfigError
from simreal.hardware.robot import HardwareError, Robot, RobotConfig
from simreal.ned_frames import swap_frd_flu
from simreal.robot_spec import RobotSpec

if TYPE_CHECKING:
    from simreal.hardware.px4.mavlink import PX4Config
    from simreal.hardware.px4.ros2 import PX4Ros2Config

#: PX4's custom main modes (``px4_custom_mode.h``) and AUTO's sub modes, the ones named here.
MAIN_MODES = {1: "MANUAL", 2: "ALTCTL", 3: "POSCTL", 4: "AUTO", 5: "ACRO", 6: "OFFBOARD", 7: "STABILIZED"}
AUTO_SUB_MODES = {1: "READY", 2: "TAKEOFF", 3: "LOITER", 4: "MISSION", 5: "RTL", 6: "LAND"}
OFFBOARD = 6
AUTO, AUTO_LOITER, AUTO_LAND = 4, 3, 6
#: COMPONENT_ARM_DISARM param2 that skips PX4's checks (disarm in the air, arm without them).
FORCE = 21196.0
#: MAV_CMD numbers (MAVLink ``common.xml``; ``VehicleCommand.VEHICLE_CMD_*`` has the same values).
CMD_DO_SET_MODE = 176
CMD_COMPONENT_ARM_DISARM = 400
CMD_SET_MESSAGE_INTERVAL = 511
COMMAND_NAMES = {
    CMD_DO_SET_MODE: "DO_SET_MODE",
    CMD_COMPONENT_ARM_DISARM: "COMPONENT_ARM_DISARM",
    CMD_SET_MESSAGE_INTERVAL: "SET_MESSAGE_INTERVAL",
}
#: DO_SET_MODE param1 flag: param2 and param3 are PX4's custom main and sub mode.
MODE_FLAG_CUSTOM_MODE_ENABLED = 1
#: MAV_RESULT (``VehicleCommandAck.VEHICLE_CMD_RESULT_*``: the same values).
RESULTS = {
    0: "ACCEPTED",
    1: "TEMPORARILY_REJECTED",
    2: "DENIED",
    3: "UNSUPPORTED",
    4: "FAILED",
    5: "IN_PROGRESS",
    6: "CANCELLED",
}
ACCEPTED, TEMPORARILY_REJECTED, DENIED, UNSUPPORTED, FAILED = 0, 1, 2, 3, 4


# -- modes and results -----------------------------------------------------------------------------
def mode_name(main: int, sub: int = 0) -> str:
    """PX4's name of a mode: ``OFFBOARD``, ``AUTO.LAND``, ..."""
    name = MAIN_MODES.get(main, f"mode {main}")
    return f"{name}.{AUTO_SUB_MODES.get(sub, sub)}" if main == AUTO else name


def result_name(result: int) -> str:
    """MAV_RESULT's name without its prefix (``ACCEPTED``, ``TEMPORARILY_REJECTED``, ...)."""
    return RESULTS.get(result, f"result {result}")


# -- the hand-over ---------------------------------------------------------------------------------
class PX4Vehicle(Robot):
    """A PX4 vehicle's commander calls and body-rate set-points over any wire; a driver
    implements :meth:`_command`, :meth:`_send_setpoint`, :attr:`armed`, :attr:`flight_mode`,
    the state, and a link thread that calls :meth:`_repeat_setpoint`.

    Set-points: ``send_action([T, p, q, r])`` (ctbr: collective thrust [N], FLU body rates
    [rad/s]) goes out as ``thrust = T / sum(f_max)`` in [0, 1] and FRD rates, both float32 (the
    returned command is that, back in ctbr units). The link thread repeats the newest one at
    the config's ``setpoint_rate_hz`` for at most ``setpoint_hold_s`` after it was given, so
    offboard mode sees a stream (PX4 wants more than 2 Hz) while a command waits for its
    answer, yet a dead controller stops the stream and PX4's offboard-loss failsafe acts.

    :meth:`engage` is PX4's offboard recipe: stream the safe set-point, switch to OFFBOARD
    (PX4 refuses it until set-points flow), then arm, so the motors start under offboard.
    """

    families = ("quadrotor",)
    #: what carries the set-point on the wire, for the error naming the action mode
    setpoint_wire: ClassVar[str] = ""
    where: str  # "PX4 on <link>": the start of every error line
    config: PX4Config | PX4Ros2Config  # a wire's config: both have setpoint_rate_hz and setpoint_hold_s

    def __init__(self, config: RobotConfig, spec: RobotSpec | None = None):
        super().__init__(config, spec)
        if self.mode.name != "ctbr":
            raise ConfigError(
                "action_mode", f"{type(self).__name__} takes ctbr ({self.setpoint_wire}), got {self.mode.name}"
            )
        self.full_thrust_n = total_thrust_n(self.spec)
        self._lock = threading.Condition()
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _reset(self) -> None:
        """Forget the previous connection's answers and set-point (a driver adds its own state)."""
        self._acks: dict[int, int] = {}  # command -> PX4's newest result
        self._setpoint: tuple[tuple[float, list[float]], float] | None = None  # ((thrust, FRD rates), given at)
        self._sent_at = 0.0
        self._stop.clear()

    @abc.abstractmethod
    def _send_setpoint(self, thrust: float, rates_frd: list[float]) -> None:
        """Put one set-point on the wire: ``thrust`` in [0, 1], FRD rates [rad/s]; the caller
        holds ``_send_lock``."""

    def _write(self, u: np.ndarray) -> np.ndarray:
        thrust = np.float32(min(max(u[0] / self.full_thrust_n, 0.0), 1.0))
        rates_frd = swap_frd_flu(u[1:4]).astype(np.float32)
        sp = (float(thrust), [float(r) for r in rates_frd])
        with self._send_lock:
            self._setpoint = (sp, time.monotonic())
            self._send_setpoint(*sp)
            self._sent_at = time.monotonic()
        # what went out, back in the action's units: the wire's float32 rounding included
        return np.concatenate([[float(thrust) * self.full_thrust_n], swap_frd_flu(rates_frd.astype(np.float64))])

    def _repeat_setpoint(self, now: float) -> None:
        """Send the newest set-point again if it is due and not too old (class docstring)."""
        cfg = self.config
        with self._send_lock:  # read and sent under the lock: a repeat never follows a newer set-point
            sp = self._setpoint
            if (
                sp is not None
                and now - sp[1] <= cfg.setpoint_hold_s
                and now - self._sent_at >= 1.0 / cfg.setpoint_rate_hz
            ):
                self._send_setpoint(*sp[0])
                self._sent_at = time.monotonic()

    @abc.abstractmethod
    def _command(self, command: int, *params: float) -> int:
        """Send command ``command`` with up to seven params; PX4's result (:data:`RESULTS`)."""

    @property
    @abc.abstractmethod
    def armed(self) -> bool:
        """PX4's newest armed state."""

    @property
    @abc.abstractmethod
    def flight_mode(self) -> str:
        """PX4's newest mode (``OFFBOARD``, ``AUTO.LAND`` ...; empty before any report)."""

    def command(self, command: int, *params: float) -> int:
        """Send ``command`` (a MAV_CMD number, up to seven params) and return PX4's result."""
        self._require()
        return self._command(command, *params)

    def _expect(self, what: str, result: int, hint: str = "") -> None:
        if result != ACCEPTED:
            raise HardwareError(f"{self.where}: PX4 answered {result_name(result)} to {what}{hint}")

    def arm(self, force: bool = False) -> None:
        """Arm the motors (``force``: skip PX4's pre-arm checks)."""
        self._expect(
            "arm",
            self.command(CMD_COMPONENT_ARM_DISARM, 1.0, FORCE if force else 0.0),
            "; see its pre-arm messages (QGroundControl)",
        )

    def disarm(self, force: bool = False) -> None:
        """Stop the motors; PX4 refuses in the air unless ``force`` (the vehicle then falls)."""
        self._expect(
            "disarm",
            self.command(CMD_COMPONENT_ARM_DISARM, 0.0, FORCE if force else 0.0),
            "" if force else "; PX4 disarms only when landed (force=True cuts the motors in the air)",
        )

    def engage(self) -> None:
        """Stream the safe set-point, switch to OFFBOARD, then arm (class docstring). Nothing
        when PX4 already reports armed in OFFBOARD: the safe set-point (zero thrust) would drop
        a vehicle in flight until the next command."""
        if self.armed and self.flight_mode == "OFFBOARD":
            return
        self.send_action(self.safe_command())
        self.set_offboard()
        if not self.armed:
            self.arm()

    def set_offboard(self) -> None:
        """Switch to OFFBOARD; needs the set-point stream running (``send_action`` first)."""
        self._expect(
            "OFFBOARD (DO_SET_MODE)",
            self.command(CMD_DO_SET_MODE, MODE_FLAG_CUSTOM_MODE_ENABLED, OFFBOARD, 0),
            "; PX4 takes offboard only while set-points stream in (> 2 Hz): send_action() first",
        )
