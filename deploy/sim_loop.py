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
- sensor noise, Gaussian per reading, scaled by ``noise_scale``: position 2 mm,
  orientation 5 mrad, velocity 1 cm/s, body rate 0.02 rad/s, joints 1 mrad and 0.01 rad/s
  (the hover task's training noise).

Quadrotor hand-over: the vehicle starts in the air at ``target + start_offset_m``, held
there (as a stock flight controller would hover it) with rotors at hover thrust, and is
released when the first command arrives; the clock of the report starts then. The hover
check: from ``settle_s`` after the hand-over on, every true position within
``success_radius_m`` of the target.

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
from typing import Any

import numpy as np

from simreal.config import field
from simreal.robot_spec import RobotSpec

G = 9.81
#: Sensor noise standard deviations at noise_scale 1 (SI units).
NOISE_STD = {"pos_w": 0.002, "rot_rad": 0.005, "lin_vel_w": 0.01, "ang_vel_b": 0.02, "joint_pos": 0.001,
             "joint_vel": 0.01}


@dataclasses.dataclass(frozen=True)
class SimLoopConfig:
    """Rehearsal settings (see module docstring)."""

    duration_s: float = field(10.0, min=0.1, doc="run time after the hand-over [s]")
    latency_ms: float = field(0.0, min=0.0, doc="command (actuation) delay [ms]")
    state_latency_ms: float = field(0.0, min=0.0, doc="state delay [ms]")
    drop: float = field(0.0, min=0.0, max=1.0, doc="message loss probability, each direction")
    noise_scale: float = field(1.0, min=0.0)
    seed: int = 0
    start_offset_m: tuple[float, ...] = field((0.3, -0.2, -0.3), doc="quadrotor start relative to the target [m]")
    start_joint_pos: tuple[float, ...] = field((), doc="joint robots' start pose [rad]; () = the spec's default")
    state_rate_hz: float = field(0.0, min=0.0, doc="state publishing rate; 0 = the control rate")
    settle_s: float = field(2.0, min=0.0)
    success_radius_m: float = field(0.1, min=0.0)
    startup_timeout_s: float = field(20.0, min=1.0, doc="give up if no command arrives [s]")


def _small_rotation(rng: np.random.Generator, std: float) -> np.ndarray:
    """A random unit quaternion (wxyz) of about ``std`` rad."""
    v = rng.normal(0.0, std, 3)
    a = float(np.linalg.norm(v))
    if a < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[math.cos(a / 2)], math.sin(a / 2) * v / a])


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


