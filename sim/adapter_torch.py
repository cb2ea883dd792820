"""Torch views of a jitted, vmapped ``MjEnv``: rsl_rl's ``VecEnv`` and an Isaac Gym style ``VecTask``.

    from rsl_rl.runners import OnPolicyRunner
    venv = RslRlVecEnv(env, num_envs=4096)          # obs groups 'policy' and 'critic'
    OnPolicyRunner(venv, train_cfg, log_dir).learn(1500)

    task = VecTask(env, num_envs=4096)               # obs_buf, rew_buf, reset_buf, progress_buf
    obs_dict = task.reset(); obs_dict, rew, reset, extras = task.step(actions)

Arrays cross from JAX to torch through DLPack (``torch.from_dlpack``): no copy, on CPU or on
the GPU where JAX runs. Actions cross back the same way. rsl_rl gets fresh tensors each
step (zero copy); the ``VecTask`` keeps Isaac Gym's persistent buffers and fills them with
``copy_`` (one device-side copy) because its users hold references to them.

Observation groups: ``policy`` is the task's observation (with its noise); ``critic`` is the
noise-free ``critic_obs_terms`` (default: the same terms), for asymmetric actor-critic.
``extras['time_outs']`` marks time-limit ends (rsl_rl bootstraps through them) and
``extras['log']`` the mean episode statistics of the envs that just finished.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import torch
from tensordict import TensorDict

from simreal.sim.adapter_core import JaxBatch, StepOut

try:  # rsl_rl is optional: RslRlVecEnv subclasses its VecEnv when it is installed
    from rsl_rl.env import VecEnv as _RslVecEnv
except ImportError:  # pragma: no cover
    _RslVecEnv = object


def to_torch(x: jax.Array) -> torch.Tensor:
    """A torch tensor sharing the jax array's memory (DLPack); bools and ints kept."""
    try:
        return torch.from_dlpack(x)
    except (RuntimeError, TypeError, BufferError):  # e.g. a layout DLPack cannot express
        return torch.as_tensor(np.asarray(x))


def to_jax(t: torch.Tensor) -> jax.Array:
    """A jax array from a torch tensor (DLPack where possible)."""
    t = t.detach().contiguous().to(torch.float32)
    try:
        return jax.dlpack.from_dlpack(t)
    except (RuntimeError, TypeError, BufferError):
        return jax.numpy.asarray(t.cpu().numpy())


def _episode_log(out: StepOut) -> dict[str, torch.Tensor]:
    """Mean 'episode/<name>' over the envs that finished this step (empty when none did)."""
    done = np.asarray(out.done)
    n = int(done.sum())
    if n == 0:
        return {}
    return {"/" + k: torch.tensor(float(np.asarray(v).sum()) / n) for k, v in out.episode_metrics.items()
            if k != "episode/done"}


class RslRlVecEnv(_RslVecEnv):
    """rsl_rl (>= 3) ``VecEnv``: ``get_observations()`` returns the current TensorDict and never steps."""

    def __init__(self, env: Any, num_envs: int, seed: int = 0, cfg: dict | None = None):
        self.batch = JaxBatch(env, num_envs, seed)
        self.num_envs = num_envs
        self.num_actions = self.batch.action_size
        self.max_episode_length = self.batch.episode_steps
        self.cfg = cfg or {"task": type(env).__name__}
        self.device = str(to_torch(self.batch.reset()).device)

    def _obs_dict(self) -> TensorDict:
        return TensorDict({"policy": to_torch(self.batch.obs), "critic": to_torch(self.batch.critic_obs)},
                          batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs_dict()

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return to_torch(self.batch.episode_step)

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        # rsl_rl's init_at_random_ep_len spreads the first time-outs; clip below the limit.
        self.batch.set_episode_step(to_jax(value).clip(0, self.max_episode_length - 1))

    def reset(self) -> TensorDict:
        self.batch.reset()
        return self._obs_dict()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        out = self.batch.step(to_jax(actions))
        extras = {"time_outs": to_torch(out.truncated), "log": _episode_log(out)}
        return self._obs_dict(), to_torch(out.reward), to_torch(out.done).to(torch.long), extras

    def close(self) -> None:
        pass


class VecTask:
    """Isaac Gym style task: persistent torch buffers updated by ``step(actions)``."""

    def __init__(self, env: Any, num_envs: int, seed: int = 0):
        self.batch = JaxBatch(env, num_envs, seed)
        self.num_envs = num_envs
        self.num_obs = self.batch.obs_size
        self.num_states = self.batch.critic_obs_size
        self.num_actions = self.batch.action_size
        self.max_episode_length = self.batch.episode_steps
        obs = to_torch(self.batch.reset())
        self.device = obs.device
        self.obs_buf = obs.clone()
        self.states_buf = to_torch(self.batch.critic_obs).clone()
        self.rew_buf = torch.zeros(num_envs, device=self.device)
        self.reset_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.timeout_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.progress_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.extras: dict[str, Any] = {}
        self.obs_dict = {"obs": self.obs_buf, "states": self.states_buf}

    def reset(self) -> dict[str, torch.Tensor]:
        self.obs_buf.copy_(to_torch(self.batch.reset()))
        self.states_buf.copy_(to_torch(self.batch.critic_obs))
        self.progress_buf.zero_()
        self.reset_buf.zero_()
        return self.obs_dict

    def step(self, actions: torch.Tensor):
        """(obs_dict, rew_buf, reset_buf, extras) after one control step of every env."""
        out = self.batch.step(to_jax(actions))
        self.obs_buf.copy_(to_torch(out.obs))
        self.states_buf.copy_(to_torch(out.critic_obs))
        self.rew_buf.copy_(to_torch(out.reward))
        self.reset_buf.copy_(to_torch(out.done))
        self.timeout_buf.copy_(to_torch(out.truncated))
        self.progress_buf.copy_(to_torch(self.batch.episode_step))
        self.extras = {"time_outs": self.timeout_buf, "terminal_obs": to_torch(out.terminal_obs),
                       "episode": _episode_log(out)}
        return self.obs_dict, self.rew_buf, self.reset_buf, self.extras
