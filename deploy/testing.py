"""Bundles for tests and benchmarks, made without training.

- :func:`make_pd_hover_bundle`: a hand-tuned PD hover controller for a quadrotor, written
  as an ONNX graph with ``onnx.helper``, in the exact bundle format ``simreal export``
  writes (observation terms ``pos_error_w, rot_mat_wb, lin_vel_w, ang_vel_b,
  last_action``; action mode ``rotor_thrust``). It flies the sim-in-the-loop rehearsal
  deterministically, so latency, drops and the watchdog are testable with no policy.
- :func:`make_mlp_bundle`: a randomly initialised MLP (default 2 x 256, tanh) with the
  same interface: the latency benchmark's policy.
- :func:`make_joint_bundle`: a two-joint position-controlled arm (robot spec included)
  for the joint-space paths: JointState + Imu in, Float64MultiArray or JointTrajectory out.

The PD controller (SI units, world ENU, body FLU; ``R`` = R_wb)::

    a_des = kp * clip(e, +-e_max) - kd * v + g z        e = target - p   [m/s^2]
    F = m a_des;  T = F . b3;  b3_des = F / |F|          b3 = R[:, 2]     [N]
    e_R = R^T (b3 x b3_des) - k_psi R[1, 0] z            (tilt + small-angle yaw error)
    tau = J (k_R e_R - k_w omega)                                         [N m]
    f = A^-1 [T, tau]                                    A: X-layout mixer (below)
    a = clip((f - f_max / 2) / (f_max / 2), -1, 1)

Mixer: rotors at (+-d, +-d), d = arm / sqrt 2, Bitcraze order M1 front-right, M2
back-right, M3 back-left, M4 front-left; clockwise M1/M3 push the body's yaw +z with drag
torque k_m f. Written here from the spec's physical constants on purpose, independently of
the simulation's model code, so a convention mismatch between the two shows up as a crash.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simreal.config import to_dict
from simreal.bundle import write_bundle_yaml
from simreal.robot_spec import RobotSpec, load_robot_spec

HOVER_TERMS = (("pos_error_w", 3), ("rot_mat_wb", 9), ("lin_vel_w", 3), ("ang_vel_b", 3), ("last_action", 4))
G = 9.81
OPSET = 17


@dataclasses.dataclass(frozen=True)
class PDHoverGains:
    """Gains of the PD hover controller (see module docstring); [1/s^2] and [1/s]."""

    kp_xy: float = 4.0
    kp_z: float = 6.0
    kd_xy: float = 3.0
    kd_z: float = 4.0
    e_max_m: float = 0.6
    k_r: float = 60.0
    k_w: float = 10.0
    k_yaw: float = 20.0
    k_w_yaw: float = 8.0


def x_mixer(spec: RobotSpec) -> np.ndarray:
    """A (4, 4): rotor thrusts -> (T, tau_x, tau_y, tau_z), X layout in Bitcraze order."""
    d = float(spec.physical["arm_length_m"]) / math.sqrt(2.0)
    km = float(spec.physical["torque_to_thrust_m"])
    xy = np.array([[d, -d], [-d, -d], [-d, d], [d, d]])
    spin = np.array([1.0, -1.0, 1.0, -1.0])
    return np.stack([np.ones(4), xy[:, 1], -xy[:, 0], spin * km])


def pd_hover_reference(obs: np.ndarray, spec: RobotSpec, gains: PDHoverGains = PDHoverGains()) -> np.ndarray:
    """The PD controller in numpy, for checking the ONNX graph: obs (22,) -> a (4,)."""
    g = gains
    m = float(spec.physical["mass_kg"])
    J = np.array([spec.physical[k] for k in ("ixx_kg_m2", "iyy_kg_m2", "izz_kg_m2")], dtype=np.float64)
    f_max = np.array([a.effort_limit for a in spec.actuators])
    e, R, v, w = obs[0:3], obs[3:12].reshape(3, 3), obs[12:15], obs[15:18]
    kp, kd = np.array([g.kp_xy, g.kp_xy, g.kp_z]), np.array([g.kd_xy, g.kd_xy, g.kd_z])
    F = m * (kp * np.clip(e, -g.e_max_m, g.e_max_m) - kd * v + np.array([0, 0, G]))
    b3 = R[:, 2]
    T = F @ b3
    e_r = R.T @ np.cross(b3, F / np.linalg.norm(F)) + np.array([0, 0, -g.k_yaw / g.k_r * R[1, 0]])
    tau = J * (np.array([g.k_r, g.k_r, g.k_r]) * e_r - np.array([g.k_w, g.k_w, g.k_w_yaw]) * w)
    f = np.linalg.solve(x_mixer(spec), np.concatenate([[T], tau]))
    return np.clip((f - f_max / 2) / (f_max / 2), -1.0, 1.0)


def pd_hover_onnx(spec: RobotSpec, gains: PDHoverGains = PDHoverGains()):
    """The PD controller as an ONNX model: ``obs`` (B, 22) -> ``action`` (B, 4)."""
    from onnx import TensorProto, helper, numpy_helper

    g = gains
    m = float(spec.physical["mass_kg"])
    J = np.array([spec.physical[k] for k in ("ixx_kg_m2", "iyy_kg_m2", "izz_kg_m2")])
    f_max = np.array([a.effort_limit for a in spec.actuators])
    inits, nodes = [], []

    def const(name: str, value: Any, dtype=np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(op: str, ins: Sequence[str], out: str, **kw) -> str:
        nodes.append(helper.make_node(op, list(ins), [out], **kw))
        return out

    def select(idx: Sequence[int], sign: float = 1.0) -> np.ndarray:
        s = np.zeros((22, len(idx)), np.float32)
        for j, i in enumerate(idx):
            s[i, j] = sign
        return s

    e = node("Clip", [node("MatMul", ["obs", const("S_e", select([0, 1, 2]))], "e_raw"),
                      const("e_lo", -g.e_max_m), const("e_hi", g.e_max_m)], "e")
    v = node("MatMul", ["obs", const("S_v", select([12, 13, 14]))], "v")
    w = node("MatMul", ["obs", const("S_w", select([15, 16, 17]))], "w")
    b3 = node("MatMul", ["obs", const("S_b3", select([5, 8, 11]))], "b3")
    R = node("Reshape", [node("MatMul", ["obs", const("S_R", select(range(3, 12)))], "R9"),
                         const("shape_R", [-1, 3, 3], np.int64)], "R")
    acc = node("Add", [node("Sub", [node("Mul", [e, const("kp", [g.kp_xy, g.kp_xy, g.kp_z])], "kp_e"),
                                    node("Mul", [v, const("kd", [g.kd_xy, g.kd_xy, g.kd_z])], "kd_v")], "pd"),
                       const("gvec", [0.0, 0.0, G])], "acc")
    F = node("Mul", [acc, const("mass", m)], "F")
    axes = const("axes1", [1], np.int64)
    T = node("ReduceSum", [node("Mul", [F, b3], "Fb3"), axes], "T", keepdims=1)
    normF = node("Sqrt", [node("ReduceSum", [node("Mul", [F, F], "FF"), axes], "FF_sum", keepdims=1)], "normF")
    b3d = node("Div", [F, normF], "b3d")
    yzx, zxy = const("yzx", [1, 2, 0], np.int64), const("zxy", [2, 0, 1], np.int64)
    cross = node("Sub", [
        node("Mul", [node("Gather", [b3, yzx], "a_yzx", axis=1), node("Gather", [b3d, zxy], "b_zxy", axis=1)], "c1"),
        node("Mul", [node("Gather", [b3, zxy], "a_zxy", axis=1), node("Gather", [b3d, yzx], "b_yzx", axis=1)], "c2"),
    ], "cross")
    cross3 = node("Reshape", [cross, const("shape_row", [-1, 1, 3], np.int64)], "cross_row")
    e_tilt = node("Reshape", [node("MatMul", [cross3, R], "RTc_row"), const("shape_flat", [-1, 3], np.int64)], "e_tilt")
    yaw = node("MatMul", ["obs", const("S_yaw", np.pad(select([6], -g.k_yaw / g.k_r), ((0, 0), (2, 0))))], "yaw_err")
    e_r = node("Add", [e_tilt, yaw], "e_r")
    tau = node("Mul", [node("Sub", [node("Mul", [e_r, const("kr", [g.k_r] * 3)], "kr_e"),
                                    node("Mul", [w, const("kw", [g.k_w, g.k_w, g.k_w_yaw])], "kw_w")], "alpha"),
                       const("J", J)], "tau")
    wrench = node("Concat", [T, tau], "wrench", axis=1)
    f = node("MatMul", [wrench, const("Ainv_T", np.linalg.inv(x_mixer(spec)).T)], "f")
    a = node("Div", [node("Sub", [f, const("f_half", f_max / 2)], "f_c"), const("f_half2", f_max / 2)], "a_raw")
    node("Clip", [a, const("a_lo", -1.0), const("a_hi", 1.0)], "action")
    graph = helper.make_graph(nodes, "pd_hover",
                              [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 22])],
                              [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="simreal.testing")
    model.ir_version = 8
    return model


def mlp_onnx(obs_size: int, act_size: int, hidden: Sequence[int] = (256, 256), seed: int = 0):
    """A random tanh MLP as ONNX: ``obs`` (B, obs_size) -> ``action`` (B, act_size) in [-1, 1]."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    sizes = [obs_size, *hidden, act_size]
    inits, nodes, x = [], [], "obs"
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        W = (rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(np.float32)
        b = np.zeros(n_out, np.float32)
        inits += [numpy_helper.from_array(W, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        y = f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"b{i}"], [y + "_lin"]))
        nodes.append(helper.make_node("Tanh", [y + "_lin"], [y if i < len(sizes) - 2 else "action"]))
        x = y
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", obs_size])],
                              [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", act_size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="simreal.testing")
    model.ir_version = 8
    return model


def write_bundle(out_dir: str | Path, *, spec: RobotSpec, model, task: str, obs_terms: Sequence[tuple[str, int]],
                 mode: str, names: Sequence[str], units: Sequence[str], scale: Sequence[float],
                 offset: Sequence[float], low: Sequence[float], high: Sequence[float], control_rate_hz: float,
                 task_params: dict[str, Any] | None = None, extra_provenance: dict[str, Any] | None = None) -> Path:
    """Write ``policy.onnx`` and ``bundle.yaml`` (format_version 1) into ``out_dir``."""
    import onnx

    import simreal

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(d / "policy.onnx"))
    size = sum(n for _, n in obs_terms)
    data = {
        "format_version": 1, "robot": spec.name, "robot_spec": to_dict(spec), "task": task,
        "control_rate_hz": float(control_rate_hz),
        "observation": {"size": size, "terms": [{"name": n, "size": k} for n, k in obs_terms],
                        "normalization": {"mean": [0.0] * size, "std": [1.0] * size, "baked_into_onnx": True}},
        "action": {"mode": mode, "size": len(names), "names": list(names), "units": list(units),
                   "scale": [float(x) for x in scale], "offset": [float(x) for x in offset],
                   "low": [float(x) for x in low], "high": [float(x) for x in high]},
        "latency": {"action_delay_steps": 0, "obs_history": 1},
        "task_params": dict(task_params or {}),
        "onnx": {"file": "policy.onnx", "input": "obs", "output": "action", "opset": OPSET},
        "provenance": {"run_dir": None, "config_hash": None, "git_commit": None, "created_utc": None,
                       "simreal_version": simreal.__version__, "made_by": "simreal.deploy.testing",
                       **(extra_provenance or {})},
    }
    write_bundle_yaml(d, data)
    return d


