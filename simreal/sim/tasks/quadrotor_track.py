"""``quadrotor-track``: follow a moving reference on a figure-8 (a lemniscate of Gerono).

The reference, with random amplitude A, period T and phase phi per episode::

    p(t) = c + (A sin(w t + phi), (A / 2) sin(2 (w t + phi)), 0),   w = 2 pi / T
    v(t) = (A w cos(w t + phi), A w cos(2 (w t + phi)), 0)

The policy sees the position error and the reference velocity (``command`` term).
Success: position RMSE from ``settle_time_s`` on below ``success_radius_m``.

Deployed, the bundle carries one figure-8 (mid-range amplitude and period, phase 0; the period
rounded to whole control steps) as a looping reference table (:mod:`simreal.reference`): the
robot side plays ``target_pos_w`` and ``command`` back from the hand-over.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from simreal.config import field
from simreal.reference import Reference
from simreal.sim.deployment import Deployment
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.tasks.quadrotor import QuadrotorConfig, QuadrotorTask, _uniform


@dataclasses.dataclass(frozen=True)
class TrackConfig(QuadrotorConfig):
    center_w: tuple[float, ...] = field((0.0, 0.0, 1.0), doc="figure-8 centre [m]")
    amplitude_m: tuple[float, ...] = field((0.5, 1.0))
    period_s: tuple[float, ...] = field((5.0, 8.0))
    success_radius_m: float = field(0.15, min=0.0)
    episode_length_s: float = field(8.0, min=0.01)


class QuadrotorTrack(QuadrotorTask):
    """Quadrotor: follow a figure-8 reference of random size, period and phase."""

    obs_terms = QuadrotorTask.obs_terms + ("command",)
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
        info = {
            "ref_amplitude": _uniform(k_a, self.cfg.amplitude_m),
            "ref_omega": 2 * math.pi / _uniform(k_t, self.cfg.period_s),
            "ref_phase": _uniform(k_p, (0.0, 2 * math.pi)),
        }
        return {**info, **self._reference(info, jnp.zeros(()))}

    def advance_task(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, **self._reference(info, info["step"] * self.ctrl_dt)}

    def _deploy_info(self) -> dict[str, jax.Array]:
        """The deployed figure-8: mid-range amplitude, the mid-range period rounded to whole
        control steps (so one stored period loops seamlessly), phase 0."""
        steps = max(1, round(0.5 * (self.cfg.period_s[0] + self.cfg.period_s[-1]) / self.ctrl_dt))
        amplitude = 0.5 * (self.cfg.amplitude_m[0] + self.cfg.amplitude_m[-1])
        return {
            "ref_amplitude": jnp.float32(amplitude),
            "ref_omega": jnp.float32(2 * math.pi / (steps * self.ctrl_dt)),
            "ref_phase": jnp.float32(0.0),
        }

    def deployment(self) -> Deployment:
        """The deployed figure-8: its parameters and start point as task inputs (the rehearsal
        starts beside it), and one period at the control rate as the looping reference, row k the
        target and reference velocity of observation k."""
        info = self._deploy_info()
        n = round(2 * math.pi / float(info["ref_omega"]) / self.ctrl_dt)
        ref = jax.vmap(lambda t: self._reference(info, t))(jnp.arange(n) * self.ctrl_dt)
        reference = Reference(
            1.0 / self.ctrl_dt,
            {
                "target_pos_w": np.asarray(ref["target_pos_w"], np.float64),
                "command": np.asarray(ref["target_vel_w"], np.float64),
            },
            loop=True,
        )
        return Deployment(task_params={**info, **self._reference(info, jnp.zeros(()))}, reference=reference)

    def success_stat(self) -> EpisodeStat:
        """A figure-8's success: the settled RMS distance to the moving target below ``success_radius_m``."""
        return EpisodeStat("rms", sample="distance", below=self.cfg.success_radius_m)
