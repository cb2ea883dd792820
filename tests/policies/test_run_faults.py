"""Runs survive faults: a stop signal saves the last iteration and exits 130/143, resume says
where it continues (or that nothing is left), a damaged latest checkpoint falls back to the
newest intact one, a writer killed mid-checkpoint leaves the previous one intact, early stop
needs a confidence bound, stable-baselines3 leaves no /tmp/SB3-* folder behind, and runs started
in the same second get folders of their own."""

import math
import os
import re
import signal
import subprocess
import sys
import time
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from simreal import rundir
from simreal.errors import DataFileError
from simreal.policies import checkpoint as ckpt
from simreal.policies.trainers import early_stop
from simreal.policies.trainers import loop as loop_common

CLI = [sys.executable, "-m", "simreal.cli"]

# -- run folders ---------------------------------------------------------------------------------


def test_envs_that_do_not_split_over_the_devices_leave_no_run_directory(tmp_path, capsys):
    from simreal.cli import main

    assert main(["train", "quadrotor-hover", "train.devices=2", f"runs_root={tmp_path}"]) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "config key 'train.devices': 2 requested, 1 cpu device" in err, err
    assert not any(tmp_path.iterdir()) and out == ""


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    """A sweep launches several runs at once: each claims its own folder (the second one used
    to fail with FileExistsError when both saw the timestamp free)."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(rundir.time, "strftime", lambda fmt: "20261124-120000")
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda _: rundir.new_run_dir(tmp_path, "quadrotor-hover"), range(8)))
    assert len(set(paths)) == 8
    assert sorted(p.name for p in paths) == ["20261124-120000"] + [f"20261124-120000-{i}" for i in range(1, 8)]
    assert all((p / "checkpoints").is_dir() and (p / "plots").is_dir() for p in paths)


# -- the stop rule's bound ------------------------------------------------------------------------


def _wilson_by_hand(k: int, n: int, confidence: float = 0.95) -> float:
    z = norm.ppf(confidence)
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n)


@pytest.mark.parametrize("k, n", [(0, 10), (7, 10), (122, 128), (128, 128), (488, 512), (495, 512), (512, 512)])
def test_wilson_lower_bound_matches_the_formula_and_scipy(k, n):
    from scipy.stats import binomtest

    assert early_stop.success_lower_bound(k / n, n) == pytest.approx(_wilson_by_hand(k, n), abs=1e-9)
    scipy_low = binomtest(k, n, alternative="greater").proportion_ci(0.95, method="wilson").low
    assert early_stop.success_lower_bound(k / n, n) == pytest.approx(scipy_low, abs=1e-9)


def test_wilson_lower_bound_known_values_and_shape():
    z2 = norm.ppf(0.95) ** 2
    assert early_stop.success_lower_bound(1.0, 128) == pytest.approx(128 / (128 + z2))  # n of n: n / (n + z^2)
    assert early_stop.success_lower_bound(0.0, 50) == pytest.approx(0.0, abs=1e-12)
    assert early_stop.success_lower_bound(0.9, 0) == 0.0
    # more episodes at the same rate: a tighter (higher) bound, always below the rate
    bounds = [early_stop.success_lower_bound(0.96, n) for n in (25, 100, 400, 1600)]
    assert all(a < b < 0.96 for a, b in zip(bounds, bounds[1:]))
    # the case: 95.3% on 128 episodes is not evidence of >= 95%
    assert early_stop.success_lower_bound(122 / 128, 128) < 0.93


@pytest.mark.parametrize("p", [0.9, 0.95, 0.99])
def test_wilson_lower_bound_covers_the_true_rate(p):
    """P(bound > true p) is about 5% (one-sided 95%), never far above it: simulated."""
    rng = np.random.default_rng(int(p * 1000))
    n = 512
    k = rng.binomial(n, p, size=2000)
    above = np.mean([early_stop.success_lower_bound(x / n, n) > p for x in k])
    assert above <= 0.075, above


def test_stop_rule_words():
    r = early_stop.with_bound({"success": 495 / 512, "episodes": 512, "crash": 0.0})
    assert early_stop.reached(r, 0.95) and not early_stop.reached(r, 0.96) and not early_stop.reached(r, 0.0)
    assert early_stop.describe(r, 0.95) == "eval success 0.967 on 512 episodes, 95% lower bound 0.951 >= target 0.95"
    assert "< target 0.96" in early_stop.describe(r, 0.96)
    assert "success_lower" not in early_stop.with_bound({"success": float("nan"), "episodes": 0})


@pytest.mark.parametrize("n, target", [(512, 0.95), (512, 0.9), (128, 0.95), (2000, 0.97)])
def test_successes_needed_is_where_the_bound_crosses_the_target(n, target):
    k = early_stop.successes_needed(n, target)
    assert early_stop.success_lower_bound(k / n, n) >= target > early_stop.success_lower_bound((k - 1) / n, n)


def test_a_target_no_confirmation_can_reach_runs_none(tmp_path):
    learner = FakeLearner(confirm_success=[1.0])
    result = _run(tmp_path, learner, target_success=0.999, num_timesteps=200)  # 512 of 512 bounds at 0.9947
    assert result.stop == "budget" and all(e[0] is None for e in learner.evals), learner.evals


def test_successes_needed_when_no_count_is_enough():
    assert early_stop.successes_needed(512, 0.95) == 495  # the module docstring's figure
    assert early_stop.successes_needed(10, 0.99) == 11  # 10 of 10 bounds at 0.79: none passes


def _chunked(monkeypatch, failures_per_chunk: list[int], batch: int = 128):
    """ppo.evaluate over a stand-in episode program whose chunk i fails failures_per_chunk[i] episodes."""
    import jax.numpy as jnp

    from simreal.policies.rl import ppo

    calls = []

    def program(env, make_policy, num_envs, deterministic):
        def run(params, key):
            f = failures_per_chunk[len(calls)]
            calls.append(f)
            seen = jnp.ones(num_envs, bool)
            ok = jnp.arange(num_envs) >= f
            return seen, {"episode/done": seen.astype(float), "episode/success": ok.astype(float)}

        return run

    monkeypatch.setattr(ppo, "_episode_program", program)
    return ppo, calls


def test_a_confirmation_that_cannot_pass_stops_after_the_chunk_that_shows_it(monkeypatch):
    ppo, calls = _chunked(monkeypatch, [6, 7, 6, 5])
    r = ppo.evaluate(None, None, None, 512, seed=0, batch=128, max_failures=17)
    assert calls == [6, 7, 6] and r["episodes"] == 384  # 19 failures > 17 after the third chunk
    assert r["success"] == pytest.approx(1 - 19 / 384)
    assert not early_stop.reached(early_stop.with_bound(r), 0.95)
    words = early_stop.describe(early_stop.with_bound({**r, "episodes_planned": 512}), 0.95)
    assert words.startswith("eval success 0.951 on 384 episodes (of 512: stopped once it could no longer pass)")


def test_a_confirmation_that_can_still_pass_runs_every_chunk(monkeypatch):
    ppo, calls = _chunked(monkeypatch, [5, 4, 4, 4])  # 17 failures: 495 of 512, the bound passes
    r = ppo.evaluate(None, None, None, 512, seed=0, batch=128, max_failures=17)
    assert calls == [5, 4, 4, 4] and r["episodes"] == 512 and early_stop.reached(early_stop.with_bound(r), 0.95)
    ppo, calls = _chunked(monkeypatch, [40, 40, 40, 40])
    r = ppo.evaluate(None, None, None, 512, seed=0, batch=128)  # no max_failures: every episode
    assert len(calls) == 4 and r["episodes"] == 512


# -- the loop, with a stand-in learner ------------------------------------------------------------


class FakeLearner:
    """100 env steps per iteration; every episode succeeds in training; evaluation's success per
    call from ``confirm_success`` (confirming calls) or 1.0 (periodic); can signal itself."""

    def __init__(self, steps: int = 0, confirm_success=(), kill_at: int | None = None, sig=signal.SIGINT):
        self.steps, self.confirm_success = steps, list(confirm_success)
        self.kill_at, self.sig = kill_at, sig
        self.evals: list[tuple] = []
        self.prepared: list[int] = []  # env steps at each prepare_evaluation call

    @property
    def env_steps(self) -> int:
        return self.steps

    def iterate(self) -> dict[str, float]:
        self.steps += 100
        if self.kill_at is not None and self.steps >= self.kill_at:
            os.kill(os.getpid(), self.sig)  # as if Ctrl-C came during the iteration
            self.kill_at = None
        return {"loss/total": 1.0, "episode/success": 1.0, "episode/done": 1.0}

    def save(self, ckpt_dir: Path) -> Path:
        path = ckpt.checkpoint_path(ckpt_dir, self.steps)
        ckpt.save_pytree(path, {"w": np.full(3, self.steps, np.float32)})
        ckpt.prune(ckpt_dir)
        return path

    def prepare_evaluation(self) -> None:
        self.prepared.append(self.steps)

    def evaluate(
        self, episodes: int | None = None, seed: int | None = None, max_failures: int | None = None
    ) -> dict[str, float]:
        self.evals.append((episodes, seed, max_failures))
        n = episodes or 128
        s = self.confirm_success.pop(0) if episodes is not None else 1.0
        return {"success": round(s * n) / n, "episodes": n}


def _cfg(**train) -> types.SimpleNamespace:
    t = dict(
        num_timesteps=1000,
        eval_every_steps=0,
        num_eval_envs=128,
        target_success=0.95,
        checkpoint_every_s=1e9,
        max_wall_s=0.0,
        keep_best=False,
    )
    t.update(train)
    return types.SimpleNamespace(task="fake", seed=7, train=types.SimpleNamespace(**t))


def _run(tmp_path: Path, learner: FakeLearner, **train) -> loop_common.TrainResult:
    (tmp_path / "checkpoints").mkdir(exist_ok=True)
    return loop_common.run(tmp_path, _cfg(**train), learner, time.time(), quiet=True)


def test_early_stop_needs_the_confirming_evaluations_bound(tmp_path):
    # periodic evals read 128/128; the first confirmation (0.94 on 512) fails, the second (0.98) passes
    learner = FakeLearner(confirm_success=[0.94, 0.98])
    result = _run(tmp_path, learner)
    assert result.stop == "target" and result.reached_target
    # confirmations from seed + 2, allowed to stop once 18 of 512 failed (495 successes are needed)
    assert learner.evals == [(None, None, None), (512, 9, 17), (None, None, None), (512, 9, 17)]
    assert learner.prepared == [100]  # the evaluation's compile starts once, after the first iteration
    assert result.env_steps == 200 and result.eval["episodes"] == 512
    assert result.eval["success_lower"] >= 0.95
    assert result.checkpoint == ckpt.checkpoint_path(tmp_path / "checkpoints", 200) and result.checkpoint.is_file()
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0]
    assert "eval_success_lower" in header and "eval_episodes" in header
    # resuming it: the target stands, nothing left to do (no iteration, no evaluation)
    again = FakeLearner(steps=200)
    result = _run(tmp_path, again, num_timesteps=5000)
    assert result.stop == "nothing_left" and result.reached_target and again.evals == again.prepared == []
    assert result.eval["success_lower"] >= 0.95
    # a higher target: training goes on
    result = _run(tmp_path, FakeLearner(steps=200, confirm_success=[0.9] * 10), target_success=0.99, num_timesteps=400)
    assert result.stop == "budget" and result.env_steps == 400


def test_a_big_periodic_evaluation_is_its_own_confirmation(tmp_path):
    learner = FakeLearner()
    result = _run(tmp_path, learner, num_eval_envs=512)
    assert result.stop == "target" and learner.evals == [(None, None, None)]


def _eval_steps(run_dir: Path) -> list[int]:
    from simreal.rundir import MetricsCsv

    return [int(r["env_steps"]) for r in MetricsCsv(run_dir / "metrics.csv").rows if "eval_episodes" in r]


@pytest.mark.parametrize("target", [0.0, 0.95])
def test_a_resumed_run_evaluates_where_the_uninterrupted_one_did(tmp_path, target):
    """Stopped at 400 env steps and resumed, a run evaluates at the same steps as one that was not
    (it once counted the period from the resume point: 700 and 1000, not 600 and 900); with a
    target, the training-success triggers move the schedule, and the resumed run keeps that too."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    for d in (whole, cut):
        d.mkdir()
    kw = dict(target_success=target, eval_every_steps=300, num_timesteps=1000)
    _run(whole, FakeLearner(confirm_success=[0.9] * 20), **kw)
    assert _run(cut, FakeLearner(kill_at=400, confirm_success=[0.9] * 20), **kw).stop == "signal"
    _run(cut, FakeLearner(steps=400, confirm_success=[0.9] * 20), **kw)
    assert _eval_steps(cut) == _eval_steps(whole), (_eval_steps(cut), _eval_steps(whole))
    assert len(_eval_steps(whole)) >= 4


