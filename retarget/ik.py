"""``--method ik``: differential IK with mink over keypoint frame tasks, frame by frame.

Per frame, a few mink steps (warm-started from the previous frame) drive the keypoint
sites towards their scaled targets: one ``FrameTask`` per keypoint (position, and orientation
where the map weights it), a light ``PostureTask`` towards the home pose, and two hard
limits: mink's ``ConfigurationLimit`` (joint positions) and :class:`FrameVelocityLimit`,
which bounds the *whole frame's* joint motion by ``v_max * dt`` around the previous frame's
solution, so joint velocities stay within limits however many steps a frame takes. Contacts,
ground and self collisions are not constrained here: the quality report shows what that costs.
"""

from __future__ import annotations

import time

import mink
import numpy as np

from simreal.retarget.robot import RetargetRobot
from simreal.retarget.settings import IKConfig
from simreal.retarget.targets import Targets, start_pose


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


def solve_ik(robot: RetargetRobot, targets: Targets, cfg: IKConfig | None = None) -> tuple[np.ndarray, dict]:
    """Retarget ``targets`` frame by frame.

    Returns:
      qpos: (T, nq) joint-space trajectory (free-joint root first).
      stats: {"solve_time_s", "frames_per_s", "qp_failures"}.
    """
    cfg = cfg or robot.kmap.ik
    model = robot.model
    config = mink.Configuration(model, robot.q_home.copy())
    tasks: list[mink.Task] = []
    frame_tasks = []
    for i, name in enumerate(robot.keypoints):
        task = mink.FrameTask(model.site(int(robot.site_ids[i])).name, "site",
                              position_cost=cfg.position_cost * robot.pos_weights[i],
                              orientation_cost=cfg.orientation_cost * robot.rot_weights[i], lm_damping=0.0)
        frame_tasks.append(task)
        tasks.append(task)
    posture = mink.PostureTask(model, cost=cfg.posture_weight)
    posture.set_target(robot.q_home)
    tasks.append(posture)
    dt = 1.0 / targets.fps
    vel_limit = FrameVelocityLimit(robot, dt)
    limits = [mink.ConfigurationLimit(model, gain=0.95), vel_limit]
    T = targets.num_frames
    qpos = np.empty((T, model.nq))
    failures = 0
    t0 = time.perf_counter()
    for t in range(T):
        for i, task in enumerate(frame_tasks):
            task.set_target(mink.SE3.from_rotation_and_translation(
                mink.SO3.from_matrix(targets.rotations[t, i]), targets.positions[t, i]))
        if t == 0:
            config.update(start_pose(robot, targets))
        for _ in range(cfg.first_frame_iterations if t == 0 else cfg.iterations):
            try:
                v = mink.solve_ik(config, tasks, dt, solver=cfg.solver, damping=cfg.damping, limits=limits)
            except mink.NoSolutionFound:
                failures += 1
                break
            config.integrate_inplace(v, dt)
        q = config.q.copy()
        q[robot.qpos_adr] = np.clip(q[robot.qpos_adr], robot.q_lower, robot.q_upper)
        qpos[t] = q
        vel_limit.q_prev = q
    elapsed = time.perf_counter() - t0
    return qpos, {"solve_time_s": elapsed, "frames_per_s": T / elapsed, "qp_failures": failures}
