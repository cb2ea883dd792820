"""Smoke test over every registered task: jit reset/step on 4 envs (native), shapes, no NaN.

A task with dict observations (camera images beside the state: ``arm-push-pixels``) declares
``observation_size`` as ``{key: shape}``; each key is checked against it, and every leaf for NaN."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from fixtures.task_data import data_overrides
from simreal.policies.run_config import make_env, resolve
from simreal.sim.tasks import TASKS

N = 4


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """Where the data files tasks need are written (fixtures.task_data), once per module."""
    return tmp_path_factory.mktemp("task_data")


@pytest.fixture(scope="module")
def g1_motion_file(tmp_path_factory) -> Path:
    """A short synthetic G1 clip written with save_motion (1 s, 50 fps): g1-tracking's motion file."""
    from fixtures.robot_motion import synthetic_motion
    from simreal.motion_file import save_motion
    from simreal.robot_spec import load_robot_spec
    from simreal.sim.robots import build_model

    path = tmp_path_factory.mktemp("motion") / "sway.npz"
    save_motion(path, synthetic_motion(build_model(load_robot_spec("g1")), seconds=1.0, amplitude_rad=0.2))
    return path


@pytest.mark.parametrize("task", sorted(TASKS))
def test_task_jit_reset_step_shapes_finite(task, request):
    overrides = ["backend=native", *data_overrides(task, request.getfixturevalue("data_dir"))]
    try:
        cfg = resolve(task, overrides)
    except ImportError as e:  # a task registered by another change whose module is not here yet
        pytest.skip(f"{task}: {e}")
    env = make_env(cfg)
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    s = reset(jax.random.split(jax.random.PRNGKey(0), N))
    _check_obs_shapes(env, s.obs)
    if not isinstance(env.observation_size, Mapping):  # the bundle's layout describes a flat vector
        assert sum(t["size"] for t in env.obs_layout) * env.cfg.obs_history_steps == env.observation_size
    a = jax.random.uniform(jax.random.PRNGKey(1), (N, env.action_size), minval=-1.0, maxval=1.0)
    first = s
    for _ in range(3):
        s = step(s, a)
    _check_obs_shapes(env, s.obs)
    # a rollout scans over steps: reset must give the state step returns, leaf for leaf
    assert jax.tree.structure(first) == jax.tree.structure(s)
    causes = jax.eval_shape(
        env.termination_causes, jax.tree.map(lambda x: x[0], s.pipeline_state), jax.tree.map(lambda x: x[0], s.info)
    )
    assert {f"episode/end_{k}" for k in [*causes, "nonfinite"]} <= set(s.metrics)
    assert s.reward.shape == (N,) and s.done.shape == (N,)
    for leaf in jax.tree.leaves(s.obs):
        assert np.all(np.isfinite(np.asarray(leaf)))
    assert np.all(np.isfinite(np.asarray(s.reward)))
    for k, v in s.metrics.items():
        assert np.all(np.isfinite(np.asarray(v))), k
    _check_statistics_contract(env)


def test_termination_causes_name_what_ended_the_episode():
    """A quadrotor put on the ground ends its episode on ``ground`` alone; a step that ends
    nothing reports no cause."""
    env = make_env(resolve("quadrotor-hover", NO_NOISE))
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    s = reset(jax.random.PRNGKey(0))
    hover = jnp.zeros(env.action_size)

    def ended(state):
        return {
            k.removeprefix("episode/end_"): float(v) for k, v in state.metrics.items() if k.startswith("episode/end_")
        }

    flying = step(s, hover)
    assert float(flying.done) == 0.0 and set(ended(flying).values()) == {0.0}
    landed = step(
        s.replace(
            pipeline_state=s.pipeline_state.replace(
                qpos=s.pipeline_state.qpos.at[2].set(0.0), qvel=jnp.zeros_like(s.pipeline_state.qvel)
            )
        ),
        hover,
    )
    assert float(landed.done) == 1.0
    assert {k for k, v in ended(landed).items() if v} == {"ground"}


