"""The deploy-side sim-to-sim gate: does the deploy pipeline change what the policy does?

``simreal eval --backend`` compares two physics engines; this compares the *deployment* with
the training simulator. The rehearsal (:mod:`simreal.deploy.sim_loop`) runs the bundle
through everything a robot has: state messages (noise, drops, latency), the runner's
observation building from ROS 2 messages, ONNX Runtime, limits, slew and ramp of the safety
layer, command messages. The reference runs the same ONNX policy in the task's training env
(:meth:`simreal.sim.env.MjEnv.reset_from`: the same start state and task inputs,
randomisation, observation noise and action delay off), observing through the env's own
``robot_state`` and observation terms, with the runner's start ramp (``start.ramp_s``: the
action blends from the initial command to the policy's as the safety layer's RAMP does, a
deliberate change the gate is not there to catch; clamps and slew limits are not modelled).
Both true-state trajectories are compared from the hand-over on, at the control rate, by the
robot family's rule (:data:`RULES`):

==========  =====================================================  =====================
family      measure                                                 passes when
==========  =====================================================  =====================
quadrotor   max |p_rehearsal(t) - p_reference(t)| after settle_s    <= 0.10 m
arm         RMS over time and joints of q_rehearsal - q_reference,  <= 0.05 rad
            time-aligned within +-0.25 s (:func:`aligned_rms`)
arm with    the outcome: |o_rehearsal(T) - o_reference(T)| of the  <= 0.02 m; the hand
an object   object's position at the end, the hand's final place   <= 0.02 m (the joints
            (RMS of |ee_rehearsal - ee_reference| over the last    <= 0.05 rad), the path
            0.5 s; without an ``end_effector`` site, the RMS joint  <= 0.15 rad
            deviation there) and the aligned path
humanoid    RMS joint deviation before either falls, and the fall   <= 0.10 rad; no fall
            (base below half its start height or tilted past 60 deg)  sooner than 0.5 s before
                                                                    the reference's
classic     RMS joint deviation                                     <= 0.05 rad
==========  =====================================================  =====================

Why an arm's trajectories are time-aligned: a contact-rich grasp branches on a few control
periods of command timing. A trained pick closed on its cube about 0.2 s later in an ideal
rehearsal than in the reference and then did the same lift; compared sample by sample, that
read 0.077-0.096 rad over 3 s (docs/benchmarks-log.md) although both ended within 0.015 rad of each
other. Dynamic time warping inside a band (Sakoe-Chiba) lets each sample match the other
trajectory within ``ALIGN_S``: the same motion with its timing shifted by up to that passes; a
different motion (another pose, a missed grasp and a retry) or a lag beyond the band does not.
The unaligned figure is reported beside it (``unaligned``).

Why a scene with an object (a free body named ``object``: the pick, the push) is judged on the
outcome: in real time, a control period of jitter moves the grasp by more than the band. The
same trained pick, rehearsed over DDS with 10 ms latency and 5% drops (five seeds), lifted its
cube 11.6-19.8 cm and left it within 0.1-1.0 cm of where the reference left it, while its path
read 0.063-0.128 rad aligned. Where the outcome differed (the rehearsal left the cube on the
table where the reference lifted it 13-15 cm; the scripted base once lifted a cube the
reference missed) the objects ended 14-19 cm apart (docs/benchmarks-log.md). So the object's final position
decides, with the hand's, and the aligned path only guards against a gross change (three times
the free-motion tolerance). The end is the hand's place, not its joints': the arm tasks leave the
roll about the gripper's axis and a redundant arm's null space free, and an ideal-link rehearsal
of a residual pick ended 0.18 rad off on the Franka's joint 7 (0.062 rad RMS over the joints) with
the cube 0.2 mm and the hand 0.6 cm from the reference's. The outcome is the one at the end of the task's episode:
a rehearsal shorter than the episode (``--duration 1`` of a 6 s pick compares two cubes that
have not moved yet, or two in flight) fails with that reason, so rehearse for at least the
episode (the default 10 s does).

Tolerances are for the rehearsal's default trouble (sensor noise; a run with injected latency
and drops is judged the same way: latency that changes the behaviour beyond them is what the
gate is for). Needs JAX and the task code: it runs on the simulation side only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simreal.bundle import Bundle
from simreal.deploy.sim_robot import SimRobot, StartState

#: A trajectory: control-rate samples of robot-state keys, t [s] from the hand-over.
Trajectory = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Rule:
    """A family's comparison: which deviation is measured and its tolerance."""

    measure: str  # base_pos_max_m | joint_rms_rad | joint_rms_aligned_rad
    tolerance: float
    falls: bool = False  # also compare the time of a fall
    align_s: float = 0.0  # time-align joint trajectories within +-align_s (:func:`aligned_rms`)
    object_m: float = 0.0  # a scene with an object: judge the outcome, this tolerance on its final position
    hand_m: float = 0.0  # ... and this one on the end effector's final position (``ee_pos_w``)


