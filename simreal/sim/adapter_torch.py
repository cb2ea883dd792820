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
noise-free ``critic_obs_terms`` (default: the same terms), for asymmetric actor-critic. A task
with camera images (dict observations: ``state``, ``privileged_state``, ``pixels/<camera>``)
gives ``policy`` its ``state`` and one group per camera, named by the camera (``front``): for
rsl_rl a float (N, 3, H, W) in [0, 1], the channels-first layout its ``CNNModel`` takes (list
the group in ``obs_groups``, ``{"actor": ["policy", "front"], "critic": ["critic"]}``); for the
``VecTask`` the uint8 (N, H, W, 3) frames, in ``obs_dict`` under the env's own key.
``extras['time_outs']`` marks time-limit ends (rsl_rl bootstraps through them) and
``extras['log']`` the mean episode statistics of the envs that just finished.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import torch
from tensordict import TensorDict

from simreal.sim.adapter_core import REWARD_TERMS, JaxBatch, StepOut

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


PIXELS = "pixels/"


def _state(obs: Any) -> jax.Array:
    """The policy's vector: the observation, or a dict observation's ``state``."""
    return obs["state"] if isinstance(obs, dict) else obs


def _images(obs: Any) -> dict[str, jax.Array]:
    """A dict observation's camera images by key (``pixels/front``); none for a vector."""
    return {k: v for k, v in obs.items() if k.startswith(PIXELS)} if isinstance(obs, dict) else {}


def _episode_log(out: StepOut) -> dict[str, torch.Tensor]:
    """Mean 'episode/<name>' over the envs that finished this step (empty when none did)."""
    done = np.asarray(out.done)
    n = int(done.sum())
    if n == 0:
        return {}
    return {
        "/" + k: torch.tensor(float(np.asarray(v).sum()) / n)
        for k, v in out.episode_metrics.items()
        if k != "episode/done"
    }


class RslRlVecEnv(_RslVecEnv):
    """rsl_rl (>= 3) ``VecEnv``: ``get_observations()`` returns the current TensorDict and never steps."""

    def __init__(self, env: Any, num_envs: int, seed: int = 0, cfg: dict | None = None):
        self.batch = JaxBatch(env, num_envs, seed)
        self.num_envs = num_envs
        self.num_actions = self.batch.action_size
        self.max_episode_length = self.batch.episode_steps
        self.cfg = cfg or {"task": type(env).__name__}
        self.device = str(to_torch(_state(self.batch.reset())).device)

    def _obs_dict(self) -> TensorDict:
        obs = self.batch.obs
        critic = self.batch.critic_obs
        assert critic is not None  # set with the state, which reading obs required
        groups = {"policy": to_torch(_state(obs)), "critic": to_torch(critic)}
        for key, img in _images(obs).items():  # uint8 (N, H, W, 3) -> float (N, 3, H, W) in [0, 1]
            groups[key.removeprefix(PIXELS)] = to_torch(img).permute(0, 3, 1, 2).to(torch.float32) / 255.0
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

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
        extras = {"time_outs": to_torch(out.truncated), "log": _episode_log(out), REWARD_TERMS: out.reward_term_means()}
        return self._obs_dict(), to_torch(out.reward), to_torch(out.done).to(torch.long), extras

    def close(self) -> None:
        pass


class VecTask:
    """Isaac Gym style task: persistent torch buffers updated by ``step(actions)``."""

    def __init__(self, env: Any, num_envs: int, seed: int = 0):
        self.batch = JaxBatch(env, num_envs, seed)
        self.num_envs = num_envs
        size = self.batch.obs_size
        self.num_obs = size["state"][0] if isinstance(size, dict) else size
        self.num_states = self.batch.critic_obs_size
        self.num_actions = self.batch.action_size
        self.max_episode_length = self.batch.episode_steps
        first = self.batch.reset()
        obs = to_torch(_state(first))
        self.device = obs.device
        self.obs_buf = obs.clone()
        #: camera frames, uint8 (N, H, W, 3), by the env's key (``pixels/front``)
        self.image_bufs = {k: to_torch(v).clone() for k, v in _images(first).items()}
        assert self.batch.critic_obs is not None  # set by reset()
        self.states_buf = to_torch(self.batch.critic_obs).clone()
        self.rew_buf = torch.zeros(num_envs, device=self.device)
        self.reset_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.timeout_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.progress_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.extras: dict[str, Any] = {}
        self.obs_dict = {"obs": self.obs_buf, "states": self.states_buf, **self.image_bufs}

    def _fill(self, obs: Any) -> None:
        self.obs_buf.copy_(to_torch(_state(obs)))
        for k, v in _images(obs).items():
            self.image_bufs[k].copy_(to_torch(v))

    def reset(self) -> dict[str, torch.Tensor]:
        self._fill(self.batch.reset())
        assert self.batch.critic_obs is not None  # set by reset()
        self.states_buf.copy_(to_torch(self.batch.critic_obs))
        self.progress_buf.zero_()
        self.reset_buf.zero_()
        return self.obs_dict

    def step(self, actions: torch.Tensor):
        """(obs_dict, rew_buf, reset_buf, extras) after one control step of every env."""
        out = self.batch.step(to_jax(actions))
        self._fill(out.obs)
        self.states_buf.copy_(to_torch(out.critic_obs))
        self.rew_buf.copy_(to_torch(out.reward))
        self.reset_buf.copy_(to_torch(out.done))
        self.timeout_buf.copy_(to_torch(out.truncated))
        self.progress_buf.copy_(to_torch(self.batch.episode_step))
        self.extras = {
            "time_outs": self.timeout_buf,
            "terminal_obs": to_torch(_state(out.terminal_obs)),
            "episode": _episode_log(out),
        }
        return self.obs_dict, self.rew_buf, self.reset_buf, self.extras
