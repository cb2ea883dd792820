"""Training resumes bit-for-bit, export matches JAX to 1e-5, bad bundles name their field,
and the CLI runs train -> eval -> export on a tiny budget."""

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml

from simreal.errors import BundleError
from simreal.bundle import OnnxPolicy, load_bundle
from simreal.policies import checkpoint as ckpt
from simreal.policies.export import check_export, export_bundle
from simreal.policies.ppo import PPO
from simreal.policies.run_config import make_env, resolve

TINY = ["train.num_envs=16", "train.unroll_length=8", "train.num_minibatches=2", "train.num_updates_per_batch=1",
        "train.policy_hidden=[16,16]", "train.value_hidden=[16]", "train.num_eval_envs=8", "eval.episodes=8",
        "env.episode_length_s=0.5", "train.num_timesteps=384", "train.target_success=0"]


@pytest.fixture(scope="module")
def ppo():
    cfg = resolve("quadrotor-hover", TINY)
    return cfg, PPO(make_env(cfg, backend="native"), cfg.train, cfg.seed)


def test_resume_continues_exactly(ppo, tmp_path):
    _, algo = ppo
    ts = algo.iterate(algo.init())[0]
    ckpt.save_pytree(tmp_path / "step.npz", ts)
    for _ in range(2):
        ts = algo.iterate(ts)[0]
    resumed = ckpt.load_pytree(tmp_path / "step.npz", algo.init())
    for _ in range(2):
        resumed = algo.iterate(resumed)[0]
    same = jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), ts, resumed)
    assert all(jax.tree.leaves(same))
    assert int(resumed.env_steps) == 3 * algo.steps_per_iteration
    # the optimizer state (Adam moments) is part of what was restored
    mu = jax.tree.leaves(resumed.optimizer_state)
    assert any(np.abs(np.asarray(x)).sum() > 0 for x in mu if np.asarray(x).size > 1)


def test_checkpoint_from_other_config_is_refused(ppo, tmp_path):
    _, algo = ppo
    ckpt.save_pytree(tmp_path / "step.npz", algo.init())
    cfg2 = resolve("quadrotor-hover", TINY + ["train.policy_hidden=[8]"])
    other = PPO(make_env(cfg2, backend="native"), cfg2.train, 0)
    with pytest.raises(Exception, match="step.npz"):
        ckpt.load_pytree(tmp_path / "step.npz", other.init())


def test_export_matches_jax(ppo, tmp_path):
    cfg, algo = ppo
    ts = algo.iterate(algo.init())[0]
    norm, pol = algo.policy_params(ts)
    out = export_bundle(tmp_path, cfg, algo.env, norm, pol)
    assert check_export(out, algo.make_policy, (norm, pol), algo.env.observation_size, n=512) < 1e-5
    b = load_bundle(out, robot="crazyflie2", obs_size=22, action_size=4)
    assert b.obs_names == ("pos_error_w", "rot_mat_wb", "lin_vel_w", "ang_vel_b", "last_action")
    assert b.action.names == ("m1", "m2", "m3", "m4")
    np.testing.assert_allclose(b.action.to_physical(np.array([-1, 0, 1, 2.0])), [0, 0.075, 0.15, 0.15])
    assert b.task_params["target_pos_w"] == [0.0, 0.0, 1.0]
    assert OnnxPolicy(b)(np.zeros(22)).shape == (4,)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(format_version=99), "format_version"),
    (lambda d: d["observation"].update(size=21), "observation.size"),
    (lambda d: d["action"]["scale"].pop(), "action.scale"),
    (lambda d: d.pop("control_rate_hz"), "control_rate_hz"),
    (lambda d: d["onnx"].update(file="missing.onnx"), "onnx.file"),
])
def test_bad_bundle_names_field(ppo, tmp_path, edit, field):
    cfg, algo = ppo
    ts = algo.init()
    out = export_bundle(tmp_path, cfg, algo.env, *algo.policy_params(ts))
    data = yaml.safe_load((out / "bundle.yaml").read_text())
    edit(data)
    (out / "bundle.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(BundleError, match=f"'{field}'"):
        load_bundle(out)


def test_bundle_for_other_robot_refused(ppo, tmp_path):
    cfg, algo = ppo
    out = export_bundle(tmp_path, cfg, algo.env, *algo.policy_params(algo.init()))
    with pytest.raises(BundleError, match="'robot'"):
        load_bundle(out, robot="g1")
    with pytest.raises(BundleError, match="'observation.size'"):
        load_bundle(out, obs_size=23)


def test_cli_train_eval_export_smoke(tmp_path):
    root = tmp_path / "runs"
    cmd = [sys.executable, "-m", "simreal.cli"]
    r = subprocess.run(cmd + ["train", "quadrotor-hover", *TINY, f"runs_root={root}", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    run_dir = Path(result["run_dir"])
    assert result["env_steps"] >= 384
    for f in ("config.yaml", "metrics.csv", "plots/learning_curve.png"):
        assert (run_dir / f).is_file(), f
    assert ckpt.latest_checkpoint(run_dir / "checkpoints") is not None
    assert list(run_dir.glob("events.out.tfevents.*"))
    r = subprocess.run(cmd + ["eval", str(run_dir), "--episodes", "8", "--backend", "mjx", "--json"],
                       capture_output=True, text=True, timeout=600)
    report = json.loads(r.stdout)
    assert r.returncode == (0 if report["sim_to_sim_passed"] else 1), r.stderr
    assert set(report) >= {"native", "mjx", "gap"} and "success" in report["mjx"]
    r = subprocess.run(cmd + ["export", str(run_dir)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (run_dir / "bundle" / "policy.onnx").is_file()
    r = subprocess.run(cmd + ["train", "--resume", str(run_dir), "train.num_timesteps=768"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["train"]["num_timesteps"] == 768
