"""Quaternion helpers (wxyz, MuJoCo's order), array-namespace agnostic."""

from __future__ import annotations

from typing import Any

Array = Any


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
