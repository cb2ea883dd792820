"""Deploy settings: topics, rate, limits, watchdog and start sequence, resolved from a bundle.

One :class:`DeployConfig` drives every transport. It starts from the bundle (control rate,
action layout) and its robot spec (topics, limits), then a user's YAML overrides it key by
key (``configs/deploy/*.yaml``, ``--config``, ``--deploy-set key=value``, or the generated ROS 2
package's parameters file, which is this same tree under ``ros__parameters``). Unknown
keys, wrong types and out-of-range values raise :class:`ConfigError` naming the key.

:func:`resolve_deploy_config` returns a config with every limit, rate and channel map
spelled out as numbers, so what a robot runs with is readable in one file.

YAML shape (all keys optional except where the robot spec has no default)::

    control_rate_hz: 100.0
    trigger: timer                  # timer: fixed-rate ticks | state: a tick per state message
    state:                          # name -> topic; names come from the robot spec
      odometry: {topic: /cf/odom, type: nav_msgs/msg/Odometry, qos: sensor_data, twist_frame: body}
    command: {topic: /fmu/in/actuator_motors, type: px4_msgs/msg/ActuatorMotors, qos: default,
              channel_map: [0, 1, 2, 3], heartbeat_topic: /fmu/in/offboard_control_mode}
    estop_topic: /simreal/estop
    limits: {low: [...], high: [...], max_rate: [...]}   # physical units, per action channel
    watchdog: {timeout_s: 0.1, latch: true, hold_s: 0.5}   # hold_s: quadrotors with fault.response land
    start: {ramp_s: 0.3, initial_command: hover}         # safe | hover
    max_nan_ticks: 3
    envelope: {geofence_min_m: [-3, -3, -0.5], geofence_max_m: [3, 3, 3], max_tilt_rad: 1.05,
               max_speed_m_s: 4.0, max_body_rate_rad_s: 15.0, joint_margin_rad: .inf}
    fault: {response: land, descent_m_s: 0.5, max_tilt_rad: 0.5, ground_z_m: 0.0,
            touchdown_m: 0.05, timeout_s: 15.0}               # response: safe | land (quadrotors)
    perception:                     # a VLA bundle's cameras and instruction (others: unused)
      image_topics: {front: /simreal/camera/front/image_raw}  # sensor_msgs/msg/Image per bundle camera
      image_qos: sensor_data
      image_timeout_s: 0.5
      instruction_topic: /simreal/instruction               # std_msgs/msg/String (the default when
                                                            # the bundle takes an instruction)
      instruction: ""               # the instruction until one arrives ('': wait for one)
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from simreal.action_modes import action_mode, command_modes
from simreal.config import build, configs_dir, deep_merge, field, to_dict
from simreal.errors import BundleError, ConfigError
from simreal.robot_spec import RobotSpec, load_robot_spec

QOS_PROFILES = ("default", "sensor_data", "reliable", "best_effort")
TRIGGERS = ("timer", "state")
INITIAL_COMMANDS = ("safe", "hover")
FAULT_RESPONSES = ("safe", "land")

#: Command message type -> the action modes it can carry (from the action-mode table).
COMMAND_MODES: dict[str, tuple[str, ...]] = command_modes()
#: State message type -> the robot-state keys it provides.
STATE_PROVIDES: dict[str, tuple[str, ...]] = {
    "nav_msgs/msg/Odometry": ("pos_w", "quat_wxyz", "lin_vel_w", "ang_vel_b"),
    "geometry_msgs/msg/PoseStamped": ("pos_w", "quat_wxyz"),
    "geometry_msgs/msg/TwistStamped": ("lin_vel_w", "ang_vel_b"),
    "sensor_msgs/msg/JointState": ("joint_pos", "joint_vel"),
    "sensor_msgs/msg/Imu": ("quat_wxyz", "ang_vel_b"),
    "geometry_msgs/msg/Twist": ("command",),
    "px4_msgs/msg/VehicleOdometry": ("pos_w", "quat_wxyz", "lin_vel_w", "ang_vel_b"),
}
PX4_HEARTBEAT_TOPIC = "/fmu/in/offboard_control_mode"
#: A pose topic's role -> the robot-state key its position becomes (``robot``: the base, pos_w).
ROLE_KEYS: dict[str, str] = {"robot": "pos_w", "target": "target_pos_w", "object": "object_pos_w"}
#: Roles whose topics are task inputs, held until replaced (not watched for staleness).
INPUT_ROLES = ("target",)


@dataclasses.dataclass(frozen=True)
class StateTopicConfig:
    """A topic the robot publishes and the runner reads."""

    topic: str
    type: str
    qos: str = field("sensor_data", choices=QOS_PROFILES, doc="sensor_data matches reliable and best-effort writers")
    twist_frame: str = field(
        "body", choices=("body", "world"), doc="frame of a twist: nav_msgs/Odometry's is the child (body) frame"
    )
    role: str = field(
        "robot",
        choices=tuple(ROLE_KEYS),
        doc="whose pose a pose message carries: the robot's base, the task's goal "
        "(target_pos_w, an input held until replaced) or a tracked object (object_pos_w)",
    )


@dataclasses.dataclass(frozen=True)
class CommandTopicConfig:
    """The topic the runner publishes commands on."""

    topic: str
    type: str
    qos: str = field("default", choices=QOS_PROFILES)
    channel_map: tuple[int, ...] = field((), doc="message slot of each action channel; () = 0, 1, 2, ...")
    heartbeat_topic: str = field("", doc="PX4 OffboardControlMode topic ('' = none)")
    frame_id: str = field("", doc="header.frame_id of stamped commands")


@dataclasses.dataclass(frozen=True)
class LimitsConfig:
    """Per action channel, physical units. Empty = from the bundle and robot spec; they only tighten."""

    low: tuple[float, ...] = field(())
    high: tuple[float, ...] = field(())
    max_rate: tuple[float, ...] = field((), doc="slew limit per second [unit/s]; inf = none")


@dataclasses.dataclass(frozen=True)
class WatchdogConfig:
    timeout_s: float = field(0.1, min=0.0, doc="state older than this -> safe command [s]")
    latch: bool = field(True, doc="after a trip, stay safe until the e-stop topic is released (false)")
    hold_s: float = field(
        0.0,
        min=0.0,
        max=5.0,
        doc="with fault.response land: after a trip, hover blind this long at most, waiting for "
        "state (then land), before the safe command [s]",
    )


@dataclasses.dataclass(frozen=True)
class StartConfig:
    ramp_s: float = field(0.5, min=0.0, doc="blend from the initial command to the policy over this time [s]")
    initial_command: str = field(
        "safe",
        choices=INITIAL_COMMANDS,
        doc="safe: zero thrust / hold the current joint pose; hover: m g shared by the rotors",
    )


@dataclasses.dataclass(frozen=True)
class EnvelopeConfig:
    """The state envelope (:mod:`simreal.deploy.envelope`); ``.inf`` switches a bound off."""

    geofence_min_m: tuple[float, ...] = field((-np.inf, -np.inf, -np.inf), doc="arena box lower corner, world [m]")
    geofence_max_m: tuple[float, ...] = field((np.inf, np.inf, np.inf), doc="arena box upper corner, world [m]")
    max_tilt_rad: float = field(np.inf, min=0.0, doc="base tilt from upright [rad]")
    max_speed_m_s: float = field(np.inf, min=0.0, doc="base speed [m/s]")
    max_body_rate_rad_s: float = field(np.inf, min=0.0, doc="base angular rate [rad/s]")
    joint_margin_rad: float = field(np.inf, min=0.0, doc="how far a joint may be beyond its spec range [rad]")


@dataclasses.dataclass(frozen=True)
class FaultConfig:
    """What a latched fault (an envelope trip, non-finite actions) puts on the wire: the safe
    command, or for a quadrotor a controlled descent (:mod:`simreal.deploy.landing`) that cuts
    thrust at touchdown. A stale state, an e-stop and a shutdown always give the safe command."""

    response: str = field(
        "safe",
        choices=FAULT_RESPONSES,
        doc="safe: zero thrust / hold the pose; land: quadrotor descent, then zero thrust",
    )
    descent_m_s: float = field(0.5, min=0.05, max=3.0, doc="sink rate while landing [m/s]")
    max_tilt_rad: float = field(0.5, min=0.05, max=1.2, doc="tilt the landing may use to brake [rad]")
    ground_z_m: float = field(0.0, doc="the ground's height in the state's world frame [m]")
    touchdown_m: float = field(0.05, min=0.0, doc="cut thrust below this height above the ground [m]")
    timeout_s: float = field(15.0, min=0.1, doc="cut thrust after this long, landed or not [s]")


#: Default topic of a bundle camera's images (``{camera}``: its name), and of the instruction.
IMAGE_TOPIC = "/simreal/camera/{camera}/image_raw"
INSTRUCTION_TOPIC = "/simreal/instruction"


@dataclasses.dataclass(frozen=True)
class PerceptionConfig:
    """The camera images and instruction a vision-language-action bundle reads (``simreal/deploy/perception.py``)."""

    image_topics: dict[str, str] = field(
        {}, doc="bundle camera -> its sensor_msgs/msg/Image topic (default /simreal/camera/<camera>/image_raw)"
    )
    image_qos: str = field("sensor_data", choices=QOS_PROFILES)
    image_timeout_s: float = field(0.5, min=0.0, doc="an older image stops the policy: safe command [s]")
    instruction_topic: str = field(
        "",
        doc="std_msgs/msg/String topic of the instruction (default, for a bundle "
        "that takes one: /simreal/instruction; '': none)",
    )
    instruction: str = field("", doc="the instruction until one arrives on the topic ('': wait for one)")


@dataclasses.dataclass(frozen=True)
class DeployConfig:
    """Everything a transport needs besides the bundle (see module docstring)."""

    control_rate_hz: float = field(min=1.0, max=10000.0)
    state: dict[str, StateTopicConfig] = field({})
    command: CommandTopicConfig | None = field(None)
    trigger: str = field("timer", choices=TRIGGERS)
    estop_topic: str = field("/simreal/estop")
    limits: LimitsConfig = field(LimitsConfig())
    watchdog: WatchdogConfig = field(WatchdogConfig())
    start: StartConfig = field(StartConfig())
    max_nan_ticks: int = field(3, min=1, doc="consecutive non-finite actions before a latched fault")
    envelope: EnvelopeConfig = field(EnvelopeConfig())
    fault: FaultConfig = field(FaultConfig())
    perception: PerceptionConfig = field(PerceptionConfig())

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_rate_hz


def spec_of_bundle(bundle) -> RobotSpec:
    """The bundle's embedded robot spec (or the shipped one of that name)."""
    from simreal import robot_spec as rs

    if bundle.robot_spec:
        data = dict(bundle.robot_spec)
        data.setdefault("source", f"{bundle.path}/bundle.yaml:robot_spec")
        spec = build(RobotSpec, data, prefix="robot_spec")
        rs._validate(spec, spec.source)
        return spec
    return load_robot_spec(bundle.robot)


