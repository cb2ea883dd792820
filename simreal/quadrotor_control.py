"""Quadrotor flight-controller math, array-namespace agnostic (``xp`` = numpy or jax.numpy).

The same functions run inside the simulation (JAX, every physics step) and on the deploy
side (numpy: the robot runtime's landing controller, :mod:`simreal.deploy.landing`), so the
rate loop a policy trained against is the rate loop it flies with. Core, not ``sim``: the
robot runtime imports it without MuJoCo or JAX.

Geometry (an X frame, Bitcraze numbering: M1 front-right, M2 back-right, M3 back-left,
M4 front-left; body x forward, y left, z up): rotor i sits at ``arm_length_m`` along
:data:`ROTOR_DIRECTIONS` [i] and spins :data:`ROTOR_SPIN` [i].

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
A^-1 and are clipped to [0, f_max]. With J diagonal the gyroscopic term is
(w_y w_z (J_z - J_y), w_z w_x (J_x - J_z), w_x w_y (J_y - J_x)), so the loop is linear in the
features phi = (T, omega_des, omega, w_y w_z, w_z w_x, w_x w_y)::

    f = clip(phi G, 0, f_max),     G = W A^-T  (10 x 4, :func:`rate_loop_gain`)

which a batch of vehicles evaluates as one (n, 10) x (10, 4) product (five times per control
step in the native simulation, where the per-op cost of the explicit form was half the loop's).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec

Array = Any

#: Rotor (x, y) direction of each arm in the body frame, Bitcraze order M1..M4.
ROTOR_DIRECTIONS = np.array([[1.0, -1.0], [-1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]]) / math.sqrt(2.0)
#: +1 for clockwise rotors (M1, M3): their reaction torque on the body is +z.
ROTOR_SPIN = np.array([1.0, -1.0, 1.0, -1.0])

REQUIRED = (
    "mass_kg",
    "arm_length_m",
    "ixx_kg_m2",
    "iyy_kg_m2",
    "izz_kg_m2",
    "torque_to_thrust_m",
    "motor_time_constant_s",
    "physics_dt_s",
)

#: Rate-loop bandwidths [1/s] (desired angular acceleration per unit rate error).
RATE_GAINS = (40.0, 40.0, 15.0)


def physical(spec: RobotSpec, key: str) -> float:
    """A required physical constant of the spec; the error names the missing key."""
    if key not in spec.physical:
        raise ConfigError(f"physical.{key}", f"required for a quadrotor (needs: {', '.join(REQUIRED)})", spec.source)
    return float(spec.physical[key])


def rotor_positions(spec: RobotSpec) -> np.ndarray:
    """Rotor centres in the body frame [m], (4, 3)."""
    arm = physical(spec, "arm_length_m")
    return np.concatenate([ROTOR_DIRECTIONS * arm, np.zeros((4, 1))], axis=1)


def inertia_diag(spec: RobotSpec) -> np.ndarray:
    """(Jxx, Jyy, Jzz) [kg m^2]."""
    return np.array([physical(spec, k) for k in ("ixx_kg_m2", "iyy_kg_m2", "izz_kg_m2")])


def mixer(spec: RobotSpec) -> np.ndarray:
    """The spec's allocation matrix A (4, 4) (module docstring)."""
    return allocation_matrix(rotor_positions(spec), ROTOR_SPIN, physical(spec, "torque_to_thrust_m"))


def allocation_matrix(rotor_pos_b: np.ndarray, spin: np.ndarray, torque_to_thrust_m: float) -> np.ndarray:
    """A (4, 4): rotor thrusts -> (collective thrust, body torques). See module docstring."""
    return np.stack([np.ones(4), rotor_pos_b[:, 1], -rotor_pos_b[:, 0], spin * torque_to_thrust_m])


def rate_loop_gain(
    inertia_diag: np.ndarray, mixer_inv: np.ndarray, gains: tuple[float, float, float] = RATE_GAINS
) -> np.ndarray:
    """G (10, 4): the body-rate loop as rotor thrusts f = clip(phi G, 0, f_max) (module docstring).

    Args:
      inertia_diag: (Jxx, Jyy, Jzz) [kg m^2].
      mixer_inv: A^-1 (4, 4).
      gains: K's diagonal [1/s].
    """
    j = np.asarray(inertia_diag, dtype=np.float64)
    jk = j * np.asarray(gains, dtype=np.float64)
    w = np.zeros((10, 4))  # phi -> (T, tau)
    w[0, 0] = 1.0
    w[1:4, 1:] = np.diag(jk)
    w[4:7, 1:] = -np.diag(jk)
    w[7:10, 1:] = np.diag(j[[2, 0, 1]] - j[[1, 2, 0]])
    return w @ np.asarray(mixer_inv, dtype=np.float64).T


def rate_loop_thrusts(command: Array, omega_b: Array, gain: Array, f_max: Array, xp: Any) -> Array:
    """Rotor thrusts [N] (..., 4) from the held command (..., 4) = (T [N], omega_des [rad/s]) and
    the measured body rates omega_b (..., 3), with G from :func:`rate_loop_gain`; leading axes
    are a batch."""
    products = omega_b[..., [1, 2, 0]] * omega_b[..., [2, 0, 1]]
    phi = xp.concatenate([command, omega_b, products], axis=-1)
    return xp.clip(phi @ xp.asarray(gain, dtype=phi.dtype), 0.0, f_max)


def ctbr_from_action(a: Array, total_thrust_max_n: float, max_rate_rad_s: float, xp: Any) -> tuple[Array, Array]:
    """Normalised ctbr action a in [-1, 1]^4 -> (collective thrust [N], body rates [rad/s]).

    a[0] = -1 is zero thrust and +1 the sum of all rotor limits; a[1:4] scale max_rate.
    """
    a = xp.clip(a, -1.0, 1.0)
    return 0.5 * (a[0] + 1.0) * total_thrust_max_n, a[1:4] * max_rate_rad_s