@pytest.mark.parametrize("backend", ["native", "mjx"])
def test_a_diverged_env_ends_on_nonfinite_on_every_backend(backend):
    """An env whose velocity turned NaN ends its episode on ``nonfinite`` alone, on both backends
    (the C engine resets it in the middle of the step, which the native backend marks), with a
    zero reward, finite statistics and a finite last observation; the other env of the batch
    steps on untouched."""
    env = make_env(resolve("quadrotor-hover", [*NO_NOISE, f"backend={backend}"]))
    env.record_terminal_obs = True  # as the SB3 and Gymnasium adapters ask
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    hover = jnp.zeros((2, env.action_size))
    s = step(reset(jax.random.split(jax.random.PRNGKey(0), 2)), hover)
    healthy = step(s, hover)
    ps = s.pipeline_state
    diverged = step(s.replace(pipeline_state=ps.replace(qvel=ps.qvel.at[0].set(jnp.nan))), hover)
    assert diverged.done.tolist() == [1.0, 0.0]
    assert {k for k, v in diverged.metrics.items() if k.startswith("episode/end_") and v[0]} == {
        "episode/end_nonfinite"
    }
    for k, v in diverged.metrics.items():
        assert np.all(np.isfinite(np.asarray(v))), k
    assert np.all(np.isfinite(np.asarray(diverged.obs))) and float(diverged.reward[0]) == 0.0
    assert np.all(np.isfinite(np.asarray(diverged.info["terminal_obs"])))  # an off-policy next_obs
    assert all(float(v[0]) == 0.0 for k, v in diverged.metrics.items() if k.startswith("reward/"))
    np.testing.assert_array_equal(
        np.asarray(diverged.pipeline_state.qpos[1]), np.asarray(healthy.pipeline_state.qpos[1])
    )


def test_a_diverged_episodes_counted_statistics_are_undefined():
    """g1-tracking's joint RMSE to the end read NaN for a diverged episode (its state is NaN) and
    made every mean NaN. A diverged episode's counted statistics are undefined (value and count 0,
    simreal.sim.episode_stats), a statistic without a count that is not finite reads 0, and a
    healthy episode's pass unchanged."""
    from simreal.sim.env import _undefined_where_diverged

    final = {
        "success": jnp.float32(0.0),
        "rmse": jnp.float32(np.nan),
        "rmse/n": jnp.float32(1.0),
        "speed": jnp.float32(np.inf),
    }
    assert {k: float(v) for k, v in _undefined_where_diverged(final, jnp.bool_(True)).items()} == {
        "success": 0.0,
        "rmse": 0.0,
        "rmse/n": 0.0,
        "speed": 0.0,
    }
    healthy = {"success": jnp.float32(1.0), "rmse": jnp.float32(0.2), "rmse/n": jnp.float32(1.0)}
    assert {k: float(v) for k, v in _undefined_where_diverged(healthy, jnp.bool_(False)).items()} == {
        "success": 1.0,
        "rmse": pytest.approx(0.2),
        "rmse/n": 1.0,
    }


def _check_obs_shapes(env, obs) -> None:
    """A flat observation is (N, observation_size); a dict one has exactly the keys of the
    ``observation_size`` mapping, each (N, *shape)."""
    size = env.observation_size
    if isinstance(size, Mapping):
        assert isinstance(obs, Mapping), type(obs)
        assert {k: tuple(v.shape) for k, v in obs.items()} == {k: (N, *shape) for k, shape in size.items()}
    else:
        assert obs.shape == (N, size)


def _check_statistics_contract(env) -> None:
    """Every task reports a success rate; a count ``<name>/n`` goes with a statistic ``<name>``; an
    episode that ended early (crash, fall, lost object, diverged physics) failed, and its error
    statistics are undefined, not 0 (simreal.sim.episode_stats)."""
    from simreal.sim.episode_stats import COUNT_SUFFIX

    ended_early = {k: float(v) for k, v in env.final_stats(env.init_stats(), jnp.bool_(True)).items()}
    assert ended_early.get("success") == 0.0, ended_early
    counts = [k for k in ended_early if k.endswith(COUNT_SUFFIX)]
    assert all(k[: -len(COUNT_SUFFIX)] in ended_early and ended_early[k] == 0.0 for k in counts), ended_early
    assert all(math.isfinite(v) for v in ended_early.values()), ended_early


# -- task-specific checks ------------------------------------------------------------------------------
NO_NOISE = ["backend=native", "env.randomize=false", "env.obs_noise_scale=0", "env.action_delay_steps=[0,0]"]


