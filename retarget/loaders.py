"""One entry point for every motion format: :func:`load_motion_source`.

    >>> m = load_motion_source("clip.bvh")                               # doctest: +SKIP
    >>> m = load_motion_source("amass.npz", body_models="~/smpl_models")  # doctest: +SKIP

The format comes from the file suffix (``.bvh``, ``.csv``) or, for ``.npz``, from its
fields (``poses`` means AMASS, ``positions`` a keypoint file). Options that do not apply
to a format are ignored (AMASS is always Z-up metres).
"""

from __future__ import annotations

from pathlib import Path

from simreal.errors import DataFileError
from simreal.retarget.amass import load_amass
from simreal.retarget.bvh import load_bvh
from simreal.retarget.keypoints_file import load_keypoints_csv, load_keypoints_npz
from simreal.npz import open_npz
from simreal.retarget.skeleton import HumanMotion

SUFFIXES = (".bvh", ".csv", ".npz")


def _npz_kind(path: Path) -> str:
    with open_npz(path) as z:
        files = set(z.files)
    if "poses" in files:
        return "amass"
    if "positions" in files:
        return "keypoints"
    raise DataFileError(str(path), "npz is neither an AMASS clip (field 'poses') nor a keypoint file "
                                   f"(field 'positions'); found: {', '.join(sorted(files))}")


def load_motion_source(path: str | Path, units: str | float = "auto", up: str = "auto",
                       fps: float | None = None, body_models: str | None = None,
                       joint_map: dict[str, str] | None = None) -> HumanMotion:
    """Load a human motion clip of any supported format (see the module docstring).

    Args:
      units, up: file conventions for BVH and keypoint files (``auto`` guesses).
      fps: frame rate [Hz] for keypoint files without a time column.
      body_models: folder with SMPL-family body models, for AMASS clips.
      joint_map: canonical keypoint -> joint name, helps ``up="auto"`` on unknown rigs.
    """
    p = Path(path).expanduser()
    suffix = p.suffix.lower()
    if suffix == ".bvh":
        return load_bvh(p, units=units, up=up, joint_map=joint_map)
    if suffix == ".csv":
        return load_keypoints_csv(p, fps=fps, units=units, up=up)
    if suffix == ".npz":
        if _npz_kind(p) == "amass":
            return load_amass(p, body_models=body_models)
        return load_keypoints_npz(p, fps=fps, units=units, up=up)
    raise DataFileError(str(p), f"unknown motion format {suffix or '(no suffix)'!r}; valid: {', '.join(SUFFIXES)}")
