"""Base of the arm tasks with a free cube on the table (``arm-pick``, ``arm-push``, ``arm-push-pixels``,
``arm-demo-track``).

The cube (body ``object``, free joint ``object_joint``, a box of half size
``object_half_size_m``) is added to the arm's spec; the table is the floor plane the arm's
base stands on. Each episode places it uniformly in ``spawn_half_extent_m`` around the point
below the home end-effector position, with a random yaw. Its position is read from its free
joint's qpos (looked up by name once). Everything else (PD-target actions, randomised gains and
masses, the joint read-out, the cameras) is the arm family's (:mod:`simreal.sim.tasks.arm`); seen
through ``env.pixel_cameras`` the policy loses the cube's position, which it must then see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco

from simreal.config import field
from simreal.robot_spec import CameraSpec
from simreal.sim.backends.base import PhysState
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.tasks.arm import FRONT, ArmConfig, ArmTask
from simreal.sim.tasks.joint_robot import uniform


@dataclasses.dataclass(frozen=True)
class ArmObjectConfig(ArmConfig):
    object_half_size_m: float = field(0.025, min=0.005, doc="cube half size [m]")
    object_mass_kg: float = field(0.1, min=0.001, doc="cube mass [kg]")
    object_friction: float = field(1.0, min=0.0, doc="cube sliding friction")
    spawn_center_offset_m: tuple[float, ...] = field((0.1, 0.0), doc="spawn centre minus home EE (x, y) [m]")
    spawn_half_extent_m: tuple[float, ...] = field((0.08, 0.12), doc="spawn box half sizes (x, y) [m]")
    max_object_dist_m: float = field(
        1.0, min=0.0, doc="cube farther than this from the spawn centre ends the episode [m]"
    )
    cameras: tuple[CameraSpec, ...] = field(
        (FRONT,), doc="cameras the task adds to the scene (the default is placed for a Franka)"
    )


class ArmObjectTask(ArmTask):
    """An arm task plus a free cube on the table (see module docstring)."""

    cfg: ArmObjectConfig
    obs_terms: tuple[str, ...] = ("joint_pos_rel", "joint_vel", "object_pos_w", "target_pos_w", "last_action")
    environment_state_terms = ("ee_pos_w", "object_pos_w", "target_pos_w")
    pixel_hidden_terms = ("object_pos_w",)  # where the cube is, a policy that sees must see
    shaping_terms = ("reach", "action_rate")  # the hand near the cube, smooth commands (MjEnv.shaping_terms)
    #: the goal is held until replaced; the object's pose streams from perception (watched for staleness)
    task_topics = {
        "goal": {"topic": "/simreal/goal_pose", "type": "geometry_msgs/msg/PoseStamped", "role": "target"},
        "object": {"topic": "/simreal/object_pose", "type": "geometry_msgs/msg/PoseStamped", "role": "object"},
    }

    def customize_spec(self, s: mujoco.MjSpec) -> None:
        super().customize_spec(s)
        h = self.cfg.object_half_size_m
        body = s.worldbody.add_body(name="object", pos=[0.5, 0.0, h])
        body.add_freejoint(name="object_joint")
        body.add_geom(
            name="object_geom",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[h, h, h],
            mass=self.cfg.object_mass_kg,
            friction=[self.cfg.object_friction, 0.005, 0.0001],
            condim=4,
            rgba=[0.8, 0.3, 0.2, 1.0],
        )
        for key in s.keys:
            if len(key.qpos):
                key.qpos = list(key.qpos) + [0.5, 0.0, h, 1.0, 0.0, 0.0, 0.0]

    def build_model(self) -> mujoco.MjModel:
        m = super().build_model()
        a = int(m.jnt_qposadr[m.joint("object_joint").id])
        self.obj_qpos = slice(a, a + 7)
        self.obj_dof = int(m.jnt_dofadr[m.joint("object_joint").id])
        c = self.cfg
        self.spawn_center = jnp.asarray(
            [
                self.home_ee_pos[0] + c.spawn_center_offset_m[0],
                self.home_ee_pos[1] + c.spawn_center_offset_m[1],
                c.object_half_size_m,
            ]
        )
        return m

    def object_pos(self, phys: PhysState) -> jax.Array:
        """Cube centre in world [m]."""
        return phys.qpos[self.obj_qpos][:3]

    def sample_object(self, rng: jax.Array) -> jax.Array:
        """(7,) free-joint qpos of a new cube pose: uniform on the spawn box, random yaw."""
        k_xy, k_yaw = jax.random.split(rng)
        h = jnp.asarray(self.cfg.spawn_half_extent_m[:2], jnp.float32)
        xy = self.spawn_center[:2] + jax.random.uniform(k_xy, (2,), minval=-h, maxval=h)
        yaw = uniform(k_yaw, (-jnp.pi, jnp.pi))
        return jnp.concatenate([xy, self.spawn_center[2:], jnp.stack([jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)])])

    def sample_goal(self, rng: jax.Array, obj_qpos: jax.Array) -> jax.Array:
        raise NotImplementedError

    def sample_initial(self, rng: jax.Array):
        k_obj, k_goal, k_q = jax.random.split(rng, 3)
        obj = self.sample_object(k_obj)
        qpos = self.start_pose(k_q).at[self.obj_qpos].set(obj)
        return self.at_rest(qpos, {"target_pos_w": self.sample_goal(k_goal, obj)})

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {**super().robot_state(phys, info), "object_pos_w": self.object_pos(phys)}

    def ee_object_dist(self, phys: PhysState) -> jax.Array:
        """End effector to cube centre [m]."""
        return jnp.linalg.norm(self.site_pos(phys, "end_effector") - self.object_pos(phys))

    def object_goal_dist(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        """Cube centre to goal [m]."""
        return jnp.linalg.norm(self.object_pos(phys) - info["target_pos_w"])

    def termination_causes(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {"object_lost": jnp.linalg.norm(self.object_pos(phys) - self.spawn_center) > self.cfg.max_object_dist_m}

    def stat_table(self) -> dict[str, EpisodeStat]:
        """``success`` (the cube within ``success_radius_m`` of the goal at the end) and
        ``object_lost`` (the cube left ``max_object_dist_m`` around the spawn centre, which ends the
        episode), over all episodes; ``final_distance_m``, cube to goal at the end [m], over the
        episodes that kept the cube."""
        return {
            "success": EpisodeStat("last", sample="distance", below=self.cfg.success_radius_m),
            "object_lost": EpisodeStat("terminated"),
            "final_distance_m": EpisodeStat("last", sample="distance"),
        }

    def stat_samples(self, phys, info):
        return {"distance": self.object_goal_dist(phys, info)}
