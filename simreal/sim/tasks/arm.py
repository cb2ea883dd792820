"""The arm family's base: a fixed-base arm with an ``end_effector`` site and a ``home`` keyframe.

Every arm task (``arm-reach``, ``arm-reach-choice``, and the cube tasks of
:mod:`simreal.sim.tasks.arm_object`) is an :class:`ArmTask` plus what the task itself asks for
(its goal, its rewards, its success); no task inherits from another task. Runs on any such arm
(Franka, SO-100: the ``robot`` key).

Randomised per episode: the PD stiffness kp of each actuator (``actuator_gainprm[0]`` and
``actuator_biasprm[1] = -kp`` scaled together), link masses, the initial joint pose around home.
The default goal is ``info["target_pos_w"]``: the rewards and statistics here bring the end
effector there (a task whose goal is for an object overrides them).

Seen through cameras: with ``env.pixel_cameras`` named, the policy's observation is a dict (Brax's
vision keys) of its state vector without the terms a camera stands in for
(:attr:`ArmTask.pixel_hidden_terms`: the cube's position, which it must then see), the images
``pixels/<camera>`` ((H, W, 3) uint8; ``depth/<camera>`` [m] for cameras asked for depth) and a
noise-free ``privileged_state`` of the full state vector for an asymmetric critic, which a
simulator has and a robot does not::

    {"state": (n,), "privileged_state": (n_priv,), "pixels/front": (64, 64, 3) uint8}

Images come from :class:`~simreal.sim.render.BatchRenderer` through one host callback per step
for the whole batch, on any physics backend; the cameras are the task's ``cameras`` (added to the
model, which draws the goal as a green sphere) and the robot spec's ``model.cameras`` (a wrist
camera).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from simreal.config import field
from simreal.errors import ConfigError, UnknownNameError
from simreal.observations import build_observation
from simreal.rewards import terms as rw
from simreal.robot_spec import CameraSpec, RobotSpec, check_cameras
from simreal.sim.backends.base import ModelParams, PhysState
from simreal.sim.deployment import Deployment
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.tasks.joint_robot import SLEW_LIMIT_DOC, JointRobotConfig, JointRobotTask, uniform

if TYPE_CHECKING:
    from simreal.sim.render import BatchRenderer

#: Above and in front of a Franka on the floor, looking down on the cube's spawn and goal area
#: (about +-0.35 m around x = 0.42 m) with the gripper at the top of the image (the object tasks').
FRONT = CameraSpec("front", pos=(0.75, 0.0, 0.7), lookat=(0.42, 0.0, 0.0), fovy_deg=50.0, width=64, height=64)
#: In front of and beside a Franka, on the reach's goal box around the home pose's gripper.
REACH_VIEW = CameraSpec("front", pos=(0.95, 0.55, 0.65), lookat=(0.3, 0.0, 0.42), fovy_deg=45.0, width=64, height=64)
#: Radius of the goal marker the cameras see (a green sphere, no collision) [m].
GOAL_MARKER_RADIUS_M = 0.02


def add_marker(s: mujoco.MjSpec, name: str, radius_m: float, rgba: tuple[float, ...]) -> None:
    """A mocap sphere ``name`` that only cameras see (no collision, no mass in the dynamics)."""
    marker = s.worldbody.add_body(name=name, mocap=True, pos=[0.5, 0.0, 0.3])
    marker.add_geom(
        name=f"{name}_geom",
        type=mujoco.mjtGeom.mjGEOM_SPHERE,
        size=[radius_m, 0, 0],
        contype=0,
        conaffinity=0,
        rgba=list(rgba),
    )


@dataclasses.dataclass(frozen=True)
class ArmConfig(JointRobotConfig):
    episode_length_s: float = field(4.0, min=0.01, doc="episode time limit [s]")
    action_scale: float = field(0.3, min=0.0, doc="position-target delta at |a| = 1 [rad]")
    # On for arms: the pick residual that read 0.961 without it read 0.578 once its arm moved at
    # the Franka's speed limits, as the deploy safety layer moves it (docs/benchmarks-log.md).
    slew_limit: bool = field(True, doc=SLEW_LIMIT_DOC)
    goal_half_extent_m: tuple[float, ...] = field((0.15, 0.15, 0.1), doc="goal box half sizes around home [m]")
    init_joint_noise_rad: float = field(0.1, min=0.0, doc="initial joint offset from home, uniform +- [rad]")
    kp_scale: tuple[float, ...] = field((0.8, 1.2), doc="PD stiffness scale range")
    mass_scale: tuple[float, ...] = field((0.9, 1.1), doc="link mass scale range")
    success_radius_m: float = field(0.05, min=0.0)
    cameras: tuple[CameraSpec, ...] = field(
        (REACH_VIEW,), doc="cameras the task adds to the scene (the default is placed for a Franka)"
    )
    pixel_cameras: tuple[str, ...] = field(
        (), doc="cameras the policy sees, the task's or the robot's ((): the state alone, no images)"
    )
    render_threads: int = field(0, min=0, doc="renderer threads, one GL context each (0: one per CPU core)")


class ArmTask(JointRobotTask):
    """Base of the arm tasks (see module docstring); a task adds its goal, rewards and success."""

    cfg: ArmConfig
    tracked_sites = ("end_effector",)
    obs_terms: tuple[str, ...] = ("joint_pos_rel", "joint_vel", "target_pos_w", "last_action")
    obs_noise_std = {"joint_pos_rel": 0.005, "joint_vel": 0.05}
    #: the goal from the end effector too: a learned reward then scores a distance it can see
    #: directly, rather than one an MLP must learn to subtract (measured: docs/benchmarks-log.md)
    environment_state_terms: tuple[str, ...] = ("ee_pos_w", "target_pos_w", "ee_to_target_w")
    reward_scales: Mapping[str, float] = {"distance": -1.0, "reach": 2.0, "action_rate": -0.02, "joint_vel": -1e-3}
    #: the goal arrives as a pose (a GUI, a planner, a perception node) and is held until replaced
    task_topics: Mapping[str, Mapping[str, str]] = {
        "goal": {"topic": "/simreal/goal_pose", "type": "geometry_msgs/msg/PoseStamped", "role": "target"}
    }
    #: State terms the cameras stand in for when the policy sees through ``env.pixel_cameras``
    #: (they stay in the critic's ``privileged_state``).
    pixel_hidden_terms: tuple[str, ...] = ()

    def __init__(self, robot: RobotSpec, cfg: ArmConfig, backend: str = "auto"):
        if cfg.pixel_cameras:
            # the critic reads the full state; the policy what a robot without a tracker has
            self.critic_obs_terms = type(self).obs_terms
            self.obs_terms = tuple(t for t in type(self).obs_terms if t not in self.pixel_hidden_terms)
        self.renderer: BatchRenderer | None = None
        super().__init__(robot, cfg, backend)
        if cfg.pixel_cameras:
            self._start_renderer()

    def _start_renderer(self) -> None:
        """The batch renderer of ``env.pixel_cameras`` and the dict observation's shapes."""
        from simreal.sim.render import BatchRenderer

        if self.cfg.obs_history_steps > 1:
            raise ConfigError(
                "env.obs_history_steps",
                f"a policy that sees env.pixel_cameras takes 1 frame, not {self.cfg.obs_history_steps}",
            )
        specs = {c.name: c for c in self.robot.model.cameras + self.cfg.cameras}
        for name in self.cfg.pixel_cameras:
            if name not in specs:
                raise UnknownNameError("camera (env.pixel_cameras)", name, specs)
        self.renderer = BatchRenderer(
            self.mj_model,
            self.cfg.pixel_cameras,
            depth=[n for n in self.cfg.pixel_cameras if specs[n].depth],
            nthread=self.cfg.render_threads or None,
        )
        obs = jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs  # traced only: nothing renders
        self._obs_shapes = {k: tuple(v.shape) for k, v in obs.items()}

    @property
    def observation_size(self) -> int | Mapping[str, tuple[int, ...]]:
        """The state vector's length, or with ``env.pixel_cameras`` the shape of each key (Brax's
        ``ObservationSize`` mapping)."""
        return self._obs_shapes if self.renderer is not None else super().observation_size

    def observe_extra(self, phys: PhysState, info: Mapping[str, Any], active: jax.Array) -> dict[str, jax.Array]:
        if self.renderer is None:
            return {}
        privileged = build_observation(self.critic_obs_terms, self.observed_state(phys, info), jnp)
        return {"privileged_state": privileged, **self.renderer.observe(phys.qpos, active, self.mocap_pos(info))}

    # -- model: cameras and markers --------------------------------------------------------------
    def customize_spec(self, s: mujoco.MjSpec) -> None:
        """The scene cameras, and the goal as a mocap sphere that only cameras see (no collision,
        no mass in the dynamics); :meth:`mocap_pos` puts it on each episode's goal."""
        from simreal.sim.cameras import add_cameras
        from simreal.sim.robots.elements import model_origin

        self.add_markers(s)
        check_cameras(self.cfg.cameras, "env.cameras", self.robot.source)
        add_cameras(s, self.cfg.cameras, "env.cameras", self.robot.source, model_origin(self.robot))

    def add_markers(self, s: mujoco.MjSpec) -> None:
        """The goal's green sphere (:meth:`mocap_pos` places it)."""
        add_marker(s, "goal_marker", GOAL_MARKER_RADIUS_M, (0.1, 0.8, 0.2, 0.8))

    def mocap_pos(self, info: Mapping[str, Any]) -> jax.Array:
        """The goal marker on the goal, (1, 3) [m]."""
        return info["target_pos_w"][None]

    def build_model(self) -> mujoco.MjModel:
        m = super().build_model()
        d = mujoco.MjData(m)
        mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home"))
        mujoco.mj_forward(m, d)
        self.home_ee_pos = jnp.asarray(d.site("end_effector").xpos, jnp.float32)
        self.joint_qpos = jnp.asarray(np.flatnonzero(np.asarray(self.L).any(axis=0)))
        # the start pose's bounds: hinge joints get init_joint_noise_rad, every joint stays in its range
        hinge, lo, hi = (
            np.zeros(m.nq, np.float32),
            np.full(m.nq, -np.inf, np.float32),
            np.full(m.nq, np.inf, np.float32),
        )
        for j in range(m.njnt):
            adr = int(m.jnt_qposadr[j])
            if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE:
                hinge[adr] = 1.0
            if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE) and m.jnt_limited[j]:
                lo[adr], hi[adr] = m.jnt_range[j]
        self._hinge, self._q_lo, self._q_hi = jnp.asarray(hinge), jnp.asarray(lo), jnp.asarray(hi)
        return m

    def start_pose(self, rng: jax.Array) -> jax.Array:
        """Home with each arm hinge moved by uniform +- ``init_joint_noise_rad``, clipped to the
        joints' ranges. Slide joints (a Franka's fingers, 0-0.04 m) keep their home: a noise in
        radians once opened the hand to 0.14 m, beyond its range, and the deploy envelope stopped
        such a rehearsal before its first command."""
        c = self.cfg
        noise = uniform(rng, (-c.init_joint_noise_rad, c.init_joint_noise_rad), (self.mj_model.nq,)) * self._hinge
        qpos = self.home_qpos.at[self.joint_qpos].add(noise[self.joint_qpos])
        return jnp.clip(qpos, self._q_lo, self._q_hi)

    def at_rest(self, qpos: jax.Array, task: dict[str, Any]):
        """(qpos, qvel, act, task_info) of an episode that starts at ``qpos`` with nothing moving."""
        m = self.mj_model
        return qpos, jnp.zeros(m.nv), jnp.zeros(m.na), task

    # -- randomisation ---------------------------------------------------------------------------
    def nominal_params(self) -> ModelParams:
        m = self.mj_model
        return {
            k: jnp.asarray(getattr(m, k), jnp.float32) for k in ("body_mass", "actuator_gainprm", "actuator_biasprm")
        }

    def randomize(self, params: ModelParams, rng: jax.Array) -> ModelParams:
        c, nu = self.cfg, self.mj_model.nu
        k_kp, k_m = jax.random.split(rng)
        s_kp = uniform(k_kp, c.kp_scale, (nu,))  # per-actuator stiffness error
        return {
            "body_mass": params["body_mass"] * uniform(k_m, c.mass_scale, params["body_mass"].shape),
            "actuator_gainprm": params["actuator_gainprm"].at[:, 0].multiply(s_kp),
            "actuator_biasprm": params["actuator_biasprm"].at[:, 1].multiply(s_kp),  # bias1 = -kp
        }

    # -- episode ---------------------------------------------------------------------------------
    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {
            "joint_pos": self.joint_pos(phys),
            "joint_vel": self.joint_vel(phys),
            "default_joint_pos": self.default_joint_pos,
            "target_pos_w": info["target_pos_w"],
            "last_action": info["last_action"],
            "ee_pos_w": self.site_pos(phys, "end_effector"),
        }

    def deployment(self) -> Deployment:
        """The goal (and the object's pose) as topics; a rehearsal judged where it ended: the hand
        (an object task: the cube) against the goal."""
        return Deployment(task_topics=self.task_topics, judged_at_end=True)

    def distance(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        """End effector to goal [m]."""
        return jnp.linalg.norm(self.site_pos(phys, "end_effector") - info["target_pos_w"])

    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        d = self.distance(phys, info)
        return {
            "distance": d,
            "reach": rw.exp_kernel(jnp.square(d), 0.05),  # 5 cm wide
            "action_rate": rw.action_rate(action, info["last_action"]),
            "joint_vel": rw.joint_vel(self.joint_vel(phys)),
        }

    # -- statistics ------------------------------------------------------------------------------
    def stat_table(self) -> dict[str, EpisodeStat]:
        """``success``: the final end-effector distance below ``success_radius_m``, over all
        episodes; ``final_distance_m`` [m], over the episodes whose simulation stayed finite (the
        only way a reach episode ends early, and a failure)."""
        return {
            "success": EpisodeStat("last", sample="distance", below=self.cfg.success_radius_m),
            "final_distance_m": EpisodeStat("last", sample="distance"),
        }

    def stat_samples(self, phys, info):
        return {"distance": self.distance(phys, info)}
