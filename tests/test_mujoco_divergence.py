"""simreal.mujoco_divergence: MuJoCo's reset of a diverged state, seen through its warning counters."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from simreal.mujoco_divergence import bad_state, clear, mujoco_reset

BALL = "<mujoco><worldbody><body pos='0 0 1'><freejoint/><geom size='.1'/></body></worldbody></mujoco>"


def test_the_bad_state_warnings_are_consecutive():
    w, s = mujoco.mjtWarning, bad_state()
    assert list(range(s.start, s.stop)) == [int(w.mjWARN_BADQPOS), int(w.mjWARN_BADQVEL), int(w.mjWARN_BADQACC)]


@pytest.mark.parametrize("field, value", [("qpos", np.nan), ("qvel", 1e12), ("qfrc_applied", 1e30)])
def test_a_reset_is_seen_whichever_check_made_it(field, value):
    """A bad position, velocity or acceleration: MuJoCo puts the ball back at its start (time back
    at one step) and :func:`mujoco_reset` says so; a clean step does not, and :func:`clear` forgets it."""
    m = mujoco.MjModel.from_xml_string(BALL)
    d = mujoco.MjData(m)
    for _ in range(10):
        mujoco.mj_step(m, d)
    assert not mujoco_reset(d, m.opt.timestep)
    getattr(d, field)[:3] = value
    mujoco.mj_step(m, d)
    assert mujoco_reset(d, m.opt.timestep) and d.time == pytest.approx(m.opt.timestep)
    clear(d)
    mujoco.mj_step(m, d)
    assert not mujoco_reset(d, m.opt.timestep)
