"""A VLA policy in its simulated task: images rendered, instructions said, episodes rolled out.

    batch = rollout(env, task, model, tok, num_envs=16, seed=1, sample=False)
    batch.stats["success"]                 # the task's episode statistics, as simreal eval's
    batch.bins, batch.logp, batch.reward   # (T, N, m), (T, N), (T, N): what PPO learns from

The env runs batched (:class:`~simreal.sim.adapter_core.JaxBatch`), the first episode of each
env counts. At each step the policy sees what the robot would: the state observation, the
cameras the policy was trained on rendered from the nominal model at its image size (the
task's markers placed, :class:`~simreal.sim.render.BatchRenderer`), and the episode's
instruction (:mod:`simreal.policies.vla.instructions`, from the task inputs its reset drew). With
``sample`` the action's bins are drawn from the policy's categorical distributions (RL's
exploration, at a temperature), otherwise each dimension takes the most likely bin (the
deployed policy).

``reward`` is the sparse success signal: r_t = 1 when the task's success criterion holds after
step t (within ``success_radius_m`` of the goal, for a reach), else 0; no shaping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from simreal.policies.vla.instructions import instruction
from simreal.policies.vla.model import VLA, tokenize


@dataclasses.dataclass
class Rollout:
    """Episodes of a batch: per step t < T and env i (``alive[t, i]``: still in its first episode)."""

    state: np.ndarray  # (T, N, n) f32
    images: dict[str, np.ndarray]  # camera -> (T, N, H, W, 3) u8
    ids: np.ndarray  # (N, L) the instructions' tokens
    mask: np.ndarray  # (N, L)
    bins: np.ndarray  # (T, N, m) int64, the actions taken
    logp: np.ndarray  # (T, N) log pi(bins | o) when taken
    privileged: np.ndarray  # (T, N, k) the state and the scene's noise-free state (an asymmetric critic's input)
    reward: np.ndarray  # (T, N) sparse success
    done: np.ndarray  # (T, N) bool, the episode ended with this step
    alive: np.ndarray  # (T, N) bool
    stats: dict[str, float]  # the task's episode statistics over the N episodes, and ``episodes``
    sentences: list[str]  # (N,) each episode's instruction, as the policy was told it
    success: np.ndarray  # (N,) each episode's success (NaN where it did not end)


@torch.no_grad()
def rollout(
    env: Any,
    task: str,
    model: VLA,
    tok: Any,
    num_envs: int,
    seed: int,
    sample: bool,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    say: Callable[[str, Mapping[str, np.ndarray]], str] = instruction,
    keep_frames: bool = True,
) -> Rollout:
    """``num_envs`` first episodes of ``model`` in ``env`` (module docstring); sampled bins are
    drawn at ``temperature`` (logits / temperature), and ``logp`` is of that distribution.
    ``say(task, inputs)``: the instruction the policy is told for an episode's task inputs (the
    task's own sentence; a benchmark may tell it another to see whether it listens).
    ``keep_frames=False``: the per-step arrays stay empty (an evaluation needs the statistics only)."""
    from simreal.sim.adapter_core import JaxBatch, to_numpy
    from simreal.sim.episode_stats import episode_means
    from simreal.sim.render import sized_renderer

    model.eval()
    batch = JaxBatch(env, num_envs, seed)
    renderer = sized_renderer(env.mj_model, model.spec.cameras)
    markers, scene, success_now = _batch_functions(env)
    batch.reset()
    info = {k: np.asarray(v) for k, v in batch.state.info.items() if isinstance(v, jax.Array)}
    sentences = [say(task, {k: v[i] for k, v in info.items()}) for i in range(num_envs)]
    ids, mask = tokenize(tok, sentences)
    ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
    alive = np.ones(num_envs, bool)
    rows: dict[str, list[np.ndarray]] = {}
    acc: dict[str, np.ndarray] = {}
    success = np.full(num_envs, np.nan)
    try:
        for _ in range(env.episode_steps):
            s = batch.state
            obs = to_numpy(s.obs)
            state = (obs["state"] if isinstance(obs, dict) else obs).astype(np.float32)
            qpos = np.asarray(s.pipeline_state.qpos)
            images = renderer.render(qpos, alive, None if markers is None else np.asarray(markers(s.info)))
            cams = [images[f"pixels/{c}"] for c in model.spec.cameras]
            logits = model(torch.from_numpy(state), ids_t, mask_t, *(torch.from_numpy(c) for c in cams))
            dist = torch.distributions.Categorical(logits=logits / temperature)
            if sample:
                probs = dist.probs.reshape(-1, model.spec.bins)
                bins = torch.multinomial(probs, 1, generator=generator).view(num_envs, -1)
            else:
                bins = logits.argmax(-1)
            action = torch.gather(model.bin_centres.expand(num_envs, -1, -1), 2, bins[..., None])[..., 0]
            if keep_frames:
                priv = (
                    state
                    if scene is None
                    else np.concatenate([state, np.asarray(scene(s.pipeline_state, s.info), np.float32)], axis=1)
                )
            out = batch.step(np.clip(action.numpy(), -1.0, 1.0))
            done = np.asarray(out.done)
            reward = np.asarray(success_now(batch.state.info["stats"]), np.float32)
            reward = np.where(done, np.asarray(out.episode_metrics["episode/success"]) > 0.5, reward)
            if keep_frames:
                frame = {
                    "state": state,
                    "bins": bins.numpy(),
                    "logp": dist.log_prob(bins).sum(-1).numpy(),
                    "privileged": priv,
                    "reward": reward.astype(np.float32),
                    "done": done,
                    "alive": alive.copy(),
                    **{f"image/{c}": im for c, im in zip(model.spec.cameras, cams)},
                }
                for k, v in frame.items():
                    rows.setdefault(k, []).append(v)
            first = done & alive
            success[first] = np.asarray(out.episode_metrics["episode/success"])[first]
            for k, v in out.episode_metrics.items():
                acc[k] = acc.get(k, np.zeros(num_envs)) + np.where(first, np.asarray(v), 0.0)
            alive &= ~done
            if not alive.any():
                break
    finally:
        renderer.close()
    stats: dict[str, float] = episode_means({k: float(v.sum()) for k, v in acc.items()})
    stats["episodes"] = int((~alive).sum())
    col = {k: np.stack(v) for k, v in rows.items()}
    empty = np.zeros((0, num_envs))
    return Rollout(
        state=col.get("state", empty),
        images={c: col.get(f"image/{c}", empty) for c in model.spec.cameras},
        ids=ids,
        mask=mask,
        bins=col.get("bins", empty),
        logp=col.get("logp", empty),
        privileged=col.get("privileged", empty),
        reward=col.get("reward", empty),
        done=col.get("done", empty),
        alive=col.get("alive", empty),
        stats=stats,
        sentences=sentences,
        success=success,
    )


def _batch_functions(env: Any) -> tuple[Any, Any, Any]:
    """(markers, scene state, success now) of a batch, jitted once per env (cached on it, as
    :class:`~simreal.sim.adapter_core.JaxBatch` caches its step)."""
    fns = env.__dict__.setdefault("_vla_fns", {})
    if not fns:
        fns["markers"] = jax.jit(jax.vmap(env.mocap_pos)) if env.mj_model.nmocap else None
        fns["scene"] = jax.jit(jax.vmap(env.environment_state)) if env.environment_state_terms else None
        fns["success"] = jax.jit(jax.vmap(lambda s: env.final_stats(s, jnp.bool_(False))["success"] > 0.5))
    return fns["markers"], fns["scene"], fns["success"]


def evaluate(env: Any, task: str, model: VLA, tok: Any, episodes: int, seed: int) -> dict[str, float]:
    """The deployed (most likely bin) policy's episode statistics over ``episodes`` episodes."""
    return rollout(env, task, model, tok, episodes, seed, sample=False, keep_frames=False).stats