#: The arm rule's alignment band [s] (module docstring).
ALIGN_S = 0.25
#: With an object: the hand's final place is the RMS over the last FINAL_S, and the aligned
#: path may read up to PATH_SLACK times the rule's tolerance (module docstring).
FINAL_S = 0.5
PATH_SLACK = 3.0
RULES: dict[str, Rule] = {
    "quadrotor": Rule("base_pos_max_m", 0.10),
    "arm": Rule("joint_rms_aligned_rad", 0.05, align_s=ALIGN_S, object_m=0.02, hand_m=0.02),
    "humanoid": Rule("joint_rms_rad", 0.10, falls=True),
    "classic": Rule("joint_rms_rad", 0.05),
}
FALL_GRACE_S = 0.5


def aligned_rms(a: np.ndarray, b: np.ndarray, band: int) -> float:
    """RMS deviation of two sampled trajectories a (n, d) and b (m, d) after dynamic time warping
    inside a Sakoe-Chiba band of ``band`` samples::

        W* = argmin over warping paths W from (0, 0) to (n-1, m-1), steps (1,0) (0,1) (1,1),
             |i - j| <= band for every (i, j) in W, of  sum_(i,j in W) |a_i - b_j|^2
        aligned_rms = sqrt(sum_(i,j in W*) |a_i - b_j|^2 / (|W*| d))

    With ``band`` 0 and n = m this is the plain RMS. inf when the band cannot join the two ends
    (|n - m| > band). Written here: O(n band) loops over a few hundred samples; a DTW package
    (dtaidistance, tslearn) would be a dependency for these lines.
    """
    n, m = len(a), len(b)
    if n == 0 or m == 0 or abs(n - m) > band:
        return float("inf")
    # only the band is stored: cell (i, j) at column j - i + band (memory n x (2 band + 1))
    width = 2 * band + 1
    cost = np.full((n + 1, width), np.inf)
    length = np.zeros((n + 1, width), dtype=np.int64)
    cost[0, band] = 0.0
    for i in range(1, n + 1):
        for j in range(max(1, i - band), min(m, i + band) + 1):
            k = j - i + band
            # predecessors in the order diagonal, up, left (the first of equal costs wins)
            steps = [(i - 1, k)] + ([(i - 1, k + 1)] if k + 1 < width else []) + ([(i, k - 1)] if k > 0 else [])
            prev = min(steps, key=lambda ik: cost[ik])
            cost[i, k] = cost[prev] + float(np.sum((a[i - 1] - b[j - 1]) ** 2))
            length[i, k] = length[prev] + 1
    k = m - n + band
    return float(np.sqrt(cost[n, k] / (length[n, k] * a.shape[1])))


def check_task(bundle: Bundle) -> None:
    """A BundleError naming ``task`` when the bundle records a task config for a task that is not
    one here: the rehearsal would drop its sim-to-sim gate without a word (a typo passed)."""
    from simreal.sim.tasks import TASKS

    if bundle.task_config and bundle.task not in TASKS:
        from simreal.errors import BundleError

        raise BundleError(
            "task",
            f"'{bundle.task}' is no task of this simreal ({', '.join(sorted(TASKS))}); the "
            "bundle records its task config, and the rehearsal compares with that task",
            str(bundle.path),
        )