def test_resuming_a_run_whose_checkpoints_are_gone_is_refused(tmp_path):
    """Its metrics.csv records training: starting over from step 0 would overwrite that history
    (it once did, with only a line on stderr); one line naming the checkpoints folder."""
    _run(tmp_path, FakeLearner(), target_success=0.0)
    for f in (tmp_path / "checkpoints").iterdir():
        f.unlink()
    before = (tmp_path / "metrics.csv").read_text()
    with pytest.raises(DataFileError, match="no checkpoint, but metrics.csv records 1000 env steps"):
        _run(tmp_path, FakeLearner(), target_success=0.0)
    assert (tmp_path / "metrics.csv").read_text() == before


def test_a_kill_during_the_final_evaluation_loses_no_training(tmp_path):
    """The last iteration is saved before the final evaluation starts (a long evaluation and a
    scheduler's second signal once left a run with no checkpoint and no metrics.csv)."""

    class DiesInEvaluation(FakeLearner):
        def evaluate(self, *a, **k):
            raise KeyboardInterrupt  # as a kill would end it

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, DiesInEvaluation(), target_success=0.0, checkpoint_every_s=1e9)
    assert ckpt.latest_checkpoint(tmp_path / "checkpoints") == ckpt.checkpoint_path(tmp_path / "checkpoints", 1000)
    assert len((tmp_path / "metrics.csv").read_text().splitlines()) == 11  # the header and 10 iterations


