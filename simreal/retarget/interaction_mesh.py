"""The interaction mesh: a Delaunay tetrahedralisation over body keypoints and environment points,
and the Laplacian deformation energy between the human's mesh and the robot's.

Ho, Komura and Tai (SIGGRAPH 2010) and OmniRetarget (2025) preserve spatial relations by
keeping each vertex's Laplacian coordinate, its offset from the mean of its mesh neighbours,

    delta_i(P) = p_i - (1 / |N(i)|) sum_{j in N(i)} p_j          (uniform weights),

close between the source and the retargeted pose. With vertex positions stacked as rows,
``delta = L P`` for the (N, N) matrix ``L = I - D^-1 A``. Environment points (ground samples,
scene surfaces) are the same in both meshes, so their columns cancel and the energy
depends only on the keypoint errors E = P_robot - P_human (K, 3):

    E_lap = sum_i ||(L_k E)_i||^2 = sum_{a in xyz} E[:, a]^T M E[:, a],   M = L_k^T L_k (K, K)

where ``L_k`` is ``L``'s keypoint columns. ``M`` is built once per solver window (the mesh is
the Delaunay of that window's middle frame) and turns the energy into a quadratic form the
QP takes directly. scipy's Qhull does the tetrahedralisation.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import Delaunay, QhullError


def delaunay_edges(points: np.ndarray) -> np.ndarray:
    """Unique undirected edges (E, 2) of the Delaunay tetrahedralisation of ``points`` (N, 3)."""
    try:
        tri = Delaunay(points, qhull_options="QJ")  # joggle: coplanar ground samples are fine
    except QhullError:
        return _knn_edges(points, 4)
    s = tri.simplices
    pairs = np.concatenate([s[:, [a, b]] for a in range(s.shape[1]) for b in range(a + 1, s.shape[1])])
    pairs.sort(axis=1)
    return np.unique(pairs, axis=0)


def _knn_edges(points: np.ndarray, k: int) -> np.ndarray:
    """Fallback for degenerate point sets (all coplanar): k-nearest-neighbour edges."""
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    nn = np.argsort(d, axis=1)[:, :k]
    pairs = np.stack([np.repeat(np.arange(len(points)), nn.shape[1]), nn.ravel()], 1)
    pairs.sort(axis=1)
    return np.unique(pairs, axis=0)


def laplacian(n: int, edges: np.ndarray) -> np.ndarray:
    """Uniform graph Laplacian (n, n): ``L = I - D^-1 A``; isolated vertices get a zero row."""
    A = np.zeros((n, n))
    A[edges[:, 0], edges[:, 1]] = 1.0
    A[edges[:, 1], edges[:, 0]] = 1.0
    deg = A.sum(axis=1)
    L = np.eye(n) - A / np.maximum(deg, 1.0)[:, None]
    L[deg == 0] = 0.0
    return L


def laplacian_metric(keypoints: np.ndarray, env_points: np.ndarray) -> np.ndarray:
    """The (K, K) matrix ``M = L_k^T L_k`` of the interaction mesh over ``keypoints`` (K, 3) and
    ``env_points`` (G, 3) [m]; the energy of keypoint errors E (K, 3) is ``sum_a E[:, a]^T M E[:, a]``."""
    pts = np.concatenate([keypoints, env_points]) if len(env_points) else keypoints
    L = laplacian(len(pts), delaunay_edges(pts))
    Lk = L[:, : len(keypoints)]
    return Lk.T @ Lk


def laplacian_energy(robot_pts: np.ndarray, human_pts: np.ndarray, M: np.ndarray) -> float:
    """Deformation energy [m^2] between keypoint sets (K, 3) under metric ``M``."""
    E = robot_pts - human_pts
    return float(np.einsum("ka,kl,la->", E, M, E))


def ground_samples(soles: np.ndarray, terrain_z: np.ndarray, per_foot: int, radius_m: float = 0.15) -> np.ndarray:
    """Ground points on a ring around each sole: (F, 3) soles, (F,) terrain heights -> (F per_foot, 3).

    Not under the sole itself: a stance sole sits on the ground, and a vertex on top of
    another would make a degenerate mesh.
    """
    if per_foot == 0:
        return np.zeros((0, 3))
    ang = 2 * np.pi * (np.arange(per_foot) + 0.5) / per_foot
    ring = radius_m * np.stack([np.cos(ang), np.sin(ang), np.zeros_like(ang)], 1)
    return np.concatenate([np.array([s[0], s[1], z]) + ring for s, z in zip(soles, terrain_z)])
