"""Named elements a task needs from a robot's model: the spec's extra sites, and the check that
every site and body a task's sensors read exists, so a user's model file that lacks one fails
with one line saying what to add (not MuJoCo's "unrecognized name" from deep inside compile).
"""

from __future__ import annotations

import mujoco

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec
from simreal.sim.robots.user_model import model_path

_SITE, _BODY, _XBODY = mujoco.mjtObj.mjOBJ_SITE, mujoco.mjtObj.mjOBJ_BODY, mujoco.mjtObj.mjOBJ_XBODY


def model_origin(spec: RobotSpec) -> str:
    """How messages name the robot's model: its file, or its builder."""
    path = model_path(spec)
    return str(path) if path is not None else f"the built-in model ({spec.model.builder})"


def add_spec_sites(s: mujoco.MjSpec, spec: RobotSpec) -> None:
    """Add ``model.sites`` to the model; ConfigError for an unknown body or a name the model already has."""
    for i, site in enumerate(spec.model.sites):
        body = s.body(site.body)
        if body is None:
            bodies = ", ".join(b.name for b in s.bodies[1:] if b.name)
            raise ConfigError(
                f"model.sites[{i}].body",
                f"no body '{site.body}' in {model_origin(spec)}; bodies: {bodies}",
                spec.source,
            )
        if s.site(site.name) is not None:
            raise ConfigError(
                f"model.sites[{i}].name",
                f"{model_origin(spec)} already has a site '{site.name}'; drop it from model.sites",
                spec.source,
            )
        body.add_site(name=site.name, pos=list(site.pos), size=[0.01, 0, 0], group=4)


def require_sensor_targets(s: mujoco.MjSpec, spec: RobotSpec, task: str) -> None:
    """ConfigError naming the first site or body a sensor of ``s`` reads that the model lacks.

    Args:
      s: the robot's spec with the task's sensors added, before compiling.
      spec: the robot spec (its file is named in the message).
      task: the task's name, for the message.
    """
    for sensor in s.sensors:
        name = sensor.objname
        if sensor.objtype == _SITE and s.site(name) is None:
            raise ConfigError(
                "model.sites",
                f"task {task} reads site '{name}', which {model_origin(spec)} lacks; "
                f'add <site name="{name}" .../> to that file, or to the spec as '
                f"model.sites: [{{name: {name}, body: <body>, pos: [x, y, z]}}]",
                spec.source,
            )
        if sensor.objtype in (_BODY, _XBODY) and s.body(name) is None:
            bodies = ", ".join(b.name for b in s.bodies[1:] if b.name)
            raise ConfigError(
                "model",
                f"task {task} reads body '{name}', which {model_origin(spec)} lacks "
                f"(bodies: {bodies}); rename the body in the file",
                spec.source,
            )
