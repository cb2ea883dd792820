"""AMASS clips (SMPL, SMPL+H, SMPL-X parameters in npz) as joint positions.

An AMASS npz stores pose parameters, not positions: ``poses`` (T, 72 | 156 | 165) axis-angle
per joint [rad], ``trans`` (T, 3) [m], ``betas`` (shape coefficients), ``gender`` and the
frame rate (``mocap_framerate`` or ``mocap_frame_rate``). Joint positions need the body
model the clip was fitted with, which its licence forbids redistributing, so the user
supplies it: ``--body-models DIR`` (or ``$SIMREAL_BODY_MODELS``) laid out as AMASS's own
code expects:

    DIR/smplh/{male,female,neutral}/model.npz     # SMPL+H ("Extended SMPL+H model", mano.is.tue.mpg.de)
    DIR/smplx/SMPLX_{MALE,FEMALE,NEUTRAL}.npz     # SMPL-X (smpl-x.is.tue.mpg.de)
    DIR/smpl/SMPL_{MALE,FEMALE,NEUTRAL}.npz       # SMPL, converted to npz (smpl.is.tue.mpg.de)

Only ``J_regressor``, ``v_template``, ``shapedirs`` and ``kintree_table`` are read. Joint
positions are the body model's posed joints: rest joints ``J = J_regressor (v_template +
shapedirs betas)``, then forward kinematics with the pose rotations (pose blend shapes
move vertices, not these joints). AMASS is Z-up, in metres.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from simreal.errors import DataFileError
from simreal.npz import open_npz
from simreal.retarget.skeleton import HumanMotion, forward_kinematics
from simreal.rotations import rotvec_to_matrix

# The 22 body joints shared by SMPL, SMPL+H and SMPL-X, in their pose-vector order.
SMPL_BODY_JOINTS: tuple[str, ...] = (
    "pelvis",
    "left_hip",
    "right_hip",
    "spine1",
    "left_knee",
    "right_knee",
    "spine2",
    "left_ankle",
    "right_ankle",
    "spine3",
    "left_foot",
    "right_foot",
    "neck",
    "left_collar",
    "right_collar",
    "head",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
)
_POSE_WIDTH = {72: "smpl", 156: "smplh", 165: "smplx"}
_MODEL_FILES = {
    "smplh": ("smplh/{g}/model.npz", "smplh/SMPLH_{G}.npz"),
    "smplx": ("smplx/SMPLX_{G}.npz", "smplx/{g}/model.npz"),
    "smpl": ("smpl/SMPL_{G}.npz", "smpl/{g}/model.npz"),
}
_WHERE = {
    "smplh": "https://mano.is.tue.mpg.de (Extended SMPL+H model, as used by AMASS)",
    "smplx": "https://smpl-x.is.tue.mpg.de",
    "smpl": "https://smpl.is.tue.mpg.de",
}


def body_model_path(model_type: str, gender: str, body_models: str | os.PathLike | None) -> Path:
    """The body model file for ``model_type`` and ``gender``, or a DataFileError saying what is needed."""
    root = body_models or os.environ.get("SIMREAL_BODY_MODELS")
    patterns = _MODEL_FILES[model_type]
    tried = [p.format(g=gender, G=gender.upper()) for p in patterns]
    if root:
        for rel in tried:
            if (Path(root) / rel).exists():  # a folder or damaged file there is named by open_npz
                return Path(root) / rel
    where = f"under {root}" if root else "(no --body-models DIR given and $SIMREAL_BODY_MODELS unset)"
    raise DataFileError(
        str(Path(root or ".") / tried[0]),
        f"the {model_type.upper()} body model ({gender}) is needed to turn this AMASS clip "
        f"into joint positions; none found {where}. Expected one of: "
        f"{', '.join('DIR/' + t for t in tried)}. Download it from {_WHERE[model_type]} "
        "and pass --body-models DIR",
    )


def rest_joints(model_path: Path, betas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rest joint positions (J, 3) [m] and parents (J,) from a body model npz and shape betas."""
    with open_npz(model_path, "body model npz") as z:
        J_reg = z.floats("J_regressor", "(J, V) joint regressor")
        v = z.floats("v_template", "(V, 3) template vertices [m]")
        dirs = z.floats("shapedirs", "(V, 3, S) shape blend directions [m]")
        kin = z.floats("kintree_table", "(2, J) kinematic tree: parent ids, joint ids")
    where = str(model_path)
    if v.ndim != 2 or v.shape[1] != 3:
        raise DataFileError(where, f"field 'v_template' must be (V, 3), got {v.shape}")
    if dirs.ndim != 3 or dirs.shape[:2] != v.shape:
        raise DataFileError(where, f"field 'shapedirs' must be (V, 3, S), got {dirs.shape}")
    if J_reg.ndim != 2 or J_reg.shape[1] != v.shape[0]:
        raise DataFileError(where, f"field 'J_regressor' must be (J, {v.shape[0]}), got {J_reg.shape}")
    if kin.ndim != 2 or kin.shape != (2, J_reg.shape[0]):
        raise DataFileError(where, f"field 'kintree_table' must be (2, {J_reg.shape[0]}), got {kin.shape}")
    for key, arr in (("J_regressor", J_reg), ("v_template", v), ("shapedirs", dirs)):
        if not np.all(np.isfinite(arr)):
            raise DataFileError(where, f"field '{key}' holds non-finite values")
    n = min(len(betas), dirs.shape[2])
    shaped = v + dirs[:, :, :n] @ betas[:n]
    # the root's parent is stored as -1 or as uint32's largest value; anything out of range becomes
    # -1 here and is refused by the caller's parent-before-child check
    parents = np.where(np.abs(kin[0]) < 2**31, kin[0], -1).astype(np.int64)
    parents[0] = -1
    return J_reg @ shaped, parents


