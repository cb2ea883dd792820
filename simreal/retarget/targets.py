"""Human motion -> per-frame robot keypoint targets: positions, orientations, contacts.

Steps, each a small function:

1. find the canonical keypoints in the source skeleton (:mod:`joint_names`);
2. the feet's contact points (heel under the ankle, ball at the toe joint), each shifted down
   by its flat-foot height, and the soles: between ankle and toe, as high as the lower point;
3. put the human's floor at z = 0: a capture floor that is not level (a volume calibrated a
   little off, a room's floor; 5 cm over 5 m on a public 120 fps walk) is a plane fitted to
   where the feet stand still (:func:`floor_slope`), taken out of every height; then a low
   percentile of the contact points' heights is z = 0;
4. body frames from the bones, never from a projection that degenerates when one bone passes
   vertical: pelvis (hips + spine), chest (shoulders + neck), feet (the lateral axis of the
   shin and foot bones, which stays near-horizontal when the foot points down, turned into a
   level heading relative to the pelvis); frames where the bones are near-collinear are filled
   from their neighbours in time;
5. scale to the robot (:mod:`scaling`, derived from limb lengths; the hips rigidly on the pelvis
   frame of step 4, at the robot's own hip offsets);
6. label contacts on the human's contact points scaled by the leg ratio (a similarity: a planted
   foot stays planted and on the floor, which the per-segment scaled targets need not), and
   shift the targets vertically, frame by frame, so the stance soles rest on the terrain;
7. turn an arm whose targets pass through the robot's own hips about its shoulder, round them
   (:mod:`self_clearance`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import mujoco
import numpy as np
from scipy.ndimage import gaussian_filter1d, maximum_filter1d

from simreal.errors import ConfigError, DataFileError
from simreal.retarget import joint_names
from simreal.retarget.body_frames import fill_unreliable, frame_from_left_up, heading_from_left, level_frame
from simreal.retarget.contacts import detect_contacts, heading_held, pivots, runs, smoothed_tracks
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.scaling import Scaling, apply_scaling, derive_scaling
from simreal.retarget.self_clearance import clear_arms, hip_obstacles
from simreal.retarget.skeleton import HumanMotion
from simreal.rotations import wrap_angle

ORIENTED = ("pelvis", "torso", "head", "left_foot", "right_foot")
#: Gaussian smoothing of the pitch target, sigma [s].
PITCH_SMOOTH_S = 0.03
#: After a lift-off the foot's pitch target returns to level over this long [s].
PITCH_RELEASE_S = 0.25
#: Shorter than this [m] (median over the clip) two joints are one place, not a bone.
MIN_BONE_M = 0.02
# A frame built from two bones is reliable when the sine of the angle between them (times, for a
# heading, the horizontal share of their lateral axis) is above RELIABLE[1], unusable below
# RELIABLE[0], blended in between.
RELIABLE = (0.15, 0.35)
FILL_SIGMA_S = 0.1  # unreliable frames are filled from reliable ones within about this [s]
# Feet point at most this far from the pelvis heading [rad]: the human hip rotates about
# +-45 deg; beyond it the bones are mislabelled or the capture glitched.
FOOT_YAW_MAX_RAD = 0.8
#: A foot heading continues across a gap of unreliable frames this short [s] ...
CONTINUITY_GAP_S = 0.3
#: ... when one of its two branches is within this of the heading before the gap [rad], and
#: the run's own mean direction is ambiguous: |mean cos| to the pelvis heading below this.
CONTINUITY_RAD = np.pi / 3
AMBIGUOUS_COS = 0.5
OFFSET_SMOOTH_S = 0.05  # sigma of the per-frame vertical offset [s]
# A foot stands still (level_feet) where both its contact points are slower than STILL_M_S
# [m/s] (tracks smoothed over STILL_SMOOTH_S [s]) and lower than LOW_M [m]; at least
# MIN_STILL_S [s] of such frames, and a heel-ball offset under MAX_LEVEL_M [m], to level it.
STILL_M_S, STILL_SMOOTH_S, LOW_M, MIN_STILL_S, MAX_LEVEL_M = 0.1, 0.02, 0.05, 0.2, 0.03
#: A leg target reaches at most this share of the robot's straight leg (hip-knee plus knee-ankle):
#: near full reach the knee angle per millimetre of reach grows without bound, and a human's late
#: stance (its knee all but straight) made H1's knee swing 0.4 rad in 40 ms (14 rad/s, its limit,
#: 5x the human's) on a public 120 fps walk. 0.99 keeps the knee bent at least 2 acos(0.99) =
#: 0.28 rad for equal segments; the body is lowered (:func:`reach_drop`) instead.
MAX_REACH = 0.99
#: The drop is held over +-REACH_HOLD_S [s] around each frame that needs it, then smoothed
#: (sigma REACH_HOLD_S / 2): lowered and raised over about 0.2 s, not in a frame.
REACH_HOLD_S = 0.1
#: The floor plane (:func:`floor_slope`): still foot points within FLOOR_BAND_M [m] of the
#: plane so far count; a slope is believed across the ground the feet stood on, against a ridge
#: of FLOOR_SPREAD_M [m] (a clip on the spot keeps a level floor); and is at most
#: MAX_FLOOR_SLOPE (2 deg: more is a ramp or stairs, for a terrain scene, not a tilted floor).
FLOOR_BAND_M, FLOOR_SPREAD_M, MAX_FLOOR_SLOPE = 0.02, 0.5, 0.035


@dataclasses.dataclass(frozen=True)
class Targets:
    """What the solvers track (K robot keypoints, T frames).

    Attributes:
      keypoints: (K,) names, the robot's keypoint order.
      positions: (T, K, 3) scaled target positions [m].
      rotations: (T, K, 3, 3) target site orientations (identity where not oriented).
      human: (T, K, 3) the human keypoints before scaling (floor at z = 0) [m].
      contacts: (T, 2) stance of the left and right foot.
      pivot: (T, 2) int8, the edge a stance foot stands on (:func:`~simreal.retarget.contacts.pivots`):
        1 its ball (heel raised), -1 its heel (toes raised), 0 flat or in swing.
      terrain_z: (T, 2) terrain height under each target sole [m].
      fps: [Hz]; scaling: the derived factors; vertical_offset_m: (T,) downward shift applied
        after scaling [m], so that stance soles rest on the terrain.
      arm_push_m: (T, 2) how far the left and right wrist targets were moved to clear the
        robot's hips [m] (:mod:`~simreal.retarget.self_clearance`).
    """

    keypoints: tuple[str, ...]
    positions: np.ndarray
    rotations: np.ndarray
    human: np.ndarray
    contacts: np.ndarray
    pivot: np.ndarray
    terrain_z: np.ndarray
    fps: float
    scaling: Scaling
    vertical_offset_m: np.ndarray
    arm_push_m: np.ndarray

    @property
    def num_frames(self) -> int:
        return int(self.positions.shape[0])

    def frames(self, first: int, stop: int) -> Targets:
        """The targets of frames ``first .. stop - 1`` (a part of the clip)."""
        cut = slice(first, stop)
        return dataclasses.replace(
            self,
            positions=self.positions[cut],
            rotations=self.rotations[cut],
            human=self.human[cut],
            contacts=self.contacts[cut],
            pivot=self.pivot[cut],
            terrain_z=self.terrain_z[cut],
            vertical_offset_m=self.vertical_offset_m[cut],
            arm_push_m=self.arm_push_m[cut],
        )


def start_pose(robot: RetargetRobot, targets: Targets) -> np.ndarray:
    """The home pose standing at the first frame's pelvis target, turned to its heading: the
    solvers' starting point."""
    q = robot.q_home.copy()
    pel = robot.keypoint_index("pelvis")
    q[:2] = targets.positions[0, pel, :2]
    yaw = float(heading_from_left(targets.rotations[0, pel][:, 1])[0])
    turn = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
    mujoco.mju_mulQuat(q[3:7], turn, robot.q_home[3:7].copy())
    return q


