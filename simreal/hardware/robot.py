"""The robot interface every driver and its simulated twin implement (DESIGN.md, Robot interface).

A robot is four calls, LeRobot's shape::

    with SomeRobot(SomeConfig(...)) as robot:        # connect() ... disconnect()
        state = robot.observation()                  # robot-state keys, SI units
        sent = robot.send_action(u)                  # what really went out

- ``observation()`` returns the robot-state keys of :mod:`simreal.observations`
  (``joint_pos``, ``joint_vel`` in the spec's actuator order; ``quat_wxyz``,
  ``ang_vel_b``, ``pos_w``, ``lin_vel_w`` where the robot measures them) plus ``t_s``, the
  time the state was measured on the host's monotonic clock [s]. The deploy runner's
  observation terms read it unchanged.
- ``send_action(u)`` takes a physical command in the config's action mode
  (:mod:`simreal.action_modes`), one channel per actuator in spec order. The command is
  clamped to the spec's hard limits (joint range, effort or thrust limits) *here*, before any
  driver sees it, and a non-finite command is refused with :class:`HardwareError`; the
  returned array is what the driver put on the wire, in the same units.
- ``engage()`` is the hand-over some robots need before they move (arming a flight
  controller); never implicit in ``connect()``.
- ``disconnect()`` first sends the action mode's safe command (hold the measured pose, zero
  thrust, zero effort), then releases the device. It is idempotent and runs on any exit
  from the ``with`` block, exceptions included.

A driver subclasses :class:`Robot` and implements ``_open``, ``_close``, ``_read`` and
``_write``. Imports numpy and simreal core only (the lean robot runtime).

A driver whose wire is DDS (a ROS 2 graph, Unitree's low level) names its topics and message
classes in ``ros_topics()`` and hands every sample it receives or sends, as the CDR bytes on
the wire, to ``wire_tap(topic, data)`` when one is set: ``open_robot(..., bag=DIR)`` records
them as a rosbag2 (``--bag`` on ``simreal record`` and ``simreal drive``).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from types import TracebackType
from typing import ClassVar, cast

import numpy as np

from simreal.action_modes import ActionMode, action_mode
from simreal.errors import SimrealError
from simreal.robot_spec import RobotSpec, load_robot_spec

State = dict[str, np.ndarray]


def time_stamp(t_s: float) -> np.ndarray:
    """``t_s`` [s] as a state carries it: a numpy float64 scalar. :data:`State` types every value
    as an array (the deploy runner's terms read them as arrays), which a numpy scalar stands in
    for as a 0-d one; the cast says so to the type checker and changes nothing at run time."""
    return cast(np.ndarray, np.float64(t_s))


class HardwareError(SimrealError):
    """A device is absent, did not answer, or was used before ``connect()``."""


@dataclasses.dataclass(frozen=True)
class RobotConfig:
    """What every driver's config has; drivers extend it with their port, address or topics.

    Attributes:
      robot: robot spec name (``configs/robots/<name>.yaml``) or path.
      action_mode: what ``send_action`` takes (:data:`simreal.action_modes.ACTION_MODES`).
    """

    robot: str
    action_mode: str = "joint_position"


class Robot(abc.ABC):
    """Base of every driver and twin (see module docstring).

    Class attributes:
      config_class: the driver's config dataclass (the CLI builds it from ``--robot-config``).
      families: robot spec families the driver serves (``humanoid``, ``arm``, ``quadrotor``).
    """

    config_class: ClassVar[type[RobotConfig]] = RobotConfig
    families: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: RobotConfig, spec: RobotSpec | None = None):
        self.config = config
        self.spec = spec or load_robot_spec(config.robot)
        if self.families and self.spec.family not in self.families:
            raise HardwareError(
                f"{type(self).__name__} drives {'/'.join(self.families)} robots; "
                f"robot '{self.spec.name}' is a {self.spec.family}"
            )
        self.mode: ActionMode = action_mode(config.action_mode)
        self.names = self.spec.actuator_names
        self.low, self.high = self.mode.spec_limits(self.spec, self.names)
        self.connected = False
        self.disconnect_error = ""  # why the safe command on disconnect did not go out ('' when it did)
        self.last_state: State | None = None
        self.takes_commands = True  # False: a device only read (a leader arm): no safe command on disconnect
        self.wire_tap: Callable[[str, bytes], None] | None = None  # see the module docstring

    def ros_topics(self) -> dict[str, type]:
        """The ROS 2 topics of the driver's DDS wire, ``{"/lowcmd": LowCmd class, ...}``; empty for
        a driver whose wire is not DDS (a serial bus, a radio, MAVLink)."""
        return {}

    # -- what drivers implement ----------------------------------------------------------------
    @abc.abstractmethod
    def _open(self) -> None:
        """Open the device (port, socket, DDS participant); raise HardwareError if absent."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Release the device (after the safe command went out)."""

    @abc.abstractmethod
    def _read(self) -> State:
        """One state measurement (see module docstring for the keys)."""

    @abc.abstractmethod
    def _write(self, u: np.ndarray) -> np.ndarray:
        """Put a clamped, finite command on the wire; return what was sent (after any
        quantisation the wire format imposes, in the same units)."""

    # -- the interface -------------------------------------------------------------------------
    def connect(self) -> None:
        if not self.connected:
            self._open()
            self.connected = True

    def disconnect(self) -> None:
        """Send the safe command once more and release the device. A link already gone cannot
        take it: that is kept in :attr:`disconnect_error`, and the device released all the same
        (raising here would hide the run's own report)."""
        if not self.connected:
            return
        errors = []
        try:
            if self.takes_commands:
                self._write(self.safe_command())
        except HardwareError as e:
            errors.append(str(e))
        finally:
            self.connected = False
            try:
                self._close()
            except HardwareError as e:  # e.g. the torque-off write of a bus already gone
                errors.append(str(e))
            self.disconnect_error = "; ".join(errors)

    def observation(self) -> State:
        self._require()
        self.last_state = self._read()
        return self.last_state

    def send_action(self, u: np.ndarray) -> np.ndarray:
        self._require()
        u = np.asarray(u, np.float64).reshape(-1)
        if u.shape != (len(self.names),):
            raise HardwareError(
                f"{self.spec.name}: send_action takes {len(self.names)} {self.mode.name} channels "
                f"({', '.join(self.mode.channel_names(self.spec))}), got {u.shape[0]}"
            )
        if not np.all(np.isfinite(u)):
            raise HardwareError(f"{self.spec.name}: refused a non-finite command {u.tolist()}")
        return self._write(np.clip(u, self.low, self.high))

    def engage(self) -> None:  # noqa: B027 - a hook, nothing to do by default
        """The hand-over before the robot takes a policy's commands (PX4: arm and OFFBOARD; a
        Crazyflie: open the thrust lock); nothing for robots that take commands once connected.
        :func:`simreal.hardware.drive.drive` calls it once, before its first tick; on a robot
        already engaged it does nothing (a second hand-over would send a flying vehicle the safe
        zero-thrust command)."""

    def safe_command(self) -> np.ndarray:
        """The action mode's safe command from the last measured state (or the spec's default)."""
        return self.mode.safe_command(self.spec, self.names, self.last_state)

    def _require(self) -> None:
        if not self.connected:
            raise HardwareError(
                f"{type(self).__name__} ({self.spec.name}) is not connected; "
                f"call connect() or use it as a context manager"
            )

    def __enter__(self) -> Robot:
        self.connect()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.disconnect()
