"""``quadrotor-track``: follow a moving reference on a figure-8 (a lemniscate of Gerono).

The reference, with random amplitude A, period T and phase phi per episode::

    p(t) = c + (A sin(w t + phi), (A / 2) sin(2 (w t + phi)), 0),   w = 2 pi / T
    v(t) = (A w cos(w t + phi), A w cos(2 (w t + phi)), 0)

The policy sees the position error and the reference velocity (``command`` term).
Success: position RMSE from ``settle_time_s`` on below ``success_radius_m``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from simreal.config import field
from simreal.sim.tasks.quadrotor import QuadrotorConfig, QuadrotorTask, _uniform


@dataclasses.dataclass(frozen=True)
class TrackConfig(QuadrotorConfig):
    center_w: tuple[float, ...] = field((0.0, 0.0, 1.0), doc="figure-8 centre [m]")
    amplitude_m: tuple[float, ...] = field((0.5, 1.0))
    period_s: tuple[float, ...] = field((5.0, 8.0))
    success_radius_m: float = field(0.15, min=0.0)
    episode_length_s: float = field(8.0, min=0.01)


class QuadrotorTrack(QuadrotorTask):
    """Track a figure-8 reference."""

    obs_terms = QuadrotorTask.obs_terms + ("command",)

    def bundle_task_params(self) -> dict[str, Any]:
        """The figure-8 is a time-varying reference the deploy runner cannot play back yet."""
        return {"time_varying_inputs": ["target_pos_w", "command"]}
    config_class = TrackConfig
    cfg: TrackConfig

    def _reference(self, info: dict[str, Any], t: jax.Array) -> dict[str, jax.Array]:
        a, w, phi = info["ref_amplitude"], info["ref_omega"], info["ref_phase"]
        s = w * t + phi
        c = jnp.asarray(self.cfg.center_w, jnp.float32)
        pos = c + jnp.stack([a * jnp.sin(s), 0.5 * a * jnp.sin(2 * s), 0.0])
        vel = jnp.stack([a * w * jnp.cos(s), a * w * jnp.cos(2 * s), 0.0])
        return {"target_pos_w": pos, "target_vel_w": vel}

    def target(self, rng: jax.Array) -> dict[str, jax.Array]:
        k_a, k_t, k_p = jax.random.split(rng, 3)
        info = {"ref_amplitude": _uniform(k_a, self.cfg.amplitude_m),
                "ref_omega": 2 * math.pi / _uniform(k_t, self.cfg.period_s),
                "ref_phase": _uniform(k_p, (0.0, 2 * math.pi))}
        return {**info, **self._reference(info, jnp.zeros(()))}

    def advance_task(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, **self._reference(info, info["step"] * self.ctrl_dt)}

    def success(self, stats, rmse, terminated):
        return (rmse < self.cfg.success_radius_m) & ~terminated & (stats["n"] > 0)
