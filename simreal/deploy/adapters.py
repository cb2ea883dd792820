"""ROS 2 messages <-> robot state and commands: the edge where ROS conventions meet simreal's.

Both directions of every message live here, so a frame or unit convention is written once:

- the runner *decodes* state messages into the robot-state keys of
  :mod:`simreal.observations` and *encodes* commands;
- the sim-in-the-loop robot (and test fakes) *encode* state and *decode* commands.

Messages are read by attribute and built by keyword through a ``msg_class(ros_type)``
lookup, so the same code serves ``rclpy`` messages in the generated node and the Cyclone
DDS classes of :mod:`simreal.deploy.ros_types`.

Conventions at the edge:

- quaternions: ROS ``(x, y, z, w)`` <-> simreal ``(w, x, y, z)``;
- ``nav_msgs/Odometry``: pose in the world (``header.frame_id``), twist in the body
  (``child_frame_id``), as nav_msgs defines it; ``twist_frame: world`` reads stacks that
  publish world-frame velocity instead;
- world ENU / body FLU inside simreal; PX4's ``VehicleRatesSetpoint`` is body FRD, so
  pitch and yaw rates flip sign and ``thrust_body[2] = -T / T_max``;
- ``px4_msgs/VehicleOdometry`` (PX4's own estimate, ``/fmu/out/vehicle_odometry``): position,
  velocity and ``q`` in NED, body rates in FRD (:mod:`simreal.ned_frames`); a pose or velocity
  frame other than NED (1) is refused, and a NaN field (PX4's "invalid") makes the sample
  unusable rather than a state;
- ``ActuatorMotors.control`` = rotor thrust / its limit (PX4 with ``THR_MDL_FAC = 1``, a
  thrust-linear motor model); unused slots are 0.0 (never NaN: NaN never goes on the wire);
- ``Float64MultiArray`` data slot ``channel_map[i]`` carries action channel i, in the order
  of the ros2_control controller's ``joints`` parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from simreal.errors import SimrealError
from simreal.ned_frames import swap_attitude, swap_frd_flu, swap_ned_enu
from simreal.rotations import rotmat_wb

MsgClass = Callable[[str], type]
#: ``VehicleOdometry.POSE_FRAME_NED`` and ``VELOCITY_FRAME_NED``
PX4_NED = 1


class StateMessageError(SimrealError):
    """A state message the runner cannot use (missing joints, wrong sizes)."""


def norm_type(name: str) -> str:
    """``pkg/Type`` or ``pkg/msg/Type`` -> ``pkg/msg/Type``."""
    parts = name.strip().split("/")
    return "/".join([parts[0], "msg", parts[1]] if len(parts) == 2 else parts)


def stamp_of(ns: int, T: MsgClass) -> Any:
    """builtin_interfaces/Time from integer nanoseconds."""
    return T("builtin_interfaces/msg/Time")(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _xyz(v: Any) -> np.ndarray:
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def _quat_wxyz(q: Any) -> np.ndarray:
    return np.array([q.w, q.x, q.y, q.z], dtype=np.float64)


# --- state: message -> robot state -----------------------------------------------------


class StateDecoder:
    """Decode one state topic's messages into robot-state entries.

    Args:
      type_name: ROS 2 type, e.g. ``nav_msgs/msg/Odometry``.
      twist_frame: ``body`` or ``world``, for messages with a twist.
      joint_names: the robot's joints in driver order (JointState is matched by name).
    """

    def __init__(
        self, type_name: str, *, twist_frame: str = "body", joint_names: Sequence[str] = (), role_key: str = "pos_w"
    ):
        self.type = norm_type(type_name)
        self.twist_frame = twist_frame
        self.role_key = role_key  # a pose of something else than the robot: only its position is read
        self.joint_names = tuple(joint_names)
        self._order_cache: dict[tuple[str, ...], np.ndarray] = {}
        fn = {
            "nav_msgs/msg/Odometry": self._odometry,
            "geometry_msgs/msg/PoseStamped": self._pose_stamped,
            "geometry_msgs/msg/TwistStamped": self._twist_stamped,
            "sensor_msgs/msg/JointState": self._joint_state,
            "sensor_msgs/msg/Imu": self._imu,
            "geometry_msgs/msg/Twist": self._cmd_vel,
            "px4_msgs/msg/VehicleOdometry": self._px4_odometry,
        }.get(self.type)
        if fn is None:
            raise StateMessageError(f"no decoder for state type '{type_name}'")
        self.decode: Callable[[Any], dict[str, np.ndarray]] = fn

    def __call__(self, msg: Any) -> dict[str, np.ndarray]:
        return self.decode(msg)

    def _twist(self, lin: np.ndarray, ang: np.ndarray, q: np.ndarray | None) -> dict[str, np.ndarray]:
        if self.twist_frame == "body":
            out = {"lin_vel_b": lin, "ang_vel_b": ang}
            if q is not None:
                out["lin_vel_w"] = rotmat_wb(q) @ lin
            return out
        out = {"lin_vel_w": lin, "ang_vel_w": ang}
        if q is not None:
            out["ang_vel_b"] = rotmat_wb(q).T @ ang
        return out

    def _odometry(self, m: Any) -> dict[str, np.ndarray]:
        q = _quat_wxyz(m.pose.pose.orientation)
        out = {"pos_w": _xyz(m.pose.pose.position), "quat_wxyz": q}
        out.update(self._twist(_xyz(m.twist.twist.linear), _xyz(m.twist.twist.angular), q))
        return out

    def _px4_odometry(self, m: Any) -> dict[str, np.ndarray]:
        if m.pose_frame != PX4_NED or m.velocity_frame != PX4_NED:
            raise StateMessageError(
                f"VehicleOdometry in pose frame {m.pose_frame}, velocity frame "
                f"{m.velocity_frame}; only NED ({PX4_NED}) is read"
            )
        raw = [np.asarray(v, np.float64) for v in (m.position, m.q, m.velocity, m.angular_velocity)]
        if not all(np.all(np.isfinite(v)) for v in raw):
            raise StateMessageError("VehicleOdometry with NaN fields (PX4: invalid estimate)")
        return {
            "pos_w": swap_ned_enu(raw[0]),
            "quat_wxyz": swap_attitude(raw[1]),
            "lin_vel_w": swap_ned_enu(raw[2]),
            "ang_vel_b": swap_frd_flu(raw[3]),
        }

    def _pose_stamped(self, m: Any) -> dict[str, np.ndarray]:
        if self.role_key != "pos_w":
            return {self.role_key: _xyz(m.pose.position)}
        return {"pos_w": _xyz(m.pose.position), "quat_wxyz": _quat_wxyz(m.pose.orientation)}

    def _twist_stamped(self, m: Any) -> dict[str, np.ndarray]:
        return self._twist(_xyz(m.twist.linear), _xyz(m.twist.angular), None)

    def _order(self, names: Sequence[str]) -> np.ndarray:
        key = tuple(names)
        idx = self._order_cache.get(key)
        if idx is None:
            pos = {n: i for i, n in enumerate(key)}
            missing = [n for n in self.joint_names if n not in pos]
            if missing:
                raise StateMessageError(f"JointState lacks joints {missing}; it has {list(key)}")
            idx = np.array([pos[n] for n in self.joint_names], dtype=np.intp)
            self._order_cache[key] = idx
        return idx

    def _joint_state(self, m: Any) -> dict[str, np.ndarray]:
        idx = self._order(m.name)
        out = {}
        pos = np.asarray(m.position, dtype=np.float64)
        if pos.size != len(m.name):
            raise StateMessageError(f"JointState has {len(m.name)} names but {pos.size} positions")
        out["joint_pos"] = pos[idx]
        vel = np.asarray(m.velocity, dtype=np.float64)
        if vel.size == len(m.name):
            out["joint_vel"] = vel[idx]
        return out

    def _imu(self, m: Any) -> dict[str, np.ndarray]:
        out = {"ang_vel_b": _xyz(m.angular_velocity), "lin_acc_b": _xyz(m.linear_acceleration)}
        if m.orientation_covariance[0] != -1.0:  # sensor_msgs: -1 means "no orientation estimate"
            out["quat_wxyz"] = _quat_wxyz(m.orientation)
        return out

    def _cmd_vel(self, m: Any) -> dict[str, np.ndarray]:
        return {"command": np.array([m.linear.x, m.linear.y, m.angular.z], dtype=np.float64)}


def complete_state(s: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fill frame-converted keys that need a quaternion from another topic (in place)."""
    q = s.get("quat_wxyz")
    if q is not None:
        if "lin_vel_w" not in s and "lin_vel_b" in s:
            s["lin_vel_w"] = rotmat_wb(q) @ s["lin_vel_b"]
        if "ang_vel_b" not in s and "ang_vel_w" in s:
            s["ang_vel_b"] = rotmat_wb(q).T @ s["ang_vel_w"]
    return s


