"""JAX's persistent compilation cache for the command line: a second run compiles nothing.

A training step, an evaluation rollout and a policy's forward pass are XLA programs that JAX
compiles in every new process (the quadrotor's training step: seconds on 2 cores, a humanoid's
tens of seconds). JAX can keep the compiled programs on disk and load them in the next process
that builds the same program (``jax_compilation_cache_dir``); :func:`configure` points it at
``$XDG_CACHE_HOME/simreal/jax`` (``~/.cache/simreal/jax``) before JAX is imported, as the
``JAX_COMPILATION_CACHE_DIR`` environment variable, so nothing heavy loads here.

Only programs without host callbacks are stored: the ``native`` physics backend steps MuJoCo
from a callback, which JAX cannot serialise, so its programs still compile each run; the
``rigid`` and ``mjx`` backends' programs are cached whole. A program that compiles in under a
second is not stored (JAX's ``jax_persistent_cache_min_compile_time_secs``).

A ``JAX_COMPILATION_CACHE_DIR`` the user set is kept; ``SIMREAL_COMPILE_CACHE=0`` turns the
cache off (JAX's default: none). The cache is JAX's own format, keyed by the program, the JAX
and XLA versions and the device, so an upgrade or another machine never loads a stale entry.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "JAX_COMPILATION_CACHE_DIR"
SWITCH = "SIMREAL_COMPILE_CACHE"


def cache_dir() -> Path:
    """Where the cache lives unless the user named one: ``$XDG_CACHE_HOME/simreal/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "simreal" / "jax"


def configure() -> Path | None:
    """Turn the cache on for JAX imported after this call (module docstring); returns the cache
    folder, or None where ``SIMREAL_COMPILE_CACHE=0`` turned it off."""
    if os.environ.get(SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    return Path(os.environ.setdefault(ENV, str(cache_dir())))
