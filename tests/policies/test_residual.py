"""Residual RL over a frozen base (``trainer: residual``): the wrapper env's action and observation,
ResiP's zero-initialised residual reproducing the base, a tiny training run through the CLI,
its one-graph bundle against the JAX composition and in deploy's loop, and the config errors.
Tiny: arm-reach with 1 s episodes, a random MLP bundle as the base."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixtures import bundles
from simreal.bundle import OnnxPolicy, load_bundle
from simreal.cli import main
from simreal.policies.run_config import make_env, resolve

ENV = ["backend=native", "env.episode_length_s=1.0"]
TINY = [
    "train.num_envs=4",
    "train.num_timesteps=64",
    "train.unroll_length=8",
    "train.num_minibatches=2",
    "train.num_updates_per_batch=1",
    "train.num_eval_envs=2",
    "train.eval_every_steps=0",
    "train.policy_hidden=[16,16]",
    "train.value_hidden=[16,16]",
]


def write_base(out, env, task: str = "arm-reach", seed: int = 0):
    """A random tanh-MLP bundle with ``env``'s observation terms and action layout: a base to correct."""
    layout = env.action_layout()
    return bundles.write_bundle(
        out,
        spec=env.robot,
        model=bundles.mlp_onnx(env.observation_size, env.action_size, (16,), seed),
        task=task,
        obs_terms=[(t["name"], t["size"]) for t in env.obs_layout],
        control_rate_hz=env.robot.control_rate_hz,
        **{k: layout[k] for k in ("mode", "names", "units", "scale", "offset", "low", "high")},
    )


@pytest.fixture(scope="module")
def env():
    return make_env(resolve("arm-reach", ENV))


@pytest.fixture(scope="module")
def base_dir(env, tmp_path_factory):
    return write_base(tmp_path_factory.mktemp("base") / "bundle", env)


def test_wrapper_acts_with_base_plus_scaled_residual_and_observes_the_base_action(env, base_dir):
    from brax.envs.wrappers.training import VmapWrapper

    from simreal.policies.trainers.residual_env import BASE_ACTION, ResidualEnv, onnx_base

    base = OnnxPolicy(load_bundle(base_dir))
    scale = 1.0  # large enough that some composed actions clip at +-1
    renv = ResidualEnv(env, onnx_base(base), scale)
    assert renv.observation_size == env.observation_size + env.action_size and renv.action_size == env.action_size
    n, m, batch = env.observation_size, env.action_size, 3
    venv, vinner = VmapWrapper(renv, batch_size=batch), VmapWrapper(env, batch_size=batch)
    key = jax.random.PRNGKey(3)
    s, inner = jax.jit(venv.reset)(key), jax.jit(vinner.reset)(key)
    np.testing.assert_array_equal(s.obs[:, :n], inner.obs)  # the task env's observation, noise and all
    a_base = base(np.asarray(inner.obs))  # the bundle's own action, on the batch the callback got
    np.testing.assert_array_equal(s.obs[:, n:], a_base)
    np.testing.assert_array_equal(s.info[BASE_ACTION], a_base)

    r = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (batch, m)), jnp.float32).at[0].set(1.0)
    a = np.clip(a_base + scale * np.asarray(r), -1.0, 1.0)
    assert np.any(np.abs(a_base + scale * np.asarray(r)) > 1.0)  # the clip is exercised
    s2, inner2 = jax.jit(venv.step)(s, r), jax.jit(vinner.step)(inner, jnp.asarray(a))
    np.testing.assert_allclose(s2.info["last_action"], a, atol=1e-6)  # what the task env applied
    np.testing.assert_allclose(s2.obs[:, :n], inner2.obs, atol=1e-5)
    np.testing.assert_allclose(s2.reward, inner2.reward, atol=1e-5)
    np.testing.assert_allclose(s2.obs[:, n:], base(np.asarray(s2.obs[:, :n])), atol=1e-6)


def test_zero_initialised_residual_composes_to_exactly_the_base(env, base_dir, tmp_path):
    from simreal.policies.trainers.residual import BASE_DIR, TRAINER, freeze_base

    cfg = resolve("arm-reach", [*ENV, *TINY, f"residual.base={base_dir}"])
    assert (cfg.trainer, cfg.residual.scale, cfg.train.init_noise_std, cfg.train.entropy_cost) == (
        "residual",
        0.1,
        0.22,
        0.0,
    )  # ResiP's settings by default
    freeze_base(str(base_dir), tmp_path / BASE_DIR, cfg, env)
    renv, algo = TRAINER.build(tmp_path, cfg)
    ts = algo.init()
    act = TRAINER.composed(renv, algo, ts)
    obs = np.asarray(jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(1), 8)).obs)
    obs = obs + np.random.default_rng(1).normal(0, 0.5, obs.shape).astype(np.float32)  # off the initial states too
    expected = OnnxPolicy(load_bundle(base_dir))(obs)
    np.testing.assert_array_equal(np.asarray(act(obs)), expected)
    # the stochastic residual explores within +-scale around the base
    policy = algo.make_policy(algo.policy_params(ts), deterministic=False)
    r, _ = policy(jnp.concatenate([obs, expected], axis=-1), jax.random.PRNGKey(2))
    assert 0 < np.abs(np.asarray(r)).max() <= 1.0 and 0.05 < np.std(np.asarray(r)) < 0.5


