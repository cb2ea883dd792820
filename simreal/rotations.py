"""Rotation math, one module: wxyz unit quaternions (MuJoCo's order), rotation matrices,
Euler angles, rotation vectors.

Conventions: ``q = (w, x, y, z)`` rotates body to world (``R_wb``, the MuJoCo free joint's
``qpos[3:7]``); products are Hamilton's; Euler angles are intrinsic in the order named
(``quat_from_rpy``/``rpy_from_quat``: ``R = Rz(yaw) Ry(pitch) Rx(roll)``, the ROS and Unitree IMU
convention). Functions taking ``xp`` run on any array namespace (``jax.numpy`` in simulation,
``numpy`` on the robot) and broadcast over leading axes; the batched conversions for motion
files (BVH Euler sequences, axis-angle, scipy's xyzw order fixed to wxyz) are numpy only, as is
:func:`rotmat_wb`, the scalar form the deploy decoders call at message rate. The robot runtime
imports this module and has neither scipy nor MuJoCo: they load inside the functions that use them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = Any

# Rotation that takes a Y-up right-handed frame to simreal's Z-up frame (+90 deg about x):
# y -> z, z -> -y. Used by every loader whose file says Y is up.
R_ZUP_FROM_YUP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


# -- any array namespace ---------------------------------------------------------------------------
def quat_to_rotmat(q: Array, xp: Any) -> Array:
    """Rotation matrix R_wb (3, 3) from a unit quaternion q = (w, x, y, z), world-from-body."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    r = [
        1 - 2 * (y * y + z * z),
        2 * (x * y - w * z),
        2 * (x * z + w * y),
        2 * (x * y + w * z),
        1 - 2 * (x * x + z * z),
        2 * (y * z - w * x),
        2 * (x * z - w * y),
        2 * (y * z + w * x),
        1 - 2 * (x * x + y * y),
    ]
    return xp.stack(r, axis=-1).reshape(q.shape[:-1] + (3, 3))


def rotate_inv(q: Array, v: Array, xp: Any) -> Array:
    """v expressed in the body frame: R_wb^T v."""
    r = quat_to_rotmat(q, xp)
    return xp.einsum("...ji,...j->...i", r, v)


def quat_from_rpy(roll: Array, pitch: Array, yaw: Array, xp: Any) -> Array:
    """q_wb (wxyz) from intrinsic Z-Y-X Euler angles: R = Rz(yaw) Ry(pitch) Rx(roll). Angles [rad]."""
    cr, sr = xp.cos(roll / 2), xp.sin(roll / 2)
    cp, sp = xp.cos(pitch / 2), xp.sin(pitch / 2)
    cy, sy = xp.cos(yaw / 2), xp.sin(yaw / 2)
    return xp.stack(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ],
        axis=-1,
    )


def quat_mul(a: Array, b: Array, xp: Any) -> Array:
    """Hamilton product a * b (wxyz)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return xp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_integrate(q: Array, omega_b: Array, dt: float, xp: Any) -> Array:
    """``mju_quatIntegrate``: q turned for ``dt`` at the body-frame angular velocity ``omega_b``,
    q (x) (cos(|w| dt / 2), w / |w| sin(|w| dt / 2)), normalised; sin(|w| dt / 2) / |w| is taken
    from its series near |w| = 0 (no division by zero)."""
    n = xp.sqrt(xp.sum(omega_b * omega_b, axis=-1, keepdims=True))
    half = 0.5 * dt * n
    small = n <= 1e-8
    s = xp.where(small, 0.5 * dt * (1.0 - half * half / 6.0), xp.sin(half) / xp.where(small, 1.0, n))
    out = quat_mul(q, xp.concatenate([xp.cos(half), s * omega_b], axis=-1), xp)
    return out / xp.linalg.norm(out, axis=-1, keepdims=True)


def yaw_quat(yaw: Array, xp: Any) -> Array:
    """wxyz of the rotation by ``yaw`` [rad] about world z: ``(cos(yaw/2), 0, 0, sin(yaw/2))``."""
    zero = xp.zeros_like(yaw)
    return xp.stack([xp.cos(yaw / 2), zero, zero, xp.sin(yaw / 2)], axis=-1)


def rot_z(v: Array, yaw: Array, xp: Any) -> Array:
    """``v`` (..., 3) rotated by ``yaw`` [rad] about z: ``Rz(yaw) v``."""
    c, s = xp.cos(yaw), xp.sin(yaw)
    return xp.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1], v[..., 2]], axis=-1)


def rpy_from_quat(q: Array, xp: Any) -> Array:
    """(roll, pitch, yaw) [rad] of wxyz ``q`` with ``R = Rz(yaw) Ry(pitch) Rx(roll)``, the inverse
    of :func:`quat_from_rpy` (pitch in [-pi/2, pi/2]; as Unitree's IMU reports ``rpy``)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return xp.stack(
        [
            xp.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y)),
            xp.arcsin(xp.clip(2 * (w * y - z * x), -1.0, 1.0)),
            xp.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)),
        ],
        axis=-1,
    )


