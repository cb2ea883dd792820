"""The DDS wire format against an independent ROS 2 CDR implementation (rosbags).

For every message type deploy speaks, random messages are built from rosbags' own type
definitions (ROS 2 Humble and Jazzy type stores; px4_msgs from PX4's .msg text below),
serialized by rosbags, rebuilt as simreal's Cyclone DDS classes, and compared byte for
byte: as serialized, and as actually received by another participant over DDS on
loopback.
"""

from __future__ import annotations

import random
import string
import time

import numpy as np
import pytest

pytest.importorskip("cyclonedds")
rosbags_typesys = pytest.importorskip("rosbags.typesys")

from rosbags.interfaces import Nodetype  # noqa: E402

from simreal.deploy import ros_types as R  # noqa: E402

# px4_msgs release/1.15-1.18 msg files, their fields (the same in those releases for these);
# independent of ros_types.
PX4_MSGS = {
    "px4_msgs/msg/ActuatorMotors": """
uint64 timestamp
uint64 timestamp_sample
uint16 reversible_flags
uint8 ACTUATOR_FUNCTION_MOTOR1 = 101
uint8 NUM_CONTROLS = 12
float32[12] control
""",
    "px4_msgs/msg/VehicleRatesSetpoint": """
uint64 timestamp
float32 roll
float32 pitch
float32 yaw
float32[3] thrust_body
bool reset_integral
""",
    "px4_msgs/msg/VehicleOdometry": """
uint64 timestamp
uint64 timestamp_sample
uint8 pose_frame
float32[3] position
float32[4] q
uint8 velocity_frame
float32[3] velocity
float32[3] angular_velocity
float32[3] position_variance
float32[3] orientation_variance
float32[3] velocity_variance
uint8 reset_counter
int8 quality
""",
    "px4_msgs/msg/VehicleCommand": """
uint64 timestamp
float32 param1
float32 param2
float32 param3
float32 param4
float64 param5
float64 param6
float32 param7
uint32 command
uint8 target_system
uint8 target_component
uint8 source_system
uint16 source_component
uint8 confirmation
bool from_external
""",
    "px4_msgs/msg/VehicleCommandAck": """
uint64 timestamp
uint32 command
uint8 result
uint8 result_param1
int32 result_param2
uint8 target_system
uint16 target_component
bool from_external
""",
    "px4_msgs/msg/OffboardControlMode": """
uint64 timestamp
bool position
bool velocity
bool acceleration
bool attitude
bool body_rate
bool thrust_and_torque
bool direct_actuator
""",
}

STORES = ("ROS2_HUMBLE", "ROS2_JAZZY")
_INT_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
_DTYPES = {"float32": np.float32, "float64": np.float64, "bool": np.bool_, **{k: getattr(np, k) for k in _INT_RANGES}}


def typestore(store: str):
    ts = rosbags_typesys.get_typestore(getattr(rosbags_typesys.Stores, store))
    types = {}
    for name, text in PX4_MSGS.items():
        types.update(rosbags_typesys.get_types_from_msg(text, name))
    ts.register(types)
    return ts


