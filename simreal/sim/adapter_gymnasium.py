"""Gymnasium views of an ``MjEnv``: one env (``GymEnv``) or a batch (``GymVectorEnv``).

    env = GymEnv(task_env, seed=0)
    obs, info = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

    venv = GymVectorEnv(task_env, num_envs=16)   # metadata['autoreset_mode'] == SAME_STEP

Both run the task's jitted, vmapped step (a batch of one for ``GymEnv``), so they are the
very env the JAX trainers see. The ``MjEnv`` resets itself inside ``step``; ``GymEnv``
hides that: after an episode ends it returns the terminal observation and keeps the next
episode ready for ``reset()``. ``GymVectorEnv`` uses Gymnasium's same-step autoreset mode:
``infos['final_obs']`` / ``infos['_final_obs']`` carry the ended episodes' last observations.
Dict observations (camera images beside the state) give a ``Dict`` space.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from simreal.sim.adapter_core import JaxBatch, to_numpy
from simreal.sim.adapter_sb3 import action_space, observation_space


class GymEnv(gym.Env):
    """One ``MjEnv`` episode at a time, Gymnasium's ``Env`` API."""

    metadata = {"render_modes": []}

    def __init__(self, env: Any, seed: int = 0):
        self.batch = JaxBatch(env, 1, seed)
        self.observation_space, self.action_space = observation_space(self.batch.obs_spec), action_space(env)
        self._pending_reset = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.batch.seed(seed)
        if self._pending_reset and seed is None:
            obs = self.batch.obs  # the env already started the next episode inside step()
        else:
            obs = self.batch.reset()
        self._pending_reset = False
        return to_numpy(obs, 0), {}

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._pending_reset:
            raise RuntimeError("the episode ended: call reset()")
        out = self.batch.step(np.asarray(action, np.float32)[None])
        terminated, truncated = bool(out.terminated[0]), bool(out.truncated[0])
        info: dict[str, Any] = {}
        if terminated or truncated:
            self._pending_reset = True
            info = {k: float(v[0]) for k, v in out.episode_metrics.items()}
            obs = out.terminal_obs
        else:
            obs = out.obs
        return to_numpy(obs, 0), float(out.reward[0]), terminated, truncated, info


class GymVectorEnv(VectorEnv):
    """``num_envs`` copies of an ``MjEnv``, Gymnasium's ``VectorEnv`` API (same-step autoreset)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env: Any, num_envs: int, seed: int = 0):
        self.batch = JaxBatch(env, num_envs, seed)
        self.num_envs = num_envs
        self.single_observation_space = observation_space(self.batch.obs_spec)
        self.single_action_space = action_space(env)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        if seed is not None:
            seeds: Any = seed  # an int (or numpy integer), or a list of them: np.isscalar tells
            first: Any = seeds if np.isscalar(seeds) else seeds[0]
            self.batch.seed(int(first))
        return to_numpy(self.batch.reset()), {}

    def step(self, actions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        out = self.batch.step(np.asarray(actions, np.float32))
        done = np.array(out.done)
        infos: dict[str, Any] = {}
        if done.any():
            infos = {"final_obs": to_numpy(out.terminal_obs), "_final_obs": done}
            infos.update({k: np.array(v) for k, v in out.episode_metrics.items()})
        return (
            to_numpy(out.obs),
            np.array(out.reward, np.float32),
            np.array(out.terminated),
            np.array(out.truncated),
            infos,
        )
