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
Within stance, :func:`pivots` marks the frames where the foot stands on one edge: on its ball
with the heel raised (the heel-off before toe-off), or on its heel with the toes raised (a
heel strike, a turn swivelled on the heel). The solver then pins that edge of the sole and lets
the foot pitch and turn about it instead of holding it flat.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter1d

from simreal.retarget.settings import ContactConfig

#: Shorter runs on one edge [s] are capture jitter, not a heel-off or a heel strike.
MIN_PIVOT_S = 0.03
#: One contact point this much higher [m] than the other is off the ground: low, so that a foot
#: the solver held flat until then is still about level when it starts to pitch (a 2 cm
#: threshold made it snap 26 deg). Relative to the foot's other point, as a foot whose rest
#: height is a few millimetres off the pooled one (a rig's left and right differ) stands flat.
PIVOT_M = 0.005
#: A foot on its heel stays there after its toes come down while its ball still moves this much
#: faster [m/s] than the heel: the end of a swivel (pinned at the ball again at once, the heel
#: slid 2 cm while the foot finished turning).
PIVOT_STAY_M_S = 0.03
#: Pivot labels: flat (or swing), on the ball (heel raised), on the heel (toes raised).
FLAT, ON_BALL, ON_HEEL = 0, 1, -1
#: Sole edges (the anchors' and ``RetargetRobot.pinned_local``'s index): the ball, the heel.
BALL, HEEL = 0, 1


def pinned_edge(pivot: np.ndarray | int) -> np.ndarray:
    """The sole edge (:data:`BALL` or :data:`HEEL`) a stance foot with pivot label(s) ``pivot``
    is pinned at: its heel on the heel, its ball flat or on the ball."""
    return np.where(np.asarray(pivot) == ON_HEEL, HEEL, BALL)


def heading_held(pivot_before: np.ndarray | int, pivot_now: np.ndarray | int) -> np.ndarray:
    """Whether a foot in stance in two consecutive frames, with pivot labels ``pivot_before`` and
    ``pivot_now``, has its heading held between them: flat now, its heel down before (flat, or on
    the heel as its toes come down), or on its ball now, its ball down before (flat, or on the
    ball). A sole whose ball is on the floor turns about it no further than the human's foot does
    (friction holds it otherwise; :func:`swivel_excess`, its heel's move across the foot); one on
    its heel swivels about the heel freely. On its ball with the heading free, H1 (no ankle roll:
    on an edge, its foot points where the hip-to-ball line does) spun its foot 50 deg in 6 frames
    from one hip-yaw limit to the other where the human's pelvis passed beside the ball in a
    turn and the human's foot turned 17 deg."""
    before, now = np.asarray(pivot_before), np.asarray(pivot_now)
    return ((now == FLAT) & (before != ON_BALL)) | ((now == ON_BALL) & (before != ON_HEEL))


def turned_heel(ball: np.ndarray, heel: np.ndarray, turn: np.ndarray | float) -> np.ndarray:
    """Where a sole's heel (xy, (..., 2)) is after the sole turns by ``turn`` [rad] (...) about
    its ball (xy, (..., 2))."""
    c, s = np.cos(turn), np.sin(turn)
    d = heel - ball
    return ball + np.stack([c * d[..., 0] - s * d[..., 1], s * d[..., 0] + c * d[..., 1]], axis=-1)


def across_axis(left: np.ndarray) -> np.ndarray:
    """The horizontal unit direction (..., 2) across a sole, from its left axis (..., 3)."""
    side = left[..., :2]
    return side / np.maximum(np.linalg.norm(side, axis=-1, keepdims=True), 1e-9)


