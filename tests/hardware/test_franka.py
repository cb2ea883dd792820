"""The Franka driver (franky) against its twin, and against real franky where no robot answers."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import time

import numpy as np
import pytest

from simreal.errors import ConfigError
from simreal.hardware.franka.driver import FrankaConfig, FrankaRobot
from simreal.hardware.franka.twin import ACCELERATION_LIMITS, FrankaTwin
from simreal.hardware.robot import HardwareError
from tests.fixtures import bundles

DT = 0.02  # the spec's 50 Hz


def arm(twin: FrankaTwin, **kw) -> FrankaRobot:
    return FrankaRobot(FrankaConfig(robot="franka", ip=twin.ip, **kw))


def follow(robot: FrankaRobot, u: np.ndarray, seconds: float) -> dict[str, np.ndarray]:
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        robot.observation()
        robot.send_action(u)
        time.sleep(DT)
    return robot.observation()


# Run in a child process: once franky is imported, its pybind11 exception translator runs (and
# rethrows) for every C++ exception any pybind11 module translates, the StopIteration of each of
# torch's JIT graph iterators included, and the rest of this process's ONNX exports got 10-50x
# slower (a 40-layer MLP: 0.1 s -> 1.4 s; the suite's bundle exports over a minute each).
_REAL_FRANKY = """
from simreal.hardware.franka.driver import FrankaConfig, FrankaRobot
from simreal.hardware.robot import HardwareError
robot = FrankaRobot(FrankaConfig(robot="franka", ip="127.0.0.1"))  # nothing listens on FCI's port 1337
try:
    robot.connect()
except HardwareError as e:
    print(repr(str(e)), robot.connected)