# --- state: robot state -> message (the simulated robot's side) -------------------------


def encode_state(
    type_name: str,
    s: dict[str, np.ndarray],
    stamp: int,
    T: MsgClass,
    *,
    frame_id: str = "world",
    child_frame_id: str = "base_link",
    joint_names: Sequence[str] = (),
    twist_frame: str = "body",
) -> Any:
    """Build a state message from a robot state (keys as in :mod:`simreal.observations`)."""
    t = norm_type(type_name)
    header = T("std_msgs/msg/Header")(stamp=stamp_of(stamp, T), frame_id=frame_id)
    V3, P, Q = T("geometry_msgs/msg/Vector3"), T("geometry_msgs/msg/Point"), T("geometry_msgs/msg/Quaternion")

    def vec(v):
        return V3(x=float(v[0]), y=float(v[1]), z=float(v[2]))

    def quat(q):
        return Q(x=float(q[1]), y=float(q[2]), z=float(q[3]), w=float(q[0]))

    def pose():
        p = s["pos_w"]
        return T("geometry_msgs/msg/Pose")(
            position=P(x=float(p[0]), y=float(p[1]), z=float(p[2])), orientation=quat(s["quat_wxyz"])
        )

    def twist():
        r = rotmat_wb(s["quat_wxyz"])
        if twist_frame == "body":
            lin, ang = r.T @ s["lin_vel_w"], s["ang_vel_b"]
        else:
            lin, ang = s["lin_vel_w"], r @ s["ang_vel_b"]
        return T("geometry_msgs/msg/Twist")(linear=vec(lin), angular=vec(ang))

    if t == "nav_msgs/msg/Odometry":
        return T(t)(
            header=header,
            child_frame_id=child_frame_id,
            pose=T("geometry_msgs/msg/PoseWithCovariance")(pose=pose()),
            twist=T("geometry_msgs/msg/TwistWithCovariance")(twist=twist()),
        )
    if t == "px4_msgs/msg/VehicleOdometry":
        us = stamp // 1000
        return T(t)(
            timestamp=us,
            timestamp_sample=us,
            pose_frame=PX4_NED,
            velocity_frame=PX4_NED,
            position=swap_ned_enu(s["pos_w"]).tolist(),
            q=swap_attitude(s["quat_wxyz"]).tolist(),
            velocity=swap_ned_enu(s["lin_vel_w"]).tolist(),
            angular_velocity=swap_frd_flu(s["ang_vel_b"]).tolist(),
        )
    if t == "geometry_msgs/msg/PoseStamped":
        return T(t)(header=header, pose=pose())
    if t == "geometry_msgs/msg/TwistStamped":
        return T(t)(header=header, twist=twist())
    if t == "sensor_msgs/msg/JointState":
        header.frame_id = ""
        return T(t)(
            header=header,
            name=list(joint_names),
            position=np.asarray(s["joint_pos"]).tolist(),
            velocity=np.asarray(s["joint_vel"]).tolist(),
            effort=[],
        )
    if t == "sensor_msgs/msg/Imu":
        header.frame_id = child_frame_id
        return T(t)(
            header=header,
            orientation=quat(s["quat_wxyz"]),
            angular_velocity=vec(s["ang_vel_b"]),
            linear_acceleration=vec(s.get("lin_acc_b", np.array([0.0, 0.0, 9.81]))),
        )
    raise StateMessageError(f"no state encoder for '{type_name}'")