def heel_turn_bounds(
    ball: np.ndarray, heel: np.ndarray, across: np.ndarray, turn: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """The interval (lo, hi) [m] (...) a held sole's heel (:func:`heading_held`) may move along
    ``across`` (:func:`across_axis`) into the next frame, from ``ball`` and ``heel`` (xy,
    (..., 2)) and the human's foot turn ``turn`` [rad] between the frames: between 0 (the foot
    does not turn) and g, the move that turn about the ball gives the heel (:func:`turned_heel`).
    So the foot may lag the human's turn (where the leg cannot follow) but never turn further, or
    the other way."""
    g = np.sum(across * (turned_heel(ball, heel, turn) - heel), axis=-1)
    return np.minimum(0.0, g), np.maximum(0.0, g)


def swivel_excess(
    ball: np.ndarray, heel: np.ndarray, heel_after: np.ndarray, left_after: np.ndarray, turn: np.ndarray | float
) -> np.ndarray:
    """How far [m] (...) a held sole's heel moved across the foot beyond what the human's foot
    turn allows: with ``ball``, ``heel`` (xy, (..., 2)) in one frame, ``heel_after`` (xy) and the
    sole's left axis ``left_after`` (..., 3) in the next, and the human's turn ``turn`` [rad]
    between them, the distance of the heel's move across the foot from
    :func:`heel_turn_bounds`."""
    n = across_axis(left_after)
    d = np.sum(n * (heel_after - heel), axis=-1)
    lo, hi = heel_turn_bounds(ball, heel, n, turn)
    return np.maximum(0.0, np.maximum(lo - d, d - hi))


def smoothed_tracks(points: np.ndarray, fps: float, smooth_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Point tracks (T, ..., 3) smoothed over ``smooth_s`` [s] (mocap jitter would read as speed),
    and their speeds (T, ...) [m/s] (central differences; zero for a single frame)."""
    T = len(points)
    if smooth_s > 0 and T > 1:
        points = gaussian_filter1d(points, smooth_s * fps, axis=0, mode="nearest")
    speed = np.linalg.norm(np.gradient(points, axis=0), axis=-1) * fps if T > 1 else np.zeros(points.shape[:-1])
    return points, speed


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


def detect_contacts(
    points: np.ndarray, fps: float, terrain_z: np.ndarray, cfg: ContactConfig = ContactConfig()
) -> np.ndarray:
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
    points, speed = smoothed_tracks(points, fps, cfg.smooth_s)
    height = points[..., 2] - terrain_z[:, :, None]  # (T, F, P)
    enter = ((height < cfg.height_m) & (speed < cfg.speed_m_s)).any(-1)
    stay = (
        (height < max(cfg.release_height_m, cfg.height_m)) & (speed < max(cfg.release_speed_m_s, cfg.speed_m_s))
    ).any(-1)
    n_stance = max(1, int(round(cfg.min_stance_s * fps)))
    n_swing = max(1, int(round(cfg.min_swing_s * fps)))
    return np.stack(
        [clean_runs(hysteresis(enter[:, f], stay[:, f]), n_stance, n_swing) for f in range(points.shape[1])], axis=1
    )


def pivots(points: np.ndarray, fps: float, contacts: np.ndarray, cfg: ContactConfig = ContactConfig()) -> np.ndarray:
    """(T, F) int8: which edge each stance foot stands on. :data:`ON_BALL` where its heel (contact
    point 0) is more than :data:`PIVOT_M` above its ball (the last point): the heel-off before
    toe-off, a landing on the toes; :data:`ON_HEEL` where the ball is that much above the heel (a
    heel strike's toes-up, a turn swivelled on the heel), and after that while the ball, its toes
    down, still moves :data:`PIVOT_STAY_M_S` faster than the heel (the end of the swivel);
    :data:`FLAT` otherwise and in swing. Runs shorter than :data:`MIN_PIVOT_S` are dropped (a
    short heel-off still needs its pivot: held flat, the foot snapped to its pitch at lift-off); a
    foot without a ball point (no toe joint) is always flat."""
    out = np.zeros(contacts.shape, dtype=np.int8)
    if points.shape[2] < 2:
        return out
    points, speed = smoothed_tracks(points, fps, cfg.smooth_s)
    rise = points[:, :, 0, 2] - points[:, :, -1, 2]  # heel above ball [m]
    turning = (speed[:, :, -1] - speed[:, :, 0] > PIVOT_STAY_M_S) & (rise < PIVOT_M)  # the ball swings about the heel
    n = max(1, int(round(MIN_PIVOT_S * fps)))
    for f in range(contacts.shape[1]):
        on_heel = hysteresis(-rise[:, f] > PIVOT_M, (-rise[:, f] > PIVOT_M) | turning[:, f])
        out[clean_runs(contacts[:, f] & (rise[:, f] > PIVOT_M), n, 1), f] = ON_BALL
        out[clean_runs(contacts[:, f] & on_heel, n, 1), f] = ON_HEEL
    return out
