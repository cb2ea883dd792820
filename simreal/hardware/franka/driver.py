"""Franka Panda / FR3 with the Franka Hand through ``franky`` (``franky-control``, libfranka inside).

    >>> cfg = FrankaConfig("franka", ip="172.16.0.2")          # or ip=twin://NAME (franka_twin)
    >>> with FrankaRobot(cfg) as arm:
    ...     s = arm.observation()                      # joint_pos [rad, m], joint_vel, t_s
    ...     sent = arm.send_action(s["joint_pos"] + 0.05)

Actuators are the spec's: ``panda_joint1..7`` then ``gripper``, the opening width [m].

``connect()``: ``franky.Robot(ip)`` (libfranka's FCI connection: FCI must be enabled in Desk and
the brakes open; libfranka refuses a kernel without real-time scheduling unless
``realtime=ignore``), ``recover_from_errors()`` (a reflex left from an earlier session), the global
``relative_dynamics_factor`` (franky scales the velocity, acceleration and jerk limits of every
motion by it; 0.1 by default here, franky's own default is 1.0), the collision thresholds; then
``franky.Gripper(ip)`` unless ``gripper=false``. A failure is one line naming the address and
libfranka's reason.

Commands (:meth:`_write`), at the policy's rate:

- the arm: ``robot.move(JointMotion(q), asynchronous=True)``. franky plans a jerk-limited
  trajectory (Ruckig) to ``q`` from the current state and libfranka's joint impedance
  controller tracks it at 1 kHz; a new asynchronous motion preempts the running one from its
  current velocity, so a stream of targets is followed smoothly: franky's documented way of
  real-time target updates. A reflex (collision, limit) stops the robot and surfaces as a
  ``franky`` exception at the next call: one :class:`HardwareError` line; the drive loop's safe
  path then runs, and ``recover_from_errors()`` is left to the next ``connect()``.
- the gripper: only when the target width moved more than ``gripper_deadband_m`` from the last
  one sent (at connect: the measured width) (libfranka's gripper takes one blocking action at a
  time, not a stream). A target below ``grasp_below_m`` is a grasp
  (``grasp_async(0, speed, force)`` with epsilons wide enough to accept any object: a ``move``
  to a width an object blocks fails); anything else a ``move_async(width, speed)``. The returned
  command carries the width last sent.

State (:meth:`_read`): ``current_joint_state`` (libfranka's measured q and dq) and the gripper's
width. libfranka's ``Gripper::readOnce`` blocks until the hand's next state message, so a daemon
thread polls it and the observation takes the newest width (its velocity is reported 0).

``safe_command()`` holds the measured arm pose and leaves the gripper as last commanded (a
re-sent width would release a grasp and drop what it holds). ``disconnect()`` sends it, waits up
to 1 s for the hold, and releases both connections.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import numpy as np

from simreal.config import field
from simreal.errors import ConfigError
from simreal.hardware.robot import HardwareError, Robot, RobotConfig, State, time_stamp
from simreal.robot_spec import RobotSpec

#: An ``ip`` of this form names an in-process twin (:mod:`simreal.hardware.franka.twin`).
TWIN_SCHEME = "twin://"
ARM_JOINTS = 7


def franky_api(ip: str) -> Any:
    """The module that speaks to ``ip``: ``franky``, or the twin's stand-in for ``twin://NAME``."""
    if ip.startswith(TWIN_SCHEME):
        from simreal.hardware.franka.twin import twin_api

        return twin_api(ip)
    import franky

    return franky


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrankaConfig(RobotConfig):
    """A Franka arm behind FCI (module docstring)."""

    ip: str = field(doc="the robot's FCI address (the Control box, e.g. 172.16.0.2), or twin://NAME")
    relative_dynamics_factor: float = field(
        0.1, min=0.001, max=1.0, doc="scales franky's velocity, acceleration and jerk limits (0..1]"
    )
    torque_threshold_nm: float = field(20.0, min=0.0, doc="collision reflex threshold per joint [N m] (franky's)")
    force_threshold_n: float = field(30.0, min=0.0, doc="collision reflex threshold at the end effector [N]")
    realtime: str = field(
        "enforce",
        choices=("enforce", "ignore"),
        doc="libfranka's check for a PREEMPT_RT kernel (ignore: run without one, at the risk of "
        "communication reflexes)",
    )
    gripper: bool = field(True, doc="connect the Franka Hand (false: an arm without one; its channel is ignored)")
    gripper_speed_m_s: float = field(0.05, min=0.001, max=0.2, doc="finger speed of moves and grasps [m/s]")
    grasp_force_n: float = field(40.0, min=0.0, max=70.0, doc="grasp force [N] (the hand's continuous limit is 70)")
    grasp_below_m: float = field(0.01, min=0.0, doc="a target width below this grasps instead of moving [m]")
    gripper_deadband_m: float = field(0.005, min=0.0, doc="smallest change of target width that is sent [m]")


