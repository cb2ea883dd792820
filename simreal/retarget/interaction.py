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
                     + w_vel |v_t + dq_t - dq_{t-1}|^2                   joint velocity (damping)
                     + w_post |q_t + dq_t - q_home|^2 + w_damp |dq_t|^2
                     + w_land(n) |tilt_f + Jt_f dq_t|^2                  a swing foot landing in n frames levelled
    subject to  q_lo <= q_t + dq_t <= q_hi                               joint position limits
                |(q_t + dq_t) - (q_{t-1} + dq_{t-1})| <= v_max dt         joint velocity limits
                d_c + n_c^T (J_2 - J_1) dq_t >= d_min                     no ground / scene / self penetration
                stance foot: its ball point (the sole's front edge) at z = terrain and xy = its
                touchdown position (no slide); the sole flat, or, while the human's heel is
                raised (heel-off), level across with its heel point (back edge) at or above the
                terrain: the foot pitches about its front edge, following its pitch target; in
                both, turning about the ball no further than the human's foot (its heel's move
                across the foot bounded)

all linearised at the current iterate (MuJoCo kinematics, ``mj_jacSite``, ``mj_collision`` with a
margin and body Jacobians at the witness points, see collisions.py), assembled by window_qp.py
and solved as one dense QP (qp.py), with a trust region on each step. A window of ``window``
frames is iterated at least ``iterations`` and at most ``max_iterations`` times (until the step
is below ``converged_step``: linearisation errors shrink with the step squared), its first
``stride`` frames are committed, and the next window starts warm from the uncommitted ones; the
first frame alone gets ``first_frame_iterations``. Pairs already penetrating by a linearisation
leftover (mm) may not get deeper and are pushed out by a cost. Position and velocity limits are
never relaxed (they are always jointly feasible); when contact or stance rows conflict, the QP
is solved again with slack on them and the frame is reported as infeasible, never crashing the
clip. A window whose frames to commit leave a stance foot more than 5 mm / 5 mrad off gets up
to ``repair_iterations`` more iterations with a halving trust region (a step overshooting over
a straight knee otherwise cycles at full size); a foot still off is reported the same way.

Written by hand because no library solves this windowed, collision-constrained mesh QP; the
parts that exist are used: MuJoCo for kinematics, Jacobians and collision, scipy's Qhull for
the mesh, daqp / quadprog for the QP.