def _scalar(kind: str, rng: random.Random):
    if kind == "string":
        return "".join(rng.choice(string.ascii_letters + "/_") for _ in range(rng.randint(0, 9)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return rng.randint(lo, hi)
    x = rng.uniform(-1e3, 1e3)
    return float(np.float32(x)) if kind == "float32" else x


def random_ros_msg(ts, typename: str, rng: random.Random):
    """A random message of ``typename`` built from rosbags' field definitions."""
    _, fields = ts.fielddefs[typename]
    values = {}
    for name, (node, desc) in fields:
        values[name] = _random_field(ts, node, desc, rng)
    return ts.types[typename](**values)


def _random_field(ts, node, desc, rng):
    if node == Nodetype.BASE:
        return _scalar(desc[0], rng)
    if node == Nodetype.NAME:
        return random_ros_msg(ts, desc, rng)
    (sub_node, sub_desc), length = desc
    n = length if node == Nodetype.ARRAY else rng.randint(0, 3)
    items = [_random_field(ts, sub_node, sub_desc, rng) for _ in range(n)]
    if sub_node == Nodetype.BASE and sub_desc[0] != "string":
        return np.array(items, dtype=_DTYPES[sub_desc[0]])
    return items


def to_dds(ts, typename: str, msg):
    """The same message as simreal's Cyclone DDS class (fields copied by name)."""
    cls = R.msg_class(typename)
    _, fields = ts.fielddefs[typename]
    values = {}
    for name, (node, desc) in fields:
        values[name] = _to_dds_field(ts, node, desc, getattr(msg, name))
    return cls(**values)


def _to_dds_field(ts, node, desc, v):
    if node == Nodetype.BASE:
        return v
    if node == Nodetype.NAME:
        return to_dds(ts, desc, v)
    (sub_node, sub_desc), _ = desc
    if sub_node == Nodetype.NAME:
        return [to_dds(ts, sub_desc, x) for x in v]
    return [x.item() if hasattr(x, "item") else x for x in v]


ALL_TYPES = sorted(R.MESSAGE_TYPES)


@pytest.fixture
def dds_domain() -> int:
    from fixtures.bundles import random_domain_id

    return random_domain_id()


@pytest.mark.parametrize("store", STORES)
def test_every_type_serializes_like_rosbags(store):
    ts = typestore(store)
    rng = random.Random(7)
    for typename in ALL_TYPES:
        assert typename in ts.types, f"rosbags {store} has no {typename}"
        for _ in range(5):
            ros = random_ros_msg(ts, typename, rng)
            expected = bytes(ts.serialize_cdr(ros, typename))
            dds = to_dds(ts, typename, ros)
            got = dds.serialize(use_version_2=False)
            assert got == expected, f"{typename}: simreal {got.hex()} != rosbags {expected.hex()}"
            # and back: rosbags' bytes decode to the same message
            assert type(dds).deserialize(expected) == dds, typename


def test_dds_type_and_topic_names():
    assert R.dds_type_name(R.Odometry) == "nav_msgs::msg::dds_::Odometry_"
    assert R.dds_type_name(R.ActuatorMotors) == "px4_msgs::msg::dds_::ActuatorMotors_"
    assert R.dds_topic_name("/fmu/in/actuator_motors") == "rt/fmu/in/actuator_motors"
    for name, cls in R.MESSAGE_TYPES.items():
        pkg, _, typ = name.split("/")
        assert R.dds_type_name(cls) == f"{pkg}::msg::dds_::{typ}_"
        assert R.msg_class(f"{pkg}/{typ}") is cls  # short spelling too
    with pytest.raises(Exception, match="valid ROS 2 message types"):
        R.msg_class("foo_msgs/msg/Bar")


def test_bytes_received_over_loopback_equal_rosbags(dds_domain):
    """Publish every type through the transport; the raw bytes another participant takes
    are rosbags' serialization (plus the writer's zero padding to 4 bytes)."""
    from simreal.deploy.transport_dds import DdsTransport

    ts = typestore("ROS2_JAZZY")
    rng = random.Random(3)
    got: dict[str, list[bytes]] = {}
    with DdsTransport(dds_domain) as a, DdsTransport(dds_domain) as b:
        pubs = {}
        for i, typename in enumerate(ALL_TYPES):
            topic = f"/wire_test/t{i}"
            b.subscribe(topic, typename, lambda m, t, d, k=typename: got.setdefault(k, []).append(d), "reliable")
            pubs[typename] = a.publisher(topic, typename, "reliable")
        assert a.wait_for_match(10.0), "DDS discovery on loopback did not complete"
        expected = {}
        for typename in ALL_TYPES:
            ros = random_ros_msg(ts, typename, rng)
            expected[typename] = bytes(ts.serialize_cdr(ros, typename))
            pubs[typename].publish(to_dds(ts, typename, ros))
        deadline = time.monotonic() + 5.0
        while len(got) < len(ALL_TYPES) and time.monotonic() < deadline:
            b.poll(0.05)
    assert sorted(got) == ALL_TYPES
    for typename, data in got.items():
        exp = expected[typename]
        wire = data[0]
        assert wire[:4] == b"\x00\x01\x00\x00", f"{typename}: not XCDR1 little endian: {wire[:4].hex()}"
        assert wire[: len(exp)] == exp and set(wire[len(exp) :]) <= {0} and len(wire) - len(exp) < 4, typename


# px4_msgs release/1.16 VehicleStatus (1.17 the same; 1.15 has two more bools near the end, 1.18
# more fields): a whole message, to read the front of.
VEHICLE_STATUS_1_16 = """
uint64 timestamp
uint64 armed_time
uint64 takeoff_time
uint8 arming_state
uint8 latest_arming_reason
uint8 latest_disarming_reason
uint64 nav_state_timestamp
uint8 nav_state_user_intention
uint8 nav_state
uint8 executor_in_charge
uint32 valid_nav_states_mask
uint32 can_set_nav_states_mask
uint16 failure_detector_status
uint8 hil_state
uint8 vehicle_type
bool failsafe
bool failsafe_and_user_took_over
uint8 failsafe_defer_state
bool gcs_connection_lost
uint8 gcs_connection_lost_counter
bool high_latency_data_link_lost
bool is_vtol
bool is_vtol_tailsitter
bool in_transition_mode
bool in_transition_to_fw
uint8 system_type
uint8 system_id
uint8 component_id
bool safety_button_available
bool safety_off
bool power_input_valid
bool usb_connected
bool open_drone_id_system_present
bool open_drone_id_system_healthy
bool parachute_system_present
bool parachute_system_healthy
bool rc_calibration_in_progress
bool calibration_enabled
bool pre_flight_checks_pass
"""


def test_the_head_of_a_whole_vehicle_status_reads_as_rosbags_wrote_it():
    """VehicleStatusHead reads arming and navigation state from the front of a whole v1.16
    VehicleStatus that rosbags serialized (the rest of the sample is left unread)."""
    ts = typestore("ROS2_JAZZY")
    ts.register(rosbags_typesys.get_types_from_msg(VEHICLE_STATUS_1_16, "px4_msgs/msg/VehicleStatus"))
    rng = random.Random(11)
    for _ in range(5):
        ros = random_ros_msg(ts, "px4_msgs/msg/VehicleStatus", rng)
        head = R.VehicleStatusHead.deserialize(bytes(ts.serialize_cdr(ros, "px4_msgs/msg/VehicleStatus")))
        for name in ("timestamp", "armed_time", "arming_state", "nav_state_timestamp", "nav_state"):
            assert getattr(head, name) == getattr(ros, name), name
