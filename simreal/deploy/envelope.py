"""The state envelope: where a robot may be while a policy drives it.

A policy that fails anyway (a sim-to-real gap, a bad bundle, a sensor that lies) must be
stopped before it hurts something, whatever it commands. The runner checks the measured
state against the envelope at every tick; leaving it latches a fault in the safety layer
(:mod:`simreal.deploy.safety`): the safe command goes on the wire at that tick (zero thrust
for rotors, hold the measured pose for position-controlled joints) and stays there until the
e-stop topic is released. Bounds (``envelope`` in the deploy config; ``.inf`` switches one off):

=====================  ==============================================  =================
bound                  violated when                                   state keys
=====================  ==============================================  =================
geofence_min/max_m     a base position coordinate outside the box      pos_w
max_tilt_rad           angle between body z and world z above it       quat_wxyz
max_speed_m_s          |v| above it                                    lin_vel_w
max_body_rate_rad_s    |omega| above it                                ang_vel_b
joint_margin_rad       a joint beyond its spec range by more than it   joint_pos
=====================  ==============================================  =================

Family defaults (:data:`simreal.deploy.config.FAMILY_DEFAULTS`): a quadrotor gets a 6 x 6 x 3 m
arena around the origin (z from -0.5 m), 60 deg tilt, 4 m/s, 15 rad/s; a humanoid 1 rad of base
tilt and 0.1 rad of joint margin; an arm 0.1 rad of joint margin. A bound whose state key the
robot does not publish is not checked.

A state the envelope cannot judge is outside it (:meth:`Envelope.unjudged`): a value that is not
finite in a key it reads, or an orientation that is not one, a ``quat_wxyz`` whose norm is not
1 within :data:`QUAT_NORM_TOL` (an IMU before its filter converged sends all zeros; the tilt
of that was NaN, which no comparison fails, so the check was silently off). The runner latches
its fault on it and, as for stale state, gives a recovery no state to steer by.
Imports: numpy only (robot runtime).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from simreal.robot_spec import RobotSpec

State = Mapping[str, np.ndarray]

#: How far a measured orientation's norm may be from 1 (a float32 message rounds to ~1e-7; a
#: filter's drift before it renormalises is far below this).
QUAT_NORM_TOL = 0.05
#: The state keys the bounds read.
CHECKED_KEYS = ("pos_w", "quat_wxyz", "lin_vel_w", "ang_vel_b", "joint_pos")


@dataclasses.dataclass(frozen=True)
class Envelope:
    """Resolved bounds (see module docstring); arrays in SI units, ``inf`` for no bound."""

    geofence_min_m: np.ndarray  # (3,)
    geofence_max_m: np.ndarray  # (3,)
    max_tilt_rad: float
    max_speed_m_s: float
    max_body_rate_rad_s: float
    joint_low: np.ndarray  # (n,) spec range minus the margin, -inf where unbounded
    joint_high: np.ndarray  # (n,)
    joint_names: tuple[str, ...]

    @classmethod
    def from_config(cls, cfg, spec: RobotSpec) -> Envelope:
        """From an :class:`simreal.deploy.config.EnvelopeConfig` and the robot spec's joint ranges."""
        inf = np.inf
        lo = np.array([a.range[0] if a.range else -inf for a in spec.actuators], np.float64)
        hi = np.array([a.range[1] if a.range else inf for a in spec.actuators], np.float64)
        return cls(
            np.asarray(cfg.geofence_min_m, np.float64),
            np.asarray(cfg.geofence_max_m, np.float64),
            float(cfg.max_tilt_rad),
            float(cfg.max_speed_m_s),
            float(cfg.max_body_rate_rad_s),
            lo - cfg.joint_margin_rad,
            hi + cfg.joint_margin_rad,
            spec.actuator_names,
        )

    def unjudged(self, s: State) -> str | None:
        """Why the bounds cannot judge ``s`` (module docstring), or None when they can."""
        for key in CHECKED_KEYS:
            if key in s and not np.all(np.isfinite(s[key])):
                return f"cannot judge the state: {key} is not finite"
        if "quat_wxyz" in s:
            norm = float(np.linalg.norm(s["quat_wxyz"]))
            if abs(norm - 1.0) > QUAT_NORM_TOL:
                return f"cannot judge the state: quat_wxyz has norm {norm:.3f}, not an orientation"
        return None

    def violation(self, s: State) -> str | None:
        """Why ``s`` is outside the envelope (it cannot be judged, or the first bound broken), or
        None when inside."""
        unjudged = self.unjudged(s)
        if unjudged is not None:
            return unjudged
        if "pos_w" in s:
            p = np.asarray(s["pos_w"])
            for i, axis in enumerate("xyz"):
                if p[i] < self.geofence_min_m[i]:
                    return f"geofence: {axis} {p[i]:.2f} m below {self.geofence_min_m[i]:.2f}"
                if p[i] > self.geofence_max_m[i]:
                    return f"geofence: {axis} {p[i]:.2f} m above {self.geofence_max_m[i]:.2f}"
        if "quat_wxyz" in s and np.isfinite(self.max_tilt_rad):
            w, x, y, z = np.asarray(s["quat_wxyz"], np.float64)
            up_z = 1.0 - 2.0 * (x * x + y * y) / (w * w + x * x + y * y + z * z)  # world z of the body z axis
            tilt = float(np.arccos(np.clip(up_z, -1.0, 1.0)))
            if tilt > self.max_tilt_rad:
                return f"tilt {np.degrees(tilt):.1f} deg above {np.degrees(self.max_tilt_rad):.1f}"
        for key, bound, name, unit in (
            ("lin_vel_w", self.max_speed_m_s, "speed", "m/s"),
            ("ang_vel_b", self.max_body_rate_rad_s, "body rate", "rad/s"),
        ):
            if key in s:
                v = float(np.linalg.norm(s[key]))
                if v > bound:
                    return f"{name} {v:.2f} {unit} above {bound:.2f}"
        if "joint_pos" in s:
            q = np.asarray(s["joint_pos"], np.float64)
            out = np.flatnonzero((q < self.joint_low) | (q > self.joint_high))
            if out.size:
                j = int(out[0])
                return (
                    f"joint {self.joint_names[j]} at {q[j]:.3f} rad, outside "
                    f"[{self.joint_low[j]:.3f}, {self.joint_high[j]:.3f}] (range and margin)"
                )
        return None
