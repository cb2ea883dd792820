"""The Franka driver's twin: franky's API answered by the robot spec's MuJoCo model.

franky speaks to the robot through libfranka's FCI: a TCP command channel and a 1 kHz UDP
loop of binary state and command structs whose layout is versioned with the robot's system
(franky 2.0 bundles libfranka 0.21; the public ``libfranka-common`` headers stop at an older
protocol). A fake Control box on that wire could not be checked against anything here, so
this twin serves the one level above it instead: :func:`twin_api` returns a stand-in for the
``franky`` module, and :class:`~simreal.hardware.franka.driver.FrankaRobot` with ``ip=twin://NAME``
drives it through the same calls it makes on a real robot (``Robot``, ``JointMotion``,
``move(..., asynchronous=True)``, ``current_joint_state``, ``Gripper.move_async`` /
``grasp_async`` / ``width``). Everything from the driver up (clamping, the gripper's
deadband and grasp logic, the drive loop, recording) runs unchanged; libfranka's wire, its
reflexes and Ruckig's jerk limits are not in it.

    >>> with FrankaTwin("franka") as twin, FrankaRobot(FrankaConfig("franka", ip=twin.ip)) as arm:
    ...     arm.send_action(arm.observation()["joint_pos"] + 0.1)

What a motion does (per physics step ``dt``, every joint alone): the set-point ``s`` with
velocity ``v`` moves towards the target ``q*`` as fast as the limits allow and stops on it,

    v_stop = sign(e) * sqrt(2 a |e|),  e = q* - s
    v <- clip(clip(v_stop, -v_max, v_max), v - a dt, v + a dt),  s <- s + v dt,

with ``v_max``, ``a`` Franka's joint velocity and acceleration limits times the relative
dynamics factor (franky plans the same limits with jerk as well); the spec's joint impedance
(MuJoCo position actuators, kp and kd) tracks ``s``. A new motion starts from the current
``s`` and ``v``, as franky's preemption does. The gripper's set-point moves at the commanded
speed; a grasp closes it to 0 against whatever is between the fingers (the actuator's force
limit). Physics runs on demand, level with the wall clock (:class:`~twin_runtime.WallClock`).
"""

from __future__ import annotations

import enum
import itertools
import math
import threading
import time
import types
from typing import Any

import numpy as np

from simreal.hardware.robot import HardwareError
from simreal.hardware.twin_runtime import WallClock
from simreal.robot_spec import RobotSpec, load_robot_spec

#: Franka's joint acceleration limits [rad/s^2] (FCI docs, "Limits for Panda"), joints 1-7.
ACCELERATION_LIMITS = np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])
ARM_JOINTS = 7
#: How often the twin's hand reports its width [s] (a reading waits for the next report).
HAND_STATE_PERIOD_S = 0.02
#: Physics run when the twin is built, the set-point at the spec's default pose and width [s].
SETTLE_S = 0.5
_TWINS: dict[str, FrankaTwin] = {}
_names = itertools.count(1)


class TwinException(Exception):
    """What the stand-in raises where franky raises ``franky.Exception`` (its base class)."""


class RealtimeConfig(enum.Enum):
    """franky's (libfranka's) real-time kernel check; the twin runs either way."""

    Enforce = 0
    Ignore = 1


class _JointState:
    def __init__(self, position: np.ndarray, velocity: np.ndarray):
        self.position, self.velocity = position, velocity


class _JointMotion:
    def __init__(self, target: Any):
        self.target = np.asarray(target, np.float64).reshape(-1)
        if self.target.shape != (ARM_JOINTS,):
            raise TwinException(f"JointMotion takes 7 joint positions, got {self.target.shape[0]}")


