"""trainer=sb3 on a task with camera images (``arm-push-pixels``) through the CLI: SB3's
MultiInputPolicy (a CNN on ``pixels/front``), VecNormalize on the ``state`` key alone and its saved
statistics, resume, eval and play on the run, and the export refusal (a bundle has no image
inputs yet). One tiny run (4 envs, 64x64 images, 0.2 s episodes) shared by the module."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from simreal.cli import main  # noqa: E402
from simreal.errors import SimrealError  # noqa: E402

pytestmark = pytest.mark.slow

TASK = "arm-push-pixels"
TINY = [
    "train.num_envs=4",
    "train.num_timesteps=64",
    "train.unroll_length=8",
    "train.num_minibatches=2",
    "train.num_updates_per_batch=1",
    "train.num_eval_envs=2",
    "train.policy_hidden=[16]",
    "train.value_hidden=[16]",
    "env.episode_length_s=0.2",
    "env.render_threads=1",
    "eval.episodes=2",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from simreal.sim.headless_gl import use_headless_gl

    try:
        use_headless_gl()
    except SimrealError as e:
        pytest.skip(f"no headless OpenGL here: {e}")
    root = tmp_path_factory.mktemp("pixels")
    assert main(["train", TASK, f"runs_root={root}", *TINY]) == 0  # no trainer=: the task's YAML says sb3
    return next((root / TASK).iterdir())


def _latest(run_dir: Path) -> Path:
    return sorted((run_dir / "checkpoints").glob("step_*.zip"))[-1]


def test_actor_is_sb3s_own_policy_on_the_normalised_state(run_dir):
    """The loaded actor (eval, play) equals SB3's ``PPO.load(...).predict`` on the observation
    normalised with the saved statistics, whose size is the state's alone (images not normalised)."""
    from stable_baselines3 import PPO

    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers.sb3 import DictActor, load_actor
    from simreal.sim.adapter_core import JaxBatch, to_numpy

    ckpt = _latest(run_dir)
    with np.load(ckpt.with_suffix(".normalizer.npz")) as z:
        mean, var = z["mean"], z["var"]
    env, actor = load_actor(run_dir, load_config(run_dir))
    assert isinstance(actor, DictActor)
    assert mean.shape == env.observation_size["state"] and np.all(np.isfinite(var))

    obs = to_numpy(JaxBatch(env, 3, seed=5).reset())  # state, privileged_state, pixels/front
    model = PPO.load(ckpt, device="cpu")
    assert type(model.policy.features_extractor).__name__ == "CombinedExtractor"
    seen = {
        "state": np.clip((obs["state"] - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32),
        "pixels/front": obs["pixels/front"],
    }
    expected = model.predict(seen, deterministic=True)[0]
    assert expected.shape == (3, env.action_size)
    np.testing.assert_allclose(actor.act(obs), expected, atol=1e-6)
    np.testing.assert_allclose(actor.act({k: v[0] for k, v in obs.items()}), expected[0], atol=1e-6)  # one env


def test_resume_restores_the_state_normaliser(run_dir):
    from simreal.policies import checkpoint
    from simreal.policies.run_config import make_env
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers.sb3 import Driver

    cfg = load_config(run_dir)
    ckpt = _latest(run_dir)
    driver = Driver(cfg, make_env(cfg), ckpt)
    assert driver.norm.norm_obs_keys == ["state"] and set(driver.norm.obs_rms) == {"state"}
    rms = driver.norm.obs_rms["state"]
    with np.load(ckpt.with_suffix(".normalizer.npz")) as z:
        np.testing.assert_array_equal(rms.mean, z["mean"])
        np.testing.assert_array_equal(rms.var, z["var"])
        assert rms.count == float(z["count"]) and rms.count > 1
    assert driver.env_steps == checkpoint.checkpoint_steps(ckpt) >= 64


def test_eval_and_play_on_the_run(run_dir, tmp_path, capsys):
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    stats = r[r["trained_on"]]
    assert stats["episodes"] == 2 and 0.0 <= stats["success"] <= 1.0

    video = tmp_path / "play.mp4"
    assert main(["play", str(run_dir), "--steps", "3", "--width", "64", "--height", "48", "--out", str(video)]) == 0
    assert video.stat().st_size > 0


def test_export_is_refused_in_one_line_naming_the_bundle_field(run_dir, capsys):
    capsys.readouterr()
    assert main(["export", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bundle field 'observation'" in err[0], err
    assert "pixels/front" in err[0] and "no image inputs" in err[0], err
    assert not (run_dir / "bundle").exists()
