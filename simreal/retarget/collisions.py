"""Collision queries shared by the interaction solver (linearised rows) and the metrics (depths).

MuJoCo's own collision pipeline (``mj_collision``) finds every geom pair closer than the
margin, with the robot model's filter (:mod:`robot`: self-collision on, adjacent bodies
excluded). For a contact with signed distance ``d``, normal ``n`` (from geom 1 to geom 2)
and witness points ``p1``, ``p2``, the distance changes to first order as

    d(q + dq) ~= d + n^T (J_p2 - J_p1) dq        (J_p: translational Jacobian at p, 3 x nv)

which the solver keeps >= the required clearance. Kinds: ground (the floor plane), scene
(other world geoms: boxes), self (two robot geoms).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

GROUND, SCENE, SELF = 0, 1, 2
KIND_NAMES = ("ground", "scene", "self")


@dataclasses.dataclass(frozen=True)
class ContactSet:
    """Contacts of one configuration (C contacts).

    Attributes:
      dist: (C,) signed distances [m], negative when penetrating.
      kind: (C,) GROUND, SCENE or SELF.
      geom: (C, 2) geom ids.
      jac: (C, nv) d(dist)/d(qvel), or None when not requested.
    """

    dist: np.ndarray
    kind: np.ndarray
    geom: np.ndarray
    jac: np.ndarray | None


def set_margin(model: mujoco.MjModel, margin_m: float) -> None:
    """Report pairs up to ``margin_m`` apart [m] (MuJoCo takes the larger margin of a pair)."""
    model.geom_margin[:] = margin_m


def contacts(
    model: mujoco.MjModel, data: mujoco.MjData, floor_geom: int, with_jacobian: bool, run_collision: bool = True
) -> ContactSet:
    """Contacts of the configuration in ``data`` (after ``mj_kinematics``; ``mj_comPos`` too
    when ``with_jacobian``). ``run_collision`` False reuses contacts already in ``data``."""
    if run_collision:
        mujoco.mj_collision(model, data)
    n = data.ncon
    con = data.contact
    dist = np.array(con.dist[:n], dtype=float)
    geom = np.array(con.geom[:n], dtype=int).reshape(n, 2)
    b1, b2 = model.geom_bodyid[geom[:, 0]], model.geom_bodyid[geom[:, 1]]
    kind = np.where((b1 > 0) & (b2 > 0), SELF, np.where((geom == floor_geom).any(axis=1), GROUND, SCENE))
    jac = None
    if with_jacobian:
        jac = _distance_jacobian(model, data, n, dist, b1, b2)
    return ContactSet(dist, kind.astype(int), geom, jac)


def _distance_jacobian(model, data, n, dist, b1, b2) -> np.ndarray:
    """(C, nv) rows n^T (J_p2 - J_p1), from one body Jacobian per body: the velocity of a point p
    on body b is v_b + w_b x (p - x_b), so n^T J_p = n^T Jp_b - (n x (p - x_b))^T Jr_b."""
    con = data.contact
    normals = np.array(con.frame[:n, :3], dtype=float).reshape(n, 3)
    mid = np.array(con.pos[:n], dtype=float).reshape(n, 3)
    jac = np.zeros((n, model.nv))
    bodies = np.unique(np.concatenate([b1, b2]))
    bodies = bodies[bodies > 0]
    jp = np.zeros((model.nbody, 3, model.nv))
    jr = np.zeros((model.nbody, 3, model.nv))
    for b in bodies:
        mujoco.mj_jacBody(model, data, jp[b], jr[b], int(b))
    for body, sign in ((b1, -1.0), (b2, 1.0)):
        point = mid + (sign * 0.5 * dist)[:, None] * normals
        r = point - data.xpos[body]
        jac += sign * (
            np.einsum("ca,can->cn", normals, jp[body]) - np.einsum("ca,can->cn", np.cross(normals, r), jr[body])
        )
    return jac


def deepest_by_kind(cs: ContactSet) -> np.ndarray:
    """(3,) deepest penetration [m] (>= 0) per kind: ground, scene, self."""
    out = np.zeros(3)
    for k in range(3):
        d = cs.dist[cs.kind == k]
        if d.size:
            out[k] = max(0.0, -float(d.min()))
    return out