class FrankaRobot(Robot):
    """The arm and its hand (see module docstring)."""

    config_class = FrankaConfig
    families = ("arm",)

    def __init__(self, config: FrankaConfig, spec: RobotSpec | None = None):
        super().__init__(config, spec)
        self.config: FrankaConfig = config
        if self.mode.name != "joint_position":
            raise ConfigError(
                "action_mode",
                f"{type(self).__name__} takes joint_position (franky's JointMotion), got {self.mode.name}",
            )
        if len(self.names) != ARM_JOINTS + 1:
            raise ConfigError(
                "robot",
                f"FrankaRobot drives 7 joints and a gripper; robot '{self.spec.name}' has "
                f"{len(self.names)} actuators ({', '.join(self.names)})",
            )
        self.api: Any = None
        self.arm: Any = None
        self.hand: Any = None
        self.width_sent: float | None = None
        self._width = float(self.spec.actuator(self.names[-1]).default)
        self._poller: threading.Thread | None = None
        self._polling = threading.Event()

    def _where(self) -> str:
        return f"{self.spec.name} at {self.config.ip}"

    # -- connect / disconnect ------------------------------------------------------------------
    def _open(self) -> None:
        c = self.config
        self.api = franky_api(c.ip)
        try:
            self.arm = self.api.Robot(
                c.ip,
                relative_dynamics_factor=c.relative_dynamics_factor,
                default_torque_threshold=c.torque_threshold_nm,
                default_force_threshold=c.force_threshold_n,
                realtime_config=self.api.RealtimeConfig.__members__[c.realtime.capitalize()],
            )
            self.arm.recover_from_errors()
            if c.gripper:
                self.hand = self.api.Gripper(c.ip)
                self._width = float(self.hand.width)
                self.width_sent = self._width  # the hand stays where it is until a target differs
        except self.api.Exception as e:
            self.arm = self.hand = None
            raise HardwareError(
                f"{self._where()}: {e} (FCI enabled in Desk, brakes open, this computer on the robot's network?)"
            ) from None
        if self.hand is not None:
            self._polling.set()
            self._poller = threading.Thread(target=self._poll_width, name="franka-gripper-state", daemon=True)
            self._poller.start()

    def _poll_width(self) -> None:
        while self._polling.is_set():
            try:
                self._width = float(self.hand.width)  # blocks until the hand's next state message
            except self.api.Exception:
                time.sleep(0.01)

    def _close(self) -> None:
        self._polling.clear()
        if self.arm is not None:
            try:
                self.arm.join_motion(timeout=1.0)
            except self.api.Exception:
                pass  # the robot stopped itself (a reflex): nothing more to wait for
        if self._poller is not None:
            self._poller.join(timeout=1.0)
        self.arm = self.hand = self._poller = None

    # -- state and commands --------------------------------------------------------------------
    def _read(self) -> State:
        if self.arm is None:
            raise HardwareError(f"{self._where()}: not connected")
        js = self.arm.current_joint_state
        q = np.append(np.asarray(js.position, np.float64).reshape(-1), self._width)
        dq = np.append(np.asarray(js.velocity, np.float64).reshape(-1), 0.0)
        return {"joint_pos": q, "joint_vel": dq, "t_s": time_stamp(time.monotonic())}

    def _write(self, u: np.ndarray) -> np.ndarray:
        if self.arm is None:
            raise HardwareError(f"{self._where()}: not connected")
        c = self.config
        try:
            self.arm.move(self.api.JointMotion(u[:ARM_JOINTS].tolist()), asynchronous=True)
            width = float(u[ARM_JOINTS])
            if self.hand is not None:
                assert self.width_sent is not None  # _open set it with the hand
                if abs(width - self.width_sent) > c.gripper_deadband_m:
                    if width < c.grasp_below_m:
                        span = self.spec.actuator(self.names[-1]).range
                        if span is None:
                            raise HardwareError(
                                f"{self._where()}: the gripper actuator '{self.names[-1]}' has no range in "
                                f"the robot spec; a grasp needs the hand's widest opening"
                            )
                        wide = float(span[1])
                        self.hand.grasp_async(
                            0.0, c.gripper_speed_m_s, c.grasp_force_n, epsilon_inner=wide, epsilon_outer=wide
                        )
                    else:
                        self.hand.move_async(width, c.gripper_speed_m_s)
                    self.width_sent = width
        except self.api.Exception as e:
            raise HardwareError(
                f"{self._where()}: {e} (the robot stopped; the next connect() recovers from the error)"
            ) from None
        sent = u.copy()
        sent[ARM_JOINTS] = self.width_sent if self.width_sent is not None else self._width
        return sent

    def safe_command(self) -> np.ndarray:
        """Hold the measured arm pose; the gripper keeps its last target (module docstring)."""
        u = super().safe_command()
        if self.width_sent is not None:
            u[ARM_JOINTS] = self.width_sent
        return u
