"""The graded part of the quality report: per-frame checks, thresholds, frame ranges, verdict.

Each check computes one figure per clip and compares it with a warning and a failure threshold
(:data:`THRESHOLDS`, the one table; docs/retarget.md prints it). A figure above ``warn`` warns,
above ``fail`` fails; the clip's verdict is its worst check of what it emits (``ok`` / ``warn``
/ ``fail``): the checks of the input (``subject`` "input") are shown, they do not count, and
the frames the result's checks fail on are repaired or cut by :mod:`~simreal.retarget.repair`.
Every check also lists the contiguous frame ranges where it fires, with the worst value and
where it is ("frames 40-47: left_hip_yaw_joint 31.2 rad/s, human 5.9 rad/s").

Two kinds of figure:

- *peak*: the worst per-frame value over the clip; a frame range is a run of frames above
  ``warn``, failing when its worst frame is above ``fail``;
- *fraction*: the share of (relevant) frames where a per-frame condition holds; the ranges are
  the runs of frames where it holds, at the check's level.

The checks (T frames at ``fps``; velocities are backward differences ``(x_t - x_{t-1}) fps``):

``joint_speed_vs_human`` (peak, x): each robot joint's speed over the human's speed at the
  joints it moves (:func:`human_joint_speed`: for each keypoint whose site is on the joint's
  body or below, the angular speed of the human bone ending there plus its parent bone's, in
  the human's pelvis frame), the fastest over frames t-1..t+1, floored at
  :data:`HUMAN_SPEED_FLOOR_RAD_S`. Bone directions come from the human's keypoint positions,
  which cannot flip the way a derived orientation target can. A knee flexing at the human's
  pace reads about 1; a hip twisting 2 rad in a frame where the human leg turns 8 rad/s reads 4.
``joint_speed_vs_limit`` (peak, x): joint speed over the robot spec's velocity limit.
``orientation_jump_target`` / ``orientation_jump_result`` (peak, rad/s): angular speed between
  consecutive frames of the oriented keypoints' frames (orientation weight > 0: pelvis, chest,
  feet; absent when none is), in the targets and in the result. 900 deg/s is 30 deg per frame
  at 30 fps.
``foot_twist`` (peak, rad): |heading of a foot - heading of the pelvis| of the result.
  Headings come from each frame's lateral (left) axis (``body_frames.heading_from_left``), which
  stays horizontal when a foot pitches down steeply (the forward axis would degenerate there).
``hip_magnitude`` (fraction of frames): |hip yaw| or |hip roll| beyond :data:`HIP_BOUND_RAD`
  (joints named ``*hip_yaw*`` / ``*hip_roll*``; absent when the robot has none).
``support_float`` (fraction of support foot-frames): a supporting foot's lowest collision
  point more than :data:`FLOAT_M` above the terrain. A foot supports where it is labelled in
  stance, or where the human's sole is within :data:`HUMAN_SUPPORT_M` of the human's floor and
  moves slower than :data:`HUMAN_SUPPORT_SPEED_M_S` horizontally: the check does not trust the
  labels it judges. (Height alone counted swing feet skimming the floor at 1-4 m/s, 1-2 cm up,
  as support: on real walks every foot-frame it flagged was one of those, none a labelled stance.)
``support_off_target`` (peak, m): a supporting foot's (as ``support_float``) horizontal distance
  from its target, the human's foot scaled: the robot plants it somewhere else (a stance wider
  or a turn larger than its hips allow, a target out of reach). The solver trades keypoint
  errors against each other, so the keypoint error alone grades nothing; a planted foot off its
  mark moves the robot's support where the human's was not, which a tracking policy then follows.
``root_height`` (peak, m): the robot's pelvis below its (scaled) target pelvis: a crouch the
  human does not do. The pelvis height against the robot's nominal (home) height is a figure too.
``penetration`` (peak, m): the robot's deepest reach into the ground or a scene box (a planted
  foot pushed into the floor, by the solver or by a repair's bridge); self-contact is not judged.
``slack`` (fraction of frames): frames the solver solved with slack (infeasible).
``feasibility`` (fraction of frames lost): 1 - the share of frames followed in PD playback
  (:mod:`simreal.retarget.feasibility`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import mujoco
import numpy as np

from simreal.retarget import feasibility
from simreal.retarget.body_frames import heading_from_left
from simreal.retarget.collisions import KIND_NAMES
from simreal.retarget.metrics import PENETRATION_TOL_M, forward_all
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.scaling import tree_parents
from simreal.retarget.targets import Targets, robot_home_sites
from simreal.rotations import wrap_angle

LEVELS = ("ok", "warn", "fail")
HUMAN_SPEED_FLOOR_RAD_S = 2.0  # slower human bones count as this: no ratio blows up near rest
HIP_BOUND_RAD = 1.0
FLOAT_M = 0.01
HUMAN_SUPPORT_M = 0.02
# A foot sliding faster than this [m/s] carries no weight: the contact labels' stance release speed.
HUMAN_SUPPORT_SPEED_M_S = 0.5


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row of the threshold table: the figure warns above ``warn`` and fails above ``fail``."""

    kind: str  # "peak" or "fraction"
    warn: float
    fail: float
    unit: str
    meaning: str
    # What it judges: "result" (frames of the motion emitted), "input" (the targets: shown, not
    # in the verdict, which judges what is emitted) or "clip" (the result as a whole).
    subject: str = "result"
    # Which of a result check's frame ranges mark frames defective (:mod:`repair` repairs or cuts
    # them): "fail" its failing ranges, "any" all of them.
    defect: str = "fail"


