"""``arm-pick``: grasp the cube on the table and hold it at a goal in the air.

Franka (or SO-100, ``robot=so100`` with a smaller cube) with its gripper actuator. The goal is
``lift_height_m`` (uniform range) above a point near the cube's spawn. Rewards (MuJoCo
Playground's PandaPickCube shape): reach the cube, lift it off the table, bring it to the
goal (gated by the lift, so pushing it along the table earns nothing), action rate.
Success: the cube within ``success_radius_m`` of the goal at the episode's end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from simreal.config import field
from simreal.rewards import terms as rw
from simreal.sim.backends.base import PhysState
from simreal.sim.tasks.arm_object import ArmObjectConfig, ArmObjectTask
from simreal.sim.tasks.joint_robot import uniform


@dataclasses.dataclass(frozen=True)
class ArmPickConfig(ArmObjectConfig):
    episode_length_s: float = field(6.0, min=0.01, doc="episode time limit [s]")
    lift_height_m: tuple[float, ...] = field((0.1, 0.25), doc="goal height above the table range [m]")
    goal_xy_half_extent_m: float = field(0.05, min=0.0, doc="goal xy offset from the cube, uniform +- [m]")
    lifted_m: float = field(0.02, min=0.0, doc="cube bottom this high counts as lifted [m]")


class ArmPick(ArmObjectTask):
    """Arm: grasp a cube on the table and hold it at a goal in the air."""

    config_class = ArmPickConfig
    cfg: ArmPickConfig
    reward_scales = {"reach": 1.0, "lift": 2.0, "goal": 8.0, "action_rate": -0.01}

    def sample_goal(self, rng: jax.Array, obj_qpos: jax.Array) -> jax.Array:
        c = self.cfg
        k_xy, k_z = jax.random.split(rng)
        xy = obj_qpos[:2] + uniform(k_xy, (-c.goal_xy_half_extent_m, c.goal_xy_half_extent_m), (2,))
        return jnp.concatenate([xy, (c.object_half_size_m + uniform(k_z, c.lift_height_m))[None]])

    def lifted(self, phys: PhysState) -> jax.Array:
        return self.object_pos(phys)[2] - self.cfg.object_half_size_m > self.cfg.lifted_m

    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        height = self.object_pos(phys)[2] - self.cfg.object_half_size_m
        return {
            "reach": rw.tanh_kernel(self.ee_object_dist(phys), 5.0),
            "lift": jnp.clip(height / self.cfg.lift_height_m[0], 0.0, 1.0),
            "goal": rw.tanh_kernel(self.object_goal_dist(phys, info), 5.0) * self.lifted(phys),
            "action_rate": rw.action_rate(action, info["last_action"]),
        }
