"""``arm-push``: push the cube along the table to a goal on the table.

Any arm with an ``end_effector`` site (Franka, SO-100). The goal is on the table, uniform in
``goal_half_extent_m`` around the spawn centre, at least ``min_goal_dist_m`` from the cube.
Rewards: reach the cube, cube-to-goal distance kernel, a dense progress term (the distance
itself), action rate. Success: the cube within ``success_radius_m`` of the goal at the end.
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


@dataclasses.dataclass(frozen=True)
class ArmPushConfig(ArmObjectConfig):
    episode_length_s: float = field(6.0, min=0.01, doc="episode time limit [s]")
    goal_half_extent_m: tuple[float, ...] = field((0.12, 0.15, 0.0), doc="goal box half sizes (x, y) [m]")
    min_goal_dist_m: float = field(0.08, min=0.0, doc="goal at least this far from the cube [m]")


class ArmPush(ArmObjectTask):
    """Arm: push a cube along the table to a goal on the table."""

    config_class = ArmPushConfig
    cfg: ArmPushConfig
    reward_scales = {"reach": 1.0, "goal": 4.0, "distance": -2.0, "action_rate": -0.01}

    def sample_goal(self, rng: jax.Array, obj_qpos: jax.Array) -> jax.Array:
        c = self.cfg
        h = jnp.asarray(c.goal_half_extent_m[:2], jnp.float32)
        xy = self.spawn_center[:2] + jax.random.uniform(rng, (2,), minval=-h, maxval=h)
        away = xy - obj_qpos[:2]
        n = jnp.linalg.norm(away)
        # push a too-close goal out to min_goal_dist_m along the same direction
        xy = jnp.where(n < c.min_goal_dist_m, obj_qpos[:2] + away / jnp.maximum(n, 1e-6) * c.min_goal_dist_m, xy)
        return jnp.concatenate([xy, self.spawn_center[2:]])

    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        d = self.object_goal_dist(phys, info)
        return {
            "reach": rw.tanh_kernel(self.ee_object_dist(phys), 5.0),
            "goal": rw.tanh_kernel(d, 5.0),
            "distance": d,
            "action_rate": rw.action_rate(action, info["last_action"]),
        }
