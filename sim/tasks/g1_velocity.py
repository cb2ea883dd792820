"""``g1-velocity``: walk on flat ground following a commanded (vx, vy, yaw rate).

legged_gym-style rewards (each a tiny named term, weights in ``reward_scales``): velocity
tracking with exp kernels, z velocity, roll/pitch rate, orientation, base height, torques,
action rate, feet air time, alive. Ends on a fall (base below ``min_base_height_m`` or
tilted past ``max_tilt_cos``; a stand-in for base contact, which ``PhysState`` does not carry).
Episode statistics: fall rate, and the velocity and yaw-rate tracking RMSE of the episodes that
did not fall (:meth:`G1Velocity.final_stats`).

Randomised per episode (uniform; ranges in :class:`G1VelocityConfig`): floor friction, link
masses, PD stiffness (kp scale via ``actuator_gainprm``/``actuator_biasprm``), joint encoder
offsets (added to the observed joint positions). Pushes are not modelled yet: the env
contract has no hook to perturb the state mid-episode.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from simreal.config import field
from simreal.observations import gravity_b, rotate_inv
from simreal.rewards import terms as rw
from simreal.sim.backends.base import PhysState
from simreal.sim.episode_stats import defined_where
from simreal.sim.tasks.joint_robot import FloorRobotTask, JointRobotConfig, uniform


@dataclasses.dataclass(frozen=True)
class G1VelocityConfig(JointRobotConfig):
    episode_length_s: float = field(20.0, min=0.01, doc="episode time limit [s]")
    action_scale: float = field(0.25, min=0.0, doc="position-target delta at |a| = 1 [rad]")
    cmd_vx_m_s: tuple[float, ...] = field((-1.0, 1.0), doc="commanded forward speed range [m/s]")
    cmd_vy_m_s: tuple[float, ...] = field((-0.5, 0.5), doc="commanded lateral speed range [m/s]")
    cmd_yaw_rad_s: tuple[float, ...] = field((-1.0, 1.0), doc="commanded yaw rate range [rad/s]")
    tracking_sigma: float = field(0.25, min=1e-6, doc="exp kernel width of the tracking rewards")
    base_height_m: float = field(0.75, min=0.0, doc="target pelvis height [m]")
    min_base_height_m: float = field(0.4, min=0.0, doc="lower ends the episode [m]")
    max_tilt_cos: float = field(0.5, doc="gravity_b z above -this ends the episode")
    feet_air_time_s: float = field(0.4, min=0.0, doc="air time rewarded beyond this [s]")
    contact_height_m: float = field(0.03, min=0.0, doc="foot sole below this counts as contact [m]")
    friction: tuple[float, ...] = field((0.4, 1.2), doc="floor sliding friction range")
    mass_scale: tuple[float, ...] = field((0.9, 1.1), doc="link mass scale range")
    kp_scale: tuple[float, ...] = field((0.9, 1.1), doc="PD stiffness scale range")
    joint_offset_rad: float = field(0.02, min=0.0, doc="encoder offsets, uniform +- [rad]")
    push_interval_s: float = field(8.0, min=0.0, doc="a random push every this many seconds (0: none)")
    push_max_vel_m_s: float = field(0.5, min=0.0, doc="push: base xy velocity change, uniform +- [m/s]")


class G1Velocity(FloorRobotTask):
    """Humanoid (Unitree G1, 29 or 23 DoF): walk on flat ground following a commanded (vx, vy, yaw rate)."""

    config_class = G1VelocityConfig
    cfg: G1VelocityConfig
    tracked_sites = ("left_foot", "right_foot")
    obs_terms = ("ang_vel_b", "gravity_b", "command", "joint_pos_rel", "joint_vel", "last_action")
    critic_obs_terms = ("lin_vel_b", "ang_vel_b", "gravity_b", "command", "joint_pos_rel", "joint_vel",
                        "last_action")
    obs_noise_std = {"ang_vel_b": 0.2, "gravity_b": 0.05, "joint_pos_rel": 0.01, "joint_vel": 1.5}
    reward_scales = {
        "tracking_lin_vel": 1.0, "tracking_ang_vel": 0.5, "lin_vel_z": -2.0, "ang_vel_xy": -0.05,
        "orientation": -1.0, "base_height": -10.0, "torques": -1e-5, "action_rate": -0.01,
        "feet_air_time": 1.0, "alive": 0.15,
    }

    def bundle_task_params(self) -> dict[str, Any]:
        """Stand still unless a geometry_msgs/Twist topic commands a velocity."""
        return {"command": [0.0, 0.0, 0.0]}

    # -- randomisation ---------------------------------------------------------------------------
    def perturb(self, phys: PhysState, info: Mapping[str, Any], rng: jax.Array) -> PhysState:
        """legged_gym's pushes: every push_interval_s, add a uniform random xy velocity to the base."""
        c = self.cfg
        if not (c.randomize and c.push_interval_s > 0 and c.push_max_vel_m_s > 0):
            return phys
        every = max(1, round(c.push_interval_s / self.ctrl_dt))
        due = (info["step"] > 0) & (info["step"] % every == 0)
        kick = jax.random.uniform(rng, (2,), minval=-c.push_max_vel_m_s, maxval=c.push_max_vel_m_s)
        return phys.replace(qvel=phys.qvel.at[0:2].add(jnp.where(due, kick, 0.0)))

    # -- episode ---------------------------------------------------------------------------------
    def sample_initial(self, rng: jax.Array):
        c = self.cfg
        k_x, k_y, k_w, k_off = jax.random.split(rng, 4)
        cmd = jnp.stack([uniform(k_x, c.cmd_vx_m_s), uniform(k_y, c.cmd_vy_m_s), uniform(k_w, c.cmd_yaw_rad_s)])
        offset = uniform(k_off, (-c.joint_offset_rad, c.joint_offset_rad), (self.mj_model.nu,))
        m = self.mj_model
        task = {"command": cmd, "joint_offset": offset, "feet_air_time": jnp.zeros(2)}
        return self.home_qpos, jnp.zeros(m.nv), jnp.zeros(m.na), task

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {"pos_w": phys.qpos[0:3], "quat_wxyz": phys.qpos[3:7], "lin_vel_w": phys.qvel[0:3],
                "ang_vel_b": phys.qvel[3:6],  # MuJoCo's free-joint angular velocity is in the body frame
                "joint_pos": self.joint_pos(phys) + info["joint_offset"], "joint_vel": self.joint_vel(phys),
                "default_joint_pos": self.default_joint_pos, "command": info["command"],
                "last_action": info["last_action"]}

    def feet_contact(self, phys: PhysState) -> jax.Array:
        """(2,) bool: left, right sole within ``contact_height_m`` of the floor."""
        z = jnp.stack([self.site_pos(phys, "left_foot")[2], self.site_pos(phys, "right_foot")[2]])
        return z < self.cfg.contact_height_m

    # -- rewards ---------------------------------------------------------------------------------
    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        c = self.cfg
        sigma = math.sqrt(c.tracking_sigma)  # legged_gym's tracking_sigma is the kernel's sigma^2
        q = phys.qpos[3:7]
        v_b = rotate_inv(q, phys.qvel[0:3], jnp)
        w_b = phys.qvel[3:6]
        cmd = info["command"]
        g_b = gravity_b({"quat_wxyz": q}, jnp)
        contact = self.feet_contact(phys)
        air = info["stats"]["feet_air_time"] + self.ctrl_dt
        first_contact = contact & (info["stats"]["feet_air_time"] > 0)
        moving = jnp.linalg.norm(cmd[:2]) > 0.1
        return {
            "tracking_lin_vel": rw.exp_kernel(rw.sq_norm(cmd[:2] - v_b[:2]), sigma),
            "tracking_ang_vel": rw.exp_kernel(jnp.square(cmd[2] - w_b[2]), sigma),
            "lin_vel_z": rw.lin_vel_z(v_b),
            "ang_vel_xy": rw.ang_vel_xy(w_b),
            "orientation": rw.orientation(g_b),
            "base_height": rw.base_height(phys.qpos[2], c.base_height_m),
            "torques": rw.torques(self.torques(phys, self.applied_action(info), info)),
            "action_rate": rw.action_rate(action, info["last_action"]),
            "feet_air_time": rw.feet_air_time(air, first_contact, c.feet_air_time_s) * moving,
            "alive": rw.alive(),
        }

    def termination_causes(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        g_b = gravity_b({"quat_wxyz": phys.qpos[3:7]}, jnp)
        return {"low_base": phys.qpos[2] < self.cfg.min_base_height_m, "tilt": g_b[2] > -self.cfg.max_tilt_cos}

    # -- statistics (also carry the feet air-time clock, reset with the episode) ------------------
    def init_stats(self) -> dict[str, jax.Array]:
        return {"feet_air_time": jnp.zeros(2), "sq_vel_err": jnp.zeros(()), "sq_yaw_err": jnp.zeros(()),
                "n": jnp.zeros(())}

    def update_stats(self, stats, phys, info):
        contact = self.feet_contact(phys)
        v_b = rotate_inv(phys.qpos[3:7], phys.qvel[0:3], jnp)
        cmd = info["command"]
        return {"feet_air_time": jnp.where(contact, 0.0, stats["feet_air_time"] + self.ctrl_dt),
                "sq_vel_err": stats["sq_vel_err"] + jnp.sum(jnp.square(cmd[:2] - v_b[:2])),
                "sq_yaw_err": stats["sq_yaw_err"] + jnp.square(cmd[2] - phys.qvel[5]),
                "n": stats["n"] + 1.0}

    def final_stats(self, stats, terminated):
        """``fall`` and ``success`` (= did not fall) over all episodes; the command tracking
        errors over the episode's steps, defined for the episodes that did not fall:
        ``vel_rmse_m_s``, the RMS of |cmd_xy - v_xy| (base velocity in the body frame) [m/s], and
        ``yaw_rate_rmse_rad_s``, the RMS of cmd_yaw - w_z [rad/s]."""
        n = jnp.maximum(stats["n"], 1.0)
        upright = ~terminated & (stats["n"] > 0)
        return {"fall": terminated.astype(jnp.float32),
                "success": (~terminated).astype(jnp.float32),
                **defined_where("vel_rmse_m_s", jnp.sqrt(stats["sq_vel_err"] / n), upright),
                **defined_where("yaw_rate_rmse_rad_s", jnp.sqrt(stats["sq_yaw_err"] / n), upright)}
