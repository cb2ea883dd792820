"""Solver and contact-labelling settings, validated like every simreal config.

Each section is a frozen dataclass built with :func:`simreal.config.build`: an unknown key,
a wrong type or an out-of-range value raises ConfigError naming the dotted key. Defaults
live here; a robot's keypoint map (``configs/retarget/<robot>.yaml``) may override them
under ``ik:``, ``interaction:`` and ``contacts:``, and the CLI takes ``key=value``
overrides (``interaction.window=6``).
"""

from __future__ import annotations

import dataclasses

from simreal.config import field

QP_SOLVERS = ("daqp", "quadprog")


@dataclasses.dataclass(frozen=True)
class ContactConfig:
    """Stance labels from the feet's contact points, the human scaled by the leg ratio (simreal/retarget/contacts.py).

    Hysteresis: a foot enters stance below ``height_m`` and ``speed_m_s`` and stays in it until
    it rises above ``release_height_m`` or moves faster than ``release_speed_m_s``.
    """

    height_m: float = field(0.02, min=0.0, doc="a contact point at most this far above the ground enters stance [m]")
    speed_m_s: float = field(0.25, min=0.0, doc="and moving slower than this [m/s]")
    release_height_m: float = field(0.04, min=0.0, doc="stance ends once every point is higher than this [m]")
    release_speed_m_s: float = field(0.5, min=0.0, doc="or faster than this [m/s]")
    smooth_s: float = field(0.02, min=0.0, doc="Gaussian smoothing of the point tracks, sigma [s]")
    min_stance_s: float = field(0.08, min=0.0, doc="shorter stance segments become swing [s]")
    min_swing_s: float = field(0.06, min=0.0, doc="shorter swing gaps inside stance are filled [s]")


@dataclasses.dataclass(frozen=True)
class IKConfig:
    """Differential IK with mink (simreal/retarget/ik.py)."""

    iterations: int = field(2, min=1, max=100, doc="IK steps per frame")
    first_frame_iterations: int = field(30, min=1, max=1000, doc="IK steps for the first frame")
    repair_iterations: int = field(10, min=0, max=100, doc="more IK steps while a frame penetrates more than 1 cm")
    solver: str = field("daqp", choices=("daqp", "quadprog", "osqp", "proxqp", "clarabel"), doc="qpsolvers backend")
    damping: float = field(1e-3, min=0.0, doc="Levenberg-Marquardt damping")
    posture_weight: float = field(0.02, min=0.0, doc="pull towards the default pose")
    position_cost: float = field(1.0, min=0.0, doc="scale of keypoint position weights")
    orientation_cost: float = field(1.0, min=0.0, doc="scale of keypoint orientation weights")
    stance_cost_gain: float = field(
        10.0,
        min=1.0,
        doc="a stance foot's position cost, as a multiple of its keypoint's: its pinned sole edge held where it landed",
    )
    collision_gain: float = field(0.85, min=0.01, max=1.0, doc="fraction of a geom pair's gap it may close per IK step")
    collision_detection_m: float = field(
        0.05, min=0.0, doc="distance [m] at which a geom pair's collision limit starts"
    )


@dataclasses.dataclass(frozen=True)
class InteractionConfig:
    """Interaction-mesh retargeting with hard constraints (simreal/retarget/interaction.py)."""

    window: int = field(3, min=1, max=32, doc="frames optimised together")
    stride: int = field(2, min=1, max=32, doc="frames committed per window (<= window)")
    iterations: int = field(2, min=1, max=50, doc="SQP iterations per window (at least)")
    max_iterations: int = field(6, min=1, max=100, doc="more while the last step was large")
    repair_iterations: int = field(
        12, min=0, max=100, doc="more while a frame to commit leaves a stance foot off its constraints"
    )
    converged_step: float = field(0.08, min=0.0, doc="largest |dq| [rad or m] that ends the iterations")
    first_frame_iterations: int = field(30, min=1, max=1000, doc="SQP iterations for the first frame")
    laplacian_weight: float = field(4.0, min=0.0, doc="interaction-mesh deformation energy")
    keypoint_weight: float = field(1.0, min=0.0, doc="scale of keypoint position weights")
    orientation_weight: float = field(1.0, min=0.0, doc="scale of keypoint orientation weights")
    smooth_weight: float = field(
        0.02, min=0.0, doc="joint acceleration penalty per frame^2 at 30 fps; x (fps/30)^3 at other rates"
    )
    posture_weight: float = field(0.005, min=0.0, doc="pull towards the default pose")
    velocity_damping: float = field(
        16.0,
        min=0.0,
        doc="joint velocity penalty, as a multiple of the critical damping of a joint "
        "held only by the posture pull (simreal/retarget/window_qp.py add_smoothness)",
    )
    damping: float = field(0.02, min=0.0, doc="step damping (trust region) per iteration")
    trust_joint_rad: float = field(0.3, min=0.0, doc="largest joint step per SQP iteration [rad]")
    trust_root_m: float = field(0.1, min=0.0, doc="largest root translation step per SQP iteration [m]")
    trust_root_rad: float = field(0.3, min=0.0, doc="largest root rotation step per SQP iteration [rad]")
    collision_margin_m: float = field(0.06, min=0.0, doc="pairs closer than this enter the QP [m]")
    min_distance_m: float = field(0.0, doc="required clearance between colliding geoms [m]")
    penetration_weight: float = field(100.0, min=0.0, doc="cost pushing already-penetrating pairs apart")
    landing_s: float = field(0.1, min=0.0, doc="a swing foot is levelled over this long before it lands [s]")
    landing_weight: float = field(20.0, min=0.0, doc="weight of that levelling at the landing (growing to it)")
    ground_points: int = field(4, min=0, max=64, doc="ground sample points around each foot")
    slack_weight: float = field(1e4, min=0.0, doc="penalty on constraint slack of infeasible frames")
    qp_solver: str = field("daqp", choices=QP_SOLVERS, doc="dense QP backend")
