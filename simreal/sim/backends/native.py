"""Native backend: MuJoCo's C engine stepping every env of the batch on CPU threads.

Called from inside the jitted, vmapped env step through ``jax.experimental.buffer_callback``
with ``vmap_method="broadcast_all"``: under Brax's vmap the callback receives the *whole batch*
at once and hands it to a ``mujoco.batch.Batch`` (MuJoCo 4's batched simulation: one state row
per env, stepped on a persistent thread pool). One callback per control step replaces thousands
of tiny XLA kernels. On CPU the callback reads XLA's input buffers and writes its results into
XLA's output buffers in place; ``jax.pure_callback`` copied every argument into a new array and
every result back onto the device, about 0.8 ms per call at 1,024 quadrotors on 2 cores against
0.02 ms (docs/benchmarks-log.md, "Env throughput"). Where the step is compiled for another platform (a
GPU's buffers are device memory, which numpy cannot read), it takes ``jax.pure_callback``, which
moves the batch to the host and back: ``jax.lax.platform_dependent`` picks one when the step is
lowered. An inner loop (a flight controller's rate loop,
:class:`~simreal.sim.backends.base.InnerLoop`) runs in numpy inside that callback, on the batch's
live ``qvel``, between calls of ``every`` physics steps.

Per-env domain randomisation: the randomised model fields are *expanded* in the batch (one row
per env of those fields only; the rest of the model is shared, so it stays in cache, where one
``MjModel`` copy per env did not). Only the rows that changed (envs that were reset) are
written, and ``mj_setConst`` recomputes their derived constants: the C engine keeps e.g.
``dof_M0`` of "simple" bodies from compile time, so a new ``body_mass`` would otherwise change
gravity but not inertia (MJX derives everything from ``body_mass`` each step; the two agree only
with this). The callback's result depends only on its inputs: the state comes in from JAX and
goes back out every call.

A diverged env (NaN, Inf or a value over ``mjMAXVAL`` in its position, velocity or acceleration)
comes back with NaN positions, as MJX's would. MuJoCo's C engine resets such an env to the
model's initial state in the middle of the step (``mj_resetData``, with one warning on stderr)
and steps on from there, which without a mark is a silent teleport the env cannot tell from
physics. The reset is seen through ``time``: every env starts the call at ``t0``, larger than the
call's ``nstep`` steps, and only a reset brings it below ``t0``.

Writing this by hand is deliberate: no library exposes MuJoCo's threaded batch as a JAX
primitive.
"""

from __future__ import annotations

import os
import threading
from functools import partial

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax.experimental.buffer_callback import buffer_callback
from mujoco import batch as mjbatch

from simreal.sim.backends.base import InnerLoop, ModelParams, PhysState


class _BatchView:
    """XLA's buffers of one callback as (n, ...) numpy arrays without a copy. ``broadcast_all``
    hands every argument with the same leading batch axes; those of ``first`` (an argument with
    one trailing axis) are flattened to n rows."""

    def __init__(self, first):
        self.batch_shape = np.asarray(first).shape[:-1]
        self.n = int(np.prod(self.batch_shape))

    def __call__(self, buffer) -> np.ndarray:
        a = np.asarray(buffer)
        return a.reshape((self.n,) + a.shape[len(self.batch_shape) :])

    def write(self, buffer, rows: np.ndarray) -> None:
        """Fill an output buffer from (n, ...) rows (cast to its dtype)."""
        out = np.asarray(buffer)
        out[...] = rows.reshape(out.shape)


class _Sims:
    """The envs of one batch size: a ``mujoco.batch.Batch``, its live state and sensor arrays,
    and the randomised model fields ``names`` expanded per env."""

    def __init__(self, model: mujoco.MjModel, n: int, names: tuple[str, ...]):
        self.batch = mjbatch.Batch(model, n, nthread=os.cpu_count() or 1)
        self.qpos, self.qvel, self.act, self.ctrl, self.sensordata, self.time = (
            self.batch.bind(f) for f in ("qpos", "qvel", "act", "ctrl", "sensordata", "time")
        )
        self.fields = {name: self.batch.expand(name) for name in names}

    def set_params(self, params: dict[str, np.ndarray], only: np.ndarray | None = None) -> None:
        """Write the envs' randomised fields where they changed, then their derived constants;
        ``only``: the rows to consider (indices), default all."""
        changed = np.zeros(self.batch.nsim, bool)
        for name, new in params.items():
            field = self.fields[name]
            new = new.reshape(field.shape)
            rows = np.any((new != field).reshape(len(new), -1), axis=1)
            if only is not None:
                rows[np.setdiff1d(np.arange(len(rows)), only)] = False
            field[rows] = new[rows]
            changed |= rows
        if changed.any():
            self.batch.set_const(np.flatnonzero(changed))

    def load(self, rows: np.ndarray | slice, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray) -> None:
        self.qpos[rows], self.qvel[rows], self.act[rows] = qpos, qvel, act


def _host_call(host_fn, result_shapes, *args):
    """``host_fn(ctx, out, *args)`` (it fills the pytree of buffers ``out``) from inside jit, on
    the whole vmapped batch at once: in place on XLA's buffers when lowered for the CPU,
    through copies elsewhere (module docstring). Returns arrays shaped as ``result_shapes``."""

    def in_place(*a):
        return buffer_callback(host_fn, result_shapes, vmap_method="broadcast_all")(*a)

    def copied(*a):
        return jax.pure_callback(
            partial(_into_new_arrays, host_fn, result_shapes), result_shapes, *a, vmap_method="broadcast_all"
        )

    return jax.lax.platform_dependent(*args, cpu=in_place, default=copied)


