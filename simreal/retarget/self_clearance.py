"""Arm targets that clear the robot's own hips.

Scaling (:mod:`scaling`) hangs each arm from the robot's shoulder in the human's directions. A
human's hand swings past its hip a few centimetres out; a robot whose hips are wider for its
shoulders than a human's has its hip motors there. H1's hip-roll motors reach 25 cm out from
its centre line, its shoulders sit at 21 cm. The solver's collision rows then hold the forearm
against the motor while the wrist target goes on through it: on a public 120 fps walk H1's
forearm caught behind its left hip motor, the wrist ended 30 cm from its target, and the elbow
folded from 1.1 to 2.4 rad at its 20 rad/s limit to get round it.

The hips are the collision geoms of the pelvis and of the bodies between it and each hip
keypoint's body (:func:`hip_obstacles`): the motor housings that turn only with hip yaw or roll
(H1's yaw and roll links, G1's pitch link), where they sit in the home pose, in the pelvis frame
(x forward, y left, z up). The hip keypoint's own body carries the thigh, which swings, and is
left out; so is the torso, which the arms hang beside in both bodies.

The forearm, from the elbow target through the wrist target to as far as the hand's geoms reach
beyond it, is sampled at points (:data:`SAMPLES`, fractions of elbow -> wrist), each needing a
clearance ``r`` (the arm's thickest geom plus :data:`CLEARANCE_M`) from every hip geom. Where
it lacks it, the arm is turned about its shoulder: the wrist target moves along a direction of
the pelvis frame by the least multiple ``delta`` of :data:`STEP_M` beyond which every sample
clears, the elbow target by ``delta |e - s| / |w - s|`` (shoulder s, elbow e, wrist w: the share
of a turn about the shoulder), so a sample at fraction ``f`` moves by ``delta (c + f (1 - c))``
with ``c`` the elbow's share. The direction (:data:`DIRECTIONS`: outwards, forwards, backwards)
is, over each run of frames that need a push, the one whose largest push times its
:data:`DIRECTION_COST` is least: a hand swinging past the hip goes round it outside (H1: 10.5 cm
outwards against 10 forwards), a hand held against the belly comes forward (3 cm against 23.5
outwards). The
push is held over +-:data:`HOLD_S` and smoothed, so the arm moves out over about 0.2 s before the
hand reaches the hip, not in a frame. A run that no direction clears within :data:`MAX_PUSH_M`
is left to the solver's collision rows.

Distances are signed and exact for spheres, capsules, cylinders and boxes; any other geom
(ellipsoid, mesh) counts as its bounding box, which errs on the side of clearance.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
from scipy.ndimage import gaussian_filter1d, maximum_filter1d

from simreal.retarget.contacts import runs
from simreal.retarget.robot import RetargetRobot, subtree_geoms

#: Gap kept between the arm's thickest geom and the hips [m].
CLEARANCE_M = 0.02
#: Resolution of the push [m] and the furthest it goes [m] (beyond it the arm is left to the solver).
STEP_M, MAX_PUSH_M = 0.005, 0.3
#: Points of the forearm checked, as fractions of elbow -> wrist (more beyond 1 where the hand reaches).
SAMPLES = (0.25, 0.5, 0.75, 1.0)
#: The push is held over +-HOLD_S [s] around each frame that needs it, then smoothed (sigma HOLD_S / 2).
HOLD_S = 0.1
PUSH_TOL_M = 1e-4  # a smoothed push below this [m] is none
SIDES = ("left", "right")
#: Directions a wrist target may be pushed, in the pelvis frame (y: outwards for the left arm,
#: mirrored for the right), in the order that wins a tie ...
DIRECTIONS = (np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0]), np.array([-1.0, 0.0, 0.0]))
#: ... and what a centimetre of push costs along each: an arm turned out keeps the human's swing,
#: one turned forward or back changes the gesture.
DIRECTION_COST = np.array([1.0, 1.5, 1.5])
CHUNK = 256  # frames per vectorised distance query


@dataclasses.dataclass(frozen=True)
class Hips:
    """The robot's hip geoms in its home pose, in the pelvis keypoint's frame (G geoms).

    Attributes:
      centre: (G, 3) geom centres [m]; rot: (G, 3, 3) geom frames (columns: the geom's axes).
      kind: (G,) 0 sphere, 1 capsule, 2 cylinder, 3 box (any other geom: its bounding box).
      size: (G, 3) radius (sphere, capsule, cylinder), half-length (capsule, cylinder) or
        half-sizes (box) [m].
      arm_radius: [m] the clearance each forearm point needs (the arm's thickest geom + CLEARANCE_M).
      bodies: the bodies whose geoms these are.
      hand_reach: how far beyond the wrist the centres of the hand's geoms lie, as a fraction of
        elbow -> wrist (0 when the wrist keypoint is the hand).
    """

    centre: np.ndarray
    rot: np.ndarray
    kind: np.ndarray
    size: np.ndarray
    arm_radius: float
    hand_reach: float
    bodies: tuple[str, ...] = ()


def _path_from(m: mujoco.MjModel, ancestor: int, body: int) -> list[int]:
    """Bodies from ``ancestor`` (included) down to ``body`` (excluded); empty if not below it."""
    path, b = [], int(m.body_parentid[body])
    while b > 0 and b != ancestor:
        path.append(b)
        b = int(m.body_parentid[b])
    return [ancestor, *path] if b == ancestor else []


def hip_obstacles(robot: RetargetRobot) -> Hips | None:
    """The robot's hips and its arms' size (module docstring), or None when its keypoint map
    lacks the pelvis or a hip, shoulder, elbow or wrist, or no hip geom exists."""
    need = {"pelvis", *(f"{s}_{k}" for s in SIDES for k in ("hip", "shoulder", "elbow", "wrist"))}
    if not need <= set(robot.keypoints):
        return None
    model, robot_geoms = robot.model, robot.robot_geoms
    sites = {k: int(robot.site_ids[i]) for i, k in enumerate(robot.keypoints)}
    d = mujoco.MjData(model)
    d.qpos[:] = robot.q_home
    mujoco.mj_kinematics(model, d)
    pelvis_body = int(model.site_bodyid[sites["pelvis"]])
    bodies = {b for s in SIDES for b in _path_from(model, pelvis_body, int(model.site_bodyid[sites[f"{s}_hip"]]))}
    geoms = [int(g) for g in robot_geoms if int(model.geom_bodyid[g]) in bodies]
    if not geoms:
        return None
    origin = d.site_xpos[sites["pelvis"]]
    kinds = {
        int(mujoco.mjtGeom.mjGEOM_SPHERE): 0,
        int(mujoco.mjtGeom.mjGEOM_CAPSULE): 1,
        int(mujoco.mjtGeom.mjGEOM_CYLINDER): 2,
    }
    centre, rot, kind, size = [], [], [], []
    for g in geoms:
        R = d.geom_xmat[g].reshape(3, 3)
        k = kinds.get(int(model.geom_type[g]), 3)
        if k == 3:  # a box, or anything else as its bounding box (centre and half-sizes in the geom's frame)
            centre.append(d.geom_xpos[g] + R @ model.geom_aabb[g, :3] - origin)
            size.append(model.geom_aabb[g, 3:].copy())
        else:
            centre.append(d.geom_xpos[g] - origin)
            size.append(np.array([model.geom_size[g, 0], model.geom_size[g, 1] if k else 0.0, 0.0]))
        rot.append(R)
        kind.append(k)
    thick, reach = 0.0, 0.0
    for s in SIDES:
        e, w = d.site_xpos[sites[f"{s}_elbow"]], d.site_xpos[sites[f"{s}_wrist"]]
        axis = (w - e) / max(np.linalg.norm(w - e), 1e-9)
        for g in subtree_geoms(model, sites[f"{s}_elbow"], robot_geoms):  # the forearm and hand
            thick = max(
                thick,
                float(
                    model.geom_rbound[g]
                    if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE
                    else model.geom_size[g, 0]
                ),
            )
        for g in subtree_geoms(model, sites[f"{s}_wrist"], robot_geoms):  # the hand
            reach = max(reach, float((d.geom_xpos[g] - w) @ axis) / max(float(np.linalg.norm(w - e)), 1e-9))
    return Hips(
        np.array(centre),
        np.array(rot),
        np.array(kind),
        np.array(size),
        thick + CLEARANCE_M,
        reach,
        tuple(model.body(b).name for b in sorted(bodies)),
    )


def signed_distance(points: np.ndarray, hips: Hips) -> np.ndarray:
    """(..., G) signed distance [m] from points (..., 3) in the pelvis frame to each hip geom's
    surface, negative inside."""
    local = np.einsum("gab,...ga->...gb", hips.rot, points[..., None, :] - hips.centre)  # (..., G, 3)
    r, h = hips.size[:, 0], hips.size[:, 1]
    along = np.clip(local[..., 2], -h, h)
    seg = local.copy()
    seg[..., 2] -= along
    round_d = np.linalg.norm(seg, axis=-1) - r  # sphere (h = 0) and capsule
    radial = np.linalg.norm(local[..., :2], axis=-1) - r
    cyl = _box_like(np.stack([radial, np.abs(local[..., 2]) - h], axis=-1))
    box = _box_like(np.abs(local) - hips.size)
    return np.where(hips.kind <= 1, round_d, np.where(hips.kind == 2, cyl, box))


def _box_like(q: np.ndarray) -> np.ndarray:
    """Signed distance from per-axis excesses (..., n): outside the norm of the positive parts,
    inside the largest (negative) one."""
    return np.linalg.norm(np.maximum(q, 0.0), axis=-1) + np.minimum(q.max(axis=-1), 0.0)


def _least_push(points: np.ndarray, moved: np.ndarray, direction: np.ndarray, hips: Hips) -> np.ndarray:
    """(T,) the least wrist push [m] along ``direction`` (3,) beyond which every sample point
    (T, S, 3), moving ``moved`` (T, S) per unit of push, clears the hips; 0 where they clear
    unpushed, inf where none within :data:`MAX_PUSH_M` does."""
    steps = np.arange(int(round(MAX_PUSH_M / STEP_M)) + 1) * STEP_M  # (N,)
    blocked = np.zeros((len(points), len(steps)), dtype=bool)
    for a in range(0, len(points), CHUNK):  # (chunk, N, S, G, 3) intermediates: bounded memory on long clips
        trial = (
            points[a : a + CHUNK, None] + (steps[None, :, None] * moved[a : a + CHUNK, None, :])[..., None] * direction
        )
        blocked[a : a + CHUNK] = (signed_distance(trial, hips) < hips.arm_radius).any(axis=(-1, -2))
    last = len(steps) - 1 - np.argmax(blocked[:, ::-1], axis=1)  # the last blocked step (where any is)
    push = np.where(last + 1 < len(steps), steps[np.minimum(last + 1, len(steps) - 1)], np.inf)
    return np.where(blocked[:, 0], push, 0.0)


def arm_pushes(
    shoulder: np.ndarray, elbow: np.ndarray, wrist: np.ndarray, side_sign: float, hips: Hips, fps: float
) -> tuple[np.ndarray, np.ndarray]:
    """The push (T, 3) [m] of one arm's wrist target, in the pelvis frame, and the elbow's share
    (T,) of it.

    ``shoulder``, ``elbow``, ``wrist``: (T, 3) targets in the pelvis frame; ``side_sign`` +1 for the
    left arm (outwards is +y), -1 for the right (module docstring)."""
    share = np.linalg.norm(elbow - shoulder, axis=-1) / np.maximum(np.linalg.norm(wrist - shoulder, axis=-1), 1e-9)
    share = np.clip(share, 0.0, 1.0)
    fractions = np.array([*SAMPLES, *([1.0 + hips.hand_reach] if hips.hand_reach > 0 else [])])
    points = elbow[:, None] + fractions[:, None] * (wrist - elbow)[:, None]  # (T, S, 3)
    moved = share[:, None] + fractions * (1.0 - share[:, None])  # (T, S): per unit of wrist push
    mirror = np.array([1.0, side_sign, 1.0])
    need = np.stack([_least_push(points, moved, d * mirror, hips) for d in DIRECTIONS], axis=1)  # (T, D)
    per_dir = np.zeros_like(need)
    for a, b, on in runs(need[:, 0] > 0):
        best = int(np.argmin(need[a:b].max(axis=0) * DIRECTION_COST))  # the first of equals
        if on and np.isfinite(need[a:b, best]).all():
            per_dir[a:b, best] = need[a:b, best]
    n = max(1, int(round(HOLD_S * fps)))
    for d in range(len(DIRECTIONS)):
        if per_dir[:, d].any():
            smooth = gaussian_filter1d(
                maximum_filter1d(per_dir[:, d], 2 * n + 1, mode="nearest"), n / 2, mode="nearest"
            )
            per_dir[:, d] = np.where(smooth > PUSH_TOL_M, smooth, 0.0)  # the Gaussian's far tails
    return per_dir @ (np.array(DIRECTIONS) * mirror), share


def clear_arms(
    pos: np.ndarray, keypoints: tuple[str, ...], pelvis_frames: np.ndarray, hips: Hips | None, fps: float
) -> tuple[np.ndarray, np.ndarray]:
    """Targets (T, K, 3) [m] with the elbows and wrists moved clear of the robot's hips, and how
    far the wrists were pushed (T, 2) [m] (left, right); ``pelvis_frames`` (T, 3, 3) map the pelvis frame to
    the world. Without hips (:func:`hip_obstacles` None) the targets are returned as they are."""
    pushes = np.zeros((len(pos), 2))
    if hips is None:
        return pos, pushes
    out = pos.copy()
    pelvis = pos[:, keypoints.index("pelvis")]
    for i, side in enumerate(SIDES):
        sign = 1.0 if side == "left" else -1.0
        k = {j: keypoints.index(f"{side}_{j}") for j in ("shoulder", "elbow", "wrist")}  # all mapped, or no hips
        local = {j: np.einsum("tab,ta->tb", pelvis_frames, pos[:, idx] - pelvis) for j, idx in k.items()}
        push, share = arm_pushes(local["shoulder"], local["elbow"], local["wrist"], sign, hips, fps)
        world = np.einsum("tab,tb->ta", pelvis_frames, push)  # (T, 3)
        out[:, k["wrist"]] += world
        out[:, k["elbow"]] += share[:, None] * world
        pushes[:, i] = np.linalg.norm(push, axis=-1)
    return out, pushes
