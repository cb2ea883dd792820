"""trainer=sb3 and trainer=rsl_rl through the CLI: same run directory as Brax, export to a bundle
whose ONNX output equals the library's own deterministic policy to 1e-5, and resume.

Each trainer trains quadrotor-hover once on a tiny budget (module-scoped; ~45 s each on 2 cores).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")
pytest.importorskip("rsl_rl")

import torch  # noqa: E402

from fixtures.tiny_training import TINY_PPO  # noqa: E402
from simreal.bundle import OnnxPolicy, load_bundle  # noqa: E402
from simreal.policies.run_config import make_env, resolve  # noqa: E402

pytestmark = pytest.mark.slow

TINY = [
    *TINY_PPO,
    "eval.episodes=8",
    "env.episode_length_s=0.2",
    "train.num_timesteps=384",
    "train.target_success=0",
]
CLI = [sys.executable, "-m", "simreal.cli"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.fixture(scope="module", params=["sb3", "rsl_rl"])
def run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    r = _cli("train", "quadrotor-hover", f"trainer={request.param}", *TINY, f"runs_root={root}", "--json")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    return request.param, Path(result["run_dir"]), result


def _library_policy(trainer: str, run_dir: Path, obs_size: int, action_size: int):
    """The trained library's own deterministic policy, loaded with the library's own API."""
    ckpts = sorted((run_dir / "checkpoints").glob("step_*.zip" if trainer == "sb3" else "step_*.pt"))
    if trainer == "sb3":
        from stable_baselines3 import PPO

        model = PPO.load(ckpts[-1], device="cpu")
        with np.load(ckpts[-1].with_suffix(".normalizer.npz")) as z:
            mean, var = z["mean"], z["var"]

        def act(obs):  # VecNormalize.normalize_obs, then SB3's predict (clips to the action space)
            return model.predict(np.clip((obs - mean) / np.sqrt(var + 1e-8), -10, 10), deterministic=True)[0]

        return act
    from rsl_rl.models import MLPModel
    from tensordict import TensorDict

    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers.rsl_rl import runner_cfg

    kw = {k: v for k, v in runner_cfg(load_config(run_dir))["actor"].items() if k != "class_name"}
    td = TensorDict({"policy": torch.zeros(1, obs_size)}, batch_size=[1])
    actor = MLPModel(td, {"actor": ["policy"]}, "actor", action_size, **kw)
    actor.load_state_dict(torch.load(ckpts[-1], weights_only=True)["actor_state_dict"])
    actor.eval()

    def act(obs):  # the env clips actions to [-1, 1]
        o = TensorDict({"policy": torch.as_tensor(obs)}, batch_size=[len(obs)])
        with torch.no_grad():
            return actor(o).clamp(-1, 1).numpy()

    return act


def test_run_directory_matches_brax_layout(run):
    trainer, run_dir, result = run
    assert result["env_steps"] >= 384 and "eval_success" in result
    for f in ("config.yaml", "metrics.csv", "plots/learning_curve.png"):
        assert (run_dir / f).is_file(), f
    assert list(run_dir.glob("events.out.tfevents.*"))
    header = (run_dir / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"env_steps", "wall_s", "episode_return", "success", "eval_success"} <= set(header)
    assert list((run_dir / "checkpoints").glob("step_*.zip" if trainer == "sb3" else "step_*.pt"))
    terms = {f"reward/{k}" for k in make_env(resolve("quadrotor-hover")).scales}  # logged as the brax trainer does
    assert terms and terms <= set(header), sorted(terms - set(header))
    with open(run_dir / "metrics.csv") as f:
        last = list(csv.DictReader(f))[-1]
    assert all(np.isfinite(float(last[k])) for k in terms) and any(float(last[k]) != 0.0 for k in terms)


def test_export_bundle_equals_library_policy(run):
    trainer, run_dir, _ = run
    r = _cli("export", str(run_dir))
    assert "max abs diff" in r.stdout
    bundle = load_bundle(run_dir / "bundle", robot="crazyflie2")
    assert bundle.action.names == ("thrust", "roll_rate", "pitch_rate", "yaw_rate")  # the hover default: ctbr
    n = bundle.obs_size
    obs = np.random.default_rng(0).normal(size=(256, n)).astype(np.float32)
    onnx_act = OnnxPolicy(bundle)(obs)
    lib_act = _library_policy(trainer, run_dir, n, 4)(obs)
    assert onnx_act.shape == (256, 4) and np.all(np.abs(onnx_act) <= 1.0)
    np.testing.assert_allclose(onnx_act, lib_act, atol=1e-5)


def test_eval_and_resume(run):
    trainer, run_dir, _ = run
    r = _cli("eval", str(run_dir), "--episodes", "4", "--json")
    assert '"success"' in r.stdout
    r = _cli("train", "--resume", str(run_dir), "train.num_timesteps=640", "--json")
    assert json.loads(r.stdout.strip().splitlines()[-1])["env_steps"] >= 640
    rows = (run_dir / "metrics.csv").read_text().splitlines()[1:]
    steps = [float(x.split(",")[0]) for x in rows]
    assert steps == sorted(steps) and steps[-1] >= 640
