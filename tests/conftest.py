"""Shared test settings: keep JAX on CPU and quiet, and give tests a runs/ folder of their own."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MUJOCO_GL", "egl")
