"""Unitree H1 humanoid (19 DoF: legs 5+5 with one ankle pitch joint, torso yaw, arms 4+4).

Kinematics and inertials: MuJoCo Menagerie ``unitree_h1/h1.xml``, derived from Unitree's
``h1_description`` (unitree_ros): body offsets and rotations, joint axes, link masses (51.4 kg
in all; Unitree quotes about 47 kg) and principal inertias are copied; meshes are replaced by
capsules on the link segments, box feet (the span of Menagerie's three foot capsules:
x -0.05..0.15 m, y +-0.044 m, sole 0.07 m below the ankle axis), a box torso and a sphere head.
Gains, limits, armature and the default pose live in ``configs/robots/h1.yaml``.

Driver order (unitree_sdk2 H1 ``LowCmd``, ``unitree_go`` messages, slot 9 unused): right hip
roll, right hip pitch, right knee, left hip roll, left hip pitch, left knee, torso, left hip yaw,
right hip yaw, left ankle, right ankle, right arm (shoulder pitch/roll/yaw, elbow), left arm. The
10-DoF H1 (``h1_10dof``, unitree_rl_gym's H1) keeps the legs in that order, with the torso and arms
held at their ``held`` targets (``hold``: ``pd`` joints or ``weld``).

The hardware IMU sits in the torso (site ``imu_torso``); the ``imu`` site and sensors are on the
pelvis, which is what locomotion policies observe (unitree_rl_gym's H1 deploy rotates the torso
IMU reading into the pelvis frame by the torso joint angle).
"""

from __future__ import annotations

import mujoco

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec
from simreal.sim.robots.articulated import Geom, Inertial, Link, Robot, Site, build_articulated, mirror, mirror_sites

I = Inertial  # noqa: E741

LEFT_LEG = (
    Link(
        "left_hip_yaw_link",
        "pelvis",
        (0.0, 0.0875, -0.1742),
        joint="left_hip_yaw_joint",
        axis=(0, 0, 1),
        radius=0.05,
        inertial=I(
            2.244,
            (-0.04923, 0.0001, 0.0072),
            (0.00304494, 0.00296885, 0.00189201),
            (0.69699, 0.219193, 0.233287, 0.641667),
        ),
    ),
    Link(
        "left_hip_roll_link",
        "left_hip_yaw_link",
        (0.039468, 0.0, 0.0),
        joint="left_hip_roll_joint",
        axis=(1, 0, 0),
        radius=0.05,
        inertial=I(
            2.232,
            (-0.0058, -0.00319, -9e-05),
            (0.00243264, 0.00225325, 0.00205492),
            (0.0438242, 0.70721, -0.0729075, 0.701867),
        ),
    ),
    Link(
        "left_hip_pitch_link",
        "left_hip_roll_link",
        (0.0, 0.11536, 0.0),
        joint="left_hip_pitch_joint",
        axis=(0, 1, 0),
        radius=0.05,
        inertial=I(
            4.152,
            (0.00746, -0.02346, -0.08193),
            (0.0829503, 0.0821457, 0.00510909),
            (0.979828, 0.0513522, -0.0169854, -0.192382),
        ),
    ),
    Link(
        "left_knee_link",
        "left_hip_pitch_link",
        (0.0, 0.0, -0.4),
        joint="left_knee_joint",
        axis=(0, 1, 0),
        radius=0.04,
        inertial=I(
            1.721,
            (-0.00136, -0.00512, -0.1384),
            (0.0125237, 0.0123104, 0.0019428),
            (0.626132, -0.034227, -0.0416277, 0.777852),
        ),
    ),
    Link(
        "left_ankle_link",
        "left_knee_link",
        (0.0, 0.0, -0.4),
        joint="left_ankle_joint",
        axis=(0, 1, 0),
        geoms=(Geom("box", (0.1, 0.044, 0.014), (0.05, 0.0, -0.056), name="left_foot"),),
        inertial=I(
            0.446,
            (0.06722, 0.00015, -0.04497),
            (0.00220848, 0.00218961, 0.000214202),
            (0.489101, 0.503197, 0.565782, 0.432972),
        ),
    ),
)

LEFT_ARM = (
    Link(
        "left_shoulder_pitch_link",
        "torso_link",
        (0.0055, 0.15535, 0.42999),
        quat=(0.976296, 0.216438, 0, 0),
        joint="left_shoulder_pitch_joint",
        axis=(0, 1, 0),
        radius=0.04,
        inertial=I(
            1.033,
            (0.005045, 0.053657, -0.015715),
            (0.00129936, 0.000987113, 0.000858198),
            (0.814858, 0.579236, -0.0201072, -0.00936488),
        ),
    ),
    Link(
        "left_shoulder_roll_link",
        "left_shoulder_pitch_link",
        (-0.0055, 0.0565, -0.0165),
        quat=(0.976296, -0.216438, 0, 0),
        joint="left_shoulder_roll_joint",
        axis=(1, 0, 0),
        radius=0.04,
        inertial=I(
            0.793,
            (0.000679, 0.00115, -0.094076),
            (0.00170388, 0.00158256, 0.00100336),
            (0.732491, 0.00917179, 0.0766656, 0.676384),
        ),
    ),
    Link(
        "left_shoulder_yaw_link",
        "left_shoulder_roll_link",
        (0.0, 0.0, -0.1343),
        joint="left_shoulder_yaw_joint",
        axis=(0, 0, 1),
        radius=0.035,
        inertial=I(
            0.839,
            (0.01365, 0.002767, -0.16266),
            (0.00408038, 0.00370367, 0.000622687),
            (0.703042, -0.0331229, -0.0473362, 0.708798),
        ),
    ),
    Link(
        "left_elbow_link",
        "left_shoulder_yaw_link",
        (0.0185, 0.0, -0.198),
        joint="left_elbow_joint",
        axis=(0, 1, 0),
        geoms=(
            Geom("capsule", (0.025,), fromto=(0, 0, 0, 0.28, 0, -0.015)),  # forearm
            Geom("sphere", (0.033,), (0.28, 0, -0.015)),
        ),  # hand
        inertial=I(
            0.669,
            (0.15908, -0.000144, -0.015776),
            (0.00601829, 0.00600579, 0.000408305),
            (0.0765232, 0.720327, 0.0853116, 0.684102),
        ),
    ),
)

