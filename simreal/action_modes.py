"""Action modes: how a policy's normalised action becomes a physical command, in one table.

A policy outputs ``a`` in [-1, 1]^m; the bundle's action layout maps it to physical units,
``u = clip(offset + scale * a, low, high)``. Everything that depends on *what kind* of
command ``u`` is (export writing the layout, the deploy runner's limits, slew rates, safe
and initial commands, the command codec's message normalisation, the ROS 2 package's
README, the rehearsal robot applying it) reads this table instead of branching on the mode
name in several files.

==============  ==============  ======  ==============================  =======================
mode            channels        units   spec limits                      safe command
==============  ==============  ======  ==============================  =======================
rotor_thrust    rotors          N       [0, effort_limit]                zero thrust
ctbr            thrust, p, q, r N, rad/s [0, sum f_max], +-max body rate zero thrust and rates
joint_position  joints          rad     the joint's range                hold the measured pose
joint_velocity  joints          rad/s   +-velocity_limit                 zero velocity
joint_effort    joints          N m     +-effort_limit                   zero effort
==============  ==============  ======  ==============================  =======================

Mappings (a in [-1, 1]):

- rotor_thrust: f = f_max (a + 1) / 2, what PX4's direct actuator control takes;
- ctbr: T = sum(f_max) (a_0 + 1) / 2, omega = max_rate * a_{1:4} (an onboard rate loop
  tracks omega; :mod:`simreal.quadrotor_control`);
- joint_*: u = u_home + action_scale * a, clipped to the actuator's control range (a PD
  set-point for position, the command itself for velocity/effort).

Imports numpy and the robot spec only: the robot's runtime reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simreal.errors import UnknownNameError
from simreal.robot_spec import RobotSpec

G = 9.81
#: The ctbr action's channels, in order.
CTBR_CHANNELS = ("thrust", "roll_rate", "pitch_rate", "yaw_rate")


@dataclasses.dataclass(frozen=True)
class ActionMode:
    """One row of the table (see module docstring).

    Attributes:
      name: the mode's name in bundles and robot specs.
      unit: physical unit of each channel ('N', 'rad', ...).
      command_types: ROS 2 message types that can carry this mode.
      safe: what the safe command does, in words (README, logs).
      joint_space: channels are the robot's actuated joints (measured in JointState).
    """

    name: str
    unit: str
    command_types: tuple[str, ...]
    safe: str
    joint_space: bool

    def channel_names(self, spec: RobotSpec) -> tuple[str, ...]:
        """The mode's channels on ``spec`` when it drives all of them: the ctbr channels, else the
        robot's actuators."""
        return CTBR_CHANNELS if self.name == "ctbr" else tuple(spec.actuator_names)

    def channel_problem(self, spec: RobotSpec, names: Sequence[str]) -> str | None:
        """What is wrong with a bundle's action channel ``names`` for this mode on ``spec`` (the
        ctbr channels in order; else actuators of the robot), or None."""
        if self.name == "ctbr":
            ok = tuple(names) == CTBR_CHANNELS
            want = f"the ctbr channels {list(CTBR_CHANNELS)}"
        else:
            ok = bool(names) and set(names) <= set(spec.actuator_names)
            want = f"actuators of robot '{spec.name}' ({', '.join(spec.actuator_names)})"
        return None if ok else f"{list(names)} for action mode '{self.name}'; expected {want}"

    # -- limits ------------------------------------------------------------------------------
    def spec_limits(self, spec: RobotSpec, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Hard per-channel limits [low, high] from the robot spec, physical units."""
        n = len(names)
        lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
        if self.name == "rotor_thrust":
            lo[:] = 0.0
            hi[:] = [spec.actuator(nm).effort_limit for nm in names]
        elif self.name == "ctbr":
            rate = float(spec.physical.get("max_body_rate_rad_s", np.inf))
            lo[:] = [0.0, -rate, -rate, -rate][:n]
            hi[:] = [total_thrust_n(spec), rate, rate, rate][:n]
        else:
            for i, nm in enumerate(names):
                a = spec.actuator(nm)
                if self.name == "joint_position" and a.range is not None:
                    lo[i], hi[i] = a.range
                elif self.name == "joint_velocity":
                    lo[i], hi[i] = -a.velocity_limit, a.velocity_limit
                elif self.name == "joint_effort":
                    lo[i], hi[i] = -a.effort_limit, a.effort_limit
        return lo, hi

    def default_max_rate(self, spec: RobotSpec, names: Sequence[str]) -> np.ndarray:
        """Slew limits [unit/s]: what the hardware can follow anyway (full thrust per motor
        time constant for rotors, the joint velocity limit for position targets)."""
        n = len(names)
        tau = float(spec.physical.get("motor_time_constant_s", 0.0))
        if self.name == "rotor_thrust" and tau > 0:
            return np.array([spec.actuator(nm).effort_limit / tau for nm in names])
        if self.name == "ctbr" and tau > 0:
            return np.array([total_thrust_n(spec) / tau] + [np.inf] * (n - 1))
        if self.name == "joint_position":
            return np.array([spec.actuator(nm).velocity_limit for nm in names])
        return np.full(n, np.inf)

    def full_scale(self, spec: RobotSpec, names: Sequence[str]) -> np.ndarray:
        """Per channel, the physical value a normalised command message writes as 1.0
        (PX4's ActuatorMotors and thrust setpoints); 1 where messages carry SI values."""
        if self.name == "rotor_thrust":
            return np.array([spec.actuator(n).effort_limit for n in names])
        if self.name == "ctbr":
            return np.array([total_thrust_n(spec), 1.0, 1.0, 1.0])
        return np.ones(len(names))

    # -- commands the runner sends on its own --------------------------------------------------
    def safe_command(self, spec: RobotSpec, names: Sequence[str], state: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """Zero thrust / rates / velocity / effort; for position targets the measured pose
        (or, before any state arrived, the spec's default pose)."""
        if self.name != "joint_position":
            return np.zeros(len(names))
        if state is not None and "joint_pos" in state:
            idx = [spec.actuator_names.index(n) for n in names]
            return np.asarray(state["joint_pos"], np.float64)[idx]
        return np.array([spec.actuator(n).default for n in names])

    def hover_command(self, spec: RobotSpec, names: Sequence[str]) -> np.ndarray | None:
        """The command that holds a quadrotor's weight (m g shared by the rotors), for a
        hand-over in the air; None where the mode cannot hover."""
        if self.name == "rotor_thrust":
            return np.full(len(names), hover_thrust_n(spec))
        if self.name == "ctbr":
            return np.array([hover_thrust_n(spec) * len(spec.actuators), 0.0, 0.0, 0.0])
        return None

    # -- the bundle's layout -------------------------------------------------------------------
    def layout(
        self,
        spec: RobotSpec,
        names: Sequence[str],
        *,
        offset: Sequence[float] | np.ndarray | None = None,
        scale: Sequence[float] | np.ndarray | float | None = None,
        low: Sequence[float] | np.ndarray | None = None,
        high: Sequence[float] | np.ndarray | None = None,
        max_rate_rad_s: float | None = None,
        units: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """The bundle's ``action`` section: ``u = clip(offset + scale * a, low, high)``.

        Rotor and ctbr layouts follow from the spec (ctbr also needs ``max_rate_rad_s``);
        joint layouts take the task's ``offset`` (home command), ``scale`` (action scale)
        and ``low``/``high`` (the actuators' control range).
        """
        n = len(names)
        if self.name == "rotor_thrust":
            f_max = self.full_scale(spec, names)
            offset, scale, low, high = f_max / 2, f_max / 2, np.zeros(n), f_max
        elif self.name == "ctbr":
            if max_rate_rad_s is None:
                raise ValueError("ctbr layout needs max_rate_rad_s")
            total, r = total_thrust_n(spec), float(max_rate_rad_s)
            offset, scale = [total / 2, 0.0, 0.0, 0.0], [total / 2, r, r, r]
            low, high = [0.0, -r, -r, -r], [total, r, r, r]
        else:
            if offset is None or scale is None:
                raise ValueError(f"{self.name} layout needs the task's offset and scale")
            offset = np.broadcast_to(np.asarray(offset, np.float64), (n,))
            scale = np.broadcast_to(np.asarray(scale, np.float64), (n,))
            s_lo, s_hi = self.spec_limits(spec, names)
            low = s_lo if low is None else low
            high = s_hi if high is None else high
        unit = [self.unit] * n if self.name != "ctbr" else ["N", "rad/s", "rad/s", "rad/s"]
        return {
            "mode": self.name,
            "size": n,
            "names": list(names),
            "units": list(units or unit),
            "scale": _floats(scale),
            "offset": _floats(offset),
            "low": _floats(low),
            "high": _floats(high),
        }


def hover_thrust_n(spec: RobotSpec) -> float:
    """Each rotor's share of the weight, m g / n [N]."""
    return float(spec.physical.get("mass_kg", 0.0)) * G / max(len(spec.actuators), 1)


def total_thrust_n(spec: RobotSpec) -> float:
    """Sum of the rotors' thrust limits [N]."""
    return float(sum(a.effort_limit for a in spec.actuators))


def _floats(x: Any) -> list[float]:
    return [float(v) for v in np.asarray(x, np.float64).reshape(-1)]


_F64 = "std_msgs/msg/Float64MultiArray"
ACTION_MODES: dict[str, ActionMode] = {
    m.name: m
    for m in (
        ActionMode("rotor_thrust", "N", ("px4_msgs/msg/ActuatorMotors", _F64), "zero thrust", False),
        ActionMode("ctbr", "N", ("px4_msgs/msg/VehicleRatesSetpoint",), "zero thrust and rates", False),
        ActionMode(
            "joint_position",
            "rad",
            (_F64, "trajectory_msgs/msg/JointTrajectory"),
            "hold the measured joint positions",
            True,
        ),
        ActionMode("joint_velocity", "rad/s", (_F64,), "zero joint velocity", True),
        ActionMode("joint_effort", "N m", (_F64,), "zero joint effort", True),
    )
}


def action_mode(name: str) -> ActionMode:
    """Look a mode up by name; the error lists the valid ones."""
    try:
        return ACTION_MODES[name]
    except KeyError:
        raise UnknownNameError("action mode", name, ACTION_MODES) from None


def command_modes() -> dict[str, tuple[str, ...]]:
    """Command message type -> the action modes it can carry (the table, inverted)."""
    out: dict[str, list[str]] = {}
    for m in ACTION_MODES.values():
        for t in m.command_types:
            out.setdefault(t, []).append(m.name)
    return {t: tuple(ms) for t, ms in out.items()}
