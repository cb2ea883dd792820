"""The rehearsal robot: a MuJoCo model that takes physical commands and gives robot state.

No transport here (:mod:`simreal.deploy.sim_loop` puts it on the wire). What the robot
measures depends on its family, one table entry each (:data:`FAMILIES`):

==========  ==============================================  ==============================
family      true state                                       hand-over
==========  ==============================================  ==============================
quadrotor   base pose, twist                                 held in the air at hover thrust
humanoid    base pose, twist (IMU), joints (JointState)      held at its start pose (a gantry)
arm         joints (JointState)                              held at its start pose
classic     joints                                           held at its start pose
==========  ==============================================  ==============================

A task scene's object (a free body named ``object``) adds ``object_pos_w``.

The model and start state come from the bundle's task when the bundle records it
(``task`` + ``task_config``: the training env with randomisation and noise off, its first
episode's initial state, the task's own scene with its objects), else from the robot spec
alone (bundles made by hand). Commands are applied as the action mode says
(:mod:`simreal.action_modes`): actuator controls directly, effort over the motor's gear, or
through the onboard body-rate loop for ``ctbr``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from simreal.action_modes import hover_thrust_n
from simreal.mujoco_divergence import mujoco_reset
from simreal.observations import EE_SITE
from simreal.robot_spec import RobotSpec
from simreal.rotations import quat_mul

#: Sensor noise standard deviations at noise_scale 1 (SI units).
NOISE_STD = {
    "pos_w": 0.002,
    "rot_rad": 0.005,
    "lin_vel_w": 0.01,
    "ang_vel_b": 0.02,
    "joint_pos": 0.001,
    "joint_vel": 0.01,
    "object_pos_w": 0.002,
}


@dataclasses.dataclass(frozen=True)
class Family:
    """What a robot family measures and how it waits for the hand-over."""

    free_base: bool  # base pose and twist are state
    joints: bool  # actuated joint positions and velocities are state
    hover_hold: bool  # held in the air at hover thrust until the first command
    stands: bool = False  # on its legs: a fall (sim_gate.fall_time) fails a rehearsal, whatever the bounds


FAMILIES: dict[str, Family] = {
    "quadrotor": Family(free_base=True, joints=False, hover_hold=True),
    "humanoid": Family(free_base=True, joints=True, hover_hold=False, stands=True),
    "arm": Family(free_base=False, joints=True, hover_hold=False),
    "classic": Family(free_base=False, joints=True, hover_hold=False),
}


@dataclasses.dataclass(frozen=True)
class StartState:
    """Where the rehearsal starts: MuJoCo qpos, qvel, act and the task's fixed inputs."""

    qpos: np.ndarray
    qvel: np.ndarray
    act: np.ndarray
    task: dict[str, np.ndarray]


