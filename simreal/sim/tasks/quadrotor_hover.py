"""``quadrotor-hover``: from a random position, attitude and velocity, reach and hold a point.

Success (the issue's definition): within ``success_radius_m`` (10 cm) of the target from
``settle_time_s`` (2 s) on, held to the episode's end, under domain randomisation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from simreal.config import field
from simreal.sim.deployment import Deployment
from simreal.sim.tasks.quadrotor import QuadrotorConfig, QuadrotorTask


@dataclasses.dataclass(frozen=True)
class HoverConfig(QuadrotorConfig):
    target_pos_w: tuple[float, ...] = field((0.0, 0.0, 1.0), doc="hover point in world [m]")


class QuadrotorHover(QuadrotorTask):
    """Quadrotor: from a random position, attitude and velocity, reach a fixed point and hold it."""

    config_class = HoverConfig
    cfg: HoverConfig

    def target(self, rng: jax.Array) -> dict[str, jax.Array]:
        return {"target_pos_w": jnp.asarray(self.cfg.target_pos_w, jnp.float32)}

    def deployment(self) -> Deployment:
        """What deploy needs of the task: the hover point."""
        return Deployment(task_params={"target_pos_w": self.cfg.target_pos_w})
