"""Quadrotor flight-controller math, array-namespace agnostic (``xp`` = numpy or jax.numpy).

The same functions run inside the simulation (JAX, every physics step) and on the deploy
side (numpy), so the rate loop a policy trained against is the rate loop it flies with.

Allocation (mixer). Rotor i at body position (x_i, y_i) with thrust f_i [N] and spin
s_i (+1 clockwise) gives::

    [T, tau_x, tau_y, tau_z]^T = A f,     A = [[1, 1, 1, 1],
                                               [y_1 ... y_4],
                                               [-x_1 ... -x_4],
                                               [s_1 k ... s_4 k]]

with T the collective thrust [N], tau the body torque [N m] and k = torque_to_thrust_m.

Body-rate loop (the onboard controller of the ``ctbr`` action mode, PX4's and the
Crazyflie's rate interface)::

    tau = J K (omega_des - omega) + omega x (J omega)

K = diag(k_roll, k_pitch, k_yaw) [1/s], J the inertia [kg m^2]; rotor thrusts follow from
A^-1 and are clipped to [0, f_max].
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = Any

#: Rate-loop bandwidths [1/s] (desired angular acceleration per unit rate error).
RATE_GAINS = (40.0, 40.0, 15.0)


def allocation_matrix(rotor_pos_b: np.ndarray, spin: np.ndarray, torque_to_thrust_m: float) -> np.ndarray:
    """A (4, 4): rotor thrusts -> (collective thrust, body torques). See module docstring."""
    return np.stack([np.ones(4), rotor_pos_b[:, 1], -rotor_pos_b[:, 0], spin * torque_to_thrust_m])


def rate_control(omega_des_b: Array, omega_b: Array, thrust_n: Array, inertia_diag: Array,
                 mixer_inv: Array, f_max: Array, xp: Any, gains: tuple[float, float, float] = RATE_GAINS) -> Array:
    """Rotor thrusts [N] (4,) realising collective thrust ``thrust_n`` and body rates ``omega_des_b``.

    Args:
      omega_des_b: desired body rates [rad/s], (3,).
      omega_b: measured body rates [rad/s], (3,).
      thrust_n: collective thrust [N], scalar.
      inertia_diag: (Jxx, Jyy, Jzz) [kg m^2].
      mixer_inv: A^-1 (4, 4).
      f_max: per-rotor thrust limit [N].
    """
    k = xp.asarray(gains)
    j_omega = inertia_diag * omega_b
    tau = inertia_diag * k * (omega_des_b - omega_b) + xp.cross(omega_b, j_omega)
    wrench = xp.concatenate([xp.reshape(thrust_n, (1,)), tau])
    return xp.clip(mixer_inv @ wrench, 0.0, f_max)


def ctbr_from_action(a: Array, total_thrust_max_n: float, max_rate_rad_s: float, xp: Any) -> tuple[Array, Array]:
    """Normalised ctbr action a in [-1, 1]^4 -> (collective thrust [N], body rates [rad/s]).

    a[0] = -1 is zero thrust and +1 the sum of all rotor limits; a[1:4] scale max_rate.
    """
    a = xp.clip(a, -1.0, 1.0)
    return 0.5 * (a[0] + 1.0) * total_thrust_max_n, a[1:4] * max_rate_rad_s