def _rotor_layout(spec: RobotSpec) -> dict[str, Any]:
    f_max = [a.effort_limit for a in spec.actuators]
    return dict(mode="rotor_thrust", names=spec.actuator_names, units=["N"] * 4, scale=[f / 2 for f in f_max],
                offset=[f / 2 for f in f_max], low=[0.0] * 4, high=f_max)


def make_pd_hover_bundle(out_dir: str | Path, *, robot: str | RobotSpec = "crazyflie2",
                         target_pos_w: Sequence[float] = (0.0, 0.0, 1.0), control_rate_hz: float | None = None,
                         gains: PDHoverGains = PDHoverGains()) -> Path:
    """A PD hover-controller bundle for a quadrotor (see module docstring)."""
    spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
    return write_bundle(out_dir, spec=spec, model=pd_hover_onnx(spec, gains), task="quadrotor-hover",
                        obs_terms=HOVER_TERMS, control_rate_hz=control_rate_hz or spec.control_rate_hz,
                        task_params={"target_pos_w": [float(x) for x in target_pos_w]},
                        extra_provenance={"policy": "pd_hover", "gains": dataclasses.asdict(gains)},
                        **_rotor_layout(spec))


def make_mlp_bundle(out_dir: str | Path, *, robot: str | RobotSpec = "crazyflie2", hidden: Sequence[int] = (256, 256),
                    seed: int = 0, control_rate_hz: float = 500.0,
                    target_pos_w: Sequence[float] = (0.0, 0.0, 1.0)) -> Path:
    """A random-weight MLP hover-interface bundle (latency benchmark policy)."""
    spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
    size = sum(n for _, n in HOVER_TERMS)
    return write_bundle(out_dir, spec=spec, model=mlp_onnx(size, 4, hidden, seed), task="quadrotor-hover",
                        obs_terms=HOVER_TERMS, control_rate_hz=control_rate_hz,
                        task_params={"target_pos_w": [float(x) for x in target_pos_w]},
                        extra_provenance={"policy": f"mlp {list(hidden)} seed {seed}"}, **_rotor_layout(spec))