DEG = np.pi / 180.0
THRESHOLDS: dict[str, Rule] = {
    "joint_speed_vs_human": Rule("peak", 2.0, 3.0, "x", "joint speed / the human's speed at the joints it moves"),
    "joint_speed_vs_limit": Rule("peak", 0.9, 1.001, "x", "joint speed / the robot's velocity limit"),
    "orientation_jump_target": Rule(
        "peak", 600 * DEG, 900 * DEG, "rad/s", "frame-to-frame turn of a target frame", subject="input"
    ),
    "orientation_jump_result": Rule("peak", 600 * DEG, 900 * DEG, "rad/s", "frame-to-frame turn of a robot frame"),
    "foot_twist": Rule("peak", 45 * DEG, 60 * DEG, "rad", "|foot heading - pelvis heading|"),
    "hip_magnitude": Rule("fraction", 0.01, 0.05, "of frames", f"|hip yaw| or |hip roll| > {HIP_BOUND_RAD} rad"),
    "support_float": Rule(
        "fraction",
        0.05,
        0.20,
        "of support foot-frames",
        f"supporting foot more than {100 * FLOAT_M:g} cm above the terrain",
    ),
    "support_off_target": Rule("peak", 0.10, 0.20, "m", "supporting foot's horizontal distance from its target"),
    "root_height": Rule("peak", 0.05, 0.10, "m", "pelvis below its target"),
    "penetration": Rule("peak", PENETRATION_TOL_M, 0.03, "m", "deepest reach into the ground or a scene box"),
    "slack": Rule("fraction", 0.0, 0.02, "of frames", "solved with slack (infeasible)", defect="any"),
    "feasibility": Rule("fraction", 0.50, 0.90, "of frames", "lost in PD playback", subject="clip"),
}


@dataclasses.dataclass(frozen=True)
class Signal:
    """A check's per-frame evidence.

    Attributes:
      value: (T,) the per-frame value (peak kind), or for the fraction kind how badly the condition
        holds (> 0: |hip angle| [rad], clearance [m], 1 for yes/no conditions) and 0 where it does not.
      where: (T,) what the value is about at each frame (a joint, a frame, a foot), for the ranges.
      figure: the clip's figure (peak: value.max(); fraction: the share of relevant frames).
      extra: further JSON-ready figures of the check.
      element: (T,) the robot joint or keypoint the value is about at each frame, or None when
        it is about the whole body; the ranges carry it (``repair`` bridges that element's limb).
    """

    value: np.ndarray
    where: Sequence[str]
    figure: float
    extra: dict
    element: Sequence[str] | None = None