def load_amass(path: str | Path, body_models: str | os.PathLike | None = None) -> HumanMotion:
    """Load the 22 body joints of an AMASS SMPL / SMPL+H / SMPL-X clip.

    Args:
      path: the AMASS ``.npz``.
      body_models: folder holding the body models (see the module docstring).
    """
    p = Path(path)
    with open_npz(p, "AMASS clip (npz)") as z:
        poses = z.floats("poses", "(T, 72 | 156 | 165) axis-angle rotations [rad]")
        trans = z.floats("trans", "(T, 3) root translations [m]")
        betas = z.floats("betas", "(S,) shape coefficients").ravel() if "betas" in z else np.zeros(10)
        gender = z.text("gender", "male, female or neutral") if "gender" in z else "neutral"
        rate_key = next((k for k in ("mocap_framerate", "mocap_frame_rate", "fps") if k in z), None)
        if rate_key is None:
            raise DataFileError(str(p), "missing field 'mocap_framerate' (or 'mocap_frame_rate'): the frame rate [Hz]")
        fps = z.number(rate_key, "the frame rate [Hz]")
        model_type = z.text("surface_model_type", "smpl, smplh or smplx") if "surface_model_type" in z else None
    gender = gender.strip().lower()
    if gender not in ("male", "female", "neutral"):
        raise DataFileError(str(p), f"field 'gender' is {gender!r}; valid: male, female, neutral")
    if poses.ndim != 2 or poses.shape[0] < 1 or poses.shape[1] not in _POSE_WIDTH:
        raise DataFileError(
            str(p),
            f"field 'poses' must be (T, 72 | 156 | 165) for SMPL | SMPL+H | SMPL-X with T >= 1, got {poses.shape}",
        )
    if trans.shape != (poses.shape[0], 3):
        raise DataFileError(str(p), f"field 'trans' must be ({poses.shape[0]}, 3) to match 'poses', got {trans.shape}")
    if not (np.isfinite(fps) and fps > 0):
        raise DataFileError(str(p), f"field '{rate_key}' must be a finite rate > 0 Hz, got {fps}")
    for key, arr in (("poses", poses), ("trans", trans), ("betas", betas)):
        if not np.all(np.isfinite(arr)):
            bad = int(np.argwhere(~np.isfinite(arr))[0, 0]) if arr.ndim == 2 else None
            raise DataFileError(
                str(p), f"field '{key}': " + ("a value" if bad is None else f"frame {bad}") + " is not finite"
            )
    model_type = (model_type or _POSE_WIDTH[poses.shape[1]]).lower()
    if model_type not in _MODEL_FILES:
        raise DataFileError(str(p), f"field 'surface_model_type' is {model_type!r}; valid: {', '.join(_MODEL_FILES)}")
    model_path = body_model_path(model_type, gender, body_models)
    J_rest, parents = rest_joints(model_path, betas)
    nb = len(SMPL_BODY_JOINTS)
    if len(J_rest) < nb or np.any((parents[1:nb] < 0) | (parents[1:nb] >= np.arange(1, nb))):
        raise DataFileError(
            str(model_path),
            f"field 'kintree_table': expected at least {nb} joints, each after "
            f"its parent, got {len(J_rest)} joints with parents "
            f"{parents[:nb].tolist()}",
        )
    parents = parents[:nb]
    T = poses.shape[0]
    rots = rotvec_to_matrix(poses[:, : 3 * nb].reshape(T, nb, 3))
    local = np.empty((T, nb, 3))
    local[:, 0] = J_rest[0] + trans
    local[:, 1:] = J_rest[1:nb] - J_rest[parents[1:]]
    positions = forward_kinematics(parents.tolist(), local, rots)
    source = {
        "path": str(p),
        "format": f"amass-{model_type}",
        "body_model": str(model_path),
        "gender": gender,
        "units": "m",
        "metres_per_unit": 1.0,
        "up_axis": "z",
    }
    return HumanMotion(SMPL_BODY_JOINTS, positions, fps, tuple(int(x) for x in parents), source)
