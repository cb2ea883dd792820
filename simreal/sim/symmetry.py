"""The left-right mirror of a legged robot's observations and actions, for symmetry augmentation.

A robot symmetric about its base's xz plane has a mirrored twin of every state: what the left
leg does, the right leg does in the mirror. PPO can learn from both at the cost of one rollout
(Mittal et al., "Symmetry Considerations for Learning Task Symmetric Robot Policies", ICRA 2024;
rsl_rl's ``Symmetry`` extension appends the mirrored samples to every minibatch). The mirror
``M = diag(1, -1, 1)`` maps

- a polar vector (velocity, gravity, position) v to M v = (v_x, -v_y, v_z);
- an axial vector (angular velocity) w to -M w = (-w_x, w_y, -w_z);
- a velocity command (v_x, v_y, w_z) to (v_x, -v_y, -w_z);
- a joint ``left_*`` to its partner ``right_*`` (and back; a joint on the midline, a waist yaw,
  to itself), times a sign: +1 where the mirrored joint axis (an axial vector) is the partner's
  axis, -1 where it is its opposite. The signs are read off the model at its home pose, not
  guessed from names: Unitree's legs use the same axes on both sides, so roll and yaw flip
  and pitch does not;
- a gait clock ``(sin, cos)`` per leg to the other leg's.

Each observation term has its rule (:data:`TERM_RULES`); a term without one is refused by name.
A mirrored observation vector is ``obs[perm] * sign``: one gather, built once per layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mujoco
import numpy as np

from simreal.errors import ConfigError

SIDES = ("left_", "right_")


def joint_mirror(m: mujoco.MjModel, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(perm, sign) over actuated joints ``names`` (actuator order): the mirror of joint vector q
    is ``q[perm] * sign`` (module docstring). ConfigError naming a joint without its partner or
    whose mirrored axis is neither its partner's nor the opposite."""
    d = mujoco.MjData(m)
    key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
    if key >= 0:
        mujoco.mj_resetDataKeyframe(m, d, key)
    mujoco.mj_kinematics(m, d)
    axes = {}
    for i, name in enumerate(names):
        jid = int(m.actuator_trnid[i, 0]) if m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT else -1
        if jid < 0:
            raise ConfigError("train.symmetry", f"actuator {name} does not drive one joint; no mirror for it")
        axes[name] = d.xaxis[jid].copy()
    perm, sign = np.arange(len(names)), np.ones(len(names))
    for i, name in enumerate(names):
        partner = name
        for a, b in (SIDES, SIDES[::-1]):
            if name.startswith(a):
                partner = b + name[len(a) :]
        if partner not in axes:
            raise ConfigError("train.symmetry", f"joint {name} has no mirrored partner {partner}")
        mirrored = axes[name] * np.array([-1.0, 1.0, -1.0])  # an axial vector
        k = names.index(partner)
        if np.allclose(mirrored, axes[partner], atol=1e-3):
            s = 1.0
        elif np.allclose(mirrored, -axes[partner], atol=1e-3):
            s = -1.0
        else:
            raise ConfigError(
                "train.symmetry",
                f"joint {name}'s axis mirrored is not {partner}'s axis or its "
                f"opposite: the robot is not mirror-symmetric there",
            )
        perm[i], sign[i] = k, s
    return perm, sign


def _vector(signs: tuple[float, ...]) -> Callable[[int, tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
    def rule(size: int, joints: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if size != len(signs):
            raise ConfigError("train.symmetry", f"expected a {len(signs)}-vector, got size {size}")
        return np.arange(size), np.asarray(signs, np.float64)

    return rule


def _joints(size: int, joints: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Joint vectors, or a history of them (k whole joint vectors, newest first)."""
    perm, sign = joints
    n = len(perm)
    if size % n:
        raise ConfigError("train.symmetry", f"a joint term of size {size} is not whole joint vectors of {n}")
    k = size // n
    return (np.concatenate([perm + j * n for j in range(k)]), np.tile(sign, k))


def _legs(size: int, joints: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A clock of two legs, (sin, cos) each: the legs swapped."""
    if size != 4:
        raise ConfigError("train.symmetry", f"expected (sin, cos) of two legs, got size {size}")
    return np.array([2, 3, 0, 1]), np.ones(4)


#: Observation term -> its mirror rule, (term size, joint (perm, sign)) -> (perm, sign) within the term.
TERM_RULES: dict[str, Callable[[int, tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]] = {
    "ang_vel_b": _vector((-1.0, 1.0, -1.0)),
    "gravity_b": _vector((1.0, -1.0, 1.0)),
    "lin_vel_b": _vector((1.0, -1.0, 1.0)),
    "lin_vel_w": _vector((1.0, -1.0, 1.0)),
    "command": _vector((1.0, -1.0, -1.0)),
    "joint_pos_rel": _joints,
    "joint_vel": _joints,
    "last_action": _joints,
    "action_history": _joints,
    "gait_phase": _legs,
}


def layout_mirror(layout: Sequence[dict], joints: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(perm, sign) of a whole observation vector laid out as ``layout`` ([{name, size}], a
    bundle's and the env's ``obs_layout``): mirrored = ``obs[..., perm] * sign``."""
    perms, signs, start = [], [], 0
    for t in layout:
        if t["name"] not in TERM_RULES:
            raise ConfigError(
                "train.symmetry",
                f"no mirror for observation term '{t['name']}'; terms with one: {', '.join(TERM_RULES)}",
            )
        p, s = TERM_RULES[t["name"]](int(t["size"]), joints)
        perms.append(p + start)
        signs.append(s)
        start += int(t["size"])
    return np.concatenate(perms), np.concatenate(signs)


class Mirror:
    """The mirror of one env's policy observation, critic observation and action (actuator order)."""

    def __init__(self, env) -> None:
        joints = joint_mirror(env.mj_model, env.robot.actuator_names)
        self.action = joints
        # the policy's observation is obs_history_steps frames of obs_layout, each mirrored alike
        self.policy = layout_mirror(env.obs_layout * env.cfg.obs_history_steps, joints)
        critic_terms = getattr(env, "critic_obs_terms", None) or env.obs_terms
        self.critic = layout_mirror(env.layout_of(tuple(critic_terms)), joints)