@pytest.fixture(scope="module")
def g1_tracking(g1_motion_file):
    """g1-tracking reading the short synthetic clip."""
    overrides = [f"env.motion_file={g1_motion_file}", "env.episode_length_s=0.4"]
    return make_env(resolve("g1-tracking", NO_NOISE + overrides))


@pytest.fixture(scope="module")
def h1_tracking(tmp_path_factory):
    """The tracking task on H1 (its spec's tracking_bodies: no wrists) reading a synthetic H1 clip."""
    from fixtures.robot_motion import synthetic_motion
    from simreal.motion_file import save_motion
    from simreal.robot_spec import load_robot_spec
    from simreal.sim.robots import build_model

    path = tmp_path_factory.mktemp("motion_h1") / "sway_h1.npz"
    save_motion(path, synthetic_motion(build_model(load_robot_spec("h1")), seconds=1.0, amplitude_rad=0.2))
    return make_env(
        resolve("g1-tracking", NO_NOISE + ["robot=h1", f"env.motion_file={path}", "env.episode_length_s=0.4"])
    )


def test_g1_tracking_reward_peaks_on_reference(g1_tracking):
    """Actions that reproduce the reference joint targets earn more than perturbed ones."""
    _reward_peaks_on_reference(g1_tracking)


def test_h1_tracks_a_clip_too(h1_tracking):
    """H1 (once refused: the task read G1's body names) tracks its own clip the same way."""
    assert h1_tracking.robot.name == "h1" and "left_ankle_link" in h1_tracking.tracked_bodies
    _reward_peaks_on_reference(h1_tracking)


def _reward_peaks_on_reference(env) -> None:
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    ref_action = jax.jit(jax.vmap(env.reference_action))
    keys = jax.random.split(jax.random.PRNGKey(0), N)
    totals = {}
    for name, noise in (("reference", 0.0), ("perturbed", 0.3)):
        s, total = reset(keys), 0.0
        for i in range(15):
            a = ref_action(s.info)
            a = a + noise * jax.random.normal(jax.random.PRNGKey(i), a.shape)
            s = step(s, a)
            total = total + s.reward
        totals[name] = np.asarray(total)
    assert np.all(totals["reference"] > totals["perturbed"]), totals


def test_g1_tracking_reference_state_init(g1_tracking):
    """Episodes start on the clip at random phases with its velocities, or (rest_start_fraction of
    them) at its first frame at rest, as a robot is handed over: joints equal the reference frame."""
    env = g1_tracking
    s = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(3), 4 * N))
    t0, qvel = np.asarray(s.info["motion_t0"]), np.asarray(s.pipeline_state.qvel)
    rest = t0 == 0.0
    assert 0 < rest.sum() < 2 * N, rest.sum()  # 20% of 4 N
    assert len(np.unique(np.round(t0[~rest], 3))) == (~rest).sum()
    assert np.all(qvel[rest] == 0.0) and np.all(np.abs(qvel[~rest]).max(axis=1) > 0)
    err = jax.vmap(lambda p, i: env.errors(p, i))(s.pipeline_state, s.info)
    assert np.all(np.asarray(err["joint_pos"]) < 1e-8) and np.all(np.asarray(err["body_max"]) < 1e-3)


def test_humanoid_statistics_are_rmse_of_the_episodes_that_stayed_up(g1_tracking):
    """g1-velocity: RMS command errors over the steps; g1-tracking: RMS joint error; neither
    defined for an episode that ended early (its failure is counted by fall / success), but for
    g1-tracking the same errors up to the end are, for every episode."""
    from fixtures.episode_samples import fed

    vel = make_env(resolve("g1-velocity", NO_NOISE))
    stats = fed(vel, [{"vel_err": 0.3, "yaw_err": 0.1, "vel_err_xy": [0.3, 0.0], "yaw_err_z": [0.1]}] * 4)
    up, fell = vel.final_stats(stats, jnp.bool_(False)), vel.final_stats(stats, jnp.bool_(True))
    assert float(up["vel_rmse_m_s"]) == pytest.approx(0.3) and float(up["yaw_rate_rmse_rad_s"]) == pytest.approx(0.1)
    assert float(up["vel_rmse_m_s/n"]) == 1.0 and float(up["fall"]) == 0.0
    assert float(fell["vel_rmse_m_s/n"]) == 0.0 and float(fell["fall"]) == 1.0 and float(fell["success"]) == 0.0

    env = g1_tracking
    stats = fed(env, [{"joint_err": 0.05, "body_err": 0.04}] * 2)
    ok, lost = env.final_stats(stats, jnp.bool_(False)), env.final_stats(stats, jnp.bool_(True))
    assert float(ok["joint_rmse_rad"]) == pytest.approx(0.05) and float(ok["body_pos_err_m"]) == pytest.approx(0.04)
    assert float(ok["joint_rmse_rad/n"]) == 1.0 and float(lost["joint_rmse_rad/n"]) == 0.0
    # up to the end, over every episode that stepped: the lost one counts too
    assert float(lost["joint_rmse_to_end_rad"]) == pytest.approx(0.05) and float(lost["joint_rmse_to_end_rad/n"]) == 1.0
    assert float(lost["body_pos_err_to_end_m"]) == pytest.approx(0.04)
    unstepped = env.final_stats(env.init_stats(), jnp.bool_(True))
    assert float(unstepped["joint_rmse_to_end_rad/n"]) == 0.0