@pytest.mark.parametrize("damage", [b"env_steps,loss\n100,1.0\n200", "\x80\x81garbage".encode("latin-1")])
def test_a_damaged_metrics_csv_is_one_line_naming_it(tmp_path, damage):
    from simreal.rundir import MetricsCsv

    (tmp_path / "metrics.csv").write_bytes(damage)
    with pytest.raises(DataFileError, match="metrics.csv: .*move it aside"):
        MetricsCsv(tmp_path / "metrics.csv")


def test_a_run_stopped_by_the_clock_still_evaluates_its_policy(tmp_path):
    """``train.max_wall_s`` reached: the final evaluation runs (as at the budget's end), so the
    summary says how good the policy is; it once ended with no figure at all."""
    learner = FakeLearner()
    result = _run(tmp_path, learner, target_success=0.0, max_wall_s=1e-9)
    assert result.stop == "wall_time" and result.env_steps == 100
    assert learner.evals == [(None, None, None)] and result.eval["episodes"] == 128
    assert result.checkpoint == ckpt.checkpoint_path(tmp_path / "checkpoints", 100)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_saves_the_last_iteration_and_restores_handlers(tmp_path, sig):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    learner = FakeLearner(kill_at=300, sig=sig)
    result = _run(tmp_path, learner, target_success=0.0)
    assert result.stop == "signal" and result.signum == sig and result.env_steps == 300
    assert result.checkpoint == ckpt.checkpoint_path(tmp_path / "checkpoints", 300)
    assert ckpt.load_pytree(result.checkpoint, {"w": np.zeros(3, np.float32)})["w"].tolist() == [300.0] * 3
    assert learner.evals == []  # no final evaluation on the way out
    assert {s: signal.getsignal(s) for s in before} == before
    # resumed and stopped again: the iteration under way finishes and is saved
    result = _run(tmp_path, FakeLearner(steps=300, kill_at=0), target_success=0.0)
    assert result.stop == "signal" and result.env_steps == 400 and result.checkpoint.name.endswith("400.npz")
    # budget already spent: nothing left, exit-0 material
    result = _run(tmp_path, FakeLearner(steps=1000), target_success=0.0)
    assert result.stop == "nothing_left" and not result.reached_target and result.checkpoint is None


def test_a_signal_before_the_first_iteration_saves_nothing(tmp_path):
    from simreal.stop_signal import stop_on_signals

    learner = FakeLearner()
    with stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)  # during setup (env build, first compile)
        assert stop.requested and stop.exit_code == 143
        result = _run(tmp_path, learner)
    assert result.stop == "signal" and result.checkpoint is None and result.env_steps == 0
    assert not list((tmp_path / "checkpoints").iterdir())


