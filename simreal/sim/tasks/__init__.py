"""The task registry: a static table, so every task is listed without importing anything.

Each entry maps a task name to ``module:Class`` (an :class:`~simreal.sim.env.MjEnv` with a
``config_class``) and the robot it runs by default. ``configs/tasks/<name>.yaml`` holds
the task's default configuration; the first line of the class's docstring describes it
(:func:`task_description`). A variant (``arm-push-pixels``: ``arm-push`` seen through a camera)
is another name for a class with its own YAML, never a subclass of a task.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

from simreal.errors import UnknownNameError

TASKS: dict[str, str] = {
    "quadrotor-hover": "simreal.sim.tasks.quadrotor_hover:QuadrotorHover",
    "quadrotor-track": "simreal.sim.tasks.quadrotor_track:QuadrotorTrack",
    "cartpole-balance": "simreal.sim.tasks.cartpole_balance:CartpoleBalance",
    "arm-reach": "simreal.sim.tasks.arm_reach:ArmReach",
    "arm-reach-choice": "simreal.sim.tasks.arm_reach_choice:ArmReachChoice",
    "g1-velocity": "simreal.sim.tasks.g1_velocity:G1Velocity",
    "g1-tracking": "simreal.sim.tasks.g1_tracking:G1Tracking",
    "arm-pick": "simreal.sim.tasks.arm_pick:ArmPick",
    "arm-push": "simreal.sim.tasks.arm_push:ArmPush",
    "arm-push-pixels": "simreal.sim.tasks.arm_push:ArmPush",  # with env.pixel_cameras (its YAML)
    "arm-demo-track": "simreal.sim.tasks.arm_demo_track:ArmDemoTrack",
}

#: Tasks that are another task's class with their own config (their YAML): the one line that
#: says what they add, where the class docstring describes the class's own task.
VARIANT_DESCRIPTIONS: dict[str, str] = {
    "arm-push-pixels": (
        "Arm: push a cube to a goal, seeing the cube only through a camera (asymmetric critic on state)."
    ),
}


def task_class(name: str) -> type:
    """The env class of a registered task; the error lists the registered names."""
    if name not in TASKS:
        raise UnknownNameError("task", name, TASKS)
    mod, cls = TASKS[name].split(":")
    return getattr(importlib.import_module(mod), cls)


def task_description(name: str) -> str:
    """The first line of a registered task's class docstring ('' without one), or a variant's
    own line (:data:`VARIANT_DESCRIPTIONS`).

    Read from the module's source with :mod:`ast`, not imported: importing a task imports JAX
    and MuJoCo (seconds), and listing the tasks imports nothing else.
    """
    if name not in TASKS:
        raise UnknownNameError("task", name, TASKS)
    if name in VARIANT_DESCRIPTIONS:
        return VARIANT_DESCRIPTIONS[name]
    mod, cls = TASKS[name].split(":")
    spec = importlib.util.find_spec(mod)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"task {name!r} is registered as {TASKS[name]}, but there is no module {mod}")
    tree = ast.parse(Path(str(spec.origin)).read_text(encoding="utf-8"))
    doc = next((ast.get_docstring(n) for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    return doc.strip().splitlines()[0] if doc else ""
