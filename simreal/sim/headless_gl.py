"""Headless OpenGL for MuJoCo's offscreen renderer: which ``MUJOCO_GL`` this process uses.

A ``MUJOCO_GL`` set by the user is used as it is. When it is unset, EGL (a GPU's, or Mesa's
software EGL, llvmpipe) and then OSMesa are tried, each in a short child process (a failed
EGL attempt would pin PyOpenGL's platform in this one), and the first that opens a context
is used; none working is one error line saying what to install.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

#: Headless OpenGL backends (MUJOCO_GL values), in order of preference.
HEADLESS_GL = ("egl", "osmesa")


def _gl_error(name: str) -> str | None:
    """None if MuJoCo opens an offscreen context with ``MUJOCO_GL=name`` (in a child process),
    else the last line of its error."""
    probe = "import mujoco; c = mujoco.GLContext(8, 8); c.make_current(); c.free()"
    try:
        r = subprocess.run(
            [sys.executable, "-c", probe],
            env={**os.environ, "MUJOCO_GL": name},
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return "timed out opening a context"
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    return None if r.returncode == 0 else (lines[-1] if lines else f"exit code {r.returncode}")


def use_headless_gl() -> str:
    """The ``MUJOCO_GL`` this process renders with, chosen as the module docstring says."""
    from simreal.dependencies import require
    from simreal.errors import SimrealError

    require("mujoco")  # the probes open MuJoCo's GL contexts: without MuJoCo, the install is what is missing

    if os.environ.get("MUJOCO_GL"):
        return os.environ["MUJOCO_GL"]
    errors = {}
    for name in HEADLESS_GL:
        errors[name] = _gl_error(name)
        if errors[name] is None:
            break
    else:
        tried = "; ".join(f"MUJOCO_GL={n}: {e}" for n, e in errors.items())
        raise SimrealError(
            f"no OpenGL for offscreen rendering ({tried}); install EGL (Debian: libegl1) or "
            "OSMesa (libosmesa6), or set MUJOCO_GL"
        )
    os.environ["MUJOCO_GL"] = name
    if "mujoco" in sys.modules:
        import mujoco

        # MuJoCo chose its GL context class from MUJOCO_GL when it was first imported, and
        # mujoco.Renderer opens that class: re-run MuJoCo's own choice with the value set now.
        importlib.reload(sys.modules[mujoco.Renderer.__module__].gl_context)
    return name
