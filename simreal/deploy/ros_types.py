"""ROS 2 message types as DDS sees them: the one module of wire definitions.

Each class is a Cyclone DDS ``IdlStruct`` whose type name is the one ROS 2's
``rmw_cyclonedds`` registers (``nav_msgs::msg::dds_::Odometry_``), with the fields,
field order and IDL types of the ROS 2 ``.msg`` file. Written as XCDR1 (plain CDR,
little endian), these are byte-for-byte the messages a ROS 2 node puts on the wire, so a
process that uses them talks to ROS 2 nodes on the same domain with no ROS install
(``tests/deploy/test_dds_wire.py`` checks every type against rosbags' independent ROS 2 CDR
serializer for the Humble and Jazzy type stores).

Why by hand: Cyclone's ``idlc -l py`` could generate these from ROS's ``.idl`` files, but
that needs a ROS install (or vendored ``.idl`` files) and a build step; the types deploy
needs are few and stable, and the rosbags test pins them.

Every field has a ROS-like default so messages construct with keyword arguments the way
``rclpy`` messages do (``Odometry(child_frame_id="cf")``); the runner builds commands
through :func:`msg_class` and never needs to know which transport it feeds.

Constants of the ``.msg`` files (``ActuatorMotors.NUM_CONTROLS``) do not go on the wire
and are kept as plain class attributes where deploy uses them.

px4_msgs layouts are those of PX4's ``px4_msgs`` release/1.15 to release/1.18, which agree for
every message here (compared field by field during development); v1.16's ``MESSAGE_VERSION``
constants do not go on the wire, and each of these is version 0, so its topic has no ``_vN``
suffix. v1.14 differs (``OffboardControlMode`` had one ``actuator`` flag, ``VehicleCommand``'s
``source_component`` was uint8): not supported.
"""

# (no "from __future__ import annotations": cyclonedds resolves field annotations at run time)

import dataclasses
from dataclasses import dataclass, field

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t

from simreal.errors import UnknownNameError

_f64_36 = t.array[t.float64, 36]
_f64_9 = t.array[t.float64, 9]


def _zeros(n: int):
    return field(default_factory=lambda: [0.0] * n)


def _list():
    return field(default_factory=list)


# --- builtin_interfaces ---------------------------------------------------------------


@dataclass
class Time(IdlStruct, typename="builtin_interfaces.msg.dds_.Time_"):
    sec: t.int32 = 0
    nanosec: t.uint32 = 0


@dataclass
class Duration(IdlStruct, typename="builtin_interfaces.msg.dds_.Duration_"):
    sec: t.int32 = 0
    nanosec: t.uint32 = 0


# --- std_msgs -------------------------------------------------------------------------


@dataclass
class Header(IdlStruct, typename="std_msgs.msg.dds_.Header_"):
    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@dataclass
class Bool(IdlStruct, typename="std_msgs.msg.dds_.Bool_"):
    data: bool = False


@dataclass
class String(IdlStruct, typename="std_msgs.msg.dds_.String_"):
    data: str = ""


@dataclass
class MultiArrayDimension(IdlStruct, typename="std_msgs.msg.dds_.MultiArrayDimension_"):
    label: str = ""
    size: t.uint32 = 0
    stride: t.uint32 = 0


@dataclass
class MultiArrayLayout(IdlStruct, typename="std_msgs.msg.dds_.MultiArrayLayout_"):
    dim: t.sequence[MultiArrayDimension] = _list()
    data_offset: t.uint32 = 0


@dataclass
class Float64MultiArray(IdlStruct, typename="std_msgs.msg.dds_.Float64MultiArray_"):
    layout: MultiArrayLayout = field(default_factory=MultiArrayLayout)
    data: t.sequence[t.float64] = _list()


# --- geometry_msgs --------------------------------------------------------------------


@dataclass
class Vector3(IdlStruct, typename="geometry_msgs.msg.dds_.Vector3_"):
    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@dataclass
