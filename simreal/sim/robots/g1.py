"""Unitree G1 humanoid (29 DoF, and the 23-DoF variant), built from primitives.

Kinematics and inertials: Unitree's ``g1_29dof_rev_1_0.xml`` (unitree_ros, robots/g1_description,
sha adb48c7), which MuJoCo Menagerie's ``unitree_g1`` also derives from: body offsets and
rotations, joint axes, link masses (33.3 kg in all; Unitree quotes about 35 kg) and principal
inertias are copied; meshes are replaced by capsules on the link segments, box feet (the sole
spans the four contact spheres of the original, x -0.05..0.12 m, y +-0.03 m, 0.035 m below the
ankle roll axis), a box torso and a sphere head. Gains, limits, armature and the default pose live
in ``configs/robots/g1.yaml``.

Driver order (unitree_sdk2 ``LowCmd`` motor index, ``unitree_hg`` G1): left leg 0-5, right leg
6-11, waist yaw/roll/pitch 12-14, left arm 15-21, right arm 22-28. The 23-DoF G1 keeps that order
with waist roll/pitch and wrist pitch/yaw removed (their bodies stay, welded); the 12-DoF G1
(``g1_12dof``) actuates the legs; its waist and arms are held at their ``held`` targets, as joints
under the driver's PD (``hold="pd"``) or welded there (``hold="weld"``).

    >>> from simreal.robot_spec import load_robot_spec           # doctest: +SKIP
    >>> from simreal.sim.robots import build_model
    >>> m = build_model(load_robot_spec("g1"))                    # 29 actuators, key "home"
"""

from __future__ import annotations

import mujoco

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec
from simreal.sim.robots.articulated import Geom, Inertial, Link, Robot, Site, build_articulated, mirror, mirror_sites

I = Inertial  # noqa: E741  (the tables read better short)

# Left leg, pelvis -> ankle roll: (pos [m], quat, joint axis, inertial) from g1_29dof_rev_1_0.xml.
LEFT_LEG = (
    Link(
        "left_hip_pitch_link",
        "pelvis",
        (0.0, 0.064452, -0.1027),
        joint="left_hip_pitch_joint",
        axis=(0, 1, 0),
        radius=0.04,
        inertial=I(
            1.35,
            (0.002741, 0.047791, -0.02606),
            (0.00181517, 0.00153422, 0.00116212),
            (0.954862, 0.293964, 0.0302556, 0.030122),
        ),
    ),
    Link(
        "left_hip_roll_link",
        "left_hip_pitch_link",
        (0.0, 0.052, -0.030465),
        quat=(0.996179, 0, -0.0873386, 0),
        joint="left_hip_roll_joint",
        axis=(1, 0, 0),
        radius=0.045,
        inertial=I(
            1.52,
            (0.029812, -0.001045, -0.087934),
            (0.00254986, 0.00241169, 0.00148755),
            (0.977808, -1.97119e-05, 0.205576, -0.0403793),
        ),
    ),
    Link(
        "left_hip_yaw_link",
        "left_hip_roll_link",
        (0.025001, 0.0, -0.12412),
        joint="left_hip_yaw_joint",
        axis=(0, 0, 1),
        radius=0.05,
        inertial=I(
            1.702,
            (-0.057709, -0.010981, -0.15078),
            (0.00776166, 0.00717575, 0.00160139),
            (0.600598, 0.15832, 0.223482, 0.751181),
        ),
    ),
    Link(
        "left_knee_link",
        "left_hip_yaw_link",
        (-0.078273, 0.0021489, -0.17734),
        quat=(0.996179, 0, 0.0873386, 0),
        joint="left_knee_joint",
        axis=(0, 1, 0),
        radius=0.04,
        inertial=I(
            1.932,
            (0.005457, 0.003964, -0.12074),
            (0.0113804, 0.0112778, 0.00146458),
            (0.923418, -0.0327699, 0.0158246, 0.382067),
        ),
    ),
    Link(
        "left_ankle_pitch_link",
        "left_knee_link",
        (0.0, -9.4445e-05, -0.30001),
        joint="left_ankle_pitch_joint",
        axis=(0, 1, 0),
        inertial=I(
            0.074,
            (-0.007269, 0, 0.011137),
            (1.89e-05, 1.40805e-05, 6.9195e-06),
            (0.603053, 0.369225, 0.369225, 0.603053),
        ),
    ),
    Link(
        "left_ankle_roll_link",
        "left_ankle_pitch_link",
        (0.0, 0.0, -0.017558),
        joint="left_ankle_roll_joint",
        axis=(1, 0, 0),
        geoms=(Geom("box", (0.085, 0.035, 0.01), (0.035, 0.0, -0.025), name="left_foot"),),
        inertial=I(
            0.608,
            (0.026505, 0, -0.016425),
            (0.00167218, 0.0016161, 0.000217621),
            (-0.000481092, 0.728482, -0.000618967, 0.685065),
        ),
    ),
)