def resample(motion: HumanMotion, fps: float) -> HumanMotion:
    """Linearly resample joint positions to ``fps`` [Hz]."""
    if abs(fps - motion.fps) < 1e-9:
        return motion
    T = motion.num_frames
    t_old = np.arange(T) / motion.fps
    t_new = np.arange(int(np.floor(t_old[-1] * fps + 1e-9)) + 1) / fps
    flat = motion.positions.reshape(T, -1)
    pos = np.stack([np.interp(t_new, t_old, flat[:, c]) for c in range(flat.shape[1])], 1)
    source = dict(motion.source, resampled_from_fps=motion.fps)
    return dataclasses.replace(
        motion, positions=pos.reshape(len(t_new), *motion.positions.shape[1:]), fps=float(fps), source=source
    )


def human_keypoints(
    motion: HumanMotion, joint_map: Mapping[str, str] | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Canonical keypoint tracks (T, 3) [m], soles included, floor at z = 0, and the feet's
    contact points (T, 2, P, 3) [m] (left, right; heel and ball, or a heel alone without toes).

    A contact point is a point of the foot shifted down by its height when the foot stands
    flat (a low percentile of its height over the clip, both feet pooled), so it is at the
    floor whenever that part of the foot is down; then each foot's heel and ball are levelled
    against each other where that foot stands still (:func:`level_feet`). Without a toe joint
    the heel is a tenth of the leg below the ankle. The sole is between ankle and toe, as high
    as the mean of the contact points (a foot on its ball, heel raised, has its sole's centre up).
    """
    idx = joint_names.resolve_keypoints(motion.names, joint_map, source=motion.source.get("path", ""))
    kp = {k: motion.positions[:, i] for k, i in idx.items()}
    leg = np.median(
        np.linalg.norm(kp["left_knee"] - kp["left_hip"], axis=-1)
        + np.linalg.norm(kp["left_ankle"] - kp["left_knee"], axis=-1)
    )
    has_toes = "left_toe" in kp and "right_toe" in kp
    parts = ("ankle", "toe") if has_toes else ("ankle",)
    points = np.stack([np.stack([kp[f"{side}_{p}"] for p in parts], axis=1) for side in ("left", "right")], axis=1)
    if not has_toes:
        points = points - np.array([0.0, 0.0, 0.1 * leg])
    slope, centre = floor_slope(points, motion.fps)
    kp = {k: v - _tilt(v, slope, centre) for k, v in kp.items()}
    points = points - _tilt(points, slope, centre)
    rest = np.percentile(points[..., 2].reshape(-1, len(parts)), 5, axis=0)  # (P,) flat-foot heights
    floor = float(rest.min())
    points = level_feet(points - np.concatenate([np.zeros((len(parts), 2)), rest[:, None]], axis=1), motion.fps)
    for f, side in enumerate(("left", "right")):
        sole = kp[f"{side}_ankle"] if not has_toes else 0.5 * (kp[f"{side}_ankle"] + kp[f"{side}_toe"])
        kp[f"{side}_foot"] = np.concatenate([sole[:, :2], points[:, f, :, 2].mean(axis=1, keepdims=True) + floor], 1)
    shift = np.array([0.0, 0.0, floor])
    return {k: v - shift for k, v in kp.items()}, points


def floor_slope(points: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """The capture floor's slope (dz/dx, dz/dy) and the point it is taken about, (2,) each [m].

    Samples: each foot's lower contact point in the frames where it is slower than
    :data:`STILL_M_S` (a foot standing). Fitted, three times, to the samples within
    :data:`FLOOR_BAND_M` of the plane so far (the first plane level at their 20th percentile: a
    foot held still in the air, or on its toes, is left out), by least squares

        min  sum_i (z_i - h_f(i) - s . (xy_i - c))^2 + N L^2 |s|^2

    with one height h_f per foot (a rig's left and right rest heights differ by millimetres,
    which across a stance width would read as a slope), c the samples' centre, N their count
    and L = :data:`FLOOR_SPREAD_M`: a slope is believed only across ground the feet covered
    (shrunk by sigma^2 / (sigma^2 + L^2) for a spread sigma). Its norm is capped at
    :data:`MAX_FLOOR_SLOPE`. Fewer than :data:`MIN_STILL_S` of standing: level (zero slope)."""
    F = points.shape[1]
    level = (np.zeros(2), np.zeros(2))
    if len(points) < 3:
        return level
    _, speed = smoothed_tracks(points, fps, STILL_SMOOTH_S)
    low = np.take_along_axis(points, points[..., 2].argmin(axis=2)[..., None, None], axis=2)[:, :, 0]  # (T, F, 3)
    still = speed.min(axis=2) < STILL_M_S  # (T, F)
    foot = np.broadcast_to(np.arange(F), still.shape)[still]
    xy, z = low[still][:, :2], low[still][:, 2]
    if len(z) < MIN_STILL_S * fps:
        return level
    centre = xy.mean(axis=0)
    d = xy - centre
    design = np.column_stack([foot[:, None] == np.arange(F), d]).astype(float)  # (N, F + 2)
    coef = np.concatenate([np.full(F, np.percentile(z, 20)), np.zeros(2)])
    for _ in range(3):
        near = np.abs(z - design @ coef) < FLOOR_BAND_M
        if near.sum() < MIN_STILL_S * fps:
            return level
        A = design[near]
        ridge = np.diag(np.r_[np.zeros(F), np.ones(2)]) * near.sum() * FLOOR_SPREAD_M**2
        ridge[:F, :F] += np.diag((A[:, :F].sum(axis=0) == 0).astype(float))  # a foot never still: h_f = 0
        coef = np.linalg.solve(A.T @ A + ridge, A.T @ z[near])
    slope = coef[F:]
    norm = float(np.linalg.norm(slope))
    return (slope * (MAX_FLOOR_SLOPE / norm) if norm > MAX_FLOOR_SLOPE else slope), centre


def _tilt(x: np.ndarray, slope: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """The floor plane's height above its centre under each point of ``x`` (..., 3), as (..., 3)
    offsets along z (subtracted: a shear of the heights, exact for the floor, under 0.06% of a
    bone's length for the steepest slope kept)."""
    out = np.zeros_like(x)
    out[..., 2] = (x[..., :2] - centre) @ slope
    return out


def level_feet(points: np.ndarray, fps: float) -> np.ndarray:
    """Contact points (T, 2, P, 3) [m] with each foot's heel and ball level where it stands still.

    The pooled rest heights leave a foot whose toe joint sits higher or lower than the other
    foot's (marker placement, a rig's skinning) standing on one edge all through a flat stance:
    1.6 cm toes-up on one foot of a CMU capture, read as a swivel on the heel. Per foot, the
    median heel-minus-ball height over the frames where both its points are low and still
    (:data:`STILL_M_S`, :data:`LOW_M`; at least :data:`MIN_STILL_S` of them) is split between
    the two points, if it is under :data:`MAX_LEVEL_M` (more is a real pose, as on tiptoe)."""
    if points.shape[2] < 2 or len(points) < 3:
        return points
    smooth, speed = smoothed_tracks(points, fps, STILL_SMOOTH_S)  # speed (T, 2, P)
    still: np.ndarray = ((speed < STILL_M_S) & (smooth[..., 2] < LOW_M)).all(axis=-1)  # type: ignore[assignment]  # (T, 2): numpy's stub allows np.bool
    out = points.copy()
    for f in range(points.shape[1]):
        if still[:, f].sum() < MIN_STILL_S * fps:
            continue
        rise = float(np.median(points[still[:, f], f, 0, 2] - points[still[:, f], f, -1, 2]))
        if abs(rise) < MAX_LEVEL_M:
            out[:, f, 0, 2] -= rise / 2
            out[:, f, -1, 2] += rise / 2
    return out


def _reliability(x: np.ndarray) -> np.ndarray:
    """Weights in [0, 1] from a sine-like quality measure (see :data:`RELIABLE`)."""
    return np.clip((x - RELIABLE[0]) / (RELIABLE[1] - RELIABLE[0]), 0.0, 1.0)


def _angle_quality(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a x b| / (|a| |b|) (T,): the sine of the angle between two bones."""
    n = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.linalg.norm(np.cross(a, b), axis=-1) / np.maximum(n, 1e-12)


def _fill_scalar(x: np.ndarray, reliability: np.ndarray, sigma_frames: float, default: float = 0.0) -> np.ndarray:
    """``c x + (1 - c) fill``: unreliable samples replaced by the reliability-weighted Gaussian mean of
    their neighbours, ``default`` where no neighbour is reliable."""
    c = np.clip(reliability, 0.0, 1.0)
    num = gaussian_filter1d(c * x, sigma_frames, mode="nearest")
    den = gaussian_filter1d(c, sigma_frames, mode="nearest")
    fill = np.where(den > 1e-3, num / np.maximum(den, 1e-3), default)
    return c * x + (1 - c) * fill


def _track_sign(delta: np.ndarray, weight: np.ndarray, max_gap: float) -> np.ndarray:
    """Angles (T,) [rad] known up to a half turn, made continuous where ``weight`` (T,) > 0.

    Within each run of frames with weight, a frame takes ``delta`` or ``delta + pi``, whichever
    is nearer the frame before (the bones stay apart there, so the axis cannot flip between
    frames). Across a gap of at most ``max_gap`` frames the next run continues the last one the
    same way (a foot does not turn half round while its ankle straightens) where the run
    itself cannot tell: its weighted mean direction lies near 90 deg from the pelvis heading
    (``|mean cos| <`` :data:`AMBIGUOUS_COS`, a foot turned far out) and one branch is within
    :data:`CONTINUITY_RAD` of the run before. Every other run (the first, one after a long gap,
    one whose direction is clear) faces the way its weighted majority is within 90 deg of 0
    (the pelvis heading). Frames without weight are left as they are (the caller fills them).
    """
    out = delta.copy()
    last: int | None = None
    for a, b, on in runs(weight > 0):
        if not on:
            continue
        for t in range(a + 1, b):
            flipped = wrap_angle(out[t] + np.pi)
            if abs(wrap_angle(flipped - out[t - 1])) < abs(wrap_angle(out[t] - out[t - 1])):
                out[t] = flipped
        facing = np.sum(weight[a:b] * np.cos(out[a:b])) / np.sum(weight[a:b])  # mean cos to the pelvis
        step = abs(wrap_angle(out[a] - out[last])) if last is not None and a - last <= max_gap else None
        if abs(facing) < AMBIGUOUS_COS and step is not None and min(step, np.pi - step) < CONTINUITY_RAD:
            flip = step > np.pi / 2
        else:
            flip = facing < 0
        if flip:
            out[a:b] = wrap_angle(out[a:b] + np.pi)
        last = b - 1
    return out


def foot_yaw(
    knee: np.ndarray, ankle: np.ndarray, toe: np.ndarray, pelvis_yaw: np.ndarray, sigma_frames: float
) -> np.ndarray:
    """Heading [rad] (T,) of a foot from its shin (knee -> ankle) and foot bone (ankle -> toe).

    The foot's lateral axis ``(toe - ankle) x (ankle - knee)`` is defined whenever the ankle is
    not straight and stays near-horizontal however far the foot pitches down, so its heading
    (:func:`heading_from_left`) does not flip where the foot bone passes vertical. Relative to
    the pelvis heading it is made continuous in time (the axis changes sign where the foot bone
    crosses the shin line; each stretch between such crossings faces forward on the whole), frames where the
    bones are near collinear are filled from their neighbours in time (or the pelvis heading),
    and the result is kept within :data:`FOOT_YAW_MAX_RAD` of the pelvis.
    """
    shin, foot = ankle - knee, toe - ankle
    yaw, level = heading_from_left(np.cross(foot, shin))
    reliability = _reliability(_angle_quality(foot, shin) * level)
    delta = _track_sign(wrap_angle(yaw - pelvis_yaw), reliability, CONTINUITY_GAP_S / FILL_SIGMA_S * sigma_frames)
    delta = _fill_scalar(delta, reliability, sigma_frames)
    return pelvis_yaw + np.clip(delta, -FOOT_YAW_MAX_RAD, FOOT_YAW_MAX_RAD)


def human_frames(kp: Mapping[str, np.ndarray], fps: float) -> dict[str, np.ndarray]:
    """Body frames (T, 3, 3), x forward / y left / z up, from keypoints (see the module docstring)."""
    sigma = FILL_SIGMA_S * fps
    spine = kp.get("torso", kp.get("neck", kp.get("head")))
    left = kp["left_hip"] - kp["right_hip"]
    up = (spine if spine is not None else kp["pelvis"] + [0, 0, 1]) - kp["pelvis"]
    pelvis = fill_unreliable(frame_from_left_up(left, up), _reliability(_angle_quality(left, up)), sigma)
    frames = {"pelvis": pelvis}
    if "left_shoulder" in kp and "right_shoulder" in kp and spine is not None:
        # the chest's up: towards the first of neck and head apart from the spine joint (a rig whose
        # neck sits on the chest joint, OFFSET 0 0 0, has no bone there: that frame flipped 180 deg)
        top = next(
            (
                kp[k]
                for k in ("neck", "head")
                if k in kp and np.median(np.linalg.norm(kp[k] - spine, axis=-1)) > MIN_BONE_M
            ),
            spine + [0, 0, 0.1],
        )
        left, up = kp["left_shoulder"] - kp["right_shoulder"], top - spine
        frames["torso"] = fill_unreliable(frame_from_left_up(left, up), _reliability(_angle_quality(left, up)), sigma)
    else:
        frames["torso"] = pelvis
    frames["head"] = frames["torso"]
    pelvis_yaw = np.unwrap(heading_from_left(pelvis[:, :, 1])[0])
    for side in ("left", "right"):
        toe = kp.get(f"{side}_toe")
        yaw = pelvis_yaw if toe is None else foot_yaw(kp[f"{side}_knee"], kp[f"{side}_ankle"], toe, pelvis_yaw, sigma)
        frames[f"{side}_foot"] = level_frame(yaw)
    return frames


def stance_pitch(points: np.ndarray, contact: np.ndarray, fps: float) -> np.ndarray:
    """(T,) pitch [rad] of one foot's sole target, heel up positive: in stance, the slope from the
    ball to the heel contact point (a sole flat on the ground: about 0; the heel-off before
    toe-off: heel up, the human's; a heel strike's toes-up: negative, as the solver pivots a
    stance foot on whichever edge the human stands on); in swing it returns to level over
    :data:`PITCH_RELEASE_S` after a lift-off and leaves it as long before a touchdown (else a foot
    pitched at toe-off, or toes up at heel strike, snapped in one frame); level in swing
    otherwise, and for a foot without a ball point. Smoothed over :data:`PITCH_SMOOTH_S`: the
    last frames of a toe-off pitch faster than a 30 fps capture samples (24 -> 47 deg in one
    frame of a real walk), which read as a jump of the target. ``points``: (T, P, 3) the foot's
    contact points."""
    T = len(points)
    if points.shape[1] < 2:
        return np.zeros(T)
    d = points[:, 0] - points[:, -1]
    pitch = np.where(contact, np.arctan2(d[:, 2], np.linalg.norm(d[:, :2], axis=-1)), 0.0)
    n = max(1, int(round(PITCH_RELEASE_S * fps)))
    swing = pitch.copy()
    for t in np.flatnonzero(contact[:-1] & ~contact[1:]):  # lift-off after frame t: back to level
        end = min(T, int(t) + 1 + n)
        swing[t + 1 : end] = pitch[t] * (1.0 - np.arange(1, end - t) / n)
    for t in np.flatnonzero(~contact[:-1] & contact[1:]) + 1:  # touchdown at frame t: from level
        start = max(0, int(t) - n)
        swing[start:t] += pitch[t] * (1.0 - np.arange(t - start, 0, -1) / n)
    return gaussian_filter1d(np.where(contact, pitch, swing), PITCH_SMOOTH_S * fps, mode="nearest")


def pitch_about_y(angle: np.ndarray) -> np.ndarray:
    """(T, 3, 3) rotations by ``angle`` (T,) about the local y axis (x turns towards -z)."""
    c, s = np.cos(angle), np.sin(angle)
    out = np.zeros((len(angle), 3, 3))
    out[:, 0, 0], out[:, 0, 2], out[:, 1, 1], out[:, 2, 0], out[:, 2, 2] = c, s, 1.0, -s, c
    return out


def reach_drop(pos: np.ndarray, keypoints: Sequence[str], reach_m: Mapping[str, float], fps: float) -> np.ndarray:
    """How far (T,) [m] to lower the body above the ankles so that no leg's hip-to-ankle target is
    longer than :data:`MAX_REACH` of its straight leg ``reach_m[side]``.

    Per leg and frame, the least ``dz >= 0`` with ``|h - dz e_z - a| <= R`` for hip ``h``, ankle
    ``a`` and ``R = MAX_REACH reach``: ``dz = v_z - sqrt(R^2 - |v_xy|^2)`` for ``v = h - a`` (a
    horizontal reach beyond R: lowered to the ankle's height, as near as it gets). The larger of the
    two legs, held over :data:`REACH_HOLD_S` and smoothed. A map without the hips, knees and ankles of
    both legs: zeros."""
    T = len(pos)
    need = np.zeros(T)
    for side in ("left", "right"):
        names = [f"{side}_{k}" for k in ("hip", "knee", "ankle")]
        if not all(n in keypoints for n in names) or side not in reach_m:
            return np.zeros(T)
        v = pos[:, keypoints.index(names[0])] - pos[:, keypoints.index(names[2])]
        R = MAX_REACH * reach_m[side]
        flat = np.sqrt(np.clip(R**2 - (v[:, :2] ** 2).sum(axis=1), 0.0, None))
        need = np.maximum(need, np.where(np.linalg.norm(v, axis=1) > R, v[:, 2] - flat, 0.0))
    if not need.any():
        return need
    n = max(1, int(round(REACH_HOLD_S * fps)))
    held = maximum_filter1d(need, 2 * n + 1, mode="nearest")
    return np.maximum(gaussian_filter1d(held, n / 2, mode="nearest"), 0.0)


def vertical_offsets(sole_z: np.ndarray, contacts: np.ndarray, fps: float) -> np.ndarray:
    """Per-frame downward shift (T,) [m] that puts stance soles at zero height.

    ``sole_z`` (T, F): each target sole's height above where it rests on the terrain [m]. In
    frames with a stance foot the shift is the mean height of the stance soles; across frames
    without one (flight) it is interpolated, then smoothed over :data:`OFFSET_SMOOTH_S`. A
    clip without any stance gets one shift, its lower sole's 5th height percentile. Frame by
    frame, because scaling limb by limb moves a planted foot when the posture changes.
    """
    T = len(sole_z)
    any_c = contacts.any(axis=1)
    if not any_c.any():
        return np.full(T, float(np.percentile(sole_z.min(axis=1), 5)))
    mean = (sole_z * contacts).sum(axis=1)[any_c] / contacts.sum(axis=1)[any_c]
    off = np.interp(np.arange(T), np.flatnonzero(any_c), mean)
    return gaussian_filter1d(off, OFFSET_SMOOTH_S * fps, mode="nearest") if T > 1 else off


def foot_turn(robot: RetargetRobot, targets: Targets) -> np.ndarray:
    """(T, 2) the human's foot heading change [rad] into each frame from the frame before, as the
    feet's orientation targets give it (the heading of their lateral axis), where the foot's
    heading is held (:func:`~simreal.retarget.contacts.heading_held`: its ball down in both
    frames); 0 at the first frame and elsewhere. A held stance sole turns about its ball by as
    much at most."""
    left = np.einsum("tfab,fb->tfa", targets.rotations[:, list(robot.foot_keypoints)], robot.foot_left_local)
    yaw = heading_from_left(left)[0]
    turn = np.zeros(yaw.shape)
    turn[1:] = np.where(heading_held(targets.pivot[:-1], targets.pivot[1:]), wrap_angle(np.diff(yaw, axis=0)), 0.0)
    return turn


def robot_home_sites(robot: RetargetRobot) -> tuple[np.ndarray, np.ndarray]:
    """Keypoint site positions (K, 3) [m] and orientations (K, 3, 3) in the home pose."""
    d = mujoco.MjData(robot.model)
    d.qpos[:] = robot.q_home
    mujoco.mj_kinematics(robot.model, d)
    return d.site_xpos[robot.site_ids].copy(), d.site_xmat[robot.site_ids].reshape(-1, 3, 3).copy()


def build_targets(motion: HumanMotion, robot: RetargetRobot, joint_map: Mapping[str, str] | None = None) -> Targets:
    """Scaled, oriented, contact-labelled targets for ``robot`` (see the module docstring)."""
    if motion.num_frames < 2:
        raise DataFileError(motion.source.get("path", "motion"), f"need at least 2 frames, got {motion.num_frames}")
    kp, points = human_keypoints(motion, joint_map)
    missing = [k for k in robot.keypoints if k not in kp]
    if missing:
        raise ConfigError(
            "keypoints",
            f"the robot's keypoint map uses {', '.join(missing)}, which the source "
            f"skeleton lacks (found: {', '.join(sorted(kp))}); remove them from the map "
            "or give a --joint-map",
            robot.kmap.source,
        )
    bad = [k for k in robot.keypoints if robot.rot_weights[robot.keypoint_index(k)] > 0 and k not in ORIENTED]
    if bad:
        raise ConfigError(
            f"keypoints.{bad[0]}.orientation_weight",
            f"orientation targets exist only for {', '.join(ORIENTED)}",
            robot.kmap.source,
        )
    home_pos, home_rot = robot_home_sites(robot)
    scaling = derive_scaling(kp, {k: home_pos[i] for i, k in enumerate(robot.keypoints)})
    frames = human_frames(kp, motion.fps)
    scaled = apply_scaling(kp, scaling, frames)
    T, K = motion.num_frames, len(robot.keypoints)
    pos = np.stack([scaled[k] for k in robot.keypoints], axis=1)
    reach = {
        side: scaling.robot_lengths[f"{side}_knee"] + scaling.robot_lengths[f"{side}_ankle"]
        for side in ("left", "right")
        if {f"{side}_knee", f"{side}_ankle"} <= set(scaling.robot_lengths)
    }
    drop = reach_drop(pos, robot.keypoints, reach, motion.fps)  # the body, not the feet; the knees halfway
    share = np.array(
        [0.0 if k.endswith(("_ankle", "_foot")) else 0.5 if k.endswith("_knee") else 1.0 for k in robot.keypoints]
    )
    pos[..., 2] -= drop[:, None] * share
    rots = np.broadcast_to(np.eye(3), (T, K, 3, 3)).copy()
    for i, k in enumerate(robot.keypoints):
        if k in ORIENTED:
            rots[:, i] = frames[k] @ home_rot[i]
    feet = robot.foot_keypoints
    terrain = robot.scene.height(pos[:, feet, :2], pos[:, feet, 2])
    contacts = detect_contacts(scaling.root * points, motion.fps, terrain, robot.kmap.contacts)
    pivot = pivots(scaling.root * points, motion.fps, contacts, robot.kmap.contacts)
    for f, i in enumerate(feet):  # a foot on its ball pitches as the human's does (rotation about its lateral axis)
        rots[:, i] = np.einsum(
            "tij,tjk,kl->til",
            frames[("left_foot", "right_foot")[f]],
            pitch_about_y(stance_pitch(points[:, f], contacts[:, f], motion.fps)),
            home_rot[i],
        )
    # the stance soles' lowest point rests on the terrain (a foot on its ball has its centre up)
    lift = scaling.root * (points[..., 2].mean(axis=-1) - points[..., 2].min(axis=-1))
    offset = vertical_offsets(pos[:, feet, 2] - lift - terrain - robot.sole_height, contacts, motion.fps)
    pos[..., 2] -= offset[:, None]
    pos, arm_push = clear_arms(pos, robot.keypoints, frames["pelvis"], hip_obstacles(robot), motion.fps)
    human = np.stack([kp[k] for k in robot.keypoints], axis=1)
    return Targets(
        tuple(robot.keypoints), pos, rots, human, contacts, pivot, terrain, motion.fps, scaling, offset, arm_push
    )
