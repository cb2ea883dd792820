"""The batch every trainer adapter drives: one jitted, vmapped ``MjEnv`` and its current state.

    batch = JaxBatch(env, num_envs=16, seed=0)
    obs = batch.reset()                         # (N, obs) jax array
    out = batch.step(actions)                   # StepOut: obs, reward, terminated, truncated, ...

Auto-reset is the env's own (inside ``step``, with a fresh key): where an episode ended,
``out.obs`` is already the next episode's first observation and ``out.terminal_obs`` the
last one of the episode that ended (what SB3's ``terminal_observation`` and Gymnasium's
``final_obs`` carry). ``terminated`` is a failure (no bootstrap); ``truncated`` a time
limit (bootstrap through it).

Arrays stay jax arrays here; the adapters convert at their edge (numpy for SB3/Gymnasium,
torch through DLPack for rsl_rl and Isaac Gym style VecTasks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from simreal.observations import build_observation

#: The trainer-facing adapters' key for each reward term's mean over the batch this step
#: ('reward/<name>' -> float; SB3: in ``infos[0]``, rsl_rl: in ``extras``), which the sb3 and
#: rsl_rl trainers log in metrics.csv as the brax trainer does.
REWARD_TERMS = "reward_terms"


@dataclasses.dataclass(frozen=True)
class StepOut:
    """One batched step, all (N, ...) jax arrays."""

    obs: jax.Array  # or a dict of (N, ...) arrays for an env with dict observations (images)
    reward: jax.Array
    terminated: jax.Array  # bool (N,): the episode failed
    truncated: jax.Array  # bool (N,): the episode hit its time limit
    terminal_obs: jax.Array  # (N, obs): last observation of the ended episode (= obs where not done)
    critic_obs: jax.Array  # (N, critic): noise-free privileged observation (asymmetric actor-critic)
    episode_metrics: dict[str, jax.Array]  # 'episode/<name>' (N,), nonzero only where done
    reward_terms: dict[str, jax.Array]  # 'reward/<name>' (N,): each reward term of this step, as brax logs it

    @property
    def done(self) -> jax.Array:
        return self.terminated | self.truncated

    def reward_term_means(self) -> dict[str, float]:
        """Each reward term's mean over the batch ('reward/<name>' -> float): what the adapters
        report under :data:`REWARD_TERMS`."""
        return {k: float(v.mean()) for k, v in jax.device_get(self.reward_terms).items()}


def _with_critic(env: Any, state: Any) -> tuple[Any, jax.Array]:
    """(state, critic observation): the env's ``critic_obs_terms`` (default: its ``obs_terms``)
    without observation noise."""
    terms = getattr(env, "critic_obs_terms", None) or env.obs_terms
    critic = build_observation(terms, env.observed_state(state.pipeline_state, state.info), jnp)
    # Strong dtypes: a weakly typed leaf from reset would make step compile twice.
    return jax.tree.map(lambda x: x.astype(x.dtype), (state, critic))


def to_numpy(obs: Any, index: int | None = None) -> Any:
    """Observations as numpy arrays (a dict stays a dict), optionally one env's row."""
    return jax.tree.map(lambda x: np.array(x if index is None else x[index]), obs)


class JaxBatch:
    """``num_envs`` copies of ``env``, stepped together by one jitted function."""

    def __init__(self, env: Any, num_envs: int, seed: int = 0):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        env.record_terminal_obs = True
        self.env = env
        self.num_envs = int(num_envs)
        size = env.observation_size
        #: int, or {key: shape} for an env with dict observations (images beside the state)
        self.obs_size = {k: tuple(v) for k, v in size.items()} if isinstance(size, Mapping) else int(size)
        self.action_size = int(env.action_size)
        self.episode_steps = int(env.episode_steps)
        self._key = jax.random.PRNGKey(seed)
        # Jitted functions are cached on the env, so adapters over one env share compilations.
        fns = env.__dict__.setdefault("_adapter_fns", {})
        if not fns:
            fns["reset"] = jax.jit(jax.vmap(lambda k: _with_critic(env, env.reset(k))))
            fns["step"] = jax.jit(jax.vmap(lambda s, a: _with_critic(env, env.step(s, a))))
        self._reset, self._step = fns["reset"], fns["step"]
        shapes = jax.eval_shape(self._reset, jax.random.split(self._key, 1))
        self.critic_obs_size = int(shapes[1].shape[-1])
        #: per-env shape and dtype of the observation (a dict of them for dict observations)
        self.obs_spec = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), shapes[0].obs)
        self.state: Any = None  # the batch's brax State, once reset() made one
        self.critic_obs: jax.Array | None = None
        # Every input committed to one device: arrays from DLPack (torch) are committed, and a
        # mix of committed and uncommitted inputs would make XLA compile the step again.
        self._device = jax.devices()[0]

    def seed(self, seed: int) -> None:
        """Seed the next ``reset``."""
        self._key = jax.random.PRNGKey(seed)

    def reset(self) -> jax.Array:
        """Fresh episodes in every env; the (N, obs) observations."""
        self._key, k = jax.random.split(self._key)
        keys = jax.device_put(jax.random.split(k, self.num_envs), self._device)
        self.state, self.critic_obs = self._reset(keys)
        return self.state.obs

    @property
    def obs(self) -> jax.Array:
        """The current (N, obs) observations, without stepping or resetting."""
        self._require_state()
        return self.state.obs

    def step(self, actions: jax.Array | np.ndarray) -> StepOut:
        """Advance every env one control step with (N, act) actions in [-1, 1]."""
        self._require_state()
        actions = jax.device_put(
            jnp.asarray(actions, jnp.float32).reshape(self.num_envs, self.action_size), self._device
        )
        s, self.critic_obs = self._step(self.state, actions)
        self.state = s
        done = s.done > 0.5
        truncated = done & (s.info["truncation"] > 0.5)
        return StepOut(
            obs=s.obs,
            reward=s.reward,
            terminated=done & ~truncated,
            truncated=truncated,
            terminal_obs=s.info["terminal_obs"],
            critic_obs=self.critic_obs,
            episode_metrics=s.info["episode_metrics"],
            reward_terms={k: v for k, v in s.metrics.items() if k.startswith("reward/")},
        )

    @property
    def episode_step(self) -> jax.Array:
        """(N,) int32 control steps into the current episode."""
        self._require_state()
        return self.state.info["step"]

    def set_episode_step(self, steps: Any) -> None:
        """Overwrite the episode step counters (rsl_rl's random initial episode lengths)."""
        self._require_state()
        info = dict(self.state.info)
        info["step"] = jax.device_put(jnp.asarray(steps, jnp.int32).reshape(self.num_envs), self._device)
        self.state = self.state.replace(info=info)

    def _require_state(self) -> None:
        if self.state is None:
            raise RuntimeError("call reset() before stepping or reading observations")
