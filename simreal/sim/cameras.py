"""Named cameras in a model: a robot spec's ``model.cameras`` and a task's ``cameras`` become
MuJoCo cameras (``<camera>`` elements) on the body each names.

A camera aimed with ``lookat`` gets the orientation whose -z axis points from ``pos`` to
``lookat`` and whose +y (image up) lies in the plane of that axis and the body's +z:

    z_c = (pos - lookat) / |pos - lookat|,  x_c = (e_z x z_c) / |e_z x z_c|,  y_c = z_c x x_c

(e_y stands in for e_z when the camera looks straight up or down). The image size goes into
MuJoCo's ``cam_resolution``, so the compiled model carries everything a renderer needs.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.robot_spec import CameraSpec


def camera_names(model: mujoco.MjModel) -> list[str]:
    """The model's camera names, in camera-id order."""
    return [model.camera(i).name for i in range(model.ncam)]


def camera_size(model: mujoco.MjModel, name: str, key: str, owner: str = "the task") -> tuple[int, int]:
    """(H, W) [px] of camera ``name`` (its ``cam_resolution``); ConfigError naming ``key`` when
    ``owner``'s model has no such camera, listing the cameras it has."""
    names = camera_names(model)
    if name not in names:
        raise ConfigError(
            key,
            f"{owner}'s model has no camera '{name}'; its cameras: {', '.join(names) or 'none'} "
            "(a robot spec's model.cameras or a task's env.cameras adds one)",
        )
    w, h = (int(v) for v in model.cam_resolution[names.index(name)])
    return h, w


def lookat_quat(pos: Sequence[float], lookat: Sequence[float]) -> np.ndarray:
    """(4,) wxyz orientation of a camera at ``pos`` aimed at ``lookat`` (module docstring)."""
    z = np.asarray(pos, np.float64) - np.asarray(lookat, np.float64)
    z /= np.linalg.norm(z)
    up = np.array([0.0, 0.0, 1.0]) if abs(z[2]) < 0.999 else np.array([0.0, 1.0, 0.0])
    x = np.cross(up, z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, np.stack([x, y, z], axis=1).reshape(-1))  # columns: camera axes in the body frame
    return quat


def add_cameras(s: mujoco.MjSpec, cameras: Sequence[CameraSpec], key: str, source: str, origin: str) -> None:
    """Add ``cameras`` to ``s``; ConfigError ``key[i].body`` / ``key[i].name`` for an unknown body or
    a name the model already has.

    Args:
      s: the model's spec, before compiling.
      cameras: validated camera specs (``simreal.robot_spec.check_cameras``).
      key: the config key they came from (``model.cameras``, ``env.cameras``), for messages.
      source: the file they came from, for messages.
      origin: how messages name the model (its file or builder).
    """
    for i, cam in enumerate(cameras):
        body = s.worldbody if cam.body == "world" else s.body(cam.body)
        if body is None:
            bodies = ", ".join(["world"] + [b.name for b in s.bodies[1:] if b.name])
            raise ConfigError(f"{key}[{i}].body", f"no body '{cam.body}' in {origin}; bodies: {bodies}", source)
        if s.camera(cam.name) is not None:
            raise ConfigError(f"{key}[{i}].name", f"{origin} already has a camera '{cam.name}'", source)
        quat = lookat_quat(cam.pos, cam.lookat) if cam.lookat is not None else np.asarray(cam.quat, np.float64)
        body.add_camera(
            name=cam.name,
            pos=list(cam.pos),
            quat=list(quat / np.linalg.norm(quat)),
            fovy=float(cam.fovy_deg),
            resolution=[int(cam.width), int(cam.height)],
        )
