"""A run's ``reward:`` section: a reward model scoring the task's env during training.

    reward:
      kind: learned
      model: reward.safetensors   # `simreal fit-reward`'s ensemble, fitted on state features
      weight: 1.0                 # of the term reward/learned
      task_weight: 0.0            # the task's own terms x this (0: the learned reward alone)

``kind: learned`` adds the term ``learned`` to the task's reward table:

    r_learned = 1/K sum_k f_k((x - mu) / sigma)

``x`` the model's observation terms (``RewardModelConfig.obs_terms``, e.g. ``ee_pos_w,
target_pos_w``) built from the robot-state mapping after each step (noise-free: the
simulator's truth, as the labels judged what happened), ``mu``, ``sigma`` the standardisation
saved with the model, ``f_k`` member ``k``'s MLP. As every term, it is weighted, multiplied by
the control period and logged as ``reward/learned``; success and the other episode statistics
stay the task's, so an evaluation measures the task, not the learned reward.

A state model is evaluated in ``jax.numpy`` inside the jitted step, from the saved tensors (a
two-hidden-layer MLP: a host round trip to torch per step would cost more than the network);
:func:`jax_reward` is checked equal to the torch ensemble in the tests. A frame model (``x`` a
camera image) and ``kind: clip`` (``simreal.rewards.vlm``) score frames rendered from the state
after the step, on the host, every ``every_k_steps`` (``simreal.policies.learned_reward``
wires both into the env: the renderer lives in ``simreal.sim``, which this package does not
import).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from simreal.config import build, field
from simreal.errors import ConfigError
from simreal.rewards.vlm import ClipRewardConfig


@dataclasses.dataclass(frozen=True)
class LearnedRewardConfig:
    """The ``reward:`` section of ``kind: learned``."""

    model: str = field(doc="the reward model file, simreal fit-reward's output (safetensors)")
    kind: str = field("learned", choices=("learned",), doc="learned: a Bradley-Terry ensemble on state features")
    weight: float = field(1.0, doc="scale of the term reward/learned")
    task_weight: float = field(1.0, min=0.0, doc="multiplies the task's own reward terms (0: the learned reward alone)")
    every_k_steps: int = field(
        1,
        min=1,
        doc="a frame model scores every K-th step; the steps between keep the last "
        "score (a state model scores every step)",
    )


#: ``reward.kind`` -> its section's config class.
KINDS: dict[str, type] = {"learned": LearnedRewardConfig, "clip": ClipRewardConfig}


def reward_section(section: Any) -> LearnedRewardConfig | ClipRewardConfig | None:
    """The validated ``reward:`` section (None when absent); ConfigError naming ``reward.<key>``."""
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise ConfigError("reward", f"expected a mapping with kind: {' | '.join(KINDS)}, got {type(section).__name__}")
    kind = section.get("kind")
    if kind not in KINDS:
        raise ConfigError("reward.kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    cfg: LearnedRewardConfig | ClipRewardConfig = build(KINDS[kind], section, prefix="reward")
    # a run's saved config works from any directory: a file, or a CLIP model's local directory
    # (a repo id of the Hugging Face cache is no path, and stays as it is)
    if isinstance(cfg, LearnedRewardConfig) or Path(cfg.model).expanduser().is_dir():
        cfg = dataclasses.replace(cfg, model=str(Path(cfg.model).expanduser().absolute()))
    return cfg


def jax_reward(model: Any) -> Callable[[jax.Array], jax.Array]:
    """The ensemble's mean reward as a jax function of state features (..., d) -> (...), from the
    tensors of a state :class:`~simreal.rewards.reward_model.BTEnsemble` (Linear, LeakyReLU,
    Linear, LeakyReLU, Linear per member; torch's LeakyReLU slope 0.01)."""
    if model.config.is_image:
        raise ValueError("a frame-based reward model is not a function of state features")
    t = {k: jnp.asarray(v.detach().cpu().numpy(), jnp.float32) for k, v in model.state_dict().items()}
    k = model.config.members
    w = [jnp.stack([t[f"members.{m}.{i}.weight"] for m in range(k)]) for i in (0, 2, 4)]  # (K, out, in)
    b = [jnp.stack([t[f"members.{m}.{i}.bias"] for m in range(k)]) for i in (0, 2, 4)]  # (K, out)
    mean, std = t["obs_mean"], t["obs_std"]

    def reward(x: jax.Array) -> jax.Array:
        h = (x - mean) / std
        h = jax.nn.leaky_relu(jnp.einsum("koi,...i->...ko", w[0], h) + b[0], 0.01)
        h = jax.nn.leaky_relu(jnp.einsum("koi,...ki->...ko", w[1], h) + b[1], 0.01)
        r = jnp.einsum("koi,...ki->...ko", w[2], h) + b[2]  # (..., K, 1)
        return r[..., 0].mean(-1)

    return reward
