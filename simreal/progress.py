"""Progress of long work (training, labelling, fitting): one line with the rate, figures and ETA."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

#: An evaluation's first run compiles its program: measured on the quadrotor (2 CPU cores), 8 s
#: against the training step's 17 s. Its episodes then took 23-36 us per env step (1.2-2.0 s for
#: 128 episodes of 400 steps) against the training's 36-60 us: about 0.7 of the training rate's time.
EVAL_COMPILE_SHARE = 0.5
EVAL_RUN_SHARE = 0.7


@dataclasses.dataclass(frozen=True)
class PausePlan:
    """The work ahead that makes no steps (evaluations), so the ETA counts it before any of it ran.
    ``work_left(steps)``: how much is still to come after ``steps``, in units of work (episodes);
    ``steps_per_work``: the steps one unit runs (an episode's length), for the first estimate."""

    work_left: Callable[[int], int]
    steps_per_work: int = 0


@dataclasses.dataclass
class Pause:
    """One pause (:meth:`Progress.paused`): set ``work`` to the units of work it did (episodes)."""

    work: int = 0
    duration_s: float = 0.0


def fmt_steps(n: float) -> str:
    """1234567 -> '1.23M'."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:.0f}"


def fmt_time(s: float) -> str:
    """Seconds as 1h02m / 3m05s / 12s."""
    s = max(0.0, s)
    if s >= 3600:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    if s >= 60:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{s:.0f}s"


class Progress:
    """Prints a status line at most every ``interval_s`` (rewritten in place on a terminal).

    Rate and ETA come from the last ``window_s`` seconds of updates (compilation and early
    slow iterations stop counting once they are older); time spent inside :meth:`paused` (an
    evaluation) does not count in the rate, so one long evaluation cannot read as a rate of a few
    steps a second. The ETA is the steps left at that rate plus the pauses to come, or
    ``deadline`` (a ``time.perf_counter()`` time: a wall-clock budget) when that is sooner. A metric that is not known
    yet (NaN: no episode has ended) prints as ``-``.

    The pauses to come: with a :class:`PausePlan`, its work left times the time per unit of work
    the pauses so far took (the first one's left out once there are two: it compiled; while it is
    the only one, at most the estimate that follows), and before any pause ran an estimate: a unit's
    ``steps_per_work`` in :data:`EVAL_RUN_SHARE` of their time at the rate, plus a compile of
    :data:`EVAL_COMPILE_SHARE` of the time to the first update (the training step's compile, when
    the progress starts just before the first iteration). Without a plan: the paused time so far
    per step done, times the steps left.
    """

    def __init__(
        self,
        total_steps: int,
        interval_s: float = 1.0,
        stream: TextIO | None = None,
        window_s: float = 30.0,
        deadline: float | None = None,
        unit: str = "steps",
        plan: PausePlan | None = None,
    ):
        self.total = total_steps
        self.unit = unit  # what a step is: env steps, labelled pairs, epochs
        self.deadline = deadline
        self.interval = interval_s
        self.stream = stream if stream is not None else sys.stderr  # looked up now: a redirected stderr counts
        self.tty = self.stream.isatty()
        self.window_s = window_s
        self.last = 0.0
        self.history: collections.deque[tuple[float, int]] = collections.deque()
        self.paused_s = 0.0  # time inside paused() so far [s]
        self.pauses: list[Pause] = []
        self.plan = plan
        self.started = time.perf_counter()
        self.first_update_s: float | None = None  # from the start to the first update [s]

    def update(self, steps: int, force: bool = False, **fields: float | str) -> None:
        now = time.perf_counter()
        if self.first_update_s is None:
            self.first_update_s = now - self.started
        self.history.append((now, steps))
        while len(self.history) > 2 and now - self.history[1][0] >= self.window_s:
            self.history.popleft()
        if len(self.history) < 2 or (not force and now - self.last < self.interval):
            return
        self.last = now
        t_old, s_old = self.history[0]
        rate = (steps - s_old) / max(now - t_old, 1e-9)
        left = self.total - steps
        eta = left / rate + self.pauses_ahead_s(steps, rate) if rate > 0 else float("inf")
        if self.deadline is not None:
            eta = min(eta, self.deadline - now)
        pct = 100.0 * steps / max(self.total, 1)
        parts = [
            f"{fmt_steps(steps)}/{fmt_steps(self.total)} ({pct:4.1f}%)",
            f"{fmt_steps(rate) if rate >= 1 else f'{rate:.2g}'} {self.unit}/s",
        ]
        parts += [f"{k} {_value(v)}" for k, v in fields.items()]
        parts.append(f"ETA {fmt_time(eta) if eta != float('inf') else '?'}")
        line = " | ".join(parts)
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        self.stream.flush()

    def pauses_ahead_s(self, steps: int, rate: float) -> float:
        """The time the pauses still to come will take [s] (class docstring); ``rate`` in steps/s."""
        if self.plan is None:
            return (self.total - steps) * self.paused_s / max(steps, 1)
        work = self.plan.work_left(steps)
        prior = EVAL_RUN_SHARE * self.plan.steps_per_work / rate  # [s] per unit of work
        if not self.pauses:
            return work * prior + (EVAL_COMPILE_SHARE * (self.first_update_s or 0.0) if work else 0.0)
        if len(self.pauses) == 1:
            first = self.pauses[0]
            return work * min(first.duration_s / max(first.work, 1), prior)
        later = self.pauses[1:]
        return work * sum(p.duration_s for p in later) / max(sum(p.work for p in later), 1)

    @contextlib.contextmanager
    def paused(self) -> Iterator[Pause]:
        """Work that makes no steps (an evaluation): the rate's window shifts past it. The
        :class:`Pause` it yields takes the work done, for a plan's estimate."""
        t0 = time.perf_counter()
        pause = Pause()
        try:
            yield pause
        finally:
            gap = time.perf_counter() - t0
            self.paused_s += gap
            pause.duration_s = gap
            self.pauses.append(pause)
            self.history = collections.deque((t + gap, n) for t, n in self.history)

    def message(self, text: str) -> None:
        """A one-off line between status lines (what a long silent phase is doing)."""
        self.stream.write(("\r" + text + "\033[K\n") if self.tty else text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _value(v: float | str) -> str:
    """A progress field: 3 significant digits, ``-`` for a number not known yet (NaN)."""
    if isinstance(v, str):
        return v
    return "-" if math.isnan(v) else f"{v:.3g}"