def _speed(x: np.ndarray, fps: float) -> np.ndarray:
    """|backward difference| x fps (T, ...), 0 at frame 0."""
    out = np.zeros_like(x)
    out[1:] = np.abs(np.diff(x, axis=0)) * fps
    return out


def _rotation_speed(R: np.ndarray, fps: float) -> np.ndarray:
    """(T, ...) angle [rad] between consecutive rotations (T, ..., 3, 3) x fps, 0 at frame 0."""
    out = np.zeros(R.shape[:-2])
    cos = (np.einsum("t...ij,t...ij->t...", R[1:], R[:-1]) - 1.0) / 2.0  # trace(R_t^T R_{t-1}) = 1 + 2 cos
    out[1:] = np.arccos(np.clip(cos, -1.0, 1.0)) * fps
    return out


def _moved_keypoints(robot: RetargetRobot) -> list[list[int]]:
    """Per robot joint, the keypoints whose site is on the joint's body or a body below it."""
    m = robot.model
    out = []
    for adr in robot.qpos_adr:
        j = int(np.flatnonzero(m.jnt_qposadr == adr)[0])
        body = int(m.jnt_bodyid[j])
        moved = []
        for k, s in enumerate(robot.site_ids):
            b = int(m.site_bodyid[s])
            while b > 0 and b != body:
                b = int(m.body_parentid[b])
            if b == body:
                moved.append(k)
        out.append(moved)
    return out


def human_joint_speed(targets: Targets) -> np.ndarray:
    """(T, K) a bound on the human's joint speed [rad/s] at the joint above each keypoint: the
    angular speed of the bone ending at the keypoint (parent -> keypoint, :data:`scaling.PARENT`
    tree) plus that of its parent bone (the angle between two bones changes no faster than the
    two turn), both in the human's pelvis frame (the pelvis target's orientation, a fixed offset
    from it); 0 for the pelvis."""
    parents = tree_parents(targets.keypoints)
    pel = targets.keypoints.index("pelvis")
    R_pel = targets.rotations[:, pel]
    T, K = targets.human.shape[:2]
    speed = np.zeros((T, K))
    for k, name in enumerate(targets.keypoints):
        p = parents[name]
        if p is None:
            continue
        bone = targets.human[:, k] - targets.human[:, targets.keypoints.index(p)]
        u = np.einsum("tji,tj->ti", R_pel, bone)
        u /= np.maximum(np.linalg.norm(u, axis=-1, keepdims=True), 1e-9)
        speed[1:, k] = np.arccos(np.clip(np.sum(u[1:] * u[:-1], axis=-1), -1.0, 1.0)) * targets.fps
    parent_speed = np.stack(
        [speed[:, targets.keypoints.index(parents[n])] if parents[n] else np.zeros(T) for n in targets.keypoints],
        axis=1,
    )
    return speed + parent_speed