class Point(IdlStruct, typename="geometry_msgs.msg.dds_.Point_"):
    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@dataclass
class Quaternion(IdlStruct, typename="geometry_msgs.msg.dds_.Quaternion_"):
    """xyzw, as ROS orders it (simreal is wxyz inside; convert at the edge)."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0
    w: t.float64 = 1.0


@dataclass
class Pose(IdlStruct, typename="geometry_msgs.msg.dds_.Pose_"):
    position: Point = field(default_factory=Point)
    orientation: Quaternion = field(default_factory=Quaternion)


@dataclass
class Twist(IdlStruct, typename="geometry_msgs.msg.dds_.Twist_"):
    linear: Vector3 = field(default_factory=Vector3)
    angular: Vector3 = field(default_factory=Vector3)


@dataclass
class PoseStamped(IdlStruct, typename="geometry_msgs.msg.dds_.PoseStamped_"):
    header: Header = field(default_factory=Header)
    pose: Pose = field(default_factory=Pose)


@dataclass
class TwistStamped(IdlStruct, typename="geometry_msgs.msg.dds_.TwistStamped_"):
    header: Header = field(default_factory=Header)
    twist: Twist = field(default_factory=Twist)


@dataclass
class PoseWithCovariance(IdlStruct, typename="geometry_msgs.msg.dds_.PoseWithCovariance_"):
    pose: Pose = field(default_factory=Pose)
    covariance: _f64_36 = _zeros(36)


@dataclass
class TwistWithCovariance(IdlStruct, typename="geometry_msgs.msg.dds_.TwistWithCovariance_"):
    twist: Twist = field(default_factory=Twist)
    covariance: _f64_36 = _zeros(36)


# --- nav_msgs -------------------------------------------------------------------------


@dataclass
class Odometry(IdlStruct, typename="nav_msgs.msg.dds_.Odometry_"):
    """Pose in ``header.frame_id``; twist in ``child_frame_id`` (the body), per nav_msgs."""

    header: Header = field(default_factory=Header)
    child_frame_id: str = ""
    pose: PoseWithCovariance = field(default_factory=PoseWithCovariance)
    twist: TwistWithCovariance = field(default_factory=TwistWithCovariance)


# --- sensor_msgs ----------------------------------------------------------------------


@dataclass
class JointState(IdlStruct, typename="sensor_msgs.msg.dds_.JointState_"):
    header: Header = field(default_factory=Header)
    name: t.sequence[str] = _list()
    position: t.sequence[t.float64] = _list()
    velocity: t.sequence[t.float64] = _list()
    effort: t.sequence[t.float64] = _list()


@dataclass
class Image(IdlStruct, typename="sensor_msgs.msg.dds_.Image_"):
    header: Header = field(default_factory=Header)
    height: t.uint32 = 0
    width: t.uint32 = 0
    encoding: str = ""
    is_bigendian: t.uint8 = 0
    step: t.uint32 = 0
    data: t.sequence[t.uint8] = _list()  # bytes serialise too (one copy, not a list of ints)


@dataclass
class Imu(IdlStruct, typename="sensor_msgs.msg.dds_.Imu_"):
    header: Header = field(default_factory=Header)
    orientation: Quaternion = field(default_factory=Quaternion)
    orientation_covariance: _f64_9 = _zeros(9)
    angular_velocity: Vector3 = field(default_factory=Vector3)
    angular_velocity_covariance: _f64_9 = _zeros(9)
    linear_acceleration: Vector3 = field(default_factory=Vector3)
    linear_acceleration_covariance: _f64_9 = _zeros(9)


# --- trajectory_msgs ------------------------------------------------------------------


@dataclass
class JointTrajectoryPoint(IdlStruct, typename="trajectory_msgs.msg.dds_.JointTrajectoryPoint_"):
    positions: t.sequence[t.float64] = _list()
    velocities: t.sequence[t.float64] = _list()
    accelerations: t.sequence[t.float64] = _list()
    effort: t.sequence[t.float64] = _list()
    time_from_start: Duration = field(default_factory=Duration)


@dataclass
class JointTrajectory(IdlStruct, typename="trajectory_msgs.msg.dds_.JointTrajectory_"):
    header: Header = field(default_factory=Header)
    joint_names: t.sequence[str] = _list()
    points: t.sequence[JointTrajectoryPoint] = _list()


# --- px4_msgs (PX4 v1.15 - v1.18, uXRCE-DDS bridge; the layouts of these did not change) ----


@dataclass
class ActuatorMotors(IdlStruct, typename="px4_msgs.msg.dds_.ActuatorMotors_"):
    """Direct motor control; ``control`` in [-1, 1] (0..1 for one-way motors), NaN = motor off."""

    timestamp: t.uint64 = 0
    timestamp_sample: t.uint64 = 0
    reversible_flags: t.uint16 = 0
    control: t.array[t.float32, 12] = _zeros(12)

    NUM_CONTROLS = 12  # a .msg constant; not on the wire (no annotation: not a field)


@dataclass
class VehicleRatesSetpoint(IdlStruct, typename="px4_msgs.msg.dds_.VehicleRatesSetpoint_"):
    """Body rates in FRD [rad/s]; ``thrust_body`` normalised in body FRD (z = -throttle)."""

    timestamp: t.uint64 = 0
    roll: t.float32 = 0.0
    pitch: t.float32 = 0.0
    yaw: t.float32 = 0.0
    thrust_body: t.array[t.float32, 3] = _zeros(3)
    reset_integral: bool = False


@dataclass
class OffboardControlMode(IdlStruct, typename="px4_msgs.msg.dds_.OffboardControlMode_"):
    """The heartbeat PX4 needs (> 2 Hz) to stay in offboard mode; one flag per setpoint kind."""

    timestamp: t.uint64 = 0
    position: bool = False
    velocity: bool = False
    acceleration: bool = False
    attitude: bool = False
    body_rate: bool = False
    thrust_and_torque: bool = False
    direct_actuator: bool = False


@dataclass
class VehicleOdometry(IdlStruct, typename="px4_msgs.msg.dds_.VehicleOdometry_"):
    """PX4's estimate (``/fmu/out/vehicle_odometry``): position and velocity in ``pose_frame`` /
    ``velocity_frame`` (1 = NED), ``q`` body FRD to that frame (wxyz), body FRD rates."""

    timestamp: t.uint64 = 0
    timestamp_sample: t.uint64 = 0
    pose_frame: t.uint8 = 0
    position: t.array[t.float32, 3] = _zeros(3)
    q: t.array[t.float32, 4] = _zeros(4)
    velocity_frame: t.uint8 = 0
    velocity: t.array[t.float32, 3] = _zeros(3)
    angular_velocity: t.array[t.float32, 3] = _zeros(3)
    position_variance: t.array[t.float32, 3] = _zeros(3)
    orientation_variance: t.array[t.float32, 3] = _zeros(3)
    velocity_variance: t.array[t.float32, 3] = _zeros(3)
    reset_counter: t.uint8 = 0
    quality: t.int8 = 0


@dataclass
class VehicleCommand(IdlStruct, typename="px4_msgs.msg.dds_.VehicleCommand_"):
    """A commander command (``/fmu/in/vehicle_command``): MAVLink's MAV_CMD numbers and params."""

    timestamp: t.uint64 = 0
    param1: t.float32 = 0.0
    param2: t.float32 = 0.0
    param3: t.float32 = 0.0
    param4: t.float32 = 0.0
    param5: t.float64 = 0.0
    param6: t.float64 = 0.0
    param7: t.float32 = 0.0
    command: t.uint32 = 0
    target_system: t.uint8 = 0
    target_component: t.uint8 = 0
    source_system: t.uint8 = 0
    source_component: t.uint16 = 0
    confirmation: t.uint8 = 0
    from_external: bool = False


