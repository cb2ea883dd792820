"""Body frames from motion capture: a pelvis or chest frame from marker directions, level
(heading) frames, and the repair of frames a pose leaves poorly defined. The rotation math
itself is :mod:`simreal.rotations`."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter1d

from simreal.rotations import project_to_so3


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
