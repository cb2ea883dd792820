"""``train.estimate``: the state estimator learned beside rsl_rl's policy
(simreal/policies/trainers/estimator.py): which terms it may estimate, that regression and not
PPO moves it, that the deployed graph is the model's policy, and that a resume keeps it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rsl_rl")

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from simreal.errors import ConfigError  # noqa: E402
from simreal.policies.run_config import make_env, resolve  # noqa: E402
from simreal.policies.trainers import estimator as est  # noqa: E402
from simreal.policies.trainers.rsl_rl import _actor, runner_cfg  # noqa: E402


@pytest.fixture(scope="module")
def env():
    return make_env(resolve("g1-velocity", ["train.num_envs=4"]))


def _model(n_obs: int, n_act: int, estimate_dim: int) -> est.EstimatorModel:
    torch.manual_seed(0)
    cfg = resolve("g1-velocity", ["train.estimate=[lin_vel_b]", "train.policy_hidden=[32]"])
    actor = runner_cfg(cfg, estimate_dim)["actor"]
    assert actor["class_name"].endswith("estimator:EstimatorModel")
    kwargs = {k: v for k, v in actor.items() if k != "class_name"}
    td = TensorDict({"policy": torch.zeros(1, n_obs)}, batch_size=[1])
    return est.EstimatorModel(td, {"actor": ["policy"]}, "actor", n_act, **kwargs)


def test_the_estimate_is_a_critic_term_the_actor_does_not_observe(env):
    (s,) = est.estimate_slices(env, ["lin_vel_b"])
    assert (s.start, s.stop) == (0, 3)  # g1-velocity's critic: lin_vel_b first
    with pytest.raises(ConfigError, match=r"train.estimate.*'gravity_b': the actor observes it already"):
        est.estimate_slices(env, ["gravity_b"])
    with pytest.raises(ConfigError, match=r"train.estimate.*'foot_height': not a critic observation term.*lin_vel_b"):
        est.estimate_slices(env, ["foot_height"])


def test_a_trainer_without_an_estimator_refuses_the_setting():
    with pytest.raises(ConfigError, match=r"train.estimate.*trainer=brax learns no estimator; use trainer=rsl_rl"):
        resolve("g1-velocity", ["trainer=brax", "train.symmetry=false", "train.estimate=[lin_vel_b]"])


def test_regression_fits_the_estimator_and_ppo_leaves_it_alone():
    n_obs, n_act = 10, 4
    model = _model(n_obs, n_act, 3)
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(n_obs, 3, generator=gen)
    policy = torch.randn(24, 16, n_obs, generator=gen)  # (T, N, n): a rollout
    critic = torch.cat([policy @ w, torch.randn(24, 16, 5, generator=gen)], dim=-1)
    rollout = TensorDict({"policy": policy, "critic": critic}, batch_size=[24, 16])
    fit = est.EstimatorFit(model, [slice(0, 3)], epochs=4, minibatches=4, learning_rate=3e-3)
    first = fit.fit(rollout)["estimator_rms"]
    for _ in range(40):
        last = fit.fit(rollout)["estimator_rms"]
    assert last < 0.2 * first, (first, last)

    # PPO's loss reaches the actor's MLP and not the estimator (the estimate enters detached)
    model.zero_grad()
    model(TensorDict({"policy": policy[0]}, batch_size=[16]), stochastic_output=True)
    model.get_output_log_prob(torch.zeros(16, n_act)).sum().backward()
    assert all(p.grad is None for p in model.estimator.parameters())
    assert all(p.grad is not None for p in model.mlp.parameters())


def test_the_deployed_actor_and_its_onnx_graph_are_the_models_policy():
    import onnxruntime as ort

    from simreal.policies import torch_policy

    n_obs, n_act = 10, 4
    model = _model(n_obs, n_act, 3).eval()
    obs = torch.randn(64, n_obs, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(TensorDict({"policy": obs}, batch_size=[64])).clamp(-1, 1).numpy()
    deployed = _actor(model)
    np.testing.assert_allclose(deployed.act(obs.numpy()), want, atol=1e-6)
    graph = ort.InferenceSession(torch_policy.to_onnx(deployed).SerializeToString())
    np.testing.assert_allclose(graph.run(None, {"obs": obs.numpy()})[0], want, atol=1e-5)


def test_a_resume_keeps_the_estimator():
    from simreal.cli.train import _check_resume

    base = resolve("g1-velocity", ["train.estimate=[lin_vel_b]"])
    with pytest.raises(ConfigError, match=r"train.estimate.*a resumed run keeps what its checkpoint is shaped by"):
        _check_resume(base, resolve("g1-velocity"), "config.yaml")
    _check_resume(base, resolve("g1-velocity", ["train.estimate=[lin_vel_b]"]), "config.yaml")


def test_a_refused_estimate_is_one_line_and_leaves_no_run_directory(tmp_path, capsys):
    from simreal.cli import main

    args = ["train", "quadrotor-hover", "trainer=rsl_rl", "train.estimate=[lin_vel_b]", f"runs_root={tmp_path}"]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "config key 'train.estimate': 'lin_vel_b'" in err, err
    assert not any(tmp_path.iterdir()) and out == ""


@pytest.mark.slow
def test_train_export_with_an_estimator(tmp_path):
    """The G1 trains a few iterations with the estimator, logs its error, exports a bundle whose
    ONNX graph is the checkpoint's policy."""
    cli = [sys.executable, "-m", "simreal.cli"]
    tiny = ["train.num_envs=8", "train.unroll_length=4", "train.num_minibatches=2", "train.num_updates_per_batch=1"]
    tiny += ["train.policy_hidden=[16]", "train.value_hidden=[16]", "train.estimator_hidden=[16]"]
    tiny += ["train.num_eval_envs=4", "eval.episodes=4", "env.episode_length_s=0.2", "train.num_timesteps=64"]
    r = subprocess.run(
        [*cli, "train", "g1-velocity", "train.estimate=[lin_vel_b]", *tiny, f"runs_root={tmp_path}", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = json.loads(r.stdout.strip().splitlines()[-1])["run_dir"]
    header = open(f"{run_dir}/metrics.csv").read().splitlines()[0].split(",")
    assert {"loss/estimator", "loss/estimator_rms"} <= set(header)
    r = subprocess.run([*cli, "export", run_dir], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    diff = float(r.stdout.split("max abs diff")[1].split(")")[0])
    assert diff < 1e-5