def _into_new_arrays(host_fn, result_shapes, *args):
    """``host_fn`` on host copies of the arguments, into new arrays of the batch's shape (the
    batch axes are those of the first argument, which has one trailing axis)."""
    batch_shape = np.shape(args[0])[:-1]
    out = jax.tree.map(lambda s: np.empty(batch_shape + s.shape, s.dtype), result_shapes)
    host_fn(None, out, *(np.asarray(a) for a in args))
    return out


class NativeBackend:
    """Physics with ``mujoco.batch`` from inside jit (see module docstring).

    The host side runs one call at a time: under data-parallel training (``shard_map`` over
    devices) XLA calls the callback once per device's shard, from the devices' threads at once,
    and shards of one size share a batch, each call rewriting the randomised rows that differ.
    Several CPU devices in one process therefore do not speed the native backend up; several
    hosts, one process each, do."""

    name = "native"

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self._sims: dict[tuple[int, tuple[str, ...]], _Sims] = {}
        self._lock = threading.Lock()

    # -- host side -------------------------------------------------------------------------
    def _batch(self, params: dict[str, np.ndarray], n: int, only: np.ndarray | None = None) -> _Sims:
        """The ``n`` envs' batch with their randomised fields written (``only`` those rows)."""
        key = (n, tuple(sorted(params)))
        if key not in self._sims:
            self._sims[key] = _Sims(self.model, n, key[1])
        sims = self._sims[key]
        sims.set_params(params, only)
        return sims

    def _host_step(
        self,
        nstep: int,
        names: tuple[str, ...],
        inner_loop: InnerLoop | None,
        ctx,
        out,
        qpos,
        qvel,
        act,
        ctrl,
        *param_values,
    ) -> None:
        """``nstep`` physics steps of every env from the given states, written into ``out``
        (qpos, qvel, act, sensordata)."""
        del ctx
        with self._lock:  # the shards of a data-parallel step call concurrently (class docstring)
            view = _BatchView(qpos)
            qpos, qvel, act, ctrl = view(qpos), view(qvel), view(act), view(ctrl)
            sims = self._batch({n: view(v) for n, v in zip(names, param_values)}, view.n)
            sims.load(slice(None), qpos, qvel, act)
            t0 = 1.0 + nstep * self.model.opt.timestep  # a reset sets time to 0 (module docstring)
            sims.time[...] = t0
            if inner_loop is None:
                sims.ctrl[...] = ctrl
                sims.batch.step(nstep=nstep)
            else:
                for _ in range(nstep // inner_loop.every):
                    sims.ctrl[...] = inner_loop.fn(ctrl, sims.qvel, np)
                    sims.batch.step(nstep=inner_loop.every)
            diverged = sims.time < t0
            # sensors: before the last substep, as mj_step's
            for o, src in zip(out, (sims.qpos, sims.qvel, sims.act, sims.sensordata)):
                view.write(o, src)
            if diverged.any():
                view(out[0])[diverged] = np.nan

    def _host_forward(self, names: tuple[str, ...], ctx, out, qpos, qvel, act, active, *param_values) -> None:
        """Sensors at the given states (zero controls), computed only for ``active`` envs (zeros
        elsewhere), written into ``out``."""
        del ctx
        with self._lock:  # the shards of a data-parallel step call concurrently (class docstring)
            view = _BatchView(qpos)
            qpos, qvel, act = view(qpos), view(qvel), view(act)
            rows = np.flatnonzero(view(active))
            sens = np.zeros((view.n, self.model.nsensordata))
            if rows.size:
                # only the active rows' fields: the others' are a new episode's candidates that a
                # step discards, and writing them made the next step rewrite (and mj_setConst) them
                # all again, twice a step: 20% of a G1 training's time
                sims = self._batch({n: view(v) for n, v in zip(names, param_values)}, view.n, rows)
                sims.load(rows, qpos[rows], qvel[rows], act[rows])
                sims.ctrl[rows] = 0.0
                sims.batch.forward(rows)
                sens[rows] = sims.sensordata[rows]
            view.write(out, sens)

    # -- traced side -----------------------------------------------------------------------
    def init(
        self, model_params: ModelParams, qpos: jax.Array, qvel: jax.Array, act: jax.Array, active: jax.Array
    ) -> PhysState:
        ns = self.model.nsensordata
        if ns == 0:
            sens = jnp.zeros((0,), jnp.float32)
        else:
            names = tuple(sorted(model_params))
            sens = _host_call(
                partial(self._host_forward, names),
                jax.ShapeDtypeStruct((ns,), jnp.float32),
                qpos,
                qvel,
                act,
                active,
                *(model_params[n] for n in names),
            )
        return PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=sens)

    def step(
        self,
        model_params: ModelParams,
        phys: PhysState,
        ctrl: jax.Array,
        nstep: int,
        inner_loop: InnerLoop | None = None,
    ) -> PhysState:
        m = self.model
        names = tuple(sorted(model_params))
        shapes = tuple(jax.ShapeDtypeStruct((n,), jnp.float32) for n in (m.nq, m.nv, m.na, m.nsensordata))
        qpos, qvel, act, sens = _host_call(
            partial(self._host_step, nstep, names, inner_loop),
            shapes,
            phys.qpos,
            phys.qvel,
            phys.act,
            ctrl,
            *(model_params[n] for n in names),
        )
        return PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=sens)
