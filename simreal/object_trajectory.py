"""The object trajectory: one demonstration's object motion, the reference of ``arm-demo-track``.

Human2Sim2Robot (Lum et al. 2025) turns one human demonstration into an RL task: the object's
6-D pose over time becomes an object-keypoint tracking reward, and the hand's pose just before
contact becomes the robot's initial state. This module is the file that carries them, written by
any pose tracker (FoundationPose, a motion-capture rig, a simulated demonstration) or extracted
from a LeRobot v3 dataset episode with an object-pose column (:func:`from_dataset`).

One ``.npz`` per demonstration, read with ``allow_pickle=False``, written atomically:

=======================  ======  ===============================================================
key                      shape   meaning
=======================  ======  ===============================================================
format_version           ()      1
fps                      ()      frame rate [Hz]
pos                      (T, 3)  object centre in world (an arm's base frame) [m]
quat_wxyz                (T, 4)  object orientation, world-from-object, unit wxyz (MuJoCo order)
pre_grasp_joint_pos      (n,)    optional: the robot's joint positions just before contact, in
                                 the driver's actuator order [rad] ([m] for a gripper's width)
robot                    ()      optional: the robot those joint positions are for
provenance               ()      optional: JSON object (tracker, video, dataset and episode...)
=======================  ======  ===============================================================

    traj = load_trajectory("push.npz")                 # or from_dataset("data/push", 0)
    ref = resampled(traj, 50.0)                        # the control rate's frames
    kp = keypoints(ref.pos, ref.quat_wxyz, 0.025)      # (T, 8, 3) cube corners [m]

Imports: numpy only (core: the simulation and the robot side both read it).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from simreal.errors import DataFileError
from simreal.npz import open_npz
from simreal.rotations import quat_to_rotmat
from simreal.yaml_io import atomic_write_bytes

FORMAT_VERSION = 1
#: The column :func:`from_dataset` reads by default: (T, 7) position [m] then wxyz quaternion.
OBJECT_POSE_KEY = "observation.object_pose"
#: The 8 corners of the unit cube [-1, 1]^3, in the order (x, y, z) counts in binary (x slowest).
_CORNERS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], np.float64)
_EXPECTED = {
    "fps": "the frame rate [Hz]",
    "pos": "(T, 3) object positions [m]",
    "quat_wxyz": "(T, 4) wxyz unit quaternions",
    "pre_grasp_joint_pos": "(n,) joint positions [rad]",
    "robot": "the robot name (text)",
    "provenance": "a JSON object (text)",
}


@dataclasses.dataclass(frozen=True)
class ObjectTrajectory:
    """An object's pose over a demonstration; see the module docstring for shapes and units."""

    fps: float
    pos: np.ndarray  # (T, 3) [m]
    quat_wxyz: np.ndarray  # (T, 4)
    pre_grasp_joint_pos: np.ndarray | None = None  # (n,) [rad]
    robot: str | None = None
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.pos.shape[0])

    @property
    def duration_s(self) -> float:
        """Time from the first frame to the last [s]."""
        return (self.num_frames - 1) / self.fps


def validate_trajectory(t: ObjectTrajectory, where: str = "object trajectory") -> None:
    """Raise DataFileError naming the first field that breaks the contract."""
    if not (math.isfinite(t.fps) and t.fps > 0):
        raise DataFileError(where, f"field 'fps' must be a frame rate > 0 [Hz], got {t.fps}")
    T = t.pos.shape[0] if t.pos.ndim == 2 else 0
    if t.pos.ndim != 2 or t.pos.shape[1] != 3 or T < 1:
        raise DataFileError(where, f"field 'pos' has shape {t.pos.shape}, expected (T, 3) with T >= 1 frames")
    if t.quat_wxyz.shape != (T, 4):
        raise DataFileError(
            where,
            f"field 'quat_wxyz' has shape {t.quat_wxyz.shape}, expected ({T}, 4) "
            f"(one wxyz quaternion per frame of 'pos')",
        )
    for key in ("pos", "quat_wxyz"):
        if not np.all(np.isfinite(getattr(t, key))):
            raise DataFileError(where, f"field '{key}' holds NaN or Inf")
    norm = np.linalg.norm(t.quat_wxyz, axis=-1)
    if np.any(np.abs(norm - 1.0) > 1e-3):
        k = int(np.argmax(np.abs(norm - 1.0)))
        raise DataFileError(
            where, f"field 'quat_wxyz' frame {k} has |q| = {norm[k]:.4f}; expected unit quaternions, w first"
        )
    q = t.pre_grasp_joint_pos
    if q is not None and (q.ndim != 1 or len(q) == 0 or not np.all(np.isfinite(q))):
        raise DataFileError(
            where,
            f"field 'pre_grasp_joint_pos' has shape {q.shape}, expected finite {_EXPECTED['pre_grasp_joint_pos']}",
        )


