"""The command line turns JAX's persistent compilation cache on (simreal/compile_cache.py)."""

import os

from fixtures.tiny_training import TINY_PPO
from simreal import compile_cache


def test_the_cache_goes_under_xdg_cache_home_unless_the_user_named_one(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.ENV, raising=False)
    monkeypatch.delenv(compile_cache.SWITCH, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.configure() == tmp_path / "simreal" / "jax"
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "mine"))
    assert compile_cache.configure() == tmp_path / "mine"


def test_simreal_compile_cache_0_leaves_jax_alone(monkeypatch):
    monkeypatch.delenv(compile_cache.ENV, raising=False)
    monkeypatch.setenv(compile_cache.SWITCH, "0")
    assert compile_cache.configure() is None
    assert compile_cache.ENV not in os.environ


def test_a_second_run_of_the_main_job_finds_every_program_in_the_cache(tmp_path):
    """`simreal train quadrotor-hover` (the rigid backend: no host callback) stores its programs
    (the training step, the evaluation) in the cache; a second run with the same config stores
    nothing new: it loaded them all. A host callback in a program (the native backend's physics)
    keeps it out of the cache, and the first assertion fails."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in (compile_cache.ENV, compile_cache.SWITCH)}
    env.update(XDG_CACHE_HOME=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    tiny = [
        *TINY_PPO,
        "env.episode_length_s=0.5",
        "train.num_timesteps=256",
        "train.target_success=0",
        f"runs_root={tmp_path / 'runs'}",
    ]
    cmd = [sys.executable, "-m", "simreal.cli", "train", "quadrotor-hover", *tiny]

    def stored() -> set[str]:
        return {p.name for p in (cache / "simreal" / "jax").glob("*") if p.is_file()}

    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    first = stored()
    programs = {name.split("-")[0] for name in first}
    assert {"jit__iterate", "jit_evaluation_episodes"} <= programs, programs  # the training step, the evaluation
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    assert stored() == first
