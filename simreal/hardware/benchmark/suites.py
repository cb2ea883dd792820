"""Benchmark suites: what a trial runs and how its success is detected, one table entry each.

Every suite serves one robot family, runs for a default duration, and judges a trial from
its recording (control-rate samples of robot-state keys, ``t`` [s] from the hand-over: the
twin's true state, a real robot's measured state) and the task inputs it ran with:

==================  =========  ====================================================================
suite               family     success / metrics
==================  =========  ====================================================================
quadrotor-hover     quadrotor  every position within ``success_radius_m`` (0.1 m) of the target from
                               ``settle_time_s`` (2 s) on, never on the ground, never beyond the
                               deploy config's geofence / position RMSE and max error after settling
quadrotor-figure8   quadrotor  position RMSE to the bundle's figure-8 reference after settling below
                               ``success_radius_m`` (0.15 m), never on the ground or beyond the
                               geofence / RMSE, max error
humanoid-walk       humanoid   no fall (:func:`simreal.deploy.sim_gate.fall_time`: base below half
                               its start height or tilted past 60 deg) / base velocity tracking RMSE
                               |cmd_xy - v_b,xy| and yaw-rate RMSE after 1 s, fall time, mean speed;
                               conditions: commanded forward speeds (0, 0.5, 1.0 m/s)
humanoid-track      humanoid   no fall and joint RMSE to the reference motion below 0.3 rad / joint
                               RMSE, root tilt RMSE (gravity in the body frame vs the reference's)
arm-reach           arm        end effector within ``success_radius_m`` (0.05 m) of the goal at the
                               end / final and closest distance, cycle time
arm-push, arm-pick  arm        the object within ``success_radius_m`` of the goal at the end / as
                               arm-reach, for the object
==================  =========  ====================================================================

Tolerances are the task's own (``task_config`` of a bundle that records its task) with the
task's defaults above otherwise. Cycle time: when the tracked point entered the tolerance for
the last time, i.e. stayed there until the end [s]. A suite refuses a bundle it cannot judge in
one line naming the bundle field (another family, no reference figure-8 or one where a fixed
target is judged, no motion reference, no goal). Imports numpy and simreal core only: the
detectors run on a robot's host too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from simreal.bundle import Bundle
from simreal.deploy.sim_gate import fall_time
from simreal.deploy.sim_loop import SimLoopConfig, geofence_excess, ground_index, hover_metrics
from simreal.errors import BundleError, UnknownNameError
from simreal.observations import gravity_b
from simreal.robot_spec import RobotSpec
from simreal.rotations import rotate_inv

Trajectory = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Condition:
    """One setting trials are repeated under: a name and the task inputs it sets (robot-state keys)."""

    name: str
    task: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TrialData:
    """What a detector sees of one trial."""

    traj: Trajectory  # "t" [s] from the hand-over, plus robot-state keys (T, ...)
    task: Mapping[str, np.ndarray]  # the task inputs the trial ran with (target_pos_w, command)
    bundle: Bundle
    spec: RobotSpec
    fence_m: tuple[np.ndarray, np.ndarray]  # the deploy config's geofence box (lo, hi), world [m]
    duration_s: float
    period_s: float  # control period [s]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A detector's answer: success, the suite's metrics (None where undefined) and why it failed."""

    success: bool
    metrics: dict[str, float | None]
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Suite:
    """A benchmark suite (see module docstring).

    Attributes:
      needs: recorded state keys the detector reads (``ee_pos_w`` may be computed from joints).
      task_inputs: task inputs (robot-state keys) a trial needs, from the bundle, the twin's
        start episode, the condition or the command line.
      duration_s: the default trial length for a bundle [s].
      check: raises BundleError for a bundle the suite cannot judge.
      axis, values, condition: the swept quantity (empty: one condition, ``default``), its
        default values and the condition of one value.
      settle_s: when the detector starts judging, for a bundle [s]; a trial must be longer.
    """

    name: str
    family: str
    summary: str
    needs: tuple[str, ...]
    detect: Callable[[TrialData], Verdict]
    duration_s: Callable[[Bundle], float]
    task_inputs: tuple[str, ...] = ()
    check: Callable[[Bundle, RobotSpec], None] = lambda bundle, spec: None
    axis: str = ""
    values: tuple[float, ...] = ()
    condition: Callable[[float], Condition] | None = None
    settle_s: Callable[[Bundle], float] = lambda bundle: 0.0

    def conditions(self, values: tuple[float, ...] = ()) -> list[Condition]:
        """The conditions to run: one per value of the axis (``values`` or the defaults)."""
        if self.condition is None:
            return [Condition("default")]
        return [self.condition(v) for v in (values or self.values)]


