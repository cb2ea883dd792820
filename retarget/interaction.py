"""``--method interaction``: interaction-preserving retargeting with hard physical constraints.

In the spirit of OmniRetarget (Yang et al., 2025): the robot's keypoints and samples of the
ground (and scene) form an interaction mesh whose Laplacian deformation from the scaled
human's mesh is minimised, while hard constraints keep the result physical. Unlike a
frame-by-frame solve, a short window of frames is optimised together, sequential-QP style:

    variables   dq_t in R^nv for each frame t of the window (tangent-space step from the current iterate)
    minimise    sum_t  w_lap |L_k (P_t + J_t dq_t - P*_t)|^2          interaction mesh (interaction_mesh.py)
                     + sum_k w_k |p_tk + J_tk dq_t - p*_tk|^2           keypoints
                     + sum_k w_k |log(R_tk R*_tk^T) + Jr_tk dq_t|^2      orientations
                     + w_acc |a_t + dq_{t+1} - 2 dq_t + dq_{t-1}|^2      joint acceleration (smoothness)
                     + w_post |q_t + dq_t - q_home|^2 + w_damp |dq_t|^2
    subject to  q_lo <= q_t + dq_t <= q_hi                               joint position limits
                |(q_t + dq_t) - (q_{t-1} + dq_{t-1})| <= v_max dt         joint velocity limits
                d_c + n_c^T (J_2 - J_1) dq_t >= d_min                     no ground / scene / self penetration
                stance foot: z = terrain + sole height, sole axis vertical (flat), xy = its
                touchdown position (no slide)

all linearised at the current iterate (MuJoCo kinematics, ``mj_jacSite``, ``mj_collision`` with a
margin and ``mj_jac`` at the witness points, see collisions.py) and solved as one dense QP
(qp.py). A window of ``window`` frames is iterated ``iterations`` times, its first ``stride``
frames are committed, and the next window starts warm from the uncommitted frames; the first
frame alone gets ``first_frame_iterations``. Position and velocity limits are never relaxed
(they are always jointly feasible); when contact or stance rows conflict, the QP is solved
again with slack on them and the frame is reported as infeasible, never crashing the clip.

Written by hand because no library solves this windowed, collision-constrained mesh QP; the
parts that exist are used: MuJoCo for kinematics, Jacobians and collision, scipy's Qhull for
the mesh, quadprog / daqp for the QP.
"""

from __future__ import annotations

import copy
import time

import mujoco
import numpy as np

from simreal.retarget import collisions
from simreal.retarget.interaction_mesh import ground_samples, laplacian_metric
from simreal.retarget.qp import INF, solve_qp
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.rotations import log_so3
from simreal.retarget.settings import InteractionConfig
from simreal.retarget.targets import Targets

SLACK_REPORT_TOL = 1e-4  # slack [m or rad] above which a frame counts as infeasible


def _skew(u: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])


class _Linearisation:
    """Kinematics of one configuration: keypoint sites, their Jacobians, and contacts."""

    __slots__ = ("pos", "rot", "jp", "jr", "contacts")

    def __init__(self, solver: "InteractionSolver", q: np.ndarray):
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


