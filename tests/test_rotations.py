"""The one rotation module (simreal/rotations.py): every function against an independent
reference (scipy's Rotation, MuJoCo's C routines), on numpy and jax.numpy alike."""

from __future__ import annotations

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from simreal import rotations as R

RNG = np.random.default_rng(0)
QUATS = Rotation.random(16, random_state=1)
Q_WXYZ = np.roll(QUATS.as_quat(), 1, axis=1)


@pytest.mark.parametrize("xp", [np, jnp])
def test_quaternion_matrix_and_product_agree_with_scipy(xp):
    q = xp.asarray(Q_WXYZ)
    np.testing.assert_allclose(np.asarray(R.quat_to_rotmat(q, xp)), QUATS.as_matrix(), atol=1e-6)
    v = RNG.normal(size=(16, 3))
    np.testing.assert_allclose(np.asarray(R.rotate_inv(q, xp.asarray(v), xp)), QUATS.inv().apply(v), atol=1e-5)
    p = np.asarray(R.quat_mul(q, q[::-1], xp))
    np.testing.assert_allclose(R.quat_wxyz_to_matrix(p), (QUATS * QUATS[::-1]).as_matrix(), atol=1e-5)


@pytest.mark.parametrize("xp", [np, jnp])
def test_roll_pitch_yaw_round_trip_as_ros_defines_them(xp):
    rpy = np.stack([RNG.uniform(-3, 3, 16), RNG.uniform(-1.5, 1.5, 16), RNG.uniform(-3, 3, 16)], -1)
    q = R.quat_from_rpy(xp.asarray(rpy[:, 0]), xp.asarray(rpy[:, 1]), xp.asarray(rpy[:, 2]), xp)
    ref = Rotation.from_euler("ZYX", rpy[:, ::-1])  # R = Rz(yaw) Ry(pitch) Rx(roll)
    np.testing.assert_allclose(R.quat_wxyz_to_matrix(np.asarray(q, np.float64)), ref.as_matrix(), atol=1e-5)
    np.testing.assert_allclose(np.asarray(R.rpy_from_quat(q, xp)), rpy, atol=1e-4)


@pytest.mark.parametrize("xp", [np, jnp])
def test_yaw_turn_and_angle_between(xp):
    yaw = RNG.uniform(-3, 3, 16)
    q = np.asarray(R.yaw_quat(xp.asarray(yaw), xp), np.float64)
    np.testing.assert_allclose(R.quat_wxyz_to_matrix(q), Rotation.from_euler("z", yaw[:, None]).as_matrix(), atol=1e-6)
    v = RNG.normal(size=(16, 3))
    np.testing.assert_allclose(
        np.asarray(R.rot_z(xp.asarray(v), xp.asarray(yaw), xp)),
        Rotation.from_euler("z", yaw[:, None]).apply(v),
        atol=1e-5,
    )
    angle = np.asarray(R.quat_angle(xp.asarray(Q_WXYZ), xp.asarray(-Q_WXYZ[::-1]), xp))  # -q: the same rotation
    np.testing.assert_allclose(angle, (QUATS.inv() * QUATS[::-1]).magnitude(), atol=1e-3)


def test_numpy_forms_agree_with_mujoco_and_the_general_ones():
    for q in Q_WXYZ:
        m = np.zeros(9)
        mujoco.mju_quat2Mat(m, q)
        np.testing.assert_allclose(R.rotmat_wb(q), m.reshape(3, 3), atol=1e-12)
        np.testing.assert_allclose(
            R.log_so3(m.reshape(3, 3)), Rotation.from_quat(np.roll(q, -1)).as_rotvec(), atol=1e-9
        )
    np.testing.assert_allclose(R.matrix_to_quat_wxyz(QUATS.as_matrix()), Q_WXYZ * np.sign(Q_WXYZ[:, :1]), atol=1e-9)
    a = RNG.uniform(-90, 90, (16, 2))
    two_axes = R.euler_to_matrix(a, "zx")  # a BVH joint with two rotation channels
    np.testing.assert_allclose(two_axes, Rotation.from_euler("ZX", a, degrees=True).as_matrix(), atol=1e-12)
    np.testing.assert_allclose(R.wrap_angle(np.array([np.pi, -np.pi, 3 * np.pi + 0.5])), [-np.pi, -np.pi, -np.pi + 0.5])