def test_a_second_signal_ends_the_process_at_once():
    code = (
        "import os, signal, time\n"
        "from simreal.stop_signal import stop_on_signals\n"
        "with stop_on_signals() as stop:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    print('first', stop.requested, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
        "    print('still running')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 130 and r.stdout == "first True\n", (r.stdout, r.stderr)
    assert "SIGINT again: stopping now" in r.stderr and "Traceback" not in r.stderr


# -- damaged checkpoints --------------------------------------------------------------------------


def _brax_like(ckpt_dir: Path, steps: int) -> Path:
    path = ckpt.checkpoint_path(ckpt_dir, steps)
    ckpt.save_pytree(path, {"w": np.full(1000, steps, np.float32)})
    return path


def test_damaged_latest_checkpoint_falls_back_with_one_warning(tmp_path, capsys):
    good = _brax_like(tmp_path, 100)
    rnd = ckpt.checkpoint_path(tmp_path, 200)
    rnd.write_bytes(np.random.default_rng(0).bytes(5000))
    cut = _brax_like(tmp_path, 300)
    cut.write_bytes(cut.read_bytes()[:2000])
    assert ckpt.latest_checkpoint(tmp_path) == good
    assert ckpt.latest_checkpoint(tmp_path) == good
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("warning: skipping damaged checkpoint") for line in err[:2])
    assert cut.name in err[0] and rnd.name in err[1]
    assert err[2] == f"warning: using the newest intact checkpoint instead, {good}"
    assert "pickle" not in "".join(err) and "not a zip archive" in err[1]
    template = {"w": np.zeros(1000, np.float32)}
    assert ckpt.load_pytree(good, template)["w"][0] == 100
    with pytest.raises(DataFileError, match="not a zip archive") as e:
        ckpt.load_pytree(rnd, template)
    assert "pickle" not in str(e.value)
    # a flipped byte inside a member: the CRC catches it
    flipped = bytearray(good.read_bytes())
    flipped[len(flipped) // 3] ^= 0xFF
    good.write_bytes(bytes(flipped))
    assert "CRC" in ckpt.damage(good) or "damaged zip" in ckpt.damage(good)
    # none intact: an error naming them, not a silent fresh start
    with pytest.raises(DataFileError, match="no intact checkpoint.*step_000000000300.npz.*step_000000000200.npz"):
        ckpt.latest_checkpoint(tmp_path)
    assert ckpt.latest_checkpoint(tmp_path / "nothing_here") is None


def test_fallback_covers_sb3_side_files_and_torch_checkpoints(tmp_path, capsys):
    # sb3: step_N.zip plus step_N.normalizer.npz; a damaged side file damages the checkpoint
    for steps in (64, 128):
        with zipfile.ZipFile(ckpt.checkpoint_path(tmp_path, steps, "zip"), "w") as z:
            z.writestr("data", "{}")
        ckpt.save_pytree(tmp_path / f"step_{steps:012d}.normalizer.npz", {"mean": np.zeros(3)})
    side = tmp_path / "step_000000000128.normalizer.npz"
    side.write_bytes(side.read_bytes()[:-30])
    assert ckpt.require_latest(tmp_path, "zip") == ckpt.checkpoint_path(tmp_path, 64, "zip")
    assert side.name in capsys.readouterr().err
    # rsl_rl: torch.save's .pt (a zip too)
    torch = pytest.importorskip("torch")
    for steps in (64, 128):
        torch.save({"iter": steps, "w": torch.zeros(100)}, ckpt.checkpoint_path(tmp_path, steps, "pt"))
    latest = ckpt.checkpoint_path(tmp_path, 128, "pt")
    latest.write_bytes(latest.read_bytes()[:500])
    assert ckpt.latest_checkpoint(tmp_path, "pt") == ckpt.checkpoint_path(tmp_path, 64, "pt")
    assert latest.name in capsys.readouterr().err


CARTPOLE = [
    "backend=native",
    "train.num_envs=8",
    "train.unroll_length=8",
    "train.num_minibatches=2",
    "train.num_updates_per_batch=1",
    "train.policy_hidden=[16,16]",
    "train.value_hidden=[16]",
    "train.num_eval_envs=4",
    "train.eval_every_steps=0",
    "train.target_success=0",
    "eval.episodes=4",
    "env.episode_length_s=0.1",
    "train.num_timesteps=64",
]


@pytest.mark.slow
def test_every_verb_falls_back_past_a_damaged_checkpoint(tmp_path, capsys, monkeypatch):
    from simreal.cli import main

    assert main(["train", "cartpole-balance", *CARTPOLE, f"runs_root={tmp_path}"]) == 0
    run_dir = next((tmp_path / "cartpole-balance").iterdir())
    good = ckpt.latest_checkpoint(run_dir / "checkpoints")
    bad = ckpt.checkpoint_path(run_dir / "checkpoints", ckpt.checkpoint_steps(good) + 1000)
    bad.write_bytes(np.random.default_rng(1).bytes(4096))
    verbs = (
        ["eval", str(run_dir)],
        ["export", str(run_dir)],
        ["play", str(run_dir), "--steps", "3", "--width", "64", "--height", "48"],
        ["train", "--resume", str(run_dir), "train.num_timesteps=128"],
    )
    for argv in verbs:
        monkeypatch.setattr(ckpt, "_warned", set())  # each verb as a fresh process would
        capsys.readouterr()
        assert main(argv) == 0, argv
        err = capsys.readouterr().err
        assert err.count(f"warning: skipping damaged checkpoint {bad}: not a zip archive") == 1, (argv, err)
    assert f"resume: continuing from {good}" in err


def test_eval_json_names_the_checkpoint_it_evaluated_past_a_damaged_newest(tmp_path, capsys, monkeypatch):
    """A run whose newest checkpoint is damaged is evaluated at an older step with exit 0 and a
    warning on stderr; the JSON once did not say which step that was."""
    import json

    from simreal.cli import main
    from simreal.policies.run_config import resolve
    from simreal.policies.run_dir import RunDir
    from simreal.policies.trainers.brax import BraxTrainer

    run_dir = RunDir.create(resolve("cartpole-balance", []), tmp_path / "run").path
    good = ckpt.checkpoint_path(run_dir / "checkpoints", 64)
    ckpt.save_pytree(good, {"w": np.zeros(3, np.float32)})
    bad = ckpt.checkpoint_path(run_dir / "checkpoints", 128)
    bad.write_bytes(b"not a zip")
    seen = []
    monkeypatch.setattr(
        BraxTrainer,
        "evaluate",
        lambda self, run_dir, cfg, n, **kw: (
            seen.append(self.policy_checkpoint(run_dir, cfg)) or {"success": 1.0, "episodes": n}
        ),
    )
    assert main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert seen == [good]  # what the trainer read is what the JSON names
    assert out["checkpoint"] == "checkpoints/step_000000000064.npz" and out["env_steps"] == 64
    assert out["skipped"] == ["checkpoints/step_000000000128.npz"]
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "checkpoint checkpoints/step_000000000064.npz (64 env steps); "
        "newer, damaged, skipped: checkpoints/step_000000000128.npz"
    )


# -- the best evaluation's checkpoint (train.keep_best) ------------------------------------------


class RankedLearner(FakeLearner):
    """FakeLearner whose periodic evaluations read ``periodic`` in turn (128 episodes each)."""

    def __init__(self, periodic, steps: int = 0):
        super().__init__(steps=steps)
        self.periodic = list(periodic)

    def evaluate(
        self, episodes: int | None = None, seed: int | None = None, max_failures: int | None = None
    ) -> dict[str, float]:
        return {"success": self.periodic.pop(0), "episodes": 128, "return": float(self.steps)}


