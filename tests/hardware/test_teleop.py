"""Teleoperation: the rate devices' input parsing (a real pseudo-terminal for the keyboard, HID
reports for the SpaceMouse, a joystick object for the gamepad) and joint jogging."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from fixtures import bundles
from fixtures.fake_robot import FakeJointRobot
from simreal.errors import ConfigError
from simreal.hardware.robot import HardwareError
from simreal.hardware.teleop.devices import Gamepad, Keyboard, SpaceMouse, parse_spacemouse_report
from simreal.hardware.teleop.teleoperator import DeviceInput, InputDevice, JointJog


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_keyboard_over_a_pty_holds_keys_then_releases():
    master, slave = os.openpty()
    clock = Clock()
    kb = Keyboard(slave, hold_s=0.12, clock=clock)
    kb.open()
    try:
        os.write(master, b"qs ")
        inp = kb.read()
        np.testing.assert_allclose(inp.axes, [1, -1, 0, 0, 0, 0])
        assert inp.buttons[0]
        clock.t = 0.1
        os.write(master, b"q")  # auto-repeat of a held key
        assert kb.read().axes[0] == 1 and kb.read().axes[1] == -1
        clock.t = 0.2  # q repeated at 0.1, s released at 0
        inp = kb.read()
        np.testing.assert_allclose(inp.axes, [1, 0, 0, 0, 0, 0])
        clock.t = 0.3
        assert not kb.read().axes.any()
    finally:
        kb.close()
        os.close(master)
        os.close(slave)


def test_keyboard_refuses_a_pipe():
    r, w = os.pipe()
    with pytest.raises(HardwareError, match="terminal"):
        Keyboard(r).open()
    os.close(r)
    os.close(w)


def test_spacemouse_reports_six_axes_and_separate_rotation():
    axes, buttons = np.zeros(6), [False, False]
    parse_spacemouse_report([1] + list(struct.pack("<6h", 350, 175, -350, 0, 70, -35)), axes, buttons)
    np.testing.assert_allclose(axes, [1.0, -0.5, 1.0, 0.0, -0.2, -0.1])
    parse_spacemouse_report([2] + list(struct.pack("<3h", 35, 0, 0)), axes, buttons)
    assert axes[3] == pytest.approx(-0.1)
    parse_spacemouse_report([3, 0b10, 0], axes, buttons)
    assert buttons[:2] == [False, True]

    class Dev:
        def __init__(self):
            self.reports = [
                [1] + list(struct.pack("<6h", 0, 0, 0, 0, 0, 0)),
                [1] + list(struct.pack("<6h", 700, 0, 0, 0, 0, 0)),
                [3, 1],
            ]

        def read(self, n):
            return self.reports.pop(0) if self.reports else []

        def close(self):
            pass

    sm = SpaceMouse(device=Dev)
    sm.open()
    inp = sm.read()
    assert inp.axes[0] == 1.0 and inp.buttons[0]  # newest report wins, clipped to full scale


def test_gamepad_dead_zone_and_buttons():
    class Js:
        def get_numaxes(self):
            return 4

        def get_axis(self, i):
            return [0.05, -0.6, 1.0, -0.09][i]

        def get_numbuttons(self):
            return 3

        def get_button(self, i):
            return i == 2

    gp = Gamepad(joystick=Js)
    gp.open()
    inp = gp.read()
    np.testing.assert_allclose(inp.axes, [0, -0.6, 1.0, 0, 0, 0])
    assert inp.buttons == (False, False, True)


class Scripted(InputDevice):
    def __init__(self, inputs):
        self.inputs = list(inputs)

    def open(self):
        pass

    def close(self):
        pass

    def read(self):
        return self.inputs.pop(0) if len(self.inputs) > 1 else self.inputs[0]


def test_joint_jog_integrates_rates_within_limits_and_lead():
    spec = bundles.joint_robot_spec()  # shoulder range +-1.5, 2 rad/s; elbow +-2, 3 rad/s
    clock = Clock()
    push = DeviceInput(np.array([1.0, -1.0, 0, 0, 0, 0]))
    jog = JointJog(Scripted([push]), spec, speed=0.5, max_lead=0.3, clock=clock)
    robot = FakeJointRobot(spec, clock=clock)
    with robot, jog:
        s = robot.observation()
        u0 = jog.command(s)
        np.testing.assert_allclose(u0, s["joint_pos"])  # starts at the measured pose
        clock.t = 0.05
        u1 = jog.command(robot.observation())
        np.testing.assert_allclose(u1 - u0, [0.5 * 2.0 * 0.05, -0.5 * 3.0 * 0.05])
        for _ in range(200):  # the robot never moves: the target stops max_lead ahead
            clock.t += 0.05
            u = jog.command({"joint_pos": s["joint_pos"]})
        np.testing.assert_allclose(u - s["joint_pos"], [0.3, -0.3])
        for _ in range(400):  # the robot follows: the target ends at the joint range
            clock.t += 0.05
            u = jog.command(robot.observation())
            robot.send_action(u)
        np.testing.assert_allclose(u, [1.5, -2.0])
        assert robot.q[0] == pytest.approx(1.5, abs=0.02)
        assert robot.q[1] == pytest.approx(-2.0, abs=0.02)


def test_joint_jog_rejects_unknown_joints():
    with pytest.raises(ConfigError, match="axis_joints"):
        JointJog(Scripted([DeviceInput(np.zeros(6))]), bundles.joint_robot_spec(), axis_joints=["wrist"])
