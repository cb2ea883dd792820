"""Physical feasibility of a reference: PD playback in MuJoCo with a free base.

The reference's joint positions are the set-points of the robot's own PD position servos (kp,
kd and effort limits of the robot spec, which the robot's builder puts in the model
:func:`~simreal.retarget.robot.load_robot` compiles; armature, joint damping and friction too),
the base is free and unassisted, and the floor and scene boxes push back; self-collision is
off, as ``simreal/sim/`` trains. No policy and no balance feedback: open loop, a stiff PD follows a
physical walk for a good part of a second before it tips over, while a reference with joint
flips, floating feet or a crouch the torques cannot hold loses it within a few frames. That
time is the figure: how long the robot follows the reference.

Protocol (reference state initialisation, as the tracking task's episodes start):

- every ``every_s`` seconds a window starts from the reference's state at that frame: qpos as
  retargeted, qvel from central differences of qpos (``mj_differentiatePos``, exact for the
  free joint's quaternion);
- inside the window each physics step (the model's time step) gets the reference's joint
  positions linearly interpolated at the end of the step as set-points;
- at each reference frame the robot *follows* while its base tilt (angle between the robot's and
  the reference's base z axes) is within ``max_tilt_rad``, its base height within
  ``max_height_err_m`` of the reference's, and its RMS joint position error within
  ``max_joint_rms_rad``. The first frame that breaks one ends the window's follow time; the
  window's later frames count as lost. A step MuJoCo had to reset (the state went NaN, Inf or
  past 1e10: :mod:`simreal.mujoco_divergence`) ends it too, as ``diverged``: the reset pose is
  not the reference's motion.

Figures: follow time per window [s] (mean; min over the full-length windows), the fraction of
the clip's frames followed, and per window the frame and the reason it was lost.

MuJoCo's C engine (``mj_step``), not JAX: a 6 s clip plays in well under a second on one core.
"""

from __future__ import annotations

import copy
import dataclasses

import mujoco
import numpy as np

from simreal.mujoco_divergence import clear, mujoco_reset
from simreal.retarget.robot import RetargetRobot


@dataclasses.dataclass(frozen=True)
class PlaybackConfig:
    """Playback settings (defaults are the report's).

    Attributes:
      every_s: reference state initialisation period (the window length) [s].
      max_tilt_rad: base tilt error beyond which the robot has fallen [rad].
      max_height_err_m: base height error beyond which it has fallen or sunk [m].
      max_joint_rms_rad: RMS joint position error beyond which it no longer follows [rad].
    """

    every_s: float = 1.0
    max_tilt_rad: float = 0.5
    max_height_err_m: float = 0.15
    max_joint_rms_rad: float = 0.3


@dataclasses.dataclass(frozen=True)
class Playback:
    """The playback result (W windows, T frames).

    Attributes:
      starts: (W,) first frame of each window; lengths: (W,) frames after the start in the window.
      followed: (W,) frames after the start the robot followed (== lengths when never lost).
      reasons: (W,) why each window was lost: ``tilt``, ``height``, ``joints``, ``diverged``, or ``""`` if not.
      followed_mask: (T,) frames the robot followed (window starts included).
      fps: reference frame rate [Hz].
    """

    starts: np.ndarray
    lengths: np.ndarray
    followed: np.ndarray
    reasons: tuple[str, ...]
    followed_mask: np.ndarray
    fps: float

    def summary(self) -> dict:
        """JSON-ready figures: mean/min follow time [s], the followed fraction, per-window detail."""
        follow_s = self.followed / self.fps
        full = self.lengths == self.lengths.max()
        return {
            "window_s": float(self.lengths.max() / self.fps),
            "windows": len(self.starts),
            "mean_follow_s": float(follow_s.mean()),
            "min_follow_s": float(follow_s[full].min()),
            "followed_fraction": float(self.followed_mask.mean()),
            "lost": [
                {"start": int(s), "lost_at": int(s + f + 1), "reason": r}
                for s, f, r in zip(self.starts, self.followed, self.reasons)
                if r
            ],
        }


def pd_servo_problem(model: mujoco.MjModel) -> str | None:
    """Why ``model`` cannot play a reference back (None if it can): every actuator must be a PD
    position servo on a joint (``tau = kp (u - q) - kd qdot``: fixed gain kp > 0, affine bias
    ``-kp q``), as the robot spec's actuators are built."""
    if model.nu == 0:
        return "the model has no actuators"
    for a in range(model.nu):
        kp = float(model.actuator_gainprm[a, 0])
        if (
            model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT
            or kp <= 0
            or model.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_AFFINE
            or not np.isclose(model.actuator_biasprm[a, 1], -kp)
        ):
            return f"actuator {model.actuator(a).name!r} is not a PD position servo (a robot spec with kp gives one)"
    return None


