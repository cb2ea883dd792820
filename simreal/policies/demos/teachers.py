"""Teachers for ``simreal demos``: who acts while a demonstration is recorded.

    cfg, env, teacher = load_teacher("scripted", "arm-reach")          # SCRIPTED's controller
    cfg, env, teacher = load_teacher("runs/arm-reach/20261121-120000", "arm-reach")  # a trained run
    actions = teacher.act(batch.state)                                 # (B, m) in [-1, 1]

A teacher is privileged: it reads the whole batched env state (Brax's ``State``: physics in
``pipeline_state``, task inputs such as ``target_pos_w`` in ``info``), not only what the
policy observes, and returns the task's own normalised action, the action a policy trained
on the recording must reproduce. Two kinds:

- ``scripted``: the controller of the task in :data:`SCRIPTED` (one row per task);
- a run directory: that run's deterministic policy (any trainer's, through the trainer table)
  on the observation, in the env the run was trained in.

Scripted controllers command joint position targets through :class:`~simreal.policies.demos.arm_ik.ArmIK`,
solved each control step from the measured pose, so they correct what the PD servos, the
randomised gains and masses and the action delay do to the motion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import mujoco
import numpy as np

from simreal.policies.demos.arm_ik import ArmIK

if TYPE_CHECKING:
    from simreal.policies.run_config import RunConfig

#: The site's z axis pointing down: the gripper's fingers vertical above the table.
DOWN = np.array([0.0, 0.0, -1.0])


class Teacher(Protocol):
    """Actions for a batch of envs from their full state."""

    def act(self, state: Any) -> np.ndarray:
        """(B, m) normalised actions in [-1, 1] for the batched Brax ``State``."""
        ...

    def reset(self) -> None:
        """The batch starts new episodes (a teacher with memory starts over)."""
        ...


class ReachTeacher:
    """``arm-reach``: joint targets putting the end effector on the goal, from the measured pose.

    The target is the goal itself, not a path towards it: the PD servos move the arm there
    within a few hundred milliseconds of a 4 s episode, and the action, a function of the goal
    and the pose, is what an MLP copies most easily.
    """

    def __init__(self, env: Any):
        self.ik = ArmIK(env)

    def reset(self) -> None:
        """A controller of the measured state has no memory: nothing to start over."""

    def act(self, state: Any) -> np.ndarray:
        qpos, goal = np.asarray(state.pipeline_state.qpos), np.asarray(state.info["target_pos_w"])
        return np.stack([self.ik.action(self.ik.solve(q, g)) for q, g in zip(qpos, goal)])


def towards(
    ik: ArmIK, qpos: np.ndarray, site: np.ndarray, target: np.ndarray, gripper: float, step_m: float
) -> np.ndarray:
    """The action moving the site, fingers down, from ``site`` towards ``target`` [m] by at most
    ``step_m``, with ``gripper`` the command of the actuators IK does not drive (-1 closed, 1 open)."""
    step = target - site
    n = np.linalg.norm(step)
    if n > step_m:
        step *= step_m / n
    return ik.action(ik.solve(qpos, site + step, DOWN), others=gripper)


def check_table_reach(ik: ArmIK, env: Any, height_m: float, what: str, tolerance_m: float = 0.02) -> None:
    """ConfigError naming ``env.action_scale`` when the site, fingers down, cannot reach
    ``height_m`` above the table at the cube's spawn centre within the action box (home +-
    ``action_scale``): a scripted ``what`` would never touch the cube."""
    from simreal.errors import ConfigError

    goal = np.array([*np.asarray(env.spawn_center)[:2], height_m])
    q = np.array(env.home_qpos, np.float64)
    for _ in range(10):  # 10 solves of a few steps each: converged wherever the box allows
        q[ik.qpos_adr] = ik.solve(q, goal, DOWN)
    miss = float(np.linalg.norm(ik.site_pose(q)[0] - goal))
    if miss > tolerance_m:
        raise ConfigError(
            "env.action_scale",
            f"the scripted {what} needs the fingers on the table; within home "
            f"+- {env.cfg.action_scale} the {env.robot.name} misses "
            f"{100 * height_m:.1f} cm above the spawn centre by {miss:.2f} m: raise "
            "env.action_scale (1.5 reaches it on the Franka); a miss that does not "
            "shrink is a fingers-down pose out of this arm's reach (a 5-DoF arm's): "
            "the scripted teachers are the Franka's",
        )


class PushTeacher:
    """``arm-push``: push the cube to the goal with the closed fingers, fingers pointing down.

    A function of the current positions only (as Meta-World's scripted policies are), so it
    recovers by itself when the cube turns or slides off the line: with ``u`` the unit vector
    from the cube to the goal on the table and the pre-push point ``b = cube - u (h + c)``
    (``h`` the cube's half size, ``c`` the clearance of the fingers),

    1. fingers low (within ``LOW_M`` of ``PUSH_Z_M``), behind the cube (at most ``BEHIND_M``
       beyond ``b``) and on the line through it along ``u`` (within ``ALIGN_M``): push, the
       target ``PUSH_LEAD_M`` beyond the cube's centre along ``u``;
    2. else above ``b`` (within ``ALIGN_M``): go down to ``b`` at push height;
    3. else: go to ``b`` at ``HIGH_Z_M``, which clears the cube;

    and stop where the cube is within ``DONE_M`` of the goal. The site's command is at most
    ``STEP_M`` from the site, towards that target.

    ConfigError naming ``env.action_scale`` when the arm cannot put its fingers on the table at
    the cube's spawn centre within the action box (home +- ``action_scale``).
    """

    #: Site height while pushing [m] (the fingertips' lower end is ~4 mm below the site).
    PUSH_Z_M = 0.03
    #: Site height while moving to the pre-push point [m].
    HIGH_Z_M = 0.12
    #: Gap between the fingers and the cube's face at the pre-push point [m].
    CLEARANCE_M = 0.02
    #: How far ahead of the cube's centre a push aims [m].
    PUSH_LEAD_M = 0.03
    #: Largest distance from the line, and from the pre-push point, that counts as aligned [m].
    ALIGN_M = 0.015
    #: Height above ``PUSH_Z_M`` still counted as low enough to push [m].
    LOW_M = 0.02
    #: How far behind the pre-push point (away from the cube) a push may start [m].
    BEHIND_M = 0.03
    #: Cube-to-goal distance at which pushing stops [m].
    DONE_M = 0.01
    #: Largest move of the site's target per control step [m].
    STEP_M = 0.03

    def __init__(self, env: Any):
        self.ik = ArmIK(env)
        self.obj = env.obj_qpos  # the cube's free-joint qpos slice
        self.half = float(env.cfg.object_half_size_m)
        check_table_reach(self.ik, env, self.PUSH_Z_M, "push")

    @classmethod
    def rule(cls, ee: Any, cube: Any, goal: Any, half: float, xp: Any) -> Any:
        """Where the site goes next [m] (class docstring), from its position, the cube's and the
        goal's (..., 3), for a cube of half size ``half`` [m]; batched over the leading axes and
        written for either array namespace ``xp`` (numpy here, torch in ``demos.scripted_bundle``'s graph)."""
        v = goal[..., :2] - cube[..., :2]
        dist = xp.sqrt((v * v).sum(-1))
        u = v / xp.clip(dist, 1e-9, None)[..., None]
        reach = half + cls.CLEARANCE_M
        behind = cube[..., :2] - u * reach
        rel = ee[..., :2] - cube[..., :2]
        along = (rel * u).sum(-1)
        across = xp.abs(rel[..., 0] * u[..., 1] - rel[..., 1] * u[..., 0])
        low = ee[..., 2] < cls.PUSH_Z_M + cls.LOW_M
        push = low & (across < cls.ALIGN_M) & (along > -(reach + cls.BEHIND_M)) & (along < 0)
        ahead = cube[..., :2] + u * xp.clip(dist, None, cls.PUSH_LEAD_M)[..., None]
        gap = ee[..., :2] - behind
        over = xp.sqrt((gap * gap).sum(-1)) < cls.ALIGN_M
        xy = xp.where(push[..., None], ahead, behind)
        z = xp.where(push | over, cls.PUSH_Z_M, cls.HIGH_Z_M)
        target = xp.stack([xy[..., 0], xy[..., 1], z + 0.0 * xy[..., 0]], -1)
        return xp.where((dist < cls.DONE_M)[..., None], ee, target)

    def target(self, ee: np.ndarray, cube: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """:meth:`rule` for one env."""
        return self.rule(ee, cube, goal, self.half, np)

    def reset(self) -> None:
        """A controller of the measured state has no memory: nothing to start over."""

    def act(self, state: Any) -> np.ndarray:
        qpos, goal = np.asarray(state.pipeline_state.qpos), np.asarray(state.info["target_pos_w"])
        out = []
        for q, g in zip(qpos, goal):
            ee, _ = self.ik.site_pose(q)
            out.append(towards(self.ik, q, ee, self.target(ee, q[self.obj][:3], g), -1.0, self.STEP_M))  # -1: closed
        return np.stack(out)


class PickTeacher:
    """``arm-pick``: grasp the cube from above with the fingers pointing down, lift it and carry
    it to the goal in the air.

    A function of the current state only (as :class:`PushTeacher`), with ``w`` the fingers'
    opening (the sum of the two finger joints), the cube's width ``2 h`` and ``d`` the site's
    offset from the cube's centre:

    On the cube means ``|d| < HOLD_M`` with ``w > 2 h - EMPTY_M`` (fingers shut on nothing are
    not on it, and the rules below open them for another try):

    1. the cube held (on it and ``w < 2 h + GRIP_M``): carry it, the site's target the goal plus
       ``d``; fingers closed;
    2. the fingers closing on it (on it and ``w < 2 h + CLOSING_M``), or the site at grasp height
       (``|d| < GRASP_M``): close the fingers and stay (the grip tightens over the next steps,
       then rule 1 lifts);
    3. the site above the cube (``|d_xy| < ALIGN_M``): go down to grasp height, fingers open;
    4. else: go above the cube at ``HIGH_Z_M``, fingers open.

    Rule 2's first clause is the hysteresis a stateless rule gets from the fingers' own state:
    once they have started to close, a site that jitters out of ``GRASP_M`` (observation
    noise, the cube pushed as the fingers square it) no longer reopens them. The site target is
    at most ``STEP_M`` from the site. The cube spawns at any yaw: open fingers (8 cm) take a 5 cm
    cube across its diagonal (7.1 cm), and closing turns it square. ConfigError naming ``robot``
    for a gripper that is not two parallel finger slides (the Franka's); ``env.action_scale`` as
    for the push when the fingers cannot reach the table.

    Measured on ``arm-pick``'s default config (randomisation, observation noise and delay, the
    robot's joint speed limits: ``env.slew_limit``, as the deploy safety layer moves the arm),
    512 episodes, as the residual's base graph: 0.578 success before this rule had rule 2's
    first clause, ``GRASP_M`` 1 cm and ``HOLD_M`` 3 cm (22% of the cubes never lifted: the
    fingertips meet the table with the site 0.5-1.2 cm above the cube's centre, so rule 2
    flickered with the noise and the fingers never closed; 17% were let go in the air as the
    cube slid 3 cm along the pads); 0.758 now. The teacher on the simulator's state, without
    noise (``simreal demos``, 100 episodes): 0.98 before, 0.94 now (a larger ``HOLD_M`` keeps
    carrying a cube that slid, where a retry would have caught it) (docs/benchmarks-log.md).
    """

    #: Site height above the cube's centre while approaching from above [m].
    HIGH_Z_M = 0.10
    #: Largest horizontal distance of the site from the cube's centre that counts as over it [m].
    ALIGN_M = 0.01
    #: Largest distance of the site from the cube's centre that counts as at grasp height [m].
    GRASP_M = 0.012
    #: Largest distance of the site from the cube's centre while it holds the cube [m].
    HOLD_M = 0.035
    #: Finger opening beyond the cube's width that still counts as gripping it [m].
    GRIP_M = 0.004
    #: Finger opening beyond the cube's width that counts as closing on it (rule 2) [m].
    CLOSING_M = 0.02
    #: Finger opening below the cube's width that means the fingers closed on nothing [m].
    EMPTY_M = 0.015
    #: Largest move of the site's target per control step [m].
    STEP_M = 0.03

    def __init__(self, env: Any):
        from simreal.errors import ConfigError

        self.ik = ArmIK(env)
        self.obj = env.obj_qpos
        self.half = float(env.cfg.object_half_size_m)
        m = env.mj_model
        fingers = [
            j for j in range(m.njnt) if "finger" in m.joint(j).name and m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE
        ]
        if len(fingers) != 2:
            raise ConfigError(
                "robot",
                f"the scripted pick needs a parallel gripper of two finger slide joints; the "
                f"{env.robot.name} has {len(fingers)} (the franka has them)",
            )
        self.fingers = m.jnt_qposadr[fingers]
        check_table_reach(self.ik, env, self.half, "pick")  # the site at the cube's centre

    @classmethod
    def rule(cls, ee: Any, cube: Any, goal: Any, opening: Any, half: float, xp: Any) -> tuple[Any, Any]:
        """(where the site goes next [m] (..., 3), close the fingers (...,)) (class docstring), from the
        site's, the cube's and the goal's positions (..., 3) and the fingers' opening (...,) [m];
        batched and array-namespace agnostic as :meth:`PushTeacher.rule`."""
        d = ee - cube
        near = xp.sqrt((d * d).sum(-1))
        above = xp.sqrt((d[..., :2] * d[..., :2]).sum(-1)) < cls.ALIGN_M
        on_cube = (near < cls.HOLD_M) & (opening > 2 * half - cls.EMPTY_M)  # not closed on nothing
        hold = on_cube & (opening < 2 * half + cls.GRIP_M)
        grasp = (near < cls.GRASP_M) | (on_cube & (opening < 2 * half + cls.CLOSING_M))
        high = xp.stack([cube[..., 0], cube[..., 1], cube[..., 2] + cls.HIGH_Z_M], -1)
        target = xp.where(hold[..., None], goal + d, xp.where((grasp | above)[..., None], cube, high))
        return target, hold | grasp

    def target(self, ee: np.ndarray, cube: np.ndarray, goal: np.ndarray, opening: float) -> tuple[np.ndarray, bool]:
        """:meth:`rule` for one env."""
        target, close = self.rule(ee, cube, goal, np.float64(opening), self.half, np)
        return target, bool(close)

    def reset(self) -> None:
        """A controller of the measured state has no memory: nothing to start over."""

    def act(self, state: Any) -> np.ndarray:
        qpos, goal = np.asarray(state.pipeline_state.qpos), np.asarray(state.info["target_pos_w"])
        out = []
        for q, g in zip(qpos, goal):
            ee, _ = self.ik.site_pose(q)
            target, close = self.target(ee, q[self.obj][:3], g, float(q[self.fingers].sum()))
            out.append(towards(self.ik, q, ee, target, -1.0 if close else 1.0, self.STEP_M))
        return np.stack(out)


class PolicyTeacher:
    """A trained run's deterministic policy on the observation the env gives it."""

    def __init__(self, act: Callable[[Any], Any], reset: Callable[[], None]):
        self._act = act
        self.reset = reset

    def act(self, state: Any) -> np.ndarray:
        from simreal.sim.adapter_core import to_numpy

        return np.asarray(self._act(to_numpy(state.obs)), np.float64)


class RandomTeacher:
    """``--teacher random``: exploration, not a demonstration. Each env holds a uniform random
    action in [-1, 1]^m and draws a new one with probability ``switch`` per step (held for
    1 / switch steps on average, so the robot travels to the edges of its action range rather
    than jittering in place): states a learned reward must also score (``simreal frames``)."""

    def __init__(self, env: Any, seed: int = 0, switch: float = 0.05):
        self.m, self.switch = int(env.action_size), switch
        self.rng = np.random.default_rng(seed)
        self.held: np.ndarray | None = None

    def reset(self) -> None:
        self.held = None

    def act(self, state: Any) -> np.ndarray:
        b = np.asarray(state.done).shape[0]
        fresh = self.rng.uniform(-1.0, 1.0, (b, self.m))
        if self.held is None or len(self.held) != b:
            self.held = fresh
        self.held = np.where(self.rng.uniform(size=(b, 1)) < self.switch, fresh, self.held)
        return self.held


#: task -> its scripted teacher, built from the task's env.
SCRIPTED: dict[str, Callable[[Any], Teacher]] = {
    "arm-reach": ReachTeacher,
    "arm-reach-choice": ReachTeacher,  # arm-reach on the chosen ball (the teacher reads the goal from info)
    "arm-push": PushTeacher,
    "arm-push-pixels": PushTeacher,  # arm-push's physics; only the policy's observation differs
    "arm-pick": PickTeacher,
}


def load_teacher(
    teacher: str, task: str, overrides: Sequence[str] = (), flag: str = "--teacher"
) -> tuple[RunConfig, Any, Teacher]:
    """(the resolved config, its env, the teacher) for ``--teacher scripted``, ``random`` (any task) or
    a run directory.

    ``overrides`` (``key=value``) apply to the task's default config, or to the run's saved one.
    ConfigError naming ``flag`` (the option that gave ``teacher``: ``--teacher``, or ``--drive``
    for the policy that acts) for a task without a scripted teacher (listing those with one), for
    something that is neither ``scripted`` nor a run directory, and for a run of another task.
    """
    from simreal.errors import ConfigError
    from simreal.policies.run_config import make_env, resolve

    if teacher == "random":
        cfg = resolve(task, overrides)
        env = make_env(cfg)
        return cfg, env, RandomTeacher(env, cfg.seed)
    if teacher == "scripted":
        cfg = resolve(task, overrides)  # first: a misspelt task is an unknown task, not a missing teacher
        if task not in SCRIPTED:
            raise ConfigError(
                flag,
                f"no scripted teacher for task {task}; tasks with one: "
                f"{', '.join(SCRIPTED)} (or give a trained run's directory)",
            )
        env = make_env(cfg)
        return cfg, env, SCRIPTED[task](env)
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers import get_trainer

    run_dir = Path(teacher)
    if not run_dir.is_dir():
        raise ConfigError(flag, f"expected 'scripted', 'random' or a run directory; {teacher!r} is none of these")
    saved = load_config(run_dir, reward=False)  # the teacher acts; the dataset records the task's own reward
    cfg = resolve(None, overrides, base=saved.to_dict(), source=str(run_dir / "config.yaml"))
    if cfg.task != task:
        raise ConfigError(flag, f"{run_dir} is a {cfg.task} run; the demonstrations asked for are {task}")
    policy = get_trainer(cfg.trainer).load(run_dir, cfg)
    return cfg, policy.env, PolicyTeacher(policy.act, policy.reset)
