"""End-effector jogging: device axes move the tool along world axes through IK, within the
joint ranges, without wind-up at the workspace's edge; buttons drive the gripper alone."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco")

from fixtures.scripted_device import ScriptedDevice  # noqa: E402
from simreal.errors import ConfigError  # noqa: E402
from simreal.hardware.teleop.ee_jog import EndEffectorJog  # noqa: E402
from simreal.hardware.teleop.teleoperator import DeviceInput  # noqa: E402
from simreal.robot_spec import load_robot_spec  # noqa: E402

DT = 1 / 30


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += DT
        return self.t


def _jog(robot: str, **kw):
    spec = load_robot_spec(robot)
    dev = ScriptedDevice()
    jog = EndEffectorJog(dev, spec, clock=Clock(), **kw)
    q = np.array([a.default for a in spec.actuators], np.float64)
    if robot == "so100":
        q[1:4] = [-0.6, 0.8, 0.6]  # out of the folded home pose: room to move every way
    return spec, dev, jog, q


def _drive(jog, dev, q, axes, n, buttons=()):
    """n calls with an ideal servo (the measured pose is the last command)."""
    dev.now = DeviceInput(np.asarray(axes, np.float64), tuple(buttons))
    for _ in range(n):
        q = jog.command({"joint_pos": q})
    return q


@pytest.mark.parametrize("robot", ["franka", "so100"])
def test_each_axis_moves_the_tool_along_its_world_axis(robot):
    spec, dev, jog, q = _jog(robot)
    q = _drive(jog, dev, q, np.zeros(6), 2)
    for axis in range(3):
        p0, R0 = jog.tool_pose(q)
        a = np.zeros(6)
        a[axis] = 0.5
        q = _drive(jog, dev, q, a, 15)  # 0.5 s at 0.05 m/s: 25 mm
        p1, R1 = jog.tool_pose(q)
        d = p1 - p0
        assert d[axis] == pytest.approx(0.025, abs=0.006), (axis, d)
        assert np.linalg.norm(np.delete(d, axis)) < 0.006, (axis, d)
        if robot == "franka":  # 7 DoF: the orientation holds while translating
            assert np.degrees(np.arccos(np.clip((np.trace(R0.T @ R1) - 1) / 2, -1, 1))) < 2.0
    low = np.array([a.range[0] for a in spec.actuators])
    high = np.array([a.range[1] for a in spec.actuators])
    assert np.all(q >= low - 1e-9) and np.all(q <= high + 1e-9)


def test_yaw_turns_the_tool_about_world_z_on_franka():
    _, dev, jog, q = _jog("franka")
    q = _drive(jog, dev, q, np.zeros(6), 2)
    p0, R0 = jog.tool_pose(q)
    q = _drive(jog, dev, q, [0, 0, 0, 0, 0, 0.5], 15)  # 0.5 s at 0.4 rad/s: 0.2 rad about z
    p1, R1 = jog.tool_pose(q)
    turn = R1 @ R0.T
    assert np.arctan2(turn[1, 0], turn[0, 0]) == pytest.approx(0.2, abs=0.03)
    assert np.linalg.norm(p1 - p0) < 0.005


def test_no_wind_up_at_the_edge_of_the_workspace():
    """Pushing outwards for 10 s (1 m of commands, far beyond reach), then back for 0.5 s (5 cm
    of commands): the tool comes back within that half second (the target leads the reached
    pose by at most 3 cm), instead of standing still for 9 s while a metre of target unwinds."""
    _, dev, jog, q = _jog("franka")
    q = _drive(jog, dev, q, [0, 1, 0, 0, 0, 0], 300)
    far, _ = jog.tool_pose(q)
    assert np.linalg.norm(jog.pos - far) <= jog.max_lead_m + 1e-9
    q = _drive(jog, dev, q, [0, -1, 0, 0, 0, 0], 15)
    back, _ = jog.tool_pose(q)
    assert far[1] - back[1] > 0.015


def test_gripper_buttons_move_the_gripper_only():
    spec, dev, jog, q = _jog("so100")
    q = _drive(jog, dev, q, np.zeros(6), 2)
    g = spec.actuator_names.index("gripper")
    arm = [i for i in range(len(q)) if i != g]
    opened = _drive(jog, dev, q, np.zeros(6), 15, buttons=(False, False, True))
    assert opened[g] - q[g] == pytest.approx(0.5 * 0.5 * (1.74533 + 0.17453), rel=0.05)
    np.testing.assert_allclose(opened[arm], q[arm], atol=1e-3)
    closed = _drive(jog, dev, opened, np.zeros(6), 60, buttons=(False, True))
    assert closed[g] == pytest.approx(-0.17453)  # held at the range's end


def test_a_robot_that_is_not_an_arm_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="'teleop'.*arm"):
        EndEffectorJog(ScriptedDevice(), load_robot_spec("g1"))


def test_jogging_the_so100_twin_over_its_feetech_bus_lifts_the_tool():
    """Across the stages: the jog's joint targets go through the driver, over the Feetech
    protocol on a pseudo-terminal, to the MuJoCo twin; the measured tool rises."""
    import time

    from simreal.hardware.drivers import open_robot

    dev = ScriptedDevice()
    with open_robot("so100", "so100", twin=True) as robot:
        jog = EndEffectorJog(dev, robot.spec)
        start = np.array([0.0, -0.6, 0.8, 0.6, 0.0, 0.0])
        for _ in range(45):  # to a pose with room to move
            robot.observation()
            robot.send_action(start)
            time.sleep(DT)
        p0, _ = jog.tool_pose(robot.observation()["joint_pos"])
        dev.now = DeviceInput(np.array([0, 0, 1.0, 0, 0, 0]))
        for _ in range(30):  # 1 s up at 0.1 m/s
            robot.send_action(jog.command(robot.observation()))
            time.sleep(DT)
        time.sleep(0.3)
        p1, _ = jog.tool_pose(robot.observation()["joint_pos"])
    assert p1[2] - p0[2] > 0.05, (p0, p1)
    assert np.linalg.norm((p1 - p0)[:2]) < 0.03, (p0, p1)