def joint_robot_spec(command_type: str = "std_msgs/msg/Float64MultiArray") -> RobotSpec:
    """A two-joint arm spec speaking ros2_control topics (no MuJoCo model is needed to run deploy)."""
    from simreal.config import build

    data = {
        "name": "test_arm2", "family": "arm", "model": {"builder": "simreal.deploy.testing:build_test_arm"},
        "control_rate_hz": 50.0,
        "actuators": [
            {"name": "shoulder", "effort_limit": 20.0, "kp": 50.0, "kd": 2.0, "velocity_limit": 2.0,
             "range": [-1.5, 1.5], "default": 0.2},
            {"name": "elbow", "effort_limit": 10.0, "kp": 30.0, "kd": 1.0, "velocity_limit": 3.0,
             "range": [-2.0, 2.0], "default": -0.3},
        ],
        "sensors": ["joint_encoders", "imu"],
        "ros2": {
            "state": [{"name": "joints", "topic": "/joint_states", "type": "sensor_msgs/msg/JointState"},
                      {"name": "imu", "topic": "/imu/data", "type": "sensor_msgs/msg/Imu"}],
            "command": [{"name": "position", "action_mode": "joint_position", "type": command_type,
                         "topic": "/forward_position_controller/commands"
                         if command_type.endswith("Float64MultiArray") else "/joint_trajectory_controller/joint_trajectory"}],
            "estop_topic": "/simreal/estop",
        },
        "source": "simreal.deploy.testing:joint_robot_spec",
    }
    return build(RobotSpec, data)


