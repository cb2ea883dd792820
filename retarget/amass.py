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
from simreal.retarget.rotations import rotvec_to_matrix
from simreal.retarget.skeleton import HumanMotion, forward_kinematics

# The 22 body joints shared by SMPL, SMPL+H and SMPL-X, in their pose-vector order.
SMPL_BODY_JOINTS: tuple[str, ...] = (
    "pelvis", "left_hip", "right_hip", "spine1", "left_knee", "right_knee", "spine2",
    "left_ankle", "right_ankle", "spine3", "left_foot", "right_foot", "neck", "left_collar",
    "right_collar", "head", "left_shoulder", "right_shoulder", "left_elbow", "right_elbow",
    "left_wrist", "right_wrist",
)
_POSE_WIDTH = {72: "smpl", 156: "smplh", 165: "smplx"}
_MODEL_FILES = {
    "smplh": ("smplh/{g}/model.npz", "smplh/SMPLH_{G}.npz"),
    "smplx": ("smplx/SMPLX_{G}.npz", "smplx/{g}/model.npz"),
    "smpl": ("smpl/SMPL_{G}.npz", "smpl/{g}/model.npz"),
}
_WHERE = {"smplh": "https://mano.is.tue.mpg.de (Extended SMPL+H model, as used by AMASS)",
          "smplx": "https://smpl-x.is.tue.mpg.de", "smpl": "https://smpl.is.tue.mpg.de"}


def _field(z, path: str, key: str) -> np.ndarray:
    if key not in z.files:
        raise DataFileError(path, f"missing field '{key}'; found: {', '.join(z.files)}")
    return z[key]


def body_model_path(model_type: str, gender: str, body_models: str | os.PathLike | None) -> Path:
    """The body model file for ``model_type`` and ``gender``, or a DataFileError saying what is needed."""
    root = body_models or os.environ.get("SIMREAL_BODY_MODELS")
    patterns = _MODEL_FILES[model_type]
    tried = [p.format(g=gender, G=gender.upper()) for p in patterns]
    if root:
        for rel in tried:
            if (Path(root) / rel).is_file():
                return Path(root) / rel
    where = f"under {root}" if root else "(no --body-models DIR given and $SIMREAL_BODY_MODELS unset)"
    raise DataFileError(str(Path(root or ".") / tried[0]),
                        f"the {model_type.upper()} body model ({gender}) is needed to turn this AMASS clip "
                        f"into joint positions; none found {where}. Expected one of: "
                        f"{', '.join('DIR/' + t for t in tried)}. Download it from {_WHERE[model_type]} "
                        "and pass --body-models DIR")