@dataclass
class VehicleCommandAck(IdlStruct, typename="px4_msgs.msg.dds_.VehicleCommandAck_"):
    """The commander's answer (``/fmu/out/vehicle_command_ack``): ``result`` is MAVLink's MAV_RESULT."""

    timestamp: t.uint64 = 0
    command: t.uint32 = 0
    result: t.uint8 = 0
    result_param1: t.uint8 = 0
    result_param2: t.int32 = 0
    target_system: t.uint8 = 0
    target_component: t.uint16 = 0
    from_external: bool = False


@dataclass
class VehicleStatusHead(IdlStruct, typename="px4_msgs.msg.dds_.VehicleStatus_"):
    """The first nine fields of ``VehicleStatus``, the same from v1.14 to v1.18 while the rest
    changed in every release: read from the front of a plain CDR sample, they give the arming
    state and the navigation state whatever the version. Not a whole message: never written,
    and not in :data:`MESSAGE_TYPES` (a bag needs whole definitions)."""

    timestamp: t.uint64 = 0
    armed_time: t.uint64 = 0
    takeoff_time: t.uint64 = 0
    arming_state: t.uint8 = 0
    latest_arming_reason: t.uint8 = 0
    latest_disarming_reason: t.uint8 = 0
    nav_state_timestamp: t.uint64 = 0
    nav_state_user_intention: t.uint8 = 0
    nav_state: t.uint8 = 0

    # .msg constants; not on the wire (no annotation: not fields)
    ARMING_STATE_ARMED = 2
    NAVIGATION_STATE_OFFBOARD = 14