def joint_speed_signals(robot: RetargetRobot, qpos: np.ndarray, targets: Targets) -> tuple[Signal, Signal]:
    """``joint_speed_vs_human`` and ``joint_speed_vs_limit`` (see the module docstring)."""
    fps = targets.fps
    qd = _speed(qpos[:, robot.qpos_adr], fps)  # (T, n)
    padded = np.pad(human_joint_speed(targets), ((1, 1), (0, 0)), mode="edge")
    per_kp = np.maximum(np.maximum(padded[:-2], padded[1:-1]), padded[2:])  # (T, K), over frames t-1..t+1
    human = np.stack(
        [per_kp[:, moved].max(axis=1) if moved else per_kp.max(axis=1) for moved in _moved_keypoints(robot)], axis=1
    )  # (T, n)
    ratio = qd / np.maximum(human, HUMAN_SPEED_FLOOR_RAD_S)
    names = robot.joint_names
    jr = ratio.argmax(axis=1)
    t_idx = np.arange(len(qd))
    where_h = [f"{names[j]} {qd[t, j]:.1f} rad/s, human {human[t, j]:.1f} rad/s" for t, j in zip(t_idx, jr)]
    lim = qd / robot.v_max
    jl = lim.argmax(axis=1)
    where_l = [f"{names[j]} {qd[t, j]:.1f} rad/s, limit {robot.v_max[j]:g}" for t, j in zip(t_idx, jl)]
    tp, jp = np.unravel_index(qd.argmax(), qd.shape)
    extra = {
        "peak_joint_speed_rad_s": float(qd[tp, jp]),
        "peak_joint": names[jp],
        "peak_frame": int(tp),
        "human_peak_joint_speed_rad_s": float(per_kp.max()),
    }
    vs_human = Signal(ratio.max(axis=1), where_h, float(ratio.max()), extra, [names[j] for j in jr])
    vs_limit = Signal(lim.max(axis=1), where_l, float(lim.max()), {}, [names[j] for j in jl])
    return vs_human, vs_limit


def orientation_jump_signal(R: np.ndarray, names: Sequence[str], fps: float) -> Signal:
    """Peak frame-to-frame angular speed [rad/s] of frames R (T, k, 3, 3) named ``names``."""
    w = _rotation_speed(R, fps)  # (T, k)
    k = w.argmax(axis=1)
    where = [f"{names[i]} {w[t, i] / DEG / fps:.0f} deg in one frame" for t, i in enumerate(k)]
    return Signal(w.max(axis=1), where, float(w.max()), {}, [names[i] for i in k])


def foot_twist_signal(robot: RetargetRobot, site_rot: np.ndarray) -> Signal:
    """Peak |foot heading - pelvis heading| [rad] of the result (site_rot (T, nsite, 3, 3))."""
    _, home_rot = robot_home_sites(robot)
    left_world = np.array([0.0, 1.0, 0.0])

    def heading(k: int) -> np.ndarray:  # the site's axis that points left in the home pose, in the world
        return heading_from_left(site_rot[:, robot.site_ids[k]] @ (home_rot[k].T @ left_world))[0]

    pelvis = heading(robot.keypoint_index("pelvis"))
    feet = ("left_foot", "right_foot")
    twist = np.stack([np.abs(wrap_angle(heading(robot.keypoint_index(f)) - pelvis)) for f in feet], 1)
    f = twist.argmax(axis=1)
    where = [f"{feet[i]} {twist[t, i] / DEG:.0f} deg off the pelvis" for t, i in enumerate(f)]
    return Signal(twist.max(axis=1), where, float(twist.max()), {}, [feet[i] for i in f])


def hip_magnitude_signal(robot: RetargetRobot, qpos: np.ndarray) -> Signal | None:
    """Frames with |hip yaw| or |hip roll| beyond :data:`HIP_BOUND_RAD`; None without such joints."""
    cols = [i for i, n in enumerate(robot.joint_names) if "hip_yaw" in n or "hip_roll" in n]
    if not cols:
        return None
    q = np.abs(qpos[:, robot.qpos_adr[cols]])
    bad = (q > HIP_BOUND_RAD).any(axis=1)
    j = q.argmax(axis=1)
    where = [f"{robot.joint_names[cols[i]]} {qpos[t, robot.qpos_adr[cols[i]]]:+.2f} rad" for t, i in enumerate(j)]
    return Signal(
        np.where(bad, q.max(axis=1), 0.0),
        where,
        float(bad.mean()),
        {"max_abs_rad": float(q.max())},
        [robot.joint_names[cols[i]] for i in j],
    )


