"""Physics sanity of the Crazyflie model: hover thrust holds altitude, free fall matches g,
the rotor model matches the mixer, and the rate loop damps body rates."""

import mujoco
import numpy as np
import pytest

from simreal import quadrotor_control as qc
from simreal.quadrotor_control import ROTOR_SPIN, physical, rotor_positions
from simreal.robot_spec import load_robot_spec
from simreal.sim.robots import build_model

G = 9.81


@pytest.fixture(scope="module")
def spec():
    return load_robot_spec("crazyflie2")


@pytest.fixture(scope="module")
def model(spec):
    return build_model(spec)


def test_real_crazyflie_numbers(spec, model):
    assert 0.027 <= model.body_mass[1] <= 0.034
    assert physical(spec, "arm_length_m") == pytest.approx(0.046)
    assert np.linalg.norm(rotor_positions(spec)[0, :2]) == pytest.approx(0.046)
    thrust_to_weight = sum(a.effort_limit for a in spec.actuators) / (model.body_mass[1] * G)
    assert 1.5 < thrust_to_weight < 2.5


def test_centre_of_mass_on_the_rotor_plane(model):
    """Regression: an unset inertial frame put the CoM 1 m above the rotors under MuJoCo 4."""
    d = mujoco.MjData(model)
    d.qpos[:3] = [0.3, -0.2, 1.0]
    mujoco.mj_forward(model, d)
    np.testing.assert_allclose(d.subtree_com[1], d.xpos[1], atol=1e-9)
    np.testing.assert_allclose(model.body_ipos[1], 0.0, atol=1e-12)


def test_tilted_hover_thrust_makes_no_torque(model):
    d = mujoco.MjData(model)
    d.qpos[3:7] = [np.cos(0.2), np.sin(0.2), 0, 0]  # 0.4 rad roll
    d.act[:] = 0.07
    mujoco.mj_forward(model, d)
    np.testing.assert_allclose(d.qacc[3:6], 0.0, atol=1e-9)


def test_hover_thrust_holds_altitude(model):
    d = mujoco.MjData(model)
    d.qpos[2] = 1.0
    hover = model.body_mass[1] * -model.opt.gravity[2] / 4
    d.ctrl[:] = hover
    d.act[:] = hover
    for _ in range(1000):  # 2 s
        mujoco.mj_step(model, d)
    assert abs(d.qpos[2] - 1.0) < 1e-6
    assert np.abs(d.qvel).max() < 1e-6


def test_free_fall_matches_g(model):
    d = mujoco.MjData(model)
    d.qpos[2] = 10.0
    n = 500
    for _ in range(n):
        mujoco.mj_step(model, d)
    t = n * model.opt.timestep
    # semi-implicit Euler: z = z0 - g dt^2 n (n + 1) / 2
    expected = 10.0 - G * model.opt.timestep**2 * n * (n + 1) / 2
    assert d.qpos[2] == pytest.approx(expected, abs=1e-9)
    assert d.qvel[2] == pytest.approx(-G * t, rel=1e-9)


def test_motor_lag_is_first_order(model, spec):
    d = mujoco.MjData(model)
    d.ctrl[:] = 0.1
    tau = physical(spec, "motor_time_constant_s")
    steps = round(tau / model.opt.timestep)
    for _ in range(steps):
        mujoco.mj_step(model, d)
    assert d.act[0] == pytest.approx(0.1 * (1 - np.exp(-1)), rel=1e-3)


def test_mixer_matches_simulated_wrench(model, spec):
    A = qc.allocation_matrix(rotor_positions(spec), ROTOR_SPIN, physical(spec, "torque_to_thrust_m"))
    d = mujoco.MjData(model)
    f = np.array([0.05, 0.08, 0.11, 0.02])
    d.act[:] = f
    mujoco.mj_forward(model, d)
    wrench = A @ f
    assert d.qfrc_actuator[2] == pytest.approx(wrench[0])  # thrust along z at identity
    np.testing.assert_allclose(d.qfrc_actuator[3:6], wrench[1:], atol=1e-12)