def test_cartpole_statistics_success_until_the_pole_leaves_the_band():
    from simreal.sim.backends.base import PhysState

    env = make_env(resolve("cartpole-balance", NO_NOISE))
    stats = env.init_stats()
    for theta in (0.0, 0.1, env.cfg.max_angle_rad + 0.01, 0.0):
        phys = PhysState(qpos=jnp.asarray([0.0, theta]), qvel=jnp.zeros(2), act=jnp.zeros(0), sensordata=jnp.zeros(0))
        stats = env.update_stats(stats, phys, {})
        if theta == 0.1:
            assert float(env.final_stats(stats, jnp.bool_(False))["success"]) == 1.0
    out = env.final_stats(stats, jnp.bool_(False))
    expected = np.mean([(np.cos(t) + 1) / 2 for t in (0.0, 0.1, env.cfg.max_angle_rad + 0.01, 0.0)])
    assert float(out["success"]) == 0.0 and float(out["upright"]) == pytest.approx(expected, rel=1e-6)


def test_g1_tracking_motion_joint_names_checked(tmp_path, g1_motion_file):
    import dataclasses

    from simreal.errors import SimrealError
    from simreal.motion_file import load_motion, save_motion

    m = load_motion(g1_motion_file)
    m = dataclasses.replace(m, joint_names=("nope",) + m.joint_names[1:])
    save_motion(tmp_path / "bad.npz", m)
    with pytest.raises(SimrealError, match="nope|left_hip_pitch_joint"):
        make_env(resolve("g1-tracking", NO_NOISE + [f"env.motion_file={tmp_path / 'bad.npz'}"]))


@pytest.mark.parametrize("value", [None, ""])
def test_g1_tracking_without_motion_file_is_a_config_error(value):
    from simreal.errors import ConfigError

    overrides = ["backend=native"] + ([] if value is None else [f"env.motion_file={value}"])
    with pytest.raises(ConfigError, match=r"'env\.motion_file'.*simreal retarget") as e:
        resolve("g1-tracking", overrides)
    assert "g1-tracking.yaml" in str(e.value)


def test_train_g1_tracking_without_motion_file_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from simreal.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "g1-tracking", "backend=native"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("simreal train: error:") and "env.motion_file" in err, err
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


@pytest.mark.slow
@pytest.mark.parametrize("task", ["arm-pick", "arm-push"])
def test_arm_object_rests_on_table_and_goal_is_sane(task):
    """With the arm holding home, the cube stays where it spawned; goals lie where the task says."""
    env = make_env(resolve(task, NO_NOISE + ["env.episode_length_s=0.3"]))
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    s = reset(jax.random.split(jax.random.PRNGKey(0), N))
    p0 = np.asarray(jax.vmap(env.object_pos)(s.pipeline_state))
    for _ in range(10):
        s = step(s, jnp.zeros((N, env.action_size)))
    p1 = np.asarray(jax.vmap(env.object_pos)(s.pipeline_state))
    np.testing.assert_allclose(p1, p0, atol=5e-3)
    np.testing.assert_allclose(p0[:, 2], env.cfg.object_half_size_m, atol=2e-3)
    goal = np.asarray(s.info["target_pos_w"])
    if task == "arm-pick":
        assert np.all(goal[:, 2] > env.cfg.object_half_size_m + 0.09)
    else:
        np.testing.assert_allclose(goal[:, 2], env.cfg.object_half_size_m)
    assert float(np.asarray(s.metrics["episode/success"]).sum()) == 0.0


