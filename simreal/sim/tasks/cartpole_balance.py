"""``cartpole-balance``: dm_control's balance task on the cart-pole, matching MuJoCo
Playground's ``CartpoleBalance`` (model, 0.01 s control and physics step, 1000-step episodes,
initial pole angle within +-0.034 rad... of upright) for backend benchmarks.

Rewards are dm_control's factors as a weighted sum: upright (cos(theta) + 1) / 2, centred
exp(-x^2), small control u^2, small angular velocity theta_dot^2 (so the return is not
dm_control's). Episode statistics: ``success`` (the pole never leaves ``max_angle_rad``) and
``upright``, the mean upright factor.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from simreal.action_modes import action_mode
from simreal.config import field
from simreal.rewards import terms as rw
from simreal.sim.env import EnvConfig, MjEnv
from simreal.sim.episode_stats import EpisodeStat


@dataclasses.dataclass(frozen=True)
class CartpoleConfig(EnvConfig):
    episode_length_s: float = field(10.0, min=0.01)
    action_delay_steps: tuple[float, ...] = field((0, 0), min=0.0)
    max_angle_rad: float = field(
        math.radians(12.0), min=0.0, doc="success: |pole angle| stays below this [rad] (Gymnasium CartPole's 12 deg)"
    )


class CartpoleBalance(MjEnv):
    """Cart-pole: keep the pole upright with the cart near the centre (dm_control's balance)."""

    config_class = CartpoleConfig
    cfg: CartpoleConfig
    obs_terms = ("joint_pos_rel", "joint_vel")
    reward_scales = {"upright": 1.0, "centered": 0.5, "control": -0.1, "ang_vel": -0.01}

    def action_layout(self):
        """Cart force [N]: the motor's ctrl in [-1, 1] times its gear."""
        gear = float(self.mj_model.actuator_gear[0, 0])
        return action_mode("joint_effort").layout(
            self.robot, self.robot.actuator_names, offset=0.0, scale=gear, low=[-gear], high=[gear]
        )

    def sample_initial(self, rng):
        k1, k2, k3 = jax.random.split(rng, 3)
        qpos = jnp.stack(
            [
                jax.random.uniform(k1, (), minval=-0.1, maxval=0.1),
                jax.random.uniform(k2, (), minval=-0.034, maxval=0.034),
            ]
        )
        qvel = 0.01 * jax.random.normal(k3, (2,))
        return qpos, qvel, jnp.zeros((0,)), {}

    def robot_state(self, phys, info):
        return {
            "joint_pos": phys.qpos,
            "joint_vel": phys.qvel,
            "default_joint_pos": jnp.zeros(2),
            "last_action": info["last_action"],
        }

    def reward_terms(self, phys, action, info):
        return {
            "upright": rw.upright(jnp.cos(phys.qpos[1])),
            "centered": rw.exp_kernel(jnp.square(phys.qpos[0]), 1.0),
            "control": rw.action_magnitude(action),
            "ang_vel": rw.joint_vel(phys.qvel[1:2]),
        }

    # -- statistics (the episode never ends early but on a diverged simulation) -------------------
    def stat_table(self) -> dict[str, EpisodeStat]:
        """``success``: |theta| stayed below ``max_angle_rad`` the whole episode; ``upright``: the
        reward's upright factor (cos theta + 1) / 2 averaged over the episode's steps (1: always
        vertical), over the episodes whose simulation stayed finite."""
        return {"success": EpisodeStat("all", sample="balanced"), "upright": EpisodeStat("mean")}

    def stat_samples(self, phys, info):
        return {
            "balanced": jnp.abs(phys.qpos[1]) < self.cfg.max_angle_rad,
            "upright": rw.upright(jnp.cos(phys.qpos[1])),
        }
