"""The physics backend interface: one task definition, several physics engines.

A backend advances batched MuJoCo physics from inside a jitted, vmapped env function. Its
state is a :class:`PhysState` pytree holding what every engine can report the same way::

    qpos (nq,)  qvel (nv,)  act (na,)  sensordata (nsensordata,)

(per env; the env functions are written for one env and vmapped, Brax style).

Domain randomisation reaches the engine as ``model_params``: a dict from ``MjModel``
field names (``body_mass``, ``actuator_gainprm``, ...) to per-env values of the *whole*
field. Every backend applies them the same way, so a randomised episode is the same
episode on either engine.

Sensor data follows MuJoCo's convention on both engines: after a step it was computed at
the start of the last physics substep (``mj_step`` evaluates sensors before integrating).

An :class:`InnerLoop` is a feedback controller below the policy that runs at the physics rate,
as a flight controller's body-rate loop does: the policy's command is held over the control
period, and every ``every`` physics steps the loop turns (command, qvel) into actuator
controls. Each backend runs it where its physics runs: MJX inside the XLA program, the native
engine on the host between ``mujoco.rollout`` calls of one callback (one JAX round trip per
control period instead of one per loop update).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import jax
from flax import struct

ModelParams = dict[str, jax.Array]


@struct.dataclass
class PhysState:
    """Per-env physics state shared by all backends."""

    qpos: jax.Array
    qvel: jax.Array
    act: jax.Array
    sensordata: jax.Array


@dataclasses.dataclass(frozen=True, eq=False)
class InnerLoop:
    """A controller below the policy at the physics rate (see module docstring).

    Attributes:
      fn: ``fn(command, qvel, xp) -> ctrl``, array-namespace agnostic (``xp`` numpy or
        jax.numpy) and broadcasting over leading batch axes: ``command`` (..., k) is the
        policy's held command, ``qvel`` (..., nv) the state at this physics step, ``ctrl``
        (..., nu) the actuator controls for the next ``every`` physics steps.
      every: physics steps per loop update.
    """

    fn: Callable[[Any, Any, Any], Any]
    every: int = 1


class Backend(Protocol):
    """Advances physics; both methods are called per env inside jit/vmap."""

    name: str

    def init(
        self, model_params: ModelParams, qpos: jax.Array, qvel: jax.Array, act: jax.Array, active: jax.Array
    ) -> PhysState:
        """Physics state at (qpos, qvel, act), sensors evaluated.

        ``active`` (bool) marks envs whose result will be used; a backend may skip the
        others (the native engine does: an auto-reset then costs only the envs that reset).
        """
        ...

    def step(
        self,
        model_params: ModelParams,
        phys: PhysState,
        ctrl: jax.Array,
        nstep: int,
        inner_loop: InnerLoop | None = None,
    ) -> PhysState:
        """Advance ``nstep`` physics steps holding ``ctrl`` constant; with ``inner_loop``,
        ``ctrl`` is its command and the controls are ``inner_loop.fn(ctrl, qvel, xp)``, updated
        every ``inner_loop.every`` physics steps (``nstep`` a multiple of it)."""
        ...


def default_backend_name() -> str:
    """'mjx' where JAX sees a GPU, else 'native' (MuJoCo's C engine on CPU threads)."""
    return "mjx" if any(d.platform == "gpu" for d in jax.devices()) else "native"


BACKENDS = ("native", "mjx", "mjx-warp", "rigid")


def make_backend(name: str, model: Any) -> Backend:
    """Backend by name ('auto', 'native', 'mjx', 'mjx-warp' on NVIDIA GPUs, or 'rigid': one rigid
    body with site thrusters in XLA, :mod:`simreal.sim.backends.rigid`)."""
    from simreal.errors import UnknownNameError

    if name == "auto":
        name = default_backend_name()
    if name == "native":
        from simreal.sim.backends.native import NativeBackend

        return NativeBackend(model)
    if name == "rigid":
        from simreal.sim.backends.rigid import RigidBackend

        return RigidBackend(model)
    if name in ("mjx", "mjx-warp"):
        from simreal.sim.backends.mjx_backend import MjxBackend

        return MjxBackend(model, impl="warp" if name == "mjx-warp" else "jax")
    raise UnknownNameError("backend", name, ("auto",) + BACKENDS)
