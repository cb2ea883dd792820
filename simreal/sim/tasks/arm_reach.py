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
from simreal.robot_spec import CameraSpec, check_cameras
from simreal.sim.backends.base import ModelParams, PhysState
from simreal.sim.deployment import Deployment
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.tasks.joint_robot import SLEW_LIMIT_DOC, JointRobotConfig, JointRobotTask, uniform

#: Above and in front of a Franka on the floor, looking down on the cube's spawn and goal area
#: (about +-0.35 m around x = 0.42 m) with the gripper at the top of the image (the object tasks').
FRONT = CameraSpec("front", pos=(0.75, 0.0, 0.7), lookat=(0.42, 0.0, 0.0), fovy_deg=50.0, width=64, height=64)
#: In front of and beside a Franka, on the reach's goal box around the home pose's gripper.
REACH_VIEW = CameraSpec("front", pos=(0.95, 0.55, 0.65), lookat=(0.3, 0.0, 0.42), fovy_deg=45.0, width=64, height=64)
#: Radius of the goal marker the cameras see (a green sphere, no collision) [m].
GOAL_MARKER_RADIUS_M = 0.02


def add_marker(s: mujoco.MjSpec, name: str, radius_m: float, rgba: tuple[float, ...]) -> None:
    """A mocap sphere ``name`` that only cameras see (no collision, no mass in the dynamics)."""
    marker = s.worldbody.add_body(name=name, mocap=True, pos=[0.5, 0.0, 0.3])
    marker.add_geom(
        name=f"{name}_geom",
        type=mujoco.mjtGeom.mjGEOM_SPHERE,
        size=[radius_m, 0, 0],
        contype=0,
        conaffinity=0,
        rgba=list(rgba),
    )


@dataclasses.dataclass(frozen=True)
class ArmReachConfig(JointRobotConfig):
    episode_length_s: float = field(4.0, min=0.01, doc="episode time limit [s]")
    action_scale: float = field(0.3, min=0.0, doc="position-target delta at |a| = 1 [rad]")
    # On for arms: the pick residual that read 0.961 without it read 0.578 once its arm moved at
    # the Franka's speed limits, as the deploy safety layer moves it (docs/benchmarks-log.md).
    slew_limit: bool = field(True, doc=SLEW_LIMIT_DOC)
    goal_half_extent_m: tuple[float, ...] = field((0.15, 0.15, 0.1), doc="goal box half sizes around home [m]")
    init_joint_noise_rad: float = field(0.1, min=0.0, doc="initial joint offset from home, uniform +- [rad]")
    kp_scale: tuple[float, ...] = field((0.8, 1.2), doc="PD stiffness scale range")
    mass_scale: tuple[float, ...] = field((0.9, 1.1), doc="link mass scale range")
    success_radius_m: float = field(0.05, min=0.0)
    cameras: tuple[CameraSpec, ...] = field(
        (REACH_VIEW,), doc="cameras the task adds to the scene (the default is placed for a Franka)"
    )


