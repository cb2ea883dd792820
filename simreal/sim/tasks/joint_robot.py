"""Shared base of tasks on position-controlled joint robots (humanoids, arms).

Actions are joint position targets as scaled deltas around the ``home`` keyframe's controls:
``ctrl = ctrl_home + action_scale * a`` for a in [-1, 1]^nu, clipped to the actuator's
``ctrlrange`` (what the robot's driver takes as its PD set-points).

With ``env.slew_limit`` the targets also move no faster than the robot spec's joint velocity
limits, ``|ctrl_k - ctrl_{k-1}| <= v_max * ctrl_dt`` from the pose the episode starts in: what the
deploy runner's safety layer does to every command (``simreal/deploy/safety.py``, the limits of
``action_modes.default_max_rate``). MuJoCo's position servos follow a target jump as fast as their
gains allow, faster than a Franka's 2.2-2.6 rad/s or its hand's 0.1 m/s: a pick residual that
read 0.961 without the limit read 0.578 with it (docs/benchmarks-log.md). On by default for arms
(``ArmConfig``), off here: a humanoid trained with it is not measured yet.

Ids are looked up by name once (``site_sensor``); per-actuator joint positions and velocities
come from a transmission matrix so tendon actuators (Franka's gripper width) read right:
``joint_pos = L @ qpos[...]`` with L (nu, nq) holding 1 at the joint's qpos address, or the
fixed tendon's coefficients.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol, cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from simreal.action_modes import action_mode
from simreal.config import field
from simreal.sim.backends.base import ModelParams, PhysState
from simreal.sim.env import EnvConfig, MjEnv

#: ``env.slew_limit``'s help text (arm tasks declare the field again with another default).
SLEW_LIMIT_DOC = (
    "position targets move no faster than the robot spec's joint velocity limits, as the deploy "
    "runner's safety layer limits them"
)


@dataclasses.dataclass(frozen=True)
class JointRobotConfig(EnvConfig):
    action_scale: float = field(0.5, min=0.0, doc="position-target delta at |a| = 1 [rad] (or [m])")
    slew_limit: bool = field(False, doc=SLEW_LIMIT_DOC)


def uniform(rng: jax.Array, bounds: tuple[float, ...], shape: tuple[int, ...] = ()) -> jax.Array:
    """Uniform in [bounds[0], bounds[-1]]."""
    return jax.random.uniform(rng, shape, minval=bounds[0], maxval=bounds[-1])


class JointRobotTask(MjEnv):
    """Position-target actions, joint read-out and frame-position sensors for named sites."""

    #: Sites whose world positions the task reads (a ``framepos`` sensor each, ``<site>_pos``).
    tracked_sites: tuple[str, ...] = ()
    cfg: JointRobotConfig

    def build_model(self) -> mujoco.MjModel:
        from simreal.errors import ConfigError
        from simreal.sim.robots import build_mjspec, check_actuator_order
        from simreal.sim.robots.elements import model_origin, require_sensor_targets
        from simreal.sim.robots.user_model import one_line

        s = build_mjspec(self.robot)
        for site in self.tracked_sites:
            s.add_sensor(
                name=f"{site}_pos",
                type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                objtype=mujoco.mjtObj.mjOBJ_SITE,
                objname=site,
            )
        require_sensor_targets(s, self.robot, type(self).__name__)  # the sites customize_spec may build on
        self.customize_spec(s)
        require_sensor_targets(s, self.robot, type(self).__name__)
        try:
            m = s.compile()
        except ValueError as e:  # e.g. a task object's name clashes with one in the user's file
            raise ConfigError(
                "model",
                f"MuJoCo could not compile {model_origin(self.robot)} with task "
                f"{type(self).__name__}'s additions: {one_line(e)}",
                self.robot.source,
            ) from None
        check_actuator_order(self.robot, m)
        self._index(m)
        return m

    def customize_spec(self, s: mujoco.MjSpec) -> None:
        """Add task objects (goal markers, objects) to the robot's spec; default: nothing."""

    def _index(self, m: mujoco.MjModel) -> None:
        nu = m.nu
        L, Lv = np.zeros((nu, m.nq), np.float32), np.zeros((nu, m.nv), np.float32)
        for i in range(nu):
            tid = m.actuator_trnid[i, 0]
            if m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT:
                L[i, m.jnt_qposadr[tid]] = 1.0
                Lv[i, m.jnt_dofadr[tid]] = 1.0
            elif m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_TENDON:
                for w in range(m.tendon_adr[tid], m.tendon_adr[tid] + m.tendon_num[tid]):
                    j = m.wrap_objid[w]
                    L[i, m.jnt_qposadr[j]] += m.wrap_prm[w]
                    Lv[i, m.jnt_dofadr[j]] += m.wrap_prm[w]
        self.L, self.Lv = jnp.asarray(L), jnp.asarray(Lv)
        key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
        if key < 0:
            from simreal.errors import ConfigError
            from simreal.sim.robots.elements import model_origin

            raise ConfigError(
                "model",
                f"{model_origin(self.robot)} has no 'home' keyframe, which task "
                f'{type(self).__name__} starts from; add <key name="home" .../>',
                self.robot.source,
            )
        self.home_qpos = jnp.asarray(m.key_qpos[key], jnp.float32)
        self.home_ctrl = jnp.asarray(m.key_ctrl[key], jnp.float32)
        self.ctrl_lo = jnp.asarray(m.actuator_ctrlrange[:, 0], jnp.float32)
        self.ctrl_hi = jnp.asarray(m.actuator_ctrlrange[:, 1], jnp.float32)
        self.default_joint_pos = self.L @ self.home_qpos
        self.sensor_slice = {}
        for site in self.tracked_sites:
            sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, f"{site}_pos")
            a = int(m.sensor_adr[sid])
            self.sensor_slice[site] = slice(a, a + 3)
        # the deploy side's slew limits (inf where the spec has none: no limit)
        self.max_rate = jnp.asarray(
            action_mode("joint_position").default_max_rate(self.robot, self.robot.actuator_names), jnp.float32
        )
        # PD gains at nominal: tau = gain * ctrl + b0 + b1 q + b2 qdot (MuJoCo's position actuator)
        self.kp = jnp.asarray(m.actuator_gainprm[:, 0], jnp.float32)
        self.kd = jnp.asarray(-m.actuator_biasprm[:, 2], jnp.float32)

    # -- helpers -----------------------------------------------------------------------------------
    def site_pos(self, phys: PhysState, site: str) -> jax.Array:
        """World position [m] of a tracked site (sensor; evaluated at the last substep's start)."""
        return phys.sensordata[self.sensor_slice[site]]

    def joint_pos(self, phys: PhysState) -> jax.Array:
        return self.L @ phys.qpos

    def joint_vel(self, phys: PhysState) -> jax.Array:
        return self.Lv @ phys.qvel

    def targets(self, action: jax.Array) -> jax.Array:
        """Position targets from a normalised action."""
        return jnp.clip(self.home_ctrl + self.cfg.action_scale * action, self.ctrl_lo, self.ctrl_hi)

    def control(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> jax.Array:
        target = self.targets(action)
        if not self.cfg.slew_limit:
            return target
        step = self.max_rate * self.ctrl_dt
        return jnp.clip(target, info["last_ctrl"] - step, info["last_ctrl"] + step)

    def control_info(self, phys: PhysState) -> dict[str, jax.Array]:
        """With ``slew_limit``: the episode's first command is the pose it starts in (the deploy
        runner's initial command holds the measured pose)."""
        if not self.cfg.slew_limit:
            return {}
        return {"last_ctrl": jnp.clip(self.joint_pos(phys), self.ctrl_lo, self.ctrl_hi)}

    def action_layout(self) -> dict[str, Any]:
        """Position targets: home command + action_scale * a, clipped to the control range
        (rad; m for a tendon-driven gripper)."""
        m = self.mj_model
        units = [
            "m"
            if m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_TENDON
            or m.jnt_type[m.actuator_trnid[i, 0]] == mujoco.mjtJoint.mjJNT_SLIDE
            else "rad"
            for i in range(m.nu)
        ]
        return action_mode("joint_position").layout(
            self.robot,
            self.robot.actuator_names,
            offset=np.asarray(self.home_ctrl),
            scale=self.cfg.action_scale,
            low=np.asarray(self.ctrl_lo),
            high=np.asarray(self.ctrl_hi),
            units=units,
        )

    def torques(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> jax.Array:
        """PD torques [N m] the actuators apply for ``action`` (nominal gains, before force limits)."""
        kp = info["model_params"]["actuator_gainprm"][:, 0] if "actuator_gainprm" in info["model_params"] else self.kp
        return kp * (self.targets(action) - self.joint_pos(phys)) - self.kd * self.joint_vel(phys)


class _FloorRanges(Protocol):
    """The ranges :class:`FloorRobotTask` randomises within: fields of its subclasses' configs."""

    @property
    def friction(self) -> tuple[float, ...]: ...
    @property
    def mass_scale(self) -> tuple[float, ...]: ...
    @property
    def kp_scale(self) -> tuple[float, ...]: ...


class FloorRobotTask(JointRobotTask):
    """A joint robot on the floor, randomised per episode (uniform; the config's ranges
    ``friction``, ``mass_scale``, ``kp_scale``): floor friction, link masses, PD stiffness."""

    def nominal_params(self) -> ModelParams:
        m = self.mj_model
        return {
            k: jnp.asarray(getattr(m, k), jnp.float32)
            for k in ("geom_friction", "body_mass", "actuator_gainprm", "actuator_biasprm")
        }

    def randomize(self, params: ModelParams, rng: jax.Array) -> ModelParams:
        c, nu = cast(_FloorRanges, self.cfg), self.mj_model.nu
        k_f, k_m, k_kp = jax.random.split(rng, 3)
        s_kp = uniform(k_kp, c.kp_scale, (nu,))
        return {
            "geom_friction": params["geom_friction"].at[:, 0].set(uniform(k_f, c.friction)),  # one per episode
            "body_mass": params["body_mass"] * uniform(k_m, c.mass_scale, params["body_mass"].shape),
            "actuator_gainprm": params["actuator_gainprm"].at[:, 0].multiply(s_kp),
            "actuator_biasprm": params["actuator_biasprm"].at[:, 1].multiply(s_kp),  # bias1 = -kp
        }
