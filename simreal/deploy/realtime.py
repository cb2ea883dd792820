"""What a control loop in Python needs from its host: the CPU when it is due, and no long pause.

Two things can hold a loop past its deadline, and each has its remedy here:

- **the scheduler**: batch work on the same cores runs first. :func:`try_realtime` /
  :func:`realtime_priority` put the process under SCHED_FIFO, as ros2_control's controller
  manager does for its loop (when permitted).
- **the garbage collector**: CPython's full (generation 2) collection walks every tracked
  object in the process, with the GIL held, so every thread stops. A rehearsal's robot process
  holds 200-250 thousand of them after importing MuJoCo, JAX and the training env, and one
  full collection took 0.13-0.15 s on a 2-core VM: longer than the runner's 0.1 s watchdog,
  so a rehearsal under ``MUJOCO_GL=egl`` (whose imports move the collection into the run) lost
  its state stream for that long, the watchdog cut the thrust and the vehicle fell.
  :func:`frozen_heap` collects once and freezes everything that exists before the loop starts
  (``gc.freeze``: moved to a permanent generation no collection visits, as CPython's docs
  advise for exactly this), so a collection during the loop walks only what the loop itself
  allocated. Nested and concurrent loops (a driver and its twin in one process) share one
  freeze; it is lifted when the last of them ends.

Imports: the standard library only (robot runtime).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Iterator

_freeze_lock = threading.Lock()
_freeze_depth = 0


def try_realtime(priority: int = 50) -> bool:
    """Run this process (and the threads it creates later) under SCHED_FIFO at ``priority``.

    Needs CAP_SYS_NICE or an rtprio limit; returns False (and changes nothing) without them.
    Call before creating the DDS participant so Cyclone's receive threads inherit it. Linux
    throttles real-time tasks to 95 % of the CPU by default, and these loops sleep most of the
    time.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except (AttributeError, PermissionError, OSError):
        return False


@contextlib.contextmanager
def realtime_priority(enabled: bool = True, priority: int = 50) -> Iterator[bool]:
    """``with realtime_priority() as rt:`` SCHED_FIFO inside (when permitted), normal after."""
    rt = enabled and try_realtime(priority)
    try:
        yield rt
    finally:
        if rt:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@contextlib.contextmanager
def frozen_heap() -> Iterator[int]:
    """``with frozen_heap():`` around a control loop: one full collection now, then every object
    alive is frozen (module docstring) until the outermost such block ends. Yields how many
    objects are frozen."""
    global _freeze_depth
    with _freeze_lock:
        if _freeze_depth == 0:
            gc.collect()
            gc.freeze()
        _freeze_depth += 1
        frozen = gc.get_freeze_count()
    try:
        yield frozen
    finally:
        with _freeze_lock:
            _freeze_depth -= 1
            if _freeze_depth == 0:
                gc.unfreeze()
