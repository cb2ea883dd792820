"""``arm-push-pixels``: ``arm-push`` seen through a camera, with an asymmetric critic on state.

The policy sees its joints, the goal and its last action (``state``) and camera images
(``pixels/<camera>``, (H, W, 3) uint8, plus ``depth/<camera>`` [m] for cameras asked for
depth): where the cube is, it must see. The critic may read ``privileged_state``, the
noise-free full state of ``arm-push`` (the cube's position included), which a simulator has
and a robot does not. The observation is the dict Brax's vision trainers take::

    {"state": (n,), "privileged_state": (n_priv,), "pixels/front": (64, 64, 3) uint8}

Cameras: the arm tasks' ``cameras`` (a scene camera on the table by default, ``arm_reach``) are
added to the model, which draws the goal as a green sphere; ``pixel_cameras`` picks the ones
observed, among them and the robot spec's ``model.cameras`` (a wrist camera). Images come from
:class:`~simreal.sim.render.BatchRenderer` through one host callback per step for the whole
batch, on any physics backend. Rewards, resets and statistics are ``arm-push``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from simreal.config import field
from simreal.errors import UnknownNameError
from simreal.observations import build_observation
from simreal.sim.backends.base import PhysState
from simreal.sim.tasks.arm_object import ArmObjectTask
from simreal.sim.tasks.arm_push import ArmPush, ArmPushConfig


@dataclasses.dataclass(frozen=True)
class ArmPushPixelsConfig(ArmPushConfig):
    pixel_cameras: tuple[str, ...] = field(("front",), doc="cameras the policy sees (the task's or the robot's)")
    render_threads: int = field(0, min=0, doc="renderer threads, one GL context each (0: one per CPU core)")


class ArmPushPixels(ArmPush):
    """Arm: push a cube to a goal, seeing the cube only through a camera (asymmetric critic on state)."""

    config_class = ArmPushPixelsConfig
    cfg: ArmPushPixelsConfig
    obs_terms = ("joint_pos_rel", "joint_vel", "target_pos_w", "last_action")
    #: the critic's observation (``privileged_state``; rsl_rl's critic group): arm-push's full state
    critic_obs_terms = ArmObjectTask.obs_terms

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        from simreal.sim.render import BatchRenderer

        specs = {c.name: c for c in self.robot.model.cameras + self.cfg.cameras}
        for name in self.cfg.pixel_cameras:
            if name not in specs:
                raise UnknownNameError("camera (env.pixel_cameras)", name, specs)
        self.renderer = BatchRenderer(
            self.mj_model,
            self.cfg.pixel_cameras,
            depth=[n for n in self.cfg.pixel_cameras if specs[n].depth],
            nthread=self.cfg.render_threads or None,
        )
        obs = jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs  # traced only: nothing renders
        self._obs_shapes = {k: tuple(v.shape) for k, v in obs.items()}

    @property
    def observation_size(self) -> dict[str, tuple[int, ...]]:
        """Per-key shapes (Brax's ``ObservationSize`` mapping)."""
        return self._obs_shapes

    def observe_extra(self, phys: PhysState, info: Mapping[str, Any], active: jax.Array) -> dict[str, jax.Array]:
        return {
            "privileged_state": self._privileged(phys, info),
            **self.renderer.observe(phys.qpos, active, self.mocap_pos(info)),
        }

    def _privileged(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        return build_observation(self.critic_obs_terms, self.observed_state(phys, info), jnp)