def build_test_arm(spec: RobotSpec):
    """MjSpec of the two-joint test arm: a fixed base, hinges about z (a horizontal arm), position actuators
    with the spec's kp, kd, effort limits and ranges (the simreal robot-model contract)."""
    import mujoco

    s = mujoco.MjSpec()
    s.modelname = spec.name
    s.compiler.degree = False  # the spec's ranges are radians
    s.option.timestep = 0.002
    body = s.worldbody
    for i, a in enumerate(spec.actuators):
        body = body.add_body(name=f"link{i}", pos=[0, 0, 0.1] if i == 0 else [0.3, 0, 0])
        body.add_joint(name=a.name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 0, 1], range=list(a.range),
                       armature=0.01, damping=0.1)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[0, 0, 0, 0.3, 0, 0], size=[0.03, 0, 0], mass=1.0)
        s.add_actuator(name=a.name, target=a.name, trntype=mujoco.mjtTrn.mjTRN_JOINT,
                       gaintype=mujoco.mjtGain.mjGAIN_FIXED, gainprm=[a.kp] + [0] * 9,
                       biastype=mujoco.mjtBias.mjBIAS_AFFINE, biasprm=[0, -a.kp, -a.kd] + [0] * 7,
                       forcelimited=True, forcerange=[-a.effort_limit, a.effort_limit])
    return s