def test_g1_velocity_push_changes_base_velocity():
    """A push lands on its schedule: the base xy velocity jumps by at most push_max_vel_m_s."""
    import jax
    import jax.numpy as jnp

    from simreal.policies.run_config import make_env, resolve

    env = make_env(resolve("g1-velocity"), backend="native", push_interval_s=0.04, push_max_vel_m_s=0.5)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    pushed = jax.jit(env.perturb)(state.pipeline_state, {**state.info, "step": jnp.asarray(2)}, jax.random.PRNGKey(1))
    quiet = jax.jit(env.perturb)(state.pipeline_state, {**state.info, "step": jnp.asarray(1)}, jax.random.PRNGKey(1))
    dv = pushed.qvel[0:2] - state.pipeline_state.qvel[0:2]
    assert 0 < float(jnp.abs(dv).max()) <= 0.5
    assert float(jnp.abs(quiet.qvel - state.pipeline_state.qvel).max()) == 0.0


def _bad_input(tmp: Path, kind: str) -> tuple[str, str, str]:
    """(task, the override naming a bad input file of ``kind``, what the one-line error must say)."""
    clip = {"missing": "missing.npz", "capture": "walk.bvh", "garbage": "clip.npz", "parts": "kick.npz"}.get(kind, "")
    if kind == "capture":  # the .bvh itself instead of the clip retargeted from it
        (tmp / clip).write_text("HIERARCHY\nROOT Hips\n")
    elif kind == "garbage":
        (tmp / clip).write_bytes(b"not an npz")
    elif kind == "parts":  # `simreal retarget --out kick.npz` wrote kick.part1.npz and kick.part2.npz
        for k in (1, 2):
            (tmp / f"kick.part{k}.npz").write_bytes(b"")
    says = {
        "missing": f"'env.motion_file': {tmp / clip}: file not found",
        "capture": f"retarget a capture first: simreal retarget {tmp / 'walk.bvh'}",
        "garbage": "clip.npz: not a readable npz file",
        "parts": f"cut that clip into 2 parts, give one of them: {tmp / 'kick.part1.npz'}, {tmp / 'kick.part2.npz'}",
        "demo": f"'env.demo_file': {tmp / 'push.npz'}: file not found",
    }[kind]
    if kind == "demo":
        return "arm-demo-track", f"env.demo_file={tmp / 'push.npz'}", says
    return "g1-tracking", f"env.motion_file={tmp / clip}", says


