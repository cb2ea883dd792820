"""stable-baselines3 ``VecEnv`` over a jitted, vmapped ``MjEnv``.

    from stable_baselines3 import PPO
    from simreal.sim.adapter_sb3 import SB3VecEnv
    venv = SB3VecEnv(env, num_envs=16, seed=0)
    PPO("MlpPolicy", venv, n_steps=64).learn(10_000)

SB3's auto-reset semantics, which match the env's own: where an episode ended, ``step_wait``
returns the next episode's first observation, ``infos[i]['terminal_observation']`` the
last observation of the one that ended, ``infos[i]['TimeLimit.truncated']`` whether it
ended on its time limit (SB3 then bootstraps from the terminal observation), and
``infos[i]['episode'] = {'r', 'l'}`` (what ``Monitor`` would add, so SB3 logs returns).

Dict observations (an env with camera images, ``arm-push-pixels``) become a ``Dict`` space with
uint8 image boxes, for SB3's ``MultiInputPolicy`` (a CNN per image); ``privileged_state`` is left
out, since SB3 would feed it to the actor.

All envs live in one process (there is nothing to pickle or dispatch), so ``env_method``
and ``get_attr`` answer from the single underlying ``MjEnv``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import jax
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from simreal.sim.adapter_core import REWARD_TERMS, JaxBatch, to_numpy

#: Observation keys the SB3 adapter leaves out: SB3's policies feed every key to the actor, and
#: the privileged state is for an asymmetric critic only (SB3 has none).
SB3_HIDDEN_KEYS = ("privileged_state",)


def observation_space(spec: Any, hidden: tuple[str, ...] = ()) -> gym.Space:
    """The Gymnasium space of an observation spec (``JaxBatch.obs_spec``): uint8 images are
    Box(0, 255) (SB3 gives them a CNN), other arrays unbounded float32; a dict of them a ``Dict``
    space without the ``hidden`` keys."""
    if isinstance(spec, Mapping):
        return gym.spaces.Dict({k: observation_space(v) for k, v in spec.items() if k not in hidden})
    if spec.dtype == np.uint8:
        return gym.spaces.Box(0, 255, tuple(spec.shape), np.uint8)
    return gym.spaces.Box(-np.inf, np.inf, tuple(spec.shape), np.float32)


def action_space(env: Any) -> gym.spaces.Box:
    """Actions in [-1, 1]."""
    return gym.spaces.Box(-1.0, 1.0, (int(env.action_size),), np.float32)


class SB3VecEnv(VecEnv):
    """``num_envs`` copies of ``env`` as one stable-baselines3 VecEnv (see module docstring)."""

    def __init__(self, env: Any, num_envs: int, seed: int = 0):
        self.batch = JaxBatch(env, num_envs, seed)
        super().__init__(num_envs, observation_space(self.batch.obs_spec, SB3_HIDDEN_KEYS), action_space(env))
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        seeds = [s for s in self._seeds if s is not None]
        if seeds:
            self.batch.seed(int(seeds[0]))
        self._reset_seeds()
        self._reset_options()
        return self._visible(self.batch.reset())

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, np.float32)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        out = self.batch.step(self._actions)
        self._actions = None
        obs = self._visible(out.obs)
        done = np.array(out.done)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if done.any():
            truncated = np.array(out.truncated)
            terminal = self._visible(out.terminal_obs)
            ep = {k.split("/", 1)[1]: np.array(v) for k, v in out.episode_metrics.items()}
            for i in np.flatnonzero(done):
                infos[i] = {
                    "terminal_observation": jax.tree.map(lambda x: x[i], terminal),  # noqa: B023
                    "TimeLimit.truncated": bool(truncated[i]),
                    "episode": {"r": float(ep["return"][i]), "l": int(ep["length"][i])},
                }
                infos[i].update({f"episode/{k}": float(v[i]) for k, v in ep.items() if k not in ("return", "length")})
        infos[0][REWARD_TERMS] = out.reward_term_means()
        return obs, np.array(out.reward, np.float32), done, infos

    def _visible(self, obs: Any) -> Any:
        """Numpy observations as SB3 sees them (dict observations without ``SB3_HIDDEN_KEYS``)."""
        if isinstance(obs, Mapping):
            obs = {k: v for k, v in obs.items() if k not in SB3_HIDDEN_KEYS}
        return to_numpy(obs)

    def close(self) -> None:
        pass

    # -- attribute access: one underlying env serves every index ---------------------------------
    def _count(self, indices) -> int:
        return len(list(self._get_indices(indices)))  # SB3 types it Iterable[int]

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        if attr_name == "render_mode":  # asked by VecEnv.__init__: these envs render through `simreal play`
            return [None] * self._count(indices)
        return [getattr(self.batch.env, attr_name)] * self._count(indices)

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        setattr(self.batch.env, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        r = getattr(self.batch.env, method_name)(*method_args, **method_kwargs)
        return [r] * self._count(indices)

    def env_is_wrapped(self, wrapper_class: type, indices=None) -> list[bool]:
        return [False] * self._count(indices)

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None] * self.num_envs