class InteractionSolver:
    """Windowed SQP retargeting of one clip; see the module docstring. Use :func:`solve_interaction`."""

    def __init__(self, robot: RetargetRobot, targets: Targets, cfg: InteractionConfig):
        self.robot, self.targets, self.cfg = robot, targets, cfg
        self.model = copy.deepcopy(robot.model)
        collisions.set_margin(self.model, cfg.collision_margin_m)
        self.data = mujoco.MjData(self.model)
        self.nv, self.nq = self.model.nv, self.model.nq
        self.dt = 1.0 / targets.fps
        self.feet_k = np.array([robot.keypoint_index("left_foot"), robot.keypoint_index("right_foot")])
        self.need_rot = robot.rot_weights > 0
        self.need_rot[self.feet_k] = True  # flatness rows
        m = self.model
        self.foot_geoms = []
        for s in robot.foot_sites:
            body = int(m.site_bodyid[s])
            self.foot_geoms.append({int(g) for g in robot.robot_geoms
                                    if _in_subtree(m, int(m.geom_bodyid[g]), body)})
        self.foot_geoms_arr = [np.array(sorted(g), dtype=int) for g in self.foot_geoms]
        self.vstep = robot.v_max * self.dt  # [rad] per frame
        # Trust region per SQP iteration: the linearisation only holds for small steps.
        self.trust = np.full(self.nv, np.inf)
        self.trust[:3], self.trust[3:6] = cfg.trust_root_m, cfg.trust_root_rad
        self.trust[robot.dof_adr] = cfg.trust_joint_rad
        self.Q_kp = cfg.keypoint_weight * np.diag(robot.pos_weights)
        T = targets.num_frames
        self.q = np.zeros((T, self.nq))
        self.anchor = np.full((T, 2, 2), np.nan)  # stance anchor xy per committed frame and foot
        self.infeasible: dict[int, float] = {}
        self.iterations = 0
        self.relaxed_qps = 0

    # -- warm start and commit -------------------------------------------------
    def initial_guess(self, t: int) -> np.ndarray:
        pel = self.robot.keypoint_index("pelvis")
        if t == 0:
            q = self.robot.q_home.copy()
            q[:2] = self.targets.positions[0, pel, :2]
            return q
        q = self.q[t - 1].copy()
        q[:3] += self.targets.positions[t, pel] - self.targets.positions[t - 1, pel]
        return q

    def commit(self, t: int) -> None:
        r, m, d = self.robot, self.model, self.data
        d.qpos[:] = self.q[t]
        mujoco.mj_kinematics(m, d)
        for f in range(2):
            if not self.targets.contacts[t, f]:
                continue
            if t > 0 and self.targets.contacts[t - 1, f]:
                self.anchor[t, f] = self.anchor[t - 1, f]
            else:
                self.anchor[t, f] = d.site_xpos[r.foot_sites[f], :2]

    # -- one window ------------------------------------------------------------
    def solve_window(self, t0: int, t1: int, iterations: int, max_iterations: int) -> None:
        tg, cfg, r = self.targets, self.cfg, self.robot
        mid = (t0 + t1 - 1) // 2
        soles = tg.positions[mid, self.feet_k]
        env = ground_samples(soles, r.scene.height(soles[:, :2]), cfg.ground_points)
        if r.scene.boxes:
            pts = r.scene.surface_points()
            near = np.min(np.linalg.norm(pts[:, None] - tg.positions[mid][None], axis=-1), axis=1) < 0.5
            env = np.concatenate([env, pts[near]])
        Q = cfg.laplacian_weight * laplacian_metric(tg.positions[mid], env) + self.Q_kp
        for it in range(max(iterations, max_iterations)):
            lins = [_Linearisation(self, self.q[t]) for t in range(t0, t1)]
            x, slack_by_frame = self._qp(t0, t1, lins, Q)
            for w, t in enumerate(range(t0, t1)):
                mujoco.mj_integratePos(self.model, self.q[t], x[w * self.nv:(w + 1) * self.nv], 1.0)
                self.q[t, r.qpos_adr] = np.clip(self.q[t, r.qpos_adr], r.q_lower, r.q_upper)
            self.iterations += 1
            # Linearisation error grows with the step squared: stop once steps are small.
            if it + 1 >= iterations and np.max(np.abs(x)) < cfg.converged_step:
                break
        for t, s in slack_by_frame.items():
            if s > SLACK_REPORT_TOL:
                self.infeasible[t] = max(self.infeasible.get(t, 0.0), s)
            else:
                self.infeasible.pop(t, None)

    def _qp(self, t0: int, t1: int, lins: list[_Linearisation], Q: np.ndarray):
        r, tg, cfg = self.robot, self.targets, self.cfg
        nv, W = self.nv, t1 - t0
        n = W * nv
        H = np.zeros((n, n))
        f = np.zeros(n)
        lb, ub = np.full(n, -INF), np.full(n, INF)
        blocks: list[tuple] = []  # ([(window frame, (m, nv) block)], lo (m,), hi (m,), soft, frame)
        jd, ja = r.dof_adr, r.qpos_adr
        fin = np.isfinite(self.vstep)
        P = np.zeros((int(fin.sum()), nv))
        P[np.arange(len(P)), jd[fin]] = 1.0
        dq_prev = np.empty(nv)
        oriented = np.flatnonzero(r.rot_weights > 0)

        for w, t in enumerate(range(t0, t1)):
            L = lins[w]
            sl = slice(w * nv, (w + 1) * nv)
            Hw, fw = H[sl, sl], f[sl]  # views
            q = self.q[t]
            # Keypoints + interaction mesh: (e + J dq)^T (Q kron I3) (e + J dq).
            e = L.pos - tg.positions[t]
            QJ = np.einsum("kl,lan->kan", Q, L.jp)
            Hw += np.einsum("kan,kam->nm", L.jp, QJ)
            fw += np.einsum("kan,ka->n", QJ, e)
            # Orientations (stance feet are also held flat by constraints; their yaw stays a cost).
            for k in oriented:
                w_rot = cfg.orientation_weight * r.rot_weights[k]
                er = log_so3(L.rot[k] @ tg.rotations[t, k].T)
                Hw += w_rot * L.jr[k].T @ L.jr[k]
                fw += w_rot * L.jr[k].T @ er
            # Posture and damping.
            Hw[jd, jd] += cfg.posture_weight
            fw[jd] += cfg.posture_weight * (q[ja] - r.q_home[ja])
            Hw[np.arange(nv), np.arange(nv)] += cfg.damping
            # Joint position limits (bounds) and velocity limits.
            blo, bhi = r.q_lower - q[ja], r.q_upper - q[ja]
            if t > 0:
                mujoco.mj_differentiatePos(self.model, dq_prev, 1.0, self.q[t - 1], q)
                delta = dq_prev[jd]
                vlo, vhi = -self.vstep - delta, self.vstep - delta
                if w == 0:  # previous frame committed: a bound on this frame alone
                    blo, bhi = np.maximum(blo, vlo), np.minimum(bhi, vhi)
                    bhi = np.maximum(bhi, blo)  # empty only if q_prev broke a limit, which commits never do
                elif len(P):
                    blocks.append(([(w, P), (w - 1, -P)], vlo[fin], vhi[fin], False, t))
            lb[sl], ub[sl] = -self.trust, self.trust
            lb[w * nv + jd] = np.minimum(np.maximum(blo, -self.trust[jd]), 0.0)
            ub[w * nv + jd] = np.maximum(np.minimum(bhi, self.trust[jd]), 0.0)
            # Collisions: every pair within the margin, except stance feet on the ground (pinned below).
            cs = L.contacts
            if len(cs.dist):
                keep = np.ones(len(cs.dist), dtype=bool)
                for fo in range(2):
                    if tg.contacts[t, fo]:
                        feet = self.foot_geoms_arr[fo]
                        on_foot = np.isin(cs.geom[:, 0], feet) | np.isin(cs.geom[:, 1], feet)
                        keep &= ~(on_foot & (cs.kind != collisions.SELF))
                if keep.any():
                    blocks.append(([(w, cs.jac[keep])], cfg.min_distance_m - cs.dist[keep],
                                   np.full(int(keep.sum()), INF), True, t))
            # Stance feet: on the terrain, flat, not sliding.
            for fo in range(2):
                if not tg.contacts[t, fo]:
                    continue
                k = self.feet_k[fo]
                p, jp = L.pos[k], L.jp[k]
                up = L.rot[k] @ r.foot_up_local[fo]
                flat = -_skew(up) @ L.jr[k]
                blocks.append(([(w, flat[:2])], -up[:2], -up[:2], True, t))
                xy = None
                if t > 0 and tg.contacts[t - 1, fo]:
                    if w == 0:
                        xy = self.anchor[t - 1, fo]
                        blocks.append(([(w, jp[:2])], xy - p[:2], xy - p[:2], True, t))
                    else:
                        pp, jpp = lins[w - 1].pos[k], lins[w - 1].jp[k]
                        blocks.append(([(w, jp[:2]), (w - 1, -jpp[:2])], pp[:2] - p[:2], pp[:2] - p[:2], True, t))
                z = float(r.scene.height((xy if xy is not None else p[:2])[None])[0]) + r.sole_height[fo]
                blocks.append(([(w, jp[2:3])], np.array([z - p[2]]), np.array([z - p[2]]), True, t))
        self._smoothness(t0, t1, H, f)

        m = sum(len(b[1]) for b in blocks)
        A = np.zeros((m, n))
        lo, hi = np.empty(m), np.empty(m)
        soft = np.zeros(m, dtype=bool)
        row_frame = np.empty(m, dtype=int)
        r0 = 0
        for coefs, low, high, is_soft, t in blocks:
            k = len(low)
            for w, B in coefs:
                A[r0:r0 + k, w * nv:(w + 1) * nv] += B
            lo[r0:r0 + k], hi[r0:r0 + k], soft[r0:r0 + k], row_frame[r0:r0 + k] = low, high, is_soft, t
            r0 += k
        res = solve_qp(H, f, lb, ub, A, lo, hi, soft, cfg.slack_weight, cfg.qp_solver)
        if res.status != "optimal":
            self.relaxed_qps += 1
        slack_by_frame: dict[int, float] = {t: 0.0 for t in range(t0, t1)}
        for t in range(t0, t1):
            s_t = res.slack[row_frame == t]
            slack_by_frame[t] = float(s_t.max()) if s_t.size else 0.0
        if res.status == "failed":
            slack_by_frame = {t: np.inf for t in range(t0, t1)}
        return res.x, slack_by_frame

    def _smoothness(self, t0: int, t1: int, H: np.ndarray, f: np.ndarray) -> None:
        """Joint acceleration penalty over every frame triple touching the window."""
        w_acc, nv = self.cfg.smooth_weight, self.nv
        if w_acc == 0:
            return
        v = np.empty(nv)
        vel = {}
        for t in range(max(t0 - 1, 1), t1):
            mujoco.mj_differentiatePos(self.model, v, 1.0, self.q[t - 1], self.q[t])
            vel[t] = v.copy()
        for c in range(max(t0 - 1, 1), t1 - 1):
            a = vel[c + 1] - vel[c]
            terms = [(fr - t0, coef) for fr, coef in ((c - 1, 1.0), (c, -2.0), (c + 1, 1.0)) if fr >= t0]
            for wi, ci in terms:
                si = slice(wi * nv, (wi + 1) * nv)
                f[si] += w_acc * ci * a
                for wj, cj in terms:
                    H[si, wj * nv:(wj + 1) * nv] += w_acc * ci * cj * np.eye(nv)

    # -- the clip ---------------------------------------------------------------
    def run(self) -> np.ndarray:
        T, cfg = self.targets.num_frames, self.cfg
        self.q[0] = self.initial_guess(0)
        self.solve_window(0, 1, cfg.first_frame_iterations, cfg.first_frame_iterations)
        self.commit(0)
        filled, t0 = 1, 1
        while t0 < T:
            t1 = min(t0 + cfg.window, T)
            for t in range(filled, t1):
                self.q[t] = self.initial_guess(t)
            filled = t1
            self.solve_window(t0, t1, cfg.iterations, cfg.max_iterations)
            n_commit = t1 - t0 if t1 == T else min(cfg.stride, t1 - t0)
            for t in range(t0, t0 + n_commit):
                self.commit(t)
            t0 += n_commit
        return self.q


def _in_subtree(m: mujoco.MjModel, body: int, root: int) -> bool:
    while body > 0:
        if body == root:
            return True
        body = int(m.body_parentid[body])
    return body == root


def solve_interaction(robot: RetargetRobot, targets: Targets,
                      cfg: InteractionConfig | None = None) -> tuple[np.ndarray, dict]:
    """Retarget ``targets`` with the interaction-mesh solver.

    Returns:
      qpos: (T, nq) trajectory.
      stats: solve time, frames/s, QP iterations, relaxed QPs, and the infeasible frames
        (solved with slack) with their largest slack [m or rad].
    """
    cfg = cfg or robot.kmap.interaction
    solver = InteractionSolver(robot, targets, cfg)
    t0 = time.perf_counter()
    qpos = solver.run()
    elapsed = time.perf_counter() - t0
    T = targets.num_frames
    return qpos, {"solve_time_s": elapsed, "frames_per_s": T / elapsed, "sqp_iterations": solver.iterations,
                  "relaxed_qps": solver.relaxed_qps, "infeasible_frames": sorted(solver.infeasible),
                  "infeasible_max_slack": max(solver.infeasible.values(), default=0.0)}
