"""The floor, and standing on it: a ground plane for models that lack one, and the lowest
point of a robot's collision geometry (to put a free-base robot's feet on that plane).

Lowest point of a convex shape S with pose (p, R) along world z, by its support function
h(u) = max_{x in S} x . u taken at u = R^T e_z (world up seen in the geom frame)::

    z_min = p_z - h(R^T e_z)

    sphere r            h = r
    capsule r, half l   h = r + l |u_z|
    cylinder r, half l  h = r sqrt(u_x^2 + u_y^2) + l |u_z|
    box half sizes s    h = sum_i s_i |u_i|
    ellipsoid radii s   h = sqrt(sum_i (s_i u_i)^2)
    mesh vertices v_k   h = max_k v_k . u     (compiled vertices are in the geom frame)
    other (SDF, ...)    h = c . u + sum_i a_i |u_i|   (its bounding box: centre c, half sizes a)

Written by hand because MuJoCo exposes only axis-aligned bounding boxes (``geom_aabb``),
which put a tilted foot up to its box's corner below the true sole.
"""

from __future__ import annotations

import mujoco
import numpy as np

_G = mujoco.mjtGeom
GROUNDS = (_G.mjGEOM_PLANE, _G.mjGEOM_HFIELD)


def has_floor(m: mujoco.MjModel) -> bool:
    """True if the world body holds a plane or height field (a floor the robot can stand on)."""
    return any(m.geom_bodyid[g] == 0 and int(m.geom_type[g]) in GROUNDS for g in range(m.ngeom))


def add_floor(s: mujoco.MjSpec, friction: float) -> None:
    """A plane at z = 0 in the world body, sliding ``friction`` (torsional and rolling as MuJoCo's defaults).

    ``contype = conaffinity = 1`` (MuJoCo's defaults), so it touches every geom a model file
    left at the defaults. Unnamed apart from the geom (``floor``, if that name is free), so it
    cannot clash with the file's assets.
    """
    name = "floor" if s.geom("floor") is None else ""
    s.worldbody.add_geom(
        name=name,
        type=_G.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        rgba=[0.25, 0.3, 0.35, 1.0],
        friction=[friction, 0.005, 0.0001],
        contype=1,
        conaffinity=1,
    )


def collision_geoms(m: mujoco.MjModel) -> np.ndarray:
    """Ids of the geoms of moving bodies that take part in contacts (contype or conaffinity set)."""
    g = np.arange(m.ngeom)
    return g[
        (m.geom_bodyid != 0) & ((m.geom_contype != 0) | (m.geom_conaffinity != 0)) & ~np.isin(m.geom_type, GROUNDS)
    ]


def lowest_z(m: mujoco.MjModel, d: mujoco.MjData, geoms: np.ndarray) -> float:
    """Lowest world z [m] over ``geoms`` at the pose in ``d`` (after ``mj_kinematics``)."""
    return min(geom_lowest_z(m, d, int(g)) for g in geoms)


def geom_lowest_z(m: mujoco.MjModel, d: mujoco.MjData, g: int) -> float:
    """Lowest world z [m] of geom ``g`` (any primitive or mesh) at the pose in ``d``."""
    R = d.geom_xmat[g].reshape(3, 3)
    u = R[2]  # R^T e_z: the third row of R
    s, t = m.geom_size[g], m.geom_type[g]
    if t == _G.mjGEOM_SPHERE:
        h = s[0]
    elif t == _G.mjGEOM_CAPSULE:
        h = s[0] + s[1] * abs(u[2])
    elif t == _G.mjGEOM_CYLINDER:
        h = s[0] * np.hypot(u[0], u[1]) + s[1] * abs(u[2])
    elif t == _G.mjGEOM_BOX:
        h = float(np.abs(u) @ s)
    elif t == _G.mjGEOM_ELLIPSOID:
        h = float(np.linalg.norm(s * u))
    elif t == _G.mjGEOM_MESH:
        adr, n = m.mesh_vertadr[m.geom_dataid[g]], m.mesh_vertnum[m.geom_dataid[g]]
        h = float((m.mesh_vert[adr : adr + n] @ u).max())
    else:
        c, a = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
        h = float(c @ u + np.abs(u) @ a)
    return float(d.geom_xpos[g][2] - h)
