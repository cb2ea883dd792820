"""``arm-demo-track``: make the cube follow one demonstration's object trajectory (Human2Sim2Robot).

The demonstration is an object trajectory (:mod:`simreal.object_trajectory`) named by
``env.demo_file``: an npz written by a pose tracker, or a LeRobot dataset folder whose episode
``env.demo_episode`` has an object-pose column (``env.demo_pose_key``). It is resampled to the
control rate once, when the task is built.

Episode: the cube starts at the demonstration's first pose moved on the table by a uniform
offset (``spawn_half_extent_m`` around ``spawn_center_offset_m`` from the demo's first position)
and turned about the vertical by a uniform yaw (``spawn_yaw_rad``); the whole trajectory moves
with it, a planar rigid transform T_ep = (R_z(psi), o) applied to the demo relative to its start::

    p*(t) = o + R_z(psi) (p_demo(t) - p_demo(0))        keypoints alike, point by point

so the table stays a table and gravity stays down (the demo must start with the object resting
on the table; ``o`` is on the table at the cube's half height). The reference is played in time:
step k of the episode targets demo time k ctrl_dt, and the last frame is held once the demo ends
(the time-indexed variant, not the "progress" one that waits for the object: a time-indexed
reference is a table the robot side can play back). The robot starts at the demonstration's
``pre_grasp_joint_pos`` when the file gives one (plus ``init_joint_noise_rad``), else at home; that
pose is then this task's home: position-target actions are deltas around it.

Rewards: ``keypoints`` exp(-k d), d the mean distance of the cube's 8 corners to the reference's
(:func:`simreal.rewards.terms.keypoint_tracking`); small shaping and regularisers: ``reach`` (end
effector to cube, as arm-push), ``action_rate``, ``joint_vel``.
Observation: joints, the cube's position, ``target_pos_w`` (the reference position now) and
``command`` (the reference velocity [m/s]), last action. Deployed, the bundle carries the
demonstration from its own start (yaw 0, no offset) as a reference table
(:mod:`simreal.reference`): place the object where the demonstration started.
Success: the final mean keypoint distance below ``success_radius_m``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from simreal.config import field
from simreal.errors import ConfigError, DataFileError
from simreal.object_trajectory import OBJECT_POSE_KEY, ObjectTrajectory, keypoints, load_demo, resampled
from simreal.reference import Reference
from simreal.rewards import terms as rw
from simreal.rotations import quat_mul, quat_to_rotmat, yaw_quat
from simreal.sim.backends.base import PhysState
from simreal.sim.deployment import Deployment
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.tasks.arm_object import ArmObjectConfig, ArmObjectTask
from simreal.sim.tasks.joint_robot import uniform


@dataclasses.dataclass(frozen=True)
class ArmDemoTrackConfig(ArmObjectConfig):
    episode_length_s: float = field(
        4.0, min=0.01, doc="episode time limit [s]; the demo's last frame is held after it ends"
    )
    demo_file: str = field("", doc="object-trajectory npz, or a LeRobot dataset folder; required")
    demo_episode: int = field(0, min=0, doc="the dataset episode (demo_file a dataset folder)")
    demo_pose_key: str = field(OBJECT_POSE_KEY, doc="the dataset's (T, 7) object pose column: position, wxyz")
    demo_joint_key: str = field("", doc="the dataset's joint position column giving the pre-grasp pose ('': none)")
    keypoint_gain_per_m: float = field(10.0, min=0.0, doc="k of the keypoint reward exp(-k d) [1/m]")
    spawn_center_offset_m: tuple[float, ...] = field(
        (0.0, 0.0), doc="spawn centre minus the demo's first object position (x, y) [m]"
    )
    spawn_half_extent_m: tuple[float, ...] = field((0.03, 0.03), doc="spawn box half sizes (x, y) [m]")
    spawn_yaw_rad: float = field(
        0.3, min=0.0, doc="start yaw from the demo's, uniform +- [rad]; the trajectory turns with it"
    )
    success_radius_m: float = field(0.02, min=0.0, doc="final mean keypoint distance below this succeeds [m]")

    def __post_init__(self) -> None:
        # The field keeps a default only because dataclass fields after defaulted ones need one.
        if not self.demo_file:
            raise ConfigError(
                "env.demo_file",
                "arm-demo-track needs a demonstration: an object-trajectory npz "
                "(simreal/object_trajectory.py) or a LeRobot dataset folder with an "
                "object-pose column, e.g. env.demo_file=push_demo.npz",
            )


class ArmDemoTrack(ArmObjectTask):
    """Arm: make the cube follow one demonstration's object trajectory (env.demo_file)."""

    config_class = ArmDemoTrackConfig
    cfg: ArmDemoTrackConfig
    obs_terms = ("joint_pos_rel", "joint_vel", "object_pos_w", "target_pos_w", "command", "last_action")
    reward_scales = {"keypoints": 5.0, "reach": 0.5, "action_rate": -0.01, "joint_vel": -1e-3}
    #: the target is played back from the bundle's reference; only the object's pose streams in
    task_topics = {"object": ArmObjectTask.task_topics["object"]}

    def build_model(self) -> mujoco.MjModel:
        m = super().build_model()
        c = self.cfg
        try:
            demo = load_demo(c.demo_file, c.demo_episode, c.demo_pose_key, c.demo_joint_key or None)
        except DataFileError as e:
            raise ConfigError("env.demo_file", str(e)) from None
        if demo.pre_grasp_joint_pos is not None:
            self._start_at_pre_grasp(demo, m.nu)
        ref = resampled(demo, 1.0 / self.robot.control_dt_s)
        p0, h = ref.pos[0], c.object_half_size_m
        f32 = lambda x: jnp.asarray(np.asarray(x, np.float32))  # noqa: E731
        # the demo relative to its first position, world-aligned: what each episode turns and moves
        self.demo_pos = f32(ref.pos - p0)  # (N, 3) [m]
        self.demo_keypoints = f32(keypoints(ref.pos, ref.quat_wxyz, h) - p0)  # (N, 8, 3) [m]
        self.demo_vel = f32(np.diff(ref.pos, axis=0, append=ref.pos[-1:]) / self.robot.control_dt_s)  # held: 0
        self.demo_quat0 = f32(ref.quat_wxyz[0])
        self.num_ref = ref.num_frames
        self.spawn_center = f32([p0[0] + c.spawn_center_offset_m[0], p0[1] + c.spawn_center_offset_m[1], h])
        self.demo_origin = f32([p0[0], p0[1], h])  # the deployed episode's: the demo where it was recorded
        return m

    def _start_at_pre_grasp(self, demo: ObjectTrajectory, nu: int) -> None:
        """Make the demo's pre-grasp joint positions this task's home (initial pose and action
        centre); ConfigError naming env.demo_file when they are not this robot's."""
        q, names = demo.pre_grasp_joint_pos, self.robot.actuator_names
        assert q is not None  # build_model calls this only for a demo that has them
        if demo.robot is not None and demo.robot != self.robot.name:
            raise ConfigError(
                "env.demo_file",
                f"{self.cfg.demo_file}: pre_grasp_joint_pos is for robot "
                f"{demo.robot!r}, this task runs {self.robot.name!r}",
            )
        if len(q) != nu:
            raise ConfigError(
                "env.demo_file",
                f"{self.cfg.demo_file}: pre_grasp_joint_pos has {len(q)} values, "
                f"robot {self.robot.name} has {nu} actuators ({', '.join(names)})",
            )
        lo, hi = np.asarray(self.ctrl_lo), np.asarray(self.ctrl_hi)
        bad = np.flatnonzero((q < lo - 1e-6) | (q > hi + 1e-6))
        if len(bad):
            j = int(bad[0])
            raise ConfigError(
                "env.demo_file",
                f"{self.cfg.demo_file}: pre_grasp_joint_pos {names[j]} = {q[j]:.4g} "
                f"is outside its range [{lo[j]:.4g}, {hi[j]:.4g}]",
            )
        # the smallest qpos change giving these actuator positions (L qpos = q): exact for joint
        # actuators, split over a tendon's joints by its coefficients (a gripper's two fingers)
        L, home = np.asarray(self.L, np.float64), np.asarray(self.home_qpos, np.float64)
        self.home_qpos = jnp.asarray(home + np.linalg.pinv(L) @ (q - L @ home), jnp.float32)
        self.home_ctrl = jnp.asarray(q, jnp.float32)

    # -- reference -------------------------------------------------------------------------------
    def reference(self, origin: jax.Array, yaw: jax.Array, step: jax.Array) -> dict[str, jax.Array]:
        """The episode's reference at control step ``step`` (the last frame held): ``pos`` (3,) and
        ``vel`` (3,) of the cube centre [m], [m/s], ``keypoints`` (8, 3) [m] (module docstring)."""
        k = jnp.minimum(step, self.num_ref - 1)
        r = quat_to_rotmat(yaw_quat(yaw, jnp), jnp)
        return {
            "pos": origin + r @ self.demo_pos[k],
            "vel": r @ self.demo_vel[k],
            "keypoints": origin + self.demo_keypoints[k] @ r.T,
        }

    def _task_inputs(self, origin: jax.Array, yaw: jax.Array, step: jax.Array) -> dict[str, jax.Array]:
        ref = self.reference(origin, yaw, step)
        return {"target_pos_w": ref["pos"], "command": ref["vel"]}

    def object_keypoints(self, phys: PhysState) -> jax.Array:
        """(8, 3) corners of the cube in world [m]."""
        q = phys.qpos[self.obj_qpos]
        return keypoints(q[:3], q[3:7], self.cfg.object_half_size_m, jnp)

    def keypoint_dist(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        """Mean distance of the cube's corners to the reference's now [m]."""
        ref = self.reference(info["demo_origin"], info["demo_yaw"], info["step"])
        return rw.keypoint_distance(self.object_keypoints(phys), ref["keypoints"])

    # -- episode ---------------------------------------------------------------------------------
    def sample_initial(self, rng: jax.Array):
        """The demonstration moved by a random offset and yaw within the spawn area."""
        c = self.cfg
        k_xy, k_yaw, k_q = jax.random.split(rng, 3)
        h = jnp.asarray(c.spawn_half_extent_m[:2], jnp.float32)
        origin = jnp.concatenate(
            [self.spawn_center[:2] + jax.random.uniform(k_xy, (2,), minval=-h, maxval=h), self.spawn_center[2:]]
        )
        return self._initial_at(origin, uniform(k_yaw, (-c.spawn_yaw_rad, c.spawn_yaw_rad)), k_q)

    def _recorded_initial(self, rng: jax.Array):
        """The object where the demonstration was recorded (the deployed episode, :meth:`deployment`)."""
        return self._initial_at(self.demo_origin, jnp.zeros(()), jax.random.split(rng, 3)[2])

    def _initial_at(self, origin: jax.Array, yaw: jax.Array, k_q: jax.Array):
        """(qpos, qvel, act, task_info): the object at ``origin`` turned by ``yaw``, the arm at its
        start pose (drawn from ``k_q``)."""
        obj = jnp.concatenate([origin, quat_mul(yaw_quat(yaw, jnp), self.demo_quat0, jnp)])
        qpos = self.start_pose(k_q).at[self.obj_qpos].set(obj)
        task = {"demo_origin": origin, "demo_yaw": yaw, **self._task_inputs(origin, yaw, jnp.zeros((), jnp.int32))}
        return self.at_rest(qpos, task)

    def advance_task(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, **self._task_inputs(info["demo_origin"], info["demo_yaw"], info["step"])}

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {**super().robot_state(phys, info), "command": info["command"]}

    def deployment(self) -> Deployment:
        """The deployed episode: the demonstration where it was recorded (no offset, yaw 0), the
        object placed there; the reference's row k is the target and reference velocity of
        observation k, for the demonstration's length (then its last row held, as in training);
        only the object's pose streams in. Not judged where it ended: its statistics run over the
        episode, against the demonstration's time."""
        yaw = jnp.zeros(())
        ref = jax.vmap(lambda k: self._task_inputs(self.demo_origin, yaw, k))(jnp.arange(self.num_ref))
        reference = Reference(
            1.0 / self.robot.control_dt_s,
            {
                "target_pos_w": np.asarray(ref["target_pos_w"], np.float64),
                "command": np.asarray(ref["command"], np.float64),
            },
            loop=False,
        )
        params = {
            "demo_origin": self.demo_origin,
            "demo_yaw": yaw,
            **self._task_inputs(self.demo_origin, yaw, jnp.zeros((), jnp.int32)),
        }
        return Deployment(
            task_params=params, reference=reference, task_topics=self.task_topics, initial=self._recorded_initial
        )

    # -- rewards and statistics ------------------------------------------------------------------
    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        ref = self.reference(info["demo_origin"], info["demo_yaw"], info["step"])
        k = self.cfg.keypoint_gain_per_m
        return {
            "keypoints": rw.keypoint_tracking(self.object_keypoints(phys), ref["keypoints"], k),
            "reach": rw.tanh_kernel(self.ee_object_dist(phys), 5.0),
            "action_rate": rw.action_rate(action, info["last_action"]),
            "joint_vel": rw.joint_vel(self.joint_vel(phys)),
        }

    def stat_table(self) -> dict[str, EpisodeStat]:
        """``success`` (the final mean keypoint distance below ``success_radius_m``) and
        ``object_lost`` (the cube left ``max_object_dist_m`` around the spawn centre, which ends the
        episode), over all episodes; ``final_keypoint_dist_m`` and ``mean_keypoint_dist_m`` (over
        the episode's steps) [m], over the episodes that kept the cube."""
        return {
            "success": EpisodeStat("last", sample="keypoint_dist", below=self.cfg.success_radius_m),
            "object_lost": EpisodeStat("terminated"),
            "final_keypoint_dist_m": EpisodeStat("last", sample="keypoint_dist"),
            "mean_keypoint_dist_m": EpisodeStat("mean", sample="keypoint_dist"),
        }

    def stat_samples(self, phys, info):
        return {"keypoint_dist": self.keypoint_dist(phys, info)}
