"""Rigid backend: one free-flying rigid body pushed by site thrusters, integrated inside XLA.

A quadrotor in flight is one rigid body with four rotors. MuJoCo's general pipeline (and the
host callback the native backend needs to reach it from JAX) costs far more than that physics,
and the callback keeps JAX's persistent compilation cache from storing the program. This
backend integrates the same MuJoCo model's equations in plain ``jax.numpy``, per env (vmapped
as every backend), step for step as ``mj_step`` does with the Euler integrator:

Per physics step, from (p, q, v, w, act) (qpos = [p, q_wxyz], qvel = [v world, w body], as a
MuJoCo free joint) and ctrl (clamped to ``actuator_ctrlrange`` where ``ctrllimited``):

    f_i      = gain_i x (act_i, or ctrl_i without dynamics)           force of actuator i
    [F; tau] = sum_i f_i W_i          W_i: body-frame wrench of one unit of actuator i at its
                                      site (gear rotated into the body frame; r_i x F + torque)
    a        = (R(q) F + m g - D_v v) / (m + dt D_v)                  linear, world frame
    dw       = (tau - w x (I w) - D_w w) / (I + dt D_w)               Euler's equations, body frame
    act'     = act + (ctrl - act) (1 - exp(-dt / tau_i))   dyntype filterexact
             = act + dt (ctrl - act) / tau_i               dyntype filter
    v' = v + dt a,  w' = w + dt dw,  p' = p + dt v',  q' = normalise(q (x) exp(dt w' / 2))

where D is the free joint's ``dof_damping`` (a linear drag), integrated implicitly as MuJoCo's
Euler integrator does. The activation is updated from the forces of the step's start
(``actearly`` off), then velocities, then positions (``mj_Euler``); the quaternion step is
``mju_quatIntegrate`` (:func:`simreal.rotations.quat_integrate`). A flight controller's rate loop (an
:class:`~simreal.sim.backends.base.InnerLoop`) runs inside the program between its updates.

Only models this covers are accepted; anything else (a second body, contacts, sensors, a
joint other than one free joint, actuators that are not site thrusters with a fixed gain, the
centre of mass off the body frame's origin, fluid forces, another integrator) is a
:class:`~simreal.errors.ConfigError` naming ``backend`` and what the model has. The floor is
what the MuJoCo model makes it: the shipped quadrotor's has contacts disabled and its tasks end
an episode on ground impact. Randomised model fields (``model_params``): ``body_mass``,
``body_inertia``, ``actuator_gainprm`` and ``actuator_dynprm``, as the MuJoCo backends take them.

Written by hand because no maintained library integrates a MuJoCo model's rigid body inside
XLA other than MJX, whose general pipeline is the cost this backend removes; it is held to the
native engine by ``tests/sim/test_rigid_backend.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.rotations import quat_integrate, quat_to_rotmat
from simreal.sim.backends.base import InnerLoop, ModelParams, PhysState

#: The randomised model fields this backend reads from ``model_params``.
PARAMS = ("body_mass", "body_inertia", "actuator_gainprm", "actuator_dynprm")
_DYN = {int(mujoco.mjtDyn.mjDYN_NONE): "none", int(mujoco.mjtDyn.mjDYN_FILTER): "filter"}
_DYN[int(mujoco.mjtDyn.mjDYN_FILTEREXACT)] = "filterexact"
#: Unrolled below this many physics steps a call (a quadrotor's 5 at 100 Hz control); a loop above.
_UNROLL = 32


def unsupported(model: mujoco.MjModel) -> str | None:
    """Why the model is outside what this backend integrates (module docstring), or None."""
    m = model
    checks = [
        (m.nbody == 2 and m.njnt == 1, f"{m.nbody - 1} bodies and {m.njnt} joints, not one body on one free joint"),
        (m.njnt == 1 and m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE, "a joint that is not free"),
        (m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER, "an integrator other than Euler"),
        (m.nsensordata == 0, f"{m.nsensor} sensors"),
        (m.neq == 0 and m.ntendon == 0, "equality constraints or tendons"),
        (
            bool(m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT)
            or not np.any(m.geom_contype | m.geom_conaffinity),
            "geoms that collide",
        ),
        (m.opt.density == 0 and m.opt.viscosity == 0 and not np.any(m.opt.wind), "fluid forces"),
        (
            not np.any(m.body_ipos[1]) and np.allclose(m.body_iquat[1], [1, 0, 0, 0]),
            "a centre of mass off the body origin",
        ),
        (not np.any(m.dof_armature) and not np.any(m.dof_frictionloss), "armature or friction loss"),
        (bool(np.all(m.actuator_trntype == mujoco.mjtTrn.mjTRN_SITE)), "an actuator not on a site"),
        (
            bool(np.all(np.isin(m.actuator_dyntype, list(_DYN)))),
            "actuator dynamics other than none, filter, filterexact",
        ),
        (bool(np.all(m.actuator_gaintype == mujoco.mjtGain.mjGAIN_FIXED)), "an actuator gain that is not fixed"),
        (bool(np.all(m.actuator_biastype == mujoco.mjtBias.mjBIAS_NONE)), "an actuator bias"),
        (not np.any(m.actuator_actlimited) and not np.any(m.actuator_actearly), "limited or early activations"),
        (not (m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_ACTUATION), "actuation disabled"),
    ]
    return next((why for ok, why in checks if not ok), None)


class RigidBackend:
    """One rigid body with site thrusters in ``jax.numpy`` (see module docstring)."""

    name = "rigid"

    def __init__(self, model: mujoco.MjModel):
        why = unsupported(model)
        if why is not None:
            raise ConfigError(
                "backend",
                f"'rigid' integrates one free rigid body pushed by site thrusters; this model has {why} "
                "(use 'native' or 'mjx')",
            )
        m = model
        self.dt = float(m.opt.timestep)
        gravity_off = bool(m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY)
        self.gravity = np.zeros(3) if gravity_off else np.array(m.opt.gravity, float)
        # one unit of each actuator as a body-frame wrench (6, nu): the gear's force and torque
        # rotated from the site frame, and the force's moment about the body origin (= the COM)
        wrench = np.zeros((6, m.nu))
        for i in range(m.nu):
            site = m.actuator_trnid[i, 0]
            rot = quat_to_rotmat(np.asarray(m.site_quat[site]), np)
            force, torque = rot @ m.actuator_gear[i, :3], rot @ m.actuator_gear[i, 3:]
            wrench[:3, i] = force
            wrench[3:, i] = np.cross(m.site_pos[site], force) + torque
        self.wrench = wrench
        self.dyn = tuple(_DYN[int(t)] for t in m.actuator_dyntype)
        self.has_act = np.array([d != "none" for d in self.dyn])
        # actuator -> its act slot; one without dynamics -> a zero appended after the last slot
        self.act_index = np.where(self.has_act, np.cumsum(self.has_act) - 1, int(self.has_act.sum()))
        self.ctrl_lo = np.where(m.actuator_ctrllimited, m.actuator_ctrlrange[:, 0], -np.inf)
        self.ctrl_hi = np.where(m.actuator_ctrllimited, m.actuator_ctrlrange[:, 1], np.inf)
        self.damping = np.array(m.dof_damping, float)
        self.nominal = {k: np.array(getattr(m, k), float) for k in PARAMS}

    # -- one physics step --------------------------------------------------------------------
    def _coefficients(self, p: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        """Per actuator, fixed over a call: its gain, and the share of (ctrl - act) its activation
        takes in one physics step (1 - exp(-dt / tau) filterexact, dt / tau filter, 0 none)."""
        tau = p["actuator_dynprm"][:, 0]
        share = [
            {"none": jnp.zeros(()), "filter": self.dt / tau[i], "filterexact": 1.0 - jnp.exp(-self.dt / tau[i])}[kind]
            for i, kind in enumerate(self.dyn)
        ]
        return p["actuator_gainprm"][:, 0], jnp.stack(share)

    def _substep(
        self,
        p: dict[str, jax.Array],
        coef: tuple[jax.Array, jax.Array],
        qpos: jax.Array,
        qvel: jax.Array,
        act: jax.Array,
        ctrl: jax.Array,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        dt = self.dt
        gain, share = coef
        ctrl = jnp.clip(ctrl, self.ctrl_lo, self.ctrl_hi)
        acting = jnp.concatenate([act, jnp.zeros(1, act.dtype)])[self.act_index]  # (nu,) activations
        force = gain * jnp.where(self.has_act, acting, ctrl)
        w6 = jnp.asarray(self.wrench, force.dtype) @ force
        quat = qpos[3:7]
        v, w = qvel[:3], qvel[3:]
        mass = p["body_mass"][1]
        inertia = p["body_inertia"][1]
        d_v, d_w = self.damping[:3], self.damping[3:]
        acc = (quat_to_rotmat(quat, jnp) @ w6[:3] + mass * self.gravity - d_v * v) / (mass + dt * d_v)
        dw = (w6[3:] - jnp.cross(w, inertia * w) - d_w * w) / (inertia + dt * d_w)
        v, w = v + dt * acc, w + dt * dw
        pos = qpos[:3] + dt * v
        quat = quat_integrate(quat, w, dt, jnp)
        if act.shape[0]:
            act = (acting + (ctrl - acting) * share)[self.has_act]
        return jnp.concatenate([pos, quat]), jnp.concatenate([v, w]), act

    # -- the Backend protocol ------------------------------------------------------------------
    def _params(self, model_params: ModelParams) -> dict[str, jax.Array]:
        extra = sorted(set(model_params) - set(PARAMS))
        if extra:
            raise ConfigError(
                "backend", f"'rigid' randomises {', '.join(PARAMS)}; the task randomises {', '.join(extra)} too"
            )
        return {k: jnp.asarray(model_params.get(k, self.nominal[k]), jnp.float32) for k in PARAMS}

    def init(
        self, model_params: ModelParams, qpos: jax.Array, qvel: jax.Array, act: jax.Array, active: jax.Array
    ) -> PhysState:
        return PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=jnp.zeros((0,), jnp.float32))

    def step(
        self,
        model_params: ModelParams,
        phys: PhysState,
        ctrl: jax.Array,
        nstep: int,
        inner_loop: InnerLoop | None = None,
    ) -> PhysState:
        p = self._params(model_params)
        coef = self._coefficients(p)
        every = inner_loop.every if inner_loop is not None else nstep
        state = (phys.qpos, phys.qvel, phys.act)

        def update(s: tuple[jax.Array, jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array, jax.Array]:
            u = ctrl if inner_loop is None else inner_loop.fn(ctrl, s[1], jnp)
            for _ in range(every):
                s = self._substep(p, coef, s[0], s[1], s[2], u)
            return s

        if nstep <= _UNROLL:
            for _ in range(nstep // every):
                state = update(state)
        else:
            state = jax.lax.fori_loop(0, nstep // every, lambda _, s: update(s), state)
        qpos, qvel, act = state
        return PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=phys.sensordata)
