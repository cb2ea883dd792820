"""Observation terms shared by simulation (jax.numpy) and deployment (numpy).

A policy's observation is the concatenation of named terms, in the order the task lists
them; the bundle records that layout and the deploy runtime rebuilds the very same vector
from the robot's ROS 2 state with the very same functions, passing ``xp=numpy`` instead of
``xp=jax.numpy``. That is what keeps sim and robot in agreement.

A term reads a *robot state* mapping with these keys (whichever the robot has):

========================  =======  ===============================================
key                       shape    meaning
========================  =======  ===============================================
``pos_w``                 (3,)     base position in world [m]
``quat_wxyz``             (4,)     base orientation, world-from-body, wxyz
``lin_vel_w``             (3,)     base linear velocity in world [m/s]
``ang_vel_b``             (3,)     base angular velocity in body frame [rad/s]
``joint_pos``             (n,)     actuated joint positions, driver order [rad]
``joint_vel``             (n,)     actuated joint velocities [rad/s]
``default_joint_pos``     (n,)     the robot spec's default pose [rad]
``target_pos_w``          (3,)     task target position [m]
``object_pos_w``          (3,)     manipulated object's position in world [m]
``ee_pos_w``              (3,)     an arm's end-effector position in world [m]
``command``               (k,)     task command (e.g. vx, vy, yaw rate)
``last_action``           (m,)     the previous normalised action in [-1, 1]
``action_history``        (k, m)   the k normalised actions before ``last_action``, newest first
``gait_phase``            (2 l,)   a gait clock: (sin, cos) of each leg's phase, 2 pi t / T + offset
========================  =======  ===============================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simreal.errors import UnknownNameError
from simreal.rotations import quat_to_rotmat, rotate_inv

Array = Any
State = Mapping[str, Array]

#: The site of an arm's model that ``ee_pos_w`` is measured at (every shipped arm has one).
EE_SITE = "end_effector"


def pos_error_w(s: State, xp: Any) -> Array:
    """target_pos_w - pos_w [m], (3,)."""
    return s["target_pos_w"] - s["pos_w"]


def rot_mat_wb(s: State, xp: Any) -> Array:
    """R_wb flattened row-major (9,); continuous, unlike Euler angles or a sign-ambiguous quaternion."""
    r = quat_to_rotmat(s["quat_wxyz"], xp)
    return r.reshape(r.shape[:-2] + (9,))


def target_pos_w(s: State, xp: Any) -> Array:
    """Task target position in world (for fixed-base arms: the robot base frame) [m], (3,)."""
    return s["target_pos_w"]


def object_pos_w(s: State, xp: Any) -> Array:
    """The manipulated object's position in world [m], (3,)."""
    return s["object_pos_w"]


def ee_pos_w(s: State, xp: Any) -> Array:
    """The end effector's position in world (fixed-base arms: the robot base frame) [m], (3,)."""
    return s["ee_pos_w"]


def ee_to_target_w(s: State, xp: Any) -> Array:
    """target_pos_w - ee_pos_w [m], (3,): where the goal is from the end effector."""
    return s["target_pos_w"] - s["ee_pos_w"]


def lin_vel_w(s: State, xp: Any) -> Array:
    """Base linear velocity in world [m/s], (3,)."""
    return s["lin_vel_w"]


def lin_vel_b(s: State, xp: Any) -> Array:
    """Base linear velocity in body frame [m/s], (3,)."""
    return rotate_inv(s["quat_wxyz"], s["lin_vel_w"], xp)


def ang_vel_b(s: State, xp: Any) -> Array:
    """Base angular velocity in body frame [rad/s], (3,) (what a gyro measures)."""
    return s["ang_vel_b"]


def gravity_b(s: State, xp: Any) -> Array:
    """Unit gravity direction in the body frame, R_wb^T (0, 0, -1), (3,)."""
    g = xp.zeros_like(s["lin_vel_w"]) if "lin_vel_w" in s else xp.zeros(s["quat_wxyz"].shape[:-1] + (3,))
    g = g + xp.asarray([0.0, 0.0, -1.0])
    return rotate_inv(s["quat_wxyz"], g, xp)


def joint_pos_rel(s: State, xp: Any) -> Array:
    """Joint positions relative to the default pose [rad], (n,)."""
    return s["joint_pos"] - s["default_joint_pos"]


def joint_vel(s: State, xp: Any) -> Array:
    """Joint velocities [rad/s], (n,)."""
    return s["joint_vel"]


def command(s: State, xp: Any) -> Array:
    """The task's command vector, (k,)."""
    return s["command"]


def last_action(s: State, xp: Any) -> Array:
    """The previous normalised action in [-1, 1], (m,)."""
    return s["last_action"]


def action_history(s: State, xp: Any) -> Array:
    """The k normalised actions before ``last_action``, newest first, flattened (k m,). With
    ``last_action`` they are the commands still acting on the robot: under an actuation delay of
    d control periods and a first-order motor lag of time constant tau, the thrust (or torque)
    now depends on the commands of about d + 3 tau / dt periods, which the state alone does not
    show (Eschmann et al., "Learning to Fly in Seconds", 2024, observe an action history)."""
    return s["action_history"]


def gait_phase(s: State, xp: Any) -> Array:
    """The gait clock, (sin, cos) of each leg's phase (2 l,) (unitree_rl_gym's G1 observes it): a
    task input, played back on the robot from the hand-over (:mod:`simreal.reference`)."""
    return s["gait_phase"]


TERMS: dict[str, Callable[[State, Any], Array]] = {
    f.__name__: f
    for f in (
        pos_error_w,
        target_pos_w,
        object_pos_w,
        ee_pos_w,
        ee_to_target_w,
        rot_mat_wb,
        lin_vel_w,
        lin_vel_b,
        ang_vel_b,
        gravity_b,
        joint_pos_rel,
        joint_vel,
        command,
        last_action,
        action_history,
        gait_phase,
    )
}


def term(name: str) -> Callable[[State, Any], Array]:
    """Look a term up by name; the error lists the valid names."""
    try:
        return TERMS[name]
    except KeyError:
        raise UnknownNameError("observation term", name, TERMS) from None


def build_observation(names: Sequence[str], s: State, xp: Any) -> Array:
    """Concatenate the named terms in order: the policy's observation vector."""
    return xp.concatenate([xp.asarray(term(n)(s, xp)).reshape(-1) for n in names])
