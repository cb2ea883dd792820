"""Foot contact labels: which frames each foot is in stance.

A foot is in stance where its sole (smoothed over ``smooth_s`` against capture jitter) is
near the terrain and barely moving; segments shorter
than ``min_stance_s`` are dropped and swing gaps shorter than ``min_swing_s`` are filled, so
one noisy frame neither plants nor lifts a foot. The labels decide where the interaction
solver pins feet (no slide, flat, on the ground), are written to the motion file, and are
what the slide metric counts over.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter1d

from simreal.retarget.settings import ContactConfig


def _runs(x: np.ndarray) -> list[tuple[int, int, bool]]:
    """(start, stop, value) runs of a boolean array."""
    edges = np.flatnonzero(np.diff(x.astype(np.int8))) + 1
    bounds = np.concatenate([[0], edges, [len(x)]])
    return [(int(a), int(b), bool(x[a])) for a, b in zip(bounds[:-1], bounds[1:])]


def clean_runs(x: np.ndarray, min_true: int, min_false: int) -> np.ndarray:
    """Fill interior False runs shorter than ``min_false``, then drop True runs shorter than ``min_true``."""
    y = x.copy()
    for a, b, v in _runs(y):
        if not v and 0 < a and b < len(y) and b - a < min_false:
            y[a:b] = True
    for a, b, v in _runs(y):
        if v and b - a < min_true:
            y[a:b] = False
    return y


def detect_contacts(soles: np.ndarray, fps: float, terrain_z: np.ndarray,
                    cfg: ContactConfig = ContactConfig()) -> np.ndarray:
    """Stance labels from sole tracks.

    Args:
      soles: (T, F, 3) sole positions [m] (F feet).
      fps: frame rate [Hz].
      terrain_z: (T, F) terrain height under each sole [m].
      cfg: thresholds.

    Returns:
      (T, F) bool, True in stance.
    """
    T = soles.shape[0]
    if cfg.smooth_s > 0 and T > 1:  # mocap jitter would read as speed
        soles = gaussian_filter1d(soles, cfg.smooth_s * fps, axis=0, mode="nearest")
    vel = np.gradient(soles, axis=0) * fps if T > 1 else np.zeros_like(soles)
    speed = np.linalg.norm(vel, axis=-1)
    raw = (soles[..., 2] - terrain_z < cfg.height_m) & (speed < cfg.speed_m_s)
    n_stance = max(1, int(round(cfg.min_stance_s * fps)))
    n_swing = max(1, int(round(cfg.min_swing_s * fps)))
    return np.stack([clean_runs(raw[:, f], n_stance, n_swing) for f in range(soles.shape[1])], axis=1)
