"""The quality report: the same physical checks for every method, per clip.

- penetration: frames where any geom pair (ground, scene, self) penetrates deeper than
  ``PENETRATION_TOL_M`` (1 cm), per kind and overall, and the deepest penetration [m];
- foot slide: stance foot-frames (the foot in stance in this frame and the previous one)
  whose pinned sole edge (``RetargetRobot.pinned_local``: the front edge, or the back edge of a
  foot on its heel), or the heel of a sole whose ball was down in both frames (flat or on the
  ball, one turning about its ball further than the human's foot turns), moves faster than
  ``SLIDE_TOL_M_S`` (0.1 m/s) horizontally, and the fastest slide [m/s]. A speed, not a
  distance per frame: 1 cm a frame was 0.3 m/s at 30 fps and 1.2 m/s at 120 fps, where a real
  walk's foot slid at 0.27 m/s and read 0%;
- stance feet: the largest tilt [rad] of a flat stance sole (one on an edge pitches) and the
  largest and smallest height above the terrain [m] of a stance foot's pinned edge;
- limits: (frame, joint) entries beyond the position limits or velocity limits (velocity as
  the backward difference ``(q_t - q_{t-1}) fps``), with the largest excess;
- keypoint error after scaling: site-to-target distance [m], mean and max;
- jitter: mean absolute joint acceleration [rad/s^2] (second differences).

Tolerances: a limit counts as violated beyond 1e-6 rad (or rad/s), far below any physical
effect; that is the solver's numerical precision, not slack.

These are measurements; :mod:`simreal.retarget.checks` grades a clip (thresholds, frame ranges,
the ok / warn / fail verdict, PD playback) and adds its ``verdict`` and ``checks`` to the report.
"""

from __future__ import annotations

import mujoco
import numpy as np

from simreal.retarget import collisions
from simreal.retarget.contacts import FLAT, heading_held, swivel_excess
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.targets import Targets, foot_turn

PENETRATION_TOL_M = 0.01
SLIDE_TOL_M_S = 0.1
LIMIT_TOL = 1e-6


def forward_all(robot: RetargetRobot, qpos: np.ndarray):
    """Per frame: site positions (T, nsite, 3), site rotations (T, nsite, 3, 3), deepest
    penetration per kind (T, 3) [m]."""
    m = robot.model
    d = mujoco.MjData(m)
    T = len(qpos)
    site_pos = np.empty((T, m.nsite, 3))
    site_rot = np.empty((T, m.nsite, 3, 3))
    depth = np.zeros((T, 3))
    for t in range(T):
        d.qpos[:] = qpos[t]
        mujoco.mj_kinematics(m, d)
        site_pos[t] = d.site_xpos
        site_rot[t] = d.site_xmat.reshape(-1, 3, 3)
        depth[t] = collisions.deepest_by_kind(collisions.contacts(m, d, robot.floor_geom, with_jacobian=False))
    return site_pos, site_rot, depth


def sole_steps(
    robot: RetargetRobot, site_pos: np.ndarray, site_rot: np.ndarray, pivot: np.ndarray, turn: np.ndarray
) -> np.ndarray:
    """(T-1, 2) horizontal move [m] from frame t to t+1 of the sole edge each foot is pinned at in
    frame t+1 (``RetargetRobot.pinned_local`` of ``pivot`` (T, 2)), both frames measured at that
    edge, so a foot rolling from its heel onto its ball is not read as a slide; for a sole whose
    heading is held (:func:`~simreal.retarget.contacts.heading_held`: its ball down in both frames),
    the larger of that and its heel's move across the foot beyond what the human's foot turn
    ``turn`` (T, 2) (:func:`~simreal.retarget.targets.foot_turn`) allows
    (:func:`~simreal.retarget.contacts.swivel_excess`): a foot turning about its pinned ball
    further than the human's slides at the heel."""
    local = robot.pinned_local(pivot[1:])
    after = robot.ball_points(site_pos[1:], site_rot[1:], local)
    before = robot.ball_points(site_pos[:-1], site_rot[:-1], local)
    step = np.linalg.norm(after[..., :2] - before[..., :2], axis=-1)
    ball = robot.ball_points(site_pos, site_rot, robot.ball_local)[..., :2]
    heel = robot.ball_points(site_pos, site_rot, robot.heel_local)[..., :2]
    left = np.einsum("tfab,fb->tfa", site_rot[1:, robot.foot_sites], robot.foot_left_local)
    swivel = swivel_excess(ball[:-1], heel[:-1], heel[1:], left, turn[1:])
    return np.where(heading_held(pivot[:-1], pivot[1:]), np.maximum(step, swivel), step)


