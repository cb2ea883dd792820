"""A run's ``reward:`` section (``simreal.rewards.learned``) made a term of the task's env.

    env = task_class(cfg.task)(robot, cfg.env, backend)
    attach(env, cfg.reward)          # env's reward table gains "learned" (or "clip")

Three scorers, one place:

- a **state** reward model (``kind: learned``, fitted on state features): the ensemble in
  ``jax.numpy`` (:func:`~simreal.rewards.learned.jax_reward`) of the model's observation terms
  built from the robot-state mapping after each step, every step, inside the jitted step;
- a **frame** reward model (``kind: learned``, fitted on frames): the model's camera rendered
  at the model's input size from the state after the step (goal markers on the episode's goal,
  ``MjEnv.mocap_pos``), scored by the torch ensemble;
- **CLIP / SigLIP** (``kind: clip``): ``reward.camera`` rendered at its own resolution, scored
  by :class:`~simreal.rewards.vlm.ClipReward`.

Frames are rendered and scored on the host in one ``jax.pure_callback`` for the whole batch
(``vmap_method="broadcast_all"``), as the ``native`` backend steps MuJoCo; only the envs whose
score is due (``every_k_steps``) are rendered and scored, the others keep their last score.
This module lives in ``policies`` because it joins ``rewards`` (the models) and ``sim`` (the
renderer), and ``rewards`` does not import ``sim``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from simreal.errors import ConfigError, SimrealError
from simreal.rewards.learned import LearnedRewardConfig, jax_reward
from simreal.rewards.vlm import ClipRewardConfig
from simreal.sim.cameras import camera_size


def attach(env: Any, cfg: LearnedRewardConfig | ClipRewardConfig) -> None:
    """Add the section's term to ``env`` (a task's :class:`~simreal.sim.env.MjEnv`) after checking
    the model fits the task; ConfigError naming ``reward.<key>`` otherwise."""
    if isinstance(cfg, ClipRewardConfig):
        from simreal.rewards.vlm import ClipReward

        size = camera_size(env.mj_model, cfg.camera, "reward.camera")
        env.add_reward_term(
            "clip",
            _frame_scorer(env, cfg.camera, size, ClipReward(cfg)),
            cfg.weight,
            cfg.task_weight,
            cfg.every_k_steps,
        )
        return
    from simreal.rewards.reward_model import load_reward_model

    try:
        model = load_reward_model(cfg.model)
    except SimrealError as e:
        raise ConfigError("reward.model", str(e)) from None
    c = model.config
    if c.is_image:
        if not c.camera:
            raise ConfigError(
                "reward.model",
                f"{cfg.model} scores frames and does not name their camera; fit it with "
                "simreal fit-reward --input frames, which records it",
            )
        camera_size(env.mj_model, c.camera, "reward.model")
        h, w = c.input_shape[:2]  # (H, W, 3) frames
        scorer = _frame_scorer(env, c.camera, (h, w), model.reward)
        env.add_reward_term("learned", scorer, cfg.weight, cfg.task_weight, cfg.every_k_steps)
        return
    env.add_reward_term("learned", _state_scorer(env, model, cfg.model), cfg.weight, cfg.task_weight)


def _state_scorer(env: Any, model: Any, path: str) -> Callable[..., jax.Array]:
    """``(phys, info, due) -> ()``: the state model's score of the model's observation terms."""
    from simreal.observations import TERMS, build_observation

    terms = model.config.obs_terms
    if not terms:
        raise ConfigError(
            "reward.model",
            f"{path} does not name the observation terms of its features; fit it "
            "with simreal fit-reward, which records them",
        )
    unknown = [n for n in terms if n not in TERMS]
    if unknown:
        raise ConfigError("reward.model", f"{path}: unknown observation term {unknown[0]!r}; terms: {', '.join(TERMS)}")
    try:
        size = sum(t["size"] for t in env.layout_of(terms))
    except KeyError as e:
        raise ConfigError(
            "reward.model", f"{path} reads the term(s) {', '.join(terms)}, and the robot state of this task has no {e}"
        ) from None
    if size != model.config.input_shape[0]:
        raise ConfigError(
            "reward.model",
            f"{path} takes {model.config.input_shape[0]} features, and its terms "
            f"{', '.join(terms)} make {size} in this task",
        )
    score = jax_reward(model)
    return lambda phys, info, due: score(build_observation(terms, env.observed_state(phys, info), jnp))


def _frame_scorer(
    env: Any, camera: str, size: tuple[int, int], score: Callable[[np.ndarray], np.ndarray]
) -> Callable[..., jax.Array]:
    """``(phys, info, due) -> ()``: ``score`` of ``camera``'s (H, W) frame of the state, rendered and
    scored on the host for the envs where ``due``."""
    from simreal.sim.render import sized_renderer

    renderer = sized_renderer(env.mj_model, {camera: size})
    key = f"pixels/{camera}"

    def host(qpos: np.ndarray, mocap: np.ndarray, due: np.ndarray) -> np.ndarray:
        batch = qpos.shape[:-1]
        due = np.asarray(due, bool).reshape(-1)
        out = np.zeros(due.shape, np.float32)
        if due.any():
            frames = renderer.render(
                qpos.reshape(-1, qpos.shape[-1]), due, mocap.reshape(len(due), -1, 3) if env.mj_model.nmocap else None
            )[key]
            out[due] = np.asarray(score(frames[due]), np.float32)
        return out.reshape(batch)

    def scorer(phys: Any, info: Any, due: jax.Array) -> jax.Array:
        return jax.pure_callback(
            host,
            jax.ShapeDtypeStruct((), jnp.float32),
            phys.qpos,
            env.mocap_pos(info),
            jnp.asarray(due, jnp.bool_),
            vmap_method="broadcast_all",
        )

    return scorer
