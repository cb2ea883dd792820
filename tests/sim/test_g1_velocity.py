"""g1-velocity's recipe (simreal/sim/tasks/g1_velocity.py): the gait clock the policy sees and the robot
side plays back, foot contact from MuJoCo's touch sensors, the clipped reward, and the
per-gait-cycle tracking error."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simreal.policies.run_config import make_env, resolve
from simreal.rewards import terms as rw


@pytest.fixture(scope="module")
def env():
    return make_env(resolve("g1-velocity", ["env.randomize=false", "env.obs_noise_scale=0"]))


def test_the_gait_clock_has_its_period_the_legs_half_apart_and_the_bundle_plays_it(env):
    period = env.cfg.gait_period_s
    steps = np.arange(3 * env.cycle_steps)
    clock = np.asarray(jax.vmap(env.gait_clock)(steps))
    assert env.cycle_steps * env.ctrl_dt == pytest.approx(period)  # 0.8 s at 50 Hz: 40 rows
    np.testing.assert_allclose(clock[: env.cycle_steps], clock[env.cycle_steps : 2 * env.cycle_steps], atol=1e-5)
    np.testing.assert_allclose(clock[:, 2:], -clock[:, :2], atol=1e-5)  # half a period apart
    ref = env.deployment().reference
    assert ref.loop and ref.rate_hz == pytest.approx(1 / env.ctrl_dt)
    for k in (0, 7, 39, 40, 95):  # the runner's row at t = k dt is the env's clock at step k
        np.testing.assert_allclose(ref.at(k * env.ctrl_dt)["gait_phase"], clock[k], atol=1e-5)
    stance = np.asarray(jax.vmap(env.stance)(steps[: env.cycle_steps]))
    assert stance.mean(axis=0) == pytest.approx([env.cfg.stance_fraction] * 2, abs=1 / env.cycle_steps)


def test_feet_touch_the_floor_standing_and_not_lifted(env):
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    state = step(state, jnp.zeros(env.action_size))
    assert np.asarray(env.feet_contact(state.pipeline_state)).all()
    weight = float(np.asarray(state.pipeline_state.sensordata[env.touch_adr]).sum())
    assert weight == pytest.approx(float(env.mj_model.body_mass.sum()) * 9.81, rel=0.5)  # ~ m g between the soles
    lifted = state.pipeline_state.replace(qpos=state.pipeline_state.qpos.at[2].add(0.3))
    lifted = env.physics.step(state.info["model_params"], lifted, env.home_ctrl, 1)
    assert not np.asarray(env.feet_contact(lifted)).any()


def test_a_step_whose_penalties_outweigh_it_scores_zero_not_less(env):
    """legged_gym's only_positive_rewards: a fall costs what the rest of the episode would earn."""
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    tilted = state.pipeline_state.qvel.at[3:6].set(jnp.array([8.0, 8.0, 0.0]))  # ang_vel_xy: -0.05 * 128
    state = state.replace(pipeline_state=state.pipeline_state.replace(qvel=tilted))
    after = jax.jit(env.step)(state, jnp.ones(env.action_size))
    terms = {k.removeprefix("reward/"): float(v) for k, v in after.metrics.items() if k.startswith("reward/")}
    unclipped = env.ctrl_dt * sum(env.scales[k] * terms[k] for k in env.scales)
    assert unclipped < 0 and float(after.reward) == 0.0


def test_the_cycle_error_measures_the_pace_not_the_sway(env):
    """A base that sways +-0.2 m/s within each gait cycle around the commanded pace has zero
    per-cycle error and 0.14 m/s of instantaneous RMS."""
    stats = env.init_stats()
    cmd = jnp.array([0.5, 0.0, 0.0])
    phys = jax.jit(env.reset)(jax.random.PRNGKey(0)).pipeline_state
    upd = jax.jit(env.update_stats)
    for k in range(1, 2 * env.cycle_steps + 1):
        vx = 0.5 + 0.2 * np.sin(2 * np.pi * k / env.cycle_steps)
        p = phys.replace(qvel=phys.qvel.at[0].set(vx))
        stats = upd(stats, p, {"command": cmd, "step": jnp.asarray(k)})
    final = env.final_stats(stats, jnp.bool_(False))
    assert (
        float(final["vel_err_cycle_m_s"]) == pytest.approx(0.0, abs=1e-4) and float(final["vel_err_cycle_m_s/n"]) == 1
    )
    assert float(final["vel_rmse_m_s"]) == pytest.approx(0.2 / np.sqrt(2), rel=0.02)