def _weights(path: Path) -> float:
    return float(ckpt.load_pytree(path, {"w": np.zeros(3, np.float32)})["w"][0])


def test_keep_best_keeps_the_best_evaluation_and_resume_ranks_against_it(tmp_path, capsys):
    ckpt_dir = tmp_path / "checkpoints"
    # one evaluation per iteration; the last (step 500) is the budget's final one
    result = _run(
        tmp_path,
        RankedLearner([0.5, 0.9, 0.7, 0.8, 0.6]),
        eval_every_steps=100,
        target_success=0,
        num_timesteps=500,
        keep_best=True,
    )
    assert result.stop == "budget" and result.eval["success"] == 0.6
    record = ckpt.best_record(ckpt_dir)
    assert record["env_steps"] == 200 and record["eval"]["success"] == 0.9
    assert record["eval"]["success_lower"] == pytest.approx(early_stop.success_lower_bound(0.9, 128))
    best = ckpt.policy_checkpoint(tmp_path, keep_best=True)
    assert best == ckpt_dir / "best" / "step_000000000200.npz" and _weights(best) == 200
    assert sorted(f.name for f in (ckpt_dir / "best").iterdir()) == ["eval.yaml", best.name]  # one best
    assert _weights(ckpt.policy_checkpoint(tmp_path, keep_best=False)) == 500  # the latest, without the option
    # saved on each new best and at the end, not on every evaluation
    assert [ckpt.checkpoint_steps(f) for f in sorted(ckpt_dir.glob("step_*"))] == [100, 200, 500]
    # resumed: 0.85 does not beat the kept 0.9; 0.95 does, and replaces it
    _run(
        tmp_path,
        RankedLearner([0.85, 0.95], steps=500),
        eval_every_steps=100,
        target_success=0,
        num_timesteps=700,
        keep_best=True,
    )
    best = ckpt.policy_checkpoint(tmp_path, keep_best=True)
    assert best.name == "step_000000000700.npz" and _weights(best) == 700
    assert not (ckpt_dir / "best" / "step_000000000200.npz").exists()
    # ties go to the higher return (success 0 everywhere early in training), NaN ranks lowest
    assert loop_common.rank({"success_lower": 0.0, "return": 5.0}) > loop_common.rank(
        {"success_lower": 0.0, "return": 1.0}
    )
    assert loop_common.rank({"success_lower": float("nan"), "return": 9.0}) < loop_common.rank({"return": 10.0})
    # a damaged best: one warning naming it, and the latest is the policy
    best.write_bytes(best.read_bytes()[:100])
    capsys.readouterr()
    assert ckpt.policy_checkpoint(tmp_path, keep_best=True) == ckpt.checkpoint_path(ckpt_dir, 700)
    err = capsys.readouterr().err
    assert err.count("warning: the best checkpoint") == 1 and best.name in err and "not a zip archive" in err


@pytest.mark.parametrize(
    "text, why",
    [
        ("eval: [1, 2\n", "invalid YAML"),
        ("checkpoint: step_000000000064.zip\neval: [1, 2]\n", "'eval' is not a mapping"),
    ],
)
def test_a_damaged_best_record_is_passed_over_with_a_warning(tmp_path, capsys, text, why):
    """A best/eval.yaml that is not valid YAML once failed eval, export and --resume (exit 2); one
    whose eval was a list crashed --resume inside keep_best's ranking. Now one warning, and the
    latest checkpoint is the policy."""
    ckpt_dir = tmp_path / "checkpoints"
    (ckpt_dir / ckpt.BEST_DIR).mkdir(parents=True)
    (ckpt_dir / ckpt.BEST_DIR / ckpt.BEST_EVAL).write_text(text)
    latest = ckpt_dir / "step_000000000128.npz"
    ckpt.save_pytree(latest, {"w": np.zeros(3, np.float32)})
    assert ckpt.best_record(ckpt_dir) is None
    assert ckpt.policy_checkpoint(tmp_path, keep_best=True) == latest
    err = capsys.readouterr().err
    assert err.startswith("warning: the best checkpoint's record") and why in err and err.count("\n") == 1, err


def test_keep_best_links_side_files_and_reads_the_step_eval_yaml_names(tmp_path):
    """sb3's step_N.zip has a step_N.normalizer.npz beside it: the best takes both, and the step
    named in eval.yaml is the policy even when another step's files are in best/ (a crash between
    linking and removing)."""
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    for steps in (64, 128):
        with zipfile.ZipFile(ckpt.checkpoint_path(ckpt_dir, steps, "zip"), "w") as z:
            z.writestr("data", str(steps))
        ckpt.save_pytree(ckpt_dir / f"step_{steps:012d}.normalizer.npz", {"mean": np.full(3, steps)})
    ckpt.keep_best(ckpt_dir, ckpt.checkpoint_path(ckpt_dir, 128, "zip"), {"success": 0.5, "episodes": 8})
    ckpt.keep_best(ckpt_dir, ckpt.checkpoint_path(ckpt_dir, 64, "zip"), {"success": 0.75, "episodes": 8})
    assert sorted(f.name for f in (ckpt_dir / "best").iterdir()) == [
        "eval.yaml",
        "step_000000000064.normalizer.npz",
        "step_000000000064.zip",
    ]
    assert ckpt.policy_checkpoint(tmp_path, True, "zip") == ckpt_dir / "best" / "step_000000000064.zip"
    assert ckpt.best_record(ckpt_dir)["eval"] == {"success": 0.75, "episodes": 8.0}
    # the files of a later best linked, eval.yaml not yet rewritten: still the step it names
    for f in ckpt_dir.glob("step_000000000128.*"):
        (ckpt_dir / "best" / f.name).write_bytes(f.read_bytes())
    assert ckpt.policy_checkpoint(tmp_path, True, "zip").name == "step_000000000064.zip"


def test_a_resume_ranks_against_a_kept_best_whose_figures_were_nan(tmp_path):
    """eval.yaml stores a NaN figure (no episode defined it) as null: the resumed run ranks it lowest."""
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    first = ckpt.checkpoint_path(ckpt_dir, 100)
    ckpt.save_pytree(first, {"w": np.full(3, 100, np.float32)})
    ckpt.keep_best(ckpt_dir, first, {"success": float("nan"), "return": float("nan"), "episodes": 0})
    assert ckpt.best_record(ckpt_dir)["eval"]["return"] is None
    assert loop_common.rank(ckpt.best_record(ckpt_dir)["eval"]) == (-math.inf, -math.inf)
    _run(
        tmp_path,
        RankedLearner([0.5], steps=100),
        eval_every_steps=100,
        target_success=0,
        num_timesteps=200,
        keep_best=True,
    )
    assert ckpt.best_record(ckpt_dir)["env_steps"] == 200


