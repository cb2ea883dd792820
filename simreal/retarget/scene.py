"""The world the motion happens in: the ground plane plus optional boxes (steps, platforms, objects).

    # scene.yaml, for `simreal retarget ... --scene scene.yaml`
    boxes:
      - {name: step, pos: [1.0, 0.0, 0.10], size: [0.30, 0.60, 0.10]}    # centre, half-sizes [m]
      - {name: crate, pos: [0.6, 0.5, 0.25], size: [0.2, 0.2, 0.25], yaw: 0.3}

Boxes are static geoms in the retargeting model, so the solver keeps every robot geom out
of them (scene penetration) and the metrics count it. Box tops are terrain: a stance foot stands
on the highest box top under it that is not above the foot (a box overhead is an obstacle).
Their surfaces are sampled into the interaction mesh.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np

from simreal.config import build, field
from simreal.errors import ConfigError
from simreal.yaml_io import load_yaml

SCENE_CONTYPE, SCENE_CONAFFINITY = 1, 1


@dataclasses.dataclass(frozen=True)
class Box:
    """An axis-aligned (then yawed) box. pos: centre [m]; size: half extents [m]; yaw [rad]."""

    name: str
    pos: tuple[float, ...]
    size: tuple[float, ...]
    yaw: float = field(0.0, doc="rotation about world z [rad]")


@dataclasses.dataclass(frozen=True)
class Scene:
    """Ground plane at z = 0 plus boxes."""

    boxes: tuple[Box, ...] = field(())

    def height(self, xy: np.ndarray, below_z: np.ndarray | float = np.inf, step_m: float = 0.05) -> np.ndarray:
        """Support height [m] under points (..., 2): the highest box top covering them that is not
        above ``below_z + step_m`` (a sole at ``below_z`` stands on it, it does not duck under a
        box overhead), else the ground, 0."""
        xy = np.asarray(xy, dtype=float)
        below = np.broadcast_to(np.asarray(below_z, dtype=float), xy.shape[:-1])
        h = np.zeros(xy.shape[:-1])
        for b in self.boxes:
            c, s = np.cos(b.yaw), np.sin(b.yaw)
            d = xy - np.asarray(b.pos[:2])
            local = np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], -1)
            top = b.pos[2] + b.size[2]
            inside = np.all(np.abs(local) <= np.asarray(b.size[:2]), axis=-1) & (top <= below + step_m)
            h = np.where(inside, np.maximum(h, top), h)
        return h

    def surface_points(self, spacing_m: float = 0.15) -> np.ndarray:
        """Sample points (N, 3) [m] on the boxes' faces, about ``spacing_m`` apart."""
        pts = []
        for b in self.boxes:
            R = np.array([[np.cos(b.yaw), -np.sin(b.yaw), 0], [np.sin(b.yaw), np.cos(b.yaw), 0], [0, 0, 1]])
            size = np.asarray(b.size)
            axes = [np.linspace(-s, s, max(2, int(np.ceil(2 * s / spacing_m)) + 1)) for s in size]
            grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
            on_face = np.any(np.isclose(np.abs(grid), size), axis=1)
            pts.append(grid[on_face] @ R.T + np.asarray(b.pos))
        return np.concatenate(pts) if pts else np.zeros((0, 3))


def load_scene(path: str | Path | None) -> Scene:
    """Read a scene YAML (see module docstring); None gives the flat ground alone."""
    if path is None:
        return Scene()
    scene = build(Scene, load_yaml(path), prefix="scene")
    for i, b in enumerate(scene.boxes):
        if len(b.pos) != 3 or len(b.size) != 3 or min(b.size) <= 0:
            raise ConfigError(
                f"scene.boxes[{i}]",
                "pos must be [x, y, z] and size [hx, hy, hz] with positive half-sizes [m]",
                str(path),
            )
    return scene


def add_to_spec(spec: mujoco.MjSpec, scene: Scene) -> None:
    """Add the scene's boxes as static geoms to a model spec."""
    for b in scene.boxes:
        half = 0.5 * b.yaw
        spec.worldbody.add_geom(
            name=f"scene_{b.name}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(b.size),
            pos=list(b.pos),
            quat=[np.cos(half), 0.0, 0.0, np.sin(half)],
            contype=SCENE_CONTYPE,
            conaffinity=SCENE_CONAFFINITY,
            rgba=[0.6, 0.5, 0.4, 1],
        )