def save_trajectory(path: str | Path, t: ObjectTrajectory) -> None:
    """Validate and write ``t`` as npz (no pickles), atomically (temp file, then rename)."""
    validate_trajectory(t, str(path))
    arrays: dict[str, np.ndarray] = {
        "format_version": np.array(FORMAT_VERSION),
        "fps": np.array(float(t.fps)),
        "pos": np.asarray(t.pos, np.float64),
        "quat_wxyz": np.asarray(t.quat_wxyz, np.float64),
        "provenance": np.array(json.dumps(t.provenance, sort_keys=True)),
    }
    if t.pre_grasp_joint_pos is not None:
        arrays["pre_grasp_joint_pos"] = np.asarray(t.pre_grasp_joint_pos, np.float64)
    if t.robot is not None:
        arrays["robot"] = np.array(t.robot)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy stub: **arrays might bind allow_pickle
    atomic_write_bytes(path, buf.getvalue())


def load_trajectory(path: str | Path) -> ObjectTrajectory:
    """Read and validate an object-trajectory npz; a missing or malformed field is one DataFileError naming it."""
    with open_npz(path, "object-trajectory npz") as z:
        if "format_version" in z:
            version = z.number("format_version", "the file format version (an integer)")
            if version > FORMAT_VERSION:
                raise DataFileError(
                    z.path, f"field 'format_version' is {version:g}; this simreal reads up to {FORMAT_VERSION}"
                )
        d: dict[str, Any] = {
            "fps": z.number("fps", _EXPECTED["fps"]),
            "pos": z.floats("pos", _EXPECTED["pos"]),
            "quat_wxyz": z.floats("quat_wxyz", _EXPECTED["quat_wxyz"]),
        }
        if "pre_grasp_joint_pos" in z:
            d["pre_grasp_joint_pos"] = z.floats("pre_grasp_joint_pos", _EXPECTED["pre_grasp_joint_pos"])
        if "robot" in z:
            d["robot"] = z.text("robot", _EXPECTED["robot"])
        if "provenance" in z:
            try:
                d["provenance"] = json.loads(z.text("provenance", _EXPECTED["provenance"]))
            except json.JSONDecodeError as e:
                raise z.error(
                    "provenance", f"is not valid JSON ({e.msg}); expected {_EXPECTED['provenance']}"
                ) from None
            if not isinstance(d["provenance"], dict):
                raise z.error("provenance", f"is JSON {type(d['provenance']).__name__}, expected a JSON object")
    t = ObjectTrajectory(**d)
    validate_trajectory(t, str(path))
    return t