# Left arm, torso -> wrist yaw.
LEFT_ARM = (
    Link(
        "left_shoulder_pitch_link",
        "torso_link",
        (0.0039563, 0.10022, 0.24778),
        quat=(0.990264, 0.139201, 1.38722e-05, -9.86868e-05),
        joint="left_shoulder_pitch_joint",
        axis=(0, 1, 0),
        radius=0.035,
        inertial=I(
            0.718,
            (0, 0.035892, -0.011628),
            (0.000465864, 0.000432842, 0.000406394),
            (0.654152, 0.0130458, -0.326267, 0.68225),
        ),
    ),
    Link(
        "left_shoulder_roll_link",
        "left_shoulder_pitch_link",
        (0.0, 0.038, -0.013831),
        quat=(0.990268, -0.139172, 0, 0),
        joint="left_shoulder_roll_joint",
        axis=(1, 0, 0),
        radius=0.035,
        inertial=I(
            0.643,
            (-0.000227, 0.00727, -0.063243),
            (0.000691311, 0.000618011, 0.000388977),
            (0.701256, -0.0196223, -0.00710317, 0.712604),
        ),
    ),
    Link(
        "left_shoulder_yaw_link",
        "left_shoulder_roll_link",
        (0.0, 0.00624, -0.1032),
        joint="left_shoulder_yaw_joint",
        axis=(0, 0, 1),
        radius=0.035,
        inertial=I(
            0.734,
            (0.010773, -0.002949, -0.072009),
            (0.00106187, 0.00103217, 0.000400661),
            (0.716879, -0.0964829, -0.0679942, 0.687134),
        ),
    ),
    Link(
        "left_elbow_link",
        "left_shoulder_yaw_link",
        (0.015783, 0.0, -0.080518),
        joint="left_elbow_joint",
        axis=(0, 1, 0),
        radius=0.03,
        inertial=I(
            0.6,
            (0.064956, 0.004454, -0.010062),
            (0.000443035, 0.000421612, 0.000259353),
            (0.541765, 0.636132, 0.388821, 0.388129),
        ),
    ),
    Link(
        "left_wrist_roll_link",
        "left_elbow_link",
        (0.1, 0.00188791, -0.01),
        joint="left_wrist_roll_joint",
        axis=(1, 0, 0),
        radius=0.03,
        inertial=I(
            0.085445,
            (0.0171394, 0.000537591, 4.8864e-07),
            (5.48211e-05, 4.96646e-05, 3.57798e-05),
            (0.575338, 0.411667, -0.574906, 0.411094),
        ),
    ),
    Link(
        "left_wrist_pitch_link",
        "left_wrist_roll_link",
        (0.038, 0.0, 0.0),
        joint="left_wrist_pitch_joint",
        axis=(0, 1, 0),
        radius=0.03,
        inertial=I(
            0.48405,
            (0.0229999, -0.00111685, -0.00111658),
            (0.000430353, 0.000429873, 0.000164648),
            (0.249998, 0.661363, 0.293036, 0.643608),
        ),
    ),
    Link(
        "left_wrist_yaw_link",
        "left_wrist_pitch_link",
        (0.046, 0.0, 0.0),
        joint="left_wrist_yaw_joint",
        axis=(0, 0, 1),
        geoms=(Geom("sphere", (0.04,), (0.08, 0.0, 0.0)),),
        inertial=I(
            0.254576,
            (0.0708244, 0.000191745, 0.00161742),
            (0.000646113, 0.000559993, 0.000147566),
            (0.510571, 0.526295, 0.468078, 0.493188),
        ),
    ),
)

