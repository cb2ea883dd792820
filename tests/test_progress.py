"""The training progress line: rate and ETA from recent updates, '-' for unknown metrics."""

from __future__ import annotations

import io
import math

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
    for _ in range(10):           # slow start: 1k steps/s for 100 s (a compile, a busy machine)
        clock[0] += 10.0
        steps += 10_000
        prog.update(steps, success=math.nan)
    for _ in range(40):           # then 10k steps/s
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
    for _ in range(20):           # 4096 steps every 0.5 s: 8.19k steps/s
        clock[0] += 0.5
        steps += 4096
        prog.update(steps)
    with prog.paused():
        clock[0] += 60.0          # the evaluation
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
    for _ in range(5):            # 100k steps at 10k steps/s, then a 5 s evaluation
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
