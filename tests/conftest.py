"""Shared test settings: keep JAX on CPU and quiet, and give tests a runs/ folder of their own."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MUJOCO_GL", "egl")
# The suite compiles hundreds of tiny training and evaluation programs and runs each for a few
# steps, so XLA's backend optimisation costs more than it saves: level 0 halves the compile of
# a PPO iteration on 2 cores (11.9 -> 5.1 s), and the serial suite took 27 min instead of 33.5. The
# product keeps XLA's default; tests check behaviour, and `bench/` measures speed. Subprocesses
# the tests start inherit it.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

# Test fixtures (tests/fixtures/) import as ``fixtures``, in this process and in the
# subprocesses tests start (a rehearsal robot built from a fixture robot spec).
_TESTS = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_TESTS, os.environ.get("PYTHONPATH", "")) if p)
