"""The quadrotor's fault response ``land``: a controlled descent from state feedback.

When the policy's vehicle leaves its state envelope (or its actions stop being finite), cutting
thrust drops it from wherever it is, at whatever speed it has. ``fault.response: land`` flies
it down instead, with a cascaded controller that needs only the measured state and the robot
spec; no policy, no map. Per control tick (``R`` body-to-world, ``v`` velocity, ``omega`` body
rates, ``m`` mass, ``g`` gravity, ``e_z`` world up)::

    v_ref = (0, 0, -descent_m_s)                          brake horizontally, sink
    a     = K_v (v_ref - v),  |a_xy| <= g tan(max_tilt)   K_v = diag(2, 2, 3) [1/s]
    F     = m (a + g e_z)                                 thrust vector [N]
    T     = max(F . R e_z, m g / 2)                       collective thrust [N]
    R_d   = [b1, b2, b3],  b3 = F / |F|,  b1 = b2 x b3,   b2 = b3 x x_c / |b3 x x_c|
            (x_c: the current heading; yaw is held)
    e_R   = vee(R_d^T R - R^T R_d) / 2                    attitude error (Lee et al., 2010)
    omega_des = -K_R e_R,  |omega_des| <= max rate        K_R = (10, 10, 2) [1/s]

The ``ctbr`` action mode sends ``(T, omega_des)`` to the onboard rate loop; ``rotor_thrust``
closes the rate loop here (:func:`simreal.quadrotor_control.rate_loop_thrusts`, at the control
rate, with two thirds of the onboard loop's gains) and sends rotor thrusts. The collective
thrust never drops below half the weight: rotor thrusts cannot go negative, so without it a
vehicle on its side would have no torque left to right itself. Below
``touchdown_m`` above ``ground_z_m``, or after ``timeout_s``, the descent ends and thrust is
cut (the fault's safe command). Without fresh state the safety layer cuts thrust at once: the
descent never flies blind.

A geometric controller is a few lines over numpy and the shared mixer; PX4's and the
Crazyflie's own land modes are the path on those autopilots, this one is for the case where
the runner owns the motors (``rotor_thrust``) or the rates (``ctbr``). Imports: numpy and core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from simreal import quadrotor_control as qc
from simreal.robot_spec import RobotSpec
from simreal.rotations import quat_to_rotmat

G = 9.81
K_V = np.array([2.0, 2.0, 3.0])
K_R = np.array([10.0, 10.0, 2.0])
#: The rate loop run at the control rate (100 Hz) behind the link's latency, not the autopilot's
#: 500 Hz: two thirds of its gains (tuned in the rehearsal simulator at 10 ms latency, from 60-80
#: deg of tilt and 10-15 rad/s: touchdown at 0.9-1.3 m/s; full gains oscillate).
RATE_GAINS_AT_CONTROL_RATE: tuple[float, float, float] = (
    2.0 * qc.RATE_GAINS[0] / 3.0,
    2.0 * qc.RATE_GAINS[1] / 3.0,
    2.0 * qc.RATE_GAINS[2] / 3.0,
)

State = Mapping[str, np.ndarray]
NEEDS = ("pos_w", "quat_wxyz", "lin_vel_w", "ang_vel_b")


def _vee(m: np.ndarray) -> np.ndarray:
    return np.array([m[2, 1], m[0, 2], m[1, 0]])


class Landing:
    """A controlled descent (module docstring): :meth:`start` on the fault, :meth:`command`
    per tick until it returns None (touched down or timed out; ``outcome`` says which).

    Args:
      spec: the quadrotor's robot spec (mass, inertia, rotor geometry, thrust limits).
      mode: the bundle's action mode, ``rotor_thrust`` or ``ctbr``.
      names: the action's channel names (rotor order of the command).
      cfg: a :class:`simreal.deploy.config.FaultConfig`.
    """

    def __init__(self, spec: RobotSpec, mode: str, names: Sequence[str], cfg) -> None:
        if mode not in ("rotor_thrust", "ctbr"):
            raise ValueError(f"landing needs a rotor_thrust or ctbr action, not {mode}")
        self.mode, self.cfg = mode, cfg
        self.mass = qc.physical(spec, "mass_kg")
        self.rate_gain = qc.rate_loop_gain(
            qc.inertia_diag(spec), np.linalg.inv(qc.mixer(spec)), RATE_GAINS_AT_CONTROL_RATE
        )
        order = [spec.actuator_names.index(n) for n in names] if mode == "rotor_thrust" else list(range(4))
        self.order = np.array(order)
        self.f_max = np.array([a.effort_limit for a in spec.actuators])
        self.max_rate = float(spec.physical.get("max_body_rate_rad_s", 10.0))
        self.max_tilt = float(cfg.max_tilt_rad)
        self.t0: float | None = None
        self.outcome = ""

    def start(self, now_s: float) -> None:
        """The fault happened at ``now_s`` [s]."""
        self.t0, self.outcome = now_s, ""

    def command(self, now_s: float, state: State) -> np.ndarray | None:
        """This tick's command in the action's physical units, or None once the descent ended."""
        if self.t0 is None or self.outcome:
            return None
        if any(k not in state for k in NEEDS):
            self.outcome = f"no {', '.join(k for k in NEEDS if k not in state)} in the state"
            return None
        p, v, w = (np.asarray(state[k], np.float64) for k in ("pos_w", "lin_vel_w", "ang_vel_b"))
        if p[2] - self.cfg.ground_z_m < self.cfg.touchdown_m:
            self.outcome = f"touchdown after {now_s - self.t0:.2f} s"
            return None
        if now_s - self.t0 > self.cfg.timeout_s:
            self.outcome = f"timeout after {self.cfg.timeout_s:.1f} s, {p[2] - self.cfg.ground_z_m:.2f} m up"
            return None
        R = quat_to_rotmat(np.asarray(state["quat_wxyz"], np.float64), np)
        a = K_V * (np.array([0.0, 0.0, -self.cfg.descent_m_s]) - v)
        a_xy_max = G * np.tan(self.max_tilt)
        n_xy = np.linalg.norm(a[:2])
        if n_xy > a_xy_max:
            a[:2] *= a_xy_max / n_xy
        a[2] = np.clip(a[2], -0.5 * G, G)
        F = self.mass * (a + np.array([0.0, 0.0, G]))
        # At least half the weight: rotor thrusts cannot go negative, so at zero collective thrust
        # the rate loop has no torque left to turn the vehicle upright (PX4's "airmode" problem)
        thrust = float(np.clip(F @ R[:, 2], 0.5 * self.mass * G, self.f_max.sum()))
        b3 = F / np.linalg.norm(F)
        b2 = np.cross(b3, R[:, 0])
        if np.linalg.norm(b2) < 1e-6:  # heading along the thrust (upside down): any heading will do
            b2 = np.cross(b3, R[:, 1])
        b2 /= np.linalg.norm(b2)
        R_d = np.stack([np.cross(b2, b3), b2, b3], axis=1)
        e_R = 0.5 * _vee(R_d.T @ R - R.T @ R_d)
        w_des = np.clip(-K_R * e_R, -self.max_rate, self.max_rate)
        if self.mode == "ctbr":
            return np.concatenate([[thrust], w_des])
        f = qc.rate_loop_thrusts(np.concatenate([[thrust], w_des]), w, self.rate_gain, self.f_max, np)
        return f[self.order]


def landing_for(spec: RobotSpec, mode: str, names: Sequence[str], cfg) -> Landing | None:
    """The fault response the config asks for: a :class:`Landing`, or None (the safe command)."""
    return Landing(spec, mode, names, cfg) if cfg.response == "land" else None