"""


def test_real_franky_without_a_robot_is_one_line_naming_the_address():
    if importlib.util.find_spec("franky") is None:
        pytest.skip("franky is not installed")
    out = subprocess.run([sys.executable, "-c", _REAL_FRANKY], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    msg, connected = out.stdout.strip().rsplit(" ", 1)
    msg = ast.literal_eval(msg)
    assert msg.startswith("franka at 127.0.0.1: libfranka:") and "\n" not in msg
    assert connected == "False"


def test_the_arm_reaches_a_target_at_the_scaled_speed_and_the_hand_opens():
    with FrankaTwin() as twin, arm(twin, relative_dynamics_factor=0.2) as robot:
        s0 = robot.observation()
        assert s0["joint_pos"].shape == (8,) and s0["joint_vel"].shape == (8,)
        target = s0["joint_pos"].copy()
        target[[0, 3, 6]] += [0.4, 0.3, -0.5]
        target[7] = 0.06
        half = follow(robot, target, 0.5)
        # no faster than 0.2 of joint 1's 2.175 rad/s limit (plus the impedance's lag and sag)
        assert abs(half["joint_pos"][0] - s0["joint_pos"][0]) <= 0.2 * 2.175 * 0.6 + 0.01
        assert abs(half["joint_vel"][0]) <= 0.2 * 2.175 + 0.05
        s = follow(robot, target, 2.5)
        np.testing.assert_allclose(s["joint_pos"][:7], target[:7], atol=0.01)
        assert s["joint_pos"][7] == pytest.approx(0.06, abs=0.003)
    assert twin.gripper_commands == [("move", 0.06)]  # one command for 150 identical targets


def test_commands_are_clamped_to_the_spec_and_a_small_width_grasps():
    with FrankaTwin() as twin, arm(twin) as robot:
        u = robot.observation()["joint_pos"].copy()
        u[3], u[7] = 0.5, 0.003  # joint 4's range ends at -0.0698 rad
        sent = robot.send_action(u)
        assert sent[3] == pytest.approx(-0.0698)
        np.testing.assert_allclose(twin.target[3], -0.0698)
        assert twin.gripper_commands == [("grasp", 0.0)] and sent[7] == pytest.approx(0.003)
        u[7] = 0.006  # within the 5 mm deadband of the last width sent
        robot.send_action(u)
        assert len(twin.gripper_commands) == 1
        with pytest.raises(HardwareError, match="non-finite"):
            robot.send_action(np.full(8, np.nan))


def test_disconnect_holds_the_measured_pose_and_keeps_the_grasp():
    twin = FrankaTwin()
    with twin:
        robot = arm(twin)
        with robot:
            u = robot.observation()["joint_pos"].copy()
            u[0] += 0.3
            u[7] = 0.0
            robot.send_action(u)
            time.sleep(0.3)
            measured = robot.observation()["joint_pos"]
        assert not robot.connected
        np.testing.assert_allclose(twin.target, measured[:7])  # the hold replaced the motion
        assert twin.gripper_commands == [("grasp", 0.0)]  # no width re-sent: the grasp holds


def test_a_twin_address_that_is_not_open_and_a_wrong_mode_are_refused():
    with pytest.raises(HardwareError, match="no Franka twin is open at twin://nowhere"):
        FrankaRobot(FrankaConfig(robot="franka", ip="twin://nowhere")).connect()
    with pytest.raises(ConfigError, match="action_mode"):
        FrankaRobot(FrankaConfig(robot="franka", ip="twin://x", action_mode="joint_effort"))
    with pytest.raises(HardwareError, match="arm robots"):
        FrankaRobot(FrankaConfig(robot="g1", ip="twin://x"))


def test_the_twin_limits_acceleration():
    twin = FrankaTwin()
    twin.target = twin.setpoint[:7] + 1.0
    t0 = twin.sim.time_s
    time.sleep(0.05)
    twin.state()
    elapsed = twin.sim.time_s - t0
    assert elapsed >= 0.04
    # at the limit all the way (the stop is a radian away), and not beyond it
    np.testing.assert_allclose(twin.velocity, ACCELERATION_LIMITS * elapsed, rtol=1e-6)


def test_drive_runs_a_bundle_on_the_franka_twin_through_the_drivers_table(tmp_path):
    """Across the stages: a Franka bundle, the deploy runner and its safety layer, the drivers
    table's franka row, franky's calls, the MuJoCo twin."""
    from simreal.bundle import load_bundle
    from simreal.deploy.runner import PolicyRunner
    from simreal.hardware.drive import drive
    from simreal.hardware.drivers import open_robot

    bundle = load_bundle(bundles.make_joint_mlp_bundle(tmp_path / "b", "franka"))
    runner = PolicyRunner(bundle)
    with open_robot("franka", "franka", {"relative_dynamics_factor": 0.5}, twin=True) as robot:
        report = drive(robot, runner, duration_s=1.0)
        s = robot.observation()
    assert report.read_errors == 0 and report.sent == report.ticks and report.ticks >= 40
    low, high = robot.low, robot.high
    assert np.all((s["joint_pos"][:7] >= low[:7] - 0.02) & (s["joint_pos"][:7] <= high[:7] + 0.02))


def test_recording_end_effector_teleop_on_the_franka_twin(tmp_path):
    """Across the stages: a rate device, end-effector IK, the Franka driver and its twin, the
    recorder, a LeRobot v3 dataset read back; the tool rose while it recorded."""
    from fixtures.scripted_device import ScriptedDevice
    from simreal.dataset.reader import Dataset
    from simreal.dataset.writer import DatasetWriter
    from simreal.hardware.record.recorder import Recorder, dataset_features
    from simreal.hardware.teleop.ee_jog import EndEffectorJog
    from simreal.hardware.teleop.teleoperator import DeviceInput

    dev = ScriptedDevice()
    with (
        FrankaTwin() as twin,
        arm(twin, relative_dynamics_factor=0.5) as robot,
        EndEffectorJog(dev, robot.spec) as teleop,
    ):
        p0, _ = teleop.tool_pose(robot.observation()["joint_pos"])
        dev.now = DeviceInput(np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0]))  # up at 0.1 m/s
        writer = DatasetWriter.create(
            tmp_path / "ds", fps=25, features=dataset_features(robot, []), robot_type="franka"
        )
        stats = Recorder(robot, teleop, [], writer, fps=25, task="lift the tool").run(1, episode_s=1.6, reset_s=0.0)
        writer.close()
        time.sleep(0.3)
        p1, _ = teleop.tool_pose(robot.observation()["joint_pos"])
    assert stats.episodes[0].frames == 40
    assert 0.08 < p1[2] - p0[2] < 0.2 and np.linalg.norm((p1 - p0)[:2]) < 0.02, (p0, p1)
    ep = Dataset(tmp_path / "ds").episode(0)
    assert ep["action"].shape == (40, 8) and ep["observation.state"].shape == (40, 8)
    assert ep["observation.state"][-1][3] > ep["observation.state"][0][3]  # the elbow opened as the tool rose
