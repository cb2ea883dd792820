"""``g1-tracking``: imitate a retargeted motion clip (DeepMimic / BeyondMimic style).

The clip is a motion file (``simreal/motion_file.py``) named by ``env.motion_file``; its joints
are matched to the robot's actuators by name, its bodies to the robot's bodies by name
(``tracked_bodies``). The clip is required: an empty ``motion_file`` is a ConfigError when the
config is built (``simreal retarget`` writes motion files from BVH, AMASS or keypoints).

Episode: reference state initialisation at a uniformly random frame (root pose and velocity,
joint positions and velocities copied from the clip), or (``rest_start_fraction`` of them) at
the first frame at rest, where a deployed robot starts; the reference then advances one
``ctrl_dt`` per step and holds its last frame once the clip ends (no cut-off at the clip end, so
the time limit remains the only truncation). Ends early when the robot deviates: root height
error above ``max_root_height_err_m`` or any tracked body farther than ``max_body_err_m``.
Episode statistics: the success rate (no such early end) and the joint and body tracking errors
of the successful episodes (:meth:`G1Tracking.stat_table`).

Rewards: exp kernels of the tracking errors (each a named term, weights in ``reward_scales``)::

    joint_pos   exp(-|q - q_ref|^2 / sigma_q^2)          joint_vel  exp(-|qd - qd_ref|^2 / sigma_qd^2)
    root_pos    exp(-|p - p_ref|^2 / sigma_p^2)          root_ori   exp(-angle(R_ref^T R)^2 / sigma_r^2)
    body_pos    exp(-mean_b |x_b - x_b_ref|^2 / sigma_b^2)
    action_rate |a - a_prev|^2 (penalty)

Observation: base angular velocity and gravity (IMU), joint positions and velocities, last
action, and the ``command``: the reference's joint positions (relative to default), joint
velocities (x 0.1) and root tilt (gravity in the reference's root frame) at the next frame,
what BeyondMimic calls the motion command. The command is a function of time alone, nothing
a robot would have to estimate (no root height, no world position): deployed, the bundle
carries it as a reference table (:mod:`simreal.reference`, the clip from its first frame,
last frame held) that the robot side plays back from the hand-over, and the policy compares
it with what the IMU and encoders measure.
Randomised per episode as ``g1-velocity`` (friction, masses, PD stiffness).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from simreal.config import field
from simreal.errors import ConfigError, DataFileError
from simreal.observations import gravity_b
from simreal.reference import Reference
from simreal.rewards import terms as rw
from simreal.rotations import quat_angle, rotate_inv
from simreal.sim.backends.base import PhysState
from simreal.sim.deployment import Deployment
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.tasks.joint_robot import FloorRobotTask, JointRobotConfig


@dataclasses.dataclass(frozen=True)
class G1TrackingConfig(JointRobotConfig):
    episode_length_s: float = field(10.0, min=0.01, doc="episode time limit [s]")
    action_scale: float = field(
        1.2,
        min=0.0,
        doc="position-target delta at |a| = 1 [rad]; must reach the clip (a walk's knee bends ~1 rad past home)",
    )
    motion_file: str = field("", doc="motion npz (`simreal retarget` output); required")
    sigma_joint_pos_rad: float = field(0.5, min=1e-6, doc="joint position kernel width [rad]")
    sigma_joint_vel_rad_s: float = field(5.0, min=1e-6, doc="joint velocity kernel width [rad/s]")
    sigma_root_pos_m: float = field(0.3, min=1e-6, doc="root position kernel width [m]")
    sigma_root_ori_rad: float = field(0.4, min=1e-6, doc="root orientation kernel width [rad]")
    sigma_body_pos_m: float = field(0.3, min=1e-6, doc="body position kernel width [m]")
    max_root_height_err_m: float = field(0.25, min=0.0, doc="larger root height error ends the episode [m]")
    max_body_err_m: float = field(0.5, min=0.0, doc="a tracked body farther than this ends the episode [m]")
    rest_start_fraction: float = field(
        0.2,
        min=0.0,
        max=1.0,
        doc="episodes that start at the clip's first frame at rest, as a robot is handed over (the rest: "
        "reference state init at a random frame, with the clip's velocities)",
    )
    friction: tuple[float, ...] = field((0.5, 1.2), doc="floor sliding friction range")
    mass_scale: tuple[float, ...] = field((0.9, 1.1), doc="link mass scale range")
    kp_scale: tuple[float, ...] = field((0.9, 1.1), doc="PD stiffness scale range")

    def __post_init__(self) -> None:
        # The field keeps a default only because dataclass fields after defaulted ones need one.
        if not self.motion_file:
            raise ConfigError(
                "env.motion_file",
                "g1-tracking needs a motion file (.npz from `simreal retarget`), e.g. env.motion_file=walk_g1.npz",
            )


class G1Tracking(FloorRobotTask):
    """Humanoid (Unitree G1, 29, 23 or 12 DoF; H1 with robot=h1 or h1_10dof): imitate a retargeted motion clip
    (env.motion_file; a 12-DoF variant plays a clip of the whole robot on its legs)."""

    config_class = G1TrackingConfig
    cfg: G1TrackingConfig
    obs_terms = ("ang_vel_b", "gravity_b", "command", "joint_pos_rel", "joint_vel", "last_action")

    critic_obs_terms = ("lin_vel_b", "ang_vel_b", "gravity_b", "command", "joint_pos_rel", "joint_vel", "last_action")
    obs_noise_std = {"ang_vel_b": 0.2, "gravity_b": 0.05, "joint_pos_rel": 0.01, "joint_vel": 1.5}
    reward_scales = {
        "joint_pos": 1.0,
        "joint_vel": 0.5,
        "root_pos": 0.5,
        "root_ori": 0.5,
        "body_pos": 1.0,
        "action_rate": -0.01,
    }

    @property
    def tracked_bodies(self) -> tuple[str, ...]:
        """The robot spec's ``tracking_bodies`` (G1: pelvis, ankle rolls, knees, torso, elbows, wrist
        yaws; H1, which has no wrists: its ankles and elbows); a ConfigError naming ``robot`` when
        the spec lists none."""
        if self.robot.tracking_bodies:
            return self.robot.tracking_bodies
        from simreal.robot_spec import available_robots, load_robot_spec

        # a spec written before the field (a bundle's copy, a user's file copied from a shipped
        # robot): the shipped robot of that name lists them
        if self.robot.name in available_robots() and load_robot_spec(self.robot.name).tracking_bodies:
            return load_robot_spec(self.robot.name).tracking_bodies
        raise ConfigError(
            "robot",
            f"robot '{self.robot.name}' lists no tracking_bodies in its spec "
            f"({self.robot.source or 'built in'}): the bodies this task compares with the clip's",
        )

    def customize_spec(self, s: mujoco.MjSpec) -> None:
        for b in self.tracked_bodies:
            s.add_sensor(
                name=f"{b}_xpos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=b
            )

    def build_model(self) -> mujoco.MjModel:
        from simreal.motion_file import load_motion

        m = super().build_model()
        adr = [int(m.sensor_adr[m.sensor(f"{b}_xpos").id]) for b in self.tracked_bodies]
        self.body_sensor_idx = jnp.asarray(np.array([np.arange(a, a + 3) for a in adr]))
        self._load_reference(m, load_motion(self.cfg.motion_file))
        return m

    def _load_reference(self, m: mujoco.MjModel, motion: Any) -> None:
        """Clip arrays in the robot's actuator / tracked-body order, as jax constants."""
        act_joints = [m.joint(int(m.actuator_trnid[i, 0])).name for i in range(m.nu)]
        cols = motion.robot_columns(act_joints, self.robot.name, self.cfg.motion_file, self.robot.held_names)
        missing = [b for b in self.tracked_bodies if b not in motion.body_names]
        if missing:
            raise DataFileError(
                self.cfg.motion_file, f"motion has no body {missing[0]!r}; bodies: {', '.join(motion.body_names)}"
            )
        bcols = [motion.body_names.index(b) for b in self.tracked_bodies]
        f32 = lambda x: jnp.asarray(np.asarray(x, np.float32))  # noqa: E731
        self.ref = {
            "root_pos": f32(motion.root_pos),
            "root_quat": f32(motion.root_quat),
            "root_lin_vel": f32(motion.root_lin_vel),
            "root_ang_vel": f32(motion.root_ang_vel),
            "dof_pos": f32(motion.dof_pos[:, cols]),
            "dof_vel": f32(motion.dof_vel[:, cols]),
            "body_pos": f32(motion.body_pos[:, bcols]),
        }
        self._check_reach(np.asarray(motion.dof_pos[:, cols]), act_joints)
        self.num_frames = motion.num_frames
        self.frames_per_step = self.robot.control_dt_s * motion.fps
        self.act_qadr = jnp.asarray([int(m.jnt_qposadr[m.actuator_trnid[i, 0]]) for i in range(m.nu)])
        self.act_dadr = jnp.asarray([int(m.jnt_dofadr[m.actuator_trnid[i, 0]]) for i in range(m.nu)])

    def _check_reach(self, dof_pos: np.ndarray, joints: list[str]) -> None:
        """ConfigError unless every reference joint position (inside the control range) is a
        position target some action in [-1, 1] gives: ``|q_ref - ctrl_home| <= action_scale``.
        A clip beyond that would be tracked through set-points clipped short of it (the knee of
        a walk bends 1 rad past home; the default scale once reached 0.5)."""
        lo, hi = np.asarray(self.ctrl_lo), np.asarray(self.ctrl_hi)
        need = np.abs(np.clip(dof_pos, lo, hi) - np.asarray(self.home_ctrl))
        t, j = np.unravel_index(int(np.argmax(need)), need.shape)
        if need[t, j] > self.cfg.action_scale + 1e-3:
            raise ConfigError(
                "env.action_scale",
                f"{self.cfg.action_scale:g} reaches the home pose +- "
                f"{self.cfg.action_scale:g} rad, but {self.cfg.motion_file} needs "
                f"{need[t, j]:.2f} rad ({joints[j]}, frame {t}); set env.action_scale="
                f"{math.ceil(need[t, j] * 10) / 10:g} or more",
            )

    # -- reference -------------------------------------------------------------------------------
    def frame(self, info: Mapping[str, Any], ahead: int = 0) -> dict[str, jax.Array]:
        """The reference at the episode's current time (+ ``ahead`` control steps), linearly
        interpolated between the two clip frames around it (the root quaternion normalised after
        interpolating, nlerp, on the hemisphere of the first). A clip captured at 30 fps and
        played at a 50 Hz control rate would otherwise hold a frame for one or two control steps
        and jump: position set-points that stall and leap, and a robot compared with a pose up to
        half a frame (17 ms) away from where the clip is at that time."""
        t = jnp.clip(info["motion_t0"] + (info["step"] + ahead) * self.frames_per_step, 0.0, self.num_frames - 1.0)
        k0 = jnp.minimum(jnp.floor(t).astype(jnp.int32), max(self.num_frames - 2, 0))
        k1 = jnp.minimum(k0 + 1, self.num_frames - 1)
        a = t - k0
        out = {n: (1.0 - a) * v[k0] + a * v[k1] for n, v in self.ref.items() if n != "root_quat"}
        q0, q1 = self.ref["root_quat"][k0], self.ref["root_quat"][k1]
        q = (1.0 - a) * q0 + a * jnp.where(jnp.dot(q0, q1) < 0.0, -q1, q1)
        out["root_quat"] = q / jnp.linalg.norm(q)
        return out

    def reference_action(self, info: Mapping[str, Any]) -> jax.Array:
        """The action whose position targets are the next frame's reference joint positions."""
        q = self.frame(info, ahead=1)["dof_pos"]
        return jnp.clip((q - self.home_ctrl) / self.cfg.action_scale, -1.0, 1.0)

    # -- episode ---------------------------------------------------------------------------------
    def sample_initial(self, rng: jax.Array):
        """Reference state init: the clip's state at a uniformly random time; with probability
        ``rest_start_fraction``, the deployed start instead (:meth:`_first_frame_at_rest`). A
        policy trained on moving starts alone falls when handed over at rest (measured: from the
        real walk's first frame at rest, 0.76 s; with the clip's velocities, the whole 3 s)."""
        t0 = jax.random.uniform(rng, (), minval=0.0, maxval=float(self.num_frames - 1))
        rest = jax.random.uniform(jax.random.fold_in(rng, 1)) < self.cfg.rest_start_fraction
        qpos, qvel, act, task = self._initial_at(jnp.where(rest, 0.0, t0))
        return qpos, jnp.where(rest, 0.0, qvel), act, task

    def _first_frame_at_rest(self, rng: jax.Array):
        """The clip's pose at its first frame, at rest: the deployed episode (:meth:`deployment`),
        where a robot stands when it is handed over (a rehearsal's gantry lets go of it at rest)."""
        qpos, qvel, act, task = self._initial_at(jnp.zeros(()))
        return qpos, jnp.zeros_like(qvel), act, task

    def _initial_at(self, t0: jax.Array):
        """(qpos, qvel, act, task_info): the reference's root, joints and velocities at clip frame
        ``t0`` (fractional, interpolated as :meth:`frame`)."""
        m = self.mj_model
        info = {"motion_t0": t0, "step": jnp.zeros((), jnp.int32)}
        r = self.frame(info)
        qpos = self.home_qpos.at[0:3].set(r["root_pos"]).at[3:7].set(r["root_quat"]).at[self.act_qadr].set(r["dof_pos"])
        qvel = jnp.zeros(m.nv).at[0:3].set(r["root_lin_vel"])
        qvel = qvel.at[3:6].set(rotate_inv(r["root_quat"], r["root_ang_vel"], jnp))  # free joint: body-frame omega
        qvel = qvel.at[self.act_dadr].set(r["dof_vel"])
        return qpos, qvel, jnp.zeros(m.na), {"motion_t0": t0}

    def _command(self, info: Mapping[str, Any]) -> jax.Array:
        """The motion command of the current observation (see module docstring)."""
        nxt = self.frame(info, ahead=1)
        return jnp.concatenate(
            [
                nxt["dof_pos"] - self.default_joint_pos,
                0.1 * nxt["dof_vel"],
                gravity_b({"quat_wxyz": nxt["root_quat"]}, jnp),
            ]
        )

    def deployment(self) -> Deployment:
        """The deployed episode: the clip from its first frame, where the robot starts; the
        reference is the motion command of every control step until the clip's last frame is
        reached (then held, as in training)."""
        rows = max(1, math.ceil((self.num_frames - 1) / self.frames_per_step))
        cmd = jax.vmap(lambda k: self._command({"motion_t0": jnp.zeros(()), "step": k}))(jnp.arange(rows))
        return Deployment(
            task_params={"motion_t0": 0.0},
            reference=Reference(1.0 / self.ctrl_dt, {"command": np.asarray(cmd, np.float64)}, loop=False),
            initial=self._first_frame_at_rest,
        )

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {
            "pos_w": phys.qpos[0:3],
            "quat_wxyz": phys.qpos[3:7],
            "lin_vel_w": phys.qvel[0:3],
            "ang_vel_b": phys.qvel[3:6],
            "joint_pos": self.joint_pos(phys),
            "joint_vel": self.joint_vel(phys),
            "default_joint_pos": self.default_joint_pos,
            "command": self._command(info),
            "last_action": info["last_action"],
        }

    def body_pos(self, phys: PhysState) -> jax.Array:
        """(b, 3) world positions of :attr:`tracked_bodies` [m]."""
        return phys.sensordata[self.body_sensor_idx]

    def errors(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        r = self.frame(info)
        body_sq = jnp.sum(jnp.square(self.body_pos(phys) - r["body_pos"]), axis=-1)
        return {
            "joint_pos": jnp.sum(jnp.square(self.joint_pos(phys) - r["dof_pos"])),
            "joint_vel": jnp.sum(jnp.square(self.joint_vel(phys) - r["dof_vel"])),
            "root_pos": jnp.sum(jnp.square(phys.qpos[0:3] - r["root_pos"])),
            "root_ori": jnp.square(quat_angle(phys.qpos[3:7], r["root_quat"], jnp)),
            "body_pos": jnp.mean(body_sq),
            "body_max": jnp.sqrt(jnp.max(body_sq)),
            "root_height": jnp.abs(phys.qpos[2] - r["root_pos"][2]),
        }

    # -- rewards ---------------------------------------------------------------------------------
    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        c, e = self.cfg, self.errors(phys, info)
        return {
            "joint_pos": rw.exp_kernel(e["joint_pos"], c.sigma_joint_pos_rad),
            "joint_vel": rw.exp_kernel(e["joint_vel"], c.sigma_joint_vel_rad_s),
            "root_pos": rw.exp_kernel(e["root_pos"], c.sigma_root_pos_m),
            "root_ori": rw.exp_kernel(e["root_ori"], c.sigma_root_ori_rad),
            "body_pos": rw.exp_kernel(e["body_pos"], c.sigma_body_pos_m),
            "action_rate": rw.action_rate(action, info["last_action"]),
        }

    def termination_causes(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        e = self.errors(phys, info)
        return {
            "root_height": e["root_height"] > self.cfg.max_root_height_err_m,
            "body_err": e["body_max"] > self.cfg.max_body_err_m,
        }

    # -- statistics ------------------------------------------------------------------------------
    def stat_table(self) -> dict[str, EpisodeStat]:
        """``success``: the episode ran to the time limit without ending on a deviation (a fall,
        or drifting off the clip: the two are not told apart), over all episodes. The tracking
        errors, defined for the successful episodes: ``joint_rmse_rad``, the RMS joint position
        error over joints and steps [rad], and ``body_pos_err_m``, the RMS over tracked bodies of
        the world position error, averaged over steps [m]. The same two over every episode, up to
        its end (a deviation's last step included): ``joint_rmse_to_end_rad`` and
        ``body_pos_err_to_end_m``, how closely a policy tracks before it has any success."""
        return {
            "success": EpisodeStat("survived"),
            "joint_rmse_rad": EpisodeStat("rms", sample="joint_err"),
            "body_pos_err_m": EpisodeStat("mean", sample="body_err"),
            "joint_rmse_to_end_rad": EpisodeStat("rms", sample="joint_err", over="every"),
            "body_pos_err_to_end_m": EpisodeStat("mean", sample="body_err", over="every"),
        }

    def stat_samples(self, phys, info):
        e = self.errors(phys, info)
        return {"joint_err": jnp.sqrt(e["joint_pos"] / self.mj_model.nu), "body_err": jnp.sqrt(e["body_pos"])}