class ArmReach(JointRobotTask):
    """Arm: bring the end effector to a random goal around its home pose."""

    config_class = ArmReachConfig
    cfg: ArmReachConfig
    tracked_sites = ("end_effector",)
    obs_terms: tuple[str, ...] = ("joint_pos_rel", "joint_vel", "target_pos_w", "last_action")
    obs_noise_std = {"joint_pos_rel": 0.005, "joint_vel": 0.05}
    #: the goal from the end effector too: a learned reward then scores a distance it can see
    #: directly, rather than one an MLP must learn to subtract (measured: docs/benchmarks-log.md)
    environment_state_terms = ("ee_pos_w", "target_pos_w", "ee_to_target_w")
    reward_scales = {"distance": -1.0, "reach": 2.0, "action_rate": -0.02, "joint_vel": -1e-3}
    #: the goal arrives as a pose (a GUI, a planner, a perception node) and is held until replaced
    task_topics: Mapping[str, Mapping[str, str]] = {
        "goal": {"topic": "/simreal/goal_pose", "type": "geometry_msgs/msg/PoseStamped", "role": "target"}
    }

    def customize_spec(self, s: mujoco.MjSpec) -> None:
        """The scene cameras, and the goal as a mocap sphere that only cameras see (no collision,
        no mass in the dynamics); :meth:`mocap_pos` puts it on each episode's goal."""
        from simreal.sim.cameras import add_cameras
        from simreal.sim.robots.elements import model_origin

        self.add_markers(s)
        check_cameras(self.cfg.cameras, "env.cameras", self.robot.source)
        add_cameras(s, self.cfg.cameras, "env.cameras", self.robot.source, model_origin(self.robot))

    def add_markers(self, s: mujoco.MjSpec) -> None:
        """The goal's green sphere (:meth:`mocap_pos` places it)."""
        add_marker(s, "goal_marker", GOAL_MARKER_RADIUS_M, (0.1, 0.8, 0.2, 0.8))

    def mocap_pos(self, info: Mapping[str, Any]) -> jax.Array:
        """The goal marker on the goal, (1, 3) [m]."""
        return info["target_pos_w"][None]

    def build_model(self) -> mujoco.MjModel:
        m = super().build_model()
        d = mujoco.MjData(m)
        mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home"))
        mujoco.mj_forward(m, d)
        self.home_ee_pos = jnp.asarray(d.site("end_effector").xpos, jnp.float32)
        self.joint_qpos = jnp.asarray(np.flatnonzero(np.asarray(self.L).any(axis=0)))
        # the start pose's bounds: hinge joints get init_joint_noise_rad, every joint stays in its range
        hinge, lo, hi = (
            np.zeros(m.nq, np.float32),
            np.full(m.nq, -np.inf, np.float32),
            np.full(m.nq, np.inf, np.float32),
        )
        for j in range(m.njnt):
            adr = int(m.jnt_qposadr[j])
            if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE:
                hinge[adr] = 1.0
            if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE) and m.jnt_limited[j]:
                lo[adr], hi[adr] = m.jnt_range[j]
        self._hinge, self._q_lo, self._q_hi = jnp.asarray(hinge), jnp.asarray(lo), jnp.asarray(hi)
        return m

    def start_pose(self, rng: jax.Array) -> jax.Array:
        """Home with each arm hinge moved by uniform +- ``init_joint_noise_rad``, clipped to the
        joints' ranges. Slide joints (a Franka's fingers, 0-0.04 m) keep their home: a noise in
        radians once opened the hand to 0.14 m, beyond its range, and the deploy envelope stopped
        such a rehearsal before its first command."""
        c = self.cfg
        noise = uniform(rng, (-c.init_joint_noise_rad, c.init_joint_noise_rad), (self.mj_model.nq,)) * self._hinge
        qpos = self.home_qpos.at[self.joint_qpos].add(noise[self.joint_qpos])
        return jnp.clip(qpos, self._q_lo, self._q_hi)

    # -- randomisation ---------------------------------------------------------------------------
    def nominal_params(self) -> ModelParams:
        m = self.mj_model
        return {
            k: jnp.asarray(getattr(m, k), jnp.float32) for k in ("body_mass", "actuator_gainprm", "actuator_biasprm")
        }

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
        return self.start_pose(k_q), jnp.zeros(self.mj_model.nv), jnp.zeros(self.mj_model.na), {"target_pos_w": goal}

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {
            "joint_pos": self.joint_pos(phys),
            "joint_vel": self.joint_vel(phys),
            "default_joint_pos": self.default_joint_pos,
            "target_pos_w": info["target_pos_w"],
            "last_action": info["last_action"],
            "ee_pos_w": self.site_pos(phys, "end_effector"),
        }

    def deployment(self) -> Deployment:
        """The goal (and the object's pose) as topics; a rehearsal judged where it ended: the hand
        (an object task: the cube) against the goal."""
        return Deployment(task_topics=self.task_topics, judged_at_end=True)

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

    # -- statistics ------------------------------------------------------------------------------
    def stat_table(self) -> dict[str, EpisodeStat]:
        """``success``: the final end-effector distance below ``success_radius_m``, over all
        episodes; ``final_distance_m`` [m], over the episodes whose simulation stayed finite (the
        only way a reach episode ends early, and a failure)."""
        return {
            "success": EpisodeStat("last", sample="distance", below=self.cfg.success_radius_m),
            "final_distance_m": EpisodeStat("last", sample="distance"),
        }

    def stat_samples(self, phys, info):
        return {"distance": self.distance(phys, info)}