def _shipped_twin(spec: RobotSpec) -> tuple[RobotSpec, ...]:
    """The robot spec simreal ships under ``spec``'s name, when it has the same actuators (a
    bundle's embedded copy says where it came from, but that is the bundle's word); empty for a
    robot simreal does not ship."""
    shipped = configs_dir() / "robots" / f"{spec.name}.yaml"
    if not os.path.isfile(shipped):
        return ()
    twin = load_robot_spec(str(shipped))
    return (twin,) if twin.actuator_names == spec.actuator_names else ()


#: Start, watchdog and envelope defaults per robot family (a quadrotor is handed over in the air;
#: envelope bounds in :mod:`simreal.deploy.envelope`).
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    # trigger state: the policy runs as each state message arrives, so the deployed delay is the
    # link's latency, not latency plus up to a control period of sampling (docs/benchmarks-log.md, rehearsals)
    "quadrotor": {
        "trigger": "state",
        "start": {"ramp_s": 0.2, "initial_command": "hover"},
        "watchdog": {"timeout_s": 0.1, "hold_s": 0.5},
        "envelope": {
            "geofence_min_m": [-3.0, -3.0, -0.5],
            "geofence_max_m": [3.0, 3.0, 3.0],
            "max_tilt_rad": 1.0472,
            "max_speed_m_s": 4.0,
            "max_body_rate_rad_s": 15.0,
        },
        "fault": {"response": "land"},
    },
    # a humanoid's ramp is short: a walking policy whose steps are blended with the held pose for
    # 1 s fell 0.6 s after it (9 of 10 rehearsals at 10 ms and 5% drops, 0.5 m/s); over 0.2 s none did
    "humanoid": {
        "start": {"ramp_s": 0.2, "initial_command": "safe"},
        "watchdog": {"timeout_s": 0.1},
        "envelope": {"max_tilt_rad": 1.0, "joint_margin_rad": 0.1},
    },
    "arm": {
        "start": {"ramp_s": 1.0, "initial_command": "safe"},
        "watchdog": {"timeout_s": 0.1},
        "envelope": {"joint_margin_rad": 0.1},
    },
    "classic": {"start": {"ramp_s": 1.0, "initial_command": "safe"}, "watchdog": {"timeout_s": 0.1}},
}


