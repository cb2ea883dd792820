"""The instruction of a recorded episode: one sentence saying what this episode asks for.

    instruction("arm-reach", {"target_pos_w": np.array([0.41, -0.03, 0.53])})
    # 'reach the goal at x=0.410, y=-0.030, z=0.530 m'

A dataset stores it as the episode's task string (LeRobot's ``meta/tasks.parquet``), what a
language-conditioned policy reads. The sentence names the episode's own inputs (the goal a task
sampled), read from the env's task info; a task without a row in :data:`SENTENCES` gets its
description (the first line of its class docstring), the same for every episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from simreal.sim.tasks.arm_reach_choice import BALLS


def _xyz(p: np.ndarray) -> str:
    return f"x={p[0]:.3f}, y={p[1]:.3f}, z={p[2]:.3f} m"


def _push(info: Mapping[str, np.ndarray]) -> str:
    return "push the cube to x={:.3f}, y={:.3f} m on the table".format(*info["target_pos_w"])


#: task -> sentence from the episode's task info (numpy values of one env).
SENTENCES: dict[str, Callable[[Mapping[str, np.ndarray]], str]] = {
    "arm-reach": lambda info: f"reach the goal at {_xyz(info['target_pos_w'])}",
    "arm-reach-choice": lambda info: f"reach the {list(BALLS)[int(info['goal_index'])]} ball",
    "arm-push": _push,
    "arm-push-pixels": _push,
    "arm-pick": lambda info: f"pick up the cube and hold it at {_xyz(info['target_pos_w'])}",
}


def instruction(task: str, info: Mapping[str, np.ndarray]) -> str:
    """The episode's sentence (module docstring); ``info`` holds its task inputs as numpy arrays."""
    if task in SENTENCES:
        return SENTENCES[task](info)
    from simreal.sim.tasks import task_description

    return task_description(task).rstrip(".") or task