def test_the_cycle_error_as_rms_and_as_mean(env):
    """One cycle 0.1 m/s and 0.2 rad/s short of the command, one on it: RMS over the cycles
    0.1 / sqrt(2) m/s and 0.2 / sqrt(2) rad/s, mean magnitude 0.05 m/s and 0.1 rad/s."""
    stats = env.init_stats()
    cmd = jnp.array([0.5, 0.0, 0.4])
    phys = jax.jit(env.reset)(jax.random.PRNGKey(0)).pipeline_state
    upd = jax.jit(env.update_stats)
    for k in range(1, 2 * env.cycle_steps + 1):
        short = k <= env.cycle_steps
        p = phys.replace(qvel=phys.qvel.at[0].set(0.4 if short else 0.5).at[5].set(0.2 if short else 0.4))
        stats = upd(stats, p, {"command": cmd, "step": jnp.asarray(k)})
    final = env.final_stats(stats, jnp.bool_(False))
    assert float(final["vel_err_cycle_m_s"]) == pytest.approx(0.1 / np.sqrt(2), rel=1e-3)
    assert float(final["yaw_err_cycle_rad_s"]) == pytest.approx(0.2 / np.sqrt(2), rel=1e-3)
    assert float(final["vel_err_cycle_mean_m_s"]) == pytest.approx(0.05, rel=1e-3)
    assert float(final["yaw_err_cycle_mean_rad_s"]) == pytest.approx(0.1, rel=1e-3)


def test_the_legged_terms():
    assert float(rw.contact_schedule(jnp.array([True, False]), jnp.array([True, True]))) == 1.0
    assert float(rw.swing_height(jnp.array([0.02, 0.1]), jnp.array([True, False]), 0.08)) == pytest.approx(0.02**2)
    assert float(
        rw.contact_slip(jnp.array([[0.1, 0.0, 0.0], [1.0, 1.0, 0.0]]), jnp.array([True, False]))
    ) == pytest.approx(0.01)
    assert float(rw.outside_range(jnp.array([-2.0, 0.0, 3.0]), jnp.full(3, -1.0), jnp.full(3, 1.0))) == 3.0
    # the swing profile: flat in stance, up to the height mid-swing, back down by its end
    phase = jnp.array([0.0, 0.5, 0.55, 0.775, 0.999])
    np.testing.assert_allclose(rw.swing_profile(phase, 0.55, 0.1), [0.0, 0.0, 0.0, 0.1, 0.0], atol=1e-4)


def test_a_command_range_the_wrong_way_round_is_one_line_naming_the_key():
    from simreal.errors import ConfigError

    with pytest.raises(ConfigError, match=r"env.cmd_vx_m_s.*low <= high, got \[1.0, 0.0\]"):
        resolve("g1-velocity", ["env.cmd_vx_m_s=[1,0]"])


def test_the_h1_stands_at_its_own_height():
    """The target and the fall height follow the robot's home pose (G1 0.784 m, H1 1.034 m)."""
    g1 = make_env(resolve("g1-velocity", ["env.randomize=false"]))
    h1 = make_env(resolve("g1-velocity", ["robot=h1_10dof", "env.randomize=false"]))
    assert g1.base_height_m == pytest.approx(0.784, abs=0.005) and g1.min_base_height_m == pytest.approx(0.5, abs=0.01)
    assert h1.base_height_m == pytest.approx(1.034, abs=0.005) and h1.action_size == 10
    state = jax.jit(h1.reset)(jax.random.PRNGKey(0))
    state = jax.jit(h1.step)(state, jnp.zeros(h1.action_size))
    assert not bool(state.done) and np.asarray(h1.feet_contact(state.pipeline_state)).all()


def test_a_command_beyond_the_trained_range_is_clamped_on_the_robot_and_refused_on_the_command_line(tmp_path):
    """A Twist (or teleop) asking 2 m/s of a policy trained on 0-1 m/s gets 1 m/s, counted; the
    same command given as ``--task-param`` is refused in one line."""
    from fixtures import bundles as T
    from simreal.bundle import load_bundle
    from simreal.deploy.runner import PolicyRunner
    from simreal.errors import SimrealError

    b = dataclasses.replace(
        load_bundle(T.make_holding_bundle(tmp_path / "b", "g1_12dof")),
        task_params={"command": [0.0, 0.0, 0.0]},
        task_config={"cmd_vx_m_s": [0.0, 1.0], "cmd_vy_m_s": [-0.3, 0.3], "cmd_yaw_rad_s": [-0.5, 0.5]},
    )
    np.testing.assert_allclose(b.command_ranges(), [[0.0, 1.0], [-0.3, 0.3], [-0.5, 0.5]])
    runner = PolicyRunner(b)
    assert runner._trained_command(np.array([2.0, -1.0, 0.2])).tolist() == [1.0, -0.3, 0.2]
    assert runner.stats.commands_clamped == 1
    assert b.with_task_params({"command": [0.5, 0.0, 0.1]}).task_params["command"] == [0.5, 0.0, 0.1]
    with pytest.raises(SimrealError, match=r"--task-param command: \[2.0, 0.0, 0.0\] .*vx \[0, 1\]"):
        b.with_task_params({"command": [2.0, 0.0, 0.0]})
