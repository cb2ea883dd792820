"""Stopping a long command cleanly on SIGINT (Ctrl-C), SIGTERM (a scheduler's or ``kill``'s stop)
or SIGHUP (the terminal or SSH session gone).

    with stop_on_signals() as stop:       # handlers installed; the previous ones come back after
        while not stop.requested:
            iterate()                     # a signal here only sets stop.signum
        save()
    return stop.exit_code                 # 130 for SIGINT, 143 for SIGTERM

Python's default SIGINT handling raises ``KeyboardInterrupt`` wherever the main thread is,
and in training that can be inside XLA: the native backend steps the physics in Python
callbacks that XLA calls (``jax.pure_callback``), and an exception unwinding through them
ends in an XLA runtime error or worse, with the last iterations lost. So the handler here
only records the signal (and says so on stderr); the training loop (``loop_common.run``)
looks at the flag between iterations, saves a checkpoint of the last completed iteration
and returns; ``simreal train`` then exits with 128 + the signal number, as a shell reports a
process the signal killed. A JAX compile cannot be interrupted this way: the stop waits for
it and the iteration it belongs to. The other long commands use it the same way between
their own units of work: ``simreal demos`` between steps, ``simreal retarget`` on a folder
between clips (ending its worker processes), ``deploy sim`` and ``eval`` around their child
or rollout.

A second signal ends the process at once (``os._exit``) without saving: checkpoint writes
are atomic (temp file, then rename), so that can leave a hidden temp file, never a partial
checkpoint.

Outside those loops, :func:`signals_as_interrupt` (which ``simreal``'s CLI opens around every
verb) makes SIGTERM and SIGHUP raise ``KeyboardInterrupt`` as SIGINT does: the robot side's
``except KeyboardInterrupt`` paths, which put the safe command on the wire, then run for every
stop (``drive`` and ``record`` used to die on SIGTERM, ``deploy run`` on SIGHUP, with the robot on
its last command), and the exit code is 128 + the signal's number.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

#: The signals that stop a command: Ctrl-C, a supervisor's or ``kill``'s SIGTERM, and SIGHUP when
#: the terminal or SSH session it runs in goes away (by default it would end the process on the
#: spot: a robot left on its last command, a run without its last checkpoint).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclasses.dataclass
class StopRequest:
    """The first stop signal received, if any (``signum``: its number)."""

    signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        """``SIGINT`` / ``SIGTERM``; empty when no signal came."""
        return signal.Signals(self.signum).name if self.signum is not None else ""

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 SIGINT, 143 SIGTERM): the shell's code for it; 0 without one."""
        return 128 + self.signum if self.signum is not None else 0


_active: StopRequest | None = None  # the request of the outermost stop_on_signals() now open


def _say(text: str) -> None:
    # os.write, not print: the handler may run in the middle of a print to stderr (the progress
    # line), and a second buffered write there raises "reentrant call".
    os.write(2, text.encode())


@contextlib.contextmanager
def stop_on_signals(
    doing: str = "stopping at the next iteration boundary and saving the last completed iteration",
) -> Iterator[StopRequest]:
    """Record SIGINT and SIGTERM into a :class:`StopRequest` instead of acting on them (module
    docstring); the previous handlers are restored on exit. ``doing``: what the first signal's
    line on stderr says happens next.

    Nested use (``simreal train`` opens one around the whole command, ``loop_common.run``
    one around its loop) yields the outer request, so a signal during setup is seen by the
    loop. Outside the main thread, where Python cannot install handlers, the request never
    fires and signals keep their usual effect.
    """
    global _active
    if _active is not None:
        yield _active
        return
    if threading.current_thread() is not threading.main_thread():
        yield StopRequest()
        return
    stop = StopRequest()

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if stop.requested:
            _say(f"\nsimreal: {name} again: stopping now\n")
            os._exit(128 + signum)
        stop.signum = signum
        _say(f"\nsimreal: {name}: {doing} (send it again to stop at once)\n")

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    _active = stop
    try:
        yield stop
    finally:
        _active = None
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)  # None: set outside Python


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Make SIGTERM and SIGHUP raise ``KeyboardInterrupt(name)`` in the main thread, as SIGINT
    does, so every ``except KeyboardInterrupt`` path (the safe command on the wire, the finished
    episodes kept) runs whichever signal stopped the command; the previous handlers come back
    on exit. ``simreal``'s CLI opens it around every verb; :func:`stop_on_signals` inside it
    takes the signals over while it is open. Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in SIGNALS if s != signal.SIGINT}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def interrupt_signal(e: KeyboardInterrupt) -> str:
    """The signal a KeyboardInterrupt stands for: ``SIGINT`` (Ctrl-C), or the name
    :func:`signals_as_interrupt` gave it."""
    return e.args[0] if e.args and e.args[0] in {s.name for s in SIGNALS} else "SIGINT"


def interrupt_exit_code(e: KeyboardInterrupt) -> int:
    """The exit code of the signal ``e`` stands for (:func:`signal_exit_code`)."""
    return signal_exit_code(interrupt_signal(e))


def signal_exit_code(name: str) -> int:
    """128 + the number of signal ``name``, what a shell reports: 130 SIGINT, 143 SIGTERM, 129 SIGHUP."""
    return 128 + signal.Signals[name].value