def training_env(bundle: Bundle, spec: Any) -> Any | None:
    """The bundle's task env as trained, with randomisation, observation noise and action delay
    off (native backend); None for a bundle that records no task config (made by hand); a
    BundleError naming ``task`` when the one it records is not a task here."""
    if not bundle.task_config:
        return None
    from simreal.config import build
    from simreal.input_files import resolve_inputs
    from simreal.sim.env import as_saved
    from simreal.sim.tasks import task_class

    check_task(bundle)
    cls: Any = task_class(bundle.task)  # a task env class (its config_class); task_class says only type
    saved = resolve_inputs(bundle.task_config, bundle.path)  # the clip the bundle carries (simreal.input_files)
    tree = {
        **as_saved(cls.config_class, saved),
        "randomize": False,
        "obs_noise_scale": 0.0,
        "action_delay_steps": [0, 0],
    }
    cfg = build(cls.config_class, tree, prefix="task_config")
    return cls(spec, cfg, backend="native")


def env_start(env: Any, deployment: Any, bundle: Bundle, seed: int) -> StartState:
    """The deployed episode's initial state in the training env (``deployment``: its
    ``env.deployment()``), with the bundle's task inputs."""
    import jax

    from simreal.sim.deployment import deployed_initial

    qpos, qvel, act, task = deployed_initial(env, deployment, jax.random.PRNGKey(seed))
    task = {k: np.asarray(bundle.task_params.get(k, v), np.float64) for k, v in task.items()}
    return StartState(np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), np.asarray(act, np.float64), task)


class NonFiniteAction(Exception):
    """The policy's action in the training env is not finite (at ``t_s`` after the start)."""

    def __init__(self, t_s: float):
        super().__init__(f"the policy's action is not finite in the training simulator at {t_s:.2f} s")
        self.t_s = t_s


def reference_rollout(
    env: Any,
    bundle: Bundle,
    robot: SimRobot,
    start: StartState,
    duration_s: float,
    seed: int = 0,
    ramp: tuple[np.ndarray, float] | None = None,
) -> tuple[Trajectory, float | None]:
    """The ONNX policy in the training env from ``start`` for ``duration_s``: (trajectory, the
    time the episode terminated [s] or None). ``ramp`` = (a0, ramp_s): the action at the tick
    ``t`` after the hand-over is ``(1 - s) a0 + s pi(o)``, ``s = min(1, t / ramp_s)``, with ``a0``
    the initial command as a normalised action (the safety layer's RAMP). A non-finite action
    raises :class:`NonFiniteAction` before it reaches the simulator (MuJoCo would warn into a
    ``MUJOCO_LOG.TXT`` in the working directory and go on with NaN)."""
    import jax
    import jax.numpy as jnp

    from simreal.bundle import OnnxPolicy
    from simreal.deploy.sim_camera import SimCamera

    policy = OnnxPolicy(bundle)
    camera = SimCamera(bundle, env) if bundle.extra_input_shapes else None  # a VLA's images and instruction
    state = env.reset_from(jax.random.PRNGKey(seed), start.qpos, start.qvel, start.act, start.task)
    step = jax.jit(env.step)
    dt = env.ctrl_dt
    samples, ended = [(0.0, robot.state_of(start.qpos, start.qvel))], None
    try:
        for k in range(1, round(duration_s / dt) + 1):
            obs = np.asarray(state.obs)
            extra = None if camera is None else camera.inputs(np.asarray(state.pipeline_state.qpos), start.task)
            action = policy(obs) if extra is None else policy(obs, extra)
            if ramp is not None and ramp[1] > 0:
                blend = min(1.0, (k - 1) * dt / ramp[1])
                action = (1.0 - blend) * ramp[0] + blend * action
            if not np.all(np.isfinite(action)):
                raise NonFiniteAction((k - 1) * dt)
            state = step(state, jnp.asarray(action, jnp.float32))
            if float(state.done) > 0:
                if float(state.info["truncation"]) == 0:
                    ended = k * dt
                break  # the env auto-reset: what follows is another episode
            samples.append(
                (k * dt, robot.state_of(np.asarray(state.pipeline_state.qpos), np.asarray(state.pipeline_state.qvel)))
            )
    finally:
        if camera is not None:
            camera.close()
    return stack(samples), ended