def quat_angle(q1: Array, q2: Array, xp: Any) -> Array:
    """Angle [rad] of the rotation between unit quaternions ``q1`` and ``q2``:
    ``2 acos(|<q1, q2>|)`` (``q`` and ``-q`` are one rotation)."""
    return 2.0 * xp.arccos(xp.clip(xp.abs(xp.sum(q1 * q2, axis=-1)), 0.0, 1.0))


# -- numpy ------------------------------------------------------------------------------------------
def rotmat_wb(q_wxyz: np.ndarray) -> np.ndarray:
    """R_wb (3, 3) of one wxyz quaternion: :func:`quat_to_rotmat` written for one float quaternion,
    without the array-namespace generality that costs ~25 us per call on plain numpy (the deploy
    decoders call it at message rate)."""
    w, x, y, z = (float(c) for c in q_wxyz)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def euler_to_matrix(angles_deg: np.ndarray, order: str) -> np.ndarray:
    """Intrinsic Euler angles to rotation matrices, BVH style.

    Args:
      angles_deg: (T, 3) angles in [deg], in the order of ``order``.
      order: axes in channel order, e.g. ``"ZXY"``: R = Rz(a0) @ Rx(a1) @ Ry(a2); one to three axes.

    Returns:
      (T, 3, 3) rotation matrices.
    """
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler(order.upper(), angles_deg, degrees=True).as_matrix()


def rotvec_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    """Axis-angle vectors (..., 3) [rad] to rotation matrices (..., 3, 3)."""
    from scipy.spatial.transform import Rotation

    shape = rotvec.shape[:-1]
    mats = Rotation.from_rotvec(rotvec.reshape(-1, 3)).as_matrix()
    return mats.reshape(*shape, 3, 3)


def matrix_to_quat_wxyz(mats: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) to unit quaternions (..., 4) in wxyz order, w >= 0."""
    from scipy.spatial.transform import Rotation

    shape = mats.shape[:-2]
    xyzw = Rotation.from_matrix(mats.reshape(-1, 3, 3)).as_quat()
    wxyz = np.concatenate([xyzw[:, 3:], xyzw[:, :3]], axis=1)
    wxyz *= np.where(wxyz[:, :1] < 0.0, -1.0, 1.0)
    return wxyz.reshape(*shape, 4)


def quat_wxyz_to_matrix(quat: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) in wxyz order to rotation matrices (..., 3, 3)."""
    from scipy.spatial.transform import Rotation

    shape = quat.shape[:-1]
    q = quat.reshape(-1, 4)
    mats = Rotation.from_quat(np.concatenate([q[:, 1:], q[:, :1]], axis=1)).as_matrix()
    return mats.reshape(*shape, 3, 3)


def wrap_angle(a: np.ndarray) -> np.ndarray:
    """Angles [rad] wrapped to [-pi, pi)."""
    return (np.asarray(a) + np.pi) % (2 * np.pi) - np.pi


def project_to_so3(M: np.ndarray) -> np.ndarray:
    """The nearest rotations (..., 3, 3) to matrices ``M`` (..., 3, 3) in the Frobenius norm (SVD)."""
    U, _, Vt = np.linalg.svd(M)
    D = np.ones(M.shape[:-1])
    D[..., -1] = np.sign(np.linalg.det(U @ Vt))
    return (U * D[..., None, :]) @ Vt


def rotation_log(R: np.ndarray) -> np.ndarray:
    """Rotation vectors (..., 3) [rad] of rotation matrices (..., 3, 3)."""
    from scipy.spatial.transform import Rotation

    shape = R.shape[:-2]
    return Rotation.from_matrix(R.reshape(-1, 3, 3)).as_rotvec().reshape(*shape, 3)


def log_so3(R: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) [rad] of one rotation matrix (3, 3); MuJoCo's C routines, fast
    enough for the solvers' inner loops (scipy's batch call costs ~0.1 ms per matrix)."""
    import mujoco

    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=np.float64).ravel())
    if q[0] < 0.0:
        q = -q
    v = np.empty(3)
    mujoco.mju_quat2Vel(v, q, 1.0)
    return v
