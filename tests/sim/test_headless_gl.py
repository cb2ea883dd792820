"""Headless OpenGL choice (``simreal.sim.headless_gl``, used by the batch renderer and ``simreal play``)."""

from __future__ import annotations

import os

import pytest


def test_no_headless_gl_is_one_error_line(monkeypatch):
    from simreal.errors import SimrealError
    from simreal.sim import headless_gl

    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(headless_gl, "_gl_error", lambda name: f"no {name} library")
    with pytest.raises(SimrealError, match="MUJOCO_GL=egl: no egl library; MUJOCO_GL=osmesa: no osmesa library"):
        headless_gl.use_headless_gl()
    assert "MUJOCO_GL" not in os.environ


def test_play_uses_the_shared_chooser():
    """``simreal play`` has no copy of its own: it calls the one the renderer uses."""
    from simreal.cli import play as cmd_play
    from simreal.sim import headless_gl

    assert cmd_play.use_headless_gl is headless_gl.use_headless_gl