def _default_tree(bundle, spec: RobotSpec) -> dict[str, Any]:
    mode = bundle.action.mode
    cmds = [c for c in spec.ros2.command if c.action_mode in (None, mode)]
    if not cmds:
        valid = ", ".join(f"{c.name} ({c.action_mode})" for c in spec.ros2.command) or "none"
        raise ConfigError(
            "ros2.command",
            f"robot '{spec.name}' has no command topic for action mode '{mode}'; its command topics: {valid}",
            spec.source,
        )
    cmd = next((c for c in cmds if c.action_mode == mode), cmds[0])
    readable = [s for s in spec.ros2.state if _norm(s.type) in STATE_PROVIDES]
    for s in spec.ros2.state:
        if s not in readable:  # e.g. a vendor LowState: the standard topics carry what deploy needs
            warnings.warn(
                f"robot '{spec.name}': state topic '{s.name}' ({s.type}) is not read by deploy "
                f"(it reads {', '.join(STATE_PROVIDES)})",
                stacklevel=3,
            )
    tree: dict[str, Any] = {
        "control_rate_hz": bundle.control_rate_hz,
        "state": {
            **{s.name: {"topic": s.topic, "type": s.type} for s in readable},
            **bundle.task_topics,
        },  # what the task adds: a goal pose, an object's pose
        "command": {"topic": cmd.topic, "type": cmd.type},
        "estop_topic": spec.ros2.estop_topic,
    }
    if cmd.type.startswith("px4_msgs/"):
        tree["command"]["heartbeat_topic"] = PX4_HEARTBEAT_TOPIC
    if bundle.images:
        tree["perception"] = {"image_topics": {im.name: IMAGE_TOPIC.format(camera=im.name) for im in bundle.images}}
    if bundle.instruction is not None:
        tree.setdefault("perception", {})["instruction_topic"] = INSTRUCTION_TOPIC
    return deep_merge(tree, FAMILY_DEFAULTS[spec.family])