def from_dataset(
    root: str | Path, episode: int, key: str = OBJECT_POSE_KEY, joint_key: str | None = None, moved_m: float = 0.005
) -> ObjectTrajectory:
    """Episode ``episode`` of a LeRobot v3 dataset as an object trajectory.

    key: the (T, 7) column holding the object's pose per frame, position [m] then wxyz.
    joint_key: a column of the robot's joint positions (``observation.state`` as simreal's
      recorders write it); when given, its row at the last frame before the object first moves
      ``moved_m`` [m] from where it started is the pre-grasp pose (the moment before contact), and
      the dataset's ``robot_type`` its robot.
    """
    from simreal.dataset.reader import Dataset  # pyarrow: only for this path

    ds = Dataset(root)
    if not 0 <= episode < ds.num_episodes:
        raise DataFileError(str(root), f"no episode {episode}: the dataset has {ds.num_episodes} episodes")
    for k in (key, joint_key):
        if k is not None and k not in ds.features:
            raise DataFileError(str(root), f"no feature '{k}'; features: {', '.join(ds.features)}")
    ep = ds.episode(episode)
    pose = np.asarray(ep[key], np.float64)
    if pose.ndim != 2 or pose.shape[1] != 7:
        raise DataFileError(
            str(root),
            f"feature '{key}' has shape {list(pose.shape[1:])} per frame, expected [7] "
            "(position [m], then a wxyz quaternion)",
        )
    pos, quat = pose[:, :3], pose[:, 3:]
    quat = quat / np.maximum(np.linalg.norm(quat, axis=-1, keepdims=True), 1e-12)  # float32 storage rounding
    pre_grasp, robot = None, None
    if joint_key is not None:
        moved = np.flatnonzero(np.linalg.norm(pos - pos[0], axis=-1) > moved_m)
        before = max(int(moved[0]) - 1, 0) if len(moved) else len(pos) - 1
        pre_grasp, robot = np.asarray(ep[joint_key][before], np.float64).reshape(-1), ds.robot_type
    provenance = {
        "source": "lerobot dataset",
        "dataset": str(root),
        "episode": int(episode),
        "key": key,
        "joint_key": joint_key,
    }
    t = ObjectTrajectory(float(ds.fps), pos, quat, pre_grasp, robot, provenance)
    validate_trajectory(t, f"{root} episode {episode}")
    return t


def load_demo(
    path: str | Path, episode: int = 0, key: str = OBJECT_POSE_KEY, joint_key: str | None = None
) -> ObjectTrajectory:
    """A demonstration from a trajectory npz (:func:`load_trajectory`) or, for a folder, episode
    ``episode`` of the LeRobot dataset there (:func:`from_dataset`)."""
    return from_dataset(path, episode, key, joint_key) if Path(path).is_dir() else load_trajectory(path)


def resampled(t: ObjectTrajectory, rate_hz: float) -> ObjectTrajectory:
    """``t`` at ``rate_hz`` [Hz] from its first frame to its last (frames at k / rate_hz, k = 0..K
    with K / rate_hz <= duration): positions linearly interpolated, orientations normalised-linearly
    (nlerp, on the first frame's hemisphere). Written here because the core stays numpy-only;
    nlerp strays at most 0.01 deg from slerp between frames up to 20 deg apart."""
    if t.num_frames == 1:
        return dataclasses.replace(t, fps=float(rate_hz))
    n = int(math.floor(t.duration_s * rate_hz + 1e-9)) + 1
    f = np.arange(n) * (t.fps / rate_hz)  # fractional source frame of each new frame
    i0 = np.minimum(np.floor(f).astype(int), t.num_frames - 2)
    a = (f - i0)[:, None]
    pos = (1 - a) * t.pos[i0] + a * t.pos[i0 + 1]
    q0, q1 = t.quat_wxyz[i0], t.quat_wxyz[i0 + 1]
    q1 = np.where(np.sum(q0 * q1, axis=-1, keepdims=True) < 0, -q1, q1)
    q = (1 - a) * q0 + a * q1
    return dataclasses.replace(t, fps=float(rate_hz), pos=pos, quat_wxyz=q / np.linalg.norm(q, axis=-1, keepdims=True))


def keypoints(pos: Any, quat_wxyz: Any, half_size: Any, xp: Any = np) -> Any:
    """The 8 corners of a box in world: p_k = pos + R(q) (h * c_k), c_k in {-1, 1}^3.

    pos: (..., 3) box centre [m]; quat_wxyz: (..., 4) world-from-box; half_size: h [m], a number
    (a cube) or (3,) half extents. xp: the array namespace (numpy, or jax.numpy inside a task).
    Returns (..., 8, 3) [m], corners ordered as ``_CORNERS``.
    """
    local = xp.asarray(_CORNERS) * xp.asarray(half_size)  # (8, 3) in the box frame
    r = quat_to_rotmat(quat_wxyz, xp)  # (..., 3, 3)
    return pos[..., None, :] + xp.einsum("...ij,kj->...ki", r, local)
