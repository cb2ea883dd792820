"""Native backend: MuJoCo's C engine stepping every env of the batch on CPU threads.

Called from inside the jitted, vmapped env step through ``jax.pure_callback`` with
``vmap_method="broadcast_all"``: under Brax's vmap the callback receives the *whole batch*
at once and hands it to ``mujoco.rollout``, which spreads the envs over a persistent
thread pool. One callback per control step replaces thousands of tiny XLA kernels; on a CPU
that is an order of magnitude faster than MJX. An inner loop (a flight controller's rate loop,
:class:`~simreal.sim.backends.base.InnerLoop`) runs in numpy inside that callback, between
rollouts of ``every`` physics steps.

Per-env domain randomisation: the batch owns one ``MjModel`` copy per env. A host-side
cache remembers each copy's randomised fields and writes only the rows that changed
(envs that were reset), so randomisation costs nothing on steps without resets. The
callback's result depends only on its inputs; the cache is an optimisation.

Writing this by hand is deliberate: no library exposes MuJoCo's threaded rollout as a
JAX primitive.
"""

from __future__ import annotations

import atexit
import copy
import os
from functools import partial

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import rollout

from simreal.sim.backends.base import InnerLoop, ModelParams, PhysState

_POOL: rollout.Rollout | None = None


def _pool() -> rollout.Rollout:
    """The process-wide rollout thread pool (one thread per CPU core)."""
    global _POOL
    if _POOL is None:
        _POOL = rollout.Rollout(nthread=os.cpu_count() or 1)
        atexit.register(_POOL.close)
    return _POOL


def _flatten_batch(x: np.ndarray, batch_shape: tuple[int, ...]) -> np.ndarray:
    """(*batch_shape, *rest) -> (prod(batch_shape), *rest) as float64 (zero-size safe)."""
    return np.asarray(x, dtype=np.float64).reshape((int(np.prod(batch_shape)),) + x.shape[len(batch_shape):])


class _BatchModels:
    """One MjModel per env plus the last values written to each randomised field.

    After writing, ``mj_setConst`` recomputes each changed model's derived constants: the C
    engine keeps e.g. ``dof_M0`` of "simple" bodies from compile time, so a new
    ``body_mass`` would otherwise change gravity but not inertia (MJX derives everything
    from ``body_mass`` each step; the two agree only with this).
    """

    def __init__(self, model: mujoco.MjModel, batch: int):
        self.models = [copy.deepcopy(model) for _ in range(batch)]
        self.cache: dict[str, np.ndarray] = {}
        self._scratch = mujoco.MjData(model)

    def apply(self, params: dict[str, np.ndarray]) -> list[mujoco.MjModel]:
        changed: set[int] = set()
        for name, new in params.items():
            old = self.cache.get(name)
            if old is None:
                rows = range(len(self.models))
            else:
                rows = np.flatnonzero(np.any((new != old).reshape(len(new), -1), axis=1))
            for i in rows:
                getattr(self.models[i], name)[...] = new[i]
            changed.update(int(i) for i in rows)
            self.cache[name] = new.copy()
        for i in changed:
            mujoco.mj_setConst(self.models[i], self._scratch)
        return self.models


