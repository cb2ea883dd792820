"""Frames the quality report fails on are repaired or cut, never emitted as they are.

A result frame is *defective* where a check of the result (``checks.THRESHOLDS``, column
``defect``) has a failing frame range there (a joint spinning faster than the human's, a
robot frame turning 40 degrees in a frame, a foot twisted off the pelvis, a floating support
foot, a crouch), and wherever the solver needed slack. Checks of the input (the targets' own
orientation jumps) and of the whole clip (PD playback) mark nothing.

Modes (``simreal retarget --defects``):

``repair`` (default)
  The defective frames, widened by ``margin_s`` on each side, form ranges. A range inside the
  clip, no longer than ``max_repair_s``, gets new angles for the joints of the defects'
  elements (:func:`limb`: a joint and those below it, or every joint that turns a keypoint's
  frame; all joints for a whole-body defect such as slack): the cubic Hermite between its
  neighbours ``a - 1`` and ``b + 1``, with their positions and their outer one-sided velocities
  (``q[a-1] - q[a-2]`` and ``q[b+2] - q[b+1]`` per frame), so the joints are C1 across both seams;
  the result is clamped to the joint limits. The root keeps its retargeted path (it tracks the
  human's pelvis, which no result check flags). A bridge that would move a planted sole faster
  than ``SLIDE_TOL_M_S`` (0.1 m/s) is not made: that range is cut instead (a cubic cannot
  follow a leg through a landing, and joints bridged under a moving pelvis drag the foot). Nor
  is one that puts the robot into itself deeper than ``PENETRATION_TOL_M`` (1 cm) and than the
  solver's own frames there: the cubic knows no collision, and the report does not judge
  self-contact (an H1's bridged elbow went 7 cm into its hip on a real walk). The repaired clip is judged again; what is
  still defective, plus the ranges too long or touching the clip's ends, is cut.
``cut``
  The defective frames are cut.
``keep``
  Nothing changes; the report flags the frames (the behaviour before this module).

Cutting splits the clip into the parts between the cuts; parts shorter than ``min_part_s`` are
dropped (too short to track), every other part is judged on its own and cut again while it
still has defects (at most :data:`MAX_ROUNDS` rounds: a part's fraction checks can fail where
the whole clip's did not). Each part's report records what was repaired and cut, in the source
clip's frame numbers, and the frames of the source it covers.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.retarget.checks import THRESHOLDS
from simreal.retarget.collisions import SELF
from simreal.retarget.contacts import runs
from simreal.retarget.metrics import PENETRATION_TOL_M, SLIDE_TOL_M_S, forward_all, sole_steps
from simreal.retarget.pipeline import RetargetResult, assess
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.targets import foot_turn

MODES = ("repair", "cut", "keep")
MAX_ROUNDS = 3


@dataclasses.dataclass(frozen=True)
class DefectConfig:
    """What to do with defective frames (see the module docstring).

    Attributes:
      mode: ``repair``, ``cut`` or ``keep``.
      margin_s: the defective frames' widening on each side before a repair [s].
      max_repair_s: the longest range a repair bridges [s]; longer ranges are cut.
      min_part_s: parts shorter than this after cutting are dropped [s].
    """

    mode: str = "repair"
    margin_s: float = 0.05
    max_repair_s: float = 0.5
    min_part_s: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError("defects", f"expected one of {', '.join(MODES)}, got {self.mode!r}")


@dataclasses.dataclass(frozen=True)
class Part:
    """One emitted piece of a clip: its source frames ``first .. last`` and its judged result."""

    first: int
    last: int
    result: RetargetResult


def limb(robot: RetargetRobot, element: str | None) -> np.ndarray:
    """(n,) the actuated joints a defect of ``element`` asks to change: for a joint, the joint
    and every joint below it; for a keypoint (a frame on a body), every joint on the path from
    the root to its body (they all turn it) and below it; every joint for None (the whole body)
    or a name the robot lacks."""
    m = robot.model
    n = len(robot.joint_names)
    ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in robot.joint_names]
    bodies = [int(m.jnt_bodyid[j]) for j in ids]

    def ancestors(b: int) -> set[int]:
        out = {b}
        while b > 0:
            b = int(m.body_parentid[b])
            out.add(b)
        return out

    if element in robot.joint_names:
        body, path = bodies[robot.joint_names.index(element)], set()
    elif element in robot.keypoints:
        body = int(m.site_bodyid[robot.site_ids[robot.keypoint_index(element)]])
        path = ancestors(body)
    else:
        return np.ones(n, dtype=bool)
    return np.array([b in path or body in ancestors(b) for b in bodies], dtype=bool)


def defects(report: dict, robot: RetargetRobot, T: int) -> tuple[np.ndarray, dict[str, list[list[int]]]]:
    """(T, n) the joints of each frame a defect asks to change (the :func:`limb` of the element
    each defective range is about) and, per check, its defective ranges ``[first, last]``
    (inclusive), by the ``subject`` and ``defect`` columns of the threshold table. A frame is
    defective where any of its joints is marked."""
    joints = np.zeros((T, len(robot.joint_names)), dtype=bool)
    why: dict[str, list[list[int]]] = {}
    for name, check in report["checks"].items():
        rule = THRESHOLDS[name]
        if rule.subject != "result":
            continue
        for r in check.get("ranges", []):
            if rule.defect == "any" or r["level"] == "fail":
                a, b = r["frames"]
                joints[a : b + 1] |= limb(robot, r.get("element"))
                why.setdefault(name, []).append([a, b])
    return joints, why


def hermite_bridge(q: np.ndarray, a: int, b: int) -> np.ndarray:
    """``q`` (T, n) with rows ``a .. b`` replaced by the cubic Hermite from row ``a - 1`` to row
    ``b + 1``: ``p(s) = h00 p0 + h10 H m0 + h01 p1 + h11 H m1``, ``s`` in [0, 1] over ``H = b - a + 2``
    frames, the end slopes ``m0 = q[a-1] - q[a-2]`` and ``m1 = q[b+2] - q[b+1]`` per frame (one-sided,
    from outside the range; zero where the clip ends). Needs ``1 <= a <= b <= T - 2``."""
    T = len(q)
    p0, p1 = q[a - 1], q[b + 1]
    m0 = q[a - 1] - q[a - 2] if a >= 2 else np.zeros_like(p0)
    m1 = q[b + 2] - q[b + 1] if b + 2 < T else np.zeros_like(p1)
    H = b - a + 2
    s = (np.arange(a, b + 1) - (a - 1))[:, None] / H
    h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
    h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
    out = q.copy()
    out[a : b + 1] = h00 * p0 + h10 * H * m0 + h01 * p1 + h11 * H * m1
    return out


def _sub_stats(stats: dict, first: int, stop: int, dropped: np.ndarray | None = None) -> dict:
    """The solver's stats for frames ``first .. stop - 1`` (re-numbered), less the ``dropped``
    frames (repaired: no longer the solver's output)."""
    keep = [t for t in stats.get("infeasible_frames", []) if first <= t < stop and (dropped is None or not dropped[t])]
    return {**stats, "infeasible_frames": [t - first for t in keep]}


def _bridge_fault(
    robot: RetargetRobot,
    bridged: np.ndarray,
    solved: np.ndarray,
    contacts: np.ndarray,
    pivot: np.ndarray,
    turn: np.ndarray,
    fps: float,
) -> bool:
    """Whether a bridge (frames ``bridged``, the same frames as solved ``solved``, with their
    stance ``contacts``, ``pivot`` and human foot ``turn``, at ``fps`` [Hz]) must not be made: a
    stance foot's pinned sole edge (or a held one's heel turning further than the human's foot,
    :func:`~simreal.retarget.metrics.sole_steps`) moves faster than ``SLIDE_TOL_M_S`` between
    two frames in stance, or the robot reaches into itself deeper than ``PENETRATION_TOL_M`` and
    than in the solved frames."""
    site_pos, site_rot, depth = forward_all(robot, bridged)
    step = sole_steps(robot, site_pos, site_rot, pivot, turn)
    held = contacts[1:] & contacts[:-1]
    if held.any() and step[held].max() * fps > SLIDE_TOL_M_S:
        return True
    into_self = depth[:, SELF].max()
    return bool(into_self > PENETRATION_TOL_M and into_self > forward_all(robot, solved)[2][:, SELF].max())


def _repair(
    robot: RetargetRobot, result: RetargetResult, joints: np.ndarray, cfg: DefectConfig
) -> tuple[RetargetResult, np.ndarray, list[list[int]]]:
    """Bridge the marked joints (T, n) over every short interior defective range; returns the
    re-judged result, the frames that must be cut whatever the re-judging says (ranges too long,
    at the clip's ends, or whose bridge would drag a planted foot or reach into the robot), and the
    repaired ranges."""
    T, fps = len(result.qpos), result.targets.fps
    bad: np.ndarray = joints.any(axis=1)  # type: ignore[assignment]  # (T,): numpy's stub allows np.bool
    margin = max(1, int(round(cfg.margin_s * fps)))
    wide = np.convolve(bad, np.ones(2 * margin + 1), mode="same") > 0
    qpos, must_cut = result.qpos.copy(), np.zeros(T, dtype=bool)
    repaired, bridged = [], np.zeros(T, dtype=bool)
    adr = robot.qpos_adr
    tg = result.targets
    turn = foot_turn(robot, tg)
    for a, stop, v in runs(wide):
        if not v:
            continue
        b = stop - 1
        if a < 1 or b > T - 2 or (b - a + 1) / fps > cfg.max_repair_s:
            must_cut[a:stop] = bad[a:stop]
            continue
        cols = adr[joints[a:stop].any(axis=0)]
        trial = qpos.copy()
        lo, hi = robot.q_lower[joints[a:stop].any(axis=0)], robot.q_upper[joints[a:stop].any(axis=0)]
        trial[:, cols] = np.clip(hermite_bridge(qpos[:, cols], a, b), lo, hi)
        around = slice(a - 1, b + 2)
        if _bridge_fault(robot, trial[around], qpos[around], tg.contacts[around], tg.pivot[around], turn[around], fps):
            must_cut[a:stop] = bad[a:stop]
            continue
        qpos = trial
        bridged[a:stop] = True
        repaired.append([a, b])
    if not repaired:
        return result, must_cut, repaired
    stats = _sub_stats(result.stats, 0, T, dropped=bridged)
    return assess(robot, qpos, result.targets, stats, result.motion.provenance), must_cut, repaired


def _split(
    robot: RetargetRobot,
    result: RetargetResult,
    cut: np.ndarray,
    offset: int,
    cfg: DefectConfig,
    record: dict,
    rounds: int,
) -> list[Part]:
    """The parts of ``result`` between the ``cut`` frames (some frame is cut), each judged on its
    own and cut again while it has defects; ``offset`` is the source frame of ``result``'s first
    frame."""
    fps = result.targets.fps
    parts: list[Part] = []
    for a, stop, is_cut in runs(cut):
        span = [offset + a, offset + stop - 1]
        if is_cut:
            record["cut"].append(span)
            continue
        if (stop - a) / fps < cfg.min_part_s:
            record["dropped"].append(span)
            continue
        part = assess(
            robot,
            result.qpos[a:stop],
            result.targets.frames(a, stop),
            _sub_stats(result.stats, a, stop),
            dict(result.motion.provenance),
        )
        bad: np.ndarray = defects(part.motion.quality, robot, stop - a)[0].any(axis=1)  # type: ignore[assignment]  # (T,): numpy's stub allows np.bool
        if bad.any() and rounds < MAX_ROUNDS:
            parts += _split(robot, part, bad, offset + a, cfg, record, rounds + 1)
        else:
            parts.append(Part(offset + a, offset + stop - 1, part))
    return parts


def fix_defects(
    robot: RetargetRobot, result: RetargetResult, cfg: DefectConfig = DefectConfig()
) -> tuple[list[Part], dict]:
    """Repair or cut ``result``'s defective frames (module docstring).

    Returns:
      parts: the emitted pieces in source order (one covering the whole clip when nothing is
        defective or the mode is ``keep``; none when no part is long enough).
      record: JSON-ready ``{"mode", "defective_frames", "why": {check: ranges}, "repaired",
        "cut", "dropped"}`` (frame ranges ``[first, last]`` of the source clip), also stored in
        every part's report under ``defects``.
    """
    T = len(result.qpos)
    joints, why = defects(result.motion.quality, robot, T)
    bad: np.ndarray = joints.any(axis=1)  # type: ignore[assignment]  # (T,): numpy's stub allows np.bool
    record = {
        "mode": cfg.mode,
        "defective_frames": int(bad.sum()),
        "why": why,
        "repaired": [],
        "cut": [],
        "dropped": [],
    }
    if cfg.mode == "keep" or not bad.any():
        parts = [Part(0, T - 1, result)]
    else:
        if cfg.mode == "repair":
            result, must_cut, record["repaired"] = _repair(robot, result, joints, cfg)
            bad = defects(result.motion.quality, robot, T)[0].any(axis=1) | must_cut
        parts = _split(robot, result, bad, 0, cfg, record, rounds=1) if bad.any() else [Part(0, T - 1, result)]
    for p in parts:
        p.result.motion.quality["defects"] = record
        p.result.motion.provenance["source_frames"] = [p.first, p.last]
    return parts, record
