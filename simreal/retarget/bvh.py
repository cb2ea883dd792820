"""BVH (Biovision hierarchy) motion capture files from any rig.

Handles what studios' exporters actually write: any rotation channel order per joint,
3-channel (rotation) or 6-channel (position + rotation) joints anywhere in the tree,
``End Site`` leaves, Y-up or Z-up worlds, and centimetres, metres, millimetres or inches.
A joint's position channels, when present, replace its OFFSET (the convention of LAFAN1's
and Blender's readers); rotations compose in channel order as intrinsic rotations, so
``Zrotation Xrotation Yrotation`` means R = Rz @ Rx @ Ry.

    >>> motion = load_bvh("walk.bvh", units="auto", up="auto")   # doctest: +SKIP
    >>> motion.positions.shape                                     # (T, J, 3) [m], Z-up

End sites become joints named ``<parent>_end``. A malformed file raises
:class:`DataFileError` naming the line (and, in the MOTION block, the frame and column).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from simreal.errors import ConfigError, DataFileError
from simreal.retarget import joint_names
from simreal.retarget.skeleton import (
    MAX_LENGTH,
    HumanMotion,
    detect_up_axis,
    forward_kinematics,
    snap_fps,
    tree_extent,
    units_scale,
    up_axis_rotation,
)
from simreal.rotations import euler_to_matrix
from simreal.yaml_io import read_text

CHANNELS = ("Xposition", "Yposition", "Zposition", "Xrotation", "Yrotation", "Zrotation")
MAX_DEPTH = 200  # deepest joint nesting read (a full-body rig with fingers nests about 10)


@dataclasses.dataclass
class BvhJoint:
    """One joint of the hierarchy as written in the file (file units, file axes)."""

    name: str
    parent: int
    offset: np.ndarray  # (3,) in the parent's frame
    channels: tuple[str, ...]
    line: int  # where the joint is declared


@dataclasses.dataclass
class BvhData:
    """A parsed file before any unit or axis conversion."""

    joints: list[BvhJoint]
    frame_time_s: float
    values: np.ndarray  # (T, sum of channels)


class _Lines:
    """Non-empty lines with their 1-based numbers, and error helpers that cite them."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.items = [(i + 1, ln.strip()) for i, ln in enumerate(text.splitlines()) if ln.strip()]
        self.pos = 0

    def next(self, expect: str) -> tuple[int, list[str]]:
        if self.pos >= len(self.items):
            last = self.items[-1][0] if self.items else 0
            raise DataFileError(self.path, f"line {last}: file ends early; expected {expect}")
        num, text = self.items[self.pos]
        self.pos += 1
        return num, text.split()

    def fail(self, line: int, message: str) -> DataFileError:
        return DataFileError(self.path, f"line {line}: {message}")


def _floats(lines: _Lines, line: int, toks: list[str], n: int, what: str) -> np.ndarray:
    if len(toks) != n:
        raise lines.fail(line, f"expected {what} with {n} numbers, got {' '.join(toks)!r}")
    try:
        values = np.array([float(t) for t in toks], dtype=float)
    except ValueError:
        raise lines.fail(line, f"non-numeric value in {what}: {' '.join(toks)!r}") from None
    if not np.all(np.isfinite(values)):
        raise lines.fail(line, f"non-finite value in {what}: {' '.join(toks)!r}")
    return values


