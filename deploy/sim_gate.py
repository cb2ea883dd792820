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
deliberate change the gate is not there to catch; clamps and slew limits are not modelled). Both true-state trajectories are compared from the
hand-over on, at the control rate, by the robot family's rule (:data:`RULES`):

==========  =====================================================  =====================
family      measure                                                 passes when
==========  =====================================================  =====================
quadrotor   max |p_rehearsal(t) - p_reference(t)| after settle_s    <= 0.10 m
arm         RMS over time and joints of q_rehearsal - q_reference   <= 0.05 rad
humanoid    RMS joint deviation before either falls, and the fall   <= 0.10 rad; no fall
            (base below half its start height or tilted past 60 deg)  sooner than 0.5 s before
                                                                    the reference's
classic     RMS joint deviation                                     <= 0.05 rad
==========  =====================================================  =====================

Tolerances are for the rehearsal's default trouble (sensor noise; a run with injected latency
and drops is judged the same way: latency that changes the behaviour beyond them is what the
gate is for). Needs JAX and the task code: it runs on the simulation side only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from simreal.bundle import Bundle
from simreal.deploy.sim_robot import SimRobot, StartState

#: A trajectory: control-rate samples of robot-state keys, t [s] from the hand-over.
Trajectory = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Rule:
    """A family's comparison: which deviation is measured and its tolerance."""

    measure: str            # base_pos_max_m | joint_rms_rad
    tolerance: float
    falls: bool = False     # also compare the time of a fall


RULES: dict[str, Rule] = {
    "quadrotor": Rule("base_pos_max_m", 0.10),
    "arm": Rule("joint_rms_rad", 0.05),
    "humanoid": Rule("joint_rms_rad", 0.10, falls=True),
    "classic": Rule("joint_rms_rad", 0.05),
}
FALL_GRACE_S = 0.5


def training_env(bundle: Bundle, spec: Any) -> Any | None:
    """The bundle's task env as trained, with randomisation, observation noise and action delay
    off (native backend); None for a bundle that records no task config (made by hand)."""
    if not bundle.task_config:
        return None
    from simreal.config import build
    from simreal.sim.tasks import TASKS, task_class

    if bundle.task not in TASKS:
        return None
    cls = task_class(bundle.task)
    tree = {**bundle.task_config, "randomize": False, "obs_noise_scale": 0.0, "action_delay_steps": [0, 0]}
    cfg = build(cls.config_class, tree, prefix="task_config")
    return cls(spec, cfg, backend="native")


def env_start(env: Any, bundle: Bundle, seed: int) -> StartState:
    """The first episode's initial state of the training env, with the bundle's task inputs."""
    import jax

    qpos, qvel, act, task = env.sample_initial(jax.random.PRNGKey(seed))
    task = {k: np.asarray(bundle.task_params.get(k, v), np.float64) for k, v in task.items()}
    return StartState(np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), np.asarray(act, np.float64), task)


def reference_rollout(env: Any, bundle: Bundle, robot: SimRobot, start: StartState, duration_s: float,
                      seed: int = 0, ramp: tuple[np.ndarray, float] | None = None) -> tuple[Trajectory, float | None]:
    """The ONNX policy in the training env from ``start`` for ``duration_s``: (trajectory, the
    time the episode terminated [s] or None). ``ramp`` = (a0, ramp_s): the action at the tick
    ``t`` after the hand-over is ``(1 - s) a0 + s pi(o)``, ``s = min(1, t / ramp_s)``, with ``a0``
    the initial command as a normalised action (the safety layer's RAMP)."""
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
            state = step(state, jnp.asarray(action, jnp.float32))
            if float(state.done) > 0:
                if float(state.info["truncation"]) == 0:
                    ended = k * dt
                break  # the env auto-reset: what follows is another episode
            samples.append((k * dt, robot.state_of(np.asarray(state.pipeline_state.qpos),
                                                   np.asarray(state.pipeline_state.qvel))))
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


def compare(family: str, rehearsal: Trajectory, reference: Trajectory, *, settle_s: float = 0.0,
            reference_end_s: float | None = None) -> dict[str, Any]:
    """The family's rule applied to two trajectories (reference interpolated at the rehearsal's
    sample times; only the time both cover counts)."""
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
            out.update(value=None, passed=False, reason=f"fell at {f_reh:.2f} s, the reference "
                                                        f"{'at %.2f s' % f_ref if f_ref is not None else 'never'}")
            return out
    keep = (t <= horizon + 1e-9) & (t >= (settle_s if rule.measure == "base_pos_max_m" else 0.0))
    if keep.sum() < 2:
        return {**out, "value": None, "passed": False, "reason": "too little overlap to compare"}
    key = "pos_w" if rule.measure == "base_pos_max_m" else "joint_pos"
    ref = np.stack([np.interp(t[keep], reference["t"], reference[key][:, j]) for j in range(reference[key].shape[1])],
                   axis=1)
    dev = rehearsal[key][keep] - ref
    value = float(np.max(np.linalg.norm(dev, axis=1))) if key == "pos_w" else float(np.sqrt(np.mean(dev ** 2)))
    out.update(value=value, compared_s=float(t[keep][-1] - t[keep][0]), passed=bool(value <= rule.tolerance))
    return out


def gate(env: Any, bundle: Bundle, robot: SimRobot, start: StartState, rehearsal: Trajectory,
         settle_s: float, start_cfg: Any) -> dict[str, Any]:
    """Run the reference and compare it with the rehearsal's trajectory (see module docstring);
    ``start_cfg``: the deploy config's ``start`` section (its ramp and initial command)."""
    from simreal.deploy.runner import initial_command, normalised_action

    duration = float(rehearsal["t"][-1]) if len(rehearsal["t"]) else 0.0
    u0 = initial_command(bundle, robot.spec, start_cfg.initial_command, robot.state_of(start.qpos, start.qvel))
    reference, ended = reference_rollout(env, bundle, robot, start, duration,
                                         ramp=(normalised_action(bundle, u0), float(start_cfg.ramp_s)))
    return compare(robot.spec.family, rehearsal, reference, settle_s=settle_s, reference_end_s=ended)


def stack(samples: list[tuple[float, Mapping[str, np.ndarray]]]) -> Trajectory:
    """(t, state) samples -> a trajectory."""
    if not samples:
        return {"t": np.zeros(0)}
    traj = {k: np.stack([s[k] for _, s in samples]) for k in samples[0][1]}
    traj["t"] = np.array([t for t, _ in samples])
    return traj
