"""``arm-reach``: move the end effector (site ``end_effector``) to a random goal and hold it.

Runs on any fixed-base arm with an ``end_effector`` site and a ``home`` keyframe (Franka,
SO-100: the ``robot`` key). The goal is uniform in a box (``goal_half_extent_m``) around the home
pose's end-effector position; the policy sees its joints and the goal (no forward kinematics
needed on the robot). Randomisation, rewards and success are the arm family's
(:mod:`simreal.sim.tasks.arm`): success is the final end-effector distance below
``success_radius_m``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simreal.sim.tasks.arm import ArmConfig, ArmTask


class ArmReach(ArmTask):
    """Arm: bring the end effector to a random goal around its home pose."""

    config_class = ArmConfig

    def sample_initial(self, rng: jax.Array):
        c = self.cfg
        k_goal, k_q = jax.random.split(rng)
        h = jnp.asarray(c.goal_half_extent_m, jnp.float32)
        goal = self.home_ee_pos + jax.random.uniform(k_goal, (3,), minval=-h, maxval=h)
        return self.at_rest(self.start_pose(k_q), {"target_pos_w": goal})
