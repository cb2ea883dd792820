"""Reward terms shared by the tasks: tiny named functions of one environment's state.

Each term is unweighted and pure: jax arrays in, a score out, reducing over the last axis (so
leading batch axes, or ``jax.vmap``, give one value per env), safe under ``jax.jit``. A task
returns a ``{name: term}`` table from ``reward_terms``; its ``reward_scales`` weights the table
(a negative weight makes a penalty) and the env logs each entry as ``reward/<name>``
(``simreal/sim/env.py``). Names and formulas follow legged_gym and MuJoCo Playground
(``_src/locomotion/go1/joystick.py``: ``_reward_tracking_lin_vel``, ``_cost_action_rate``...).

Three kernels turn an error into a bounded score (``exp_kernel``, ``tanh_kernel``,
``saturating``), as does Human2Sim2Robot's object-keypoint tracking (``keypoint_tracking``); the
rest are squared magnitudes (penalties) and legged-robot terms. Kept written by hand: each is one
line of jax.numpy, and Playground keeps its own inside each env rather than in an importable
library.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array
Scalar = float | Array


# -- kernels: an error to a score in [0, 1] ------------------------------------------------------
def exp_kernel(sq_err: Array, sigma: Scalar) -> Array:
    """Exponential tracking kernel exp(-|e|^2 / sigma^2): 1 at zero error, e^-1 at |e| = sigma.

    sq_err: the squared error |e|^2 in [unit^2] (already reduced: a sum or mean of squares).
    sigma: the kernel width in [unit] (legged_gym's ``tracking_sigma`` is sigma^2: pass its root).
    """
    return jnp.exp(-sq_err / sigma**2)


def tanh_kernel(dist: Array, gain: Scalar) -> Array:
    """Reach kernel 1 - tanh(k d): 1 at d = 0, falling linearly (slope -k) near it, to 0 far off.

    dist: a distance d >= 0 in [m] (or any unit). gain: k in [1/m].
    """
    return 1.0 - jnp.tanh(gain * dist)


def saturating(x: Array, scale: Scalar) -> Array:
    """Saturating penalty 1 - exp(-x / s): about x / s near zero, bounded by 1 far off (so one
    bad step never outweighs staying alive).

    x: a non-negative cost (e.g. |v|^2 in [m^2/s^2]). scale: s, in the units of x.
    """
    return 1.0 - jnp.exp(-x / scale)


# -- object keypoints (Human2Sim2Robot) -----------------------------------------------------------
def keypoint_distance(kp: Array, kp_ref: Array) -> Array:
    """Mean keypoint distance d = mean_k |p_k - p*_k| [m], reducing the last two axes.

    kp, kp_ref: (..., K, 3) keypoint positions [m] (e.g. an object's 8 box corners and where the
    demonstration had them)."""
    return jnp.mean(jnp.linalg.norm(kp - kp_ref, axis=-1), axis=-1)


def keypoint_tracking(kp: Array, kp_ref: Array, gain: Scalar) -> Array:
    """Object-keypoint tracking exp(-k d) (Human2Sim2Robot), d = :func:`keypoint_distance`: 1 on
    the reference, e^-1 at d = 1/k. A distance, not its square: the slope -k stays steep close to
    the reference, where the object's last centimetres are earned.

    kp, kp_ref: (..., K, 3) keypoints [m]. gain: k in [1/m].
    """
    return jnp.exp(-gain * keypoint_distance(kp, kp_ref))


# -- squared magnitudes (penalties) ---------------------------------------------------------------
def sq_norm(x: Array) -> Array:
    """|x|^2 = sum_i x_i^2 over the last axis."""
    return jnp.sum(jnp.square(x), axis=-1)


def action_rate(action: Array, last_action: Array) -> Array:
    """Action rate |a_t - a_{t-1}|^2 (normalised action units^2): smooth commands."""
    return sq_norm(action - last_action)


def action_magnitude(action: Array, nominal: Scalar | Array = 0.0) -> Array:
    """Action magnitude |a - a_nom|^2 (normalised action units^2); a_nom: the action that costs
    nothing (0, or e.g. a quadrotor's hover thrust)."""
    return sq_norm(action - nominal)


def torques(tau: Array) -> Array:
    """Actuator effort |tau|^2. tau: joint torques [N m] (forces [N] on slide joints)."""
    return sq_norm(tau)


def joint_vel(qd: Array) -> Array:
    """Joint speed |qd|^2. qd: joint velocities [rad/s] (or [m/s])."""
    return sq_norm(qd)


def lin_vel_z(lin_vel_b: Array) -> Array:
    """Vertical base speed v_z^2 [m^2/s^2]. lin_vel_b: (..., 3) base velocity in the body frame [m/s]."""
    return jnp.square(lin_vel_b[..., 2])


def ang_vel_xy(ang_vel_b: Array) -> Array:
    """Roll and pitch rate w_x^2 + w_y^2 [rad^2/s^2]. ang_vel_b: (..., 3) in the body frame [rad/s]."""
    return sq_norm(ang_vel_b[..., :2])


# -- posture --------------------------------------------------------------------------------------
def orientation(gravity_b: Array) -> Array:
    """Flat orientation g_x^2 + g_y^2 = sin^2(tilt). gravity_b: (..., 3) unit gravity in the body
    frame (``simreal.observations.gravity_b``); 0 level."""
    return sq_norm(gravity_b[..., :2])


def tilt(cos_tilt: Array) -> Array:
    """Tilt 1 - cos(theta), theta the angle between body z and world z (cos_tilt = R_wb[2, 2]):
    0 level, 1 on its side, 2 inverted."""
    return 1.0 - cos_tilt


def upright(cos_tilt: Array) -> Array:
    """Uprightness (cos(theta) + 1) / 2 (dm_control's ``upright``): 1 vertical, 0 hanging down.
    cos_tilt: cos of the angle from vertical."""
    return (cos_tilt + 1) / 2


def base_height(height_m: Array, target_m: Scalar) -> Array:
    """Base height error (z - z_target)^2 [m^2]."""
    return jnp.square(height_m - target_m)


# -- gait and survival ----------------------------------------------------------------------------
def outside_range(q: Array, low: Array, high: Array) -> Array:
    """How far joints are beyond a soft range, sum_i max(0, low_i - q_i) + max(0, q_i - high_i)
    [rad] (legged_gym's ``dof_pos_limits`` with its soft limits). q, low, high: (..., n)."""
    return jnp.sum(jnp.maximum(low - q, 0.0) + jnp.maximum(q - high, 0.0), axis=-1)


def contact_slip(foot_vel: Array, contact: Array) -> Array:
    """Feet sliding while they bear weight, sum_f |v_f|^2 [contact_f] [m^2/s^2] (unitree_rl_gym's
    ``contact_no_vel``). foot_vel: (..., feet, 3) [m/s]; contact: (..., feet) bool."""
    return jnp.sum(jnp.sum(jnp.square(foot_vel), axis=-1) * contact, axis=-1)


def swing_height(sole_z: Array, contact: Array, target_m: Scalar) -> Array:
    """Swing feet off their target height, sum_f (z_f - h)^2 [not contact_f] [m^2] (unitree_rl_gym's
    ``feet_swing_height``). sole_z: (..., feet) sole heights [m]; contact: (..., feet) bool."""
    return jnp.sum(jnp.square(sole_z - target_m) * ~contact, axis=-1)


def swing_profile(leg_phase: Array, stance_fraction: Scalar, height_m: Scalar) -> Array:
    """The sole height the gait clock asks for [m]: 0 in stance (phase < p_s), then a smooth bump
    ``h (1 - cos 2 pi s) / 2`` over the swing, s = (phase - p_s) / (1 - p_s) in [0, 1) (MuJoCo
    Playground's ``feet_phase`` target, its Bezier curve as a raised cosine). leg_phase: (..., legs)
    in [0, 1)."""
    s = jnp.clip((leg_phase - stance_fraction) / (1.0 - stance_fraction), 0.0, 1.0)
    return jnp.where(leg_phase < stance_fraction, 0.0, height_m * 0.5 * (1.0 - jnp.cos(2 * jnp.pi * s)))


def contact_schedule(contact: Array, stance: Array) -> Array:
    """Feet whose contact is the gait's, sum_f [contact_f == stance_f]: 0 to the number of feet
    (unitree_rl_gym's phase ``contact`` reward). contact, stance: (..., feet) bool."""
    return jnp.sum(contact == stance, axis=-1).astype(jnp.float32)


def alive() -> Array:
    """1 for every step the episode runs: weighted positive, it makes ending early cost."""
    return jnp.ones(())
