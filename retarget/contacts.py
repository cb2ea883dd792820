"""Foot contact labels: which frames each foot is in stance, from the evidence of its contact points.

Each foot has contact points (the heel, under the ankle, and the ball of the foot, the toe
joint), each given as its position minus its height when the foot stands flat, so a point
on the ground has z = terrain. A point *touches* where it is near the terrain and barely
moving. Labels use hysteresis, per foot:

    enter stance  where some point is below ``height_m`` and slower than ``speed_m_s``;
    stay          while some point is below ``release_height_m`` and slower than ``release_speed_m_s``;

so speed jitter around one threshold neither lifts a planted foot nor plants a swinging
one. Then stance segments shorter than ``min_stance_s`` are dropped and swing gaps shorter
than ``min_swing_s`` are filled. Tracks are smoothed over ``smooth_s`` against capture jitter
first. The labels decide where the interaction solver pins feet (no slide, flat, on the
ground), are written to the motion file, and are what the slide metric counts over.
Within stance, :func:`heel_up` marks the frames where the foot stands on its ball with the
heel raised (the heel-off before toe-off): the solver then pivots the foot on the front edge of
its sole instead of holding it flat.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter1d

from simreal.retarget.settings import ContactConfig


#: Shorter heel-up runs [s] are capture jitter, not a heel-off.
MIN_HEEL_UP_S = 0.03
#: A heel this high [m] is off the ground: low, so that a foot the solver held flat until then
#: is still about level when it starts to pitch (a 2 cm threshold made it snap 26 deg).
HEEL_UP_M = 0.005


def runs(x: np.ndarray) -> list[tuple[int, int, bool]]:
    """(start, stop, value) runs of a boolean array."""
    edges = np.flatnonzero(np.diff(x.astype(np.int8))) + 1
    bounds = np.concatenate([[0], edges, [len(x)]])
    return [(int(a), int(b), bool(x[a])) for a, b in zip(bounds[:-1], bounds[1:])]


def clean_runs(x: np.ndarray, min_true: int, min_false: int) -> np.ndarray:
    """Fill interior False runs shorter than ``min_false``, then drop True runs shorter than ``min_true``."""
    y = x.copy()
    for a, b, v in runs(y):
        if not v and 0 < a and b < len(y) and b - a < min_false:
            y[a:b] = True
    for a, b, v in runs(y):
        if v and b - a < min_true:
            y[a:b] = False
    return y


def hysteresis(enter: np.ndarray, stay: np.ndarray) -> np.ndarray:
    """(T,) bool: True from a frame where ``enter`` holds until the first frame where ``stay`` fails.

    ``enter`` implies ``stay`` (thresholds nest); a frame that satisfies ``enter`` is always True.
    """
    out = np.zeros(len(enter), dtype=bool)
    on = False
    for t in range(len(enter)):
        on = bool(enter[t]) or (on and bool(stay[t]))
        out[t] = on
    return out


def detect_contacts(points: np.ndarray, fps: float, terrain_z: np.ndarray,
                    cfg: ContactConfig = ContactConfig()) -> np.ndarray:
    """Stance labels from foot contact points.

    Args:
      points: (T, F, P, 3) contact points [m] of F feet (P per foot), each shifted down by its
        flat-foot height so that it is at the terrain when that part of the foot is down.
      fps: frame rate [Hz].
      terrain_z: (T, F) terrain height under each foot [m].
      cfg: thresholds.

    Returns:
      (T, F) bool, True in stance.
    """
    T = points.shape[0]
    if cfg.smooth_s > 0 and T > 1:  # mocap jitter would read as speed
        points = gaussian_filter1d(points, cfg.smooth_s * fps, axis=0, mode="nearest")
    speed = np.linalg.norm(np.gradient(points, axis=0), axis=-1) * fps if T > 1 else np.zeros(points.shape[:-1])
    height = points[..., 2] - terrain_z[:, :, None]  # (T, F, P)
    enter = ((height < cfg.height_m) & (speed < cfg.speed_m_s)).any(-1)
    stay = ((height < max(cfg.release_height_m, cfg.height_m))
            & (speed < max(cfg.release_speed_m_s, cfg.speed_m_s))).any(-1)
    n_stance = max(1, int(round(cfg.min_stance_s * fps)))
    n_swing = max(1, int(round(cfg.min_swing_s * fps)))
    return np.stack([clean_runs(hysteresis(enter[:, f], stay[:, f]), n_stance, n_swing)
                     for f in range(points.shape[1])], axis=1)


def heel_up(points: np.ndarray, fps: float, terrain_z: np.ndarray, contacts: np.ndarray,
            cfg: ContactConfig = ContactConfig()) -> np.ndarray:
    """(T, F) bool: stance frames where the heel (contact point 0) is off the ground, higher than
    :data:`HEEL_UP_M`, while the foot stands on its ball: the heel-off before toe-off (or a landing on
    the toes). Runs shorter than :data:`MIN_HEEL_UP_S` are dropped (a short heel-off still needs
    its pivot: held flat, the foot snapped to its pitch at lift-off); a foot without a ball point
    (no toe joint) is never on its ball."""
    if points.shape[2] < 2:
        return np.zeros(contacts.shape, dtype=bool)
    if cfg.smooth_s > 0 and len(points) > 1:
        points = gaussian_filter1d(points, cfg.smooth_s * fps, axis=0, mode="nearest")
    up = contacts & (points[:, :, 0, 2] - terrain_z > HEEL_UP_M)
    n = max(1, int(round(MIN_HEEL_UP_S * fps)))
    return np.stack([clean_runs(up[:, f], n, 1) for f in range(up.shape[1])], axis=1)
