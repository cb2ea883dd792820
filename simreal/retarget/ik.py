"""``--method ik``: differential IK with mink over keypoint frame tasks, frame by frame.

Per frame, a few mink steps (warm-started from the previous frame) drive the keypoint
sites towards their scaled targets: one ``FrameTask`` per keypoint (position, and orientation
where the map weights it; a stance foot's held where its pinned sole edge landed,
:func:`stance_pins`, with ``stance_cost_gain`` times the cost), a light ``PostureTask`` towards
the home pose, and three hard limits: mink's ``ConfigurationLimit`` (joint positions, within the
keypoint map's ``joint_ranges``: :func:`_within_map_ranges`), :class:`FrameVelocityLimit`,
which bounds the *whole frame's* joint motion by ``v_max * dt`` around the previous frame's
solution, so joint velocities stay within limits however many steps a frame takes, and
:class:`CollisionLimit`: no ground, scene or self penetration, the pairs MuJoCo's collision
pipeline finds, linearised as the interaction method does. The stance pin is a cost, not a
constraint as in the interaction method: a target far from it still pulls the foot.
"""

from __future__ import annotations

import copy
import time

import mink
import mujoco
import numpy as np

from simreal.retarget import collisions
from simreal.retarget.metrics import PENETRATION_TOL_M
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.settings import IKConfig
from simreal.retarget.targets import Targets, start_pose


class CollisionLimit(mink.Limit):
    """Ground, scene and self clearance per IK step, from MuJoCo's own collision pipeline.

    For every geom pair ``mj_collision`` reports within ``detection_m`` (the robot model's
    filter: excluded pairs, parents, contype bits), with signed distance ``d`` and distance
    Jacobian ``J_d`` (:func:`collisions.contacts`), the step ``dq`` keeps

        d + J_d dq >= d - gain * d        i.e.  -J_d dq <= gain * d,

    so a pair closes at most a fraction ``gain`` of its gap per step, and a pair already inside
    (``d < 0``) must win back that fraction of its depth (or, with ``recover`` off, where the other
    limits leave no way out, go no deeper). Written here rather than with mink's
    ``CollisionAvoidanceLimit``: its bound is ``gain d / dt`` on a QP whose variable is ``dq``
    (a 30 fps step may close 25 times the gap), a pair inside is only held where it is, and it
    tests one witness point per pair (a box tipping on one corner sinks the others).
    """

    def __init__(self, robot: RetargetRobot, gain: float, detection_m: float):
        self.model = copy.deepcopy(robot.model)
        collisions.set_margin(self.model, detection_m)
        self.data = mujoco.MjData(self.model)
        self.floor_geom, self.gain = robot.floor_geom, gain
        self.recover = True  # False: a pair inside is held where it is (the retry of a failed step)

    def _contacts(self, q: np.ndarray, with_jacobian: bool) -> collisions.ContactSet:
        self.data.qpos[:] = q
        mujoco.mj_kinematics(self.model, self.data)
        if with_jacobian:
            mujoco.mj_comPos(self.model, self.data)
        return collisions.contacts(self.model, self.data, self.floor_geom, with_jacobian=with_jacobian)

    def depth(self, q: np.ndarray) -> float:
        """Deepest penetration [m] (>= 0) of the configuration ``q``."""
        return float(collisions.deepest_by_kind(self._contacts(q, with_jacobian=False)).max())

    def compute_qp_inequalities(self, configuration: mink.Configuration, dt: float) -> mink.Constraint:
        del dt  # the bound is per step
        cs = self._contacts(configuration.q, with_jacobian=True)
        if len(cs.dist) == 0:
            return mink.Constraint()
        assert cs.jac is not None  # with_jacobian
        h = self.gain * cs.dist
        return mink.Constraint(G=-cs.jac, h=h if self.recover else np.maximum(h, 0.0))


class FrameVelocityLimit(mink.Limit):
    """Joint motion within one frame bounded around the previous frame: |q + dq - q_prev| <= v_max dt.

    Unlike mink's ``VelocityLimit`` (a bound per IK step), this bounds the sum of every step
    taken for a frame. Hinge and slide joints only; unlimited joints (v_max = inf) are skipped.
    """

    def __init__(self, robot: RetargetRobot, frame_dt_s: float):
        """frame_dt_s: time between frames [s]."""
        keep = np.isfinite(robot.v_max)
        self.qpos_adr = robot.qpos_adr[keep]
        self.dof_adr = robot.dof_adr[keep]
        self.step = robot.v_max[keep] * frame_dt_s  # [rad] per frame
        nv = robot.model.nv
        P = np.zeros((len(self.dof_adr), nv))
        P[np.arange(len(self.dof_adr)), self.dof_adr] = 1.0
        self.G = np.vstack([P, -P])
        self.q_prev: np.ndarray | None = None

    def compute_qp_inequalities(self, configuration: mink.Configuration, dt: float) -> mink.Constraint:
        del dt  # the bound is per frame, not per step
        if self.q_prev is None or len(self.dof_adr) == 0:
            return mink.Constraint()
        dq = configuration.q[self.qpos_adr] - self.q_prev[self.qpos_adr]
        h = np.concatenate([self.step - dq, self.step + dq])
        return mink.Constraint(G=self.G, h=np.maximum(h, 0.0))


