"""MJX backend: the whole physics inside the XLA program (the default wherever JAX sees a GPU).

``impl="warp"`` selects MJX's NVIDIA Warp implementation (GPU only; needs the ``warp``
package).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from simreal.errors import ConfigError
from simreal.sim.backends.base import InnerLoop, ModelParams, PhysState


class MjxBackend:
    """Physics with ``mujoco.mjx``; per-env model parameters replace fields of one MJX model."""

    name = "mjx"

    def __init__(self, model: mujoco.MjModel, impl: str = "jax"):
        try:
            self.model = mjx.put_model(model, impl=impl)
        except Exception as e:  # warp missing or no GPU: say which backend works instead
            raise ConfigError("backend", f"MJX impl '{impl}' unavailable here ({e}); use 'mjx' or 'native'") from None
        self.name = "mjx" if impl == "jax" else f"mjx-{impl}"
        self._data0 = mjx.make_data(self.model)
        self._has_sensors = model.nsensordata > 0

    def _model(self, params: ModelParams) -> mjx.Model:
        return self.model.replace(**params) if params else self.model

    def _data(self, phys_qpos: jax.Array, qvel: jax.Array, act: jax.Array) -> mjx.Data:
        return self._data0.replace(qpos=phys_qpos, qvel=qvel, act=act)

    def init(
        self, model_params: ModelParams, qpos: jax.Array, qvel: jax.Array, act: jax.Array, active: jax.Array
    ) -> PhysState:
        d = self._data(qpos, qvel, act)
        if self._has_sensors:
            d = mjx.forward(self._model(model_params), d)
        return PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=d.sensordata)

    def step(
        self,
        model_params: ModelParams,
        phys: PhysState,
        ctrl: jax.Array,
        nstep: int,
        inner_loop: InnerLoop | None = None,
    ) -> PhysState:
        m = self._model(model_params)
        d = self._data(phys.qpos, phys.qvel, phys.act)
        if inner_loop is None:
            d = jax.lax.fori_loop(0, nstep, lambda _, x: mjx.step(m, x), d.replace(ctrl=ctrl))
        else:

            def update(_, x):
                x = x.replace(ctrl=inner_loop.fn(ctrl, x.qvel, jnp))
                return jax.lax.fori_loop(0, inner_loop.every, lambda _, y: mjx.step(m, y), x)

            d = jax.lax.fori_loop(0, nstep // inner_loop.every, update, d)
        return PhysState(qpos=d.qpos, qvel=d.qvel, act=d.act, sensordata=jnp.asarray(d.sensordata))