PELVIS = Link(
    "pelvis",
    None,
    (0.0, 0.0, 1.0),
    radius=0.05,
    inertial=I(
        5.39, (-0.0002, 4e-05, -0.04522), (0.0490211, 0.0445821, 0.00824619), (0.498303, 0.499454, -0.500496, 0.501741)
    ),
)
TORSO = Link(
    "torso_link",
    "pelvis",
    (0.0, 0.0, 0.0),
    joint="torso_joint",
    axis=(0, 0, 1),
    geoms=(Geom("box", (0.07, 0.1, 0.22), (0.0, 0.0, 0.25)), Geom("sphere", (0.073,), (0.045, 0.0, 0.68))),
    inertial=I(
        17.789,
        (0.000489, 0.002797, 0.20484),
        (0.487315, 0.409628, 0.127837),
        (0.999989, -0.00130808, -0.00282289, -0.00349105),
    ),
)

LEFT_SITES = (
    Site("left_foot", "left_ankle_link", (0.05, 0.0, -0.07)),  # sole centre
    Site("left_hand", "left_elbow_link", (0.28, 0.0, -0.015)),
)
SITES = (
    *LEFT_SITES,
    *mirror_sites(LEFT_SITES),
    Site("imu", "pelvis", (0.0, 0.0, 0.0)),
    Site("imu_torso", "torso_link", (-0.04452, -0.01891, 0.27756)),  # the hardware IMU (Menagerie "imu")
    Site("head", "torso_link", (0.045, 0.0, 0.68)),
)

LINKS = (PELVIS, *LEFT_LEG, *mirror(LEFT_LEG), TORSO, *LEFT_ARM, *mirror(LEFT_ARM))
_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow")
DRIVER_ORDER = (
    "right_hip_roll_joint",
    "right_hip_pitch_joint",
    "right_knee_joint",
    "left_hip_roll_joint",
    "left_hip_pitch_joint",
    "left_knee_joint",
    "torso_joint",
    "left_hip_yaw_joint",
    "right_hip_yaw_joint",
    "left_ankle_joint",
    "right_ankle_joint",
    *(f"right_{j}_joint" for j in _ARM),
    *(f"left_{j}_joint" for j in _ARM),
)
H1 = Robot("h1", LINKS, DRIVER_ORDER, floating=True, sites=SITES, feet=("left_foot", "right_foot"), imu_site="imu")

_LEG_PARTS = ("hip", "knee", "ankle")
VARIANTS: dict[str, tuple[str, ...]] = {
    "19dof": (),
    # legs only: torso and arms held where the spec's ``held`` targets put them (unitree_rl_gym's
    # H1 trains on h1.urdf with them fixed at 0; its deploy holds them there, motors 6 and 12-19)
    "10dof": tuple(j for j in DRIVER_ORDER if not any(p in j for p in _LEG_PARTS)),
}


def build_spec(
    spec: RobotSpec,
    variant: str = "19dof",
    fixed_base: bool = False,
    self_collision: bool = False,
    floor_contact: str = "all",
    hold: str = "weld",
) -> mujoco.MjSpec:
    """The H1's MjSpec with gains, limits and pose from ``spec``.

    Args:
      spec: an H1 robot spec (``h1`` or ``h1_10dof``).
      variant: ``19dof`` or ``10dof`` (the legs alone are actuated; the torso and arms are held, see ``hold``).
      fixed_base: pin the pelvis at standing height instead of a free joint.
      self_collision: let non-adjacent links collide.
      floor_contact: ``all`` or ``feet`` (only the soles touch the world: MJX's fast locomotion).
      hold: ``weld`` the joints the spec ``held`` where the driver holds them, or keep them as joints
        under the driver's ``pd`` (``simreal.sim.robots.articulated``).
    """
    if variant not in VARIANTS:
        raise ConfigError(
            "model.options.variant", f"unknown H1 variant {variant!r}; valid: {', '.join(VARIANTS)}", spec.source
        )
    return build_articulated(
        H1,
        spec,
        locked=VARIANTS[variant],
        hold=hold,
        fixed_base=fixed_base,
        self_collision=self_collision,
        floor_contact=floor_contact,
    )