def stance_pins(robot: RetargetRobot, targets: Targets) -> np.ndarray:
    """(T, 2, 3) where each stance foot's site is held: its pinned sole edge (the ball flat or on
    the ball, the heel on the heel: :meth:`RetargetRobot.pinned_local`) stays on the terrain where
    it was when that edge was pinned, and the site sits about it as the foot's target orientation
    turns it (a heel-off pitches the foot about its ball, as the interaction method pins it); NaN
    in swing."""
    from simreal.retarget.contacts import HEEL, pinned_edge, runs

    local = robot.pinned_local(targets.pivot)  # (T, 2, 3) in the site frame
    on_heel = pinned_edge(targets.pivot) == HEEL
    out = np.full((targets.num_frames, 2, 3), np.nan)
    for f, k in enumerate(robot.foot_keypoints):
        rot = targets.rotations[:, k]
        for a, b, standing in runs(targets.contacts[:, f]):
            if not standing:
                continue
            for c, d, _ in runs(on_heel[a:b, f]):  # a new edge is pinned where it stands then
                c, d = a + c, a + d
                edge = targets.positions[c, k] + rot[c] @ local[c, f]
                edge[2] = targets.terrain_z[c, f]
                out[c:d, f] = edge - np.einsum("tab,tb->ta", rot[c:d], local[c:d, f])
    return out


def _step(
    config: mink.Configuration,
    tasks: list[mink.Task],
    dt: float,
    cfg: IKConfig,
    limits: list[mink.Limit],
    collision_limit: CollisionLimit,
) -> np.ndarray | None:
    """One IK step's velocity; retried with pairs inside held rather than recovered, None if
    that fails too."""
    for recover in (True, False):
        collision_limit.recover = recover
        try:
            return mink.solve_ik(config, tasks, dt, solver=cfg.solver, damping=cfg.damping, limits=limits)
        except mink.NoSolutionFound:
            continue
        finally:
            collision_limit.recover = True
    return None


def _within_map_ranges(robot: RetargetRobot) -> mujoco.MjModel:
    """A copy of the robot's model whose joint ranges are the retargeting limits (the robot's own,
    narrowed by the keypoint map's ``joint_ranges``), so mink's ``ConfigurationLimit`` keeps to
    them: clipping a solution to them afterwards undid what the collision limit had done (an
    elbow bent back away from a wall, straightened into it by 10 cm)."""
    model = copy.deepcopy(robot.model)
    for adr, lo, hi in zip(robot.qpos_adr, robot.q_lower, robot.q_upper):
        j = int(np.flatnonzero(model.jnt_qposadr == adr)[0])
        if np.isfinite(lo) and np.isfinite(hi):
            model.jnt_range[j] = (lo, hi)
            model.jnt_limited[j] = 1
    return model


def solve_ik(robot: RetargetRobot, targets: Targets, cfg: IKConfig | None = None) -> tuple[np.ndarray, dict]:
    """Retarget ``targets`` frame by frame.

    Returns:
      qpos: (T, nq) joint-space trajectory (free-joint root first).
      stats: {"solve_time_s", "frames_per_s", "qp_failures"}.
    """
    cfg = cfg or robot.kmap.ik
    model = _within_map_ranges(robot)
    config = mink.Configuration(model, robot.q_home.copy())
    tasks: list[mink.Task] = []
    frame_tasks = []
    for i in range(len(robot.keypoints)):
        task = mink.FrameTask(
            model.site(int(robot.site_ids[i])).name,
            "site",
            position_cost=cfg.position_cost * robot.pos_weights[i],
            orientation_cost=cfg.orientation_cost * robot.rot_weights[i],
            lm_damping=0.0,
        )
        frame_tasks.append(task)
        tasks.append(task)
    posture = mink.PostureTask(model, cost=cfg.posture_weight)
    posture.set_target(robot.q_home)
    tasks.append(posture)
    dt = 1.0 / targets.fps
    vel_limit = FrameVelocityLimit(robot, dt)
    collision_limit = CollisionLimit(robot, cfg.collision_gain, cfg.collision_detection_m)
    limits = [mink.ConfigurationLimit(model, gain=0.95), vel_limit, collision_limit]
    T = targets.num_frames
    qpos = np.empty((T, model.nq))
    failures = 0
    positions = targets.positions.copy()
    pins = stance_pins(robot, targets)
    standing = np.isfinite(pins).all(axis=-1)  # (T, 2)
    feet = robot.foot_keypoints
    positions[:, feet] = np.where(standing[..., None], pins, positions[:, feet])
    t0 = time.perf_counter()
    for t in range(T):
        for f, k in enumerate(feet):
            frame_tasks[k].set_position_cost(
                cfg.position_cost * robot.pos_weights[k] * (cfg.stance_cost_gain if standing[t, f] else 1.0)
            )
        for i, task in enumerate(frame_tasks):
            task.set_target(
                mink.SE3.from_rotation_and_translation(mink.SO3.from_matrix(targets.rotations[t, i]), positions[t, i])
            )
        if t == 0:
            config.update(start_pose(robot, targets))
        steps = cfg.first_frame_iterations if t == 0 else cfg.iterations
        for k in range(steps + cfg.repair_iterations):
            # Past the frame's steps, go on only while it penetrates: one linearised step can
            # carry a geom from beyond the detection distance deep into another.
            if k >= steps and collision_limit.depth(config.q) <= PENETRATION_TOL_M:
                break
            v = _step(config, tasks, dt, cfg, limits, collision_limit)
            if v is None:
                failures += 1
                break
            config.integrate_inplace(v, dt)
        q = config.q.copy()
        q[robot.qpos_adr] = np.clip(q[robot.qpos_adr], robot.q_lower, robot.q_upper)
        qpos[t] = q
        vel_limit.q_prev = q
    elapsed = time.perf_counter() - t0
    return qpos, {"solve_time_s": elapsed, "frames_per_s": T / elapsed, "qp_failures": failures}
