"""The shared reward terms (``simreal.rewards.terms``): their math on hand-computed values, jit and
vmap; and every task's ``reward_terms`` against a frozen copy of the formulas
the tasks wrote inline before they used the library, on random states.
"""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from simreal.observations import gravity_b
from simreal.rewards import terms as rw
from simreal.rotations import quat_to_rotmat


# -- the terms' math -----------------------------------------------------------------------------------
def test_kernels_on_hand_computed_values():
    assert float(rw.exp_kernel(jnp.float32(0.0), 0.5)) == 1.0
    assert float(rw.exp_kernel(jnp.float32(0.25), 0.5)) == pytest.approx(math.exp(-1.0), rel=1e-6)  # |e| = sigma
    assert float(rw.exp_kernel(jnp.float32(0.09), 0.3 / 2)) == pytest.approx(math.exp(-4.0), rel=1e-6)
    assert float(rw.tanh_kernel(jnp.float32(0.0), 5.0)) == 1.0
    assert float(rw.tanh_kernel(jnp.float32(0.2), 5.0)) == pytest.approx(1.0 - math.tanh(1.0), rel=1e-6)
    assert float(rw.saturating(jnp.float32(0.0), 16.0)) == 0.0
    assert float(rw.saturating(jnp.float32(32.0), 16.0)) == pytest.approx(1.0 - math.exp(-2.0), rel=1e-6)
    assert float(rw.saturating(jnp.float32(1e4), 1.0)) == 1.0  # bounded
    small = 1e-3  # ~ x / s near zero
    assert float(rw.saturating(jnp.float32(small), 2.0)) == pytest.approx(small / 2.0, rel=1e-3)


def test_magnitudes_and_posture_on_hand_computed_values():
    a, prev = jnp.asarray([0.5, -1.0, 0.0]), jnp.asarray([0.0, 1.0, 0.25])
    assert float(rw.action_rate(a, prev)) == pytest.approx(0.25 + 4.0 + 0.0625)
    assert float(rw.action_magnitude(a)) == pytest.approx(1.25)
    assert float(rw.action_magnitude(a, 0.5)) == pytest.approx(0.0 + 2.25 + 0.25)
    assert float(rw.torques(jnp.asarray([3.0, 4.0]))) == pytest.approx(25.0)
    assert float(rw.joint_vel(jnp.asarray([-2.0]))) == pytest.approx(4.0)
    assert float(rw.lin_vel_z(jnp.asarray([1.0, 2.0, -3.0]))) == pytest.approx(9.0)
    assert float(rw.ang_vel_xy(jnp.asarray([1.0, 2.0, -3.0]))) == pytest.approx(5.0)
    assert float(rw.base_height(jnp.float32(0.7), 0.75)) == pytest.approx(0.0025, rel=1e-5)

    tilt_rad = 0.3  # a body rolled by 0.3 rad: gravity in its frame and R_wb[2, 2] = cos(0.3)
    q = jnp.asarray([math.cos(tilt_rad / 2), math.sin(tilt_rad / 2), 0.0, 0.0])
    g_b = gravity_b({"quat_wxyz": q}, jnp)
    assert float(rw.orientation(g_b)) == pytest.approx(math.sin(tilt_rad) ** 2, rel=1e-5)
    cos_tilt = quat_to_rotmat(q, jnp)[2, 2]
    assert float(rw.tilt(cos_tilt)) == pytest.approx(1.0 - math.cos(tilt_rad), rel=1e-4)
    assert float(rw.tilt(jnp.float32(-1.0))) == 2.0  # inverted
    assert float(rw.upright(jnp.float32(1.0))) == 1.0 and float(rw.upright(jnp.float32(-1.0))) == 0.0
    assert float(rw.alive()) == 1.0 and rw.alive().shape == ()


