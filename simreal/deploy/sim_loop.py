"""Sim-in-the-loop: a MuJoCo process that plays the robot, in real time, over DDS.

The rehearsal before hardware. This process publishes the robot's state topics and
applies the commands it receives, exactly as the robot's driver would, with injected
trouble; the policy runner in another process (``simreal deploy sim`` starts both) flies
or drives it and cannot tell the difference::

    runner (DdsPolicyNode) <--- state topics (noise, drops, latency) ---  SimRobot (MuJoCo)
                           ---- command topic (drops, latency) -------->

Injected, per the CLI flags:

- ``latency_ms``: every received command is applied this long after it arrived
  (actuation delay); ``state_latency_ms`` delays published state the same way;
- ``drop``: each state message and each command is lost with this probability;
- ``outage_at_s``, ``outage_s``: no state message at all for ``outage_s`` from ``outage_at_s``
  after the hand-over (a motion-capture dropout, a radio link lost for a moment);
- sensor noise, Gaussian per reading, scaled by ``noise_scale``: position 2 mm,
  orientation 5 mrad, velocity 1 cm/s, body rate 0.02 rad/s, joints 1 mrad and 0.01 rad/s
  (the hover task's training noise).

The robot is its family's (:mod:`simreal.deploy.sim_robot`): a quadrotor starts in the air
at ``target + start_offset_m``, held there (as a stock flight controller would hover it) with
rotors at hover thrust; a humanoid or an arm starts where the task's deployed episode starts
(its deployment's ``initial``, :mod:`simreal.sim.deployment`: a tracking clip's first frame)
and is held there (a gantry) until the first command arrives: the hand-over, when the
report's clock starts. A task's goal pose is published on its goal topic, a tracked object's
pose on the object topic; a vision-language-action bundle's camera images (rendered from the
true scene) and the episode's instruction on its perception topics, with every state message
(:mod:`simreal.deploy.sim_camera`).

The report passes when the true state stays inside the deploy config's envelope, a humanoid
does not fall (its base below half its start height or tilted past 60 degrees, ``fall_s``;
whoever drove it, and whatever the envelope's bounds) and every check of the family passes:
the hover check (quadrotors: from ``settle_s`` after the hand-over on, every true position
within ``success_radius_m`` (the task's own unless set: 0.1 m for a hover, 0.15 m for a
figure-8) of the target, or of the bundle's reference target played back at that time), the
task check (a task whose outcome follows from where its episode ended, its deployment
``judged_at_end``: an arm's reach, push or pick judged by the task's own success
rule on the state the rehearsal ended in) and, for a bundle that records its task, the
deploy-side sim-to-sim gate (:mod:`simreal.deploy.sim_gate`: the same policy in the training
env, compared per family).

The ground ends a flight: the quadrotor model has no contacts (nothing to land on), so once
the true base reaches z <= 0 (a landing's touchdown, a fall) it would fall on forever. The
report records when (``on_ground_s``, after the hand-over), the hover check measures only up
to then and fails with "on the ground after X s", and the geofence excess stops there too.

Run by ``simreal deploy sim``; directly: ``python -m simreal.deploy.sim_loop BUNDLE
--domain-id 42 --report report.json``. Needs MuJoCo and ``simreal.sim`` (this is the
simulation side, not the robot's runtime).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simreal.config import field
from simreal.deploy.adapters import encode_state
from simreal.deploy.config import INPUT_ROLES, ROLE_KEYS
from simreal.deploy.realtime import frozen_heap
from simreal.deploy.sim_gate import env_start, fall_time, gate, stack, training_env
from simreal.deploy.sim_robot import FAMILIES, SimRobot, StartState, spec_start, with_joints
from simreal.robot_spec import RobotSpec

if TYPE_CHECKING:
    from simreal.sim.deployment import Deployment


@dataclasses.dataclass(frozen=True)
class SimLoopConfig:
    """Rehearsal settings (see module docstring)."""

    duration_s: float = field(10.0, min=0.1, doc="run time after the hand-over [s]")
    latency_ms: float = field(0.0, min=0.0, max=10_000.0, doc="command (actuation) delay [ms]")
    state_latency_ms: float = field(0.0, min=0.0, max=10_000.0, doc="state delay [ms]")
    drop: float = field(0.0, min=0.0, max=1.0, doc="message loss probability, each direction")
    outage_at_s: float = field(0.0, min=0.0, doc="a state outage starts this long after the hand-over [s]")
    outage_s: float = field(0.0, min=0.0, max=60.0, doc="the outage's length: no state message at all [s]; 0 = none")
    noise_scale: float = field(1.0, min=0.0)
    seed: int = 0
    start_offset_m: tuple[float, ...] = field((0.3, -0.2, -0.3), doc="quadrotor start relative to the target [m]")
    start_joint_pos: tuple[float, ...] = field((), doc="joint robots' start pose [rad]; () = the spec's default")
    state_rate_hz: float = field(0.0, min=0.0, doc="state publishing rate; 0 = the control rate")
    settle_s: float | None = field(
        None,
        min=0.0,
        doc="the flight check judges from this time after the hand-over "
        "[s]; None: the task's settle_time_s (2 s without a task)",
    )
    success_radius_m: float | None = field(
        None, min=0.0, doc="the flight check's radius [m]; None: the task's success_radius_m (0.1 m without a task)"
    )
    startup_timeout_s: float = field(20.0, min=1.0, doc="give up if no command arrives [s]")
    max_command_gap_s: float = field(
        0.5,
        min=0.01,
        doc="after the hand-over, the longest time without a command "
        "the controller may take (PX4's offboard loss is 0.5-1 s) [s]",
    )
    task_params: dict[str, Any] = field(
        {}, doc="task inputs in place of the bundle's task_params (a walking policy's velocity command)"
    )

    def rehearsed(self, bundle: Any) -> Any:
        """``bundle`` with :attr:`task_params` in place of its own (the rehearsed episode's inputs); a
        BundleError naming ``task_params.<key>`` for a key the bundle's task does not take."""
        if not self.task_params:
            return bundle
        for key in self.task_params:
            if key not in bundle.task_params:
                from simreal.errors import BundleError

                raise BundleError(
                    f"task_params.{key}",
                    f"not an input of this bundle's task; it takes: {', '.join(bundle.task_params) or 'none'}",
                    str(bundle.path),
                )
        return bundle.with_task_params(self.task_params)

    def for_task(self, bundle: Any) -> SimLoopConfig:
        """This config with the flight check's settle time and radius resolved: the ones set, else
        the bundle's task's (``settle_time_s``, ``success_radius_m``: a figure-8's 0.15 m, not a
        hover's 0.1), else 2 s and 0.1 m."""
        task = bundle.task_config or {}
        settle = self.settle_s if self.settle_s is not None else float(task.get("settle_time_s", 2.0))
        radius = (
            self.success_radius_m if self.success_radius_m is not None else float(task.get("success_radius_m", 0.1))
        )
        return dataclasses.replace(self, settle_s=settle, success_radius_m=radius)

    def in_outage(self, since_handover_s: float | None) -> bool:
        """Whether state published ``since_handover_s`` after the hand-over (None: before it) is lost
        to the state outage."""
        return (
            since_handover_s is not None
            and 0.0 < self.outage_s
            and self.outage_at_s <= since_handover_s < self.outage_at_s + self.outage_s
        )


@dataclasses.dataclass
class Rehearsal:
    """What both loops share: the robot, where it starts, the hover target and the training env."""

    bundle: Any
    robot: SimRobot
    start: StartState
    target: np.ndarray | None  # quadrotor hover point (a reference's start point) [m]
    env: Any | None  # the task's training env (for the gate), None for hand-made bundles
    deployment: Deployment | None  # its env.deployment(), None without an env
    camera: Any | None = None  # a VLA bundle's cameras and instruction (SimCamera)
    samples: list = dataclasses.field(default_factory=list)  # (t from hand-over [s], true state)

    def target_at(self, t_s: float) -> np.ndarray:
        """The quadrotor's target ``t_s`` after the hand-over: the hover point, or the bundle's
        reference played back (a figure-8)."""
        ref = self.bundle.reference
        if ref is not None and "target_pos_w" in ref.values:
            return ref.at(t_s)["target_pos_w"]
        assert self.target is not None  # report asks only where there is a hover point
        return self.target

    def record(self, t_s: float) -> None:
        self.samples.append((t_s, self.robot.true_state()))

    def messages(self, cfg: Any, s: dict[str, np.ndarray], stamp_ns: int, T: Any) -> list[tuple[str, str, Any]]:
        """(name, topic, message) of every configured state topic for measured state ``s``."""
        out = []
        for name, st in cfg.state.items():
            key = ROLE_KEYS[st.role]
            if st.role != "robot":  # someone else's pose: the task's goal, a tracked object
                pos = self.start.task[key] if st.role in INPUT_ROLES else s[key]
                s_msg = {"pos_w": pos, "quat_wxyz": np.array([1.0, 0.0, 0.0, 0.0])}
            else:
                s_msg = s
            out.append(
                (
                    name,
                    st.topic,
                    encode_state(
                        st.type,
                        s_msg,
                        stamp_ns,
                        T,
                        joint_names=self.robot.spec.actuator_names,
                        twist_frame=st.twist_frame,
                        child_frame_id="base_link",
                    ),
                )
            )
        if self.camera is not None:  # what a camera sees is the true scene, not the measured state
            out += self.camera.messages(cfg, self.robot.d.qpos, self.start.task, stamp_ns, T)
        return out

    def task_outcome(self, deployment: Deployment) -> dict[str, Any]:
        """The task's own success (its ``final_stats``) where the rehearsal ended: an arm's hand, or
        its cube, against the goal (:func:`simreal.sim.deployment.final_outcome`); ``at_s`` after the
        hand-over; ``radius_m``, the task's success radius where it has one."""
        import jax.numpy as jnp
        import mujoco

        from simreal.sim.backends.base import PhysState
        from simreal.sim.deployment import final_outcome
        from simreal.sim.episode_stats import COUNT_SUFFIX

        assert self.env is not None  # only asked where there is a training env (report)
        m, d = self.robot.m, self.robot.d
        mujoco.mj_forward(m, d)  # the sensors (the hand's site) at the final state
        phys = PhysState(*(jnp.asarray(x, jnp.float32) for x in (d.qpos, d.qvel, d.act, d.sensordata)))
        result = final_outcome(self.env, deployment, phys, self.start.task)
        assert result is not None  # asked only where the deployment is judged at its end
        success = result.pop("success") > 0.5
        radius = getattr(self.env.cfg, "success_radius_m", None)
        return {
            "passed": success,
            "at_s": self.samples[-1][0],
            **({} if radius is None else {"radius_m": radius}),
            **{k: v for k, v in result.items() if not k.endswith(COUNT_SUFFIX)},
        }

    def report(self, sim_cfg: SimLoopConfig, fence: Any, start_cfg: Any) -> dict[str, Any]:
        """Family metrics, the hover check (quadrotors), the sim-to-sim gate (task bundles), when
        the true state left the deploy config's envelope and how far the true base went beyond
        its geofence (``fence``: its EnvelopeConfig; ``start_cfg``: its start section, the ramp
        the gate's reference repeats)."""
        from simreal.deploy.envelope import Envelope

        sim_cfg = sim_cfg.for_task(self.bundle)  # the flight check's radius and settle time: the task's
        assert sim_cfg.settle_s is not None  # for_task resolves it
        traj = stack(self.samples)
        out: dict[str, Any] = {
            "family": self.robot.spec.family,
            "sim_time_s": self.robot.time_s,
            "final_state": {k: v[-1].tolist() for k, v in traj.items() if k != "t" and len(v)},
            "diverged_s": self.robot.diverged_s,
        }
        ground = ground_index(traj)
        out["on_ground_s"] = None if ground is None else float(traj["t"][ground])
        if "pos_w" in traj and len(traj["t"]):
            out["geofence"] = geofence_excess(traj, np.asarray(fence.geofence_min_m), np.asarray(fence.geofence_max_m))
        out["envelope"] = envelope_exit(traj, Envelope.from_config(fence, self.robot.spec))
        checks = [out["envelope"]["left_s"] is None, self.robot.diverged_s is None]
        if FAMILIES[self.robot.spec.family].stands and len(traj["t"]):
            out["fall_s"] = fall_time(traj)  # the envelope's tilt bound may be off (.inf): a fall still fails
            checks.append(out["fall_s"] is None)
        if self.target is not None:
            flight = self.samples if ground is None else self.samples[: ground + 1]  # below the ground: no flight
            errors = [(t, float(np.linalg.norm(st["pos_w"] - self.target_at(t)))) for t, st in flight]
            out["hover"] = hover_metrics(errors, self.target, sim_cfg, out["on_ground_s"])
            ref = self.bundle.reference  # a figure-8's targets move with it (:meth:`target_at`)
            out["hover"]["tracks_reference"] = ref is not None and "target_pos_w" in ref.values
            checks.append(out["hover"]["passed"])
        dep = self.deployment
        if dep is not None and dep.judged_at_end and self.samples and self.robot.diverged_s is None:
            out["task"] = self.task_outcome(dep)
            checks.append(out["task"]["passed"])
        if self.env is not None and len(traj["t"]):
            out["gate"] = gate(self.env, self.bundle, self.robot, self.start, traj, sim_cfg.settle_s, start_cfg)
            checks.append(out["gate"]["passed"])
        out["passed"] = bool(self.samples) and all(checks)
        if self.camera is not None:
            self.camera.close()
        return out


def setup(bundle: Any, spec: RobotSpec, sim_cfg: SimLoopConfig) -> Rehearsal:
    """The rehearsal robot for a bundle: the task's scene and deployed episode when the bundle
    records its task (:mod:`simreal.deploy.sim_gate`), else the robot spec's model; a
    quadrotor starts at ``target + start_offset_m``, held at hover until the hand-over."""
    from simreal.sim.robots import build_model

    env = training_env(bundle, spec)
    deployment = env.deployment() if env is not None else None
    model = env.mj_model if env is not None else build_model(spec)
    target = None
    if FAMILIES[spec.family].hover_hold:
        target = np.asarray(bundle.task_params.get("target_pos_w", [0.0, 0.0, 1.0]), dtype=np.float64)
        start = spec_start(model, spec, target + np.asarray(sim_cfg.start_offset_m), ())
        if env is not None:  # the task inputs of the exported episode (a figure-8's parameters)
            start = dataclasses.replace(start, task=env_start(env, deployment, bundle, sim_cfg.seed).task)
    elif env is not None:
        start = env_start(env, deployment, bundle, sim_cfg.seed)
        if sim_cfg.start_joint_pos:
            start = dataclasses.replace(start, qpos=with_joints(model, spec, start.qpos, sim_cfg.start_joint_pos))
    else:
        start = spec_start(model, spec, None, sim_cfg.start_joint_pos)
    camera = None
    if bundle.extra_input_shapes:
        from simreal.deploy.sim_camera import SimCamera

        if env is None:
            from simreal.errors import BundleError

            raise BundleError(
                "task_config",
                "a bundle with camera or instruction inputs is rehearsed in its task's "
                "scene; this bundle records no task config",
                str(bundle.path),
            )
        camera = SimCamera(bundle, env)
    robot = SimRobot(model, spec, bundle.action.mode, bundle.action.names, start)
    return Rehearsal(bundle, robot, start, target, env, deployment, camera)


def run_sim_robot(
    bundle,
    sim_cfg: SimLoopConfig,
    *,
    domain_id: int,
    overrides: dict[str, Any] | None = None,
    record: str | Path | None = None,
) -> dict[str, Any]:
    """Play the robot over DDS until ``duration_s`` after the hand-over; returns the report."""
    from simreal.deploy.bag import BagRecorder
    from simreal.deploy.config import resolve_deploy_config, spec_of_bundle
    from simreal.deploy.ros_types import msg_class
    from simreal.deploy.runner import command_codec
    from simreal.deploy.transport_dds import DdsTransport

    bundle = sim_cfg.rehearsed(bundle)
    spec = spec_of_bundle(bundle)
    cfg = resolve_deploy_config(bundle, overrides, spec)
    command = cfg.command
    assert command is not None  # resolve_deploy_config refuses a config without one
    reh = setup(bundle, spec, sim_cfg)
    robot = reh.robot
    codec = command_codec(bundle, spec, cfg)
    rng = np.random.default_rng(sim_cfg.seed)
    latency_s, state_latency_s = sim_cfg.latency_ms / 1e3, sim_cfg.state_latency_ms / 1e3
    state_period = 1.0 / (sim_cfg.state_rate_hz or cfg.control_rate_hz)
    pending_cmd: collections.deque = collections.deque()  # (due_s, u)
    pending_state: collections.deque = collections.deque()  # (due_s, topic, msg)
    counts: collections.Counter[str] = collections.Counter()
    recorder = BagRecorder(record) if record else None

    gap: dict[str, Any] = {"last_s": None, "max_s": 0.0, "at_s": None}  # commands received after the hand-over
    handover_s: float | None = None

    def on_command(msg: Any, t_rx: float, data: bytes) -> None:
        counts["commands_received"] += 1
        if handover_s is not None:
            _gap(gap, t_rx, handover_s)
        if recorder is not None:
            recorder.write(command.topic, data, time.time_ns())
        if rng.random() < sim_cfg.drop:
            counts["commands_dropped"] += 1
            return
        u = codec.decode(msg)
        if not np.all(np.isfinite(u)):
            counts["commands_nonfinite"] += 1
            return
        pending_cmd.append((t_rx + latency_s, u))

    try:  # a stopped robot process (SIGTERM from deploy sim's Ctrl-C) still closes its bag
        with DdsTransport(domain_id) as tr:
            tr.subscribe(command.topic, command.type, on_command, "sensor_data")
            pubs = {}
            topics = [(st.topic, st.type) for st in cfg.state.values()]
            if reh.camera is not None:
                topics += [(t, "sensor_msgs/msg/Image") for t in cfg.perception.image_topics.values()]
                if cfg.perception.instruction_topic:
                    topics.append((cfg.perception.instruction_topic, "std_msgs/msg/String"))
            for topic, type_name in topics:
                pubs[topic] = tr.publisher(topic, type_name, "default")
                if recorder is not None:
                    recorder.add_topic(topic, type_name)
            if recorder is not None:
                recorder.add_topic(command.topic, command.type)
            with frozen_heap():  # no full garbage collection inside the real-time loop (simreal/deploy/realtime.py)
                t0 = time.monotonic()
                next_pub = 0.0
                applied = 0
                max_lag_s = 0.0
                while True:
                    now = time.monotonic()
                    if handover_s is not None:  # how late this process woke, once a policy drives
                        max_lag_s = max(max_lag_s, now - t0 - robot.time_s)
                    while robot.time_s < now - t0:
                        wall_of_step = t0 + robot.time_s
                        while pending_cmd and pending_cmd[0][0] <= wall_of_step:
                            robot.apply(pending_cmd.popleft()[1])
                            applied += 1
                            if handover_s is None:
                                handover_s = wall_of_step
                        if handover_s is None:
                            robot.hold()
                        robot.step()
                        if robot.diverged_s is not None:  # the rest would replay from MuJoCo's reset
                            break
                        if robot.time_s >= next_pub:
                            next_pub += state_period
                            if handover_s is not None:
                                reh.record(t0 + robot.time_s - handover_s)
                            s = robot.measured_state(rng, sim_cfg.noise_scale)
                            lost = sim_cfg.in_outage(None if handover_s is None else t0 + robot.time_s - handover_s)
                            for _, topic, msg in reh.messages(cfg, s, time.time_ns(), msg_class):
                                counts["states_published"] += 1
                                if lost:
                                    counts["states_lost_to_outage"] += 1
                                    continue
                                if rng.random() < sim_cfg.drop:
                                    counts["states_dropped"] += 1
                                    continue
                                pending_state.append((t0 + robot.time_s + state_latency_s, topic, msg))
                    now = time.monotonic()
                    while pending_state and pending_state[0][0] <= now:
                        _, topic, msg = pending_state.popleft()
                        data = pubs[topic].publish(msg)
                        if recorder is not None:
                            recorder.write(topic, data, time.time_ns())
                    if robot.diverged_s is not None or (
                        handover_s is not None and now - handover_s >= sim_cfg.duration_s
                    ):
                        break
                    if handover_s is None and now - t0 >= sim_cfg.startup_timeout_s:
                        break
                    wake = min(
                        t0 + robot.time_s,
                        pending_state[0][0] if pending_state else math.inf,
                        pending_cmd[0][0] if pending_cmd else math.inf,
                    )
                    tr.poll(max(0.0, min(wake - time.monotonic(), 0.002)))
                # still inside their latency when the run ended: made, never sent (nor recorded)
                counts["states_in_flight_at_end"] = len(pending_state)
    finally:
        if recorder is not None:
            recorder.close()
    report = reh.report(sim_cfg, cfg.envelope, cfg.start)
    if handover_s is not None:
        _gap(gap, now, handover_s)  # the silence before the end counts too
        report["commands"] = {"max_gap_s": round(gap["max_s"], 4), "gap_ends_s": gap["at_s"]}
        report["passed"] = report["passed"] and gap["max_s"] <= sim_cfg.max_command_gap_s
    report["host"] = {"max_lag_s": round(max_lag_s, 4)}
    return {
        "robot": spec.name,
        "action_mode": bundle.action.mode,
        "domain_id": domain_id,
        "config": dataclasses.asdict(sim_cfg),
        "handover": handover_s is not None,
        "commands_applied": applied,
        **{k: int(v) for k, v in counts.items()},
        "bag": str(record) if record else None,
        **report,
    }


def _gap(gap: dict[str, Any], t_s: float, handover_s: float) -> None:
    """Fold a command received at wall time ``t_s`` (or the end of the run) into ``gap``: the
    longest time without a command since the hand-over [s] and when, from the hand-over, it ended."""
    last = handover_s if gap["last_s"] is None else gap["last_s"]
    if t_s - last > gap["max_s"]:
        gap["max_s"], gap["at_s"] = t_s - last, round(t_s - handover_s, 3)
    gap["last_s"] = t_s


def run_offline(
    bundle, sim_cfg: SimLoopConfig, *, overrides: dict[str, Any] | None = None, runner=None
) -> dict[str, Any]:
    """The same loop in simulated time, in one process, without DDS: deterministic and fast.

    Messages still go through the ROS 2 types and their CDR bytes both ways, latency is a
    whole number of physics steps and drops use the seeded generator. For tests and for
    tuning; the real-time :func:`run_sim_robot` is the rehearsal.
    """
    from simreal.deploy.ros_types import msg_class
    from simreal.deploy.runner import PolicyRunner, command_codec

    bundle = sim_cfg.rehearsed(bundle)
    runner = runner or PolicyRunner(bundle, overrides=overrides, msg_class=msg_class)
    spec, cfg = runner.spec, runner.cfg
    reh = setup(bundle, spec, sim_cfg)
    robot = reh.robot
    codec = command_codec(bundle, spec, cfg)
    rng = np.random.default_rng(sim_cfg.seed)
    dt = robot.m.opt.timestep
    tick_every = max(1, round(cfg.period_s / dt))
    state_every = max(1, round(1.0 / ((sim_cfg.state_rate_hz or cfg.control_rate_hz) * dt)))
    cmd_delay, state_delay = round(sim_cfg.latency_ms / 1e3 / dt), round(sim_cfg.state_latency_ms / 1e3 / dt)
    pending_cmd: collections.deque = collections.deque()
    pending_state: collections.deque = collections.deque()
    handover, k_end = None, None
    k = 0
    while k_end is None or k < k_end:
        t = k * dt
        # The state of time t is published first, so with no injected state latency the tick
        # at t sees it (publishing after the tick would add a hidden control period of delay).
        if k % state_every == 0:
            if handover is not None:
                reh.record((k - handover) * dt)
            s = robot.measured_state(rng, sim_cfg.noise_scale)
            lost = sim_cfg.in_outage(None if handover is None else (k - handover) * dt)
            for name, _, msg in reh.messages(cfg, s, int(t * 1e9), msg_class):
                if not lost and rng.random() >= sim_cfg.drop:
                    pending_state.append((k + state_delay, name, type(msg), msg.serialize()))
        while pending_state and pending_state[0][0] <= k:
            _, name, cls, data = pending_state.popleft()
            runner.dispatch(name, cls.deserialize(data), t)
        if k % tick_every == 0:
            res = runner.tick(t)
            for topic, msg in runner.messages(res, int(t * 1e9)):
                if topic == cfg.command.topic and rng.random() >= sim_cfg.drop:
                    pending_cmd.append((k + cmd_delay, codec.decode(type(msg).deserialize(msg.serialize()))))
        while pending_cmd and pending_cmd[0][0] <= k:
            robot.apply(pending_cmd.popleft()[1])
            if handover is None:
                handover, k_end = k, k + round(sim_cfg.duration_s / dt) + 1
        if handover is None:
            robot.hold()
        robot.step()
        k += 1
        if robot.diverged_s is not None or (handover is None and k * dt > sim_cfg.startup_timeout_s):
            break
    report = reh.report(sim_cfg, cfg.envelope, cfg.start)
    report["passed"] = report["passed"] and runner.stats.envelope_trip_s is None  # the envelope tripped
    return {"robot": spec.name, "runner": runner.snapshot(), **report}


def ground_index(traj: dict[str, np.ndarray]) -> int | None:
    """Index of the first sample whose true base is at or below the ground (z <= 0 [m]), or None
    (never, or no free base). The quadrotor model has no contacts, so from there it would fall
    on forever: the flight ends at that sample (module docstring)."""
    if "pos_w" not in traj:
        return None
    below = np.flatnonzero(traj["pos_w"][:, 2] <= 0.0)
    return int(below[0]) if below.size else None


def envelope_exit(traj: dict[str, np.ndarray], envelope: Any) -> dict[str, Any]:
    """When the true state first left ``envelope`` (an :class:`~simreal.deploy.envelope.Envelope`),
    in seconds after the hand-over, and why (its ``violation``); ``left_s`` None when it never did.

    The runner trips its envelope on the measured state, in its own process. This check reads the
    simulation, so a robot that fell over or flew off fails the rehearsal whoever drove it: the
    runner here, a generated ROS 2 node, or the user's own controller (``--external``). It reads
    up to the ground (:func:`ground_index`): a quadrotor's flight ends there."""
    hit = ground_index(traj)
    for i, t in enumerate(traj.get("t", ())[: None if hit is None else hit + 1]):
        why = envelope.violation({k: v[i] for k, v in traj.items() if k != "t"})
        if why is not None:
            return {"left_s": float(t), "reason": why}
    return {"left_s": None, "reason": ""}


def geofence_excess(traj: dict[str, np.ndarray], lo: np.ndarray, hi: np.ndarray) -> dict[str, Any]:
    """The true base's farthest distance outside the box [lo, hi] [m] until it reaches the ground
    (:func:`ground_index`), when it did [s] and its speed then [m/s] (a landing's touchdown, or
    a fall's impact)."""
    p, t = traj["pos_w"], traj["t"]
    hit = ground_index(traj)
    end = len(p) if hit is None else hit + 1
    outside = np.linalg.norm(np.maximum(lo - p[:end], 0.0) + np.maximum(p[:end] - hi, 0.0), axis=1)
    return {
        "max_outside_m": float(outside.max()),
        "ground_s": None if hit is None else float(t[hit]),
        "ground_speed_m_s": None
        if hit is None or "lin_vel_w" not in traj
        else float(np.linalg.norm(traj["lin_vel_w"][hit])),
    }


def hover_metrics(
    errors: list[tuple[float, float]], target: np.ndarray, cfg: SimLoopConfig, ground_s: float | None = None
) -> dict[str, Any]:
    """Position error statistics after ``settle_s`` of the flight's (t [s], error [m]) samples;
    ``passed`` when all within the radius for the whole duration. ``ground_s``: when the base
    reached the ground (the samples end there), which fails the check with that reason."""
    if not errors:
        return {"target_pos_w": target.tolist(), "passed": False, "reason": "no hand-over"}
    t = np.array([e[0] for e in errors])
    e = np.array([e[1] for e in errors])
    after = e[t >= cfg.settle_s]
    out = {
        "target_pos_w": target.tolist(),
        "settle_s": cfg.settle_s,
        "radius_m": cfg.success_radius_m,
        "flight_s": float(t[-1]),
        "initial_error_m": float(e[0]),
        "final_error_m": float(e[-1]),
    }
    if after.size:
        out.update(
            max_error_after_settle_m=float(after.max()),
            rmse_after_settle_m=float(np.sqrt(np.mean(after**2))),
            samples_after_settle=int(after.size),
        )
    if ground_s is not None:
        return {**out, "passed": False, "reason": f"on the ground after {ground_s:.2f} s"}
    if after.size == 0:
        return {**out, "passed": False, "reason": "flight shorter than settle_s"}
    return {**out, "passed": bool(after.max() < cfg.success_radius_m and t[-1] >= cfg.duration_s - 0.5)}


def main(argv: list[str] | None = None) -> int:
    """``python -m simreal.deploy.sim_loop BUNDLE --domain-id N --report FILE [...]``."""
    from simreal.bundle import load_bundle
    from simreal.config import build
    from simreal.stop_signal import interrupt_exit_code, signals_as_interrupt
    from simreal.yaml_io import atomic_write_text, load_yaml

    p = argparse.ArgumentParser(
        prog="python -m simreal.deploy.sim_loop",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("bundle")
    p.add_argument("--domain-id", type=int, required=True)
    p.add_argument("--report", help="write the JSON report here")
    p.add_argument("--record", help="record a rosbag2 (MCAP) folder")
    p.add_argument("--config", help="deploy YAML overrides (same as the runner's)")
    p.add_argument("--sim", default="{}", help="SimLoopConfig as JSON")
    p.add_argument("--rt", action="store_true", help="run under SCHED_FIFO when permitted")
    a = p.parse_args(argv)
    if a.rt:
        from simreal.deploy.realtime import try_realtime

        try_realtime()
    overrides = load_yaml(a.config) if a.config else {}
    sim_cfg = build(SimLoopConfig, json.loads(a.sim), prefix="sim")
    try:
        with signals_as_interrupt():  # SIGTERM ends the run through its finally blocks (the bag is closed)
            report = run_sim_robot(
                load_bundle(a.bundle), sim_cfg, domain_id=a.domain_id, overrides=overrides, record=a.record
            )
    except KeyboardInterrupt as e:
        return interrupt_exit_code(e)
    text = json.dumps(report, indent=2)
    if a.report:
        atomic_write_text(a.report, text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