def foot_clearance(robot: RetargetRobot, qpos: np.ndarray) -> np.ndarray:
    """(T, 2) distance [m] from each foot's collision geoms to the world's (floor, scene boxes):
    the lowest point's height above the terrain, negative when penetrating."""
    m = robot.model
    d = mujoco.MjData(m)
    world = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0]
    out = np.empty((len(qpos), 2))
    for t in range(len(qpos)):
        d.qpos[:] = qpos[t]
        mujoco.mj_kinematics(m, d)
        for f, geoms in enumerate(robot.foot_geoms):
            out[t, f] = min(mujoco.mj_geomDistance(m, d, int(g), w, 1.0, None) for g in geoms for w in world)
    return out


FEET = ("left_foot", "right_foot")


def supporting_feet(targets: Targets) -> np.ndarray:
    """(T, 2) where each foot (:data:`FEET`) supports: labelled in stance, or the human's sole
    within :data:`HUMAN_SUPPORT_M` of the floor and slower than :data:`HUMAN_SUPPORT_SPEED_M_S`."""
    sole = targets.human[:, [targets.keypoints.index(n) for n in FEET]]  # (T, 2, 3)
    slide = np.linalg.norm(np.gradient(sole[..., :2], axis=0), axis=-1) * targets.fps if len(sole) > 1 else 0.0
    return targets.contacts | ((sole[..., 2] < HUMAN_SUPPORT_M) & (slide < HUMAN_SUPPORT_SPEED_M_S))


def support_float_signal(robot: RetargetRobot, qpos: np.ndarray, targets: Targets) -> Signal:
    """Support foot-frames floating more than :data:`FLOAT_M` (see the module docstring)."""
    support = supporting_feet(targets)
    clear = foot_clearance(robot, qpos)
    floating = support & (clear > FLOAT_M)
    n = int(support.sum())
    f = np.where(floating.any(axis=1), np.where(floating, clear, -np.inf).argmax(axis=1), 0)
    where = [f"{FEET[i]} {100 * clear[t, i]:.1f} cm up while supporting" for t, i in enumerate(f)]
    extra = {
        "support_foot_frames": n,
        "labelled_stance_foot_frames": int(targets.contacts.sum()),
        "floating_foot_frames": int(floating.sum()),
        "max_support_clearance_m": float(clear[support].max()) if n else 0.0,
    }
    worst = np.where(floating, clear, 0.0).max(axis=1)
    return Signal(worst, where, float(floating.sum() / n) if n else 0.0, extra, [FEET[i] for i in f])


def support_off_target_signal(robot: RetargetRobot, site_pos: np.ndarray, targets: Targets) -> Signal:
    """A supporting foot's horizontal distance [m] from its target (see the module docstring)."""
    feet = [robot.keypoint_index(n) for n in FEET]
    support = supporting_feet(targets)
    off = np.linalg.norm(site_pos[:, robot.site_ids[feet], :2] - targets.positions[:, feet, :2], axis=-1)
    off = np.where(support, off, 0.0)  # (T, 2)
    f = off.argmax(axis=1)
    worst = off.max(axis=1)
    where = [f"{FEET[i]} {100 * v:.0f} cm from its target while supporting" for v, i in zip(worst, f)]
    extra = {"median_m": float(np.median(off[support])) if support.any() else 0.0}
    return Signal(worst, where, float(worst.max()) if len(worst) else 0.0, extra, [FEET[i] for i in f])


def root_height_signal(robot: RetargetRobot, site_pos: np.ndarray, targets: Targets) -> Signal:
    """Pelvis below its target [m], and the pelvis height against the robot's nominal."""
    pel = robot.keypoint_index("pelvis")
    z = site_pos[:, robot.site_ids[pel], 2]
    drop = targets.positions[:, pel, 2] - z
    nominal = float(robot_home_sites(robot)[0][pel, 2])
    where = [
        f"pelvis {100 * dz:.0f} cm below its target (at {zz:.2f} m, nominal {nominal:.2f} m)" for dz, zz in zip(drop, z)
    ]
    extra = {
        "nominal_m": nominal,
        "min_m": float(z.min()),
        "max_m": float(z.max()),
        "min_ratio_to_nominal": float(z.min() / nominal),
    }
    return Signal(drop, where, float(drop.max()), extra)


