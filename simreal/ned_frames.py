"""PX4's frames and simreal's: NED world / FRD body against ENU world / FLU body.

PX4 (its uORB topics, ``px4_msgs``, MAVLink) reports and takes NED world (x north, y east, z
down) and FRD body (x forward, y right, z down) quantities; simreal's world is ENU (x east, y
north, z up) and its body FLU (x forward, y left, z up). With ``P`` the ENU-from-NED and ``D``
the FRD-from-FLU matrices::

    P = [[0, 1, 0], [1, 0, 0], [0, 0, -1]]      v_enu = P v_ned        (:func:`swap_ned_enu`)
    D = diag(1, -1, -1)                          w_flu = D w_frd        (:func:`swap_frd_flu`)
    R_enu_flu = P R_ned_frd D                                          (:func:`swap_attitude`)

In quaternions ``q_enu_flu = q_P * q_ned_frd * q_D`` with ``q_P = (0, 1, 1, 0)/sqrt2`` (a half
turn about the north-east diagonal) and ``q_D = (0, 1, 0, 0)`` (a half turn about x), which
multiplies out to ``(w + z, x + y, x - y, w - z)/sqrt2``. Each map is its own inverse (P, D
and the quaternion map square to the identity), so the same three functions convert both ways.
A level vehicle facing north is yaw 0 for PX4 and yaw +90 deg in ENU. The deploy runner's
``px4_msgs/VehicleOdometry`` decoder and the PX4 drivers and twins all use these. Imports numpy.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

_SQRT_HALF = math.sqrt(0.5)


def swap_ned_enu(v: npt.ArrayLike) -> np.ndarray:
    """NED <-> ENU for world vectors (..., 3): ``(x, y, z) -> (y, x, -z)``; its own inverse."""
    v = np.asarray(v, np.float64)
    return np.stack([v[..., 1], v[..., 0], -v[..., 2]], axis=-1)


def swap_frd_flu(v: npt.ArrayLike) -> np.ndarray:
    """FRD <-> FLU for body vectors (..., 3): ``(x, y, z) -> (x, -y, -z)``; its own inverse."""
    return np.asarray(v, np.float64) * np.array([1.0, -1.0, -1.0])


def swap_attitude(q_wxyz: npt.ArrayLike) -> np.ndarray:
    """``q_ned_frd`` <-> ``q_enu_flu`` (wxyz): ``(w + z, x + y, x - y, w - z) / sqrt 2`` (module
    docstring); its own inverse."""
    w, x, y, z = np.asarray(q_wxyz, np.float64)
    return _SQRT_HALF * np.array([w + z, x + y, x - y, w - z])