# --- commands: physical action -> message and back -------------------------------------


class CommandCodec:
    """Encode physical commands into the command message (and decode them, for the sim side).

    Args:
      type_name: command message type.
      mode: action mode (``rotor_thrust``, ``ctbr``, ``joint_position``, ...).
      names: action channel names (motors or joints), driver order.
      full_scale: per channel, the value that maps to 1.0 in normalised messages
        (rotor thrust limit [N]; for ctbr channel 0 the total thrust limit [N]).
      channel_map: message slot of each action channel.
      period_s: control period, the trajectory point's ``time_from_start``.
      heartbeat_topic: PX4 OffboardControlMode topic, '' for none.
    """

    def __init__(
        self,
        type_name: str,
        mode: str,
        names: Sequence[str],
        full_scale: Sequence[float] | np.ndarray,
        channel_map: Sequence[int],
        *,
        topic: str = "",
        period_s: float = 0.01,
        heartbeat_topic: str = "",
        frame_id: str = "",
    ):
        self.type, self.mode, self.names = norm_type(type_name), mode, tuple(names)
        self.full_scale = np.asarray(full_scale, dtype=np.float64)
        self.map = np.asarray(channel_map, dtype=np.intp)
        self.topic, self.period_s, self.heartbeat_topic, self.frame_id = topic, period_s, heartbeat_topic, frame_id

    def encode(
        self, u: np.ndarray, stamp: int, T: MsgClass, *, sample_stamp: int | None = None
    ) -> list[tuple[str, Any]]:
        """(topic, message) pairs for physical command ``u``; ``u`` must be finite.

        ``stamp`` [ns] stamps the message; ``sample_stamp`` [ns] is the stamp of the state the
        command was computed from (PX4's ``timestamp_sample``), ``stamp`` when unknown.
        """
        u = np.asarray(u, dtype=np.float64)
        if not np.all(np.isfinite(u)):  # the last line of defence: nothing non-finite is encoded
            raise ValueError(f"refusing to encode a non-finite command {u}")
        t = self.type
        out: list[tuple[str, Any]] = []
        if t == "px4_msgs/msg/ActuatorMotors":
            ctrl = [0.0] * 12
            for i, slot in enumerate(self.map):
                ctrl[slot] = float(u[i] / self.full_scale[i])
            us = int(stamp // 1000)
            sample_us = us if sample_stamp is None else int(sample_stamp // 1000)
            msg = T(t)(timestamp=us, timestamp_sample=sample_us, reversible_flags=0, control=ctrl)
        elif t == "px4_msgs/msg/VehicleRatesSetpoint":
            msg = T(t)(
                timestamp=int(stamp // 1000),
                roll=float(u[1]),
                pitch=float(-u[2]),
                yaw=float(-u[3]),
                thrust_body=[0.0, 0.0, float(-u[0] / self.full_scale[0])],
                reset_integral=False,
            )
        elif t == "std_msgs/msg/Float64MultiArray":
            data = [0.0] * (int(self.map.max()) + 1)
            for i, slot in enumerate(self.map):
                data[slot] = float(u[i])
            msg = T(t)(data=data)
        elif t == "trajectory_msgs/msg/JointTrajectory":
            ns = int(round(self.period_s * 1e9))
            point = T("trajectory_msgs/msg/JointTrajectoryPoint")(
                positions=u.tolist(),
                time_from_start=T("builtin_interfaces/msg/Duration")(
                    sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000
                ),
            )
            msg = T(t)(
                header=T("std_msgs/msg/Header")(stamp=stamp_of(stamp, T), frame_id=self.frame_id),
                joint_names=list(self.names),
                points=[point],
            )
        else:
            raise ValueError(f"no command encoder for '{t}'")
        out.append((self.topic, msg))
        if self.heartbeat_topic:
            out.append(
                (
                    self.heartbeat_topic,
                    T("px4_msgs/msg/OffboardControlMode")(
                        timestamp=int(stamp // 1000),
                        direct_actuator=t.endswith("ActuatorMotors"),
                        body_rate=t.endswith("VehicleRatesSetpoint"),
                    ),
                )
            )
        return out

    def decode(self, msg: Any) -> np.ndarray:
        """Physical command from a command message (inverse of :meth:`encode`)."""
        t = self.type
        if t == "px4_msgs/msg/ActuatorMotors":
            c = np.asarray(msg.control, dtype=np.float64)
            return c[self.map] * self.full_scale
        if t == "px4_msgs/msg/VehicleRatesSetpoint":
            return np.array([-float(msg.thrust_body[2]) * self.full_scale[0], msg.roll, -msg.pitch, -msg.yaw])
        if t == "std_msgs/msg/Float64MultiArray":
            return np.asarray(msg.data, dtype=np.float64)[self.map]
        if t == "trajectory_msgs/msg/JointTrajectory":
            pos = {n: i for i, n in enumerate(msg.joint_names)}
            p = np.asarray(msg.points[0].positions, dtype=np.float64)
            return p[[pos[n] for n in self.names]]
        raise ValueError(f"no command decoder for '{t}'")