def task_value(bundle: Bundle, key: str, default: float) -> float:
    """A number of the bundle's recorded task config (a tolerance), else the task's default."""
    return float(bundle.task_config.get(key, default))


# -- quadrotors ---------------------------------------------------------------------------------
def _flight(d: TrialData, target_w: np.ndarray, radius_m: float, settle_s: float) -> tuple[dict[str, Any], float]:
    """Position error statistics after settling (:func:`~simreal.deploy.sim_loop.hover_metrics`,
    up to the ground) against per-sample targets (T, 3), and the distance beyond the geofence [m]."""
    t, p = d.traj["t"], d.traj["pos_w"]
    ground = ground_index(d.traj)
    end = len(t) if ground is None else ground + 1
    errors = list(zip(t[:end].tolist(), np.linalg.norm(p[:end] - target_w[:end], axis=1).tolist()))
    cfg = SimLoopConfig(duration_s=d.duration_s, settle_s=settle_s, success_radius_m=radius_m)
    stats = hover_metrics(errors, target_w[0], cfg, None if ground is None else float(t[ground]))
    return stats, geofence_excess(d.traj, *d.fence_m)["max_outside_m"]


def _flight_verdict(stats: dict[str, Any], outside_m: float, passed: bool, why: str) -> Verdict:
    metrics = {
        "rmse_m": stats.get("rmse_after_settle_m"),
        "max_error_m": stats.get("max_error_after_settle_m"),
        "beyond_fence_m": outside_m,
    }
    if "reason" in stats:
        return Verdict(False, metrics, stats["reason"])
    if outside_m > 0:
        return Verdict(False, metrics, f"{outside_m:.2f} m beyond the geofence")
    return Verdict(passed, metrics, "" if passed else why)


def flight_settle_s(bundle: Bundle) -> float:
    """When a flight suite starts judging [s]: the task's settle time (2 s by default)."""
    return task_value(bundle, "settle_time_s", 2.0)


def detect_hover(d: TrialData) -> Verdict:
    radius = task_value(d.bundle, "success_radius_m", 0.1)
    target = np.broadcast_to(d.task["target_pos_w"], d.traj["pos_w"].shape)
    stats, outside = _flight(d, target, radius, flight_settle_s(d.bundle))
    err = stats.get("max_error_after_settle_m", np.inf)
    return _flight_verdict(
        stats, outside, bool(stats["passed"]), f"max error {err:.3f} m >= {radius:g} m after settling"
    )


def detect_figure8(d: TrialData) -> Verdict:
    radius = task_value(d.bundle, "success_radius_m", 0.15)
    ref = d.bundle.reference
    if ref is None:  # check_figure8 refuses such a bundle before any trial
        raise BundleError(
            "reference",
            "quadrotor-figure8 judges against the bundle's reference; this one has none",
            str(d.bundle.path / "bundle.yaml"),
        )
    target = np.stack([ref.at(t)["target_pos_w"] for t in d.traj["t"]])
    stats, outside = _flight(d, target, radius, flight_settle_s(d.bundle))
    rmse = stats.get("rmse_after_settle_m", np.inf)
    return _flight_verdict(stats, outside, rmse < radius, f"RMSE {rmse:.3f} m >= {radius:g} m")


def check_hover(bundle: Bundle, spec: RobotSpec) -> None:
    if bundle.reference is not None and "target_pos_w" in bundle.reference.values:
        raise BundleError(
            "reference",
            f"quadrotor-hover judges a fixed target, and this bundle ({bundle.task}) flies "
            "the moving target it carries: use the quadrotor-figure8 suite",
            str(bundle.path / "bundle.yaml"),
        )


def check_figure8(bundle: Bundle, spec: RobotSpec) -> None:
    if bundle.reference is None or "target_pos_w" not in bundle.reference.values:
        raise BundleError(
            "reference",
            "quadrotor-figure8 needs a bundle that carries its figure-8 as a reference "
            "table (target_pos_w; a quadrotor-track export); this one has none",
            str(bundle.path / "bundle.yaml"),
        )


