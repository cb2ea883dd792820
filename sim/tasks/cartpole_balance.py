"""``cartpole-balance``: dm_control's balance task on the cart-pole, matching MuJoCo
Playground's ``CartpoleBalance`` (model, 0.01 s control and physics step, 1000-step episodes,
initial pole angle within +-0.034 rad... of upright) for backend benchmarks.

Rewards are dm_control's factors as a weighted sum: upright (cos(theta) + 1) / 2, centred
exp(-x^2), small control u^2, small angular velocity theta_dot^2.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from simreal.action_modes import action_mode
from simreal.config import field
from simreal.sim.env import EnvConfig, MjEnv


@dataclasses.dataclass(frozen=True)
class CartpoleConfig(EnvConfig):
    episode_length_s: float = field(10.0, min=0.01)
    action_delay_steps: tuple[int, ...] = field((0, 0))


class CartpoleBalance(MjEnv):
    """Keep the pole upright (theta = 0) with the cart near the centre."""

    config_class = CartpoleConfig
    obs_terms = ("joint_pos_rel", "joint_vel")
    reward_scales = {"upright": 1.0, "centered": 0.5, "control": -0.1, "ang_vel": -0.01}

    def action_layout(self):
        """Cart force [N]: the motor's ctrl in [-1, 1] times its gear."""
        gear = float(self.mj_model.actuator_gear[0, 0])
        return action_mode("joint_effort").layout(self.robot, self.robot.actuator_names, offset=0.0, scale=gear,
                                                  low=[-gear], high=[gear])

    def sample_initial(self, rng):
        k1, k2, k3 = jax.random.split(rng, 3)
        qpos = jnp.stack([jax.random.uniform(k1, (), minval=-0.1, maxval=0.1),
                          jax.random.uniform(k2, (), minval=-0.034, maxval=0.034)])
        qvel = 0.01 * jax.random.normal(k3, (2,))
        return qpos, qvel, jnp.zeros((0,)), {}

    def robot_state(self, phys, info):
        return {"joint_pos": phys.qpos, "joint_vel": phys.qvel, "default_joint_pos": jnp.zeros(2),
                "last_action": info["last_action"]}

    def reward_terms(self, phys, action, info):
        return {"upright": (jnp.cos(phys.qpos[1]) + 1) / 2, "centered": jnp.exp(-jnp.square(phys.qpos[0])),
                "control": jnp.sum(jnp.square(action)), "ang_vel": jnp.square(phys.qvel[1])}

    def terminated(self, phys, info):
        return jnp.zeros((), bool)