# --- registry -------------------------------------------------------------------------

MESSAGE_TYPES: dict[str, type[IdlStruct]] = {
    "builtin_interfaces/msg/Time": Time,
    "builtin_interfaces/msg/Duration": Duration,
    "std_msgs/msg/Header": Header,
    "std_msgs/msg/Bool": Bool,
    "std_msgs/msg/String": String,
    "std_msgs/msg/MultiArrayDimension": MultiArrayDimension,
    "std_msgs/msg/MultiArrayLayout": MultiArrayLayout,
    "std_msgs/msg/Float64MultiArray": Float64MultiArray,
    "geometry_msgs/msg/Vector3": Vector3,
    "geometry_msgs/msg/Point": Point,
    "geometry_msgs/msg/Quaternion": Quaternion,
    "geometry_msgs/msg/Pose": Pose,
    "geometry_msgs/msg/Twist": Twist,
    "geometry_msgs/msg/PoseStamped": PoseStamped,
    "geometry_msgs/msg/TwistStamped": TwistStamped,
    "geometry_msgs/msg/PoseWithCovariance": PoseWithCovariance,
    "geometry_msgs/msg/TwistWithCovariance": TwistWithCovariance,
    "nav_msgs/msg/Odometry": Odometry,
    "sensor_msgs/msg/JointState": JointState,
    "sensor_msgs/msg/Imu": Imu,
    "sensor_msgs/msg/Image": Image,
    "trajectory_msgs/msg/JointTrajectoryPoint": JointTrajectoryPoint,
    "trajectory_msgs/msg/JointTrajectory": JointTrajectory,
    "px4_msgs/msg/ActuatorMotors": ActuatorMotors,
    "px4_msgs/msg/VehicleRatesSetpoint": VehicleRatesSetpoint,
    "px4_msgs/msg/OffboardControlMode": OffboardControlMode,
    "px4_msgs/msg/VehicleOdometry": VehicleOdometry,
    "px4_msgs/msg/VehicleCommand": VehicleCommand,
    "px4_msgs/msg/VehicleCommandAck": VehicleCommandAck,
}


def normalize_type_name(name: str) -> str:
    """``nav_msgs/Odometry`` or ``nav_msgs/msg/Odometry`` -> ``nav_msgs/msg/Odometry``."""
    parts = name.strip().split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    return "/".join(parts)


def msg_class(ros_type: str) -> type[IdlStruct]:
    """The DDS class of a ROS 2 message type name; the error lists the types deploy knows."""
    try:
        return MESSAGE_TYPES[normalize_type_name(ros_type)]
    except KeyError:
        raise UnknownNameError("ROS 2 message type", ros_type, MESSAGE_TYPES) from None