# -- humanoids ----------------------------------------------------------------------------------
WALK_SETTLE_S = 1.0  # velocity tracking is judged from here on (standing up to speed) [s]
TRACK_JOINT_RMSE_RAD = 0.3


def _upright(d: TrialData, settle_s: float = 0.0) -> tuple[np.ndarray, float | None]:
    """Mask of the samples from ``settle_s`` until a fall, and the fall time [s] (None: none)."""
    fall = fall_time(d.traj)
    t = d.traj["t"]
    return (t >= settle_s) & (t < (np.inf if fall is None else fall)), fall


def _rms(x: np.ndarray) -> float | None:
    return float(np.sqrt(np.mean(x))) if x.size else None


def detect_walk(d: TrialData) -> Verdict:
    keep, fall = _upright(d, WALK_SETTLE_S)
    cmd = np.asarray(d.task["command"], np.float64)
    v_b = rotate_inv(d.traj["quat_wxyz"], d.traj["lin_vel_w"], np)[keep]
    w_z = d.traj["ang_vel_b"][keep, 2]
    metrics = {
        "vel_rmse_m_s": _rms(np.sum((cmd[:2] - v_b[:, :2]) ** 2, axis=1)),
        "yaw_rate_rmse_rad_s": _rms((cmd[2] - w_z) ** 2),
        "mean_speed_m_s": float(v_b[:, 0].mean()) if len(v_b) else None,
        "fall_s": fall,
    }
    return Verdict(fall is None, metrics, "" if fall is None else f"fell at {fall:.2f} s")


def walk_condition(vx_m_s: float) -> Condition:
    return Condition(f"vx={vx_m_s:g} m/s", {"command": (vx_m_s, 0.0, 0.0)})


def _motion_columns(spec: RobotSpec) -> int:
    """Width of g1-tracking's motion command: joint positions and velocities, root tilt (2n + 3)."""
    return 2 * len(spec.actuators) + 3


def check_motion(bundle: Bundle, spec: RobotSpec) -> None:
    ref = bundle.reference
    if ref is None or "command" not in ref.values or ref.values["command"].shape[1] != _motion_columns(spec):
        raise BundleError(
            "reference",
            f"humanoid-track needs a bundle that carries a reference motion (a "
            f"command table of {_motion_columns(spec)} columns: joint positions, "
            f"velocities, root tilt; a g1-tracking export); this one has none",
            str(bundle.path / "bundle.yaml"),
        )


def detect_track(d: TrialData) -> Verdict:
    """Row k of the motion command is the reference at control step k + 1 (the next frame), so
    the sample at t is compared with the row played at t - one period."""
    keep, fall = _upright(d)
    n = len(d.spec.actuators)
    ref = d.bundle.reference
    if ref is None:  # check_motion refuses such a bundle before any trial
        raise BundleError(
            "reference",
            "humanoid-track judges against the bundle's reference motion; this one has none",
            str(d.bundle.path / "bundle.yaml"),
        )
    rows = np.stack([ref.at(max(t - d.period_s, 0.0))["command"] for t in d.traj["t"]])[keep]
    q_ref = np.array([a.default for a in d.spec.actuators]) + rows[:, :n]
    g_ref = rows[:, 2 * n :]
    g = gravity_b({"quat_wxyz": d.traj["quat_wxyz"][keep]}, np)
    cos = np.sum(g * g_ref, axis=1) / np.maximum(np.linalg.norm(g_ref, axis=1), 1e-9)
    joint = _rms((d.traj["joint_pos"][keep] - q_ref) ** 2)
    metrics = {
        "joint_rmse_rad": joint,
        "root_tilt_rmse_rad": _rms(np.arccos(np.clip(cos, -1.0, 1.0)) ** 2),
        "fall_s": fall,
    }
    if fall is not None:
        return Verdict(False, metrics, f"fell at {fall:.2f} s")
    ok = joint is not None and joint < TRACK_JOINT_RMSE_RAD
    return Verdict(ok, metrics, "" if ok else f"joint RMSE {joint} rad >= {TRACK_JOINT_RMSE_RAD} rad")


