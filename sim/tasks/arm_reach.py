"""``arm-reach``: move the end effector (site ``end_effector``) to a random goal and hold it.

Runs on any fixed-base arm with an ``end_effector`` site and a ``home`` keyframe (Franka,
SO-100: the ``robot`` key). The goal is uniform in a box around the home pose's end-effector
position; the policy sees its joints and the goal (no forward kinematics needed on the robot).

Randomised per episode: joint damping-free PD gains (kp, via ``actuator_gainprm`` and
``actuator_biasprm``), link masses, the initial joint pose around home.
Success: the final end-effector distance below ``success_radius_m``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from simreal.config import field
from simreal.rewards import terms as rw
from simreal.sim.backends.base import ModelParams, PhysState
from simreal.sim.episode_stats import defined_where
from simreal.sim.tasks.joint_robot import JointRobotConfig, JointRobotTask, uniform


@dataclasses.dataclass(frozen=True)
class ArmReachConfig(JointRobotConfig):
    episode_length_s: float = field(4.0, min=0.01, doc="episode time limit [s]")
    action_scale: float = field(0.3, min=0.0, doc="position-target delta at |a| = 1 [rad]")
    goal_half_extent_m: tuple[float, ...] = field((0.15, 0.15, 0.1), doc="goal box half sizes around home [m]")
    init_joint_noise_rad: float = field(0.1, min=0.0, doc="initial joint offset from home, uniform +- [rad]")
    kp_scale: tuple[float, ...] = field((0.8, 1.2), doc="PD stiffness scale range")
    mass_scale: tuple[float, ...] = field((0.9, 1.1), doc="link mass scale range")
    success_radius_m: float = field(0.05, min=0.0)


class ArmReach(JointRobotTask):
    """Arm: bring the end effector to a random goal around its home pose."""

    config_class = ArmReachConfig
    cfg: ArmReachConfig
    tracked_sites = ("end_effector",)
    obs_terms = ("joint_pos_rel", "joint_vel", "target_pos_w", "last_action")
    obs_noise_std = {"joint_pos_rel": 0.005, "joint_vel": 0.05}
    reward_scales = {"distance": -1.0, "reach": 2.0, "action_rate": -0.02, "joint_vel": -1e-3}
    #: the goal arrives as a pose (a GUI, a planner, a perception node) and is held until replaced
    task_topics = {"goal": {"topic": "/simreal/goal_pose", "type": "geometry_msgs/msg/PoseStamped", "role": "target"}}

    def build_model(self) -> mujoco.MjModel:
        m = super().build_model()
        d = mujoco.MjData(m)
        mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home"))
        mujoco.mj_forward(m, d)
        self.home_ee_pos = jnp.asarray(d.site("end_effector").xpos, jnp.float32)
        self.joint_qpos = jnp.asarray(np.flatnonzero(np.asarray(self.L).any(axis=0)))
        return m

    # -- randomisation ---------------------------------------------------------------------------
    def nominal_params(self) -> ModelParams:
        m = self.mj_model
        return {k: jnp.asarray(getattr(m, k), jnp.float32) for k in ("body_mass", "actuator_gainprm", "actuator_biasprm")}

    def randomize(self, params: ModelParams, rng: jax.Array) -> ModelParams:
        c, nu = self.cfg, self.mj_model.nu
        k_kp, k_m = jax.random.split(rng)
        s_kp = uniform(k_kp, c.kp_scale, (nu,))  # per-actuator stiffness error
        return {
            "body_mass": params["body_mass"] * uniform(k_m, c.mass_scale, params["body_mass"].shape),
            "actuator_gainprm": params["actuator_gainprm"].at[:, 0].multiply(s_kp),
            "actuator_biasprm": params["actuator_biasprm"].at[:, 1].multiply(s_kp),  # bias1 = -kp
        }

    # -- episode ---------------------------------------------------------------------------------
    def sample_initial(self, rng: jax.Array):
        c = self.cfg
        k_goal, k_q = jax.random.split(rng)
        h = jnp.asarray(c.goal_half_extent_m, jnp.float32)
        goal = self.home_ee_pos + jax.random.uniform(k_goal, (3,), minval=-h, maxval=h)
        noise = uniform(k_q, (-c.init_joint_noise_rad, c.init_joint_noise_rad), (self.mj_model.nq,))
        qpos = self.home_qpos.at[self.joint_qpos].add(noise[self.joint_qpos])
        return qpos, jnp.zeros(self.mj_model.nv), jnp.zeros(self.mj_model.na), {"target_pos_w": goal}

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {"joint_pos": self.joint_pos(phys), "joint_vel": self.joint_vel(phys),
                "default_joint_pos": self.default_joint_pos, "target_pos_w": info["target_pos_w"],
                "last_action": info["last_action"]}

    def distance(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        """End effector to goal [m]."""
        return jnp.linalg.norm(self.site_pos(phys, "end_effector") - info["target_pos_w"])

    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        d = self.distance(phys, info)
        return {
            "distance": d,
            "reach": rw.exp_kernel(jnp.square(d), 0.05),  # 5 cm wide
            "action_rate": rw.action_rate(action, info["last_action"]),
            "joint_vel": rw.joint_vel(self.joint_vel(phys)),
        }

    def terminated(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        return jnp.zeros((), jnp.bool_)

    # -- statistics ------------------------------------------------------------------------------
    def init_stats(self) -> dict[str, jax.Array]:
        return {"dist": jnp.zeros(())}

    def update_stats(self, stats, phys, info):
        return {"dist": self.distance(phys, info)}

    def final_stats(self, stats, terminated):
        """``success``: the final end-effector distance below ``success_radius_m``, over all
        episodes; ``final_distance_m`` [m], over the episodes whose simulation stayed finite (the
        only way a reach episode ends early, and a failure)."""
        return {"success": ((stats["dist"] < self.cfg.success_radius_m) & ~terminated).astype(jnp.float32),
                **defined_where("final_distance_m", stats["dist"], ~terminated)}