class SimRobot:
    """The robot's MuJoCo model: physical commands in, true and measured state out.

    Args:
      model: the compiled MuJoCo model (the task's scene or the robot's own).
      spec: the robot spec (family, actuators in driver order, physical constants).
      mode, names: the action mode and channel names commands arrive in.
      start: the initial state (see :class:`StartState`).

    ``diverged_s`` is the simulated time [s] of the step where MuJoCo had to reset a state gone
    NaN, Inf or past 1e10 (:mod:`simreal.mujoco_divergence`), None while it has not. From there
    the state is the model's initial one, not physics: the rehearsals stop, and later steps only
    advance the clock (a loop that paces itself on :attr:`time_s` never sees time go back to 0).
    """

    def __init__(self, model: Any, spec: RobotSpec, mode: str, names: tuple[str, ...], start: StartState):
        import mujoco

        self.mj, self.m, self.spec, self.mode, self.names = mujoco, model, spec, mode, names
        self.d = mujoco.MjData(model)
        self.diverged_s: float | None = None
        self.family = FAMILIES[spec.family]
        self.free = self.family.free_base
        act_names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(model.nu)]
        self.spec_act_ids = np.array([act_names.index(n) for n in spec.actuator_names], dtype=np.intp)
        self.act_ids = self.spec_act_ids if mode == "ctbr" else np.array([act_names.index(n) for n in names])
        self.gear = model.actuator_gear[self.act_ids, 0].copy()
        self.hover_thrust = hover_thrust_n(spec)
        obj = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object")
        self.object_body = obj if obj >= 0 else None
        site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, EE_SITE) if self.family.joints else -1
        self.ee_site = site if site >= 0 else None
        self.d.qpos[:], self.d.qvel[:] = start.qpos, start.qvel
        if model.na:
            self.d.act[:] = start.act
        mujoco.mj_forward(model, self.d)
        self._start = (self.d.qpos.copy(), self.d.qvel.copy(), self.d.act.copy())
        if self.family.joints:
            self.u = self.true_state()["joint_pos"][[spec.actuator_names.index(n) for n in names]]
        else:
            self.u = np.full(len(self.act_ids), self.hover_thrust)
        self._rate_loop = self._make_rate_loop() if mode == "ctbr" else None
        self._rate_decimation = max(
            1, round(1.0 / (float(spec.physical.get("rate_controller_hz", 500.0)) * model.opt.timestep))
        )
        self._steps = 0
        self.apply(self.u)

    def _make_rate_loop(self):
        from simreal import quadrotor_control as qc

        gain = qc.rate_loop_gain(qc.inertia_diag(self.spec), np.linalg.inv(qc.mixer(self.spec)))
        f_max = np.array([a.effort_limit for a in self.spec.actuators])
        return lambda u, w: qc.rate_loop_thrusts(u, w, gain, f_max, np)

    def apply(self, u: np.ndarray) -> None:
        """Set the physical command (held until the next one): actuator controls, effort / gear
        for torque motors, or the body-rate loop's set-point for ctbr."""
        self.u = np.asarray(u, dtype=np.float64)
        if self._rate_loop is not None:
            return
        self.d.ctrl[self.act_ids] = self.u / self.gear if self.mode == "joint_effort" else self.u

    def hold(self) -> None:
        """Keep the robot at its start state (hand-over hover, gantry); commands are not applied."""
        self.d.qpos[:], self.d.qvel[:] = self._start[0], self._start[1]
        if self.family.hover_hold:
            self.d.act[:] = self.hover_thrust
            self.d.ctrl[:] = self.hover_thrust

    def step(self) -> None:
        if self.diverged_s is not None:  # frozen (class docstring)
            self.d.time += self.m.opt.timestep
            return
        if self._rate_loop is not None and self._steps % self._rate_decimation == 0:
            self.d.ctrl[self.spec_act_ids] = self._rate_loop(self.u, self.d.qvel[3:6].copy())
        t = self.d.time
        self.mj.mj_step(self.m, self.d)
        self._steps += 1
        if mujoco_reset(self.d, self.m.opt.timestep):
            self.diverged_s, self.d.time = t, t + self.m.opt.timestep

    @property
    def time_s(self) -> float:
        return float(self.d.time)

    def state_of(self, qpos: np.ndarray, qvel: np.ndarray) -> dict[str, np.ndarray]:
        """:meth:`true_state` of another configuration (e.g. the training env's), same model."""
        if not hasattr(self, "_scratch"):
            self._scratch = self.mj.MjData(self.m)
        self._scratch.qpos[:], self._scratch.qvel[:] = qpos, qvel
        self.mj.mj_forward(self.m, self._scratch)
        return self.true_state(self._scratch)

    def true_state(self, d: Any = None) -> dict[str, np.ndarray]:
        """Robot-state keys (:mod:`simreal.observations`) of the family, from the simulation.

        Joints read the actuators' transmission (``actuator_length``: the joint position, or a
        tendon's length for a tendon-driven gripper), so they are in the spec's driver order. An
        arm whose model has the :data:`~simreal.observations.EE_SITE` site also gives ``ee_pos_w``.
        """
        d = self.d if d is None else d
        s: dict[str, np.ndarray] = {}
        if self.free:
            s.update(
                pos_w=d.qpos[0:3].copy(),
                quat_wxyz=d.qpos[3:7].copy(),
                lin_vel_w=d.qvel[0:3].copy(),
                ang_vel_b=d.qvel[3:6].copy(),
            )  # MuJoCo's free-joint angular velocity is in the body frame
        else:  # a fixed base: what an IMU bolted to it reads
            s.update(quat_wxyz=np.array([1.0, 0.0, 0.0, 0.0]), ang_vel_b=np.zeros(3))
        if self.family.joints:
            s.update(
                joint_pos=d.actuator_length[self.spec_act_ids] / self.m.actuator_gear[self.spec_act_ids, 0],
                joint_vel=d.actuator_velocity[self.spec_act_ids] / self.m.actuator_gear[self.spec_act_ids, 0],
            )
        if self.object_body is not None:
            s["object_pos_w"] = d.xpos[self.object_body].copy()
        if self.ee_site is not None:
            s["ee_pos_w"] = d.site_xpos[self.ee_site].copy()
        return s

    def measured_state(self, rng: np.random.Generator, scale: float) -> dict[str, np.ndarray]:
        """The true state plus Gaussian sensor noise (:data:`NOISE_STD` times ``scale``), without
        ``ee_pos_w``: a robot's drivers report joints, and the end effector is computed from them."""
        s = self.true_state()
        s.pop("ee_pos_w", None)
        if scale <= 0:
            return s
        out = {k: v + rng.normal(0.0, NOISE_STD[k] * scale, v.shape) for k, v in s.items() if k in NOISE_STD}
        if "quat_wxyz" in s:
            out["quat_wxyz"] = quat_mul(s["quat_wxyz"], _small_rotation(rng, NOISE_STD["rot_rad"] * scale), np)
        return out