def _parse_joint(
    lines: _Lines, name: str, parent: int, decl_line: int, joints: list[BvhJoint], is_end: bool = False, depth: int = 1
) -> None:
    if depth > MAX_DEPTH:  # each level is a Python call: refuse before the stack runs out
        raise lines.fail(decl_line, f"joints nested deeper than {MAX_DEPTH} levels; a skeleton has about 10")
    num, toks = lines.next("'{'")
    if toks != ["{"]:
        raise lines.fail(num, f"expected '{{' after joint {name!r}, got {' '.join(toks)!r}")
    num, toks = lines.next("OFFSET")
    if not toks or toks[0].upper() != "OFFSET":
        raise lines.fail(num, f"expected 'OFFSET x y z' in joint {name!r}, got {' '.join(toks)!r}")
    offset = _floats(lines, num, toks[1:], 3, "OFFSET")
    channels: tuple[str, ...] = ()
    if not is_end:
        num, toks = lines.next("CHANNELS")
        if not toks or toks[0].upper() != "CHANNELS" or len(toks) < 2:
            raise lines.fail(num, f"expected 'CHANNELS n ...' in joint {name!r}, got {' '.join(toks)!r}")
        try:
            count = int(toks[1])
        except ValueError:
            raise lines.fail(num, f"channel count {toks[1]!r} is not an integer") from None
        channels = tuple(toks[2:])
        if len(channels) != count:
            raise lines.fail(num, f"CHANNELS says {count} channels but lists {len(channels)}")
        for c in channels:
            if c not in CHANNELS:
                raise lines.fail(num, f"unknown channel {c!r}; valid: {', '.join(CHANNELS)}")
        if len(set(channels)) != len(channels):
            raise lines.fail(num, f"repeated channel in {' '.join(channels)}")
    index = len(joints)
    joints.append(BvhJoint(name, parent, offset, channels, decl_line))
    while True:
        num, toks = lines.next("'}'")
        head = toks[0].upper()
        if toks == ["}"]:
            return
        if is_end:
            raise lines.fail(num, f"End Site takes only an OFFSET, got {' '.join(toks)!r}")
        if head == "JOINT":
            if len(toks) < 2:
                raise lines.fail(num, "JOINT without a name")
            child = " ".join(toks[1:])
            if any(j.name == child for j in joints):
                raise lines.fail(num, f"duplicate joint name {child!r}")
            _parse_joint(lines, child, index, num, joints, depth=depth + 1)
        elif head == "END":
            end = f"{name}_end"
            while any(j.name == end for j in joints):
                end += "_"
            _parse_joint(lines, end, index, num, joints, is_end=True, depth=depth + 1)
        else:
            raise lines.fail(num, f"expected JOINT, End Site or '}}' in joint {name!r}, got {' '.join(toks)!r}")


def parse_bvh(path: str | Path) -> BvhData:
    """Parse a BVH file into its hierarchy and raw channel values (no conversion)."""
    p = Path(path)
    lines = _Lines(str(p), read_text(p, "BVH file").lstrip("\ufeff"))
    num, toks = lines.next("HIERARCHY")
    if toks != ["HIERARCHY"]:
        raise lines.fail(num, f"expected 'HIERARCHY' as the first line of a BVH file, got {' '.join(toks)[:40]!r}")
    num, toks = lines.next("ROOT")
    if not toks or toks[0].upper() != "ROOT" or len(toks) < 2:
        raise lines.fail(num, f"expected 'ROOT name', got {' '.join(toks)!r}")
    joints: list[BvhJoint] = []
    _parse_joint(lines, " ".join(toks[1:]), -1, num, joints)
    if not joints[0].channels:
        raise lines.fail(joints[0].line, "the ROOT joint has no channels")
    num, toks = lines.next("MOTION")
    if toks and toks[0].upper() == "ROOT":
        raise lines.fail(num, "a second ROOT; only one skeleton per file is supported")
    if toks != ["MOTION"]:
        raise lines.fail(num, f"expected 'MOTION' after the hierarchy, got {' '.join(toks)!r}")
    num, toks = lines.next("'Frames: N'")
    m = re.fullmatch(r"Frames:\s*(\S+)", " ".join(toks))
    if m is None:
        raise lines.fail(num, f"expected 'Frames: N', got {' '.join(toks)!r}")
    try:
        n_frames = int(m.group(1))
    except ValueError:
        raise lines.fail(num, f"frame count {m.group(1)!r} is not an integer") from None
    if n_frames < 1:
        raise lines.fail(num, f"frame count must be >= 1, got {n_frames}")
    num, toks = lines.next("'Frame Time: dt'")
    m = re.fullmatch(r"Frame Time:\s*(\S+)", " ".join(toks))
    if m is None:
        raise lines.fail(num, f"expected 'Frame Time: seconds', got {' '.join(toks)!r}")
    try:
        frame_time = float(m.group(1))
    except ValueError:
        raise lines.fail(num, f"frame time {m.group(1)!r} is not a number") from None
    if not frame_time > 0:
        raise lines.fail(num, f"frame time must be > 0 s, got {frame_time}")
    if not 1e-6 <= frame_time <= 1e3:  # also keeps the frame rate 1 / frame_time finite
        raise lines.fail(num, f"frame time {frame_time} s is not a frame period (1 us to 1000 s)")
    n_ch = sum(len(j.channels) for j in joints)
    rows = lines.items[lines.pos :]
    if len(rows) < n_frames:
        last = rows[-1][0] if rows else num
        raise lines.fail(last, f"'Frames: {n_frames}' but the file holds only {len(rows)} frame lines")
    if len(rows) > n_frames:
        raise lines.fail(rows[n_frames][0], f"'Frames: {n_frames}' but more frame lines follow")
    values = np.empty((n_frames, n_ch))
    for f, (ln, text) in enumerate(rows):
        toks = text.split()
        if len(toks) != n_ch:
            raise lines.fail(ln, f"frame {f} has {len(toks)} values; the hierarchy declares {n_ch} channels")
        try:
            values[f] = [float(t) for t in toks]  # Python's float, the same test as _is_float below
        except ValueError:
            bad = next(i for i, t in enumerate(toks) if not _is_float(t))
            raise lines.fail(ln, f"frame {f}, column {bad + 1}: {toks[bad]!r} is not a number") from None
    if not np.all(np.isfinite(values)):
        f, c = np.argwhere(~np.isfinite(values))[0]
        raise lines.fail(rows[f][0], f"frame {f}, column {c + 1}: value is not finite")
    return BvhData(joints, frame_time, values)