def penetration_signal(depth: np.ndarray) -> Signal:
    """The robot's deepest reach into the ground or a scene box per frame [m] (``depth``:
    :func:`~simreal.retarget.metrics.forward_all`'s per-kind depths; self-contact is not judged,
    as the simulator trains without it)."""
    reach = depth[:, [KIND_NAMES.index("ground"), KIND_NAMES.index("scene")]].max(axis=1)
    where = [f"{100 * d:.1f} cm into the ground or a scene box" for d in reach]
    return Signal(reach, where, float(reach.max()), {"frames_over_1cm": int((reach > PENETRATION_TOL_M).sum())})


def slack_signal(stats: Mapping, T: int) -> Signal:
    """Frames the solver lists as infeasible (solved with slack)."""
    frames = [int(t) for t in stats.get("infeasible_frames", [])]
    bad = np.zeros(T)
    bad[frames] = 1.0
    extra = {"frames": len(frames), "max_slack": float(stats.get("infeasible_max_slack", 0.0))}
    return Signal(bad, ["solved with slack"] * T, float(bad.mean()), extra)


def feasibility_signal(pb: feasibility.Playback) -> Signal:
    """Frames lost in PD playback; the playback's figures as extras."""
    lost = ~pb.followed_mask
    reason = np.full(len(lost), "", dtype=object)
    for s, f, n, r in zip(pb.starts, pb.followed, pb.lengths, pb.reasons):
        if r:
            reason[s + f + 1 : s + n + 1] = f"lost ({r}) since frame {s + f + 1}, window from frame {s}"
    return Signal(lost.astype(float), list(reason), float(lost.mean()), pb.summary())


def frame_ranges(signal: Signal, rule: Rule, level: str) -> list[dict]:
    """Contiguous runs of frames where the check fires, each with its level, worst value and where."""
    fires = signal.value > rule.warn if rule.kind == "peak" else signal.value > 0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], fires.astype(np.int8), [0]])))
    out = []
    for a, b in zip(edges[::2], edges[1::2]):
        t = a + int(np.argmax(signal.value[a:b]))
        lvl = ("fail" if signal.value[t] > rule.fail else "warn") if rule.kind == "peak" else level
        out.append(
            {
                "frames": [int(a), int(b - 1)],
                "level": lvl,
                "value": float(signal.value[t]),
                "at": signal.where[t],
                "element": signal.element[t] if signal.element is not None else None,
            }
        )
    return out


def grade(signal: Signal, rule: Rule) -> dict:
    """One check's JSON entry: level, figure, thresholds, extras, frame ranges."""
    level = "fail" if signal.figure > rule.fail else "warn" if signal.figure > rule.warn else "ok"
    return {
        "level": level,
        "value": signal.figure,
        "warn": rule.warn,
        "fail": rule.fail,
        "unit": rule.unit,
        "kind": rule.kind,
        "meaning": rule.meaning,
        **signal.extra,
        "ranges": frame_ranges(signal, rule, level),
    }