def test_terms_batch_jit_and_vmap_alike():
    """Each term reduces over the last axis: a (B, n) batch, jit(vmap) and a Python loop agree."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    x, y = jax.random.normal(k1, (5, 3)), jax.random.normal(k2, (5, 3))
    contact = x > 0
    cases = {
        "action_rate": (rw.action_rate, (x, y)),
        "action_magnitude": (rw.action_magnitude, (x,)),
        "torques": (rw.torques, (x,)),
        "joint_vel": (rw.joint_vel, (x,)),
        "lin_vel_z": (rw.lin_vel_z, (x,)),
        "ang_vel_xy": (rw.ang_vel_xy, (x,)),
        "orientation": (rw.orientation, (x,)),
        "swing_height": (lambda z, c: rw.swing_height(z, c, 0.08), (jnp.abs(y), contact)),
        "contact_schedule": (rw.contact_schedule, (contact, y > 0)),
        "exp_kernel": (lambda e: rw.exp_kernel(e, 0.5), (x[:, 0] ** 2,)),
        "saturating": (lambda e: rw.saturating(e, 2.0), (x[:, 0] ** 2,)),
        "tanh_kernel": (lambda d: rw.tanh_kernel(d, 5.0), (jnp.abs(x[:, 0]),)),
    }
    for name, (fn, args) in cases.items():
        batched = np.asarray(fn(*args))
        mapped = np.asarray(jax.jit(jax.vmap(fn))(*args))
        looped = np.stack([np.asarray(fn(*(a[i] for a in args))) for i in range(5)])
        assert batched.shape == (5,), name
        # atol: a kernel 1 - f(x) of order 1 in float32 is exact to its epsilon (1.2e-7), so
        # far off it reads 0 or 1.8e-7 by the order of XLA's operations
        np.testing.assert_allclose(mapped, looped, rtol=1e-6, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(batched, looped, rtol=1e-6, atol=1e-6, err_msg=name)


# -- every task against the formulas it wrote inline before the library (frozen copies) ----------------
# Copied verbatim from simreal/sim/tasks/*.py as they stood before the reward library: a task whose
# reward_terms drifts from these (a sigma squared or not, a sum turned mean) fails here.
def _old_quadrotor(env, phys, action, info):
    e = env.distance(phys, info)
    r_zz = quat_to_rotmat(phys.qpos[3:7], jnp)[2, 2]
    rel_vel = phys.qvel[0:3] - info.get("target_vel_w", jnp.zeros(3))
    a_hover = 2.0 * env.mass * 9.81 / float(env.f_max.sum()) - 1.0
    return {
        "alive": jnp.ones(()),
        "position": jnp.minimum(e, env.cfg.max_distance_m),
        "position_precise": jnp.exp(-jnp.square(e / 0.1)),
        "tilt": 1.0 - r_zz,
        "lin_vel": 1.0 - jnp.exp(-jnp.sum(jnp.square(rel_vel))),
        "ang_vel": 1.0 - jnp.exp(-jnp.sum(jnp.square(phys.qvel[3:6])) / 16.0),
        "action": jnp.mean(jnp.square(action - a_hover)) / 4.0,
        "action_rate": jnp.mean(jnp.square(action - info["last_action"])) / 4.0,
        "termination": env.terminated(phys, info).astype(jnp.float32),  # added after the library
    }


def _old_cartpole(env, phys, action, info):
    return {
        "upright": (jnp.cos(phys.qpos[1]) + 1) / 2,
        "centered": jnp.exp(-jnp.square(phys.qpos[0])),
        "control": jnp.sum(jnp.square(action)),
        "ang_vel": jnp.square(phys.qvel[1]),
    }


def _old_arm_reach(env, phys, action, info):
    d = env.distance(phys, info)
    return {
        "distance": d,
        "reach": jnp.exp(-jnp.square(d / 0.05)),
        "action_rate": jnp.sum(jnp.square(action - info["last_action"])),
        "joint_vel": jnp.sum(jnp.square(env.joint_vel(phys))),
    }


def _old_arm_pick(env, phys, action, info):
    height = env.object_pos(phys)[2] - env.cfg.object_half_size_m
    return {
        "reach": 1.0 - jnp.tanh(5.0 * env.ee_object_dist(phys)),
        "lift": jnp.clip(height / env.cfg.lift_height_m[0], 0.0, 1.0),
        "goal": (1.0 - jnp.tanh(5.0 * env.object_goal_dist(phys, info))) * env.lifted(phys),
        "action_rate": jnp.sum(jnp.square(action - info["last_action"])),
    }


def _old_arm_push(env, phys, action, info):
    d = env.object_goal_dist(phys, info)
    return {
        "reach": 1.0 - jnp.tanh(5.0 * env.ee_object_dist(phys)),
        "goal": 1.0 - jnp.tanh(5.0 * d),
        "distance": d,
        "action_rate": jnp.sum(jnp.square(action - info["last_action"])),
    }


def _old_g1_tracking(env, phys, action, info):
    c, e = env.cfg, env.errors(phys, info)
    return {
        "joint_pos": jnp.exp(-e["joint_pos"] / c.sigma_joint_pos_rad**2),
        "joint_vel": jnp.exp(-e["joint_vel"] / c.sigma_joint_vel_rad_s**2),
        "root_pos": jnp.exp(-e["root_pos"] / c.sigma_root_pos_m**2),
        "root_ori": jnp.exp(-e["root_ori"] / c.sigma_root_ori_rad**2),
        "body_pos": jnp.exp(-e["body_pos"] / c.sigma_body_pos_m**2),
        "action_rate": jnp.sum(jnp.square(action - info["last_action"])),
    }


#: the class that defines ``reward_terms`` -> its formulas before the library
OLD_TERMS = {
    "QuadrotorTask": _old_quadrotor,
    "CartpoleBalance": _old_cartpole,
    "ArmTask": _old_arm_reach,
    "ArmPick": _old_arm_pick,
    "ArmPush": _old_arm_push,
    "G1Tracking": _old_g1_tracking,
}
# (g1-velocity's terms were rewritten to Unitree's recipe after the library: tests/sim/test_g1_velocity.py)

#: terms whose library form regroups float32 arithmetic, exp(-d^2 / s^2) for exp(-(d / s)^2): the
#: same math, a few ulp apart (measured: at most 2.3e-8 absolute); every other term is equal to the bit.
REGROUPED = {("ArmTask", "reach"), ("QuadrotorTask", "position_precise")}

N_STATES = 64


def _random_states(env, rng: jax.Array):
    """N_STATES (phys, action, info) around a reset: every qpos and qvel jittered (free-joint
    quaternions renormalised), sensors (site and body positions) jittered by 5 cm, random actions
    and previous actions in [-1, 1]."""
    k_reset, k_q, k_v, k_s, k_a, k_last = jax.random.split(rng, 6)
    s = jax.jit(env.reset)(k_reset)
    phys, info = s.pipeline_state, s.info
    n = N_STATES
    tile = lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x))  # noqa: E731
    qpos = tile(phys.qpos) + 0.2 * jax.random.normal(k_q, (n,) + phys.qpos.shape)
    m = env.mj_model
    for j in np.flatnonzero(m.jnt_type == mujoco.mjtJoint.mjJNT_FREE):
        a = int(m.jnt_qposadr[j]) + 3
        qpos = qpos.at[:, a : a + 4].set(
            qpos[:, a : a + 4] / jnp.linalg.norm(qpos[:, a : a + 4], axis=-1, keepdims=True)
        )
    phys = phys.replace(
        qpos=qpos,
        qvel=tile(phys.qvel) + jax.random.normal(k_v, (n,) + phys.qvel.shape),
        act=tile(phys.act),
        sensordata=tile(phys.sensordata) + 0.05 * jax.random.normal(k_s, (n,) + phys.sensordata.shape),
    )
    info = jax.tree_util.tree_map(tile, info)
    info["last_action"] = jax.random.uniform(k_last, (n, env.action_size), minval=-1.0, maxval=1.0)
    action = jax.random.uniform(k_a, (n, env.action_size), minval=-1.0, maxval=1.0)
    return phys, action, info


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """Where the data files tasks need are written (fixtures.task_data), once per module."""
    return tmp_path_factory.mktemp("task_data")


def _tasks() -> list[str]:
    from simreal.sim.tasks import TASKS

    return sorted(TASKS)


@pytest.mark.parametrize("task", _tasks())
def test_task_reward_terms_equal_the_formulas_before_the_library(task, request):
    from fixtures.task_data import data_overrides
    from simreal.policies.run_config import make_env, resolve

    overrides = ["backend=native", *data_overrides(task, request.getfixturevalue("data_dir"))]
    if task.startswith("quadrotor-"):
        # the frozen formula is per-rotor thrust's (hover thrust on every channel); ctbr's action
        # penalty, centred on zero rates, came later (test_tasks_smoke checks it)
        overrides.append("env.action_mode=rotor_thrust")
    env = make_env(resolve(task, overrides))
    owner = type(env).reward_terms.__qualname__.split(".")[0]
    if owner not in OLD_TERMS:
        pytest.skip(f"{task}: its reward_terms ({owner}) came after the library; nothing frozen to compare")
    phys, action, info = _random_states(env, jax.random.PRNGKey(7))
    new = jax.jit(jax.vmap(env.reward_terms))(phys, action, info)
    old = jax.jit(jax.vmap(lambda p, a, i: OLD_TERMS[owner](env, p, a, i)))(phys, action, info)

    assert set(new) == set(old) == set(env.reward_scales), (sorted(new), sorted(old))  # logged reward/<name>
    for name in old:
        o, n = np.asarray(old[name]), np.asarray(new[name])
        assert n.shape == o.shape == (N_STATES,) and n.dtype == o.dtype, name
        assert np.all(np.isfinite(o)), name
        assert name in ("alive", "termination") or np.std(o) > 0, f"{name}: the random states do not vary it"
        if (owner, name) in REGROUPED:
            np.testing.assert_allclose(n, o, rtol=1e-5, atol=1e-7, err_msg=f"{task} reward/{name}")
        else:
            np.testing.assert_array_equal(n, o, err_msg=f"{task} reward/{name}")
    total = lambda t: sum(env.scales[k] * t[k] for k in env.scales)  # noqa: E731  (env.step's weighting)
    np.testing.assert_allclose(np.asarray(total(new)), np.asarray(total(old)), rtol=1e-6, atol=1e-7)


def test_the_quadrotor_termination_term_marks_the_crash_step():
    """``termination`` is 1 exactly where the episode ends (on the ground here), 0 in flight."""
    from simreal.policies.run_config import make_env, resolve

    env = make_env(resolve("quadrotor-track", ["backend=native"]))
    phys, action, info = _random_states(env, jax.random.PRNGKey(3))
    flying = jax.vmap(env.reward_terms)(phys, action, info)["termination"]
    grounded = phys.replace(qpos=phys.qpos.at[:, 2].set(0.0))
    crashed = jax.vmap(env.reward_terms)(grounded, action, info)["termination"]
    np.testing.assert_array_equal(np.asarray(crashed), 1.0)
    np.testing.assert_array_equal(np.asarray(flying), np.asarray(jax.vmap(env.terminated)(phys, info), np.float32))
