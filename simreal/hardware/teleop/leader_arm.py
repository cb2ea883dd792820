"""A leader arm: the operator moves a torque-free copy of the robot and the follower copies it.

LeRobot's ``SOLeader`` teleoperator behind :class:`~simreal.hardware.teleop.teleoperator.Teleop`: the leader
is an SO-100/101 on its own Feetech bus, opened with torque off
(:class:`~simreal.hardware.feetech.so100.SO100Config` ``leader=True``), and the follower's command is
the leader's measured pose, joint for joint in calibrated radians (both arms calibrated the
LeRobot way, so equal angles mean equal poses). The follower's own ``send_action`` limits
(range, ``max_relative_target``) still apply to what goes out.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simreal.hardware.feetech.so100 import SO100Config, SO100Robot
from simreal.hardware.teleop.teleoperator import State, Teleop


class SO100Leader(Teleop):
    """``config``: the leader's bus (port, calibration); ``leader`` is forced on."""

    def __init__(self, config: SO100Config):
        self.arm = SO100Robot(dataclasses.replace(config, leader=True))

    def connect(self) -> None:
        self.arm.connect()

    def disconnect(self) -> None:
        self.arm.disconnect()

    def command(self, state: State) -> np.ndarray:
        """The leader's pose [rad] (the follower's state is not needed)."""
        return self.arm.observation()["joint_pos"]