# -- arms ---------------------------------------------------------------------------------------
def at_goal(key: str, default_radius_m: float) -> Callable[[TrialData], Verdict]:
    """A detector: the point ``key`` (the end effector, the object) within the task's radius of
    the goal at the end; its cycle time is when it last entered the radius [s]."""

    def detect(d: TrialData) -> Verdict:
        radius = task_value(d.bundle, "success_radius_m", default_radius_m)
        dist = np.linalg.norm(d.traj[key] - np.asarray(d.task["target_pos_w"]), axis=1)
        inside = dist < radius
        ok = bool(inside[-1])
        entered = len(inside) - int(np.argmin(inside[::-1])) if not inside.all() else 0
        metrics = {
            "final_distance_m": float(dist[-1]),
            "min_distance_m": float(dist.min()),
            "cycle_time_s": float(d.traj["t"][entered]) if ok else None,
        }
        why = (
            f"{key} not seen at the end"
            if not np.isfinite(dist[-1])
            else f"{key} {dist[-1]:.3f} m from the goal at the end (>= {radius:g} m)"
        )
        return Verdict(ok, metrics, "" if ok else why)

    return detect


def _fixed(seconds: float) -> Callable[[Bundle], float]:
    return lambda bundle: seconds


def _clip_length(bundle: Bundle) -> float:
    return bundle.reference.duration_s if bundle.reference is not None else 10.0


_FLIGHT = ("pos_w",)
_WALK = ("pos_w", "quat_wxyz", "lin_vel_w", "ang_vel_b")

SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "quadrotor-hover",
            "quadrotor",
            "hold the target within the task's success radius (0.1 m) from its settle time (2 s) on",
            _FLIGHT,
            detect_hover,
            _fixed(10.0),
            check=check_hover,
            task_inputs=("target_pos_w",),
            settle_s=flight_settle_s,
        ),
        Suite(
            "quadrotor-figure8",
            "quadrotor",
            "fly the bundle's figure-8, RMSE below 0.15 m",
            _FLIGHT,
            detect_figure8,
            _fixed(12.0),
            check=check_figure8,
            settle_s=flight_settle_s,
        ),
        Suite(
            "humanoid-walk",
            "humanoid",
            "walk at the commanded speed without falling",
            _WALK,
            detect_walk,
            _fixed(10.0),
            task_inputs=("command",),
            axis="vx_m_s",
            values=(0.0, 0.5, 1.0),
            condition=walk_condition,
            settle_s=_fixed(WALK_SETTLE_S),
        ),
        Suite(
            "humanoid-track",
            "humanoid",
            "play the reference motion without falling, joint RMSE below 0.3 rad",
            _WALK + ("joint_pos",),
            detect_track,
            _clip_length,
            check=check_motion,
        ),
        Suite(
            "arm-reach",
            "arm",
            "end effector within 5 cm of the goal at the end",
            ("ee_pos_w",),
            at_goal("ee_pos_w", 0.05),
            _fixed(4.0),
            task_inputs=("target_pos_w",),
        ),
        Suite(
            "arm-push",
            "arm",
            "object within 5 cm of the goal at the end",
            ("object_pos_w",),
            at_goal("object_pos_w", 0.05),
            _fixed(6.0),
            task_inputs=("target_pos_w",),
        ),
        Suite(
            "arm-pick",
            "arm",
            "object held within 5 cm of the goal in the air at the end",
            ("object_pos_w",),
            at_goal("object_pos_w", 0.05),
            _fixed(6.0),
            task_inputs=("target_pos_w",),
        ),
    )
}


def suite_for(name: str, bundle: Bundle, spec: RobotSpec) -> Suite:
    """The suite ``name`` after checking it can judge ``bundle`` (one-line errors otherwise)."""
    if name not in SUITES:
        raise UnknownNameError("suite", name, SUITES)
    suite = SUITES[name]
    if spec.family != suite.family:
        mine = ", ".join(s.name for s in SUITES.values() if s.family == spec.family) or "none"
        raise BundleError(
            "robot",
            f"suite {name} serves {suite.family} robots; the bundle's robot '{spec.name}' is a "
            f"{spec.family} (its suites: {mine})",
            str(bundle.path / "bundle.yaml"),
        )
    suite.check(bundle, spec)
    return suite
