"""Human motion -> per-frame robot keypoint targets: positions, orientations, contacts.

Steps, each a small function:

1. find the canonical keypoints in the source skeleton (:mod:`joint_names`);
2. add the soles: between ankle and toe, at the lower of the two (or under the ankle);
3. put the human's floor at z = 0 (a low percentile of the lower sole's height);
4. scale to the robot (:mod:`scaling`, derived from limb lengths);
5. body frames from keypoints: pelvis (hips + spine), chest (shoulders + neck), feet (heading of
   the toes, kept level), turned into target orientations of the mapped robot sites;
6. label contacts on the scaled soles and shift the targets so stance soles rest on the terrain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import mujoco
import numpy as np

from simreal.errors import ConfigError, DataFileError
from simreal.retarget import joint_names
from simreal.retarget.contacts import detect_contacts
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.rotations import frame_from_left_up, yaw_frame
from simreal.retarget.scaling import Scaling, apply_scaling, derive_scaling
from simreal.retarget.skeleton import HumanMotion

ORIENTED = ("pelvis", "torso", "head", "left_foot", "right_foot")


@dataclasses.dataclass(frozen=True)
class Targets:
    """What the solvers track (K robot keypoints, T frames).

    Attributes:
      keypoints: (K,) names, the robot's keypoint order.
      positions: (T, K, 3) scaled target positions [m].
      rotations: (T, K, 3, 3) target site orientations (identity where not oriented).
      human: (T, K, 3) the human keypoints before scaling (floor at z = 0) [m].
      contacts: (T, 2) stance of the left and right foot.
      terrain_z: (T, 2) terrain height under each target sole [m].
      fps: [Hz]; scaling: the derived factors; vertical_offset_m: shift applied after scaling.
    """

    keypoints: tuple[str, ...]
    positions: np.ndarray
    rotations: np.ndarray
    human: np.ndarray
    contacts: np.ndarray
    terrain_z: np.ndarray
    fps: float
    scaling: Scaling
    vertical_offset_m: float

    @property
    def num_frames(self) -> int:
        return int(self.positions.shape[0])


def start_pose(robot: RetargetRobot, targets: Targets) -> np.ndarray:
    """The home pose standing at the first frame's pelvis target, turned to its heading: the
    solvers' starting point."""
    q = robot.q_home.copy()
    pel = robot.keypoint_index("pelvis")
    q[:2] = targets.positions[0, pel, :2]
    fwd = targets.rotations[0, pel][:, 0]
    yaw = float(np.arctan2(fwd[1], fwd[0]))
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
    return dataclasses.replace(motion, positions=pos.reshape(len(t_new), *motion.positions.shape[1:]),
                               fps=float(fps), source=source)


def human_keypoints(motion: HumanMotion, joint_map: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
    """Canonical keypoint tracks (T, 3) [m], soles included, floor at z = 0."""
    idx = joint_names.resolve_keypoints(motion.names, joint_map)
    kp = {k: motion.positions[:, i] for k, i in idx.items()}
    leg = np.median(np.linalg.norm(kp["left_knee"] - kp["left_hip"], axis=-1)
                    + np.linalg.norm(kp["left_ankle"] - kp["left_knee"], axis=-1))
    for side in ("left", "right"):
        ankle = kp[f"{side}_ankle"]
        toe = kp.get(f"{side}_toe")
        if toe is not None:
            sole = 0.5 * (ankle + toe)
            sole[:, 2] = np.minimum(ankle[:, 2], toe[:, 2])
        else:  # no toe joint: a point under the ankle, a tenth of the leg down
            sole = ankle - np.array([0.0, 0.0, 0.1 * leg])
        kp[f"{side}_foot"] = sole
    floor = np.percentile(np.minimum(kp["left_foot"][:, 2], kp["right_foot"][:, 2]), 5)
    return {k: v - np.array([0.0, 0.0, floor]) for k, v in kp.items()}


def human_frames(kp: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Body frames (T, 3, 3), x forward / y left / z up, from keypoints."""
    up_top = kp.get("neck", kp.get("head", kp.get("torso")))
    spine = kp.get("torso", up_top)
    pelvis = frame_from_left_up(kp["left_hip"] - kp["right_hip"],
                                (spine if spine is not None else kp["pelvis"] + [0, 0, 1]) - kp["pelvis"])
    frames = {"pelvis": pelvis}
    if "left_shoulder" in kp and "right_shoulder" in kp and up_top is not None and spine is not None:
        top = up_top if up_top is not spine else kp.get("head", spine + [0, 0, 0.1])
        frames["torso"] = frame_from_left_up(kp["left_shoulder"] - kp["right_shoulder"], top - spine)
    else:
        frames["torso"] = pelvis
    frames["head"] = frames["torso"]
    for side in ("left", "right"):
        toe = kp.get(f"{side}_toe")
        fwd = toe - kp[f"{side}_ankle"] if toe is not None else pelvis[:, :, 0]
        frames[f"{side}_foot"] = yaw_frame(fwd)
    return frames


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
    kp = human_keypoints(motion, joint_map)
    missing = [k for k in robot.keypoints if k not in kp]
    if missing:
        raise ConfigError("keypoints", f"the robot's keypoint map uses {', '.join(missing)}, which the source "
                                       f"skeleton lacks (found: {', '.join(sorted(kp))}); remove them from the map "
                                       "or give a --joint-map", robot.kmap.source)
    bad = [k for k in robot.keypoints if robot.rot_weights[robot.keypoint_index(k)] > 0 and k not in ORIENTED]
    if bad:
        raise ConfigError(f"keypoints.{bad[0]}.orientation_weight",
                          f"orientation targets exist only for {', '.join(ORIENTED)}", robot.kmap.source)
    home_pos, home_rot = robot_home_sites(robot)
    scaling = derive_scaling(kp, {k: home_pos[i] for i, k in enumerate(robot.keypoints)})
    scaled = apply_scaling(kp, scaling)
    T, K = motion.num_frames, len(robot.keypoints)
    pos = np.stack([scaled[k] for k in robot.keypoints], axis=1)
    frames = human_frames(kp)
    rots = np.broadcast_to(np.eye(3), (T, K, 3, 3)).copy()
    for i, k in enumerate(robot.keypoints):
        if k in ORIENTED:
            rots[:, i] = frames[k] @ home_rot[i]
    feet = [robot.keypoint_index("left_foot"), robot.keypoint_index("right_foot")]
    # Put the scaled stance soles on the terrain: coarse shift, contacts, then the stance median.
    terrain = robot.scene.height(pos[:, feet, :2], pos[:, feet, 2])
    offset = float(np.percentile(np.min(pos[:, feet, 2] - terrain, axis=1), 5))
    contacts = detect_contacts(pos[:, feet] - [0, 0, offset], motion.fps, terrain, robot.kmap.contacts)
    if contacts.any():
        offset += float(np.median((pos[:, feet, 2] - offset - terrain)[contacts]))
    offset -= float(robot.sole_height.mean())  # the sole site's height when the foot is flat
    pos[..., 2] -= offset
    human = np.stack([kp[k] for k in robot.keypoints], axis=1)
    return Targets(tuple(robot.keypoints), pos, rots, human, contacts, terrain, motion.fps, scaling, offset)