def make_joint_bundle(out_dir: str | Path, *, command_type: str = "std_msgs/msg/Float64MultiArray",
                      gain: float = 0.5) -> Path:
    """A linear joint-position policy a = -gain * (q - q0) over [joint_pos_rel, joint_vel, gravity_b, last_action]."""
    from onnx import TensorProto, helper, numpy_helper

    spec = joint_robot_spec(command_type)
    terms = (("joint_pos_rel", 2), ("joint_vel", 2), ("gravity_b", 3), ("last_action", 2))
    W = np.zeros((9, 2), np.float32)
    W[0, 0] = W[1, 1] = -gain
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["lin"]), helper.make_node("Tanh", ["lin"], ["action"])],
        "joint_lin", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 9])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", 2])], [numpy_helper.from_array(W, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    defaults = [a.default for a in spec.actuators]
    return write_bundle(out_dir, spec=spec, model=model, task="arm-hold", obs_terms=terms, mode="joint_position",
                        names=spec.actuator_names, units=["rad", "rad"], scale=[0.5, 0.5], offset=defaults,
                        low=[a.range[0] for a in spec.actuators], high=[a.range[1] for a in spec.actuators],
                        control_rate_hz=spec.control_rate_hz)


def random_domain_id() -> int:
    """A random DDS domain for one test (0..232 are valid; 1..99 here, away from ROS's default 0
    and from ``deploy sim``'s 150..230)."""
    import random

    return random.SystemRandom().randint(1, 99)