def reference_qvel(model: mujoco.MjModel, qpos: np.ndarray, fps: float) -> np.ndarray:
    """(T, nv) velocities of a qpos trajectory (T, nq) by central differences (one-sided at the
    ends) in MuJoCo's tangent space [m/s, rad/s]."""
    T = len(qpos)
    qvel = np.zeros((T, model.nv))
    for t in range(T):
        a, b = max(t - 1, 0), min(t + 1, T - 1)
        if b > a:
            mujoco.mj_differentiatePos(model, qvel[t], (b - a) / fps, qpos[a], qpos[b])
    return qvel


def _physics_model(robot: RetargetRobot) -> mujoco.MjModel:
    """The retargeting model with self-collision off (robot geoms collide with the world only),
    as the sim tasks build it; a copy, the robot's own model is left alone."""
    m = copy.deepcopy(robot.model)
    m.geom_conaffinity[robot.robot_geoms] = 1  # robot contype 2 & 1 = 0: no robot-robot pairs
    return m


def play_back(robot: RetargetRobot, qpos: np.ndarray, fps: float, cfg: PlaybackConfig = PlaybackConfig()) -> Playback:
    """PD playback of a retargeted trajectory; see the module docstring.

    Args:
      robot: the robot it was retargeted to (its actuators must be PD servos: :func:`pd_servo_problem`).
      qpos: (T, nq) the reference in the robot model's qpos layout.
      fps: reference frame rate [Hz].
      cfg: window length and the deviation thresholds.
    """
    m = _physics_model(robot)
    d, ref = mujoco.MjData(m), mujoco.MjData(m)
    T, dt = len(qpos), float(m.opt.timestep)
    qvel = reference_qvel(m, qpos, fps)
    act_q = m.jnt_qposadr[m.actuator_trnid[:, 0]]
    root_body = int(m.jnt_bodyid[np.flatnonzero(m.jnt_type == mujoco.mjtJoint.mjJNT_FREE)[0]])
    every = max(1, int(round(cfg.every_s * fps)))
    starts = np.arange(0, max(T - 1, 1), every)
    lengths = np.minimum(starts + every, T - 1) - starts
    followed = lengths.copy()
    reasons = [""] * len(starts)
    mask = np.zeros(T, dtype=bool)
    for w, (s, n) in enumerate(zip(starts, lengths)):
        d.qpos[:], d.qvel[:], d.time = qpos[s], qvel[s], s / fps
        d.act[:] = 0.0
        clear(d)
        mujoco.mj_forward(m, d)
        mask[s] = True
        for k in range(s + 1, s + n + 1):
            while d.time < k / fps - 0.5 * dt:
                u = (d.time + dt) * fps  # set-point: the reference at the end of this step, in frames
                i = min(int(u), T - 2)
                a = u - i
                d.ctrl[:] = (1.0 - a) * qpos[i, act_q] + a * qpos[i + 1, act_q]
                mujoco.mj_step(m, d)
                if mujoco_reset(d, dt):
                    break
            reason = "diverged" if mujoco_reset(d, dt) else _deviation(m, d, ref, qpos[k], act_q, root_body, cfg)
            if reason:
                followed[w], reasons[w] = k - s - 1, reason
                break
            mask[k] = True
    return Playback(starts, lengths, followed, tuple(reasons), mask, float(fps))


def _deviation(
    m: mujoco.MjModel,
    d: mujoco.MjData,
    ref: mujoco.MjData,
    q_ref: np.ndarray,
    act_q: np.ndarray,
    root_body: int,
    cfg: PlaybackConfig,
) -> str:
    """The first deviation of the simulated state ``d`` from the reference pose ``q_ref``, or ``""``."""
    ref.qpos[:] = q_ref
    mujoco.mj_kinematics(m, ref)
    up, up_ref = d.xmat[root_body].reshape(3, 3)[:, 2], ref.xmat[root_body].reshape(3, 3)[:, 2]
    if np.arccos(np.clip(up @ up_ref, -1.0, 1.0)) > cfg.max_tilt_rad:
        return "tilt"
    if abs(d.xpos[root_body, 2] - ref.xpos[root_body, 2]) > cfg.max_height_err_m:
        return "height"
    if np.sqrt(np.mean((d.qpos[act_q] - q_ref[act_q]) ** 2)) > cfg.max_joint_rms_rad:
        return "joints"
    return ""