def test_without_keep_best_no_best_is_kept(tmp_path):
    _run(
        tmp_path,
        RankedLearner([0.5, 0.9, 0.7]),
        eval_every_steps=100,
        target_success=0,
        num_timesteps=300,
        keep_best=False,
    )
    assert ckpt.best_record(tmp_path / "checkpoints") is None and not (tmp_path / "checkpoints" / "best").exists()


def test_keep_best_end_to_end_eval_and_export_use_the_best(tmp_path, capsys):
    """simreal train keep_best -> the kept step's evaluation repeats exactly through the trainer,
    and export writes that policy."""
    import json

    from simreal.cli import main
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers.brax import BRAX

    argv = [
        "train",
        "cartpole-balance",
        *CARTPOLE,
        f"runs_root={tmp_path}",
        "train.keep_best=true",
        "train.eval_every_steps=64",
        "train.num_timesteps=320",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)  # stdout is the one JSON object, nothing else
    run_dir = Path(summary["run_dir"])
    record = ckpt.best_record(run_dir / "checkpoints")
    assert summary["best_env_steps"] == record["env_steps"] and summary["best_eval_return"] == record["eval"]["return"]
    cfg = load_config(run_dir)
    again = BRAX.evaluate(run_dir, cfg, episodes=cfg.train.num_eval_envs, seed=cfg.seed + 1)
    assert again["return"] == pytest.approx(record["eval"]["return"], rel=1e-5)
    rows = [r for r in loop_common.MetricsCsv(run_dir / "metrics.csv").rows if "eval_return" in r]
    assert len(rows) == 5 and record["eval"]["return"] == pytest.approx(max(r["eval_return"] for r in rows), rel=1e-6)
    assert main(["export", str(run_dir)]) == 0


# -- a writer killed in the middle of a checkpoint -----------------------------------------------

_WRITER = """
import sys
from pathlib import Path
import numpy as np
from simreal.policies import checkpoint as ckpt
d = Path(sys.argv[1])
for i in range(1, 10**6):
    ckpt.save_pytree(ckpt.checkpoint_path(d, i), {"w": np.full(16_000_000, i, np.float32)})  # 64 MB
    ckpt.prune(d, keep=2)
"""


def test_sigkill_during_a_checkpoint_write_leaves_the_previous_one(tmp_path):
    """SIGKILL while save_pytree writes (a temp file exists): the previous checkpoint loads,
    the partial file is never taken for one, and the next prune removes it."""
    template = {"w": np.zeros(16_000_000, np.float32)}
    for attempt in range(5):
        d = tmp_path / f"try{attempt}"
        d.mkdir()
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(d)])
        try:
            deadline = time.time() + 120
            while not list(d.glob("step_*.npz")) and time.time() < deadline:
                time.sleep(0.01)
            while not [f for f in d.glob(".step_*.tmp") if f.stat().st_size > 0] and time.time() < deadline:
                time.sleep(0.0005)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        if list(d.glob(".step_*.tmp")):
            break  # killed mid-write
    else:
        pytest.fail("never caught the writer in the middle of a checkpoint")
    latest = ckpt.latest_checkpoint(d)
    steps = ckpt.checkpoint_steps(latest)
    assert steps >= 1
    assert np.all(ckpt.load_pytree(latest, template)["w"] == steps)
    assert all(ckpt.damage(f) is None for f in d.glob("step_*"))  # every step_* file is whole
    ckpt.prune(d)
    assert not list(d.glob(".step_*.tmp"))


