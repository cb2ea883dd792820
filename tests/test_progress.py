"""The training progress line: rate and ETA from recent updates, '-' for unknown metrics."""

from __future__ import annotations

import io
import math
import re

import pytest

from simreal import progress as P


def _clocked(monkeypatch, total: int, **kwargs) -> tuple[list[float], io.StringIO, P.Progress]:
    """(a clock to advance, the stream, a Progress on both): every update prints a line."""
    clock = [0.0]
    monkeypatch.setattr(P.time, "perf_counter", lambda: clock[0])
    out = io.StringIO()
    return clock, out, P.Progress(total, interval_s=0.0, stream=out, window_s=30.0, **kwargs)


def test_eta_follows_the_recent_rate_and_unknown_metrics_print_as_a_dash(monkeypatch):
    clock, out, prog = _clocked(monkeypatch, 1_000_000)
    steps = 0
    for _ in range(10):  # slow start: 1k steps/s for 100 s (a compile, a busy machine)
        clock[0] += 10.0
        steps += 10_000
        prog.update(steps, success=math.nan)
    for _ in range(40):  # then 10k steps/s
        clock[0] += 1.0
        steps += 10_000
        prog.update(steps, success=0.5, phase="train")
    first, last = out.getvalue().splitlines()[0], out.getvalue().splitlines()[-1]
    assert "success -" in first and "nan" not in out.getvalue()
    assert "10.00k steps/s" in last and "success 0.5" in last and "phase train" in last
    assert last.endswith("ETA 50s"), last  # 500k steps left at the recent 10k/s (the average: 2m20s)


def test_the_stream_is_looked_up_when_progress_starts(monkeypatch):
    late = io.StringIO()
    monkeypatch.setattr(P.sys, "stderr", late)
    prog = P.Progress(10, interval_s=0.0)
    prog.update(1)
    prog.update(2)
    assert "2/10" in late.getvalue()


def test_an_evaluation_does_not_count_in_the_rate_and_a_wall_budget_caps_the_eta(monkeypatch):
    """A 60 s evaluation between two iterations once read as 216 steps/s and an ETA of 63 hours
    in a run with 4 minutes left of its ``train.max_wall_s``."""
    clock, out, prog = _clocked(monkeypatch, 20_000_000, deadline=300.0)
    steps = 0
    for _ in range(20):  # 4096 steps every 0.5 s: 8.19k steps/s
        clock[0] += 0.5
        steps += 4096
        prog.update(steps)
    with prog.paused():
        clock[0] += 60.0  # the evaluation
    clock[0] += 0.5
    steps += 4096
    prog.update(steps)
    last = out.getvalue().splitlines()[-1]
    assert "8.19k steps/s" in last, last
    assert last.endswith("ETA 3m49s"), last  # the wall budget: 300 s, at t = 70.5 s, not 20M steps at 8k/s
    unpaused = P.Progress(20_000_000, interval_s=0.0, stream=io.StringIO(), window_s=30.0)
    unpaused.update(0)
    clock[0] += 60.0
    unpaused.update(4096)
    assert "68 steps/s" in unpaused.stream.getvalue()  # what the line read before


def test_the_eta_counts_the_evaluations_still_to_come(monkeypatch):
    """The main job's ETA left its evaluations out: 1m17s at the start, when 106 s remained."""
    clock, out, prog = _clocked(monkeypatch, 1_000_000)
    steps = 0
    for _ in range(5):  # 100k steps at 10k steps/s, then a 5 s evaluation
        for _ in range(10):
            clock[0] += 1.0
            steps += 10_000
            prog.update(steps)
        with prog.paused():
            clock[0] += 5.0
    clock[0] += 1.0
    steps += 10_000
    prog.update(steps)
    last = out.getvalue().splitlines()[-1]
    assert "10.00k steps/s" in last, last
    assert last.endswith("ETA 1m13s"), last  # 490k steps: 49 s of stepping + 490k x (25 s per 510k steps so far)


class _ClockedLearner:
    """The main job's shape on a fake clock, as measured on 2 CPU cores (simreal train
    quadrotor-hover): the first iteration compiles for 12.5 s, then 8192 env steps per 0.29 s;
    an evaluation takes 14.5 ms per episode (1.85 s for 128 episodes of 400 steps), plus 7.8 s the
    first time (its compile). From ``learnt`` env steps on, every training episode succeeds and
    the periodic evaluation reads 0.96, whose confirmation stops for futility after 384 episodes."""

    def __init__(self, clock: list[float], learnt: int = 10**9):
        import types

        self.clock, self.steps, self.evals, self.learnt = clock, 0, 0, learnt
        self.env = types.SimpleNamespace(episode_steps=400)

    @property
    def env_steps(self) -> int:
        return self.steps

    def iterate(self) -> dict[str, float]:
        self.clock[0] += 12.5 if self.steps == 0 else 0.29
        self.steps += 8192
        return {"loss/total": 1.0, "episode/success": 1.0 if self.steps >= self.learnt else 0.5, "episode/done": 1.0}

    def save(self, ckpt_dir):
        return None

    def prepare_evaluation(self) -> None:
        """Nothing ahead: this learner's first evaluation pays its compile (the torch learners')."""

    def evaluate(self, episodes=None, seed=None, max_failures=None) -> dict[str, float]:
        n = 384 if episodes is not None else 128
        self.clock[0] += 0.0145 * n + (7.8 if self.evals == 0 else 0.0)
        self.evals += 1
        if episodes is not None:
            return {"success": 0.94, "episodes": n}
        return {"success": 0.96 if self.steps >= self.learnt else 0.5, "episodes": n}


@pytest.mark.parametrize("target", [0.0, 0.95])
def test_the_main_jobs_eta_counts_its_evaluations_from_the_first_line(monkeypatch, tmp_path, target):
    """The first ETA left out the evaluations and the first one's compile (1m02s shown, 110 s
    taken), then jumped at each evaluation; now every ETA is within 25% of the time left, also
    with a target, whose evaluations the training success triggers and the stop rule confirms;
    the training episodes' success is named train_success beside eval_success."""
    import sys
    import types

    from simreal.policies.trainers import loop as loop_common

    clock = [0.0]
    monkeypatch.setattr(P.time, "perf_counter", lambda: clock[0])
    printed: list[tuple[float, str]] = []  # (the clock, the line)
    monkeypatch.setattr(
        sys,
        "stderr",
        types.SimpleNamespace(
            write=lambda text: printed.append((clock[0], text)), flush=lambda: None, isatty=lambda: False
        ),
    )
    learner = _ClockedLearner(clock, learnt=1_300_000)
    train = types.SimpleNamespace(
        num_timesteps=2_000_000,
        eval_every_steps=500_000,
        num_eval_envs=128,
        target_success=target,
        checkpoint_every_s=1e9,
        max_wall_s=0.0,
        keep_best=False,
    )
    cfg = types.SimpleNamespace(task="fake", seed=0, train=train)
    (tmp_path / "checkpoints").mkdir()
    loop_common.run(tmp_path, cfg, learner, 0.0, quiet=False)
    end = clock[0]
    lines = [(t, line) for t, line in printed if "ETA" in line]
    assert "| train_success 0.5 |" in lines[0][1] and "| success" not in lines[0][1], lines[0]
    for t, line in lines:
        eta_s = sum(float(v) * {"m": 60, "s": 1}[u] for v, u in re.findall(r"(\d+)([ms])", line.rsplit("ETA ", 1)[1]))
        assert abs(eta_s - (end - t)) <= max(0.25 * (end - t), 3.0), (line, end - t)  # measured: 7% and 21% at worst
