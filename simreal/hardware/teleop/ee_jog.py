"""End-effector (Cartesian) teleoperation of an arm: a rate device moves the tool, IK turns the
tool pose into joint position targets, so a SpaceMouse, gamepad or keyboard drives the arm the
way an operator thinks (forward, up, tilt) instead of joint by joint (:class:`JointJog`).

Per call, with the device's axes ``a`` in [-1, 1] (x, y, z, roll, pitch, yaw: a SpaceMouse's
own frame, +x right, +y forward, +z up) and ``dt`` the measured time since the last call (capped
at 0.1 s, so a stall does not jump)::

    p*  <- p* + v_lin a[:3] dt                               [m], world (robot base) axes
    R*  <- Exp(w_ang a[3:] dt) R*                            rotation about world axes
    u   =  IK(q; p*, R*)  within the joint ranges and |u - q| <= max_lead    [rad]

``IK`` is :class:`simreal.policies.demos.arm_ik.SiteIK` on the spec's ``end_effector`` site (bounded
damped least squares, position and whole-frame orientation weighted ``w_rot`` [m/rad]; a 5-DoF
arm such as the SO-100 gets the nearest orientation it can reach). No wind-up: after the solve
the target is pulled back to within ``max_lead_m`` and ``max_lead_rad`` of the pose ``u``
reaches, so pushing against a joint limit or the edge of the workspace and then reversing moves
the tool back at once. Button 0 (and the first call) sets the target to the measured pose;
buttons 1 and 2 move the actuators that are not IK variables (the gripper) towards the low
("close") and high ("open") end of their ranges at ``gripper_speed`` of the range per second;
button 3 ends the episode being recorded (:data:`simreal.hardware.teleop.teleoperator.END_BUTTON`).

Needs MuJoCo for the kinematics (the robot's own model, ``simreal.sim.robots.build_model``),
unlike :mod:`simreal.hardware.teleop.teleoperator`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from simreal.errors import ConfigError
from simreal.hardware.teleop.teleoperator import DeviceTeleop, InputDevice, State
from simreal.observations import EE_SITE
from simreal.robot_spec import RobotSpec


class EndEffectorJog(DeviceTeleop):
    """Joint targets from an end-effector pose jogged by a rate device (module docstring).

    Args:
      device: the input device.
      spec: an arm's robot spec; its model must have an ``end_effector`` site.
      linear_speed: tool speed at full deflection [m/s].
      angular_speed: tool turn rate at full deflection [rad/s].
      w_rot: orientation weight of the IK [m/rad].
      max_lead: how far [rad] a joint target may run ahead of the measured joint.
      max_lead_m, max_lead_rad: how far the tool target may run ahead of the pose reached.
      gripper_speed: fraction of the gripper's range per second while its button is held.
      clock: monotonic clock [s].
    """

    def __init__(
        self,
        device: InputDevice,
        spec: RobotSpec,
        *,
        linear_speed: float = 0.1,
        angular_speed: float = 0.8,
        w_rot: float = 0.1,
        max_lead: float = 0.3,
        max_lead_m: float = 0.03,
        max_lead_rad: float = 0.2,
        gripper_speed: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ):
        import mujoco

        from simreal.deploy.sim_robot import with_joints
        from simreal.policies.demos.arm_ik import SiteIK
        from simreal.sim.robots import build_model

        if spec.family != "arm":
            raise ConfigError("teleop", f"end-effector jogging takes an arm; robot '{spec.name}' is a {spec.family}")
        model = build_model(spec)
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, EE_SITE) < 0:
            raise ConfigError("model", f"robot '{spec.name}' has no '{EE_SITE}' site to jog", spec.source)
        super().__init__(device, spec, clock)
        self.ik = SiteIK(model, EE_SITE)
        self._qpos = lambda q: with_joints(model, spec, model.qpos0, q)
        self.others = np.setdiff1d(np.arange(model.nu), self.ik.joints)
        self.v_lin, self.w_ang, self.w_rot = linear_speed, angular_speed, w_rot
        self.max_lead, self.max_lead_m, self.max_lead_rad = max_lead, max_lead_m, max_lead_rad
        self.gripper_rate = gripper_speed * np.where(np.isfinite(self.high - self.low), self.high - self.low, 0.0)
        self.pos: np.ndarray | None = None  # tool target [m]
        self.rot: np.ndarray | None = None  # tool target orientation (3, 3)
        self.target: np.ndarray | None = None  # last command (nu,)

    BUTTONS = {**DeviceTeleop.BUTTONS, 1: "close the gripper", 2: "open the gripper"}

    def axes(self) -> list[str]:
        return ["tool x", "tool y", "tool z", "turn about x", "turn about y", "turn about z"]

    def tool_pose(self, joint_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position [m], rotation (3, 3)) of the ``end_effector`` site at joint positions in
        spec order (forward kinematics of the spec's model)."""
        return self.ik.site_pose(self._qpos(joint_pos))

    def command(self, state: State) -> np.ndarray:
        from scipy.spatial.transform import Rotation

        q = np.asarray(state["joint_pos"], np.float64)
        inp, dt = self.read()
        buttons = tuple(inp.buttons)
        if self.target is None or (buttons and buttons[0]):
            self.pos, self.rot = self.tool_pose(q)
            self.target = q.copy()
        assert self.pos is not None and self.rot is not None  # set with the target, above or on an earlier call
        a = np.zeros(6)
        axes = np.clip(np.asarray(inp.axes, np.float64).reshape(-1)[:6], -1.0, 1.0)
        a[: len(axes)] = axes
        self.pos = self.pos + self.v_lin * a[:3] * dt
        self.rot = Rotation.from_rotvec(self.w_ang * a[3:] * dt).as_matrix() @ self.rot
        j = self.ik.joints
        u = self.ik.solve(
            self._qpos(q), self.pos, rot=self.rot, w_rot=self.w_rot, lo=q[j] - self.max_lead, hi=q[j] + self.max_lead
        )
        target = self.target.copy()
        target[j] = u
        close = len(buttons) > 1 and buttons[1]
        opened = len(buttons) > 2 and buttons[2]
        target[self.others] += (float(opened) - float(close)) * self.gripper_rate[self.others] * dt
        self.target = np.clip(target, self.low, self.high)
        self._pull_back()
        return self.target.copy()

    def _pull_back(self) -> None:
        """Keep the tool target within ``max_lead_m`` / ``max_lead_rad`` of the pose the
        command reaches (no wind-up at a limit)."""
        from scipy.spatial.transform import Rotation

        assert self.target is not None and self.pos is not None and self.rot is not None  # command() set them
        p, R = self.tool_pose(self.target)
        d = self.pos - p
        dist = float(np.linalg.norm(d))
        if dist > self.max_lead_m:
            self.pos = p + d * (self.max_lead_m / dist)
        turn = Rotation.from_matrix(R.T @ self.rot).as_rotvec()
        angle = float(np.linalg.norm(turn))
        if angle > self.max_lead_rad:
            self.rot = R @ Rotation.from_rotvec(turn * (self.max_lead_rad / angle)).as_matrix()
