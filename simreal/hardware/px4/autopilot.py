"""PX4's commander as the twins answer it, whatever their wire (MAVLink or ROS 2 ``px4_msgs``).

The vehicle (:class:`~simreal.hardware.quadrotor_twin.QuadrotorTwin`) is held where it starts
(the rehearsal's hover hold) until it is armed in OFFBOARD, then flown. Armed in OFFBOARD it
applies the newest set-point; once set-points stop for ``offboard_loss_s`` (PX4's
``COM_OF_LOSS_T``) it switches to AUTO.LAND, its offboard-loss failsafe (PX4's
``COM_OBL_RC_ACT``; the twin has no RC, position or hold mode to choose), and descends at
0.7 m/s (``MPC_LAND_SPEED``) with :mod:`simreal.deploy.landing`'s controller; at touchdown it
disarms, as PX4's land detector does. Disarmed, the rotors stop; the twin is its own floor.

Commands (:meth:`PX4Autopilot.run_command`, MAV_CMD numbers, MAV_RESULT answers), as PX4's
commander answers them:

- ``COMPONENT_ARM_DISARM``: disarm in the air TEMPORARILY_REJECTED unless forced with 21196;
  arming in OFFBOARD without a set-point stream TEMPORARILY_REJECTED;
- ``DO_SET_MODE`` to OFFBOARD: TEMPORARILY_REJECTED unless a set-point arrived in the last
  :data:`OFFBOARD_PROOF_S` (PX4's "2 Hz proof of life"); to AUTO.LAND accepted; other modes,
  which the twin cannot fly, TEMPORARILY_REJECTED;
- anything else UNSUPPORTED (a wire may answer some itself first).

A set-point (:meth:`PX4Autopilot.take_setpoint`) is FRD body rates and thrust in [0, 1] of the
rotors' summed limit: the ctbr command ``(thrust * sum f_max, FLU rates)``. Needs MuJoCo.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from simreal.action_modes import CTBR_CHANNELS
from simreal.hardware.px4.common import (
    ACCEPTED,
    AUTO,
    AUTO_LAND,
    AUTO_LOITER,
    CMD_COMPONENT_ARM_DISARM,
    CMD_DO_SET_MODE,
    DENIED,
    FORCE,
    MODE_FLAG_CUSTOM_MODE_ENABLED,
    OFFBOARD,
    TEMPORARILY_REJECTED,
    UNSUPPORTED,
)
from simreal.hardware.quadrotor_twin import QuadrotorTwin
from simreal.ned_frames import swap_frd_flu
from simreal.robot_spec import RobotSpec

#: OFFBOARD is accepted only with a set-point this recent [s] (PX4: a stream of more than 2 Hz).
OFFBOARD_PROOF_S = 0.5
#: PX4's MPC_LAND_SPEED default [m/s].
LAND_SPEED_M_S = 0.7


class PX4Autopilot(QuadrotorTwin):
    """A quadrotor twin with PX4's commander (module docstring); a subclass serves the wire.

    Args:
      robot: a quadrotor robot spec name or path.
      start_pos_w: where the vehicle is held before the hand-over, ENU [m].
      offboard_loss_s: set-point silence after which OFFBOARD fails over to AUTO.LAND [s].
      name: the serving thread's name.
    """

    def __init__(self, robot: str | RobotSpec, start_pos_w: Sequence[float], offboard_loss_s: float, name: str):
        from simreal.deploy.config import FaultConfig
        from simreal.deploy.landing import Landing

        super().__init__(robot, start_pos_w, name)  # released: armed in OFFBOARD once
        self.landing = Landing(self.spec, "ctbr", CTBR_CHANNELS, FaultConfig(descent_m_s=LAND_SPEED_M_S))
        self.offboard_loss_s = offboard_loss_s
        self.armed = False
        self.mode = (AUTO, AUTO_LOITER)

    def _command(self, now: float) -> np.ndarray | None:
        """Before the hand-over: hold; disarmed: rotors off; OFFBOARD: the set-point, until
        ``offboard_loss_s`` without one (the failsafe: AUTO.LAND); AUTO.LAND: descend."""
        if not self.released:
            return None
        if not self.armed:
            return np.zeros(4)
        if self.mode == (OFFBOARD, 0) and now - self.setpoint_at > self.offboard_loss_s:
            self.mode = (AUTO, AUTO_LAND)
            self.landing.start(self.sim.time_s)
        if self.mode == (OFFBOARD, 0):
            return self.setpoint
        u = self.landing.command(self.sim.time_s, self.sim.true_state())
        if u is None:  # touched down: the land detector disarms
            self.armed = False
            return np.zeros(4)
        return u

    def take_setpoint(self, thrust: float, rates_frd: Sequence[float]) -> None:
        """A body-rate set-point: ``thrust`` in [0, 1] (clipped), FRD rates [rad/s]."""
        self.setpoint = np.concatenate([[min(max(thrust, 0.0), 1.0) * self.full_thrust_n], swap_frd_flu(rates_frd)])
        self.setpoint_at = time.monotonic()
        self.setpoints += 1

    def run_command(self, command: int, params: Sequence[float]) -> int:
        """One commander command (module docstring); its MAV_RESULT. The caller holds the lock."""
        if command == CMD_COMPONENT_ARM_DISARM:
            forced = round(params[1]) == FORCE
            if round(params[0]) == 1:
                if self.mode == (OFFBOARD, 0) and time.monotonic() - self.setpoint_at > OFFBOARD_PROOF_S:
                    return TEMPORARILY_REJECTED  # PX4's arming check: the mode it would fly is not available
                self.armed = True
            elif round(params[0]) == 0:
                landed = not self.released or self.sim.d.qpos[2] <= 0.0
                if self.armed and not (landed or forced):
                    return TEMPORARILY_REJECTED
                self.armed = False
            else:
                return DENIED
            self.released = self.released or (self.armed and self.mode == (OFFBOARD, 0))
            return ACCEPTED
        if command == CMD_DO_SET_MODE:
            if not int(params[0]) & MODE_FLAG_CUSTOM_MODE_ENABLED:
                return TEMPORARILY_REJECTED
            wanted = (int(params[1]), int(params[2]) if int(params[1]) == AUTO else 0)
            if wanted == (OFFBOARD, 0):
                if time.monotonic() - self.setpoint_at > OFFBOARD_PROOF_S:
                    return TEMPORARILY_REJECTED
            elif wanted == (AUTO, AUTO_LAND):
                self.landing.start(self.sim.time_s)
            else:
                return TEMPORARILY_REJECTED
            self.mode = wanted
            self.released = self.released or (self.armed and self.mode == (OFFBOARD, 0))
            return ACCEPTED
        return UNSUPPORTED
