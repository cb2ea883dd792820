"""Shared base of the quadrotor tasks: action modes, randomisation, observations, failure.

Action modes (never raw body forces):

- ``rotor_thrust``: a in [-1, 1]^4 -> rotor thrust f = f_max (a + 1) / 2 [N], what PX4's
  direct actuator control and the Crazyflie's power-distribution input take;
- ``ctbr``: a -> collective thrust and body rates, turned into rotor thrusts by the
  onboard rate loop (``simreal.quadrotor_control``) at every physics step.

Randomised per episode (uniform; ranges in :class:`QuadrotorConfig`): mass, inertia,
thrust coefficient (actuator gain), motor time constant (actuator dynamics), action
latency (``EnvConfig.action_delay_steps``).

Episode statistics (:meth:`QuadrotorTask.stat_table`): ``success``, ``crash`` (rates over all
episodes) and ``pos_rmse_m`` (over the episodes that did not crash).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from simreal import quadrotor_control as qc
from simreal.action_modes import CTBR_CHANNELS, action_mode
from simreal.config import field
from simreal.errors import ConfigError
from simreal.quadrotor_control import physical
from simreal.rewards import terms as rw
from simreal.robot_spec import RobotSpec
from simreal.rotations import quat_from_rpy, quat_to_rotmat
from simreal.sim.backends.base import InnerLoop, ModelParams, PhysState
from simreal.sim.env import EnvConfig, MjEnv
from simreal.sim.episode_stats import EpisodeStat
from simreal.sim.robots import free_base_body

G = 9.81


@dataclasses.dataclass(frozen=True)
class QuadrotorConfig(EnvConfig):
    """Quadrotor task settings. Ranges are (low, high), sampled uniformly per episode."""

    action_mode: str = field("rotor_thrust", choices=("rotor_thrust", "ctbr"))
    spawn_radius_m: float = field(0.5, min=0.0, doc="initial offset from the target, per axis [m]")
    spawn_max_tilt_rad: float = field(0.5, min=0.0, max=math.pi, doc="initial |roll|, |pitch| bound")
    spawn_max_lin_vel_m_s: float = field(0.5, min=0.0)
    spawn_max_ang_vel_rad_s: float = field(1.0, min=0.0)
    mass_scale: tuple[float, ...] = field((0.9, 1.1))
    inertia_scale: tuple[float, ...] = field((0.85, 1.15))
    thrust_scale: tuple[float, ...] = field((0.9, 1.1), doc="thrust coefficient error")
    motor_tau_s: tuple[float, ...] = field((0.02, 0.05), doc="motor time constant [s]")
    success_radius_m: float = field(0.1, min=0.0)
    settle_time_s: float = field(2.0, min=0.0, doc="success is judged from this time on [s]")
    max_distance_m: float = field(2.0, min=0.1, doc="farther from the target ends the episode")
    max_tilt_rad: float = field(math.pi / 2, min=0.0, max=math.pi, doc="more tilt than this ends the episode")


def _rate_loop(gain: np.ndarray, f_max: np.ndarray, command: Any, qvel: Any, xp: Any) -> Any:
    """The onboard body-rate loop at every update (:class:`InnerLoop`): command (..., 4) = (T [N],
    omega_des [rad/s]) and the free joint's body-frame angular velocity qvel[3:6] -> rotor thrusts [N]
    (:func:`~simreal.quadrotor_control.rate_loop_thrusts`, G precomputed)."""
    return qc.rate_loop_thrusts(command, qvel[..., 3:6], gain, f_max, xp)


def _uniform(rng: jax.Array, bounds: tuple[float, ...], shape: tuple[int, ...] = ()) -> jax.Array:
    return jax.random.uniform(rng, shape, minval=bounds[0], maxval=bounds[-1])


class QuadrotorTask(MjEnv):
    """Common quadrotor machinery; subclasses define the target motion and rewards."""

    obs_terms: tuple[str, ...] = ("pos_error_w", "rot_mat_wb", "lin_vel_w", "ang_vel_b", "last_action")
    obs_noise_std = {"pos_error_w": 0.002, "rot_mat_wb": 0.005, "lin_vel_w": 0.01, "ang_vel_b": 0.02}
    cfg: QuadrotorConfig

    def __init__(self, robot: RobotSpec, cfg: QuadrotorConfig, backend: str = "auto"):
        self.f_max = np.array([a.effort_limit for a in robot.actuators])
        self.mixer_inv = np.linalg.inv(qc.mixer(robot))
        self.inertia_diag = qc.inertia_diag(robot)
        self.mass = physical(robot, "mass_kg")
        self.max_rate = float(robot.physical.get("max_body_rate_rad_s", 10.0))
        if cfg.action_mode == "ctbr":
            rate_hz = float(robot.physical.get("rate_controller_hz", 500.0))
            every = max(1, round(1.0 / (rate_hz * physical(robot, "physics_dt_s"))))
            gain = qc.rate_loop_gain(self.inertia_diag, self.mixer_inv)
            self.inner_loop = InnerLoop(partial(_rate_loop, gain, self.f_max), every)
        super().__init__(robot, cfg, backend)
        base = free_base_body(self.mj_model)
        if base is None:
            raise ConfigError("model", "a quadrotor's model needs a free joint on its body (none found)", robot.source)
        self.base_body = base  # the body whose mass and inertia are randomised
        # the normalised action of the action-mode table's hover command (m g shared by the rotors,
        # or ctbr's total thrust m g with zero body rates): the action penalty's zero
        lay = self.action_layout()
        hover = action_mode(cfg.action_mode).hover_command(robot, lay["names"])
        self.hover_action = (hover - np.asarray(lay["offset"])) / np.asarray(lay["scale"])
        if self.inner_loop is not None and self.n_substeps % self.inner_loop.every:
            raise ConfigError(
                "physical.rate_controller_hz",
                f"the rate loop updates every {self.inner_loop.every} physics steps, which does not divide "
                f"the {self.n_substeps} physics steps of a control period (control_rate_hz, physics_dt_s)",
                robot.source,
            )

    def action_layout(self) -> dict[str, Any]:
        """Rotor thrusts [N], or collective thrust [N] and body rates [rad/s] (ctbr)."""
        mode = action_mode(self.cfg.action_mode)
        names = self.robot.actuator_names if mode.name == "rotor_thrust" else CTBR_CHANNELS
        return mode.layout(self.robot, names, max_rate_rad_s=self.max_rate)

    # -- physics parameters ----------------------------------------------------------------------
    def nominal_params(self) -> ModelParams:
        m = self.mj_model
        return {
            k: jnp.asarray(getattr(m, k), jnp.float32)
            for k in ("body_mass", "body_inertia", "actuator_gainprm", "actuator_dynprm")
        }

    def randomize(self, params: ModelParams, rng: jax.Array) -> ModelParams:
        c = self.cfg
        k_m, k_i, k_t, k_tau = jax.random.split(rng, 4)
        return {
            "body_mass": params["body_mass"].at[self.base_body].multiply(_uniform(k_m, c.mass_scale)),
            "body_inertia": params["body_inertia"].at[self.base_body].multiply(_uniform(k_i, c.inertia_scale, (3,))),
            "actuator_gainprm": params["actuator_gainprm"].at[:, 0].multiply(_uniform(k_t, c.thrust_scale, (4,))),
            "actuator_dynprm": params["actuator_dynprm"].at[:, 0].set(_uniform(k_tau, c.motor_tau_s, (4,))),
        }

    # -- episode ---------------------------------------------------------------------------------
    def target(self, rng: jax.Array) -> dict[str, jax.Array]:
        """Task info describing the target at t = 0 (needs ``target_pos_w``)."""
        raise NotImplementedError

    def sample_initial(self, rng: jax.Array):
        c = self.cfg
        k_t, k_p, k_a, k_y, k_v, k_w = jax.random.split(rng, 6)
        task = self.target(k_t)
        pos = task["target_pos_w"] + _uniform(k_p, (-c.spawn_radius_m, c.spawn_radius_m), (3,))
        pos = pos.at[2].set(jnp.maximum(pos[2], 0.3))
        rp = _uniform(k_a, (-c.spawn_max_tilt_rad, c.spawn_max_tilt_rad), (2,))
        quat = quat_from_rpy(rp[0], rp[1], _uniform(k_y, (-math.pi, math.pi)), jnp)
        lin = _uniform(k_v, (-c.spawn_max_lin_vel_m_s, c.spawn_max_lin_vel_m_s), (3,))
        ang = _uniform(k_w, (-c.spawn_max_ang_vel_rad_s, c.spawn_max_ang_vel_rad_s), (3,))
        act = jnp.full((4,), self.mass * G / 4)  # rotors already spinning at hover thrust
        return jnp.concatenate([pos, quat]), jnp.concatenate([lin, ang]), act, task

    def control(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> jax.Array:
        """Rotor thrusts [N]; for ctbr the rate loop's command (T [N], omega_des [rad/s])."""
        if self.cfg.action_mode == "rotor_thrust":
            return self.f_max * 0.5 * (action + 1.0)  # type: ignore[return-value]  # ndarray * jax.Array defers to jax: a jax.Array
        thrust, omega_des = qc.ctbr_from_action(action, float(self.f_max.sum()), self.max_rate, jnp)
        return jnp.concatenate([thrust[None], omega_des])

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        return {
            "pos_w": phys.qpos[0:3],
            "quat_wxyz": phys.qpos[3:7],
            "lin_vel_w": phys.qvel[0:3],
            "ang_vel_b": phys.qvel[3:6],
            "target_pos_w": info["target_pos_w"],
            "command": info.get("target_vel_w", jnp.zeros(3)),
            "last_action": info["last_action"],
        }

    def distance(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        """Distance to the target [m]."""
        return jnp.linalg.norm(info["target_pos_w"] - phys.qpos[0:3])

    def termination_causes(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        r_zz = quat_to_rotmat(phys.qpos[3:7], jnp)[2, 2]
        return {
            "far": self.distance(phys, info) > self.cfg.max_distance_m,
            "ground": phys.qpos[2] < 0.05,
            "tilt": r_zz < math.cos(self.cfg.max_tilt_rad),
            "spin": jnp.linalg.norm(phys.qvel[3:6]) > 35.0,
        }

    # Reward terms (simreal.rewards.terms), bounded so that an alive step always pays more than
    # the worst shaped penalty (else ending the episode early pays): the saturating kernels
    # 1 - exp(-x / s) behave like x / s near zero and stop at 1; the action terms average
    # (a - b)^2 <= 4 (a, b in [-1, 1]) over the rotors and divide by 4, into 0..1.
    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        e = self.distance(phys, info)
        r_zz = quat_to_rotmat(phys.qpos[3:7], jnp)[2, 2]
        rel_vel = phys.qvel[0:3] - info.get("target_vel_w", jnp.zeros(3))
        n = action.shape[-1]  # rotors, or ctbr's thrust and three rates
        return {
            "alive": rw.alive(),
            "position": jnp.minimum(e, self.cfg.max_distance_m),  # [m], linear: pulls from afar
            "position_precise": rw.exp_kernel(jnp.square(e), 0.1),  # peaked inside the 10 cm ball
            "tilt": rw.tilt(r_zz),  # 0 level .. 2 inverted
            "lin_vel": rw.saturating(rw.sq_norm(rel_vel), 1.0),  # ~|v|^2 [m^2/s^2] near rest
            "ang_vel": rw.saturating(rw.sq_norm(phys.qvel[3:6]), 16.0),  # ~|w|^2/16 [rad^2/s^2]
            "action": rw.action_magnitude(action, self.hover_action) / n / 4.0,  # 0..1, around hover
            "action_rate": rw.action_rate(action, info["last_action"]) / n / 4.0,  # 0..1
            "termination": self.terminated(phys, info).astype(jnp.float32),  # 1 on the crash step
        }

    # termination 0: a crash already forfeits the alive terms of the discount horizon; a task that
    # trades crashes for precision (track) prices them explicitly
    reward_scales = {
        "alive": 3.0,
        "position": -3.0,
        "position_precise": 2.0,
        "tilt": -0.5,
        "lin_vel": -0.5,
        "ang_vel": -0.5,
        "action": -0.2,
        "action_rate": -0.2,
        "termination": 0.0,
    }

    # -- statistics ------------------------------------------------------------------------------
    def stat_table(self) -> dict[str, EpisodeStat]:
        """``success`` and ``crash`` (each episode counts: 1 or 0) and ``pos_rmse_m``, the RMS
        distance to the target [m] over the steps from ``settle_time_s`` on, defined for the
        episodes that flew past ``settle_time_s`` to the time limit without crashing (a crash is
        counted by ``crash``, not averaged into the RMSE; with no such episode the mean is NaN).
        Success (hover): within ``success_radius_m`` from ``settle_time_s`` on, held to the
        episode's end (:meth:`success_stat`)."""
        return {
            "success": self.success_stat(),
            "crash": EpisodeStat("terminated"),
            "pos_rmse_m": EpisodeStat("rms", sample="distance"),
        }

    def success_stat(self) -> EpisodeStat:
        """The ``success`` statistic: every settled step within ``success_radius_m``."""
        return EpisodeStat("all", sample="within")

    def stat_samples(self, phys, info):
        settled = info["step"] * self.ctrl_dt >= self.cfg.settle_time_s
        e = self.distance(phys, info)
        return {"distance": (e, settled), "within": (e < self.cfg.success_radius_m, settled)}