def rest_joints(model_path: Path, betas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rest joint positions (J, 3) [m] and parents (J,) from a body model npz and shape betas."""
    with open_npz(model_path, "body model npz") as z:
        p = str(model_path)
        J_reg = np.asarray(_field(z, p, "J_regressor"), dtype=float)
        v = np.asarray(_field(z, p, "v_template"), dtype=float)
        dirs = np.asarray(_field(z, p, "shapedirs"), dtype=float)
        kin = np.asarray(_field(z, p, "kintree_table"))
    if v.ndim != 2 or v.shape[1] != 3:
        raise DataFileError(str(model_path), f"field 'v_template' must be (V, 3), got {v.shape}")
    if dirs.ndim != 3 or dirs.shape[:2] != v.shape:
        raise DataFileError(str(model_path), f"field 'shapedirs' must be (V, 3, S), got {dirs.shape}")
    if J_reg.ndim != 2 or J_reg.shape[1] != v.shape[0]:
        raise DataFileError(str(model_path), f"field 'J_regressor' must be (J, {v.shape[0]}), got {J_reg.shape}")
    n = min(len(betas), dirs.shape[2])
    shaped = v + dirs[:, :, :n] @ betas[:n]
    parents = kin[0].astype(np.int64)
    parents[0] = -1
    return J_reg @ shaped, parents


def load_amass(path: str | Path, body_models: str | os.PathLike | None = None) -> HumanMotion:
    """Load the 22 body joints of an AMASS SMPL / SMPL+H / SMPL-X clip.

    Args:
      path: the AMASS ``.npz``.
      body_models: folder holding the body models (see the module docstring).
    """
    p = Path(path)
    with open_npz(p) as z:
        sp = str(p)
        poses = np.asarray(_field(z, sp, "poses"), dtype=float)
        trans = np.asarray(_field(z, sp, "trans"), dtype=float)
        betas = np.asarray(z["betas"], dtype=float).ravel() if "betas" in z.files else np.zeros(10)
        try:
            gender = np.asarray(z["gender"]).item() if "gender" in z.files else "neutral"
        except ValueError:  # an object array: refuse to unpickle
            raise DataFileError(sp, "field 'gender' is a pickled object; save it as a plain string") from None
        gender = gender.decode() if isinstance(gender, bytes) else str(gender)
        rate_key = next((k for k in ("mocap_framerate", "mocap_frame_rate", "fps") if k in z.files), None)
        if rate_key is None:
            raise DataFileError(sp, "missing field 'mocap_framerate' (or 'mocap_frame_rate'): the frame rate [Hz]")
        fps = float(z[rate_key])
        model_type = str(np.asarray(z["surface_model_type"]).item()) if "surface_model_type" in z.files else None
    gender = gender.strip().lower()
    if gender not in ("male", "female", "neutral"):
        raise DataFileError(str(p), f"field 'gender' is {gender!r}; valid: male, female, neutral")
    if poses.ndim != 2 or poses.shape[1] not in _POSE_WIDTH:
        raise DataFileError(str(p), f"field 'poses' must be (T, 72 | 156 | 165) for SMPL | SMPL+H | "
                                    f"SMPL-X, got {poses.shape}")
    if trans.shape != (poses.shape[0], 3):
        raise DataFileError(str(p), f"field 'trans' must be ({poses.shape[0]}, 3) to match 'poses', got {trans.shape}")
    if not fps > 0:
        raise DataFileError(str(p), f"field '{rate_key}' must be > 0 Hz, got {fps}")
    for key, arr in (("poses", poses), ("trans", trans)):
        if not np.all(np.isfinite(arr)):
            bad = int(np.argwhere(~np.isfinite(arr))[0, 0])
            raise DataFileError(str(p), f"field '{key}': frame {bad} is not finite")
    model_type = (model_type or _POSE_WIDTH[poses.shape[1]]).lower()
    if model_type not in _MODEL_FILES:
        raise DataFileError(str(p), f"field 'surface_model_type' is {model_type!r}; valid: {', '.join(_MODEL_FILES)}")
    model_path = body_model_path(model_type, gender, body_models)
    J_rest, parents = rest_joints(model_path, betas)
    nb = len(SMPL_BODY_JOINTS)
    if len(J_rest) < nb or np.any(parents[1:nb] >= np.arange(1, nb)):
        raise DataFileError(str(model_path), f"expected at least {nb} joints with parents before children "
                                             f"in 'kintree_table', got {len(J_rest)}")
    parents = parents[:nb]
    T = poses.shape[0]
    rots = rotvec_to_matrix(poses[:, :3 * nb].reshape(T, nb, 3))
    local = np.empty((T, nb, 3))
    local[:, 0] = J_rest[0] + trans
    local[:, 1:] = J_rest[1:nb] - J_rest[parents[1:]]
    positions = forward_kinematics(parents.tolist(), local, rots)
    source = {"path": str(p), "format": f"amass-{model_type}", "body_model": str(model_path),
              "gender": gender, "units": "m", "metres_per_unit": 1.0, "up_axis": "z"}
    return HumanMotion(SMPL_BODY_JOINTS, positions, fps, tuple(int(x) for x in parents), source)