def graded_report(
    robot: RetargetRobot,
    qpos: np.ndarray,
    targets: Targets,
    stats: Mapping,
    playback: bool = True,
    fk: tuple | None = None,
) -> dict:
    """``{"verdict": ok|warn|fail, "checks": {name: entry}}`` for one clip (module docstring).

    Args:
      robot, qpos (T, nq), targets: the retargeting's robot, result and targets.
      stats: the solver's stats (``infeasible_frames``, ``infeasible_max_slack``; absent = none).
      playback: run the PD playback (``feasibility``); a robot whose actuators are not PD servos
        gets ``checks.feasibility.skipped`` with the reason instead.
      fk: :func:`~simreal.retarget.metrics.forward_all`'s result when the caller has it already.
    """
    T, fps = len(qpos), targets.fps
    site_pos, site_rot, depth = fk if fk is not None else forward_all(robot, qpos)
    oriented = [k for k in range(len(robot.keypoints)) if robot.rot_weights[k] > 0]
    names = [robot.keypoints[k] for k in oriented]
    signals: dict[str, Signal | None] = {}
    signals["joint_speed_vs_human"], signals["joint_speed_vs_limit"] = joint_speed_signals(robot, qpos, targets)
    if oriented:  # a keypoint map may orient nothing
        signals["orientation_jump_target"] = orientation_jump_signal(targets.rotations[:, oriented], names, fps)
        signals["orientation_jump_result"] = orientation_jump_signal(site_rot[:, robot.site_ids[oriented]], names, fps)
    signals["foot_twist"] = foot_twist_signal(robot, site_rot)
    signals["hip_magnitude"] = hip_magnitude_signal(robot, qpos)
    signals["support_float"] = support_float_signal(robot, qpos, targets)
    signals["support_off_target"] = support_off_target_signal(robot, site_pos, targets)
    signals["root_height"] = root_height_signal(robot, site_pos, targets)
    signals["penetration"] = penetration_signal(depth)
    signals["slack"] = slack_signal(stats, T)
    checks: dict[str, dict] = {}
    problem = feasibility.pd_servo_problem(robot.model) if playback else "not run (playback off)"
    if problem is None:
        signals["feasibility"] = feasibility_signal(feasibility.play_back(robot, qpos, fps))
    else:
        checks["feasibility"] = {"level": "ok", "skipped": problem}
    for name, sig in signals.items():
        if sig is not None:
            checks[name] = grade(sig, THRESHOLDS[name])
    verdict = max((c["level"] for n, c in checks.items() if THRESHOLDS[n].subject != "input"), key=LEVELS.index)
    return {"verdict": verdict, "checks": {k: checks[k] for k in THRESHOLDS if k in checks}}


def verdict_lines(report: Mapping, max_ranges: int = 3) -> list[str]:
    """The verdict (``ok`` / ``warn`` / ``FAIL``) with the figures of the checks that warn or fail
    (failures first), then up to ``max_ranges`` of the worst frame ranges of each failing check."""
    checks = report["checks"]
    bad = sorted(((c["level"], n) for n, c in checks.items() if c["level"] != "ok"), key=lambda x: -LEVELS.index(x[0]))
    figs = [f"{n}{' (input)' if THRESHOLDS[n].subject == 'input' else ''} {_fmt(checks[n])}" for _, n in bad]
    lines = [
        f"verdict {report['verdict'].upper() if report['verdict'] == 'fail' else report['verdict']}"
        + (": " + "; ".join(figs) if figs else "")
    ]
    for _, n in (x for x in bad if x[0] == "fail"):
        rs = checks[n]["ranges"]
        shown = sorted(rs, key=lambda r: (-LEVELS.index(r["level"]), -r["value"]))[:max_ranges]
        for r in sorted(shown, key=lambda r: r["frames"][0]):
            a, b = r["frames"]
            lines.append(f"  {n} frames {a}-{b}: {r['at']}" if b > a else f"  {n} frame {a}: {r['at']}")
        if len(rs) > len(shown):
            lines.append(f"  {n}: {len(rs) - len(shown)} more ranges (--json)")
    return lines


def _fmt(c: Mapping) -> str:
    """A check's figure against its threshold, in its unit."""
    lim = c["fail"] if c["level"] == "fail" else c["warn"]
    rel = ">" if c["level"] != "ok" else "<="
    if c["unit"] == "rad/s" or c["unit"] == "rad":
        v, t, u = c["value"] / DEG, lim / DEG, "deg/s" if c["unit"] == "rad/s" else "deg"
        return f"{v:.0f} {u} ({rel} {t:.0f})"
    if c["kind"] == "fraction":
        return f"{100 * c['value']:.1f}% {c['unit']} ({rel} {100 * lim:g}%)"
    if c["unit"] == "m":
        return f"{100 * c['value']:.1f} cm ({rel} {100 * lim:g})"
    return f"{c['value']:.2f}{c['unit']} ({rel} {lim:g}{c['unit']})"