class FrankaTwin:
    """A Franka arm and hand in MuJoCo, reachable as ``twin://NAME`` while the context is open.

    Args:
      robot: robot spec name or spec (7 joints, then the gripper's width).
      start_joint_pos: the pose it rests in (default the spec's default pose).
    """

    def __init__(self, robot: str | RobotSpec = "franka", start_joint_pos: tuple[float, ...] = ()):
        from simreal.deploy.sim_robot import SimRobot, spec_start
        from simreal.sim.robots import build_model

        self.spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
        model = build_model(self.spec)
        self.sim = SimRobot(
            model,
            self.spec,
            "joint_position",
            self.spec.actuator_names,
            spec_start(model, self.spec, None, tuple(start_joint_pos)),
        )
        self.clock = WallClock(float(model.opt.timestep))
        self.lock = threading.Lock()
        self.setpoint = np.array([a.default for a in self.spec.actuators], np.float64)
        self.setpoint[:ARM_JOINTS] = self.sim.true_state()["joint_pos"][:ARM_JOINTS]
        self.sim.apply(self.setpoint)
        for _ in range(round(SETTLE_S / model.opt.timestep)):  # the hand opens to its default width
            self.sim.step()
        self.sim.d.time = 0.0
        self.velocity = np.zeros(ARM_JOINTS)
        self.target = self.setpoint[:ARM_JOINTS].copy()
        self.gripper_target, self.gripper_speed = float(self.setpoint[ARM_JOINTS]), 0.0
        self.v_max = np.array([a.velocity_limit for a in self.spec.actuators[:ARM_JOINTS]])
        self.dynamics = 1.0
        self.gripper_commands: list[tuple[str, float]] = []  # ("move" | "grasp", width)
        self.ip = f"twin://franka-{next(_names)}"
        self.api = types.SimpleNamespace(
            Robot=self._robot,
            Gripper=self._gripper,
            JointMotion=_JointMotion,
            Exception=TwinException,
            RealtimeConfig=RealtimeConfig,
        )

    def __enter__(self) -> FrankaTwin:
        _TWINS[self.ip] = self
        return self

    def __exit__(self, *exc: object) -> None:
        _TWINS.pop(self.ip, None)

    # -- physics -------------------------------------------------------------------------------
    def _advance(self) -> None:
        """Step the model up to the wall clock, the set-points moving as the module docstring says."""
        dt = self.clock.dt
        for _ in range(self.clock.steps_due(self.sim.time_s)):
            a = ACCELERATION_LIMITS * self.dynamics
            e = self.target - self.setpoint[:ARM_JOINTS]
            v_want = np.clip(
                np.sign(e) * np.sqrt(2.0 * a * np.abs(e)), -self.v_max * self.dynamics, self.v_max * self.dynamics
            )
            self.velocity = np.clip(v_want, self.velocity - a * dt, self.velocity + a * dt)
            step = self.velocity * dt
            arrived = np.abs(e) <= np.abs(step)
            self.setpoint[:ARM_JOINTS] = np.where(arrived, self.target, self.setpoint[:ARM_JOINTS] + step)
            self.velocity = np.where(arrived, 0.0, self.velocity)
            g = self.gripper_target - self.setpoint[ARM_JOINTS]
            self.setpoint[ARM_JOINTS] += math.copysign(min(abs(g), self.gripper_speed * dt), g)
            self.sim.apply(self.setpoint)
            self.sim.step()

    def state(self) -> dict[str, np.ndarray]:
        """The true joint state after stepping to now (``joint_pos``, ``joint_vel``)."""
        with self.lock:
            self._advance()
            return self.sim.true_state()

    # -- franky's API --------------------------------------------------------------------------
    def _robot(self, ip: str, relative_dynamics_factor: float = 1.0, **_thresholds: float) -> Any:
        twin = self
        twin.dynamics = float(relative_dynamics_factor)

        class Robot:
            fci_hostname = ip

            def recover_from_errors(self) -> bool:
                return True

            @property
            def current_joint_state(self) -> _JointState:
                s = twin.state()
                return _JointState(s["joint_pos"][:ARM_JOINTS], s["joint_vel"][:ARM_JOINTS])

            def move(self, motion: _JointMotion, asynchronous: bool = False) -> None:
                with twin.lock:
                    twin._advance()
                    twin.target = motion.target.copy()

            def join_motion(self, timeout: float | None = None) -> bool:
                return True

        return Robot()

    def _gripper(self, ip: str) -> Any:
        twin = self

        class Gripper:
            @property
            def width(self) -> float:
                time.sleep(HAND_STATE_PERIOD_S)  # libfranka's Gripper::readOnce waits for the next message
                return float(twin.state()["joint_pos"][ARM_JOINTS])

            def _command(self, kind: str, width: float, speed: float) -> None:
                with twin.lock:
                    twin._advance()
                    twin.gripper_target, twin.gripper_speed = width, speed
                    twin.gripper_commands.append((kind, width))

            def move_async(self, width: float, speed: float) -> None:
                self._command("move", float(width), float(speed))

            def grasp_async(
                self,
                width: float,
                speed: float,
                force: float,
                epsilon_inner: float = 0.005,
                epsilon_outer: float = 0.005,
            ) -> None:
                self._command("grasp", float(width), float(speed))

        return Gripper()


def twin_api(ip: str) -> Any:
    """The franky stand-in of the open twin at ``ip`` (``twin://NAME``); HardwareError if none is."""
    try:
        return _TWINS[ip].api
    except KeyError:
        raise HardwareError(
            f"no Franka twin is open at {ip} (open ones: {', '.join(_TWINS) or 'none'}); `--twin` opens one"
        ) from None
