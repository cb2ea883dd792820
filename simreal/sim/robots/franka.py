"""Franka Emika Panda: 7-DoF arm with the Franka Hand parallel gripper, built from primitives.

Kinematics: Franka's modified-DH parameters (Craig convention; d1 0.333, d3 0.316, a4 0.0825,
a5 -0.0825, d5 0.384, a7 0.088, flange d 0.107 m; hand rotated -45 deg about the flange z),
written as MuJoCo body frames the way MuJoCo Menagerie's ``franka_emika_panda/panda.xml`` does.
Inertials: Menagerie's, from Gaz et al., "Dynamic Identification of the Franka Emika Panda
Robot", RA-L 2019 (arm 16.7 kg, hand 0.73 kg, fingers 0.015 kg each). Geoms: capsules on the
link segments, a box hand and box finger pads. The tool centre point (site ``end_effector``)
is 0.1034 m along the flange z, between the fingertips (Franka's documented TCP).

The gripper is one actuator, ``gripper``, on a fixed tendon ``q_finger1 + q_finger2`` (the
opening width [m], 0..0.08, as franka_gripper's ``Move`` takes it); an equality keeps the two
fingers equal. Gains, limits, armature and the ``ready`` home pose live in
``configs/robots/franka.yaml``.
"""

from __future__ import annotations

import mujoco

from simreal.robot_spec import RobotSpec
from simreal.sim.robots.articulated import Coupled, Geom, Inertial, Link, Robot, Site, build_articulated

I = Inertial  # noqa: E741
_X_P90, _X_M90 = (0.7071068, 0.7071068, 0.0, 0.0), (0.7071068, -0.7071068, 0.0, 0.0)  # +-90 deg about x
_FINGER_PAD = (Geom("box", (0.0085, 0.006, 0.022), (0.0, 0.007, 0.027)),)  # inner face at y = 1 mm
_FINGER_I = I(0.015, (0, 0, 0), (2.375e-6, 2.375e-6, 7.5e-7))

LINKS = (
    Link(
        "link0",
        None,
        (0.0, 0.0, 0.0),
        radius=0.06,
        inertial=I(
            0.629769, (-0.041018, -0.00014, 0.049974), full=(0.00315, 0.00388, 0.004285, 8.2904e-7, 0.00015, 8.2299e-6)
        ),
    ),
    Link(
        "link1",
        "link0",
        (0.0, 0.0, 0.333),
        joint="panda_joint1",
        geoms=(Geom("sphere", (0.06,)),),
        inertial=I(
            4.970684, (0.003875, 0.002081, -0.04762), full=(0.70337, 0.70661, 0.009117, -0.000139, 0.006772, 0.019169)
        ),
    ),
    Link(
        "link2",
        "link1",
        (0.0, 0.0, 0.0),
        quat=_X_M90,
        joint="panda_joint2",
        radius=0.06,
        inertial=I(
            0.646926, (-0.003141, -0.02872, 0.003495), full=(0.007962, 0.02811, 0.025995, -0.003925, 0.010254, 0.000704)
        ),
    ),
    Link(
        "link3",
        "link2",
        (0.0, -0.316, 0.0),
        quat=_X_P90,
        joint="panda_joint3",
        radius=0.06,
        inertial=I(
            3.228604,
            (0.027518, 0.039252, -0.066502),
            full=(0.037242, 0.036155, 0.01083, -0.004761, -0.011396, -0.012805),
        ),
    ),
    Link(
        "link4",
        "link3",
        (0.0825, 0.0, 0.0),
        quat=_X_P90,
        joint="panda_joint4",
        radius=0.06,
        inertial=I(
            3.587895, (-0.05317, 0.104419, 0.027454), full=(0.025853, 0.019552, 0.028323, 0.007796, -0.001332, 0.008641)
        ),
    ),
    Link(
        "link5",
        "link4",
        (-0.0825, 0.384, 0.0),
        quat=_X_M90,
        joint="panda_joint5",
        geoms=(Geom("sphere", (0.06,)),),
        inertial=I(
            1.225946,
            (-0.011953, 0.041065, -0.038437),
            full=(0.035549, 0.029474, 0.008627, -0.002117, -0.004037, 0.000229),
        ),
    ),
    Link(
        "link6",
        "link5",
        (0.0, 0.0, 0.0),
        quat=_X_P90,
        joint="panda_joint6",
        radius=0.05,
        inertial=I(
            1.666555,
            (0.060149, -0.014117, -0.010517),
            full=(0.001964, 0.004354, 0.005433, 0.000109, -0.001158, 0.000341),
        ),
    ),
    Link(
        "link7",
        "link6",
        (0.088, 0.0, 0.0),
        quat=_X_P90,
        joint="panda_joint7",
        radius=0.04,
        inertial=I(
            0.735522,
            (0.010517, -0.004252, 0.061597),
            full=(0.012516, 0.010027, 0.004815, -0.000428, -0.001196, -0.000741),
        ),
    ),
    Link(
        "hand",
        "link7",
        (0.0, 0.0, 0.107),
        quat=(0.9238795, 0.0, 0.0, -0.3826834),
        geoms=(Geom("box", (0.025, 0.095, 0.03), (0.0, 0.0, 0.03)),),
        inertial=I(0.73, (-0.01, 0.0, 0.03), (0.001, 0.0025, 0.0017)),
    ),
    Link(
        "left_finger",
        "hand",
        (0.0, 0.0, 0.0584),
        joint="panda_finger_joint1",
        axis=(0, 1, 0),
        slide=True,
        geoms=_FINGER_PAD,
        inertial=_FINGER_I,
    ),
    Link(
        "right_finger",
        "hand",
        (0.0, 0.0, 0.0584),
        quat=(0.0, 0.0, 0.0, 1.0),
        joint="panda_finger_joint2",
        axis=(0, 1, 0),
        slide=True,
        geoms=_FINGER_PAD,
        inertial=_FINGER_I,
    ),
)

PANDA = Robot(
    "franka",
    LINKS,
    (*(f"panda_joint{i}" for i in range(1, 8)), "gripper"),
    sites=(Site("end_effector", "hand", (0.0, 0.0, 0.1034)),),
    coupled=(Coupled("gripper", ("panda_finger_joint1", "panda_finger_joint2"), (1.0, 1.0)),),
)


def build_spec(spec: RobotSpec, self_collision: bool = False) -> mujoco.MjSpec:
    """The Panda's MjSpec (fixed base at the world origin) with gains, limits and pose from ``spec``.

    Args:
      spec: a Franka Panda robot spec.
      self_collision: let non-adjacent links collide.
    """
    return build_articulated(PANDA, spec, self_collision=self_collision)