def _tighten(user: tuple[float, ...], base: np.ndarray, key: str, tighter) -> np.ndarray:
    if not user:
        return base
    u = np.asarray(user, dtype=np.float64)
    if u.shape != base.shape:
        raise ConfigError(key, f"expected {base.size} values (one per action channel), got {u.size}")
    return tighter(u, base)


def resolve_deploy_config(
    bundle, overrides: Mapping[str, Any] | None = None, spec: RobotSpec | None = None
) -> DeployConfig:
    """Bundle + robot spec defaults, then ``overrides``; limits, rates and maps made explicit."""
    spec = spec or spec_of_bundle(bundle)
    overrides = dict(overrides or {})
    keep = overrides.pop("state_topics", None)
    tree = deep_merge(_default_tree(bundle, spec), overrides)
    if keep is not None:  # the ROS parameters list the state topics explicitly
        tree["state"] = {k: v for k, v in tree.get("state", {}).items() if k in set(keep)}
    cfg = build(DeployConfig, tree, prefix="")
    if cfg.command is None:
        raise ConfigError("command", "missing; set command.topic and command.type")
    if not math.isclose(cfg.control_rate_hz, bundle.control_rate_hz, rel_tol=1e-9):
        # a control step is part of the policy: its action history, its delays in steps, how far
        # one action moves the robot; run at another rate it is another controller
        raise ConfigError(
            "control_rate_hz",
            f"{cfg.control_rate_hz:g} Hz, and the policy was trained at "
            f"{bundle.control_rate_hz:g} Hz; it runs at that rate (retrain the "
            "task at the robot's rate)",
        )
    validate_topics(cfg)
    mode, names = bundle.action.mode, bundle.action.names
    cmd_type = _norm(cfg.command.type)
    if mode not in COMMAND_MODES.get(cmd_type, ()):
        ok = ", ".join(f"{t} ({'/'.join(m)})" for t, m in COMMAND_MODES.items())
        raise ConfigError("command.type", f"'{cfg.command.type}' cannot carry action mode '{mode}'; valid: {ok}")
    table = action_mode(mode)
    problem = table.channel_problem(spec, names)
    if problem is not None:  # before the limits look the channels up
        raise BundleError("action.names", problem, str(bundle.path / "bundle.yaml"))
    lo, hi = np.asarray(bundle.action.low, np.float64), np.asarray(bundle.action.high, np.float64)
    rate = np.full(len(names), np.inf)
    # the bundle's own robot spec, and the one simreal ships under the same name: a bundle (edited,
    # or exported from a loosened spec) cannot widen the limits of the robot it names
    for ref in (spec, *_shipped_twin(spec)):
        s_lo, s_hi = table.spec_limits(ref, names)
        lo, hi = np.maximum(lo, s_lo), np.minimum(hi, s_hi)
        rate = np.minimum(rate, table.default_max_rate(ref, names))
    lo = _tighten(cfg.limits.low, lo, "limits.low", np.maximum)
    hi = _tighten(cfg.limits.high, hi, "limits.high", np.minimum)
    if np.any(lo > hi):
        raise ConfigError("limits", f"empty range after combining bundle, robot spec and config: low {lo} > high {hi}")
    rate = _tighten(cfg.limits.max_rate, rate, "limits.max_rate", np.minimum)
    if np.any(rate <= 0):
        raise ConfigError("limits.max_rate", "must be > 0 (use .inf for no limit)")
    cmap = cfg.command.channel_map or tuple(range(len(names)))
    if len(cmap) != len(names):
        channels = "joints" if table.joint_space else f"{mode} action channels"
        raise ConfigError(
            "command.channel_map",
            f"the config's channel map has {len(cmap)} slots {list(cmap)} for the {len(names)} "
            f"{channels} of robot '{spec.name}' (a config for another robot?); expected "
            f"{len(names)} distinct slot indices, one per channel",
        )
    if sorted(cmap) != sorted(set(cmap)) or min(cmap) < 0:
        raise ConfigError("command.channel_map", f"expected {len(names)} distinct slot indices >= 0, got {list(cmap)}")
    if cmd_type == "px4_msgs/msg/ActuatorMotors" and max(cmap) >= 12:
        raise ConfigError("command.channel_map", "ActuatorMotors has 12 slots (0..11)")
    if cfg.watchdog.timeout_s < 2.0 * cfg.period_s:
        raise ConfigError("watchdog.timeout_s", f"must be at least two control periods ({2 * cfg.period_s:.4g} s)")
    fence = cfg.envelope
    for key in ("geofence_min_m", "geofence_max_m"):
        if len(getattr(fence, key)) != 3:
            raise ConfigError(f"envelope.{key}", f"expected 3 values (x, y, z) [m], got {list(getattr(fence, key))}")
    if any(lo >= hi for lo, hi in zip(fence.geofence_min_m, fence.geofence_max_m)):
        raise ConfigError(
            "envelope.geofence_min_m",
            f"{list(fence.geofence_min_m)} is not below geofence_max_m {list(fence.geofence_max_m)} on every axis",
        )
    cams = [im.name for im in bundle.images]
    for cam in set(cams) ^ set(cfg.perception.image_topics):
        what = "no topic for the bundle's camera" if cam in cams else "not a camera of the bundle"
        raise ConfigError(
            f"perception.image_topics.{cam}", f"{what} (the bundle's cameras: {', '.join(cams) or 'none'})"
        )
    per = cfg.perception
    if bundle.instruction is None and (per.instruction_topic or per.instruction):
        key = "perception.instruction_topic" if per.instruction_topic else "perception.instruction"
        raise ConfigError(key, "the bundle's policy takes no instruction (leave it empty)")
    if bundle.instruction is not None and not (per.instruction_topic or per.instruction):
        raise ConfigError(
            "perception.instruction_topic",
            "the bundle's policy reads an instruction: give a std_msgs/msg/String topic or perception.instruction",
        )
    if cfg.start.initial_command == "hover" and spec.family != "quadrotor":
        raise ConfigError(
            "start.initial_command", f"'hover' is for quadrotors; robot '{spec.name}' is {_a(spec.family)}"
        )
    if cfg.fault.response != "land" and (overrides.get("watchdog") or {}).get("hold_s"):
        raise ConfigError(
            "watchdog.hold_s",
            f"a blind hold waits for state to land with; fault.response is "
            f"'{cfg.fault.response}' (set it to 'land', or leave hold_s out)",
        )
    if cfg.fault.response == "land":
        from simreal.deploy.landing import NEEDS

        if spec.family != "quadrotor" or mode not in ("rotor_thrust", "ctbr"):
            raise ConfigError(
                "fault.response",
                f"'land' flies a quadrotor by rotor thrust or ctbr; robot "
                f"'{spec.name}' is {_a(spec.family)} with action mode '{mode}' "
                "(use 'safe')",
            )
        missing = [k for k in NEEDS if k not in provided_state_keys(cfg)]
        if missing:
            raise ConfigError(
                "fault.response",
                f"'land' needs {', '.join(missing)} from the state topics "
                "(an Odometry topic provides all of them), or use 'safe'",
            )
    return dataclasses.replace(
        cfg,
        limits=LimitsConfig(tuple(lo.tolist()), tuple(hi.tolist()), tuple(rate.tolist())),
        command=dataclasses.replace(cfg.command, channel_map=tuple(cmap)),
        watchdog=cfg.watchdog if cfg.fault.response == "land" else dataclasses.replace(cfg.watchdog, hold_s=0.0),
    )


