"""The window QP of the interaction solver: costs and linearised constraints of a few frames.

For frames ``t0 .. t1-1`` linearised at the current iterate (:class:`Linearisation`:
keypoint sites, their Jacobians, contacts), :func:`build_window_qp` stacks one tangent-space
step ``dq_t`` (nv) per frame and assembles the dense QP that interaction.py's docstring writes
out: the interaction-mesh + keypoint quadratic form, orientation and posture costs, damping,
the acceleration penalty across frames (:func:`add_smoothness`), joint position limits and the
trust region as bounds, velocity limits between frames as hard rows, and the soft rows that
may take slack when infeasible: collisions and stance feet (flat or on one edge, on the terrain,
not sliding, and turning about the ball no further than the human's foot).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from simreal.retarget import collisions
from simreal.retarget.contacts import BALL, HEEL, across_axis, heading_held, heel_turn_bounds, pinned_edge
from simreal.retarget.qp import INF
from simreal.rotations import log_so3

if TYPE_CHECKING:
    from simreal.retarget.interaction import InteractionSolver


ROW_KINDS = ("velocity", "collision", "stance_flat", "stance_slide", "stance_height")
VELOCITY, COLLISION, STANCE_FLAT, STANCE_SLIDE, STANCE_HEIGHT = range(len(ROW_KINDS))
#: ``interaction.smooth_weight`` is the acceleration penalty at this frame rate [Hz] ...
SMOOTH_REF_FPS = 30.0
#: ... and scales with the frame rate to this power (:func:`smooth_weight`).
SMOOTH_FPS_EXPONENT = 3


@dataclasses.dataclass
class WindowQP:
    """``min 1/2 x^T H x + f^T x`` s.t. ``lb <= x <= ub``, ``lo <= A x <= hi``; ``soft`` rows may
    take slack; ``row_frame`` is the frame each row belongs to, ``row_kind`` its constraint (an
    index into :data:`ROW_KINDS`)."""

    H: np.ndarray
    f: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    A: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    soft: np.ndarray
    row_frame: np.ndarray
    row_kind: np.ndarray


def smooth_weight(weight_at_ref: float, fps: float) -> float:
    """The per-frame acceleration penalty at ``fps`` for the setting ``weight_at_ref`` (given at
    :data:`SMOOTH_REF_FPS`). A second difference shrinks as fps^-2, so a fixed per-frame weight
    smoothed a 120 fps capture 16x less per unit of physical acceleration than a 30 fps one, and
    a swap of stance constraints there (a pivot changing edge, a lift-off) came out as a one-frame
    jump of 20-30 rad/s. The exact physical scaling, fps^4, rang (wrists swinging at 3x the
    human's speed) with one frame of look-ahead per window; fps^3 gave the lowest peaks on
    120 fps walks (2026-11-25)."""
    return weight_at_ref * (fps / SMOOTH_REF_FPS) ** SMOOTH_FPS_EXPONENT


def _skew(u: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])


def ball_point(L: Linearisation, k: int, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World position (3,) and translational Jacobian (3, nv) of the point ``local`` of keypoint
    site ``k``'s frame: p + R b, J_p - [R b]x J_r (the point moves with the site's twist)."""
    arm = L.rot[k] @ local
    return L.pos[k] + arm, L.jp[k] - _skew(arm) @ L.jr[k]


class Linearisation:
    """Kinematics of one configuration: keypoint sites, their Jacobians, and contacts."""

    __slots__ = ("pos", "rot", "jp", "jr", "contacts")

    def __init__(self, solver: InteractionSolver, q: np.ndarray):
        m, d, r = solver.model, solver.data, solver.robot
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        K = len(r.site_ids)
        self.pos = d.site_xpos[r.site_ids].copy()
        self.rot = d.site_xmat[r.site_ids].reshape(K, 3, 3).copy()
        self.jp = np.zeros((K, 3, m.nv))
        self.jr = np.zeros((K, 3, m.nv))
        for k, sid in enumerate(r.site_ids):
            mujoco.mj_jacSite(m, d, self.jp[k], self.jr[k] if solver.need_rot[k] else None, int(sid))
        self.contacts = collisions.contacts(m, d, r.floor_geom, with_jacobian=True)


def build_window_qp(solver: InteractionSolver, t0: int, t1: int, lins: list[Linearisation], Q: np.ndarray) -> WindowQP:
    """The QP of frames [t0, t1) linearised at ``lins`` (see interaction.py for the problem)."""
    r, tg, cfg = solver.robot, solver.targets, solver.cfg
    nv, W = solver.nv, t1 - t0
    n = W * nv
    H = np.zeros((n, n))
    f = np.zeros(n)
    lb, ub = np.full(n, -INF), np.full(n, INF)
    blocks: list[tuple] = []  # ([(window frame, (m, nv) block)], lo (m,), hi (m,), soft, frame, kind)
    jd, ja = r.dof_adr, r.qpos_adr
    fin = np.isfinite(solver.vstep)
    P = np.zeros((int(fin.sum()), nv))
    P[np.arange(len(P)), jd[fin]] = 1.0
    dq_prev = np.empty(nv)
    oriented = np.flatnonzero(r.rot_weights > 0)

    for w, t in enumerate(range(t0, t1)):
        L = lins[w]
        sl = slice(w * nv, (w + 1) * nv)
        Hw, fw = H[sl, sl], f[sl]  # views
        q = solver.q[t]
        # Keypoints + interaction mesh: (e + J dq)^T (Q kron I3) (e + J dq).
        e = L.pos - solver.pos_target[t]
        QJ = np.einsum("kl,lan->kan", Q, L.jp)
        Hw += np.einsum("kan,kam->nm", L.jp, QJ)
        fw += np.einsum("kan,ka->n", QJ, e)
        # Orientations (stance feet are also held flat by constraints; their yaw stays a cost).
        for k in oriented:
            w_rot = cfg.orientation_weight * r.rot_weights[k]
            er = log_so3(L.rot[k] @ solver.rot_target[t, k].T)
            Hw += w_rot * L.jr[k].T @ L.jr[k]
            fw += w_rot * L.jr[k].T @ er
        # A swing foot about to land is levelled as its stance will hold it (flat, or level
        # across on an edge), with a weight growing to the landing (_landing_cost).
        for fo in range(2):
            if not tg.contacts[t, fo] and solver.to_land[t, fo] <= solver.landing_frames:
                _landing_cost(solver, L, t, fo, Hw, fw)
        # Posture and damping.
        Hw[jd, jd] += cfg.posture_weight
        fw[jd] += cfg.posture_weight * (q[ja] - r.q_home[ja])
        Hw[np.arange(nv), np.arange(nv)] += cfg.damping
        # Joint position limits (bounds) and velocity limits.
        blo, bhi = r.q_lower - q[ja], r.q_upper - q[ja]
        if t > 0:
            mujoco.mj_differentiatePos(solver.model, dq_prev, 1.0, solver.q[t - 1], q)
            delta = dq_prev[jd]
            vlo, vhi = -solver.vstep - delta, solver.vstep - delta
            if w == 0:  # previous frame committed: a bound on this frame alone
                blo, bhi = np.maximum(blo, vlo), np.minimum(bhi, vhi)
                bhi = np.maximum(bhi, blo)  # empty only if q_prev broke a limit, which commits never do
            elif len(P):
                blocks.append(([(w, P), (w - 1, -P)], vlo[fin], vhi[fin], False, t, VELOCITY))
        lb[sl], ub[sl] = -solver.trust, solver.trust
        lb[w * nv + jd] = np.minimum(np.maximum(blo, -solver.trust[jd]), 0.0)
        ub[w * nv + jd] = np.maximum(np.minimum(bhi, solver.trust[jd]), 0.0)
        # Collisions: every pair within the margin, except a stance foot on the surface that
        # supports it (the floor, or the box it stands on): the stance rows below pin that.
        cs = L.contacts
        if len(cs.dist):
            keep = np.ones(len(cs.dist), dtype=bool)
            for fo in range(2):
                if tg.contacts[t, fo]:
                    p = L.pos[solver.feet_k[fo]]
                    support = float(r.scene.height(p[None, :2], p[2] - r.sole_height[fo])[0])
                    feet = r.foot_geoms[fo]
                    g0 = cs.geom[:, 0]
                    world = np.where(solver.model.geom_bodyid[g0] == 0, g0, cs.geom[:, 1])
                    world = np.where(cs.kind != collisions.SELF, world, -1)
                    on_foot = np.isin(cs.geom[:, 0], feet) | np.isin(cs.geom[:, 1], feet)
                    supporting = np.abs(solver.world_top[np.maximum(world, 0)] - support) < 0.01
                    keep &= ~(on_foot & (world >= 0) & supporting)
            if keep.any():
                # Pairs already closer than allowed (linearisation leftovers, mm) must not get
                # closer; they are pushed out by a cost rather than a row that pinned feet
                # could make infeasible.
                assert cs.jac is not None  # Linearisation asks for the Jacobian
                need = cfg.min_distance_m - cs.dist[keep]
                inside = need > 0
                if inside.any():
                    Jc = cs.jac[keep][inside]
                    Hw += cfg.penetration_weight * Jc.T @ Jc
                    fw -= cfg.penetration_weight * Jc.T @ need[inside]
                blocks.append(
                    ([(w, cs.jac[keep])], np.minimum(need, 0.0), np.full(int(keep.sum()), INF), True, t, COLLISION)
                )
        # Stance feet: the pinned edge of the sole (its front, the ball, when flat or on the ball;
        # its back, the heel, on the heel) on the terrain and not sliding; the sole flat while
        # the human stands flat; on one edge (heel-off, or toes raised at a heel strike or a
        # swivel on the heel, from half a centimetre) level across, the other edge not below the
        # terrain, pitching about the pinned one. A sole whose ball was down in the frame before
        # and is now (flat or on the ball) turns about it no further than the human's foot
        # (contacts.heading_held, _no_turn_row).
        for fo in range(2):
            if not tg.contacts[t, fo]:
                continue
            k = solver.feet_k[fo]
            piv = int(tg.pivot[t, fo])
            pin_local = r.pinned_local(piv)[fo]
            p, jp = ball_point(L, k, pin_local)
            if piv:
                side = L.rot[k] @ r.foot_left_local[fo]
                roll = -_skew(side) @ L.jr[k]
                blocks.append(([(w, roll[2:3])], -side[2:3], -side[2:3], True, t, STANCE_FLAT))
                po, jo = ball_point(L, k, r.free_local(piv)[fo])
                ground = float(r.scene.height(po[None, :2], po[2])[0])
                blocks.append(([(w, jo[2:3])], np.array([ground - po[2]]), np.array([INF]), True, t, STANCE_HEIGHT))
            else:
                up = L.rot[k] @ r.foot_up_local[fo]
                flat = -_skew(up) @ L.jr[k]
                blocks.append(([(w, flat[:2])], -up[:2], -up[:2], True, t, STANCE_FLAT))
            xy = None
            if t > 0 and tg.contacts[t - 1, fo]:
                if w == 0:
                    xy = solver.anchor[t - 1, fo, pinned_edge(piv)]
                    blocks.append(([(w, jp[:2])], xy - p[:2], xy - p[:2], True, t, STANCE_SLIDE))
                else:
                    pp, jpp = ball_point(lins[w - 1], k, pin_local)
                    blocks.append(
                        ([(w, jp[:2]), (w - 1, -jpp[:2])], pp[:2] - p[:2], pp[:2] - p[:2], True, t, STANCE_SLIDE)
                    )
            if t > 0 and tg.contacts[t - 1, fo] and heading_held(tg.pivot[t - 1, fo], piv):
                blocks.append(_no_turn_row(solver, lins, w, t, fo, k))
            z = float(r.scene.height((xy if xy is not None else p[:2])[None], p[2])[0])
            blocks.append(([(w, jp[2:3])], np.array([z - p[2]]), np.array([z - p[2]]), True, t, STANCE_HEIGHT))
    add_smoothness(solver, t0, t1, H, f)

    m = sum(len(b[1]) for b in blocks)
    A = np.zeros((m, n))
    lo, hi = np.empty(m), np.empty(m)
    soft = np.zeros(m, dtype=bool)
    row_frame = np.empty(m, dtype=int)
    row_kind = np.empty(m, dtype=int)
    r0 = 0
    for coefs, low, high, is_soft, t, kind in blocks:
        rows = len(low)
        for w, B in coefs:
            A[r0 : r0 + rows, w * nv : (w + 1) * nv] += B
        lo[r0 : r0 + rows], hi[r0 : r0 + rows], soft[r0 : r0 + rows], row_frame[r0 : r0 + rows] = low, high, is_soft, t
        row_kind[r0 : r0 + rows] = kind
        r0 += rows
    return WindowQP(H, f, lb, ub, A, lo, hi, soft, row_frame, row_kind)


def _landing_cost(solver: InteractionSolver, L: Linearisation, t: int, fo: int, Hw: np.ndarray, fw: np.ndarray) -> None:
    """Add w |c + J dq|^2 for a swing foot ``fo`` landing in n = ``solver.to_land[t, fo]`` frames:
    c the sole's tilt its stance will hold at zero (the horizontal part of its up axis when it
    lands flat, the height of its left axis when it lands on an edge), w = landing_weight
    (1 - n / (N + 1)) over the N = ``solver.landing_frames`` frames before the landing. Without
    it the stance rows levelled the foot in the landing frame: H1 (no ankle roll) swung 15-19 deg
    off level and its foot snapped 10-12 deg in one frame at 120 fps (hip roll at 19 rad/s)."""
    r, k = solver.robot, solver.feet_k[fo]
    n = int(solver.to_land[t, fo])
    w = solver.cfg.landing_weight * (1.0 - n / (solver.landing_frames + 1))
    if solver.targets.pivot[t + n, fo]:
        axis = L.rot[k] @ r.foot_left_local[fo]
        c, J = axis[2:3], (-_skew(axis) @ L.jr[k])[2:3]
    else:
        axis = L.rot[k] @ r.foot_up_local[fo]
        c, J = axis[:2], (-_skew(axis) @ L.jr[k])[:2]
    Hw += w * J.T @ J
    fw += w * J.T @ c


def _no_turn_row(solver: InteractionSolver, lins: list[Linearisation], w: int, t: int, fo: int, k: int) -> tuple:
    """The row bounding a stance sole's turn about its ball (flat, or on the ball; see
    :func:`~simreal.retarget.contacts.heading_held`): its heel's move across the foot (along the
    sole's horizontal left axis n) from the frame before, d = n^T (p_h + J_h dq_w - p'_h), lies
    between 0 and g, the move the human's foot turn about the ball gives it (``solver.foot_turn``,
    :func:`~simreal.retarget.contacts.swivel_excess`), with p'_h, the ball and g from the
    committed anchors (the window's first frame) or the previous frame's linearisation. One row,
    not the heel's xy: with the ball pinned and the sole flat, that would repeat the sole's
    length (a degenerate QP). With the heading only a cost, H1's foot (hip yaw its only yaw
    joint) swivelled about its pinned ball at 1-3 rad/s where the human's turned at 0.1-0.3,
    and on its ball spun 50 deg in 6 frames (see ``heading_held``); held still, it lagged a
    human shuffling a flat foot round (G1's hip yaw past 1 rad)."""
    r, L = solver.robot, lins[w]
    n = across_axis(L.rot[k] @ r.foot_left_local[fo])
    ph, jh = ball_point(L, k, r.heel_local[fo])
    if w == 0:
        pb, pp = solver.anchor[t - 1, fo, BALL], solver.anchor[t - 1, fo, HEEL]
        coefs = [(w, (n @ jh[:2])[None])]
    else:
        heel_before, jpp = ball_point(lins[w - 1], k, r.heel_local[fo])
        pb, pp = ball_point(lins[w - 1], k, r.ball_local[fo])[0][:2], heel_before[:2]
        coefs = [(w, (n @ jh[:2])[None]), (w - 1, -(n @ jpp[:2])[None])]
    d0 = float(n @ (ph[:2] - pp))  # the move so far, at the linearisation point
    lo, hi = heel_turn_bounds(pb, pp, n, solver.foot_turn[t, fo])
    return coefs, np.array([lo - d0]), np.array([hi - d0]), True, t, STANCE_SLIDE


def add_smoothness(solver: InteractionSolver, t0: int, t1: int, H: np.ndarray, f: np.ndarray) -> None:
    """Joint acceleration penalty over every frame triple touching the window,
    ``w (q_{t+1} - 2 q_t + q_{t-1})^2`` per frame with ``w = smooth_weight (fps / 30)^3``
    (:data:`SMOOTH_REF_FPS`, :data:`SMOOTH_FPS_EXPONENT`), and a joint velocity penalty over every
    frame pair, ``zeta 2 sqrt(w posture_weight) (q_t - q_{t-1})^2`` (root excluded), ``zeta =
    velocity_damping``: at ``zeta = 1`` the critical damping of a joint held by nothing but the
    posture pull. Without it such a joint (a wrist) coasted under the acceleration penalty alone,
    ringing with a 0.8 s period at 120 fps (6 rad/s against the human's 2). Critical was still too
    little where the keypoints hold a joint only weakly: an arm whose targets are out of its reach
    or near a singular pose (a 4-joint arm raised past horizontal, where shoulder pitch and yaw
    turn the upper arm about one axis) drifted along the directions the targets do not fix at the
    joints' velocity limits, 3-4x the human's speed; the acceleration penalty keeps such a drift
    going once it has started. At ``zeta = 16`` (the default) the mean keypoint error on 14 real
    captures grew by 2.4 mm (0-10 mm per clip and robot; docs/benchmarks-log.md)."""
    w_acc, nv = smooth_weight(solver.cfg.smooth_weight, solver.targets.fps), solver.nv
    if w_acc == 0:
        return
    w_vel = solver.cfg.velocity_damping * 2.0 * np.sqrt(w_acc * solver.cfg.posture_weight)
    joints = solver.robot.dof_adr
    v = np.empty(nv)
    vel = {}
    for t in range(max(t0 - 1, 1), t1):
        mujoco.mj_differentiatePos(solver.model, v, 1.0, solver.q[t - 1], solver.q[t])
        vel[t] = v.copy()
    for c in range(max(t0 - 1, 1), t1 - 1):
        a = vel[c + 1] - vel[c]
        terms = [(fr - t0, coef) for fr, coef in ((c - 1, 1.0), (c, -2.0), (c + 1, 1.0)) if fr >= t0]
        for wi, ci in terms:
            si = slice(wi * nv, (wi + 1) * nv)
            f[si] += w_acc * ci * a
            for wj, cj in terms:
                H[si, wj * nv : (wj + 1) * nv] += w_acc * ci * cj * np.eye(nv)
    for c in range(max(t0, 1), t1):
        terms = [(fr - t0, coef) for fr, coef in ((c - 1, -1.0), (c, 1.0)) if fr >= t0]
        for wi, ci in terms:
            f[wi * nv + joints] += w_vel * ci * vel[c][joints]
            for wj, cj in terms:
                H[wi * nv + joints, wj * nv + joints] += w_vel * ci * cj
