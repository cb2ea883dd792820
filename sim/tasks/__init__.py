"""The task registry: a static table, so every task is listed without importing anything.

Each entry maps a task name to ``module:Class`` (an :class:`~simreal.sim.env.MjEnv` with a
``config_class``) and the robot it runs by default. ``configs/tasks/<name>.yaml`` holds
the task's default configuration.
"""

from __future__ import annotations

import importlib

from simreal.errors import UnknownNameError

TASKS: dict[str, str] = {
    "quadrotor-hover": "simreal.sim.tasks.quadrotor_hover:QuadrotorHover",
    "quadrotor-track": "simreal.sim.tasks.quadrotor_track:QuadrotorTrack",
    "cartpole-balance": "simreal.sim.tasks.cartpole_balance:CartpoleBalance",
    "arm-reach": "simreal.sim.tasks.arm_reach:ArmReach",
    "g1-velocity": "simreal.sim.tasks.g1_velocity:G1Velocity",
    "g1-tracking": "simreal.sim.tasks.g1_tracking:G1Tracking",
    "arm-pick": "simreal.sim.tasks.arm_pick:ArmPick",
    "arm-push": "simreal.sim.tasks.arm_push:ArmPush",
}


def task_class(name: str) -> type:
    """The env class of a registered task; the error lists the registered names."""
    if name not in TASKS:
        raise UnknownNameError("task", name, TASKS)
    mod, cls = TASKS[name].split(":")
    return getattr(importlib.import_module(mod), cls)
