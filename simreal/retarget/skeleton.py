"""Human motion as every loader returns it: named joint positions, Z-up, in metres.

A :class:`HumanMotion` is what BVH, AMASS and keypoint files have in common once their
conventions are undone: ``positions[t, j]`` is joint ``names[j]`` at frame ``t`` in a
right-handed world frame with +z up, in [m], sampled at ``fps`` [Hz]. Forward kinematics
over a joint tree (:func:`forward_kinematics`) and the unit and up-axis conventions
(:func:`units_scale`, :func:`up_axis_rotation`) live here so every loader undoes them the
same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from simreal.errors import ConfigError
from simreal.rotations import R_ZUP_FROM_YUP

# Metres per file unit for the unit names the loaders accept.
#: Length units by name [m]. ``cmu``: the CMU mocap database's ASF unit, an inch over ASF's
#: ``length 0.45`` (its BVH conversions keep it: a person spans about 35 of them).
UNITS_M: dict[str, float] = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254, "ft": 0.3048, "cmu": 0.0254 / 0.45}
#: ``units="auto"``: the first unit whose upper bound the skeleton's span (file units) is under.
#: A person's largest joint-to-joint span is 1-2.5 m (1.3-1.8 m in public captures): in metres
#: under 5; in CMU units (an inch / 0.45) about 25; in inches about 65 (CMU conversions, and
#: children, 45 for a 1.15 m span); in centimetres 100-250. The bounds sit about halfway, as
#: ratios, between neighbouring units' usual spans: 42 is a 2.4 m span in CMU units and 1.07 m
#: in inches, 100 is 2.5 m in inches and 1 m in centimetres.
AUTO_UNITS: tuple[tuple[float, str], ...] = ((5.0, "m"), (42.0, "cmu"), (100.0, "in"), (500.0, "cm"), (np.inf, "mm"))
UP_AXES = ("auto", "y", "z")
#: Largest coordinate a motion file may hold, in its own units (1000 km in mm): beyond it the
#: unit conversion and the kinematics stop being finite.
MAX_LENGTH = 1e9


@dataclasses.dataclass(frozen=True)
class HumanMotion:
    """Joint positions of one clip.

    Attributes:
      names: joint names as the source file spells them, (J,).
      positions: (T, J, 3) world positions [m], +z up.
      fps: frame rate [Hz].
      parents: parent index per joint (-1 for a root), or None for plain keypoints.
      source: provenance: file, format, units, up axis and any conversion applied.
    """

    names: tuple[str, ...]
    positions: np.ndarray
    fps: float
    parents: tuple[int, ...] | None = None
    source: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.positions.shape[0])

    @property
    def duration_s(self) -> float:
        """Clip length [s]."""
        return self.num_frames / self.fps

    def index(self, name: str) -> int:
        return self.names.index(name)


def snap_fps(fps: float) -> float:
    """A frame rate read from a rounded frame time (``0.0333333`` s) snapped to the integer it means."""
    return float(round(fps)) if abs(fps - round(fps)) < 1e-4 * fps else float(fps)


def forward_kinematics(parents: Sequence[int], translations: np.ndarray, rotations: np.ndarray) -> np.ndarray:
    """World joint positions of a joint tree.

    Args:
      parents: parent index per joint, parents before children, -1 for roots.
      translations: (T, J, 3) joint origin in its parent's frame (root: in the world).
      rotations: (T, J, 3, 3) joint rotation relative to its parent's frame.

    Returns:
      (T, J, 3) world positions of the joint origins.
    """
    T, J = translations.shape[:2]
    pos = np.empty((T, J, 3))
    rot = np.empty((T, J, 3, 3))
    for j, p in enumerate(parents):
        if p < 0:
            pos[:, j] = translations[:, j]
            rot[:, j] = rotations[:, j]
        else:
            pos[:, j] = pos[:, p] + np.einsum("tab,tb->ta", rot[:, p], translations[:, j])
            rot[:, j] = rot[:, p] @ rotations[:, j]
    return pos


def units_scale(units: str | float, extent: float) -> tuple[float, str]:
    """Metres per file unit.

    Args:
      units: ``"auto"``, a unit name (``m``, ``cm``, ``mm``, ``in``, ``ft``) or a number of
        metres per unit.
      extent: the skeleton's largest joint-to-joint span in file units, used by ``"auto"``
        (:data:`AUTO_UNITS`: metres, CMU units, inches, centimetres or millimetres).

    Returns:
      (metres per unit, the unit's name as recorded in provenance).
    """
    try:
        scale: float | None = float(units)
    except (TypeError, ValueError):
        scale = None  # a unit name
    if scale is not None:
        if not (np.isfinite(scale) and scale > 0):
            raise ConfigError("units", f"metres per unit must be a number > 0, got {units!r}")
        return scale, f"{scale:g} m/unit"
    if units == "auto":
        if not np.isfinite(extent) or extent <= 0:
            return 1.0, "m"
        name = next(unit for bound, unit in AUTO_UNITS if extent < bound)
        return UNITS_M[name], name
    if units not in UNITS_M:
        raise ConfigError(
            "units", f"unknown unit {units!r}; valid: auto, {', '.join(UNITS_M)}, or a number of metres per unit"
        )
    return UNITS_M[units], units


def up_axis_rotation(up: str) -> np.ndarray:
    """Rotation (3, 3) taking a file's frame with ``up`` ("y" or "z") to simreal's Z-up."""
    if up == "z":
        return np.eye(3)
    if up == "y":
        return R_ZUP_FROM_YUP.copy()
    raise ConfigError("up", f"unknown up axis {up!r}; valid: {', '.join(UP_AXES)}")


def detect_up_axis(head: np.ndarray, feet: np.ndarray, default: str = "y") -> str:
    """Guess the up axis from where the head is relative to the feet.

    Args:
      head: (T, 3) head (or neck) positions in file coordinates.
      feet: (T, 3) mean ankle positions in file coordinates.
      default: returned when the guess is not clear (the median head-minus-feet vector's
        largest component is not on y or z, or is negative).
    """
    v = np.median(head - feet, axis=0)
    axis = int(np.argmax(np.abs(v)))
    if v[axis] <= 0 or axis == 0:
        return default
    return "y" if axis == 1 else "z"


def tree_extent(positions: np.ndarray) -> float:
    """Largest distance between any two joints, median over a few frames (file units)."""
    idx = np.linspace(0, len(positions) - 1, num=min(len(positions), 16)).astype(int)
    spans = []
    for t in idx:
        p = positions[t]
        d = np.linalg.norm(p[:, None, :] - p[None, :, :], axis=-1)
        spans.append(d.max())
    return float(np.median(spans)) if spans else 0.0
