"""A camera that keeps the robot in view: what ``simreal play`` and the benchmark's trial films see
when the model has no camera of its own (or none is asked for).

MuJoCo's default free camera looks at the model's centre from a fixed place; a humanoid that
walks a retargeted clip starting 3 m away, or a quadrotor that flies off, leaves its frame.
:class:`FollowCamera` is a free camera (azimuth 135 deg, elevation -20 deg) at 2.5 times the
robot's bounding radius plus 0.3 m from it, looking at the robot's centre; for a free base (a
quadrotor, a humanoid) it looks at the base every frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def robot_extent(model: Any) -> tuple[np.ndarray, float]:
    """(centre [m], radius [m]) of the robot's geoms at the model's reference pose: the
    bounding spheres (``geom_rbound``) of every geom not on the world body (a floor, a table and
    their extent would otherwise set the camera's distance)."""
    import mujoco

    d = mujoco.MjData(model)
    mujoco.mj_kinematics(model, d)
    robot = np.flatnonzero(model.geom_bodyid > 0)
    if robot.size == 0:
        return np.array(model.stat.center), float(model.stat.extent)
    pos, r = d.geom_xpos[robot], model.geom_rbound[robot]
    center = (np.min(pos - r[:, None], 0) + np.max(pos + r[:, None], 0)) / 2
    return center, float(np.max(np.linalg.norm(pos - center, axis=1) + r))


class FollowCamera:
    """The camera of the module docstring; ``camera(data)`` is the ``mujoco.MjvCamera`` to render
    ``data`` with. ``free_base``: whether to follow the free base (None: when the model has one,
    the body :func:`simreal.sim.robots.free_base_body` names)."""

    def __init__(self, model: Any, free_base: bool | None = None):
        import mujoco

        from simreal.sim.robots import free_base_body

        center, radius = robot_extent(model)
        base = free_base_body(model)
        self.base = base if free_base is not False else None
        self.cam = mujoco.MjvCamera()
        self.cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.cam.azimuth, self.cam.elevation = 135.0, -20.0
        self.cam.distance = 2.5 * radius + 0.3
        self.cam.lookat[:] = center

    def __call__(self, data: Any) -> Any:
        if self.base is not None:
            self.cam.lookat[:] = data.xpos[self.base]
        return self.cam
