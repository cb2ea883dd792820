"""MJX backend: the whole physics inside the XLA program (the default wherever JAX sees a GPU).

``impl="warp"`` selects MJX's NVIDIA Warp implementation (GPU only; needs the ``warp``
package).

On a CPU, a model whose step factors two matrices (the Newton solver's Hessian and the implicit
integrators' mass matrix) can hang MJX for good: XLA runs the two batched Cholesky kernels side
by side, each of jaxlib 0.10's LAPACK kernels splits its batch into tasks on XLA's intra-op
thread pool (one thread per core) and blocks until they finish, and with every pool thread so
blocked no thread is left to run the tasks. Measured on a 2-core VM: ``g1-velocity`` at 256 envs
hung in its first rollout, every XLA worker in ``ParallelBatchMap`` -> ``BlockingCounter::Wait``
(gdb), with or without ``--xla_cpu_multi_thread_eigen=false`` and with the auto-reset's solve
ordered after the step's; 16 envs (a batch the kernel runs in one piece) stepped. jax 0.11.2
builds that parallel path out of its open-source jaxlib (not on this project's registry); XLA's
own Cholesky instead of LAPACK's avoids it but was 13x slower on such a batch. So the backend
says so on stderr (:func:`warn_cpu_cholesky`) rather than leave a silent hang: the native backend
is the one for CPUs.
"""

from __future__ import annotations

import sys

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
        if impl == "jax" and jax.default_backend() == "cpu":
            warn_cpu_cholesky(model)
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


#: Integrators that factor the mass matrix each step (MJX: ``forward.implicit``).
_FACTORING_INTEGRATORS = (mujoco.mjtIntegrator.mjINT_IMPLICIT, mujoco.mjtIntegrator.mjINT_IMPLICITFAST)


def warn_cpu_cholesky(model: mujoco.MjModel) -> bool:
    """One line on stderr where ``model`` steps two Cholesky factorizations on MJX (Newton solver
    and an implicit integrator), which can hang on a CPU at large batches (module docstring);
    True where it warned."""
    o = model.opt
    if o.solver != mujoco.mjtSolver.mjSOL_NEWTON or o.integrator not in _FACTORING_INTEGRATORS:
        return False
    print(
        "simreal: backend mjx on a CPU with the Newton solver and an implicit integrator can hang "
        "at large env counts (jaxlib 0.10's batched Cholesky starves XLA's thread pool); "
        "backend=native is the CPU backend",
        file=sys.stderr,
    )
    return True