def dds_type_name(cls: type[IdlStruct]) -> str:
    """The DDS type name ROS 2 registers, ``nav_msgs::msg::dds_::Odometry_``."""
    return cls.__idl_typename__.replace(".", "::")


def dds_topic_name(ros_topic: str) -> str:
    """ROS 2 topic ``/cf/odom`` -> DDS topic ``rt/cf/odom`` (rmw's prefix for topics)."""
    return "rt/" + ros_topic.lstrip("/")


def ros_topic_name(dds_topic: str) -> str:
    """Inverse of :func:`dds_topic_name`: DDS topic ``rt/lowcmd`` -> ROS 2 topic ``/lowcmd``; a
    DDS topic without rmw's ``rt/`` prefix is not a ROS 2 topic and keeps its name under ``/``."""
    return "/" + (dds_topic[3:] if dds_topic.startswith("rt/") else dds_topic).lstrip("/")


def ros_type_name(cls: type[IdlStruct]) -> str:
    """The ROS 2 name of a DDS message class: rmw's mapping of DDS type ``pkg::msg::dds_::Name_``
    to ``pkg/msg/Name`` (``nav_msgs/msg/Odometry``; ``unitree_hg/msg/LowCmd`` for Unitree's
    types, which follow it). The inverse of :func:`msg_class` for the types deploy knows."""
    parts = cls.__idl_typename__.split(".")
    if len(parts) == 4 and parts[1:3] == ["msg", "dds_"] and parts[3].endswith("_"):
        return f"{parts[0]}/msg/{parts[3][:-1]}"
    raise UnknownNameError("DDS message class", cls.__name__, (c.__name__ for c in MESSAGE_TYPES.values()))


_IDL_TO_MSG = {
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "float32": "float32",
    "float64": "float64",
}


def msg_definition(cls: type[IdlStruct]) -> str:
    """The ``.msg`` text of a class (fields only), for registering the type with rosbags.

    Used for the px4_msgs types, which rosbags' bundled type stores do not have.
    """
    import typing

    from cyclonedds.idl._type_helper import Annotated, get_args, get_origin

    def name_of(tp) -> str:
        if tp is str:
            return "string"
        if tp is bool:
            return "bool"
        if isinstance(tp, type) and issubclass(tp, IdlStruct):
            return ros_type_name(tp)
        if get_origin(tp) is Annotated:
            base, meta = get_args(tp)
            if isinstance(meta, t.array):
                return f"{name_of(meta.subtype)}[{meta.length}]"
            if isinstance(meta, t.sequence):
                return f"{name_of(meta.subtype)}[]"
            if isinstance(meta, str) and meta in _IDL_TO_MSG:
                return _IDL_TO_MSG[meta]
        raise TypeError(f"no .msg spelling for {tp!r}")

    hints = typing.get_type_hints(cls, include_extras=True)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # each message class is a @dataclass IdlStruct
    return "\n".join(f"{name_of(hints[f.name])} {f.name}" for f in fields) + "\n"


def nested_types(cls: type[IdlStruct]) -> list[type[IdlStruct]]:
    """``cls`` and every message class its fields hold (arrays and sequences included), each
    once, nested ones first: the order to register their ``.msg`` definitions in."""
    import typing

    from cyclonedds.idl._type_helper import Annotated, get_args, get_origin

    def structs(tp) -> list[type[IdlStruct]]:
        if isinstance(tp, type) and issubclass(tp, IdlStruct):
            return nested_types(tp)
        if get_origin(tp) is Annotated and isinstance(get_args(tp)[1], (t.array, t.sequence)):
            return structs(get_args(tp)[1].subtype)
        return []

    out: list[type[IdlStruct]] = []
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # each message class is a @dataclass IdlStruct
        out += [c for c in structs(hints[f.name]) if c not in out]
    return out + [cls]
