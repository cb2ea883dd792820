"""``g1-velocity``: walk on flat ground following a commanded (vx, vy, yaw rate).

The recipe is Unitree's own for its 12-DoF G1 (unitree_rl_gym, ``legged_gym/envs/g1``): the legs
actuated at 50 Hz (``robot: g1_12dof``, waist and arms held; the 29- and 23-DoF G1 run too), a
gait clock the policy observes (``gait_phase``: (sin, cos) of each leg's phase, period
``gait_period_s``, the legs half a period apart), and legged_gym's reward terms plus the clock's:

- ``contact``: each foot in contact exactly when its phase is below ``stance_fraction``;
- ``feet_phase``: each sole's height following the clock's swing profile (0 in stance, a raised
  cosine up to ``swing_height_m`` over the swing), MuJoCo Playground's dense gait term: without it
  the policy stood on both feet, fell to the pushes and never stepped (8.6 M steps);
- ``swing_knee``: each knee following the clock, bent by ``swing_knee_rad`` more than the home
  pose at mid-swing (a raised cosine over the swing, the home pose in stance). A foot that bears
  weight does not rise a little when its knee bends a little, so the height and contact terms
  above are flat where the policy stands; the knee's angle is not, and it points the way to a
  step;
- ``feet_swing_height``: (z_sole - ``swing_height_m``)^2 for a foot in the air;
- ``contact_no_vel``: |v_foot|^2 for a foot in contact (no sliding);
- ``hip_pos``: hip roll and yaw kept near zero (no splayed or twisted legs).

The summed reward of a step is clipped at zero (legged_gym's ``only_positive_rewards``: ending an
episode early never pays). Foot contact is MuJoCo's: a touch sensor on a box around each sole,
in contact above ``contact_force_n``. Ends on a fall (base below ``min_base_height_m`` or tilted
past ``max_tilt_cos``; the feet-only training model lets a fallen body through the floor).

Episode statistics: the fall rate, and for the episodes that did not fall the velocity and
yaw-rate tracking errors, both instantaneous (RMS over the steps) and per gait cycle (RMS over
whole cycles of the error of the cycle's mean velocity: a walking base sways within a step, and
what a command asks for is the pace): :meth:`G1Velocity.stat_table`.

Randomised per episode (uniform; ranges in :class:`G1VelocityConfig`): floor friction, link
masses, PD stiffness, joint encoder offsets, the start pose and velocity; a push (a base
velocity change) every ``push_interval_s``.
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
from simreal.errors import ConfigError
from simreal.observations import gravity_b
from simreal.reference import Reference
from simreal.rewards import terms as rw
from simreal.rotations import rotate_inv
from simreal.sim.backends.base import PhysState
from simreal.sim.deployment import Deployment
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.tasks.joint_robot import FloorRobotTask, JointRobotConfig, uniform

FEET = ("left_foot", "right_foot")
FOOT_TOUCH_RADIUS_M = 0.15  # a sole is about 0.2-0.3 m long; the site sits at its centre


@dataclasses.dataclass(frozen=True)
class G1VelocityConfig(JointRobotConfig):
    episode_length_s: float = field(20.0, min=0.01, doc="episode time limit [s]")
    action_scale: float = field(0.5, min=0.0, doc="position-target delta at |a| = 1 [rad]")
    cmd_vx_m_s: tuple[float, ...] = field((0.0, 1.0), doc="commanded forward speed range [m/s]")
    cmd_vy_m_s: tuple[float, ...] = field((-0.3, 0.3), doc="commanded lateral speed range [m/s]")
    cmd_yaw_rad_s: tuple[float, ...] = field((-0.5, 0.5), doc="commanded yaw rate range [rad/s]")
    tracking_sigma: float = field(
        0.25, min=1e-6, doc="exp kernel width of the tracking rewards (legged_gym's sigma^2) [m^2/s^2]"
    )
    base_height_m: float | None = field(
        None,
        min=0.0,
        doc="target pelvis height [m]; None: the home pose's (G1 0.784, unitree_rl_gym 0.78; H1 1.034, 1.05)",
    )
    min_base_height_m: float | None = field(
        None, min=0.0, doc="lower ends the episode [m]; None: 0.64 of the home pose's (G1 0.5)"
    )
    max_tilt_cos: float = field(0.5, doc="gravity_b z above -this ends the episode")
    gait_period_s: float = field(0.8, min=0.02, doc="the gait clock's period [s]")
    stance_fraction: float = field(0.55, min=0.0, max=1.0, doc="share of the period a foot is in stance")
    swing_height_m: float = field(0.1, min=0.0, doc="sole height a foot in the air aims for [m]")
    feet_phase_sigma_m: float = field(
        0.07, min=1e-6, doc="feet_phase's kernel width [m] (Playground's sigma^2 is 0.01 m^2 for a 0.15 m swing)"
    )
    swing_knee_rad: float = field(
        0.8,
        min=0.0,
        doc="the knee's bend beyond home at mid-swing [rad] (with the hip "
        "and ankle pitch 0.4 rad each, a 9 cm step on the G1)",
    )
    swing_knee_sigma_rad: float = field(0.3, min=1e-6, doc="swing_knee's kernel width [rad]")
    contact_force_n: float = field(1.0, min=0.0, doc="normal force above which a foot is in contact [N]")
    soft_limit: float = field(0.9, min=0.0, max=1.0, doc="share of each joint range free of the limit penalty")
    friction: tuple[float, ...] = field((0.4, 1.2), doc="floor sliding friction range")
    mass_scale: tuple[float, ...] = field((0.9, 1.1), doc="link mass scale range")
    kp_scale: tuple[float, ...] = field((0.9, 1.1), doc="PD stiffness scale range")
    joint_offset_rad: float = field(0.02, min=0.0, doc="encoder offsets, uniform +- [rad]")
    start_joint_rad: float = field(0.1, min=0.0, doc="start pose: home + uniform +- this per joint [rad]")
    start_vel_m_s: float = field(0.2, min=0.0, doc="start base velocity, uniform +- per axis [m/s, rad/s]")
    push_interval_s: float = field(8.0, min=0.0, doc="a random push every this many seconds (0: none)")
    push_max_vel_m_s: float = field(0.5, min=0.0, doc="push: base xy velocity change, uniform +- [m/s]")

    def __post_init__(self) -> None:
        for name in ("cmd_vx_m_s", "cmd_vy_m_s", "cmd_yaw_rad_s", "friction", "mass_scale", "kp_scale"):
            lo_hi = getattr(self, name)
            if len(lo_hi) != 2 or lo_hi[0] > lo_hi[1]:
                raise ConfigError(f"env.{name}", f"expected [low, high] with low <= high, got {list(lo_hi)}")


class G1Velocity(FloorRobotTask):
    """Humanoid (Unitree G1; 12, 23 or 29 DoF; H1 too): walk on flat ground following a commanded (vx, vy, yaw rate)."""

    config_class = G1VelocityConfig
    cfg: G1VelocityConfig
    tracked_sites = FEET
    obs_terms = ("ang_vel_b", "gravity_b", "command", "joint_pos_rel", "joint_vel", "last_action", "gait_phase")
    critic_obs_terms = ("lin_vel_b", *obs_terms)
    obs_noise_std = {"ang_vel_b": 0.2, "gravity_b": 0.05, "joint_pos_rel": 0.01, "joint_vel": 1.5}
    only_positive_rewards = True
    reward_scales = {  # unitree_rl_gym's G1 (g1_config.py; torques from its base config), then the gait's
        "tracking_lin_vel": 1.0,
        "tracking_ang_vel": 0.5,
        "lin_vel_z": -2.0,
        "ang_vel_xy": -0.05,
        "orientation": -1.0,
        "base_height": -10.0,
        "torques": -1e-5,
        "dof_vel": -1e-3,
        "action_rate": -0.01,
        "dof_pos_limits": -5.0,
        "alive": 0.15,
        "hip_pos": -1.0,
        "contact_no_vel": -0.2,
        "feet_swing_height": -20.0,
        "feet_phase": 1.0,  # Playground's G1 weight
        # the gait's weight above unitree_rl_gym's 0.18, and the knee's: with 0.18 and 1.0 the policy
        # stood and never stepped in 5 M steps; with these it stepped within 2 M (docs/benchmarks-log.md)
        "contact": 1.0,
        "swing_knee": 2.0,
    }

    # -- model: a touch zone and a velocity sensor per sole ----------------------------------------
    def customize_spec(self, s: mujoco.MjSpec) -> None:
        """Per foot: a touch zone holding a touch sensor (``<foot>_touch``: the normal force of the
        foot body's contacts inside the zone [N]) and a velocity sensor on the sole site
        (``<foot>_vel``, world frame [m/s]). The zone is a box 5 mm larger than the sole on every
        side where the model has a sole geom named like the site (simreal's G1 and H1); otherwise,
        as for a user's mesh feet, a sphere of ``FOOT_TOUCH_RADIUS_M`` about the sole site, which
        counts only the foot body's own contacts (MuJoCo's touch sensor reads the site's body)."""
        for foot in FEET:
            g = s.geom(foot)
            if g is not None:
                half = np.asarray(g.size[:3], np.float64) + 0.005
                g.parent.add_site(
                    name=f"{foot}_touch_zone",
                    type=mujoco.mjtGeom.mjGEOM_BOX,
                    size=half.tolist(),
                    pos=list(g.pos),
                    quat=list(g.quat),
                    group=4,
                )
            else:
                site = s.site(foot)
                site.parent.add_site(
                    name=f"{foot}_touch_zone",
                    type=mujoco.mjtGeom.mjGEOM_SPHERE,
                    size=[FOOT_TOUCH_RADIUS_M, 0, 0],
                    pos=list(site.pos),
                    group=4,
                )
            s.add_sensor(
                name=f"{foot}_touch",
                type=mujoco.mjtSensor.mjSENS_TOUCH,
                objtype=mujoco.mjtObj.mjOBJ_SITE,
                objname=f"{foot}_touch_zone",
            )
            s.add_sensor(
                name=f"{foot}_vel",
                type=mujoco.mjtSensor.mjSENS_FRAMELINVEL,
                objtype=mujoco.mjtObj.mjOBJ_SITE,
                objname=foot,
            )

    def _index(self, m: mujoco.MjModel) -> None:
        super()._index(m)
        adr = {
            f"{f}_{k}": int(m.sensor_adr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, f"{f}_{k}")])
            for f in FEET
            for k in ("touch", "vel")
        }
        self.touch_adr = jnp.asarray([adr[f"{f}_touch"] for f in FEET])
        self.foot_vel_slices = [slice(adr[f"{f}_vel"], adr[f"{f}_vel"] + 3) for f in FEET]
        names = self.robot.actuator_names
        self.hip_ids = jnp.asarray([i for i, n in enumerate(names) if "hip_roll" in n or "hip_yaw" in n], jnp.int32)
        self.knee_ids = jnp.asarray([names.index(f"{side}_knee_joint") for side in ("left", "right")])
        lo, hi = np.asarray(m.actuator_ctrlrange[:, 0]), np.asarray(m.actuator_ctrlrange[:, 1])
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        self.soft_lo = jnp.asarray(mid - self.cfg.soft_limit * half, jnp.float32)
        self.soft_hi = jnp.asarray(mid + self.cfg.soft_limit * half, jnp.float32)
        self.cycle_steps = max(1, round(self.cfg.gait_period_s / self.robot.control_dt_s))
        home_z = float(self.home_qpos[2])
        c = self.cfg
        self.base_height_m = home_z if c.base_height_m is None else c.base_height_m
        self.min_base_height_m = 0.64 * home_z if c.min_base_height_m is None else c.min_base_height_m

    # -- the gait clock --------------------------------------------------------------------------
    def leg_phase(self, step: jax.Array) -> jax.Array:
        """(2,) each leg's phase in [0, 1) at control step ``step``: left t / T, right half a period on."""
        t = step * self.ctrl_dt / self.cfg.gait_period_s
        return jnp.mod(jnp.stack([t, t + 0.5]), 1.0)

    def gait_clock(self, step: jax.Array) -> jax.Array:
        """The ``gait_phase`` observation (sin, cos of left, then right) at control step ``step``."""
        angle = 2 * jnp.pi * self.leg_phase(step)
        return jnp.stack([jnp.sin(angle[0]), jnp.cos(angle[0]), jnp.sin(angle[1]), jnp.cos(angle[1])])

    def deployment(self) -> Deployment:
        """The deployed episode: stand still (stepping in place) unless a geometry_msgs/Twist topic
        commands a velocity; the gait clock, one period at the control rate, looping; the
        rehearsal's robot starts standing at home, at rest."""
        rows = jax.vmap(self.gait_clock)(jnp.arange(self.cycle_steps))
        return Deployment(
            task_params={"command": [0.0, 0.0, 0.0]},
            reference=Reference(1.0 / self.ctrl_dt, {"gait_phase": np.asarray(rows, np.float64)}, loop=True),
            initial=self._standing_initial,
        )

    # -- randomisation ---------------------------------------------------------------------------
    def perturb(self, phys: PhysState, info: Mapping[str, Any], rng: jax.Array) -> PhysState:
        """legged_gym's pushes: every push_interval_s, add a uniform random xy velocity to the base."""
        c = self.cfg
        if not (c.randomize and c.push_interval_s > 0 and c.push_max_vel_m_s > 0):
            return phys
        every = max(1, round(c.push_interval_s / self.ctrl_dt))
        due = (info["step"] > 0) & (info["step"] % every == 0)
        kick = jax.random.uniform(rng, (2,), minval=-c.push_max_vel_m_s, maxval=c.push_max_vel_m_s)
        return dataclasses.replace(phys, qvel=phys.qvel.at[0:2].add(jnp.where(due, kick, 0.0)))

    # -- episode ---------------------------------------------------------------------------------
    def sample_initial(self, rng: jax.Array):
        c, m = self.cfg, self.mj_model
        k_x, k_y, k_w, k_off, k_q, k_v = jax.random.split(rng, 6)
        cmd = jnp.stack([uniform(k_x, c.cmd_vx_m_s), uniform(k_y, c.cmd_vy_m_s), uniform(k_w, c.cmd_yaw_rad_s)])
        offset = uniform(k_off, (-c.joint_offset_rad, c.joint_offset_rad), (m.nu,))
        qpos, qvel = self.home_qpos, jnp.zeros(m.nv)
        if c.randomize:
            dq = uniform(k_q, (-c.start_joint_rad, c.start_joint_rad), (m.nu,))
            qpos = qpos + self.L.T @ dq
            qvel = qvel.at[0:6].set(uniform(k_v, (-c.start_vel_m_s, c.start_vel_m_s), (6,)))
        task = {"command": cmd, "joint_offset": offset}
        return qpos, qvel, jnp.zeros(m.na), task

    def _standing_initial(self, rng: jax.Array):
        """A sampled episode's task inputs, standing at home, at rest."""
        qpos, qvel, act, task = self.sample_initial(rng)
        return self.home_qpos, jnp.zeros_like(qvel), act, task

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {
            "pos_w": phys.qpos[0:3],
            "quat_wxyz": phys.qpos[3:7],
            "lin_vel_w": phys.qvel[0:3],
            "ang_vel_b": phys.qvel[3:6],  # MuJoCo's free-joint angular velocity is in the body frame
            "joint_pos": self.joint_pos(phys) + info["joint_offset"],
            "joint_vel": self.joint_vel(phys),
            "default_joint_pos": self.default_joint_pos,
            "command": info["command"],
            "last_action": info["last_action"],
            "gait_phase": self.gait_clock(info["step"]),
        }

    def feet_contact(self, phys: PhysState) -> jax.Array:
        """(2,) bool: left, right sole pressing on something with more than ``contact_force_n``."""
        return phys.sensordata[self.touch_adr] > self.cfg.contact_force_n

    def stance(self, step: jax.Array) -> jax.Array:
        """(2,) bool: where the gait clock wants each foot on the ground at control step ``step``."""
        return self.leg_phase(step) < self.cfg.stance_fraction

    # -- rewards ---------------------------------------------------------------------------------
    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        c = self.cfg
        sigma = math.sqrt(c.tracking_sigma)  # legged_gym's tracking_sigma is the kernel's sigma^2
        q = phys.qpos[3:7]
        v_b = rotate_inv(q, phys.qvel[0:3], jnp)
        w_b = phys.qvel[3:6]
        cmd = info["command"]
        g_b = gravity_b({"quat_wxyz": q}, jnp)
        joint_pos = self.joint_pos(phys)
        contact = self.feet_contact(phys)
        sole_z = jnp.stack([self.site_pos(phys, f)[2] for f in FEET])
        foot_v = jnp.stack([phys.sensordata[s] for s in self.foot_vel_slices])
        # the clock of the step's start: the phase the policy saw when it chose the action
        phase = self.leg_phase(info["step"] - 1)
        wanted = self.stance(info["step"] - 1)
        knee_ref = self.default_joint_pos[self.knee_ids] + rw.swing_profile(phase, c.stance_fraction, c.swing_knee_rad)
        return {
            "tracking_lin_vel": rw.exp_kernel(rw.sq_norm(cmd[:2] - v_b[:2]), sigma),
            "tracking_ang_vel": rw.exp_kernel(jnp.square(cmd[2] - w_b[2]), sigma),
            "lin_vel_z": rw.lin_vel_z(v_b),
            "ang_vel_xy": rw.ang_vel_xy(w_b),
            "orientation": rw.orientation(g_b),
            "base_height": rw.base_height(phys.qpos[2], self.base_height_m),
            "torques": rw.torques(self.torques(phys, self.applied_action(info), info)),
            "dof_vel": rw.joint_vel(self.joint_vel(phys)),
            "action_rate": rw.action_rate(action, info["last_action"]),
            "dof_pos_limits": rw.outside_range(joint_pos, self.soft_lo, self.soft_hi),
            "alive": rw.alive(),
            "hip_pos": rw.sq_norm(joint_pos[self.hip_ids]),
            "contact_no_vel": rw.contact_slip(foot_v, contact),
            "feet_swing_height": rw.swing_height(sole_z, contact, c.swing_height_m),
            "contact": rw.contact_schedule(contact, wanted),
            "feet_phase": rw.exp_kernel(
                rw.sq_norm(sole_z - rw.swing_profile(phase, c.stance_fraction, c.swing_height_m)), c.feet_phase_sigma_m
            ),
            "swing_knee": rw.exp_kernel(rw.sq_norm(joint_pos[self.knee_ids] - knee_ref), c.swing_knee_sigma_rad),
        }

    def termination_causes(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        g_b = gravity_b({"quat_wxyz": phys.qpos[3:7]}, jnp)
        return {"low_base": phys.qpos[2] < self.min_base_height_m, "tilt": g_b[2] > -self.cfg.max_tilt_cos}

    # -- statistics ------------------------------------------------------------------------------
    def stat_table(self) -> dict[str, EpisodeStat]:
        """``fall`` and ``success`` (= did not fall) over all episodes; for the episodes that did
        not fall, the command tracking errors (base velocity in the body frame):
        ``vel_rmse_m_s`` and ``yaw_rate_rmse_rad_s``, the RMS over the steps of |cmd_xy - v_xy|
        [m/s] and cmd_yaw - w_z [rad/s]; ``vel_err_cycle_m_s`` and ``yaw_err_cycle_rad_s``, the RMS
        over whole gait cycles of the error of the cycle's mean velocity (the pace);
        ``vel_err_cycle_mean_m_s`` and ``yaw_err_cycle_mean_rad_s``, the mean over those cycles of
        its magnitude (the RMS weighs the few large errors after the start and the pushes more)."""
        w = self.cycle_steps
        return {
            "fall": EpisodeStat("terminated"),
            "success": EpisodeStat("survived"),
            "vel_rmse_m_s": EpisodeStat("rms", sample="vel_err"),
            "yaw_rate_rmse_rad_s": EpisodeStat("rms", sample="yaw_err"),
            "vel_err_cycle_m_s": EpisodeStat("rms", sample="vel_err_xy", window=w, width=2),
            "yaw_err_cycle_rad_s": EpisodeStat("rms", sample="yaw_err_z", window=w),
            "vel_err_cycle_mean_m_s": EpisodeStat("mean", sample="vel_err_xy", window=w, width=2),
            "yaw_err_cycle_mean_rad_s": EpisodeStat("mean", sample="yaw_err_z", window=w),
        }

    def stat_samples(self, phys, info):
        v_b = rotate_inv(phys.qpos[3:7], phys.qvel[0:3], jnp)
        err = info["command"] - jnp.concatenate([v_b[:2], phys.qvel[5:6]])  # (vx, vy, yaw rate), body frame
        return {
            "vel_err": jnp.linalg.norm(err[:2]),
            "yaw_err": jnp.abs(err[2]),
            "vel_err_xy": err[:2],
            "yaw_err_z": err[2:],
        }