def test_a_prune_cut_short_leaves_no_checkpoint_without_its_side_files(tmp_path, monkeypatch):
    """prune once deleted a step's files in name order, the side file (``.normalizer.npz``)
    before its ``.zip``: stopped between the two, an SB3 checkpoint was left that eval and
    resume took, and failed on with a traceback."""
    for n in (1, 2, 3, 4):
        (tmp_path / f"step_{n:012d}.zip").write_bytes(b"z")
        (tmp_path / f"step_{n:012d}.normalizer.npz").write_bytes(b"n")
    real, calls = Path.unlink, [0]

    def unlink(self, missing_ok=False):
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return real(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(KeyboardInterrupt):
        ckpt.prune(tmp_path, keep=2, ext="zip")
    monkeypatch.undo()
    zips = sorted(tmp_path.glob("step_*.zip"))
    assert len(zips) == 3 and all(z.with_suffix(".normalizer.npz").exists() for z in zips), zips


# -- stable-baselines3's logger -------------------------------------------------------------------


def test_sb3_leaves_no_tmp_folder(tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    import tempfile

    from simreal.policies.run_config import make_env, resolve
    from simreal.policies.trainers.sb3 import Driver

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where SB3's default logger would go
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    cfg = resolve(
        "cartpole-balance",
        [
            "trainer=sb3",
            "backend=native",
            "train.num_envs=4",
            "train.unroll_length=8",
            "train.num_minibatches=2",
            "train.num_updates_per_batch=1",
            "train.policy_hidden=[8]",
            "train.value_hidden=[8]",
        ],
    )
    driver = Driver(cfg, make_env(cfg), None)
    m = driver.iterate()
    assert driver.env_steps == 32 and any(k.startswith("loss/") for k in m)  # the losses still reach the loop
    assert not list(tmp_path.glob("SB3-*")), list(tmp_path.iterdir())


# -- `simreal train` in a subprocess, stopped by a signal ------------------------------------------

HOVER = [
    "train.num_envs=4",
    "train.num_timesteps=100000",
    "train.unroll_length=8",
    "train.num_minibatches=2",
    "train.num_updates_per_batch=1",
    "train.num_eval_envs=2",
    "train.eval_every_steps=0",
    "train.policy_hidden=[16,16]",
    "train.value_hidden=[16,16]",
    "env.episode_length_s=1.0",
]


def _start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        CLI + argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


def _read_until(proc: subprocess.Popen, pattern: str, timeout_s: float = 300) -> tuple[list[str], re.Match]:
    lines, deadline = [], time.time() + timeout_s
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if m := re.search(pattern, line):
            return lines, m
    proc.kill()
    pytest.fail(f"no line matching {pattern!r}:\n{''.join(lines)}")


def _finish(proc: subprocess.Popen, lines: list[str]) -> str:
    out, _ = proc.communicate(timeout=300)
    text = "".join(lines) + out
    assert "Traceback" not in text and "Segmentation" not in text, text
    return text


def test_sigint_during_the_first_compile_exits_130_and_leaves_no_run(tmp_path):
    """Ctrl-C while the env is built and JAX compiles its reset: exit 130, one line saying
    nothing was saved, no run directory left behind."""
    proc = _start(["train", "quadrotor-hover", *HOVER, f"runs_root={tmp_path}"])
    lines, m = _read_until(proc, r"run directory: (\S+)")
    proc.send_signal(signal.SIGINT)
    text = _finish(proc, lines)
    assert proc.returncode == 130, text
    assert "stopped by SIGINT before the first iteration finished: nothing saved" in text
    assert not Path(m.group(1)).exists()
    assert not Path(m.group(1)).parent.exists()  # nor an empty runs/<task>/ folder


@pytest.mark.slow
def test_sigterm_after_iterations_saves_and_resume_continues(tmp_path):
    """SIGTERM once iterations run: exit 143 and a checkpoint of the last iteration; --resume
    says where it continues from; resuming a finished run says nothing is left to do."""
    proc = _start(["train", "quadrotor-hover", *HOVER, f"runs_root={tmp_path}"])
    lines, m = _read_until(proc, r"run directory: (\S+)")
    run_dir = Path(m.group(1))
    more, _ = _read_until(proc, r"^(\d+)/100\.00k")  # a progress line: iterations are done
    proc.send_signal(signal.SIGTERM)
    text = _finish(proc, lines + more)
    assert proc.returncode == 143, text
    m = re.search(r"stopped by SIGTERM at (\d+) env steps; checkpoint (\S+);", text)
    assert m, text
    steps, saved = int(m.group(1)), Path(m.group(2))
    assert saved == ckpt.checkpoint_path(run_dir / "checkpoints", steps) and ckpt.damage(saved) is None
    assert ckpt.latest_checkpoint(run_dir / "checkpoints") == saved

    r = subprocess.run(
        CLI + ["train", "--resume", str(run_dir), f"train.num_timesteps={steps + 64}", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert f"resume: continuing from {saved} ({steps} env steps)" in r.stderr
    assert f'"env_steps": {steps + 64}' in r.stdout and '"stop": "budget"' in r.stdout

    r = subprocess.run(CLI + ["train", "--resume", str(run_dir)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"nothing left to do: {steps + 64} env steps done of the budget of {steps + 64}" in r.stderr
    # a budget below what is done trains nothing, and leaves the run's config.yaml as it was
    before = (run_dir / "config.yaml").read_bytes()
    r = subprocess.run(
        CLI + ["train", "--resume", str(run_dir), f"train.num_timesteps={steps}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0 and "nothing left to do" in r.stderr, r.stderr
    assert (run_dir / "config.yaml").read_bytes() == before


# -- a resume whose overrides do not fit the checkpoint -------------------------------------------


def _run_dir_with_checkpoint(tmp_path: Path) -> Path:
    """A cartpole run (4 envs) with config.yaml and one stand-in checkpoint, made without training."""
    from simreal.policies.run_config import resolve
    from simreal.policies.run_dir import RunDir

    cfg = resolve("cartpole-balance", [*CARTPOLE, "train.num_envs=4", f"runs_root={tmp_path}"])
    run_dir = RunDir.create(cfg).path
    ckpt.save_pytree(ckpt.checkpoint_path(run_dir / "checkpoints", 64), {"w": np.zeros(3, np.float32)})
    return run_dir


@pytest.mark.parametrize(
    "override, says",
    [
        (
            "train.num_envs=8",
            "config key 'train.num_envs': the checkpoint has 4 envs, the overrides ask for 8; "
            "a resumed run keeps num_envs (and the network sizes)",
        ),
        (
            "train.policy_hidden=[32,32]",
            "config key 'train.policy_hidden': the checkpoint was made with policy_hidden "
            "[16, 16], the overrides ask for [32, 32]",
        ),
        ("train.value_hidden=[8]", "config key 'train.value_hidden': the checkpoint was made with value_hidden [16]"),
        ("trainer=sb3", "config key 'trainer': the checkpoint was made with trainer brax, the overrides ask for sb3"),
    ],
)
def test_a_resume_that_changes_the_checkpoints_shape_is_refused_before_writing(tmp_path, capsys, override, says):
    """`--resume RUN train.num_envs=8` on a 4-env run once wrote num_envs 8 into config.yaml and
    then failed on the checkpoint, so plain --resume and export failed too: now one line naming
    the key, exit 2, config.yaml untouched."""
    from simreal.cli import main

    run_dir = _run_dir_with_checkpoint(tmp_path)
    saved = (run_dir / "config.yaml").read_bytes()
    assert main(["train", "--resume", str(run_dir), override]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert f"{run_dir / 'config.yaml'} + command-line overrides" in err
    assert (run_dir / "config.yaml").read_bytes() == saved


def test_a_resume_that_fails_on_the_checkpoint_leaves_config_yaml_as_it_was(tmp_path, capsys):
    """Whatever else makes the checkpoint not load (here: it holds other arrays), the failed
    resume restores config.yaml, and says the overrides do not fit."""
    from simreal.cli import main

    run_dir = _run_dir_with_checkpoint(tmp_path)
    saved = (run_dir / "config.yaml").read_bytes()
    assert main(["train", "--resume", str(run_dir), "train.num_timesteps=640"]) == 2
    err = capsys.readouterr().err
    assert "missing array" in err and "resumed with the overrides train.num_timesteps=640; " in err
    assert f"{run_dir / 'config.yaml'} is left as it was" in err
    assert "Traceback" not in err
    assert (run_dir / "config.yaml").read_bytes() == saved


def test_a_resumed_run_continues_wall_s_and_writes_integer_steps(tmp_path):
    """Once a resume restarted ``wall_s`` at 0 and rewrote the earlier rows' steps as 300.0."""
    _run(tmp_path, FakeLearner(), num_timesteps=300, target_success=0)
    csv_path = tmp_path / "metrics.csv"
    before = loop_common.MetricsCsv(csv_path)
    before.rows[-1]["wall_s"] = 1000.0  # as if the first command had trained for 1000 s
    before.flush()
    _run(tmp_path, FakeLearner(steps=300), num_timesteps=500, target_success=0)
    rows = loop_common.MetricsCsv(csv_path).rows
    assert [r["env_steps"] for r in rows] == [100, 200, 300, 400, 500]
    assert all(isinstance(r["env_steps"], int) for r in rows) and "300.0" not in csv_path.read_text()
    assert 1000.0 <= rows[3]["wall_s"] < 1100.0 and rows[4]["wall_s"] >= rows[3]["wall_s"]


def test_the_tensorboard_writer_does_not_load_torch(tmp_path):
    """tensorboardX imports torch where it is installed (a second of every training run); the
    loop's writer imports it without, still writes events, and torch imports normally after."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom simreal.policies.trainers.loop import summary_writer\n"
        f"w = summary_writer({str(tmp_path)!r}); w.add_scalar('loss', 1.5, 3); w.close()\n"
        "print('torch' in sys.modules)\n"
        "try:\n    import torch\n    print(torch.__name__)\nexcept ImportError:\n    print('torch')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "torch"], out.stdout
    assert list(tmp_path.glob("events.out.tfevents.*"))


def test_eval_stopped_during_a_rollout_finishes_it_and_runs_no_other(monkeypatch, capfd):
    import simreal.policies.evaluation as evaluation
    import simreal.policies.run_dir as train
    from simreal.cli import main

    cfg = types.SimpleNamespace(backend="native", eval=types.SimpleNamespace(randomize=True, sim_to_sim_max_gap=0.1))
    monkeypatch.setattr(train, "load_config", lambda run_dir, reward=False: cfg)
    rollouts = []

    def evaluate_run(run_dir, cfg, backend, episodes, randomize):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while XLA runs the rollout
        rollouts.append(backend)
        return {"episodes": 4, "success": 1.0}

    monkeypatch.setattr(evaluation, "evaluate_run", evaluate_run)
    before = signal.getsignal(signal.SIGINT)
    assert main(["eval", "runs/x", "--backend", "mjx"]) == 130
    assert rollouts == ["mjx"]  # the rollout under way ended; the gate's second one never started
    err = capfd.readouterr().err  # the signal's own line is written to fd 2
    assert "stopping when the rollout under way ends" in err and "simreal eval: stopped by SIGINT; no result" in err
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize("err", [1e-7, 0.5, "SIGINT"])
def test_export_puts_a_bundle_in_place_only_once_it_passed_its_check(tmp_path, monkeypatch, capsys, err):
    import simreal.policies.export as export
    import simreal.policies.run_config as run_config
    import simreal.policies.run_dir as train
    import simreal.policies.trainers as trainers
    from simreal.cli import main

    class Trainer:
        def export(self, run_dir, cfg, out_dir, env=None):
            out_dir.mkdir()
            (out_dir / "policy.onnx").write_text("new")
            if err == "SIGINT":  # Ctrl-C while it checks ONNX Runtime against the policy
                os.kill(os.getpid(), signal.SIGINT)
            return out_dir, 0.0 if err == "SIGINT" else err

    monkeypatch.setattr(
        train, "load_config", lambda run_dir, reward=True: types.SimpleNamespace(trainer="brax", task="t")
    )
    monkeypatch.setattr(run_config, "make_env", lambda cfg: None)
    monkeypatch.setattr(export, "check_flat_observation", lambda env, task, run_dir: None)
    monkeypatch.setattr(trainers, "get_trainer", lambda name: Trainer())
    (tmp_path / "bundle").mkdir()  # an earlier bundle
    (tmp_path / "bundle" / "policy.onnx").write_text("old")
    (tmp_path / "bundle" / "bundle.yaml").write_text("old")
    (tmp_path / "bundle.export").mkdir()  # an interrupted export's leftovers
    rc = main(["export", str(tmp_path)])
    passed = err != "SIGINT" and err < 1e-5
    assert (tmp_path / "bundle" / "policy.onnx").read_text() == ("new" if passed else "old")
    assert not (tmp_path / "bundle.export").exists()
    assert rc == (0 if passed else 130 if err == "SIGINT" else 2)
    if rc:
        assert (
            "unchanged" if err == "SIGINT" else "not written, what was there is unchanged"
        ) in capsys.readouterr().err


def _tb_events(path: Path) -> list:
    """The events of a TensorBoard file (TFRecord framing: length u64, its CRC, data, data CRC)."""
    import struct

    from tensorboardX.proto import event_pb2

    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (n,) = struct.unpack("<Q", data[at : at + 8])
        out.append(event_pb2.Event.FromString(data[at + 12 : at + 12 + n]))
        at += 12 + n + 4
    return out


def test_a_resumed_run_hides_the_events_it_trains_again_from_tensorboard(tmp_path):
    """Killed after its checkpoint at 300 env steps but after logging up to 600, a run resumed at
    300 logs 400..600 again: its new events file starts with TensorBoard's purge marker at 300
    (SessionLog START), so the first command's later points are not drawn over the new ones."""
    pytest.importorskip("tensorboardX")
    from tensorboardX.proto import event_pb2

    _run(tmp_path, FakeLearner(), target_success=0.0, num_timesteps=600)
    first = set((tmp_path).glob("events.out.tfevents.*"))
    time.sleep(1.1)  # tensorboardX names its files by the second
    _run(tmp_path, FakeLearner(steps=300), target_success=0.0, num_timesteps=600)
    (second,) = set((tmp_path).glob("events.out.tfevents.*")) - first
    starts = [e.step for e in _tb_events(second) if e.session_log.status == event_pb2.SessionLog.START]
    logged = sorted({e.step for e in _tb_events(second) if e.summary.value})
    assert starts == [300] and logged[0] == 400, (starts, logged)
