"""Teleoperation: a human device becomes the robot's command, through the robot interface.

A teleoperator is LeRobot's shape: ``connect()`` / ``disconnect()`` (a context manager) and
``command(state) -> u``, the next physical command in the robot's action mode given the
measured robot state (``Robot.observation()``), so the same teleoperator drives the twin
and the real robot (``simreal record``)::

    with SO100Robot(cfg) as robot, JointJog(Keyboard(), robot.spec) as teleop:
        while True:
            s = robot.observation()
            robot.send_action(teleop.command(s))

Two kinds:

- *absolute*: a leader arm (:mod:`simreal.hardware.teleop.leader_arm`) measures joint angles; the
  follower's command is the leader's pose.
- *rate*: a keyboard, gamepad or SpaceMouse (:mod:`simreal.hardware.teleop.devices`) gives 6
  axes in [-1, 1] and buttons; :class:`JointJog` integrates them into joint position
  targets: ``q*_{k+1} = clip(q*_k + v_max * a * dt, range)``, axis ``i`` moving joint
  ``i`` (or the joints in ``axis_joints``), at most ``v_max = speed * velocity_limit``.
  ``dt`` is the measured time between calls (capped at 0.1 s, so a stall does not jump).
  The target starts at, and button 0 resets it to, the measured pose; button 3 ends the
  episode being recorded. The target never
  leads the measured pose by more than ``max_lead`` [rad]: a blocked joint does not wind up.

Imports numpy and simreal core only.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable, Sequence
from types import TracebackType

import numpy as np

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec

State = dict[str, np.ndarray]
#: The device button that ends an episode (a keyboard's x or Esc).
END_BUTTON = 3


@dataclasses.dataclass(frozen=True)
class DeviceInput:
    """One reading of a rate device: ``axes`` (6,) in [-1, 1] (x, y, z, roll, pitch, yaw for
    a SpaceMouse; sticks and triggers for a gamepad; key pairs for a keyboard) and
    ``buttons`` (pressed, in the device's order)."""

    axes: np.ndarray
    buttons: tuple[bool, ...] = ()


class InputDevice(abc.ABC):
    """A rate device: opened, read without blocking, closed."""

    @abc.abstractmethod
    def open(self) -> None: ...

    @abc.abstractmethod
    def read(self) -> DeviceInput:
        """The device's current state; never blocks longer than a few milliseconds."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Teleop(abc.ABC):
    """Anything that turns a human's input into the robot's next command."""

    @abc.abstractmethod
    def connect(self) -> None: ...

    @abc.abstractmethod
    def disconnect(self) -> None: ...

    @abc.abstractmethod
    def command(self, state: State) -> np.ndarray:
        """The next physical command (spec actuator order) given the measured robot state."""

    def end_requested(self) -> bool:
        """Whether the operator asked to end the episode (a device's end button)."""
        return False

    def __enter__(self) -> Teleop:
        self.connect()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.disconnect()


class DeviceTeleop(Teleop):
    """A teleoperator driven by a rate device: opens and closes it, reads it once per command
    with the time since the last read (``dt``, capped at 0.1 s, so a stall does not jump; 0 on
    the first), and ends the episode on :data:`END_BUTTON`. ``low``, ``high``: the spec's joint
    ranges (spec order; unbounded joints infinite)."""

    def __init__(self, device: InputDevice, spec: RobotSpec, clock: Callable[[], float]):
        self.device, self.spec, self.clock = device, spec, clock
        rng = [spec.actuator(n).range or (-np.inf, np.inf) for n in spec.actuator_names]
        self.low, self.high = np.array([r[0] for r in rng]), np.array([r[1] for r in rng])
        self._t: float | None = None
        self._end = False

    def connect(self) -> None:
        self.device.open()

    def disconnect(self) -> None:
        self.device.close()

    def read(self) -> tuple[DeviceInput, float]:
        """The device's input and ``dt`` [s]."""
        inp = self.device.read()
        self._end = len(inp.buttons) > END_BUTTON and inp.buttons[END_BUTTON]
        t = self.clock()
        dt = 0.0 if self._t is None else min(t - self._t, 0.1)
        self._t = t
        return inp, dt

    def end_requested(self) -> bool:
        return self._end

    #: What each device button does (index: words), for the operator's banner.
    BUTTONS = {0: "back to the measured pose", END_BUTTON: "end the episode"}

    def axes(self) -> list[str]:
        """What each device axis moves, in axis order, for the operator's banner."""
        return []


class JointJog(DeviceTeleop):
    """Joint position targets integrated from a rate device (see module docstring).

    Args:
      device: the input device.
      spec: the robot (ranges and velocity limits).
      axis_joints: joint driven by each axis, by name (default: the first six actuators).
      speed: fraction of each joint's velocity limit at full deflection.
      max_lead: how far [rad] the target may run ahead of the measured pose.
      clock: monotonic clock [s].
    """

    def __init__(
        self,
        device: InputDevice,
        spec: RobotSpec,
        *,
        axis_joints: Sequence[str] | None = None,
        speed: float = 0.25,
        max_lead: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
    ):
        names = spec.actuator_names
        axis_joints = tuple(axis_joints) if axis_joints is not None else names[:6]
        unknown = [n for n in axis_joints if n not in names]
        if unknown or len(axis_joints) > 6:
            raise ConfigError("teleop.axis_joints", f"expected up to 6 of {', '.join(names)}; got {list(axis_joints)}")
        super().__init__(device, spec, clock)
        self.idx = np.array([names.index(n) for n in axis_joints], int)
        lim = np.array([spec.actuator(n).velocity_limit for n in axis_joints])
        self.v_max = speed * lim
        self.max_lead = max_lead
        self.target: np.ndarray | None = None

    def axes(self) -> list[str]:
        return [self.spec.actuator_names[i] for i in self.idx]

    def command(self, state: State) -> np.ndarray:
        q = np.asarray(state["joint_pos"], np.float64)
        inp, dt = self.read()
        if self.target is None or (inp.buttons and inp.buttons[0]):
            self.target = q.copy()
        a = np.zeros(len(self.idx))
        axes = np.clip(np.asarray(inp.axes, np.float64).reshape(-1)[: len(self.idx)], -1.0, 1.0)
        a[: len(axes)] = axes
        step = np.zeros_like(q)
        step[self.idx] = self.v_max * a * dt
        self.target = np.clip(
            self.target + step, np.maximum(self.low, q - self.max_lead), np.minimum(self.high, q + self.max_lead)
        )
        return self.target.copy()


class VelocityCommand:
    """A walking policy's velocity command from a rate device, for ``simreal drive --teleop``.

    ``command = (vx, vy, yaw rate)`` [m/s, m/s, rad/s] from the axes (a keyboard's w/s, q/a and
    y/h; a gamepad's or SpaceMouse's forward, sideways and yaw): ``vx`` from axis 1 (forward),
    ``vy`` from minus axis 0 (left), the yaw rate from axis 5. Full deflection reaches the end
    of the range the policy was trained on (``ranges``: (low, high) per component, from the
    bundle's task config), never beyond it; no deflection commands standing still. The deploy
    runner holds the command like a Twist topic's and zeroes it when it goes stale
    (:meth:`simreal.deploy.runner.PolicyRunner.on_task_input`).
    """

    #: Per command component: (what its positive end does, the device axis, the axis's sign).
    AXES = (("forward", 1, 1.0), ("left", 0, -1.0), ("turn left", 5, 1.0))

    def __init__(self, device: InputDevice, ranges: Sequence[tuple[float, float]]):
        self.device = device
        self.low = np.array([r[0] for r in ranges], np.float64)
        self.high = np.array([r[1] for r in ranges], np.float64)

    def __call__(self) -> dict[str, np.ndarray]:
        a = np.zeros(6)
        axes = np.clip(np.asarray(self.device.read().axes, np.float64).reshape(-1)[:6], -1.0, 1.0)
        a[: len(axes)] = axes
        x = np.array([sign * a[axis] for _, axis, sign in self.AXES])
        return {"command": np.where(x > 0, x * self.high, -x * self.low)}

    @classmethod
    def keys(cls) -> str:
        """The keyboard's keys for each component (:data:`~simreal.hardware.teleop.devices.KEY_AXES`):
        ``w/s forward/back, a/q left/right, y/h turn left/right``."""
        from simreal.hardware.teleop.devices import KEY_AXES

        key = {axis_sign: k.decode() for k, axis_sign in KEY_AXES.items()}
        opposite = {"forward": "back", "left": "right", "turn left": "turn right"}
        return ", ".join(
            f"{key[(axis, int(sign))]}/{key[(axis, -int(sign))]} {name}/{opposite[name].split()[-1]}"
            for name, axis, sign in cls.AXES
        )

    def __enter__(self) -> VelocityCommand:
        self.device.open()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.device.close()
