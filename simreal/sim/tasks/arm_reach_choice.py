"""``arm-reach-choice``: three coloured balls, and an instruction saying which one to reach.

Each episode puts a red, a green and a blue ball (mocap spheres only cameras see) in three
slots across the goal box, in a random order with a random offset each, and picks one of them
as the goal. The policy's observation holds its joints only: which ball,
the words say ("reach the red ball", :mod:`simreal.policies.vla.instructions`), and where it is,
the camera shows. The task is the language-conditioned benchmark of a vision-language-action
policy (``simreal train-bc --policy vla``); everything else (rewards, randomisation, success,
the scripted teacher) is ``arm-reach``'s (the arm family's, :mod:`simreal.sim.tasks.arm`), on the
chosen ball.

Slots, relative to the home pose's end effector [m]: ``slot_offset_m`` + (0, y, 0), y in (-s, 0,
+s) with s = ``slot_spacing_m``, each ball jittered uniformly by +-``slot_jitter_m`` per axis (z by
half). The offset puts every ball ahead of and below the gripper's start (a ball where the gripper
starts would be reached by doing nothing), and the camera looks at them from the front and above,
so the arm does not hide them.
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
from simreal.sim.tasks.arm import ArmConfig, ArmTask, add_marker
from simreal.sim.tasks.joint_robot import uniform

#: The balls, in mocap order: colour name (the instruction's word) -> RGBA.
BALLS: dict[str, tuple[float, float, float, float]] = {
    "red": (0.9, 0.1, 0.1, 1.0),
    "green": (0.1, 0.8, 0.2, 1.0),
    "blue": (0.2, 0.45, 1.0, 1.0),  # lighter than the floor's blue
}
#: Radius of each ball [m]: about 6 px across in the default 64x64 view.
BALL_RADIUS_M = 0.03
#: In front of a Franka, above its reach, looking back at the balls (all three in view, unoccluded).
CHOICE_VIEW = CameraSpec("front", pos=(1.05, 0.0, 0.85), lookat=(0.4, 0.0, 0.4), fovy_deg=45.0, width=64, height=64)


@dataclasses.dataclass(frozen=True)
class ArmReachChoiceConfig(ArmConfig):
    slot_offset_m: tuple[float, ...] = field(
        (0.12, 0.0, -0.08), doc="the middle slot from the home pose's end effector [m]"
    )
    slot_spacing_m: float = field(0.15, min=0.0, doc="distance between neighbouring slots along y [m]")
    slot_jitter_m: float = field(0.02, min=0.0, doc="uniform offset of each ball in x and y, half that in z [m]")
    cameras: tuple[CameraSpec, ...] = field(
        (CHOICE_VIEW,), doc="cameras the task adds to the scene (the default is placed for a Franka)"
    )


class ArmReachChoice(ArmTask):
    """Arm: reach the one of three coloured balls the instruction names (red, green or blue)."""

    config_class = ArmReachChoiceConfig
    cfg: ArmReachChoiceConfig
    #: no goal in the state: the instruction and the camera say where to go. No last action either:
    #: a teacher's last action already encodes its goal, and a cloned policy learns to copy it
    #: instead of looking (the copycat problem; measured here: 0.20 success with it, docs/benchmarks-log.md)
    obs_terms = ("joint_pos_rel", "joint_vel")
    #: the goal is chosen in words, not sent as a pose
    task_topics: Mapping[str, Mapping[str, str]] = {}

    def add_markers(self, s: mujoco.MjSpec) -> None:
        for name, rgba in BALLS.items():
            add_marker(s, f"ball_{name}", BALL_RADIUS_M, rgba)

    def mocap_pos(self, info: Mapping[str, Any]) -> jax.Array:
        """The balls, (3, 3) [m], in :data:`BALLS` order."""
        return info["ball_pos_w"]

    def sample_initial(self, rng: jax.Array):
        _, k_q = jax.random.split(rng)  # arm-reach's start pose (its goal key unused)
        k_order, k_jitter, k_goal = jax.random.split(jax.random.fold_in(rng, 1), 3)
        c = self.cfg
        slots = jnp.array([-1.0, 0.0, 1.0]) * c.slot_spacing_m
        y = jax.random.permutation(k_order, slots)
        j = jnp.array([c.slot_jitter_m, c.slot_jitter_m, 0.5 * c.slot_jitter_m], jnp.float32)
        offset = (
            jnp.asarray(c.slot_offset_m, jnp.float32)
            + jnp.stack([jnp.zeros(3), y, jnp.zeros(3)], axis=1)
            + uniform(k_jitter, (-1.0, 1.0), (3, 3)) * j
        )
        balls = self.home_ee_pos + offset
        goal = jax.random.randint(k_goal, (), 0, len(BALLS))
        return self.at_rest(
            self.start_pose(k_q), {"target_pos_w": balls[goal], "ball_pos_w": balls, "goal_index": goal}
        )
