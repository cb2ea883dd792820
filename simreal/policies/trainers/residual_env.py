"""The residual env: a frozen base policy inside the env step, the action a correction to it.

    base = onnx_base(OnnxPolicy(load_bundle("runs/arm-push/bc10/bundle")))   # jit-safe
    renv = ResidualEnv(env, base, scale=0.1)
    state = renv.reset(rng)          # state.obs = [o, a_base(o)]                       (n + m,)
    state = renv.step(state, r)      # r in [-1, 1]^m; the task's env acts with
                                     # a = clip(a_base(o) + scale * r, -1, 1)

As ResiP has it (Ankile et al. 2024, "From Imitation to Refinement: Residual RL for Precise
Assembly"): the residual policy observes the observation and the base's action on it, and its
output, scaled by ``scale``, is added to the base's action. ``o`` is the task env's own
observation (its noise included), the one the base would see on the robot; ``a_base`` is kept
in ``info["base_action"]`` until the step that applies it. Everything else (rewards, resets,
statistics) is the task env's, and ``renv.env`` is that env.

The base runs in ONNX Runtime, called from inside the jitted step with ``jax.pure_callback``
on the whole batch at once (as the ``native`` backend calls MuJoCo). Chosen over rebuilding
each kind of base in ``jax.numpy``: the graph trained over is then the bundle's own graph on
the runtime the robot runs, whatever made it (a BC run's torch MLP with its two
normalisations, a Brax policy, a hand-written controller graph), with no converter per kind
to keep in step with each exporter. The cost is one host round trip per control step: next to
the ``native`` backend's own callback on CPU it is small (``bench/bench_residual.py``: a
residual arm-reach run took as many env steps in 120 s as PPO from scratch, 434k); on an
accelerator (``mjx``) it breaks the one-XLA-program rollout with a device-host sync a step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from brax.envs.base import State, Wrapper

#: ``info`` key holding the base's action on the current observation.
BASE_ACTION = "base_action"

Base = Callable[[jax.Array], jax.Array]


def compose(a_base: jax.Array, r: jax.Array, scale: float | np.ndarray | jax.Array) -> jax.Array:
    """The action the task env applies: ``clip(a_base + scale * r, -1, 1)``, all (..., m); ``scale``
    a number or one reach per action dimension (m,)."""
    return jnp.clip(a_base + scale * r, -1.0, 1.0)


def onnx_base(policy: Any) -> Base:
    """A bundle's policy as a jit- and vmap-safe JAX function: raw observation (..., n) float32 ->
    its action (..., m) float32, computed by ``policy`` (a :class:`simreal.bundle.OnnxPolicy`) on
    the host (module docstring). Under ``vmap`` the callback gets the whole batch."""
    m = int(policy.bundle.action.size)

    def host(obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, np.float32)
        return np.asarray(policy(x.reshape(-1, x.shape[-1])), np.float32).reshape(x.shape[:-1] + (m,))

    def base(obs: jax.Array) -> jax.Array:
        out = jax.ShapeDtypeStruct(obs.shape[:-1] + (m,), jnp.float32)
        return jax.pure_callback(host, out, obs.astype(jnp.float32), vmap_method="broadcast_all")

    return base


class ResidualEnv(Wrapper):
    """A task env whose action is a residual ``r`` on a frozen base (module docstring).

    Args:
      env: the task's env (flat observations).
      base: raw observation (..., n) -> base action (..., m) in [-1, 1], jit- and vmap-safe.
      scale: the residual's reach in normalised action units, a number or one per action (m,).
    """

    def __init__(self, env: Any, base: Base, scale: float | np.ndarray):
        super().__init__(env)
        self.base, self.scale = base, np.asarray(scale, np.float32)

    @property
    def observation_size(self) -> int:
        return int(self.env.observation_size) + int(self.env.action_size)

    def reset(self, rng: jax.Array) -> State:
        return self._observe(self.env.reset(rng))

    def step(self, state: State, action: jax.Array) -> State:
        # the task env reads its state's info and physics, never its obs: [o, a_base] passes through
        return self._observe(self.env.step(state, compose(state.info[BASE_ACTION], action, self.scale)))

    def _observe(self, state: State) -> State:
        """``state`` of the task env with the base's action on its observation appended."""
        a_base = self.base(state.obs)
        return state.replace(
            obs=jnp.concatenate([state.obs, a_base], axis=-1), info={**state.info, BASE_ACTION: a_base}
        )
