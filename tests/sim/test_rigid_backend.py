"""The XLA rigid-body backend integrates what ``mj_step`` integrates (simreal/sim/backends/rigid.py)."""

import copy

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from simreal.errors import ConfigError
from simreal.robot_spec import load_robot_spec
from simreal.sim.backends.base import PhysState
from simreal.sim.backends.rigid import RigidBackend
from simreal.sim.robots import build_mjspec, build_model

N, STEPS, SUB = 16, 100, 5  # 1 s of 100 Hz control, 5 physics steps each


def randomised(m: mujoco.MjModel, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every field the quadrotor tasks randomise, per env, wider than the tasks do."""
    p = {k: np.repeat(np.array(getattr(m, k))[None], N, 0) for k in ("body_mass", "body_inertia")}
    p["body_mass"][:, 1] *= rng.uniform(0.8, 1.2, N)
    p["body_inertia"][:, 1] *= rng.uniform(0.7, 1.3, (N, 3))
    p["actuator_gainprm"] = np.repeat(np.array(m.actuator_gainprm)[None], N, 0)
    p["actuator_gainprm"][:, :, 0] *= rng.uniform(0.8, 1.2, (N, m.nu))
    p["actuator_dynprm"] = np.repeat(np.array(m.actuator_dynprm)[None], N, 0)
    p["actuator_dynprm"][:, :, 0] = rng.uniform(0.015, 0.06, (N, m.nu))
    return p


def mujoco_rollout(m, params, qpos, qvel, act, ctrls) -> np.ndarray:
    out = np.zeros((STEPS, N, m.nq + m.nv))
    for e in range(N):
        me = copy.copy(m)
        for k, v in params.items():
            getattr(me, k)[:] = v[e]
        d = mujoco.MjData(me)
        mujoco.mj_setConst(me, d)
        d.qpos[:], d.qvel[:], d.act[:] = qpos[e], qvel[e], act[e]
        for k in range(STEPS):
            d.ctrl[:] = ctrls[k, e]
            mujoco.mj_step(me, d, SUB)
            out[k, e] = np.r_[d.qpos, d.qvel]
    return out


def rigid_rollout(m, params, qpos, qvel, act, ctrls) -> np.ndarray:
    b = RigidBackend(m)

    def one(p, qp, qv, a, cs):
        def control_step(ph, c):
            ph = b.step(p, ph, c, SUB)
            return ph, jnp.concatenate([ph.qpos, ph.qvel])

        return jax.lax.scan(control_step, PhysState(qp, qv, a, jnp.zeros(0)), cs)[1]

    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    run = jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, 1), out_axes=1))
    return np.asarray(run(jax.tree.map(f32, params), f32(qpos), f32(qvel), f32(act), f32(ctrls)))


def start(m, rng):
    qpos = np.zeros((N, 7))
    qpos[:, :3] = rng.uniform(-0.5, 0.5, (N, 3)) + [0, 0, 1]
    q = rng.normal(size=(N, 4))
    qpos[:, 3:] = q / np.linalg.norm(q, axis=1, keepdims=True)
    qvel = rng.uniform(-1, 1, (N, 6)) * [1, 1, 1, 3, 3, 3]
    act = rng.uniform(0, 0.15, (N, m.na))
    # thrusts around hover, past both ends of the control range (clamped), changing every step
    ctrls = rng.uniform(-0.03, 0.18, (STEPS, N, m.nu))
    return qpos, qvel, act, ctrls


def instant_rotors() -> mujoco.MjModel:
    """The Crazyflie with rotors that act at once (dyntype none: no activation state, na = 0)."""
    s = build_mjspec(load_robot_spec("crazyflie2"))
    for a in s.actuators:
        a.dyntype = mujoco.mjtDyn.mjDYN_NONE
    return s.compile()


@pytest.mark.parametrize("variant", ["crazyflie", "drag and first-order lag", "rotors without lag"])
def test_one_second_follows_mj_step(variant):
    """Per env randomised mass, inertia, thrust gain and motor lag; random thrusts: 500 physics
    steps that spin and tumble the body (metres travelled) stay within float32's drift of
    MuJoCo's float64 trajectory (measured: 8e-6 m, 1.4e-4 rad/s)."""
    m = instant_rotors() if variant == "rotors without lag" else build_model(load_robot_spec("crazyflie2"))
    if variant == "drag and first-order lag":  # linear and rotational drag (integrated implicitly), dyntype filter
        m.dof_damping[:] = [0.02, 0.02, 0.03, 2e-5, 2e-5, 3e-5]
        m.actuator_dyntype[:] = mujoco.mjtDyn.mjDYN_FILTER
    assert (m.na == 0) == (variant == "rotors without lag")
    rng = np.random.default_rng(["crazyflie", "drag and first-order lag", "rotors without lag"].index(variant))
    params = randomised(m, rng)
    qpos, qvel, act, ctrls = start(m, rng)
    want = mujoco_rollout(m, params, qpos, qvel, act, ctrls)
    got = rigid_rollout(m, params, qpos, qvel, act, ctrls)
    assert np.abs(want[-1, :, :3] - qpos[:, :3]).max() > 1.0  # it went somewhere
    err = np.abs(got - want)
    assert err[..., :3].max() < 2e-4, err[..., :3].max()  # position [m]
    assert err[..., 3:7].max() < 2e-4, err[..., 3:7].max()  # quaternion
    assert err[..., 7:10].max() < 1e-3, err[..., 7:10].max()  # linear velocity [m/s]
    assert err[..., 10:].max() < 5e-3, err[..., 10:].max()  # angular velocity [rad/s]


def test_a_model_it_cannot_integrate_is_one_line_naming_the_backend():
    with pytest.raises(ConfigError, match="backend.*'rigid'.*bodies and .* joints.*use 'native' or 'mjx'"):
        RigidBackend(build_model(load_robot_spec("so100")))
    m = build_model(load_robot_spec("crazyflie2"))
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    with pytest.raises(ConfigError, match="an integrator other than Euler"):
        RigidBackend(m)


def test_randomising_a_field_it_does_not_read_is_refused():
    m = build_model(load_robot_spec("crazyflie2"))
    b = RigidBackend(m)
    phys = PhysState(jnp.zeros(7).at[3].set(1.0), jnp.zeros(6), jnp.zeros(4), jnp.zeros(0))
    with pytest.raises(ConfigError, match="randomises body_mass.*geom_friction"):
        b.step({"geom_friction": jnp.asarray(m.geom_friction)}, phys, jnp.zeros(4), 5)
