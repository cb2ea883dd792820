"""Rotation conversions used by the loaders and solvers (wxyz quaternions, like MuJoCo).

Thin wrappers over ``scipy.spatial.transform.Rotation`` that fix the two conventions
that differ between file formats and MuJoCo: quaternion order (scipy is xyzw, simreal
is wxyz) and Euler sequences (BVH lists intrinsic rotations in channel order).
"""

from __future__ import annotations

import mujoco
import numpy as np
from scipy.ndimage import gaussian_filter1d
from scipy.spatial.transform import Rotation

# Rotation that takes a Y-up right-handed frame to simreal's Z-up frame (+90 deg about x):
# y -> z, z -> -y. Used by every loader whose file says Y is up.
R_ZUP_FROM_YUP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


def euler_to_matrix(angles_deg: np.ndarray, order: str) -> np.ndarray:
    """Intrinsic Euler angles to rotation matrices, BVH style.

    Args:
      angles_deg: (T, 3) angles in [deg], in the order of ``order``.
      order: axes in channel order, e.g. ``"ZXY"``: R = Rz(a0) @ Rx(a1) @ Ry(a2).

    Returns:
      (T, 3, 3) rotation matrices.
    """
    return Rotation.from_euler(order.upper(), angles_deg, degrees=True).as_matrix()


def rotvec_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    """Axis-angle vectors (..., 3) [rad] to rotation matrices (..., 3, 3)."""
    shape = rotvec.shape[:-1]
    mats = Rotation.from_rotvec(rotvec.reshape(-1, 3)).as_matrix()
    return mats.reshape(*shape, 3, 3)


def matrix_to_quat_wxyz(mats: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) to unit quaternions (..., 4) in wxyz order, w >= 0."""
    shape = mats.shape[:-2]
    xyzw = Rotation.from_matrix(mats.reshape(-1, 3, 3)).as_quat()
    wxyz = np.concatenate([xyzw[:, 3:], xyzw[:, :3]], axis=1)
    wxyz *= np.where(wxyz[:, :1] < 0.0, -1.0, 1.0)
    return wxyz.reshape(*shape, 4)


def quat_wxyz_to_matrix(quat: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) in wxyz order to rotation matrices (..., 3, 3)."""
    shape = quat.shape[:-1]
    q = quat.reshape(-1, 4)
    mats = Rotation.from_quat(np.concatenate([q[:, 1:], q[:, :1]], axis=1)).as_matrix()
    return mats.reshape(*shape, 3, 3)


def frame_from_axes(x_hint: np.ndarray, z_hint: np.ndarray) -> np.ndarray:
    """Right-handed frames whose z is ``z_hint`` and whose x is ``x_hint`` made orthogonal.

    Args:
      x_hint: (..., 3) approximate x axis (need not be unit or orthogonal).
      z_hint: (..., 3) z axis (need not be unit).

    Returns:
      (..., 3, 3) rotation matrices with columns [x, y, z].
    """
    z = z_hint / np.linalg.norm(z_hint, axis=-1, keepdims=True)
    x = x_hint - np.sum(x_hint * z, axis=-1, keepdims=True) * z
    x /= np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    y = np.cross(z, x)
    return np.stack([x, y, z], axis=-1)


def frame_from_left_up(left: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Body frames (x forward, y left, z up) from a left-pointing and an up-pointing vector.

    Used for the pelvis (left hip minus right hip, spine minus pelvis) and the chest
    (left shoulder minus right shoulder, neck minus chest). Shapes (..., 3) -> (..., 3, 3).
    """
    y = left / np.maximum(np.linalg.norm(left, axis=-1, keepdims=True), 1e-12)
    x = np.cross(y, up)
    x /= np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    z = np.cross(x, y)
    return np.stack([x, y, z], axis=-1)


def yaw_frame(forward: np.ndarray) -> np.ndarray:
    """Level frames (z = world up) whose x is the horizontal part of ``forward`` (..., 3)."""
    f = np.array(forward, dtype=float, copy=True)
    f[..., 2] = 0.0
    up = np.zeros_like(f)
    up[..., 2] = 1.0
    return frame_from_axes(f, up)


def level_frame(yaw: np.ndarray) -> np.ndarray:
    """Level frames (..., 3, 3): a turn by ``yaw`` (...) [rad] about world z."""
    c, s = np.cos(yaw), np.sin(yaw)
    return yaw_frame(np.stack([c, s, np.zeros_like(c)], axis=-1))


def heading_from_left(left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heading yaw [rad] of a body from its left-pointing axis (..., 3), and how well it is defined.

    The heading is the horizontal direction perpendicular to the horizontal part of ``left``,
    ``(l_y, -l_x, 0)``: unlike the horizontal projection of a forward axis, it does not flip
    when the body pitches through vertical (a foot pointing down, a bow), because a lateral
    axis stays near-horizontal then. Returns (yaw (...), the horizontal length of ``left``
    over its length (...), 0 where the lateral axis is vertical and the heading undefined).
    """
    n = np.maximum(np.linalg.norm(left, axis=-1), 1e-12)
    return np.arctan2(-left[..., 0], left[..., 1]), np.hypot(left[..., 0], left[..., 1]) / n


def wrap_angle(a: np.ndarray) -> np.ndarray:
    """Angles [rad] wrapped to [-pi, pi)."""
    return (np.asarray(a) + np.pi) % (2 * np.pi) - np.pi


def project_to_so3(M: np.ndarray) -> np.ndarray:
    """The nearest rotations (..., 3, 3) to matrices ``M`` (..., 3, 3) in the Frobenius norm (SVD)."""
    U, _, Vt = np.linalg.svd(M)
    D = np.ones(M.shape[:-1])
    D[..., -1] = np.sign(np.linalg.det(U @ Vt))
    return (U * D[..., None, :]) @ Vt


def fill_unreliable(R: np.ndarray, reliability: np.ndarray, sigma_frames: float) -> np.ndarray:
    """Rotation tracks (T, 3, 3) whose poorly defined frames are replaced by their reliable neighbours.

    ``reliability`` (T,) in [0, 1] weights each frame. The fill is the reliability-weighted
    Gaussian (``sigma_frames``) chordal mean of the track, projected back onto SO(3); each frame
    becomes ``proj(c R_t + (1 - c) fill_t)``: fully reliable frames are kept as they are. Frames
    with no reliable neighbour keep their own rotation.
    """
    c = np.clip(reliability, 0.0, 1.0)
    if c.min() >= 1.0 or len(R) < 2:
        return R
    num = gaussian_filter1d(R * c[:, None, None], sigma_frames, axis=0, mode="nearest")
    den = gaussian_filter1d(c, sigma_frames, mode="nearest")
    fill = np.where(den[:, None, None] > 1e-6, num / np.maximum(den, 1e-6)[:, None, None], R)
    return project_to_so3(c[:, None, None] * R + (1 - c[:, None, None]) * fill)


def rotation_log(R: np.ndarray) -> np.ndarray:
    """Rotation vectors (..., 3) [rad] of rotation matrices (..., 3, 3)."""
    shape = R.shape[:-2]
    return Rotation.from_matrix(R.reshape(-1, 3, 3)).as_rotvec().reshape(*shape, 3)


def log_so3(R: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) [rad] of one rotation matrix (3, 3); MuJoCo's C routines, fast
    enough for the solvers' inner loops (scipy's batch call costs ~0.1 ms per matrix)."""
    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=np.float64).ravel())
    if q[0] < 0.0:
        q = -q
    v = np.empty(3)
    mujoco.mju_quat2Vel(v, q, 1.0)
    return v