class SimRobot:
    """The robot's MuJoCo model: physical commands in, true and measured state out. No transport.

    Args:
      spec: the robot spec (its model builder or MJCF).
      mode, names: the action mode and channel names commands arrive in.
      start_pos_w: free-base start position [m] (quadrotors).
    """

    def __init__(self, spec: RobotSpec, mode: str, names: tuple[str, ...], *, start_pos_w: np.ndarray | None = None,
                 start_joint_pos: tuple[float, ...] = ()):
        import mujoco

        from simreal.sim.robots import build_model

        self.mj = mujoco
        self.spec, self.mode, self.names = spec, mode, names
        self.m = build_model(spec)
        self.d = mujoco.MjData(self.m)
        self.free = self.m.njnt > 0 and self.m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
        act_names = [mujoco.mj_id2name(self.m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(self.m.nu)]
        self.act_ids = np.array([act_names.index(n) for n in (names if mode != "ctbr" else act_names)])
        self.hover_thrust = float(spec.physical.get("mass_kg", 0.0)) * G / max(self.m.nu, 1)
        jids = [int(self.m.actuator_trnid[i, 0]) for i in range(self.m.nu)]
        self.joint_qadr = np.array([self.m.jnt_qposadr[j] for j in jids]) if not self.free else np.zeros(0, int)
        self.joint_dadr = np.array([self.m.jnt_dofadr[j] for j in jids]) if not self.free else np.zeros(0, int)
        if self.free:
            self.d.qpos[0:3] = start_pos_w if start_pos_w is not None else self.d.qpos[0:3]
            self.d.qpos[3:7] = [1.0, 0.0, 0.0, 0.0]
            self.d.act[:] = self.hover_thrust
            self.u = np.full(len(self.act_ids), self.hover_thrust)
        else:
            q0 = start_joint_pos or [a.default for a in spec.actuators]
            self.d.qpos[self.joint_qadr] = q0
            self.u = np.asarray(q0, dtype=np.float64)[[spec.actuator_names.index(n) for n in names]]
        mujoco.mj_forward(self.m, self.d)
        self._start_qpos = self.d.qpos.copy()
        self._rate_loop = self._make_rate_loop() if mode == "ctbr" else None
        self._rate_decimation = max(1, round(1.0 / (float(spec.physical.get("rate_controller_hz", 500.0))
                                                     * self.m.opt.timestep)))
        self._steps = 0
        self.apply(self.u)

    def _make_rate_loop(self):
        from simreal.sim.robots import quadrotor_control as qc
        from simreal.sim.robots.crazyflie import ROTOR_SPIN, rotor_positions

        sp = self.spec.physical
        mixer_inv = np.linalg.inv(qc.allocation_matrix(rotor_positions(self.spec), ROTOR_SPIN,
                                                       float(sp["torque_to_thrust_m"])))
        inertia = np.array([sp["ixx_kg_m2"], sp["iyy_kg_m2"], sp["izz_kg_m2"]], dtype=np.float64)
        f_max = np.array([a.effort_limit for a in self.spec.actuators])
        return lambda u, w: qc.rate_control(u[1:4], w, u[0], inertia, mixer_inv, f_max, np)

    def apply(self, u: np.ndarray) -> None:
        """Set the physical command (held until the next one)."""
        self.u = np.asarray(u, dtype=np.float64)
        if self._rate_loop is None:
            self.d.ctrl[self.act_ids] = self.u

    def hold(self) -> None:
        """Keep the robot at its start pose (the hand-over hover); commands are not applied."""
        self.d.qpos[:] = self._start_qpos
        self.d.qvel[:] = 0.0
        if self.free:
            self.d.act[:] = self.hover_thrust
            self.d.ctrl[:] = self.hover_thrust

    def step(self) -> None:
        if self._rate_loop is not None and self._steps % self._rate_decimation == 0:
            self.d.ctrl[:] = self._rate_loop(self.u, self.d.qvel[3:6].copy())
        self.mj.mj_step(self.m, self.d)
        self._steps += 1

    @property
    def time_s(self) -> float:
        return float(self.d.time)

    def true_state(self) -> dict[str, np.ndarray]:
        d = self.d
        if self.free:
            return {"pos_w": d.qpos[0:3].copy(), "quat_wxyz": d.qpos[3:7].copy(), "lin_vel_w": d.qvel[0:3].copy(),
                    "ang_vel_b": d.qvel[3:6].copy()}
        return {"joint_pos": d.qpos[self.joint_qadr].copy(), "joint_vel": d.qvel[self.joint_dadr].copy(),
                "quat_wxyz": np.array([1.0, 0.0, 0.0, 0.0]), "ang_vel_b": np.zeros(3), "pos_w": np.zeros(3),
                "lin_vel_w": np.zeros(3)}

    def measured_state(self, rng: np.random.Generator, scale: float) -> dict[str, np.ndarray]:
        s = self.true_state()
        if scale <= 0:
            return s
        n = {k: v * scale for k, v in NOISE_STD.items()}
        out = dict(s)
        for k in ("pos_w", "lin_vel_w", "ang_vel_b", "joint_pos", "joint_vel"):
            if k in s and s[k].size:
                out[k] = s[k] + rng.normal(0.0, n[k], s[k].shape)
        out["quat_wxyz"] = _qmul(s["quat_wxyz"], _small_rotation(rng, n["rot_rad"]))
        return out


def run_sim_robot(bundle, sim_cfg: SimLoopConfig, *, domain_id: int, overrides: dict[str, Any] | None = None,
                  record: str | Path | None = None, log=None) -> dict[str, Any]:
    """Play the robot over DDS until ``duration_s`` after the hand-over; returns the report."""
    from simreal.deploy.adapters import encode_state
    from simreal.deploy.bag import BagRecorder
    from simreal.deploy.config import resolve_deploy_config, spec_of_bundle
    from simreal.deploy.ros_types import msg_class
    from simreal.deploy.runner import command_codec
    from simreal.deploy.transport_dds import DdsTransport

    spec = spec_of_bundle(bundle)
    cfg = resolve_deploy_config(bundle, overrides, spec)
    act = bundle.action
    target = np.asarray(bundle.task_params.get("target_pos_w", [0.0, 0.0, 1.0]), dtype=np.float64)
    robot = SimRobot(spec, act.mode, act.names, start_pos_w=target + np.asarray(sim_cfg.start_offset_m),
                     start_joint_pos=sim_cfg.start_joint_pos)
    codec = command_codec(bundle, spec, cfg)
    rng = np.random.default_rng(sim_cfg.seed)
    latency_s, state_latency_s = sim_cfg.latency_ms / 1e3, sim_cfg.state_latency_ms / 1e3
    state_period = 1.0 / (sim_cfg.state_rate_hz or cfg.control_rate_hz)
    pending_cmd: collections.deque = collections.deque()   # (due_s, u)
    pending_state: collections.deque = collections.deque()  # (due_s, topic, msg)
    counts = collections.Counter()
    recorder = BagRecorder(record) if record else None

    def on_command(msg: Any, t_rx: float, data: bytes) -> None:
        counts["commands_received"] += 1
        if recorder is not None:
            recorder.write(cfg.command.topic, data, time.time_ns())
        if rng.random() < sim_cfg.drop:
            counts["commands_dropped"] += 1
            return
        u = codec.decode(msg)
        if not np.all(np.isfinite(u)):
            counts["commands_nonfinite"] += 1
            return
        pending_cmd.append((t_rx + latency_s, u))

    with DdsTransport(domain_id) as tr:
        tr.subscribe(cfg.command.topic, cfg.command.type, on_command, "sensor_data")
        pubs = {}
        for st in cfg.state.values():
            pubs[st.topic] = tr.publisher(st.topic, st.type, "default")
            if recorder is not None:
                recorder.add_topic(st.topic, st.type)
        if recorder is not None:
            recorder.add_topic(cfg.command.topic, cfg.command.type)
        t0 = time.monotonic()
        handover_s: float | None = None
        next_pub = 0.0
        errors: list[tuple[float, float]] = []
        applied = 0
        while True:
            now = time.monotonic()
            sim_target = now - t0
            while robot.time_s < sim_target:
                wall_of_step = t0 + robot.time_s
                while pending_cmd and pending_cmd[0][0] <= wall_of_step:
                    _, u = pending_cmd.popleft()
                    robot.apply(u)
                    applied += 1
                    if handover_s is None:
                        handover_s = wall_of_step
                if handover_s is None:
                    robot.hold()
                robot.step()
                if robot.time_s >= next_pub:
                    next_pub += state_period
                    s_true = robot.true_state()
                    if handover_s is not None and robot.free:
                        errors.append((t0 + robot.time_s - handover_s, float(np.linalg.norm(s_true["pos_w"] - target))))
                    s = robot.measured_state(rng, sim_cfg.noise_scale)
                    stamp = time.time_ns()
                    for st in cfg.state.values():
                        counts["states_published"] += 1
                        if rng.random() < sim_cfg.drop:
                            counts["states_dropped"] += 1
                            continue
                        msg = encode_state(st.type, s, stamp, msg_class, joint_names=spec.actuator_names,
                                           twist_frame=st.twist_frame, child_frame_id="base_link")
                        pending_state.append((t0 + robot.time_s + state_latency_s, st.topic, msg))
            now = time.monotonic()
            while pending_state and pending_state[0][0] <= now:
                _, topic, msg = pending_state.popleft()
                data = pubs[topic].publish(msg)
                if recorder is not None:
                    recorder.write(topic, data, time.time_ns())
            if handover_s is not None and now - handover_s >= sim_cfg.duration_s:
                break
            if handover_s is None and now - t0 >= sim_cfg.startup_timeout_s:
                break
            wake = min(t0 + robot.time_s, pending_state[0][0] if pending_state else math.inf,
                       pending_cmd[0][0] if pending_cmd else math.inf)
            tr.poll(max(0.0, min(wake - time.monotonic(), 0.002)))
    if recorder is not None:
        recorder.close()
    report: dict[str, Any] = {
        "robot": spec.name, "action_mode": act.mode, "domain_id": domain_id,
        "config": dataclasses.asdict(sim_cfg), "handover": handover_s is not None,
        "commands_applied": applied, **{k: int(v) for k, v in counts.items()},
        "sim_time_s": robot.time_s,
        "bag": str(record) if record else None,
    }
    if robot.free:
        report["hover"] = hover_metrics(errors, target, sim_cfg)
    else:
        s = robot.true_state()
        report["final_joint_pos"] = s["joint_pos"].tolist()
    return report


def run_offline(bundle, sim_cfg: SimLoopConfig, *, overrides: dict[str, Any] | None = None,
                runner=None) -> dict[str, Any]:
    """The same loop in simulated time, in one process, without DDS: deterministic and fast.

    Messages still go through the ROS 2 types and their CDR bytes both ways, latency is a
    whole number of physics steps and drops use the seeded generator. For tests and for
    tuning; the real-time :func:`run_sim_robot` is the rehearsal.
    """
    from simreal.deploy.adapters import encode_state
    from simreal.deploy.ros_types import msg_class
    from simreal.deploy.runner import PolicyRunner, command_codec

    runner = runner or PolicyRunner(bundle, overrides=overrides, msg_class=msg_class)
    spec, cfg, act = runner.spec, runner.cfg, bundle.action
    target = np.asarray(bundle.task_params.get("target_pos_w", [0.0, 0.0, 1.0]), dtype=np.float64)
    robot = SimRobot(spec, act.mode, act.names, start_pos_w=target + np.asarray(sim_cfg.start_offset_m),
                     start_joint_pos=sim_cfg.start_joint_pos)
    codec = command_codec(bundle, spec, cfg)
    rng = np.random.default_rng(sim_cfg.seed)
    dt = robot.m.opt.timestep
    tick_every = max(1, round(cfg.period_s / dt))
    state_every = max(1, round(1.0 / ((sim_cfg.state_rate_hz or cfg.control_rate_hz) * dt)))
    cmd_delay, state_delay = round(sim_cfg.latency_ms / 1e3 / dt), round(sim_cfg.state_latency_ms / 1e3 / dt)
    pending_cmd: collections.deque = collections.deque()
    pending_state: collections.deque = collections.deque()
    handover, errors, k_end = None, [], None
    k = 0
    while k_end is None or k < k_end:
        t = k * dt
        # The state of time t is published first, so with no injected state latency the tick
        # at t sees it (publishing after the tick would add a hidden control period of delay).
        if k % state_every == 0:
            if handover is not None and robot.free:
                errors.append(((k - handover) * dt, float(np.linalg.norm(robot.true_state()["pos_w"] - target))))
            s = robot.measured_state(rng, sim_cfg.noise_scale)
            for name, st in cfg.state.items():
                if rng.random() >= sim_cfg.drop:
                    msg = encode_state(st.type, s, int(t * 1e9), msg_class, joint_names=spec.actuator_names,
                                       twist_frame=st.twist_frame)
                    pending_state.append((k + state_delay, name, type(msg), msg.serialize()))
        while pending_state and pending_state[0][0] <= k:
            _, name, cls, data = pending_state.popleft()
            runner.on_state(name, cls.deserialize(data), t)
        if k % tick_every == 0:
            res = runner.tick(t)
            for topic, msg in runner.messages(res, int(t * 1e9)):
                if topic == cfg.command.topic and rng.random() >= sim_cfg.drop:
                    pending_cmd.append((k + cmd_delay, codec.decode(type(msg).deserialize(msg.serialize()))))
        while pending_cmd and pending_cmd[0][0] <= k:
            robot.apply(pending_cmd.popleft()[1])
            if handover is None:
                handover, k_end = k, k + round(sim_cfg.duration_s / dt)
        if handover is None:
            robot.hold()
        robot.step()
        k += 1
        if handover is None and k * dt > sim_cfg.startup_timeout_s:
            break
    report: dict[str, Any] = {"robot": spec.name, "runner": runner.snapshot(), "sim_time_s": robot.time_s}
    if robot.free:
        report["hover"] = hover_metrics(errors, target, sim_cfg)
    else:
        report["final_joint_pos"] = robot.true_state()["joint_pos"].tolist()
    return report


def hover_metrics(errors: list[tuple[float, float]], target: np.ndarray, cfg: SimLoopConfig) -> dict[str, Any]:
    """Position error statistics after ``settle_s``; ``passed`` when all within the radius."""
    if not errors:
        return {"target_pos_w": target.tolist(), "passed": False, "reason": "no hand-over"}
    t = np.array([e[0] for e in errors])
    e = np.array([e[1] for e in errors])
    after = e[t >= cfg.settle_s]
    out = {"target_pos_w": target.tolist(), "settle_s": cfg.settle_s, "radius_m": cfg.success_radius_m,
           "flight_s": float(t[-1]), "initial_error_m": float(e[0]), "final_error_m": float(e[-1])}
    if after.size == 0:
        return {**out, "passed": False, "reason": "flight shorter than settle_s"}
    return {**out, "max_error_after_settle_m": float(after.max()), "rmse_after_settle_m": float(np.sqrt(np.mean(after ** 2))),
            "samples_after_settle": int(after.size),
            "passed": bool(after.max() < cfg.success_radius_m and t[-1] >= cfg.duration_s - 0.5)}


def main(argv: list[str] | None = None) -> int:
    """``python -m simreal.deploy.sim_loop BUNDLE --domain-id N --report FILE [...]``."""
    from simreal.config import build
    from simreal.bundle import load_bundle
    from simreal.yaml_io import atomic_write_text, load_yaml

    p = argparse.ArgumentParser(prog="python -m simreal.deploy.sim_loop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle")
    p.add_argument("--domain-id", type=int, required=True)
    p.add_argument("--report", help="write the JSON report here")
    p.add_argument("--record", help="record a rosbag2 (MCAP) folder")
    p.add_argument("--config", help="deploy YAML overrides (same as the runner's)")
    p.add_argument("--sim", default="{}", help="SimLoopConfig as JSON")
    p.add_argument("--rt", action="store_true", help="run under SCHED_FIFO when permitted")
    a = p.parse_args(argv)
    if a.rt:
        from simreal.deploy.transport_dds import try_realtime

        try_realtime()
    overrides = load_yaml(a.config) if a.config else {}
    sim_cfg = build(SimLoopConfig, json.loads(a.sim), prefix="sim")
    report = run_sim_robot(load_bundle(a.bundle), sim_cfg, domain_id=a.domain_id, overrides=overrides,
                           record=a.record)
    text = json.dumps(report, indent=2)
    if a.report:
        atomic_write_text(a.report, text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