@pytest.fixture(scope="module")
def run_dir(base_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    assert main(["train", "arm-reach", *ENV, *TINY, f"residual.base={base_dir}", f"runs_root={root}"]) == 0
    (run,) = (root / "arm-reach").iterdir()
    return run


@pytest.mark.slow
def test_residual_run_trains_evaluates_and_exports_one_graph_equal_to_the_jax_composition(
    run_dir, base_dir, tmp_path, capsys
):
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers import get_trainer
    from simreal.policies.trainers.residual import BASE_DIR, freeze_base

    cfg = load_config(run_dir)
    assert cfg.trainer == "residual" and cfg.residual.base == str(base_dir)
    # the base is frozen into the run, byte for byte
    assert (run_dir / BASE_DIR / "policy.onnx").read_bytes() == (base_dir / "policy.onnx").read_bytes()

    assert main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result[result["trained_on"]]["episodes"] == 2 and "success" in result[result["trained_on"]]

    assert main(["export", str(run_dir)]) == 0
    assert "max abs diff" in capsys.readouterr().out
    bundle = load_bundle(run_dir / "bundle")
    env = make_env(cfg)
    assert bundle.obs_size == env.observation_size and bundle.action.size == env.action_size
    assert bundle.provenance["trainer"] == "residual"
    # the bundle's one graph against the JAX composition (base through its own bundle, residual in JAX)
    policy = get_trainer("residual").load(run_dir, cfg)
    obs = np.asarray(jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(5), 16)).obs)
    obs = obs + np.random.default_rng(5).normal(0, 0.3, obs.shape).astype(np.float32)
    composed = OnnxPolicy(bundle)(obs)
    np.testing.assert_allclose(composed, np.asarray(policy.act(obs)), atol=1e-5)
    base = OnnxPolicy(load_bundle(base_dir))(obs)
    assert np.all(np.abs(composed - np.clip(base, -1, 1)) <= cfg.residual.scale + 1e-6)  # within the reach
    # a run directory as a base is exported by its own trainer (here this residual run: bases nest)
    frozen = freeze_base(str(run_dir), tmp_path / BASE_DIR, cfg, env)
    np.testing.assert_allclose(OnnxPolicy(load_bundle(frozen))(obs), composed, atol=1e-6)

    # deploy runs it like any bundle: the runner's loop in simulated time, in one process; on an ideal
    # link it reproduces the training simulator within the arm's tolerance
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    report = run_offline(
        bundle, SimLoopConfig(duration_s=1.0, noise_scale=0.0, settle_s=0.0), overrides={"start": {"ramp_s": 0.0}}
    )
    assert report["gate"]["passed"], report["gate"]
    assert report["runner"]["policy_runs"] >= 40


@pytest.mark.slow  # the training run of the fixture
def test_resume_keeps_the_base_and_the_scale(run_dir, capsys):
    assert main(["train", "--resume", str(run_dir), "residual.scale=0.2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "residual.scale" in err and "start a new run" in err


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["residual.base=/nonexistent/base"], "config key 'residual.base': /nonexistent/base: file not found"),
        (
            ["residual.base=."],
            "config key 'residual.base': .: neither a bundle folder (no bundle.yaml) nor a run "
            "directory (no config.yaml)",
        ),
        (["trainer=residual"], "config key 'residual.base': missing: the frozen base policy"),
        (
            ["trainer=sb3", "residual.base=x"],
            "config key 'residual': a residual over a frozen base trains with trainer=residual, not trainer=sb3",
        ),
        (["residual.base=x", "residual.scal=0.2"], "config key 'residual.scal': unknown key"),
    ],
)
def test_bad_residual_config_is_one_line_exit_2_and_leaves_no_run(overrides, message, tmp_path, capsys):
    assert main(["train", "arm-reach", *ENV, *TINY, *overrides, f"runs_root={tmp_path}"]) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not any(tmp_path.iterdir()) and out == ""  # refused before the run directory (and its line)


