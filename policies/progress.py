"""Progress for long training: one line with steps/s, return, success and ETA."""

from __future__ import annotations

import sys
import time


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
    """Prints a status line at most every ``interval_s`` (rewritten in place on a terminal)."""

    def __init__(self, total_steps: int, interval_s: float = 1.0, stream=sys.stderr):
        self.total = total_steps
        self.interval = interval_s
        self.stream = stream
        self.tty = stream.isatty()
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.steps0: int | None = None

    def update(self, steps: int, force: bool = False, **fields: float | str) -> None:
        now = time.perf_counter()
        if self.steps0 is None:
            self.steps0, self.t0 = steps, now
            return
        if not force and now - self.last < self.interval:
            return
        self.last = now
        rate = (steps - self.steps0) / max(now - self.t0, 1e-9)
        eta = (self.total - steps) / rate if rate > 0 else float("inf")
        pct = 100.0 * steps / max(self.total, 1)
        parts = [f"{fmt_steps(steps)}/{fmt_steps(self.total)} ({pct:4.1f}%)", f"{fmt_steps(rate)} steps/s"]
        parts += [f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in fields.items()]
        parts.append(f"ETA {fmt_time(eta) if eta != float('inf') else '?'}")
        line = " | ".join(parts)
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
