"""What the twins of quadrotor autopilots share (PX4, the Crazyflie): the vehicle they fly.

- the robot spec's model as the rehearsal robot (:class:`~simreal.deploy.sim_robot.SimRobot`)
  in ``ctbr`` mode: the command is collective thrust [N] and FLU body rates [rad/s], tracked
  by the onboard body-rate loop of :mod:`simreal.quadrotor_control`;
- held at ``start_pos_w`` (the rehearsal's hover hold) for as long as the autopilot's
  ``_command`` says None (before its hand-over);
- stepped up to the wall clock before anything is served (:class:`~simreal.hardware.twin_runtime.WallClock`);
- its own floor: the models have no contacts, so a vehicle that reaches ``z = 0`` stops and
  rests there.

A subclass speaks the wire (``_serve``) and is the autopilot (``_command``). Needs MuJoCo.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np

from simreal.action_modes import CTBR_CHANNELS, total_thrust_n
from simreal.hardware.twin_runtime import ServingThread, WallClock
from simreal.robot_spec import RobotSpec, load_robot_spec


class QuadrotorTwin(ServingThread):
    """Base of a quadrotor autopilot's twin (see module docstring).

    Args:
      robot: a quadrotor robot spec name or path.
      start_pos_w: where the vehicle is held before the hand-over [m].
      name: the serving thread's name.

    Attributes the autopilot keeps: ``setpoint`` (the newest ctbr set-point), ``setpoint_at``
    (its wall-clock arrival [s]), ``setpoints`` (how many came), ``released`` (the hold ended),
    ``ignored`` (messages the twin does not serve).
    """

    def __init__(self, robot: str | RobotSpec, start_pos_w: Sequence[float], name: str):
        from simreal.deploy.sim_robot import SimRobot, spec_start
        from simreal.sim.robots import build_model

        self.spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
        model = build_model(self.spec)
        start = spec_start(model, self.spec, np.asarray(start_pos_w, np.float64), ())
        self.sim = SimRobot(model, self.spec, "ctbr", CTBR_CHANNELS, start)
        self.full_thrust_n = total_thrust_n(self.spec)
        self.released = False
        self.setpoint = np.zeros(4)
        self.setpoint_at = -math.inf
        self.setpoints = 0
        self.ignored = 0
        self.lock = threading.Lock()
        self.clock = WallClock(float(model.opt.timestep))  # simulated time 0: the autopilot's boot
        super().__init__(name)

    def true_state(self) -> dict[str, np.ndarray]:
        """The simulation's state now: pos_w, quat_wxyz, lin_vel_w, ang_vel_b (world z up, body FLU)."""
        with self.lock:
            self._advance()
            return self.sim.true_state()

    def _command(self, now: float) -> np.ndarray | None:
        """The ctbr command of this physics step at wall-clock time ``now`` [s]; None: hold."""
        raise NotImplementedError

    def _advance(self) -> None:
        """Step the physics up to the wall clock (hold)."""
        for _ in range(self.clock.steps_due(self.sim.time_s)):
            u = self._command(self.clock.t0 + self.sim.time_s)
            if u is None:
                self.sim.hold()
            else:
                self.sim.apply(u)
            self.sim.step()
            d = self.sim.d
            if d.qpos[2] < 0.0:  # the floor the model lacks: the vehicle stops on it
                d.qpos[2] = 0.0
                d.qvel[:] = 0.0