@pytest.mark.parametrize("kind", ["missing", "capture", "garbage", "parts", "demo"])
def test_a_bad_input_file_is_refused_before_the_run_directory(kind, tmp_path, capsys):
    """A clip that does not exist, a capture given instead of its retargeted clip, a file that is
    no npz, a clip that retargeting cut into parts, a missing demonstration: one line naming the
    key and saying what to do, nothing announced or made (once: "run directory: ..." first)."""
    from simreal.cli import main

    runs = tmp_path / "runs"
    task, override, says = _bad_input(tmp_path, kind)
    assert main(["train", task, "backend=native", f"runs_root={runs}", override]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "\n" not in out.err.strip(), out
    assert "config key" in out.err and says in out.err, out.err
    assert not runs.exists()


def test_an_env_setting_the_env_refuses_is_one_line_before_the_run_directory(tmp_path, capsys):
    """The env's own checks run before the run directory is made: a clip the action scale cannot
    reach is the one line, with no "run directory:" announced for a directory then removed."""
    from fixtures.robot_motion import synthetic_motion
    from simreal.cli import main
    from simreal.motion_file import save_motion
    from simreal.robot_spec import load_robot_spec
    from simreal.sim.robots import build_model

    runs = tmp_path / "runs"
    clip = tmp_path / "g1_clip.npz"
    save_motion(clip, synthetic_motion(build_model(load_robot_spec("g1")), seconds=0.5))
    assert (
        main(
            [
                "train",
                "g1-tracking",
                "backend=native",
                f"runs_root={runs}",
                f"env.motion_file={clip}",
                "env.action_scale=0.01",
            ]
        )
        == 2
    )
    out = capsys.readouterr()
    assert out.out == "" and "\n" not in out.err.strip(), out
    assert "config key 'env.action_scale'" in out.err, out.err
    assert not runs.exists()


def test_a_train_that_fails_on_start_leaves_no_run_directory(tmp_path, capsys):
    """A motion file retargeted for another robot is found when the env is built, after the run
    directory was made: the directory is removed again, and the error is one line."""
    from fixtures.robot_motion import synthetic_motion
    from simreal.cli import main
    from simreal.motion_file import save_motion
    from simreal.robot_spec import load_robot_spec
    from simreal.sim.robots import build_model

    runs = tmp_path / "runs"
    h1_clip = tmp_path / "h1_clip.npz"
    save_motion(h1_clip, synthetic_motion(build_model(load_robot_spec("h1")), seconds=0.5))
    assert main(["train", "g1-tracking", "backend=native", f"runs_root={runs}", f"env.motion_file={h1_clip}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "h1_clip.npz" in err and "another robot" in err, err
    assert not runs.exists() or not any(runs.rglob("config.yaml"))


@pytest.mark.parametrize("mode", ["rotor_thrust", "ctbr"])
def test_quadrotor_hover_action_costs_nothing_and_holds_the_weight(mode):
    """The action penalty's zero is the command that holds m g with no body rate: every
    rotor at m g / 4, or ctbr's total thrust m g and zero rates (not the thrust's normalised
    value on the rate channels)."""
    from simreal.action_modes import hover_thrust_n

    cfg = resolve("quadrotor-hover", [f"env.action_mode={mode}"])
    env = make_env(cfg, backend="native")
    a = jnp.asarray(env.hover_action, jnp.float32)
    state = env.reset(jax.random.PRNGKey(0))
    terms = env.reward_terms(state.pipeline_state, a, state.info)
    assert float(terms["action"]) == pytest.approx(0.0, abs=1e-12)
    lay = env.action_layout()
    u = np.asarray(lay["offset"]) + np.asarray(lay["scale"]) * np.asarray(a)
    if mode == "rotor_thrust":
        np.testing.assert_allclose(u, hover_thrust_n(env.robot), rtol=1e-5)
    else:
        np.testing.assert_allclose(u, [4 * hover_thrust_n(env.robot), 0.0, 0.0, 0.0], rtol=1e-5, atol=1e-9)


def test_arm_slew_limit_moves_targets_no_faster_than_the_spec_allows():
    """``env.slew_limit`` (on for arms by default): a full-scale action flip moves each target by at
    most v_max * ctrl_dt per step (the deploy safety layer's limit), from the pose the episode
    starts in; off, it jumps."""
    from simreal.action_modes import action_mode

    env = make_env(resolve("arm-reach", NO_NOISE + ["env.episode_length_s=0.5"]))
    free = make_env(resolve("arm-reach", NO_NOISE + ["env.slew_limit=false", "env.episode_length_s=0.5"]))
    assert env.cfg.slew_limit and not resolve("g1-velocity").env.slew_limit
    rate = action_mode("joint_position").default_max_rate(env.robot, env.robot.actuator_names) * env.ctrl_dt
    s = jax.jit(env.reset)(jax.random.PRNGKey(0))
    start = np.asarray(s.info["last_ctrl"])
    np.testing.assert_allclose(
        start,
        np.clip(np.asarray(env.joint_pos(s.pipeline_state)), np.asarray(env.ctrl_lo), np.asarray(env.ctrl_hi)),
        atol=1e-6,
    )
    step = jax.jit(env.step)
    prev, moved = start, []
    for k in range(6):
        s = step(s, jnp.full(env.action_size, 1.0 if k < 3 else -1.0))
        ctrl = np.asarray(s.info["last_ctrl"])
        assert np.all(np.abs(ctrl - prev) <= rate + 1e-6), (k, ctrl - prev, rate)
        moved.append(np.abs(ctrl - prev))
        prev = ctrl
    assert np.all(np.max(moved, axis=0) >= rate - 1e-6)  # every channel ran at its limit at some point
    assert "last_ctrl" not in jax.jit(free.reset)(jax.random.PRNGKey(0)).info  # off: no state kept, none limited
    # an episode that ends starts the next from its own start pose, not from the last command
    short = make_env(resolve("arm-reach", NO_NOISE + [f"env.episode_length_s={3 * env.ctrl_dt}"]))
    s, step = jax.jit(short.reset)(jax.random.PRNGKey(1)), jax.jit(short.step)
    for _ in range(3):
        s = step(s, jnp.ones(short.action_size))
    assert float(s.done) == 1.0
    np.testing.assert_allclose(
        np.asarray(s.info["last_ctrl"]),
        np.clip(np.asarray(short.joint_pos(s.pipeline_state)), np.asarray(short.ctrl_lo), np.asarray(short.ctrl_hi)),
        atol=1e-6,
    )
    assert np.max(np.abs(np.asarray(free.targets(jnp.ones(free.action_size))) - start)) > 4 * rate.max()


def test_a_run_saved_before_slew_limit_loads_as_trained(tmp_path):
    """A run (or bundle) saved before ``env.slew_limit`` existed trained without a limit: it is
    evaluated, resumed and rehearsed that way, not with the arms' new default."""
    from simreal.config import build
    from simreal.policies.run_dir import load_config
    from simreal.sim.env import as_saved
    from simreal.sim.tasks import task_class
    from simreal.yaml_io import dump_yaml

    tree = resolve("arm-pick").to_dict()
    del tree["env"]["slew_limit"]
    dump_yaml(tmp_path / "config.yaml", tree)
    assert load_config(tmp_path).env.slew_limit is False
    tree["env"]["slew_limit"] = True
    dump_yaml(tmp_path / "config.yaml", tree)
    assert load_config(tmp_path).env.slew_limit is True
    cls = task_class("arm-pick").config_class
    assert build(cls, as_saved(cls, {"episode_length_s": 6.0})).slew_limit is False  # a bundle's task_config
    quad = task_class("quadrotor-hover").config_class
    assert as_saved(quad, {"episode_length_s": 4.0}) == {"episode_length_s": 4.0}  # no such field: untouched


def test_arm_start_poses_stay_inside_the_joint_ranges():
    """Hinges start within +-init_joint_noise_rad of home, every joint inside its range: the noise
    in radians once opened the Franka hand to 0.14 m (range 0-0.08), and the deploy envelope
    stopped such a rehearsal before its first command."""
    env = make_env(resolve("arm-pick", NO_NOISE))
    m = env.mj_model
    qs = np.stack([np.asarray(env.sample_initial(jax.random.PRNGKey(i))[0]) for i in range(32)])
    for j in range(m.njnt):
        adr = int(m.jnt_qposadr[j])
        if m.jnt_limited[j]:
            lo, hi = m.jnt_range[j]
            assert np.all((qs[:, adr] >= lo - 1e-6) & (qs[:, adr] <= hi + 1e-6)), m.joint(j).name
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE and adr in np.asarray(env.joint_qpos):
            off = np.abs(qs[:, adr] - np.asarray(env.home_qpos)[adr])
            assert off.max() <= env.cfg.init_joint_noise_rad + 1e-6 and off.max() > 0, m.joint(j).name
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE:
            np.testing.assert_allclose(qs[:, adr], np.asarray(env.home_qpos)[adr], atol=1e-7)


def test_a_g1_spec_from_before_tracking_bodies_still_tracks(tmp_path, g1_motion_file):
    """A spec written before the field (a bundle's copy, a user's file copied from g1.yaml) takes
    the shipped robot's bodies; a robot of another name without them is one ConfigError."""
    from simreal.errors import ConfigError
    from simreal.robot_spec import resolve_robot_path

    text = resolve_robot_path("g1").read_text()
    start = text.index("tracking_bodies:")
    end = text.index("]", start) + 1
    old = tmp_path / "g1.yaml"
    old.write_text(text[:start] + text[end:])
    env = make_env(resolve("g1-tracking", NO_NOISE + [f"robot={old}", f"env.motion_file={g1_motion_file}"]))
    assert env.robot.tracking_bodies == () and "left_wrist_yaw_link" in env.tracked_bodies
    renamed = tmp_path / "mine.yaml"
    renamed.write_text((text[:start] + text[end:]).replace("name: g1", "name: my_g1", 1))
    with pytest.raises(ConfigError, match="lists no tracking_bodies"):
        make_env(resolve("g1-tracking", NO_NOISE + [f"robot={renamed}", f"env.motion_file={g1_motion_file}"]))
