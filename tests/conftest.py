"""Shared test settings: keep JAX on CPU and quiet, and give tests a runs/ folder of their own."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MUJOCO_GL", "egl")

# Test fixtures (tests/fixtures/) import as ``fixtures``, in this process and in the
# subprocesses tests start (a rehearsal robot built from a fixture robot spec).
_TESTS = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_TESTS, os.environ.get("PYTHONPATH", "")) if p)