def _is_float(tok: str) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


def bvh_local_transforms(data: BvhData) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame joint translations (T, J, 3) and rotations (T, J, 3, 3), file units/axes."""
    T, J = data.values.shape[0], len(data.joints)
    trans = np.empty((T, J, 3))
    rots = np.broadcast_to(np.eye(3), (T, J, 3, 3)).copy()
    col = 0
    for j, jt in enumerate(data.joints):
        trans[:, j] = jt.offset
        cols = {c: col + i for i, c in enumerate(jt.channels)}
        col += len(jt.channels)
        for axis, c in enumerate(("Xposition", "Yposition", "Zposition")):
            if c in cols:
                trans[:, j, axis] = data.values[:, cols[c]]
        rot_ch = [c for c in jt.channels if c.endswith("rotation")]
        if rot_ch:
            order = "".join(c[0] for c in rot_ch)
            angles = data.values[:, [cols[c] for c in rot_ch]]
            rots[:, j] = euler_to_matrix(angles, order)  # 1-3 channels (some exporters drop unused axes)
    return trans, rots


def load_bvh(
    path: str | Path, units: str | float = "auto", up: str = "auto", joint_map: dict[str, str] | None = None
) -> HumanMotion:
    """Load a BVH clip as Z-up joint positions in metres.

    Args:
      path: the ``.bvh`` file.
      units: file length unit: ``auto`` (from the skeleton's size), ``m``, ``cm``, ``mm``,
        ``in``, ``ft`` or metres per unit as a number.
      up: file up axis: ``auto`` (from where the head is relative to the feet), ``y``, ``z``.
      joint_map: canonical keypoint -> joint name, used only to find head and feet for
        ``up="auto"`` when the alias table does not recognise the rig.

    Returns:
      A :class:`HumanMotion` with every joint and end site.
    """
    if up not in ("auto", "y", "z"):
        raise ConfigError("up", f"unknown up axis {up!r}; valid: auto, y, z")
    data = parse_bvh(path)
    trans, rots = bvh_local_transforms(data)
    if np.abs(trans).max() > MAX_LENGTH:
        raise DataFileError(
            str(path),
            f"an OFFSET or position channel is {np.abs(trans).max():g} file units; "
            f"a skeleton in any unit stays under {MAX_LENGTH:g}",
        )
    parents = [j.parent for j in data.joints]
    pos_file = forward_kinematics(parents, trans, rots)
    names = tuple(j.name for j in data.joints)
    scale, unit_name = units_scale(units, tree_extent(pos_file))
    if up == "auto":
        up = _guess_up(names, pos_file, joint_map)
    R = up_axis_rotation(up)
    positions = scale * np.einsum("ab,tjb->tja", R, pos_file)
    source = {
        "path": str(path),
        "format": "bvh",
        "units": unit_name,
        "metres_per_unit": scale,
        "up_axis": up,
        "frame_time_s": data.frame_time_s,
        "num_joints": len(names),
    }
    return HumanMotion(names, positions, snap_fps(1.0 / data.frame_time_s), tuple(parents), source)


def _guess_up(names: tuple[str, ...], pos: np.ndarray, joint_map: dict[str, str] | None) -> str:
    try:
        idx = joint_names.resolve_keypoints(names, joint_map, required=("left_ankle", "right_ankle"))
    except ConfigError:
        return "y"
    top = idx.get("head", idx.get("neck", idx.get("torso", idx.get("pelvis"))))
    if top is None:
        return "y"
    feet = 0.5 * (pos[:, idx["left_ankle"]] + pos[:, idx["right_ankle"]])
    return detect_up_axis(pos[:, top], feet)