def quality_report(robot: RetargetRobot, qpos: np.ndarray, targets: Targets, fk: tuple | None = None) -> dict:
    """Every metric of the module docstring as a JSON-ready dict; ``fk``: :func:`forward_all`'s
    result when the caller has it already (the pipeline shares it with the graded report)."""
    T = len(qpos)
    fps = targets.fps
    site_pos, site_rot, depth = fk if fk is not None else forward_all(robot, qpos)
    pen = {}
    for k, name in enumerate(collisions.KIND_NAMES):
        bad = depth[:, k] > PENETRATION_TOL_M
        pen[name] = {"frames_over_1cm": int(bad.sum()), "deepest_m": float(depth[:, k].max())}
    worst = depth.max(axis=1)
    pen["any"] = {
        "frames_over_1cm": int((worst > PENETRATION_TOL_M).sum()),
        "fraction": float((worst > PENETRATION_TOL_M).mean()),
        "deepest_m": float(worst.max()),
    }

    pinned = robot.ball_points(site_pos, site_rot, robot.pinned_local(targets.pivot))  # (T, 2, 3)
    stance_pairs = targets.contacts[1:] & targets.contacts[:-1]
    steps = sole_steps(robot, site_pos, site_rot, targets.pivot, foot_turn(robot, targets))
    slides = steps[stance_pairs] * fps  # [m/s]
    n_stance = int(stance_pairs.sum())
    up = np.einsum("tfab,fb->tfa", site_rot[:, robot.foot_sites], robot.foot_up_local)
    tilt = np.arccos(np.clip(up[..., 2], -1.0, 1.0))[targets.contacts & (targets.pivot == FLAT)]
    height = (pinned[..., 2] - robot.scene.height(pinned[..., :2], pinned[..., 2]))[targets.contacts]
    slide = {
        "stance_foot_frames": n_stance,
        "sliding": int((slides > SLIDE_TOL_M_S).sum()),
        "fraction": float((slides > SLIDE_TOL_M_S).mean()) if n_stance else 0.0,
        "max_m_s": float(slides.max()) if n_stance else 0.0,
    }
    stance = {
        "max_tilt_rad": float(tilt.max()) if tilt.size else 0.0,
        "max_height_m": float(height.max()) if height.size else 0.0,
        "min_height_m": float(height.min()) if height.size else 0.0,
    }

    q = qpos[:, robot.qpos_adr]
    over = np.maximum(q - robot.q_upper, robot.q_lower - q)
    vel = np.diff(q, axis=0) * fps
    v_over = np.abs(vel) - robot.v_max
    limits = {
        "position_violations": int((over > LIMIT_TOL).sum()),
        "position_max_excess_rad": float(max(over.max(), 0.0)),
        "velocity_violations": int((v_over > LIMIT_TOL).sum()),
        "velocity_max_excess_rad_s": float(max(v_over.max(), 0.0)) if len(v_over) else 0.0,
    }

    err = np.linalg.norm(site_pos[:, robot.site_ids] - targets.positions, axis=-1)
    acc = np.diff(q, n=2, axis=0) * fps**2 if T > 2 else np.zeros((1, q.shape[1]))
    return {
        "frames": T,
        "fps": fps,
        "penetration": pen,
        "foot_slide": slide,
        "stance_feet": stance,
        "limits": limits,
        "keypoint_error_m": {
            "mean": float(err.mean()),
            "max": float(err.max()),
            "per_keypoint_mean": {k: float(e) for k, e in zip(robot.keypoints, err.mean(0))},
        },
        "jitter_rad_s2": float(np.abs(acc).mean()),
    }


def summary_line(q: dict) -> str:
    """One line of the headline numbers, for the CLI."""
    p, s, lim, k = q["penetration"], q["foot_slide"], q["limits"], q["keypoint_error_m"]
    return (
        f"penetration>1cm {p['any']['frames_over_1cm']}/{q['frames']} frames "
        f"(ground {p['ground']['frames_over_1cm']}, scene {p['scene']['frames_over_1cm']}, "
        f"self {p['self']['frames_over_1cm']}; deepest {100 * p['any']['deepest_m']:.1f} cm) | "
        f"slide>{SLIDE_TOL_M_S:g}m/s {s['sliding']}/{s['stance_foot_frames']} stance ({100 * s['fraction']:.1f}%) | "
        f"limit violations pos {lim['position_violations']} vel {lim['velocity_violations']} | "
        f"keypoint err {100 * k['mean']:.1f}/{100 * k['max']:.1f} cm | jitter {q['jitter_rad_s2']:.1f} rad/s^2"
    )
