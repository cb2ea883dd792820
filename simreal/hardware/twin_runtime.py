"""What a twin serving a wire in real time is made of, besides its protocol.

- :class:`ServingThread`: one daemon thread running ``_serve`` until :meth:`~ServingThread.stop`;
  a context manager (``with Twin(...) as twin:``); ``_release`` frees the wire (a pty, a socket)
  after the thread ended.
- :class:`WallClock`: simulated time kept level with the wall clock. Physics runs on demand:
  before a twin serves or sends anything it steps the model :meth:`~WallClock.steps_due` times,
  so commands act at the times they arrive and an idle twin costs no CPU. An idle gap longer
  than ``max_catchup_s`` is skipped (the robot has settled), not replayed.
- :func:`serve_until_interrupted`: a twin's command line: its banner, then wait for Ctrl-C (with
  a status line every 2 s where the twin gives one).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Self

from simreal.deploy.realtime import frozen_heap

#: Longest idle gap the physics replays [s]; a longer one is skipped.
MAX_CATCHUP_S = 0.5


class ServingThread:
    """Base of a twin whose wire is served by one thread (see module docstring)."""

    def __init__(self, name: str):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve_frozen, name=name, daemon=True)

    def _serve_frozen(self) -> None:
        with frozen_heap():  # no full garbage collection while serving (simreal/deploy/realtime.py)
            self._serve()

    def _serve(self) -> None:
        """Serve the wire until ``self._stop`` is set."""
        raise NotImplementedError

    def _release(self) -> None:
        """Free the wire; runs once the thread has ended (and on a twin never started)."""

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the thread, then release the wire; idempotent."""
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
        self._release()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class WallClock:
    """Simulated time kept level with the wall clock (see module docstring).

    Args:
      dt: the physics step [s].
      max_catchup_s: the longest gap replayed [s].
    """

    def __init__(self, dt: float, max_catchup_s: float = MAX_CATCHUP_S):
        self.dt, self.max_catchup_s = dt, max_catchup_s
        self.t0 = time.monotonic()  # wall-clock time of simulated time 0

    def steps_due(self, sim_time_s: float) -> int:
        """Physics steps that bring simulated time ``sim_time_s`` [s] up to the wall clock."""
        behind = time.monotonic() - self.t0 - sim_time_s
        if behind > self.max_catchup_s:
            self.t0 += behind - self.max_catchup_s
            behind = self.max_catchup_s
        return int(behind / self.dt)


def serve_until_interrupted(banner: str, status: Callable[[], str] | None = None, every_s: float = 2.0) -> None:
    """Print ``banner`` (flushed: a parent process reads it from a pipe), then wait for Ctrl-C,
    printing ``status()`` every ``every_s`` [s] where given (where the simulated robot is)."""
    print(banner, flush=True)
    wait = threading.Event().wait
    try:
        while not wait(every_s if status is not None else None):
            if status is not None:
                print(status(), flush=True)
    except KeyboardInterrupt:
        pass
