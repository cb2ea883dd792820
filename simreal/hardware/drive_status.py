"""What ``simreal drive`` shows while it runs: a banner with the stop and the keys, then a
status line every few seconds (it once ran for minutes without a word until Ctrl-C).

    status = DriveStatus(sys.stderr)
    report = drive(robot, runner, on_tick=status.on_tick, task_input=status.watch(steer))

The line (``drive 12s | 50.0 Hz | safety policy | command [0.50, 0.00, 0.00]``) comes from the
loop's own ticks (``on_tick``: every tick that sent a command), so it costs one clock read per
tick and a write every ``interval_s``; on a terminal it is rewritten in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import numpy as np

from simreal.progress import fmt_time


class DriveStatus:
    """The periodic status line (module docstring); ``clock`` in [s]."""

    def __init__(self, stream: TextIO, interval_s: float = 2.0, clock: Callable[[], float] = time.monotonic):
        self.stream, self.interval_s, self.clock = stream, interval_s, clock
        self.tty = stream.isatty()
        self.ticks = 0
        self.t0: float | None = None
        self.last: tuple[float, int] = (0.0, 0)  # (time, ticks) of the last line
        self.given: Mapping[str, np.ndarray] = {}

    def watch(self, task_input: Callable[[], Mapping[str, np.ndarray]] | None):
        """``task_input`` (a teleoperated command), its last value kept for the line; None stays None."""
        if task_input is None:
            return None

        def read() -> Mapping[str, np.ndarray]:
            self.given = task_input()
            return self.given

        return read

    def on_tick(self, result: Any, sent: np.ndarray) -> None:
        """``drive``'s ``on_tick``: count the tick; write the line once ``interval_s`` passed."""
        now = self.clock()
        self.ticks += 1
        if self.t0 is None:
            self.t0, self.last = now, (now, self.ticks)
            return
        t_last, n_last = self.last
        if now - t_last < self.interval_s:
            return
        rate = (self.ticks - n_last) / (now - t_last)
        self.last = (now, self.ticks)
        parts = [f"drive {fmt_time(now - self.t0)}", f"{rate:.1f} Hz", f"safety {result.mode}"]
        parts += [f"{k} [{', '.join(f'{x:.2f}' for x in np.ravel(v))}]" for k, v in self.given.items()]
        line = " | ".join(parts)
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the in-place line on a terminal, so what follows starts on its own."""
        if self.tty and self.ticks:
            self.stream.write("\n")
            self.stream.flush()


def banner(task: str, driver: str, twin: bool, rate_hz: float, duration_s: float | None, teleop: str | None) -> str:
    """What runs, how it ends, and the teleop device's keys or axes (one or two lines)."""
    from simreal.hardware.teleop.teleoperator import VelocityCommand

    until = f"for {duration_s:g} s (Ctrl-C stops it sooner)" if duration_s is not None else "until Ctrl-C"
    lines = [
        f"simreal drive: {task} on {driver}{' (twin)' if twin else ''} at {rate_hz:g} Hz, {until}, ending with "
        "the safe command and its report; waiting for the robot's state ..."
    ]
    if teleop == "keyboard":
        lines.append(f"keys (held; none: stand still): {VelocityCommand.keys()}")
    elif teleop is not None:
        lines.append(
            f"{teleop} axes: "
            + ", ".join(f"{'-' if sign < 0 else '+'}{axis} {name}" for name, axis, sign in VelocityCommand.AXES)
            + " (none deflected: stand still)"
        )
    return "\n".join(lines)