def make_nan_bundle(out_dir: str | Path, *, robot: str | RobotSpec = "crazyflie2") -> Path:
    """A broken hover policy: NaN actions whenever ``pos_error_w[0] > 0``, else a = 0.1.

    For checking that a non-finite action never reaches the wire.
    """
    from onnx import TensorProto, helper, numpy_helper

    spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
    size = sum(n for _, n in HOVER_TERMS)
    sel = np.zeros((size, 1), np.float32)
    sel[0, 0] = 1.0
    inits = [numpy_helper.from_array(sel, "sel"), numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
             numpy_helper.from_array(np.full((1, 4), np.nan, np.float32), "nan"),
             numpy_helper.from_array(np.full((1, 4), 0.1, np.float32), "ok")]
    nodes = [helper.make_node("MatMul", ["obs", "sel"], ["ex"]), helper.make_node("Greater", ["ex", "zero"], ["bad"]),
             helper.make_node("Where", ["bad", "nan", "ok"], ["action"])]
    graph = helper.make_graph(nodes, "nan_policy", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", size])],
                              [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return write_bundle(out_dir, spec=spec, model=model, task="quadrotor-hover", obs_terms=HOVER_TERMS,
                        control_rate_hz=spec.control_rate_hz, task_params={"target_pos_w": [0.0, 0.0, 1.0]},
                        extra_provenance={"policy": "nan when pos_error_w[0] > 0"}, **_rotor_layout(spec))


class FakeRobot:
    """A robot on DDS for tests and benchmarks: publishes nav_msgs/Odometry, collects commands.

    ``commands`` holds ``(t_rx_monotonic_s, t_rx_wall_ns, msg)`` for every command received.
    """

    def __init__(self, domain_id: int, *, state_topic: str = "/cf/odom",
                 command_topic: str = "/fmu/in/actuator_motors", command_type: str = "px4_msgs/msg/ActuatorMotors",
                 estop_topic: str = "/simreal/estop"):
        import time

        from simreal.deploy.transport_dds import DdsTransport

        self._time = time
        self.transport = DdsTransport(domain_id)
        self.commands: list[tuple[float, int, Any]] = []
        self.transport.subscribe(command_topic, command_type,
                                 lambda m, t, d: self.commands.append((t, time.time_ns(), m)), "reliable")
        self.state_pub = self.transport.publisher(state_topic, "nav_msgs/msg/Odometry", "default")
        self.estop_pub = self.transport.publisher(estop_topic, "std_msgs/msg/Bool", "reliable")
        self.sent_states = 0

    def publish_state(self, pos_w=(0.0, 0.0, 1.0), quat_wxyz=(1.0, 0.0, 0.0, 0.0), lin_vel_w=(0.0, 0.0, 0.0),
                      ang_vel_b=(0.0, 0.0, 0.0)) -> int:
        """Publish one Odometry; returns its stamp [ns, wall clock]."""
        from simreal.deploy.adapters import encode_state
        from simreal.deploy.ros_types import msg_class

        stamp = self._time.time_ns()
        s = {"pos_w": np.asarray(pos_w, float), "quat_wxyz": np.asarray(quat_wxyz, float),
             "lin_vel_w": np.asarray(lin_vel_w, float), "ang_vel_b": np.asarray(ang_vel_b, float)}
        self.state_pub.publish(encode_state("nav_msgs/msg/Odometry", s, stamp, msg_class))
        self.sent_states += 1
        return stamp

    def estop(self, engaged: bool) -> None:
        from simreal.deploy.ros_types import Bool

        self.estop_pub.publish(Bool(data=engaged))

    def wait_for_runner(self, timeout_s: float = 30.0) -> bool:
        """Until the runner's subscription to the state topic is matched."""
        deadline = self._time.monotonic() + timeout_s
        while self._time.monotonic() < deadline:
            if self.state_pub.matched() > 0:
                return True
            self.transport.poll(0.02)
        return False

    def spin(self, seconds: float, rate_hz: float = 0.0, **state) -> None:
        """Poll for commands for ``seconds``; publish state at ``rate_hz`` meanwhile (0 = none)."""
        t_end = self._time.monotonic() + seconds
        next_pub = self._time.monotonic()
        while (now := self._time.monotonic()) < t_end:
            if rate_hz > 0 and now >= next_pub:
                self.publish_state(**state)
                next_pub += 1.0 / rate_hz
            wake = min(t_end, next_pub if rate_hz > 0 else t_end)
            self.transport.poll(max(0.0, wake - self._time.monotonic()))

    def close(self) -> None:
        self.transport.close()


def make_joint_mlp_bundle(out_dir: str | Path, robot: str | RobotSpec, *, hidden: Sequence[int] = (64, 64),
                          seed: int = 0) -> Path:
    """A random MLP joint-position bundle for any joint robot spec (deploy smoke tests).

    Observation: ``joint_pos_rel, joint_vel`` (+ ``gravity_b, ang_vel_b`` when the spec has
    an IMU topic) + ``last_action``; action: every actuator, ``default + 0.25 a``.
    """
    spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
    n = len(spec.actuators)
    terms: list[tuple[str, int]] = [("joint_pos_rel", n), ("joint_vel", n)]
    if any(t.type.endswith("Imu") for t in spec.ros2.state):
        terms += [("gravity_b", 3), ("ang_vel_b", 3)]
    terms.append(("last_action", n))
    size = sum(k for _, k in terms)
    lo = [a.range[0] if a.range else a.default - math.pi for a in spec.actuators]
    hi = [a.range[1] if a.range else a.default + math.pi for a in spec.actuators]
    return write_bundle(out_dir, spec=spec, model=mlp_onnx(size, n, hidden, seed), task=f"{spec.name}-smoke",
                        obs_terms=terms, mode="joint_position", names=spec.actuator_names, units=["rad"] * n,
                        scale=[0.25] * n, offset=[a.default for a in spec.actuators], low=lo, high=hi,
                        control_rate_hz=spec.control_rate_hz)


def make_ctbr_hover_bundle(out_dir: str | Path, *, robot: str | RobotSpec = "crazyflie2") -> Path:
    """An open-loop ``ctbr`` bundle: collective thrust = m g, body rates 0 (a constant policy).

    Exercises the collective-thrust-and-body-rates path: PX4 VehicleRatesSetpoint out, the
    simulated onboard rate loop in; a level vehicle released in still air stays put.
    """
    from onnx import TensorProto, helper, numpy_helper

    spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
    total = sum(a.effort_limit for a in spec.actuators)
    rate = float(spec.physical.get("max_body_rate_rad_s", 10.0))
    hover = float(spec.physical["mass_kg"]) * G
    size = sum(n for _, n in HOVER_TERMS)
    a = np.array([[2.0 * hover / total - 1.0, 0.0, 0.0, 0.0]], np.float32)
    zero = np.zeros((size, 4), np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "zero"], ["z"]), helper.make_node("Add", ["z", "a"], ["action"])],
        "ctbr_hover", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", size])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(zero, "zero"), numpy_helper.from_array(a, "a")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return write_bundle(out_dir, spec=spec, model=model, task="quadrotor-hover", obs_terms=HOVER_TERMS,
                        control_rate_hz=spec.control_rate_hz, task_params={"target_pos_w": [0.0, 0.0, 1.0]},
                        mode="ctbr", names=("thrust", "roll_rate", "pitch_rate", "yaw_rate"),
                        units=("N", "rad/s", "rad/s", "rad/s"), scale=[total / 2, rate, rate, rate],
                        offset=[total / 2, 0.0, 0.0, 0.0], low=[0.0, -rate, -rate, -rate], high=[total, rate, rate, rate])
