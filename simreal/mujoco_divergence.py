"""When MuJoCo's C engine reset a diverged simulation.

``mj_step`` checks the state for NaN, Inf or a magnitude over ``mjMAXVAL`` (1e10) three times a
step: positions, velocities, then accelerations (``mj_checkPos``, ``mj_checkVel``,
``mj_checkAcc``). On a bad value it prints one warning, resets the data to the model's initial
state (``mj_resetData``, which also clears every warning counter), counts the warning
(``d.warning[mjWARN_BADQPOS | BADQVEL | BADQACC].number``) and steps on from the reset state.
Without a look at those counters that is a silent teleport: a robot back at its start pose, time
back at 0. A counter above 0 after a step means the step reset the data (a reset clears the others
first), so :func:`mujoco_reset` is exact; :func:`clear` zeroes them where one ``MjData`` is reused.
A model with ``<flag autoreset="disable"/>`` counts without resetting and keeps the bad state,
which :func:`mujoco_reset` does not report (its time goes on).
(The native backend reads the same event from each env's ``time`` instead: one comparison over
the batch, where ``mujoco.batch.Batch.warning`` holds the counters per env too.)
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def bad_state() -> slice:
    """``mjtWarning``'s three bad-state warnings, consecutive: mjWARN_BADQPOS, BADQVEL, BADQACC
    (their numbers change between MuJoCo versions; read here, so the module imports without it)."""
    import mujoco

    return slice(int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQACC) + 1)


def mujoco_reset(d: Any, timestep: float) -> bool:
    """Whether MuJoCo reset ``d`` for a bad state since its counters were last cleared, read
    right after a step of ``timestep`` [s]. A reset leaves ``d.time`` at one step (0, then the
    step's own advance), so the counters are read only there: reading them costs more than a
    small model's whole step, and this runs after every step of a control loop."""
    return d.time < 1.5 * timestep and bool(d.warning.number[bad_state()].any())


def clear(d: Any) -> None:
    """Zero ``d``'s bad-state warning counters."""
    d.warning.number[bad_state()] = 0