def test_rate_loop_damps_body_rates(model, spec):
    A = qc.allocation_matrix(rotor_positions(spec), ROTOR_SPIN, physical(spec, "torque_to_thrust_m"))
    J = np.array([physical(spec, k) for k in ("ixx_kg_m2", "iyy_kg_m2", "izz_kg_m2")])
    f_max = np.array([a.effort_limit for a in spec.actuators])
    d = mujoco.MjData(model)
    d.qpos[2] = 1.0
    d.qvel[3:6] = [2.0, -1.0, 0.5]
    d.act[:] = model.body_mass[1] * G / 4
    for _ in range(500):
        d.ctrl[:] = qc.rate_loop_thrusts(
            np.array([model.body_mass[1] * G, 0.0, 0.0, 0.0]),
            d.qvel[3:6],
            qc.rate_loop_gain(J, np.linalg.inv(A)),
            f_max,
            np,
        )
        mujoco.mj_step(model, d)
    assert np.abs(d.qvel[3:6]).max() < 1e-2


def test_the_rate_loop_s_matrix_form_is_its_law(spec):
    """rate_loop_thrusts' (n, 10) x (10, 4) product is tau = J K (w_des - w) + w x (J w) through
    A^-1, clipped, vehicle by vehicle; a gyroscopic term with the wrong sign or axis fails."""
    A = qc.allocation_matrix(rotor_positions(spec), ROTOR_SPIN, physical(spec, "torque_to_thrust_m"))
    J = np.array([1.4e-5, 1.5e-5, 2.2e-5])  # unequal axes, so every gyroscopic component counts
    f_max = np.array([a.effort_limit for a in spec.actuators])
    rng = np.random.default_rng(0)
    command = np.concatenate([rng.uniform(0.0, 0.6, (256, 1)), rng.normal(0.0, 5.0, (256, 3))], axis=1)
    w = rng.normal(0.0, 20.0, (256, 3))
    tau = J * np.asarray(qc.RATE_GAINS) * (command[:, 1:] - w) + np.cross(w, J * w)
    law = np.clip(np.concatenate([command[:, :1], tau], axis=1) @ np.linalg.inv(A).T, 0.0, f_max)
    got = qc.rate_loop_thrusts(command, w, qc.rate_loop_gain(J, np.linalg.inv(A)), f_max, np)
    np.testing.assert_allclose(got, law, rtol=0, atol=1e-12)
    assert 0.05 < np.mean((law == 0.0) | (law == f_max)) < 0.95  # both the clip and the linear part tested
    assert np.abs(np.cross(w, J * w) @ np.linalg.inv(A)[:, 1:].T).max() > 1e-3  # the gyroscopic term matters here


def test_randomisation_scales_the_free_bodys_mass_and_inertia_alone():
    """The randomised mass and inertia are those of the body on the free joint (found in the model,
    not assumed to be body 1), and nothing else of body_mass / body_inertia changes."""
    import jax

    from simreal.policies.run_config import make_env, resolve
    from simreal.sim.robots import free_base_body

    env = make_env(resolve("quadrotor-hover", ["backend=native", "env.mass_scale=[0.5,0.6]"]))
    assert env.base_body == free_base_body(env.mj_model) and env.mj_model.jnt_bodyid[0] == env.base_body
    nominal = env.nominal_params()
    p = env.randomize(nominal, jax.random.PRNGKey(1))
    for k in ("body_mass", "body_inertia"):
        changed = np.flatnonzero(
            np.any(np.reshape(np.asarray(p[k]) != np.asarray(nominal[k]), (env.mj_model.nbody, -1)), 1)
        )
        assert changed.tolist() == [env.base_body], (k, changed)
    assert 0.5 <= float(p["body_mass"][env.base_body] / nominal["body_mass"][env.base_body]) <= 0.6
