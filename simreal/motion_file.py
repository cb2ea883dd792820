"""The motion file: retarget's output and the sim tracking tasks' input (DESIGN.md contract).

One ``.npz`` per clip, read with ``allow_pickle=False`` and written atomically:

=================  ===========  ==========================================================
key                shape        meaning
=================  ===========  ==========================================================
format_version     ()           1
fps                ()           frame rate [Hz]
joint_names        (n,)         actuated joints, in the robot driver's order
root_pos           (T, 3)       floating base position, world [m]
root_quat          (T, 4)       floating base orientation, world, wxyz (MuJoCo order)
root_lin_vel       (T, 3)       floating base linear velocity, world [m/s]
root_ang_vel       (T, 3)       floating base angular velocity, world [rad/s]
dof_pos            (T, n)       joint positions [rad] (or [m] for slide joints)
dof_vel            (T, n)       joint velocities [rad/s], central differences
body_names         (b,)         every body of the model except the world
body_pos           (T, b, 3)    body frame positions, world [m]
body_quat          (T, b, 4)    body frame orientations, world, wxyz
foot_names         (2,)         the feet the contact labels are for (left, right)
foot_contacts      (T, 2)       True where the foot is in stance
provenance         ()           JSON: source file, robot, method, solver settings, versions,
                               source_frames (the clip's frames this file holds), and
                               for a clip cut in parts, part ({"index": k, "of": n})
quality            ()           JSON: the quality report (simreal/retarget/metrics.py, checks.py) and
                               the defects bridged or cut (simreal/retarget/repair.py)
=================  ===========  ==========================================================

    >>> save_motion("walk_g1.npz", motion)            # doctest: +SKIP
    >>> m = load_motion("walk_g1.npz"); m.dof_pos.shape
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from simreal.errors import DataFileError, UnknownNameError
from simreal.npz import open_npz
from simreal.yaml_io import atomic_write_bytes

FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Motion:
    """A retargeted clip; see the module docstring for shapes and units."""

    fps: float
    joint_names: tuple[str, ...]
    root_pos: np.ndarray
    root_quat: np.ndarray
    root_lin_vel: np.ndarray
    root_ang_vel: np.ndarray
    dof_pos: np.ndarray
    dof_vel: np.ndarray
    body_names: tuple[str, ...]
    body_pos: np.ndarray
    body_quat: np.ndarray
    foot_names: tuple[str, str]
    foot_contacts: np.ndarray
    provenance: dict[str, Any]
    quality: dict[str, Any]

    @property
    def num_frames(self) -> int:
        return int(self.root_pos.shape[0])

    @property
    def dt_s(self) -> float:
        """Frame period [s]."""
        return 1.0 / self.fps

    def joint_index(self, name: str) -> int:
        """Column of joint ``name`` in ``dof_pos``; the error lists valid names."""
        if name not in self.joint_names:
            raise UnknownNameError("joint", name, self.joint_names)
        return self.joint_names.index(name)

    def robot_columns(self, joints: list[str], robot: str, path: str, held: tuple[str, ...] = ()) -> list[int]:
        """The column of each of robot ``robot``'s ``joints``; a DataFileError naming
        env.motion_file (at ``path``) when the clip's joints are not exactly those: a clip
        retargeted for another robot (named when its joints are exactly a shipped robot's). A clip
        with more joints (the 29-DoF G1's on the 23-DoF one) is refused too: its tracked bodies
        moved with joints this robot has welded, so the reference asks for poses the robot cannot
        take. The exception is ``held``, joints the robot has but holds at a target with the
        driver's PD (the 12-DoF G1's waist and arms): a clip of the whole robot plays on its
        driven joints, the held ones ignored (their bodies are not tracked: the spec's
        ``tracking_bodies`` are the driven ones). ``simreal train`` calls it before the run
        directory exists, the task when it loads the clip."""
        missing = [j for j in joints if j not in self.joint_names]
        extra = [j for j in self.joint_names if j not in joints and j not in held]
        if missing or extra:
            from simreal.robot_spec import available_robots, load_robot_spec

            clip = set(self.joint_names)
            owners = [r for r in available_robots() if set(load_robot_spec(r).actuator_names) == clip]
            who = (
                f"it has the joints of {' or '.join(owners)}"
                if owners
                else f"its joints: {', '.join(self.joint_names)}"
            )
            differ = (
                f"it lacks {missing[0]!r} ({len(missing)} of {len(joints)} missing)"
                if missing
                else f"it moves {extra[0]!r} ({len(extra)} joint(s) robot {robot} does not have)"
            )
            raise DataFileError(
                path,
                f"env.motion_file: the clip's joints are not robot {robot}'s: {differ}; "
                f"retargeted for another robot? {who}; retarget the source for {robot}: "
                f"simreal retarget SOURCE --robot {robot}",
            )
        return [self.joint_index(j) for j in joints]


_ARRAYS = (
    "root_pos",
    "root_quat",
    "root_lin_vel",
    "root_ang_vel",
    "dof_pos",
    "dof_vel",
    "body_pos",
    "body_quat",
    "foot_contacts",
)
_NAMES = ("joint_names", "body_names", "foot_names")
_EXPECTED = {
    "fps": "the frame rate [Hz]",
    "joint_names": "(n,) joint names",
    "body_names": "(b,) body names",
    "foot_names": "(2,) foot names",
    "root_pos": "(T, 3) positions [m]",
    "root_quat": "(T, 4) wxyz quaternions",
    "root_lin_vel": "(T, 3) velocities [m/s]",
    "root_ang_vel": "(T, 3) angular velocities [rad/s]",
    "dof_pos": "(T, n) joint positions [rad]",
    "dof_vel": "(T, n) joint velocities [rad/s]",
    "body_pos": "(T, b, 3) positions [m]",
    "body_quat": "(T, b, 4) wxyz quaternions",
    "foot_contacts": "(T, 2) stance flags",
}


def _shapes(T: int, n: int, b: int) -> dict[str, tuple[int, ...]]:
    return {
        "root_pos": (T, 3),
        "root_quat": (T, 4),
        "root_lin_vel": (T, 3),
        "root_ang_vel": (T, 3),
        "dof_pos": (T, n),
        "dof_vel": (T, n),
        "body_pos": (T, b, 3),
        "body_quat": (T, b, 4),
        "foot_contacts": (T, 2),
    }


def validate_motion(m: Motion, where: str = "motion") -> None:
    """Raise DataFileError naming the first field that breaks the contract."""
    if not (np.isfinite(m.fps) and m.fps > 0):
        raise DataFileError(where, f"field 'fps' must be > 0 Hz, got {m.fps}")
    T, n, b = m.root_pos.shape[0] if m.root_pos.ndim else 0, len(m.joint_names), len(m.body_names)
    if T < 1:
        raise DataFileError(where, f"field 'root_pos' must be (T, 3) with T >= 1, got {m.root_pos.shape}")
    for key, shape in _shapes(T, n, b).items():
        arr = getattr(m, key)
        if arr.shape != shape:
            raise DataFileError(
                where, f"field '{key}' has shape {arr.shape}, expected {shape} (T={T} frames, {n} joints, {b} bodies)"
            )
        if key != "foot_contacts" and not np.all(np.isfinite(arr)):
            raise DataFileError(where, f"field '{key}' holds non-finite values")
    if len(m.foot_names) != 2:
        raise DataFileError(where, f"field 'foot_names' must name 2 feet (left, right), got {list(m.foot_names)}")
    for key in _NAMES:
        names = getattr(m, key)
        if len(set(names)) != len(names):
            raise DataFileError(where, f"field '{key}' has duplicate names")
    for key in ("root_quat", "body_quat"):
        norm = np.linalg.norm(getattr(m, key), axis=-1)
        if np.any(np.abs(norm - 1.0) > 1e-3):
            worst = norm.flat[np.argmax(np.abs(norm - 1))]
            raise DataFileError(
                where,
                f"field '{key}' holds quaternions that are not unit length "
                f"(|q| = {worst:.4f}); expected wxyz unit quaternions",
            )


def save_motion(path: str | Path, motion: Motion) -> None:
    """Validate and write ``motion`` as npz, atomically (temp file, then rename)."""
    validate_motion(motion, str(path))
    arrays: dict[str, np.ndarray] = {
        "format_version": np.array(FORMAT_VERSION),
        "fps": np.array(float(motion.fps)),
        "provenance": np.array(json.dumps(motion.provenance, sort_keys=True, default=_json_default)),
        "quality": np.array(json.dumps(motion.quality, sort_keys=True, default=_json_default)),
    }
    for key in _NAMES:
        arrays[key] = np.array(getattr(motion, key), dtype=np.str_)
    for key in _ARRAYS:
        arr = getattr(motion, key)
        arrays[key] = arr.astype(bool) if key == "foot_contacts" else np.asarray(arr, dtype=np.float64)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy stub: **arrays might bind allow_pickle
    atomic_write_bytes(path, buf.getvalue())


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def load_motion(path: str | Path) -> Motion:
    """Read and validate a motion file; a missing or malformed field raises DataFileError naming it."""
    p = Path(path)
    with open_npz(p) as z:
        missing = [k for k in ("fps", "provenance", "quality", *_NAMES, *_ARRAYS) if k not in z]
        if missing:
            raise DataFileError(str(p), f"missing field(s) {', '.join(missing)}; is this a simreal motion file?")
        if "format_version" in z:
            version = z.number("format_version", "the motion file format version (an integer)")
            if version > FORMAT_VERSION:
                raise DataFileError(
                    str(p), f"field 'format_version' is {version:g}; this simreal reads up to {FORMAT_VERSION}"
                )
        d: dict[str, Any] = {k: z.floats(k, _EXPECTED[k]) for k in _ARRAYS}
        for key in ("provenance", "quality"):
            try:
                d[key] = json.loads(z.text(key, "a JSON object (text)"))
            except json.JSONDecodeError as e:
                raise DataFileError(str(p), f"field '{key}' is not valid JSON: {e}") from None
            if not isinstance(d[key], dict):
                raise DataFileError(str(p), f"field '{key}' is JSON {type(d[key]).__name__}, expected a JSON object")
        for key in _NAMES:
            d[key] = z.strings(key, _EXPECTED[key])
        d["fps"] = z.number("fps", _EXPECTED["fps"])
    d["foot_contacts"] = d["foot_contacts"] != 0
    m = Motion(**d)
    validate_motion(m, str(p))
    return m