def _a(noun: str) -> str:
    """``noun`` with its indefinite article, by its first letter (the family names: an arm, a humanoid)."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def provided_state_keys(cfg: DeployConfig) -> set[str]:
    """The robot-state keys the configured state topics provide (a goal or object pose by its role)."""
    keys: set[str] = set()
    for st in cfg.state.values():
        keys.update((ROLE_KEYS[st.role],) if st.role != "robot" else STATE_PROVIDES[_norm(st.type)])
    return keys


def required_message_types(cfg: DeployConfig) -> list[str]:
    """Every ROS 2 message type a runner with this config subscribes to, publishes or builds."""
    assert cfg.command is not None  # a resolved config (resolve_deploy_config refuses one without)
    types = {_norm(st.type) for st in cfg.state.values()} | {_norm(cfg.command.type)}
    if cfg.perception.image_topics:
        types.add("sensor_msgs/msg/Image")
    if cfg.perception.instruction_topic:
        types.add("std_msgs/msg/String")
    if cfg.estop_topic:
        types.add("std_msgs/msg/Bool")
    if cfg.command.heartbeat_topic:
        types.add("px4_msgs/msg/OffboardControlMode")
    if _norm(cfg.command.type) == "trajectory_msgs/msg/JointTrajectory":
        types |= {
            "trajectory_msgs/msg/JointTrajectoryPoint",
            "std_msgs/msg/Header",
            "builtin_interfaces/msg/Time",
            "builtin_interfaces/msg/Duration",
        }
    return sorted(types)


def _norm(name: str) -> str:
    parts = name.strip().split("/")
    return "/".join([parts[0], "msg", parts[1]] if len(parts) == 2 else parts)


def validate_topics(cfg: DeployConfig) -> None:
    """Topic names and message types the runner can decode and encode; errors list valid types."""
    if not cfg.state:
        raise ConfigError("state", "no state topics; the robot spec or config must list at least one")
    for name, st in cfg.state.items():
        if st.role != "robot" and _norm(st.type) != "geometry_msgs/msg/PoseStamped":
            raise ConfigError(
                f"state.{name}.role", f"role '{st.role}' needs a geometry_msgs/msg/PoseStamped topic, not '{st.type}'"
            )
        if _norm(st.type) not in STATE_PROVIDES:
            raise ConfigError(
                f"state.{name}.type", f"unsupported state type '{st.type}'; valid: {', '.join(STATE_PROVIDES)}"
            )
        _check_topic(st.topic, f"state.{name}.topic")
    assert cfg.command is not None  # checked by resolve_deploy_config, the one caller, before this
    if _norm(cfg.command.type) not in COMMAND_MODES:
        raise ConfigError(
            "command.type", f"unsupported command type '{cfg.command.type}'; valid: {', '.join(COMMAND_MODES)}"
        )
    _check_topic(cfg.command.topic, "command.topic")
    if cfg.estop_topic:
        _check_topic(cfg.estop_topic, "estop_topic")
    if cfg.command.heartbeat_topic:
        _check_topic(cfg.command.heartbeat_topic, "command.heartbeat_topic")
    for cam, topic in cfg.perception.image_topics.items():
        _check_topic(topic, f"perception.image_topics.{cam}")
    if cfg.perception.instruction_topic:
        _check_topic(cfg.perception.instruction_topic, "perception.instruction_topic")


def _check_topic(topic: str, key: str) -> None:
    ok = topic.startswith("/") and all(c.isalnum() or c in "/_~{}" for c in topic) and "//" not in topic
    if not ok:
        raise ConfigError(key, f"'{topic}' is not a valid absolute ROS 2 topic name (e.g. /cf/odom)")


def config_to_tree(cfg: DeployConfig) -> dict[str, Any]:
    """A resolved config as plain YAML data (inf written as .inf by PyYAML)."""
    return to_dict(cfg)
