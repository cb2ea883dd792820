"""SO-100 / SO-101 arm (LeRobot, The Robot Studio): 5-DoF arm + 1-DoF jaw, six Feetech STS3215 servos.

Kinematics and inertials: The Robot Studio's ``Simulation/SO101/so101_new_calib.xml`` (SO-ARM100
repository, exported from the Onshape CAD by onshape-to-robot): body offsets and rotations,
z-axis joints, link masses (0.63 kg in all) and full inertia tensors are copied. Its zero pose is
LeRobot's calibration zero (the middle of each joint's range), so joint angles here equal the
radians LeRobot reports for a calibrated arm. The SO-100 and SO-101 share this kinematic chain
(the 101 re-routes cables and changes the wrist and jaw prints). Meshes are replaced by capsules
on the link segments, a box base, and box jaws.

Joint and actuator names are LeRobot's ``SO100Follower`` motor names, in bus-id order 1..6.
Gains, limits and the home pose live in ``configs/robots/so100.yaml``.
"""

from __future__ import annotations

import mujoco

from simreal.robot_spec import RobotSpec
from simreal.sim.robots.articulated import Geom, Inertial, Link, Robot, Site, build_articulated

I = Inertial  # noqa: E741

LINKS = (
    Link(
        "base",
        None,
        (0.0, 0.0, 0.0),
        geoms=(Geom("box", (0.045, 0.04, 0.03), (0.015, 0.0, 0.03)),),
        inertial=I(
            0.147,
            (0.0137179, -5.19711e-05, 0.0334843),
            full=(0.000114686, 0.000136117, 0.000130364, -4.59787e-07, 4.97151e-06, 9.75275e-08),
        ),
    ),
    Link(
        "shoulder",
        "base",
        (0.0388353, 0.0, 0.0624),
        quat=(0.0, 0.0, -1.0, 0.0),
        joint="shoulder_pan",
        radius=0.025,
        inertial=I(
            0.100006,
            (-0.0307604, -1.66727e-05, -0.0252713),
            full=(8.3759e-05, 8.10403e-05, 2.39783e-05, 7.55525e-08, -1.16342e-06, 1.54663e-07),
        ),
    ),
    Link(
        "upper_arm",
        "shoulder",
        (-0.0303992, -0.0182778, -0.0542),
        quat=(0.5, -0.5, -0.5, -0.5),
        joint="shoulder_lift",
        radius=0.02,
        inertial=I(
            0.103,
            (-0.0898471, -0.00838224, 0.0184089),
            full=(4.08002e-05, 0.000147318, 0.000142487, -1.97819e-05, -4.03016e-08, 8.97326e-09),
        ),
    ),
    Link(
        "lower_arm",
        "upper_arm",
        (-0.11257, -0.028, 0.0),
        quat=(0.7071068, 0.0, 0.0, 0.7071068),
        joint="elbow_flex",
        radius=0.02,
        inertial=I(
            0.104,
            (-0.0980701, 0.00324376, 0.0182831),
            full=(2.87438e-05, 0.000159844, 0.00014529, 7.41152e-06, 1.26409e-06, -4.90188e-08),
        ),
    ),
    Link(
        "wrist",
        "lower_arm",
        (-0.1349, 0.0052, 0.0),
        quat=(0.7071068, 0.0, 0.0, -0.7071068),
        joint="wrist_flex",
        radius=0.02,
        inertial=I(
            0.079,
            (-0.000103312, -0.0386143, 0.0281156),
            full=(3.68263e-05, 2.5391e-05, 2.1e-05, 1.7893e-08, -5.28128e-08, 3.6412e-06),
        ),
    ),
    Link(
        "gripper",
        "wrist",
        (0.0, -0.0611, 0.0181),
        quat=(0.0172091, -0.0172091, 0.706897, 0.706897),
        joint="wrist_roll",
        geoms=(
            Geom("box", (0.02, 0.02, 0.02), (0.005, 0.0, -0.02)),  # jaw servo
            Geom("box", (0.004, 0.01, 0.03), (-0.012, 0.0, -0.07)),
        ),  # fixed jaw
        inertial=I(
            0.087,
            (0.000213627, 0.000245138, -0.025187),
            full=(2.75087e-05, 4.33657e-05, 3.45059e-05, -3.35241e-07, -5.7352e-06, -5.17847e-08),
        ),
    ),
    Link(
        "moving_jaw",
        "gripper",
        (0.0202, 0.0188, -0.0234),
        quat=(0.7071068, 0.7071068, 0.0, 0.0),
        joint="gripper",
        geoms=(Geom("box", (0.004, 0.025, 0.01), (-0.0232, -0.0516, 0.0188)),),  # pad 1 mm off the fixed jaw at 0
        inertial=I(
            0.012,
            (-0.00157495, -0.0300244, 0.0192755),
            full=(6.61427e-06, 1.89032e-06, 5.28738e-06, -3.19807e-07, -5.90717e-09, -1.09945e-07),
        ),
    ),
)

SO100 = Robot(
    "so100",
    LINKS,
    ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"),
    sites=(Site("end_effector", "gripper", (-0.0079, -0.000218, -0.0981)),),
)  # the CAD's gripperframe


def build_spec(spec: RobotSpec, self_collision: bool = False) -> mujoco.MjSpec:
    """The SO-100's MjSpec (base fixed at the world origin) with gains, limits and pose from ``spec``.

    Args:
      spec: an SO-100 robot spec.
      self_collision: let non-adjacent links collide.
    """
    return build_articulated(SO100, spec, self_collision=self_collision)