PELVIS = Link(
    "pelvis",
    None,
    (0.0, 0.0, 0.793),
    radius=0.05,
    inertial=I(3.813, (0, 0, -0.07605), (0.010549, 0.0093089, 0.0079184), (1, 0, -0.000399148, 0)),
)
WAIST = (
    Link(
        "waist_yaw_link",
        "pelvis",
        (0.0, 0.0, 0.0),
        joint="waist_yaw_joint",
        axis=(0, 0, 1),
        inertial=I(
            0.214,
            (0.003494, 0.000233, 0.018034),
            (0.000163531, 0.000107714, 0.000102205),
            (0.289697, 0.591001, -0.337795, 0.672821),
        ),
    ),
    Link(
        "waist_roll_link",
        "waist_yaw_link",
        (-0.0039635, 0.0, 0.044),
        joint="waist_roll_joint",
        axis=(1, 0, 0),
        inertial=I(0.086, (0, 2.3e-05, 0), (8.245e-06, 7.079e-06, 6.339e-06), (0.5, 0.5, -0.5, 0.5)),
    ),
    Link(
        "torso_link",
        "waist_roll_link",
        (0.0, 0.0, 0.0),
        joint="waist_pitch_joint",
        axis=(0, 1, 0),
        geoms=(Geom("box", (0.07, 0.1, 0.13), (0.0, 0.0, 0.15)), Geom("sphere", (0.07,), (0.01, 0.0, 0.41))),
        inertial=I(
            7.818,
            (0.00203158, 0.000339683, 0.184568),
            (0.121847, 0.109825, 0.0273735),
            (0.999803, -6.03319e-05, 0.0198256, 0.00131986),
        ),
    ),
)

LEFT_SITES = (
    Site("left_foot", "left_ankle_roll_link", (0.035, 0.0, -0.035)),  # sole centre
    Site("left_hand", "left_wrist_yaw_link", (0.08, 0.0, 0.0)),
)
SITES = (
    *LEFT_SITES,
    *mirror_sites(LEFT_SITES),
    Site("imu", "pelvis", (0.04525, 0.0, -0.08339)),  # imu_in_pelvis: the LowState IMU
    Site("imu_torso", "torso_link", (-0.03959, -0.00224, 0.14792)),
    Site("head", "torso_link", (0.01, 0.0, 0.41)),
)


def _side(links: tuple[Link, ...]) -> tuple[Link, ...]:
    return (*links, *mirror(links))


LINKS = (PELVIS, *_side(LEFT_LEG), *WAIST, *_side(LEFT_ARM))
_ARM_JOINTS = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
_LEG_JOINTS = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
DRIVER_ORDER = (
    *(f"{s}_{j}_joint" for s in ("left", "right") for j in _LEG_JOINTS),
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    *(f"{s}_{j}_joint" for s in ("left", "right") for j in _ARM_JOINTS),
)
G1 = Robot("g1", LINKS, DRIVER_ORDER, floating=True, sites=SITES, feet=("left_foot", "right_foot"), imu_site="imu")

VARIANTS: dict[str, tuple[str, ...]] = {
    "29dof": (),
    "23dof": (
        "waist_roll_joint",
        "waist_pitch_joint",
        *(f"{s}_wrist_{j}_joint" for s in ("left", "right") for j in ("pitch", "yaw")),
    ),
    # legs only: waist and arms held where the spec's ``held`` targets put them (unitree_rl_gym's
    # g1_12dof: fixed at 0, held there by the driver on the robot)
    "12dof": DRIVER_ORDER[2 * len(_LEG_JOINTS) :],
}


def build_spec(
    spec: RobotSpec,
    variant: str = "29dof",
    fixed_base: bool = False,
    self_collision: bool = False,
    floor_contact: str = "all",
    hold: str = "weld",
) -> mujoco.MjSpec:
    """The G1's MjSpec with gains, limits and pose from ``spec``.

    Args:
      spec: a G1 robot spec (``g1``, ``g1_23dof`` or ``g1_12dof``).
      variant: ``29dof``, ``23dof`` (welds waist roll/pitch and wrist pitch/yaw) or ``12dof``
        (the legs alone are actuated; the waist and arms are held, see ``hold``).
      fixed_base: pin the pelvis at standing height instead of a free joint.
      self_collision: let non-adjacent links collide.
      floor_contact: ``all`` or ``feet`` (only the soles touch the world: MJX's fast locomotion).
      hold: ``weld`` the joints the spec ``held`` where the driver holds them, or keep them as joints
        under the driver's ``pd`` (``simreal.sim.robots.articulated``).
    """
    if variant not in VARIANTS:
        raise ConfigError(
            "model.options.variant", f"unknown G1 variant {variant!r}; valid: {', '.join(VARIANTS)}", spec.source
        )
    return build_articulated(
        G1,
        spec,
        locked=VARIANTS[variant],
        hold=hold,
        fixed_base=fixed_base,
        self_collision=self_collision,
        floor_contact=floor_contact,
    )