def _small_rotation(rng: np.random.Generator, std: float) -> np.ndarray:
    """A random unit quaternion (wxyz) of about ``std`` rad."""
    v = rng.normal(0.0, std, 3)
    a = float(np.linalg.norm(v))
    if a < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[math.cos(a / 2)], math.sin(a / 2) * v / a])


def spec_start(
    model: Any, spec: RobotSpec, start_pos_w: np.ndarray | None, start_joint_pos: tuple[float, ...]
) -> StartState:
    """A start state from the robot spec alone: the free base at ``start_pos_w`` upright (None:
    where the model stands it, its ``qpos0``: a humanoid on its feet, not in the floor), the
    joints at ``start_joint_pos`` (default: the spec's default pose)."""
    qpos, qvel = model.qpos0.copy(), np.zeros(model.nv)
    if FAMILIES[spec.family].free_base:
        qpos[3:7] = [1.0, 0.0, 0.0, 0.0]
        if start_pos_w is not None:
            qpos[0:3] = start_pos_w
    if FAMILIES[spec.family].joints:
        qpos = with_joints(model, spec, qpos, start_joint_pos or [a.default for a in spec.actuators])
    act = np.full(model.na, hover_thrust_n(spec))  # motor states of the rotors at hover
    return StartState(qpos, qvel, act, {})


def with_joints(model: Any, spec: RobotSpec, qpos: np.ndarray, joint_pos: Any) -> np.ndarray:
    """``qpos`` with the spec's actuated joints (driver order) set to ``joint_pos`` [rad]."""
    import mujoco

    qpos = np.array(qpos, np.float64)
    for name, q in zip(spec.actuator_names, joint_pos):
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
        if model.actuator_trntype[aid] == mujoco.mjtTrn.mjTRN_JOINT:
            qpos[model.jnt_qposadr[model.actuator_trnid[aid, 0]]] = q
    return qpos


def task_values(task: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The task's fixed inputs as float arrays (``target_pos_w``, ``command``, ...)."""
    return {k: np.asarray(v, np.float64) for k, v in task.items()}