def fall_time(traj: Trajectory) -> float | None:
    """First time the base is below half its start height or tilted past 60 degrees [s]."""
    if "pos_w" not in traj:
        return None
    q = traj["quat_wxyz"]
    up_z = 1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)  # world z of the body's z axis
    fallen = (traj["pos_w"][:, 2] < 0.5 * traj["pos_w"][0, 2]) | (up_z < 0.5)
    return float(traj["t"][np.argmax(fallen)]) if fallen.any() else None


def compare(
    family: str,
    rehearsal: Trajectory,
    reference: Trajectory,
    *,
    settle_s: float = 0.0,
    reference_end_s: float | None = None,
    outcome_s: float = 0.0,
) -> dict[str, Any]:
    """The family's rule applied to two trajectories (reference interpolated at the rehearsal's
    sample times; only the time both cover counts). ``outcome_s``: the time an outcome (a scene
    with an object) is decided at, the task's episode [s]; fewer seconds compared fail."""
    rule = RULES[family]
    t = rehearsal["t"]
    horizon = min(t[-1], reference["t"][-1]) if len(t) else 0.0
    out: dict[str, Any] = {"family": family, "measure": rule.measure, "tolerance": rule.tolerance}
    if rule.falls:
        f_reh, f_ref = fall_time(rehearsal), fall_time(reference) or reference_end_s
        out.update(rehearsal_fall_s=f_reh, reference_fall_s=f_ref)
        first = min(x for x in (f_reh, f_ref, horizon) if x is not None)
        horizon = first
        if f_reh is not None and f_reh < (f_ref if f_ref is not None else np.inf) - FALL_GRACE_S:
            out.update(
                value=None,
                passed=False,
                reason=f"fell at {f_reh:.2f} s, the reference {f'at {f_ref:.2f} s' if f_ref is not None else 'never'}",
            )
            return out
    keep = (t <= horizon + 1e-9) & (t >= (settle_s if rule.measure == "base_pos_max_m" else 0.0))
    if keep.sum() < 2:
        return {**out, "value": None, "passed": False, "reason": "too little overlap to compare"}
    key = "pos_w" if rule.measure == "base_pos_max_m" else "joint_pos"
    ref = _resample(reference, key, t[keep])
    dev = rehearsal[key][keep] - ref
    value = float(np.max(np.linalg.norm(dev, axis=1))) if key == "pos_w" else float(np.sqrt(np.mean(dev**2)))
    out["compared_s"] = float(t[keep][-1] - t[keep][0])
    if rule.align_s > 0:
        out["unaligned"] = value
        dt = max(float(np.median(np.diff(t[keep]))), 1e-6)  # control-rate samples; never 0
        value = aligned_rms(rehearsal[key][keep], ref, round(rule.align_s / dt))
        if rule.object_m > 0 and "object_pos_w" in rehearsal and "object_pos_w" in reference:
            return _outcome(out, rule, rehearsal, reference, t[keep], keep, dev, value, dt, outcome_s)
        out["detail"] = f"unaligned {out['unaligned']:.4f}"
    out.update(value=value, passed=bool(value <= rule.tolerance))
    return out


def _resample(traj: Trajectory, key: str, t: np.ndarray) -> np.ndarray:
    """``traj[key]`` (n, d) linearly interpolated at the times ``t`` [s]."""
    return np.stack([np.interp(t, traj["t"], traj[key][:, j]) for j in range(traj[key].shape[1])], axis=1)