class NativeBackend:
    """Physics with ``mujoco.rollout`` from inside jit (see module docstring)."""

    name = "native"

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self._datas = [mujoco.MjData(model) for _ in range(os.cpu_count() or 1)]
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self._nstate = mujoco.mj_stateSize(model, spec)
        template = np.empty(self._nstate)
        mujoco.mj_getState(model, mujoco.MjData(model), template, spec)
        self._template = template
        self._batches: dict[int, _BatchModels] = {}
        self._shared: list[mujoco.MjModel] = []
        self._out: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        nq, nv, na = model.nq, model.nv, model.na
        self._sl = {"qpos": slice(1, 1 + nq), "qvel": slice(1 + nq, 1 + nq + nv),
                    "act": slice(1 + nq + nv, 1 + nq + nv + na)}

    # -- host side -------------------------------------------------------------------------
    def _models(self, params: dict[str, np.ndarray], batch: int) -> list[mujoco.MjModel]:
        """One model per env: the randomised copies, or the nominal model ``batch`` times."""
        if not params:
            if len(self._shared) != batch:
                self._shared = [self.model] * batch
            return self._shared
        if batch not in self._batches:
            self._batches[batch] = _BatchModels(self.model, batch)
        return self._batches[batch].apply(params)

    def _roll(self, models: list[mujoco.MjModel], state: np.ndarray, ctrl: np.ndarray,
              nstep: int, reuse: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``nstep`` physics steps of every env from ``state`` (b, nstate) under a constant
        ``ctrl`` (b, nu): the last state and sensor values. Calls the rollout with
        ``skip_checks``: its checking path loops in Python over the models (two
        ``mj_stateSize`` calls per env, every step) and tiles the controls anew. ``reuse``: keep
        the output arrays for the next call of this size (the step's whole batch; not the
        varying subsets a reset computes sensors for)."""
        b = state.shape[0]
        key = (b, nstep)
        bufs = self._out.get(key)
        if bufs is None:  # reused: fresh megabytes each step cost page faults in the workers
            bufs = (np.empty((b, nstep, self._nstate)), np.empty((b, nstep, self.model.nsensordata)),
                    np.empty((b, nstep, self.model.nu)))
            if reuse:
                self._out[key] = bufs
        out_state, out_sens, controls = bufs
        controls[...] = ctrl[:, None, :]
        _pool().rollout(models, self._datas, np.ascontiguousarray(state), controls, skip_checks=True, nstep=nstep,
                        state=out_state, sensordata=out_sens)
        return out_state[:, -1], out_sens[:, -1]

    def _state(self, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray) -> np.ndarray:
        state = np.tile(self._template, (qpos.shape[0], 1))
        state[:, self._sl["qpos"]] = qpos
        state[:, self._sl["qvel"]] = qvel
        state[:, self._sl["act"]] = act
        return state

    def _host_step(self, nstep: int, names: tuple[str, ...], inner_loop: InnerLoop | None, qpos, qvel, act, ctrl,
                   *param_values):
        batch_shape = qpos.shape[:-1]
        flat = partial(_flatten_batch, batch_shape=batch_shape)
        qpos, qvel, act, ctrl = flat(qpos), flat(qvel), flat(act), flat(ctrl)
        b = qpos.shape[0]
        models = self._models({n: flat(v) for n, v in zip(names, param_values)}, b)
        state = self._state(qpos, qvel, act)
        if inner_loop is None:
            last, sens = self._roll(models, state, ctrl, nstep)
        else:
            every = inner_loop.every
            for _ in range(nstep // every):
                u = inner_loop.fn(ctrl, state[:, self._sl["qvel"]], np)
                last, sens = self._roll(models, state, np.ascontiguousarray(u, np.float64), every)
                state = last.copy()  # the rollout's output buffer is reused by the next call
        out = [last[:, self._sl["qpos"]], last[:, self._sl["qvel"]], last[:, self._sl["act"]], sens]
        return tuple(o.astype(np.float32).reshape(batch_shape + o.shape[1:]) for o in out)

    def _host_forward(self, names: tuple[str, ...], qpos, qvel, act, active, *param_values):
        """Sensors at the given states, computed only for ``active`` envs (zeros elsewhere)."""
        batch_shape = qpos.shape[:-1]
        flat = partial(_flatten_batch, batch_shape=batch_shape)
        qpos, qvel, act = flat(qpos), flat(qvel), flat(act)
        rows = np.flatnonzero(np.asarray(active).reshape(-1))
        out = np.zeros((qpos.shape[0], self.model.nsensordata), np.float32)
        if rows.size:
            models = self._models({n: flat(v) for n, v in zip(names, param_values)}, qpos.shape[0])
            _, out[rows] = self._roll([models[i] for i in rows], self._state(qpos[rows], qvel[rows], act[rows]),
                                      np.zeros((rows.size, self.model.nu)), 1, reuse=False)
        return out.reshape(batch_shape + (self.model.nsensordata,))

    # -- traced side -----------------------------------------------------------------------
    def init(self, model_params: ModelParams, qpos: jax.Array, qvel: jax.Array, act: jax.Array,
             active: jax.Array) -> PhysState:
        ns = self.model.nsensordata
        if ns == 0:
            sens = jnp.zeros((0,), jnp.float32)
        else:
            names = tuple(sorted(model_params))
            sens = jax.pure_callback(
                partial(self._host_forward, names), jax.ShapeDtypeStruct((ns,), jnp.float32),
                qpos, qvel, act, active, *(model_params[n] for n in names), vmap_method="broadcast_all")
        return PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=sens)

    def step(self, model_params: ModelParams, phys: PhysState, ctrl: jax.Array, nstep: int,
             inner_loop: InnerLoop | None = None) -> PhysState:
        m = self.model
        names = tuple(sorted(model_params))
        shapes = tuple(jax.ShapeDtypeStruct((n,), jnp.float32) for n in (m.nq, m.nv, m.na, m.nsensordata))
        qpos, qvel, act, sens = jax.pure_callback(
            partial(self._host_step, nstep, names, inner_loop), shapes, phys.qpos, phys.qvel, phys.act, ctrl,
            *(model_params[n] for n in names), vmap_method="broadcast_all")
        return PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=sens)
