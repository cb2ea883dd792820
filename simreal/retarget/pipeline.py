"""One clip, end to end: human motion -> targets -> solver -> quality report -> motion file.

    >>> robot = load_robot("g1")                                       # doctest: +SKIP
    >>> result = retarget(load_motion_source("walk.bvh"), robot, "interaction")
    >>> save_motion("walk_g1.npz", result.motion)

:data:`METHODS` maps a method name to its solver; both return a joint trajectory and their
stats, and both are judged by the same :func:`metrics.quality_report`.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping

import mujoco
import numpy as np

from simreal.errors import UnknownNameError
from simreal.motion_file import Motion
from simreal.retarget.checks import graded_report
from simreal.retarget.ik import solve_ik
from simreal.retarget.interaction import solve_interaction
from simreal.retarget.metrics import forward_all, quality_report
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.skeleton import HumanMotion
from simreal.retarget.targets import Targets, build_targets, resample

METHODS: dict[str, Callable[[RetargetRobot, Targets], tuple[np.ndarray, dict]]] = {
    "ik": solve_ik,
    "interaction": solve_interaction,
}


@dataclasses.dataclass(frozen=True)
class RetargetResult:
    """The motion file content plus what produced it (targets, raw qpos (T, nq), solver stats)."""

    motion: Motion
    targets: Targets
    qpos: np.ndarray
    stats: dict


def _derivative(x: np.ndarray, fps: float) -> np.ndarray:
    """Time derivative (T, ...) by central differences (one-sided at the ends)."""
    return np.gradient(x, axis=0) * fps if len(x) > 1 else np.zeros_like(x)


def _angular_velocity(quat: np.ndarray, fps: float) -> np.ndarray:
    """World-frame angular velocity (T, 3) [rad/s] of wxyz quaternions, central differences."""
    T = len(quat)
    out = np.zeros((T, 3))
    if T < 2:
        return out
    R: np.ndarray = np.empty((T, 9))
    for t in range(T):
        mujoco.mju_quat2Mat(R[t], quat[t])
    R = R.reshape(T, 3, 3)
    q = np.empty(4)
    for t in range(T):
        a, b = max(t - 1, 0), min(t + 1, T - 1)
        mujoco.mju_mat2Quat(q, (R[b] @ R[a].T).ravel())
        if q[0] < 0:
            q = -q
        mujoco.mju_quat2Vel(out[t], q, (b - a) / fps)
    return out


def motion_from_qpos(
    robot: RetargetRobot, qpos: np.ndarray, targets: Targets, provenance: dict, quality: dict
) -> Motion:
    """Pack a joint trajectory into the motion file contract (velocities by central differences)."""
    m = robot.model
    d = mujoco.MjData(m)
    T, fps = len(qpos), targets.fps
    quat = qpos[:, 3:7] / np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    quat = quat * np.where(quat[:, :1] < 0, -1.0, 1.0)
    dof_pos = qpos[:, robot.qpos_adr]
    body_pos = np.empty((T, m.nbody - 1, 3))
    body_quat = np.empty((T, m.nbody - 1, 4))
    for t in range(T):
        d.qpos[:] = qpos[t]
        mujoco.mj_kinematics(m, d)
        body_pos[t], body_quat[t] = d.xpos[1:], d.xquat[1:]
    return Motion(
        fps=float(fps),
        joint_names=robot.joint_names,
        root_pos=qpos[:, :3].copy(),
        root_quat=quat,
        root_lin_vel=_derivative(qpos[:, :3], fps),
        root_ang_vel=_angular_velocity(quat, fps),
        dof_pos=dof_pos.copy(),
        dof_vel=_derivative(dof_pos, fps),
        body_names=robot.body_names,
        body_pos=body_pos,
        body_quat=body_quat,
        foot_names=("left_foot", "right_foot"),
        foot_contacts=targets.contacts.copy(),
        provenance=provenance,
        quality=quality,
    )


def retarget(
    human: HumanMotion,
    robot: RetargetRobot,
    method: str = "interaction",
    joint_map: Mapping[str, str] | None = None,
    fps: float | None = None,
) -> RetargetResult:
    """Retarget one clip.

    Args:
      human: the source motion (any loader).
      robot: from :func:`simreal.retarget.robot.load_robot`.
      method: ``ik`` or ``interaction``.
      joint_map: canonical keypoint -> source joint name overrides.
      fps: resample the source to this rate [Hz] first (default: keep the source's).
    """
    if method not in METHODS:
        raise UnknownNameError("retarget method", method, METHODS)
    if fps is not None:
        human = resample(human, fps)
    targets = build_targets(human, robot, joint_map)
    qpos, stats = METHODS[method](robot, targets)
    settings = robot.kmap.ik if method == "ik" else robot.kmap.interaction
    provenance = {
        "source": human.source,
        "robot": robot.source,
        "method": method,
        "settings": dataclasses.asdict(settings),
        "contacts": dataclasses.asdict(robot.kmap.contacts),
        "scaling": targets.scaling.to_dict(),
        "vertical_offset_m": {
            "median": float(np.median(targets.vertical_offset_m)),
            "min": float(targets.vertical_offset_m.min()),
            "max": float(targets.vertical_offset_m.max()),
        },
        "arm_clearance": {
            "max_push_m": dict(zip(("left", "right"), targets.arm_push_m.max(axis=0).tolist())),
            "frames_pushed": int((targets.arm_push_m > 0).any(axis=1).sum()),
        },
        "excluded_self_collision_pairs": [list(p) for p in robot.excluded_pairs],
        "versions": _versions(),
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    return assess(robot, qpos, targets, stats, provenance)


def assess(robot: RetargetRobot, qpos: np.ndarray, targets: Targets, stats: dict, provenance: dict) -> RetargetResult:
    """Judge a joint trajectory (the metrics and the graded checks) and pack it as a motion file;
    the solver's ``stats`` and the ``provenance`` (its ``method`` among them) go into the report."""
    fk = forward_all(robot, qpos)  # kinematics and collisions of every frame, read by both reports
    quality = quality_report(robot, qpos, targets, fk)
    quality["method"] = provenance["method"]
    quality["solver"] = stats
    quality.update(graded_report(robot, qpos, targets, stats, fk=fk))
    motion = motion_from_qpos(robot, qpos, targets, provenance, quality)
    return RetargetResult(motion, targets, qpos, stats)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"mujoco": mujoco.__version__, "numpy": np.__version__}
    for pkg in ("simreal", "mink", "daqp", "quadprog", "scipy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out