def _outcome(
    out: dict[str, Any],
    rule: Rule,
    rehearsal: Trajectory,
    reference: Trajectory,
    t: np.ndarray,
    keep: np.ndarray,
    dev: np.ndarray,
    path: float,
    dt: float,
    outcome_s: float,
) -> dict[str, Any]:
    """The arm rule in a scene with an object (module docstring): the object's final position,
    the final pose and the aligned path; ``dev`` the joint deviation at the samples ``t``; fewer
    than ``outcome_s`` seconds compared (less three control periods) decide nothing."""
    o = rehearsal["object_pos_w"][keep]
    o_ref = _resample(reference, "object_pos_w", t)
    gap = float(np.linalg.norm(o[-1] - o_ref[-1]))
    final = max(1, round(FINAL_S / dt))
    pose = float(np.sqrt(np.mean(dev[-final:] ** 2)))
    hand = None
    if "ee_pos_w" in rehearsal and "ee_pos_w" in reference:
        ee_dev = rehearsal["ee_pos_w"][keep][-final:] - _resample(reference, "ee_pos_w", t)[-final:]
        hand = float(np.sqrt(np.mean(np.sum(ee_dev**2, axis=1))))
    fails = []
    if out["compared_s"] < outcome_s - 3 * dt:  # the samples both have end a period or two before it
        fails.append(
            f"only {out['compared_s']:.1f} s compared, and the outcome is decided at the end of the "
            f"task's {outcome_s:g} s episode: rehearse for at least that long (--duration)"
        )
    if gap > rule.object_m:
        fails.append(
            f"the object ended {100 * gap:.1f} cm from the reference's "
            f"(lifted {100 * (o[-1, 2] - o[0, 2]):.1f} cm, the reference {100 * (o_ref[-1, 2] - o_ref[0, 2]):.1f})"
        )
    if hand is not None and hand > rule.hand_m:
        fails.append(
            f"the hand ended {100 * hand:.1f} cm from the reference's, RMS over the last {FINAL_S:g} s "
            f"(limit {100 * rule.hand_m:g})"
        )
    elif hand is None and pose > rule.tolerance:
        fails.append(f"the final pose is {pose:.3f} rad RMS from the reference's (limit {rule.tolerance})")
    if path > PATH_SLACK * rule.tolerance:
        fails.append(
            f"the path is {path:.3f} rad RMS from the reference's, time-aligned (limit {PATH_SLACK * rule.tolerance:g})"
        )
    out.update(
        measure="object_final_m",
        tolerance=rule.object_m,
        value=gap,
        final_pose_rad=pose,
        final_hand_m=hand,
        path_aligned_rad=path,
        object_lift_m=[float(o[-1, 2] - o[0, 2]), float(o_ref[-1, 2] - o_ref[0, 2])],
        passed=not fails,
        detail=(f"hand {100 * hand:.2f} cm, " if hand is not None else "")
        + f"final pose {pose:.4f} rad, path {path:.4f} rad aligned, {out['unaligned']:.4f} unaligned, "
        f"at {out['compared_s']:.1f} s",
    )
    if fails:
        out["reason"] = "; ".join(fails)
    return out


def gate(
    env: Any, bundle: Bundle, robot: SimRobot, start: StartState, rehearsal: Trajectory, settle_s: float, start_cfg: Any
) -> dict[str, Any]:
    """Run the reference and compare it with the rehearsal's trajectory (see module docstring);
    ``start_cfg``: the deploy config's ``start`` section (its ramp and initial command)."""
    from simreal.deploy.runner import initial_command, normalised_action

    duration = float(rehearsal["t"][-1]) if len(rehearsal["t"]) else 0.0
    u0 = initial_command(bundle, robot.spec, start_cfg.initial_command, robot.state_of(start.qpos, start.qvel))
    try:
        reference, ended = reference_rollout(
            env, bundle, robot, start, duration, ramp=(normalised_action(bundle, u0), float(start_cfg.ramp_s))
        )
    except NonFiniteAction as e:
        rule = RULES[robot.spec.family]
        return {
            "family": robot.spec.family,
            "measure": rule.measure,
            "tolerance": rule.tolerance,
            "value": None,
            "passed": False,
            "reason": str(e),
        }
    return compare(
        robot.spec.family,
        rehearsal,
        reference,
        settle_s=settle_s,
        reference_end_s=ended,
        outcome_s=env.episode_steps * env.ctrl_dt,
    )


def stack(samples: Sequence[tuple[float, Mapping[str, np.ndarray]]]) -> Trajectory:
    """(t, state) samples -> a trajectory."""
    if not samples:
        return {"t": np.zeros(0)}
    traj = {k: np.stack([s[k] for _, s in samples]) for k in samples[0][1]}
    traj["t"] = np.array([t for t, _ in samples])
    return traj