Targets are released gradually where a foot is freed: at a lift-off, and where a foot whose turn
was bounded rises onto its heel. A stance foot is held by its constraints and
the robot's leg (H1's ankle has no roll, its hip yaw reaches +-0.43 rad), so the foot and the
pelvis over it may lag the human's (a heel swivel of 60-75 degrees in double support), and
once the foot was free they caught up in one frame at the joints' velocity limit (H1's hip
yaw, 23 rad/s). Where the committed frame before a foot is freed lags its targets (an orientation
more than :data:`RELEASE_LAG_RAD` off, or the pelvis more than :data:`RELEASE_LAG_M`; a foot in
step needs none), the position and
orientation targets of every keypoint carry that lag (an offset, and a rotation in the
target's frame) into the frames after it, shrinking linearly to none over :data:`RELEASE_S`:
the motion goes on as the human's, the catch-up takes 0.2 s instead of a frame. A window that
would commit the frame a foot is freed at with the frame before it commits up to that frame
only, so the next window solves the freed foot from the released targets.
"""

from __future__ import annotations

import copy
import time

import mujoco
import numpy as np

from simreal.retarget import collisions
from simreal.retarget.contacts import BALL, HEEL, ON_HEEL, heading_held, pinned_edge, swivel_excess
from simreal.retarget.interaction_mesh import ground_samples, laplacian_metric
from simreal.retarget.metrics import PENETRATION_TOL_M
from simreal.retarget.qp import solve_qp
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.settings import InteractionConfig
from simreal.retarget.targets import Targets, foot_turn, start_pose
from simreal.retarget.window_qp import Linearisation, build_window_qp
from simreal.rotations import log_so3, rotvec_to_matrix

SLACK_REPORT_TOL = 1e-4  # slack [m or rad] above which a frame counts as infeasible
RESIDUAL_TOL = 0.005  # a committed stance foot this far off [m or rad] counts as infeasible too
#: A freed foot's orientation target returns from where the foot was to the human's over this long [s].
RELEASE_S = 0.2
#: ... where the committed frame before a foot is freed has an orientation this far off its target [rad],
RELEASE_LAG_RAD = 0.2
#: ... or its pelvis this far from its target [m].
RELEASE_LAG_M = 0.05


class InteractionSolver:
    """Windowed SQP retargeting of one clip; see the module docstring. Use :func:`solve_interaction`."""

    def __init__(self, robot: RetargetRobot, targets: Targets, cfg: InteractionConfig):
        self.robot, self.targets, self.cfg = robot, targets, cfg
        self.model = copy.deepcopy(robot.model)
        collisions.set_margin(self.model, cfg.collision_margin_m)
        self.data = mujoco.MjData(self.model)
        self.nv, self.nq = self.model.nv, self.model.nq
        self.dt = 1.0 / targets.fps
        self.feet_k = np.array(robot.foot_keypoints)
        self.need_rot = robot.rot_weights > 0
        self.need_rot[self.feet_k] = True  # flatness rows
        m = self.model
        # Top surface height of each world geom [m] (the floor 0, scene boxes their top), inf otherwise.
        self.world_top = np.full(m.ngeom, np.inf)
        self.world_top[robot.floor_geom] = 0.0
        for b in robot.scene.boxes:
            g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"scene_{b.name}")
            if g >= 0:
                self.world_top[g] = b.pos[2] + b.size[2]
        self.vstep = robot.v_max * self.dt  # [rad] per frame
        # Trust region per SQP iteration: the linearisation only holds for small steps.
        self.trust = np.full(self.nv, np.inf)
        self.trust[:3], self.trust[3:6] = cfg.trust_root_m, cfg.trust_root_rad
        self.trust[robot.dof_adr] = cfg.trust_joint_rad
        self.Q_kp = cfg.keypoint_weight * np.diag(robot.pos_weights)
        T = targets.num_frames
        self.q = np.zeros((T, self.nq))
        # stance anchor xy per committed frame, foot and sole edge (ball, heel; robot.pinned_local)
        self.anchor = np.full((T, 2, 2, 2), np.nan)
        # the orientation targets the QP tracks: the targets', released where a foot is freed (:meth:`commit`)
        self.rot_target = targets.rotations.copy()
        self.pos_target = targets.positions.copy()
        self.release = max(1, round(RELEASE_S * targets.fps))
        # the human's foot heading change into each frame [rad]: a held sole turns no further
        self.foot_turn = foot_turn(robot, targets)
        # frames until each foot's next touchdown (0 in stance; T or more with none ahead)
        self.landing_frames = int(round(cfg.landing_s * targets.fps))
        self.to_land = np.full((T, 2), 2 * T, dtype=np.int64)
        for t in range(T - 1, -1, -1):
            ahead = self.to_land[t + 1] + 1 if t + 1 < T else self.to_land[t]
            self.to_land[t] = np.where(targets.contacts[t], 0, ahead)
        self.infeasible: dict[int, float] = {}
        self.iterations = 0
        self.relaxed_qps = 0

    # -- warm start and commit -------------------------------------------------
    def initial_guess(self, t: int) -> np.ndarray:
        pel = self.robot.keypoint_index("pelvis")
        if t == 0:
            return start_pose(self.robot, self.targets)
        q = self.q[t - 1].copy()
        q[:3] += self.targets.positions[t, pel] - self.targets.positions[t - 1, pel]
        return q

    def _stance_state(self, t0: int, t1: int) -> list[tuple[float, np.ndarray, float]]:
        """Per frame of [t0, t1): (largest stance residual, stance anchors xy per foot and sole edge
        (2, 2, 2), nan in swing, deepest penetration [m]). A stance foot's anchor for the edge it
        is pinned at (``RetargetRobot.pinned_local``) is where that edge was when it was first
        pinned; for the other edge, and on the first frame of a pin, where it is now. The residual
        is the pinned edge's distance from its anchor and the terrain, the sole's tilt (on one
        edge: across only, and how far the other edge is below the terrain), and for a sole
        whose heading is held (:func:`~simreal.retarget.contacts.heading_held`) its heel's move
        across the foot beyond the human's foot turn
        (:func:`~simreal.retarget.contacts.swivel_excess`). The penetration is the deepest of any
        geom pair: the collision rows are linearised, and a foot landing beside the other one
        ended 1.1 cm inside it after steps the last linearisation called feasible."""
        r, m, d = self.robot, self.model, self.data
        prev = self.anchor[t0 - 1].copy() if t0 > 0 else np.full((2, 2, 2), np.nan)
        out = []
        for t in range(t0, t1):
            d.qpos[:] = self.q[t]
            mujoco.mj_kinematics(m, d)
            anchor = np.full((2, 2, 2), np.nan)
            site_rot = d.site_xmat.reshape(-1, 3, 3)
            depth = float(collisions.deepest_by_kind(collisions.contacts(m, d, r.floor_geom, False)).max())
            residual = 0.0
            edges = np.stack(
                [
                    r.ball_points(d.site_xpos, site_rot, r.ball_local),
                    r.ball_points(d.site_xpos, site_rot, r.heel_local),
                ],
                axis=1,
            )  # (2 feet, 2 edges, 3)
            for f in range(2):
                if not self.targets.contacts[t, f]:
                    continue
                piv = int(self.targets.pivot[t, f])
                pin = int(pinned_edge(piv))
                rot, p = site_rot[r.foot_sites[f]], edges[f, pin]
                anchor[f] = edges[f, :, :2]
                held = (
                    t > 0
                    and self.targets.contacts[t - 1, f]
                    and pinned_edge(self.targets.pivot[t - 1, f]) == pin
                    and not np.isnan(prev[f, pin, 0])
                )
                if held:
                    anchor[f, pin] = prev[f, pin]
                if (
                    t > 0
                    and self.targets.contacts[t - 1, f]
                    and not np.isnan(prev[f, HEEL, 0])
                    and heading_held(self.targets.pivot[t - 1, f], piv)
                ):  # no further than the human
                    excess = swivel_excess(
                        prev[f, BALL],
                        prev[f, HEEL],
                        edges[f, HEEL, :2],
                        rot @ r.foot_left_local[f],
                        self.foot_turn[t, f],
                    )
                    residual = max(residual, float(excess))
                if piv:  # level across, the other edge not below the terrain
                    other = edges[f, 1 - pin]
                    tilt = max(
                        abs((rot @ r.foot_left_local[f])[2]),
                        float(r.scene.height(other[None, :2], other[2])[0]) - other[2],
                    )
                else:  # flat
                    tilt = float(np.hypot(*(rot @ r.foot_up_local[f])[:2]))
                z = float(r.scene.height(p[None, :2], p[2])[0])
                residual = max(residual, float(np.linalg.norm(p[:2] - anchor[f, pin])), abs(p[2] - z), tilt)
            out.append((residual, anchor, depth))
            prev = anchor
        return out

    def commit(self, t: int) -> None:
        """Fix frame ``t``: record stance anchors, and report a stance foot the last linearised
        step left off its anchor, the terrain or level (the solve did not converge there; a
        penetration left is the report's to count)."""
        residual, self.anchor[t], _ = self._stance_state(t, t + 1)[0]
        if residual > RESIDUAL_TOL:
            self.infeasible[t] = max(self.infeasible.get(t, 0.0), residual)
        if t + 1 < len(self.targets.contacts) and self._freed(t).any():
            self._release(t)

    def _freed(self, t: int) -> np.ndarray:
        """(2,) the feet freed after frame ``t``: lifting off, or rising onto the heel from flat
        or the ball (where a held heading may turn again, :func:`~simreal.retarget.contacts.heading_held`)."""
        c, piv = self.targets.contacts, self.targets.pivot
        return c[t] & (~c[t + 1] | ((piv[t] != ON_HEEL) & (piv[t + 1] == ON_HEEL)))

    def _release(self, t: int) -> None:
        """A foot is freed after frame ``t``: where the committed frame lags its targets, the
        targets of every keypoint over the next :data:`RELEASE_S` carry that lag, shrinking to
        none (module docstring). The arms' too: left at the human's while the trunk under them
        carried its lag, a shoulder caught up at its velocity limit in the lift-off frame."""
        self.data.qpos[:] = self.q[t]
        mujoco.mj_kinematics(self.model, self.data)
        sites = self.data.site_xmat.reshape(-1, 3, 3)[self.robot.site_ids]
        oriented = np.flatnonzero(self.need_rot)
        # the lag of each oriented keypoint, in its target's frame: R_held = R_target exp([lag])
        lag = np.array([log_so3(self.rot_target[t, k].T @ sites[k]) for k in oriented])
        offset = self.data.site_xpos[self.robot.site_ids] - self.pos_target[t]
        pelvis_lag = float(np.linalg.norm(offset[self.robot.keypoint_index("pelvis")]))
        if np.linalg.norm(lag, axis=1).max() <= RELEASE_LAG_RAD and pelvis_lag <= RELEASE_LAG_M:
            return  # in step with its targets: nothing to catch up
        stop = min(t + 1 + self.release, len(self.rot_target))
        keep = 1.0 - np.arange(1, stop - t) / (self.release + 1)  # the share of the lag left, per frame
        self.pos_target[t + 1 : stop] += keep[:, None, None] * offset
        for k, v in zip(oriented, lag):
            self.rot_target[t + 1 : stop, k] = self.rot_target[t + 1 : stop, k] @ rotvec_to_matrix(keep[:, None] * v)

    # -- one window ------------------------------------------------------------
    def solve_window(self, t0: int, t1: int, iterations: int, max_iterations: int, n_commit: int) -> None:
        """Iterate frames [t0, t1) at least ``iterations`` and at most ``max_iterations`` times, and
        up to ``repair_iterations`` more while a stance foot of the first ``n_commit`` frames is
        left off its constraints or a geom pair penetrates deeper than the report allows
        (:meth:`_stance_state`), with a shrinking trust region (the linearisation's leftover: a
        step that overshoots, as over a straight knee, cycles at full size)."""
        tg, cfg, r = self.targets, self.cfg, self.robot
        mid = (t0 + t1 - 1) // 2
        soles = tg.positions[mid, self.feet_k]
        env = ground_samples(soles, r.scene.height(soles[:, :2], soles[:, 2]), cfg.ground_points)
        if r.scene.boxes:
            pts = r.scene.surface_points()
            near = np.min(np.linalg.norm(pts[:, None] - tg.positions[mid][None], axis=-1), axis=1) < 0.5
            env = np.concatenate([env, pts[near]])
        Q = cfg.laplacian_weight * laplacian_metric(tg.positions[mid], env) + self.Q_kp
        limit = max(iterations, max_iterations)
        it, trust = 0, self.trust
        while it < limit + cfg.repair_iterations:
            if it >= limit:  # repairing: halve the trust region each time, so a step cycling
                self.trust = trust * 0.5 ** min(it - limit + 1, 5)  # over a straight knee settles
            lins = [Linearisation(self, self.q[t]) for t in range(t0, t1)]
            x, slack_by_frame = self._solve_qp(t0, t1, lins, Q)
            for w, t in enumerate(range(t0, t1)):
                mujoco.mj_integratePos(self.model, self.q[t], x[w * self.nv : (w + 1) * self.nv], 1.0)
                self.q[t, r.qpos_adr] = np.clip(self.q[t, r.qpos_adr], r.q_lower, r.q_upper)
            self.iterations += 1
            it += 1
            # Linearisation error grows with the step squared: stop once steps are small, or at
            # the limit, unless the frames to commit still leave a stance foot off or penetrate.
            if (it >= iterations and np.max(np.abs(x)) < cfg.converged_step) or it >= limit:
                state = self._stance_state(t0, t0 + n_commit)
                if max(s[0] for s in state) <= RESIDUAL_TOL and max(s[2] for s in state) <= PENETRATION_TOL_M:
                    break
                limit = min(limit, it)
        self.trust = trust
        for t, s in slack_by_frame.items():
            if s > SLACK_REPORT_TOL:
                self.infeasible[t] = max(self.infeasible.get(t, 0.0), s)
            else:
                self.infeasible.pop(t, None)

    def _solve_qp(self, t0: int, t1: int, lins: list[Linearisation], Q: np.ndarray):
        """One SQP step for the window: (step x, largest slack per frame)."""
        qp = build_window_qp(self, t0, t1, lins, Q)
        res = solve_qp(qp.H, qp.f, qp.lb, qp.ub, qp.A, qp.lo, qp.hi, qp.soft, self.cfg.slack_weight, self.cfg.qp_solver)
        if res.status != "optimal":
            self.relaxed_qps += 1
        if res.status == "failed":
            return res.x, {t: np.inf for t in range(t0, t1)}
        slack = {}
        for t in range(t0, t1):
            s_t = res.slack[qp.row_frame == t]
            slack[t] = float(s_t.max()) if s_t.size else 0.0
        return res.x, slack

    # -- the clip ---------------------------------------------------------------
    def run(self) -> np.ndarray:
        T, cfg = self.targets.num_frames, self.cfg
        self.q[0] = self.initial_guess(0)
        self.solve_window(0, 1, cfg.first_frame_iterations, cfg.first_frame_iterations, 1)
        self.commit(0)
        filled, t0 = 1, 1
        while t0 < T:
            t1 = min(t0 + cfg.window, T)
            for t in range(filled, t1):
                self.q[t] = self.initial_guess(t)
            filled = t1
            n_commit = t1 - t0 if t1 == T else min(cfg.stride, t1 - t0)
            freed = [t for t in range(t0, t0 + n_commit - 1) if self._freed(t).any()]
            if freed:  # a window ends where a foot is freed: the next one starts from its released targets
                n_commit = freed[0] - t0 + 1
            self.solve_window(t0, t1, cfg.iterations, cfg.max_iterations, n_commit)
            for t in range(t0, t0 + n_commit):
                self.commit(t)
            t0 += n_commit
        return self.q


def solve_interaction(
    robot: RetargetRobot, targets: Targets, cfg: InteractionConfig | None = None
) -> tuple[np.ndarray, dict]:
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
    return qpos, {
        "solve_time_s": elapsed,
        "frames_per_s": T / elapsed,
        "sqp_iterations": solver.iterations,
        "relaxed_qps": solver.relaxed_qps,
        "infeasible_frames": sorted(solver.infeasible),
        "infeasible_max_slack": max(solver.infeasible.values(), default=0.0),
    }
