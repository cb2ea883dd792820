"""The generated ROS 2 package: complete, valid, and its node runs (against a stand-in rclpy).

Without ROS: the node is exercised in a subprocess with minimal stand-ins for rclpy,
rcl_interfaces and ament_index_python (tests/deploy/test_ros2_rclpy.py runs it under real rclpy,
where the `[ros2]` extra is installed), and message classes that check
field types the way rclpy's generated messages do (a float field refuses an int, a
float32[12] array refuses 11 values). jax, mujoco, cyclonedds and torch are made
unimportable there: the node needs only the deploy runtime.
"""

from __future__ import annotations

import ast
import json
import os
import py_compile
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

pytest.importorskip("onnxruntime")

from fixtures import bundles as T  # noqa: E402
from simreal.bundle import load_bundle  # noqa: E402
from simreal.deploy.config import config_to_tree, resolve_deploy_config  # noqa: E402
from simreal.deploy.ros2_package import generate_ros2_package  # noqa: E402
from simreal.deploy.ros_params import flatten, from_ros_tree  # noqa: E402
from simreal.errors import ConfigError  # noqa: E402

STDLIB = set(sys.stdlib_module_names)
PIP_ONLY = {"simreal"}  # documented in package.xml and README: pip, not rosdep


@pytest.fixture(scope="module")
def hover_pkg(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pkg")
    return generate_ros2_package(T.make_pd_hover_bundle(d / "bundle"), d / "src", name="cf_hover")


@pytest.fixture(scope="module")
def arm_pkg(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("arm")
    bundle = T.make_joint_bundle(d / "bundle", command_type="trajectory_msgs/msg/JointTrajectory")
    return generate_ros2_package(bundle, d / "src")


def imports_of(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            mods.add(node.module.split(".")[0])
    return mods


@pytest.mark.parametrize("which", ["hover_pkg", "arm_pkg"])
def test_package_is_complete_and_valid(which, request):
    root: Path = request.getfixturevalue(which)
    name = root.name
    for rel in (
        "package.xml",
        "setup.py",
        "setup.cfg",
        f"resource/{name}",
        f"{name}/__init__.py",
        f"{name}/policy_node.py",
        f"launch/{name}.launch.py",
        f"config/{name}.yaml",
        "README.md",
        "bundle/bundle.yaml",
        "bundle/policy.onnx",
    ):
        assert (root / rel).is_file(), rel
    for py in root.rglob("*.py"):
        py_compile.compile(str(py), doraise=True)
    # package.xml: format 3, ament_python, and every package the node and launch file import
    xml = ET.parse(root / "package.xml").getroot()
    assert xml.tag == "package" and xml.get("format") == "3" and xml.findtext("name") == name
    assert xml.find("export/build_type").text == "ament_python"
    deps = {e.text for e in xml.findall("exec_depend")}
    imported = imports_of(root / name / "policy_node.py") | imports_of(root / "launch" / f"{name}.launch.py")
    imported -= STDLIB | PIP_ONLY
    assert imported and imported <= deps, imported - deps
    assert {"python3-numpy", "python3-yaml"} <= deps
    # launch file defines generate_launch_description
    launch = ast.parse((root / "launch" / f"{name}.launch.py").read_text())
    assert "generate_launch_description" in {f.name for f in launch.body if isinstance(f, ast.FunctionDef)}
    # setup.py's console script points at policy_node:main, which exists
    setup = ast.parse((root / "setup.py").read_text())
    scripts = [
        ast.literal_eval(e)
        for n in ast.walk(setup)
        if isinstance(n, ast.keyword) and n.arg == "entry_points"
        for e in [n.value]
    ][0]["console_scripts"]
    assert scripts == [f"policy_node = {name}.policy_node:main"]
    node = ast.parse((root / name / "policy_node.py").read_text())
    assert "main" in {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
    assert f'package_name = "{name}"' in (root / "setup.py").read_text()
    assert f"$base/lib/{name}" in (root / "setup.cfg").read_text()


def test_parameters_file_round_trips_to_the_same_config(hover_pkg):
    bundle = load_bundle(hover_pkg / "bundle")
    params = yaml.safe_load((hover_pkg / "config" / "cf_hover.yaml").read_text())
    tree = params["policy_node"]["ros__parameters"]
    assert tree["control_rate_hz"] == 100.0 and tree["watchdog"]["timeout_s"] == 0.1
    assert tree["limits"]["high"] == [0.15] * 4 and tree["command"]["topic"] == "/fmu/in/actuator_motors"
    flat = flatten(tree)
    assert all(not isinstance(v, list) or v for v in flat.values())  # no empty arrays (ROS cannot type them)
    again = resolve_deploy_config(bundle, from_ros_tree(tree))
    assert config_to_tree(again) == config_to_tree(resolve_deploy_config(bundle))


def test_generator_errors(tmp_path):
    b = T.make_pd_hover_bundle(tmp_path / "b")
    with pytest.raises(ConfigError, match="REP 144"):
        generate_ros2_package(b, tmp_path / "src", name="Bad-Name")
    generate_ros2_package(b, tmp_path / "src", name="ok_name")
    with pytest.raises(ConfigError, match="--force"):
        generate_ros2_package(b, tmp_path / "src", name="ok_name")


def test_deploy_ros2_refuses_a_bundle_deploy_run_refuses(tmp_path, capsys):
    """A bundle whose robot is not its robot spec's: no package, the same line as the runner's."""
    from simreal.cli import main

    b = T.make_pd_hover_bundle(tmp_path / "b")
    (b / "bundle.yaml").write_text((b / "bundle.yaml").read_text().replace("robot: crazyflie2", "robot: g1", 1))
    assert main(["deploy", "ros2", str(b), "--out", str(tmp_path / "src")]) == 2
    assert "bundle is for 'g1', the robot spec is 'crazyflie2'" in capsys.readouterr().err
    assert not (tmp_path / "src").exists()


def test_a_humanoid_package_is_named_once_and_says_what_its_robot_speaks(tmp_path):
    """A G1 bundle: ``g1_<task>_policy`` (was ``g1_g1_tracking_policy`` for g1-tracking, and
    ``h1_g1_tracking_policy`` on an H1); its README says the real G1 speaks Unitree's LowCmd, so
    these topics need a bridge (or ``simreal drive --driver unitree``)."""
    import types

    from simreal.deploy.ros2_package import default_package_name

    assert [default_package_name(types.SimpleNamespace(robot=r, task="g1-tracking")) for r in ("g1", "h1")] == [
        "g1_tracking_policy",
        "h1_tracking_policy",
    ]
    assert (
        default_package_name(types.SimpleNamespace(robot="crazyflie2", task="quadrotor-hover"))
        == "crazyflie2_quadrotor_hover_policy"
    )
    pkg = generate_ros2_package(T.make_joint_mlp_bundle(tmp_path / "b", "g1"), tmp_path / "src")
    assert pkg.name == "g1_smoke_policy"
    readme = " ".join((pkg / "README.md").read_text().split())
    assert "A real G1 speaks Unitree's own DDS messages (unitree_hg LowState / LowCmd" in readme
    assert "`simreal drive BUNDLE --driver unitree`" in readme


_FAKE_ROS = r"""
import json, os, signal, sys, types, math, array
import numpy as np
for blocked in ("jax", "jaxlib", "mujoco", "cyclonedds", "torch", "brax", "flax", "mujoco_mjx"):
    sys.modules[blocked] = None
PKG_ROOT, PARAMS_FILE, SCENARIO = sys.argv[1], sys.argv[2], sys.argv[3]

# ---- message classes that type-check like rclpy's generated ones ---------------------------
from rosbags.interfaces import Nodetype
from rosbags.typesys import Stores, get_typestore, get_types_from_msg
ts = get_typestore(Stores.ROS2_JAZZY)
ts.register(get_types_from_msg(PX4["ActuatorMotors"], "px4_msgs/msg/ActuatorMotors"))
ts.register(get_types_from_msg(PX4["VehicleRatesSetpoint"], "px4_msgs/msg/VehicleRatesSetpoint"))
ts.register(get_types_from_msg(PX4["OffboardControlMode"], "px4_msgs/msg/OffboardControlMode"))
INTS = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "byte", "char"}
CLASSES = {}

def check(name, node, desc, v):
    if node == Nodetype.BASE:
        kind = desc[0]
        ok = (isinstance(v, str) if kind == "string" else isinstance(v, bool) if kind == "bool"
              else isinstance(v, float) if kind.startswith("float") else isinstance(v, int) and not isinstance(v, bool))
        assert ok, f"field {name!r} must be {kind}, got {v!r} ({type(v).__name__})"
        return v
    if node == Nodetype.NAME:
        assert type(v).__name__ == desc.split("/")[-1], f"field {name!r} must be {desc}"
        return v
    (sub_node, sub_desc), length = desc
    v = list(v)
    if node == Nodetype.ARRAY:
        assert len(v) == length, f"field {name!r} needs {length} values, got {len(v)}"
    return [check(name, sub_node, sub_desc, x) for x in v]

def default(node, desc):
    if node == Nodetype.BASE:
        k = desc[0]
        return "" if k == "string" else False if k == "bool" else 0.0 if k.startswith("float") else 0
    if node == Nodetype.NAME:
        return msg_cls(desc)()
    (sub_node, sub_desc), length = desc
    return [default(sub_node, sub_desc) for _ in range(length)] if node == Nodetype.ARRAY else []

def msg_cls(typename):
    if typename in CLASSES:
        return CLASSES[typename]
    fields = ts.fielddefs[typename][1]
    def __init__(self, **kw):
        unknown = set(kw) - {f for f, _ in fields}
        assert not unknown, f"{typename} has no fields {unknown}"
        for f, (node, desc) in fields:
            object.__setattr__(self, f, check(f, node, desc, kw[f]) if f in kw else default(node, desc))
    def __setattr__(self, f, v):
        node, desc = dict(fields)[f]
        object.__setattr__(self, f, check(f, node, desc, v))
    cls = type(typename.split("/")[-1], (), {"__init__": __init__, "__setattr__": __setattr__, "_type": typename})
    CLASSES[typename] = cls
    return cls

def module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m

class _LazyMsgs(types.ModuleType):
    def __getattr__(self, cls):
        typename = f"{self.__name__.split('.')[0]}/msg/{cls}"
        if typename not in ts.types:
            raise AttributeError(cls)
        return msg_cls(typename)
for pkg in {t.split("/")[0] for t in ts.types}:
    lazy = _LazyMsgs(f"{pkg}.msg")
    sys.modules[f"{pkg}.msg"] = lazy
    module(pkg).msg = lazy

# ---- rclpy stand-in ------------------------------------------------------------------------
import yaml
OVERRIDES = {}
def _flatten(tree, prefix=""):
    out = {}
    for k, v in tree.items():
        out.update(_flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out
OVERRIDES.update(_flatten(yaml.safe_load(open(PARAMS_FILE))["policy_node"]["ros__parameters"]))

class Param:
    def __init__(self, name, value): self.name, self.value = name, value
class SetParametersResult:
    def __init__(self, successful=True, reason=""): self.successful, self.reason = successful, reason
class ParameterDescriptor:
    def __init__(self, **kw): self.__dict__.update(kw)
class QoSProfile:
    def __init__(self, **kw): self.__dict__.update(kw)
class _E: RELIABLE, BEST_EFFORT, KEEP_LAST = "reliable", "best_effort", "keep_last"
class Pub:
    def __init__(self, cls, topic): self.cls, self.topic, self.sent = cls, topic, []
    def publish(self, msg):
        assert isinstance(msg, self.cls), f"{self.topic}: publishing {type(msg).__name__}, not {self.cls.__name__}"
        self.sent.append(msg)
class Clock:
    def now(self): return types.SimpleNamespace(nanoseconds=1_700_000_000_000_000_000)
class Logger:
    def __init__(self): self.lines = []
    def info(self, m): self.lines.append(("info", m))
    def warn(self, m): self.lines.append(("warn", m))
class Node:
    def __init__(self, name, use_global_arguments=True, automatically_declare_parameters_from_overrides=False):
        self.name, self.params, self.callbacks, self.subs, self.pubs, self.timers = name, {}, [], {}, {}, []
        self.logger = Logger()
        self.params["use_sim_time"] = False  # rclpy declares it on every node
        if automatically_declare_parameters_from_overrides and use_global_arguments:  # every override, as given
            self.params.update(OVERRIDES)
    def list_parameters(self, prefixes, depth):
        return types.SimpleNamespace(names=list(self.params))
    def declare_parameter(self, name, value, descriptor=None):
        assert name not in self.params, f"parameter {name} declared twice"
        self.params[name] = OVERRIDES.get(name, value)
        return Param(name, self.params[name])
    def has_parameter(self, name): return name in self.params
    def get_parameter(self, name): return Param(name, self.params[name])
    def set_parameters(self, params):
        return [cb(params) for cb in self.callbacks][-1]
    def add_on_set_parameters_callback(self, cb): self.callbacks.append(cb)
    def create_subscription(self, cls, topic, cb, qos):
        self.subs[topic] = (cls, cb, qos); return object()
    def create_publisher(self, cls, topic, qos):
        self.pubs[topic] = Pub(cls, topic); return self.pubs[topic]
    def create_timer(self, period, cb):
        self.timers.append((period, cb)); return object()
    def get_clock(self): return Clock()
    def get_logger(self): return self.logger
    def destroy_node(self): pass
rclpy = module("rclpy", init=lambda args=None: None, ok=lambda: True, try_shutdown=lambda: None)
rclpy.node = module("rclpy.node", Node=Node)
rclpy.signals = module("rclpy.signals", SignalHandlerOptions=types.SimpleNamespace(NO="no"))
rclpy.logging = module("rclpy.logging", get_logger=lambda name: Logger())
rclpy.qos = module("rclpy.qos", QoSProfile=QoSProfile, ReliabilityPolicy=_E, HistoryPolicy=_E,
                   qos_profile_sensor_data=QoSProfile(reliability="best_effort", depth=5))
class SingleThreadedExecutor:  # one wait, then Ctrl-C: the node's own handler must end the loop
    def add_node(self, node): self.node = node
    def spin_once(self, timeout_sec=None): os.kill(os.getpid(), signal.SIGINT)
rclpy.executors = module("rclpy.executors",
                         ExternalShutdownException=type("ExternalShutdownException", (Exception,), {}),
                         SingleThreadedExecutor=SingleThreadedExecutor)
module("rcl_interfaces").msg = module("rcl_interfaces.msg", ParameterDescriptor=ParameterDescriptor,
                                      SetParametersResult=SetParametersResult)
module("ament_index_python").packages = module("ament_index_python.packages",
                                               get_package_share_directory=lambda pkg: PKG_ROOT)

# ---- run the generated node ----------------------------------------------------------------
sys.path.insert(0, PKG_ROOT)
import importlib, time
pkg_name = PKG_ROOT.rstrip("/").split("/")[-1]
node_mod = importlib.import_module(f"{pkg_name}.policy_node")
node = node_mod.PolicyNode()
(period, on_timer), = node.timers
out = {"period": period, "subs": {t: [c.__name__, q.__dict__.get("reliability")] for t, (c, _, q) in node.subs.items()},
       "pubs": sorted(node.pubs), "declared": sorted(node.params)}
M = lambda t: msg_cls(t)
def deliver(topic, msg):
    node.subs[topic][1](msg)

if SCENARIO == "hover":
    for k in range(60):
        odom = M("nav_msgs/msg/Odometry")(child_frame_id="base_link")
        odom.pose.pose.position = M("geometry_msgs/msg/Point")(x=0.0, y=0.0, z=0.9)
        odom.pose.pose.orientation = M("geometry_msgs/msg/Quaternion")(w=1.0)  # rclpy's default; rosbags' is 0
        deliver("/cf/odom", odom)
        on_timer()
        time.sleep(0.005)
    cmd = node.pubs["/fmu/in/actuator_motors"].sent
    out["n_cmd"], out["n_heartbeat"] = len(cmd), len(node.pubs["/fmu/in/offboard_control_mode"].sent)
    out["last_control"] = list(cmd[-1].control)
    out["heartbeat_direct"] = node.pubs["/fmu/in/offboard_control_mode"].sent[-1].direct_actuator
    deliver("/simreal/estop", M("std_msgs/msg/Bool")(data=True))
    on_timer()
    out["estop_control"] = list(cmd[-1].control)
elif SCENARIO == "state":
    for k in range(10):
        odom = M("nav_msgs/msg/Odometry")()
        odom.pose.pose.position = M("geometry_msgs/msg/Point")(x=0.0, y=0.0, z=1.0)
        odom.pose.pose.orientation = M("geometry_msgs/msg/Quaternion")(w=1.0)
        deliver("/cf/odom", odom)
        on_timer()  # not stale: the timer does not tick
    out["n_cmd"] = len(node.pubs["/fmu/in/actuator_motors"].sent)
    out["n_heartbeat"] = len(node.pubs["/fmu/in/offboard_control_mode"].sent)
    out["last_control"] = list(node.pubs["/fmu/in/actuator_motors"].sent[-1].control)
    out["estop_control"] = []
else:
    js = M("sensor_msgs/msg/JointState")(name=["elbow", "shoulder"], position=[-0.9, 0.6], velocity=[0.0, 0.0])
    for k in range(5):
        deliver("/joint_states", js)
        deliver("/imu/data", M("sensor_msgs/msg/Imu")())
        on_timer()
    traj = node.pubs["/joint_trajectory_controller/joint_trajectory"].sent
    out["n_cmd"] = len(traj)
    out["joint_names"] = traj[-1].joint_names
    out["positions"] = traj[-1].points[0].positions
res = node.set_parameters([Param("watchdog.timeout_s", 1.0)])
out["set_param_refused"] = (not res.successful) and "restart" in res.reason
node.stop()
out["main_exit_code"] = node_mod.main()  # init (no rclpy signal handlers), node, spin, Ctrl-C, safe command
out["modes"] = [m for lvl, m in node.logger.lines if lvl == "warn"]
print(json.dumps(out))
"""

PX4_TEXT = {
    "ActuatorMotors": "uint64 timestamp\nuint64 timestamp_sample\nuint16 reversible_flags\nfloat32[12] control\n",
    "VehicleRatesSetpoint": "uint64 timestamp\nfloat32 roll\nfloat32 pitch\nfloat32 yaw\nfloat32[3] thrust_body\n"
    "bool reset_integral\n",
    "OffboardControlMode": "uint64 timestamp\nbool position\nbool velocity\nbool acceleration\nbool attitude\n"
    "bool body_rate\nbool thrust_and_torque\nbool direct_actuator\n",
}


def run_node(root: Path, scenario: str, tmp_path: Path) -> dict:
    script = tmp_path / "run_node.py"
    script.write_text(f"PX4 = {PX4_TEXT!r}\n" + textwrap.dedent(_FAKE_ROS))
    params = root / "config" / f"{root.name}.yaml"
    proc = subprocess.run(
        [sys.executable, str(script), str(root), str(params), scenario], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _missing_messages_line(node: Path) -> str:
    # -S: no site-packages, so no rclpy or message package, whatever this environment has installed
    proc = subprocess.run(
        [sys.executable, "-S", str(node)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("[FATAL] [policy_node]: No module named "), err
    return err


def test_a_node_whose_message_packages_are_missing_is_one_fatal_line_exit_2(hover_pkg, arm_pkg):
    """px4_msgs has no wheel and must be built; without it (or without a sourced ROS 2 here) the
    node says so in one line, as a bad parameter, instead of an ImportError traceback. The line
    names the node's own message packages; only a PX4 node's speaks of px4_msgs."""
    err = _missing_messages_line(hover_pkg / "cf_hover" / "policy_node.py")
    assert "(nav_msgs, px4_msgs, std_msgs)" in err and "px4_msgs has no pip wheel" in err
    err = _missing_messages_line(next(arm_pkg.glob("*/policy_node.py")))
    assert "sensor_msgs, std_msgs, trajectory_msgs)" in err and "px4_msgs" not in err


def test_generated_node_runs_the_runner(hover_pkg, tmp_path):
    out = run_node(hover_pkg, "hover", tmp_path)
    assert out["period"] == pytest.approx(0.01)
    assert out["subs"] == {"/cf/odom": ["Odometry", "best_effort"], "/simreal/estop": ["Bool", "reliable"]}
    assert out["pubs"] == ["/fmu/in/actuator_motors", "/fmu/in/offboard_control_mode"]
    assert "watchdog.timeout_s" in out["declared"] and "state.odometry.topic" in out["declared"]
    assert out["n_cmd"] == out["n_heartbeat"] == 60 and out["heartbeat_direct"] is True
    ctrl = out["last_control"]
    assert len(ctrl) == 12 and all(0.4 < c <= 1.0 for c in ctrl[:4]) and ctrl[4:] == [0.0] * 8  # climbing to 1 m
    assert out["estop_control"] == [0.0] * 12
    assert out["set_param_refused"] and out["main_exit_code"] == 0
    assert out["modes"][:2] == ["safety mode: ramp", "safety mode: running"] and "estop" in out["modes"][-1]


def test_generated_node_joint_trajectory(arm_pkg, tmp_path):
    out = run_node(arm_pkg, "arm", tmp_path)
    assert out["n_cmd"] == 5 and out["joint_names"] == ["shoulder", "elbow"]
    assert out["positions"] == pytest.approx([0.6, -0.9], abs=0.2)  # ramping from the measured pose


def test_generated_node_state_trigger(tmp_path):
    root = generate_ros2_package(
        T.make_pd_hover_bundle(tmp_path / "b"), tmp_path / "src", name="cf_fast", overrides={"trigger": "state"}
    )
    out = run_node(root, "state", tmp_path)
    assert out["n_cmd"] == out["n_heartbeat"] == 10  # one command per state message


def test_the_px4_notes_describe_the_message_the_node_sends(hover_pkg, tmp_path):
    """A body-rate (ctbr) package's README described ActuatorMotors and motor indices."""
    ctbr = generate_ros2_package(T.make_ctbr_hover_bundle(tmp_path / "b"), tmp_path / "src", name="cf_rates")
    rates, motors = ((p / "README.md").read_text() for p in (ctbr, hover_pkg))
    assert "`VehicleRatesSetpoint` carries the collective thrust" in rates and "motor index" not in rates
    assert "`ActuatorMotors.control` is rotor thrust" in motors and "VehicleRatesSetpoint" not in motors