def test_a_damaged_base_bundle_is_refused_naming_its_file_before_the_run_directory(tmp_path, capsys):
    base = bundles.make_joint_bundle(tmp_path / "base")
    (base / "policy.onnx").write_bytes((base / "policy.onnx").read_bytes()[:200])  # cut short
    assert main(["train", "arm-reach", *ENV, *TINY, f"residual.base={base}", f"runs_root={tmp_path / 'r'}"]) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and f"{base}/policy.onnx" in err and "not a loadable ONNX" in err, err
    assert out == "" and not (tmp_path / "r").exists()


def test_a_base_of_another_task_or_action_scale_is_refused(env, tmp_path, capsys):
    hover = bundles.make_pd_hover_bundle(tmp_path / "hover")
    assert main(["train", "arm-reach", *ENV, *TINY, f"residual.base={hover}", f"runs_root={tmp_path / 'r1'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and f"{hover} is a policy of task quadrotor-hover on crazyflie2; this run is arm-reach on franka" in err
    ), err  # the user's path, not the run's copy
    assert not (tmp_path / "r1").exists()  # refused by the trainer's prepare, before the run directory
    other = write_base(tmp_path / "scaled", make_env(resolve("arm-reach", [*ENV, "env.action_scale=0.5"])))
    assert main(["train", "arm-reach", *ENV, *TINY, f"residual.base={other}", f"runs_root={tmp_path / 'r2'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "action scale" in err and "another env.action_scale" in err, err


def test_a_residual_trains_without_the_tasks_shaping_terms_unless_given():
    """ResiP trains the residual on the task reward alone: arm-push's shaping terms (the hand near
    the cube, smooth commands) default to weight 0 under a residual, and only there."""
    assert resolve("arm-push", ["residual.base=scripted"]).env.reward_scales == {"reach": 0.0, "action_rate": 0.0}
    assert resolve("arm-push", ["residual.base=scripted", "env.reward_scales.reach=0.5"]).env.reward_scales == {
        "reach": 0.5,
        "action_rate": 0.0,
    }
    assert resolve("arm-push", []).env.reward_scales == {}
    assert resolve("arm-reach", ["residual.base=x"]).env.reward_scales == {}  # no shaping terms named


def test_a_reach_per_action_name_in_the_env_and_in_the_one_graph(env, base_dir):
    """``residual.action_scales.NAME`` gives the action NAME its own reach: the wrapper env and the
    composed ONNX graph both apply ``clip(a_base + reach * r, -1, 1)`` per dimension."""
    from brax.envs.wrappers.training import VmapWrapper

    from simreal.policies.trainers.residual import action_reach, compose_onnx
    from simreal.policies.trainers.residual_env import ResidualEnv, onnx_base

    names = list(env.action_layout()["names"])
    cfg = resolve("arm-reach", [*ENV, f"residual.base={base_dir}", f"residual.action_scales.{names[-1]}=1.5"])
    reach = action_reach(cfg.residual, names)
    np.testing.assert_array_equal(reach, np.float32([0.1] * (len(names) - 1) + [1.5]))

    n, m = env.observation_size, env.action_size
    base = OnnxPolicy(load_bundle(base_dir))
    residual = bundles.mlp_onnx(n + m, m, (8,), seed=4)
    composed = compose_onnx(load_bundle(base_dir), residual, reach)
    import onnxruntime as ort

    def run(model, x):
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"obs": x})[0]

    obs = np.random.default_rng(2).normal(0, 1, (16, n)).astype(np.float32)
    a_base = base(obs)
    want = np.clip(a_base + reach * run(residual, np.concatenate([obs, a_base], -1)), -1.0, 1.0)
    got = run(composed, obs)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.abs(got - np.clip(a_base, -1, 1))[:, :-1].max() <= 0.1 + 1e-6  # the arm's joints within 0.1
    assert np.abs(got - np.clip(a_base, -1, 1))[:, -1].max() > 0.1  # the last action beyond it

    renv = VmapWrapper(ResidualEnv(env, onnx_base(base), reach), batch_size=2)
    s = jax.jit(renv.reset)(jax.random.PRNGKey(0))
    s2 = jax.jit(renv.step)(s, -jnp.ones((2, m)))
    np.testing.assert_allclose(s2.info["last_action"], np.clip(np.asarray(s.obs[:, n:]) - reach, -1, 1), atol=1e-6)


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "residual.action_scales.wrist=1.0",
            "config key 'residual.action_scales.wrist': no such action; the task's actions: ",
        ),
        ("residual.action_scales.gripper=-1.0", "config key 'residual.action_scales.gripper': expected a reach >= 0"),
    ],
)
def test_a_reach_for_no_action_is_one_line_exit_2_and_leaves_no_run(override, message, base_dir, tmp_path, capsys):
    assert (
        main(["train", "arm-reach", *ENV, *TINY, f"residual.base={base_dir}", override, f"runs_root={tmp_path}"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not any(tmp_path.iterdir())
