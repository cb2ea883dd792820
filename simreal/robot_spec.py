"""The robot spec: the one source of truth about a robot, shared by sim, retarget, deploy and hardware.

One YAML file per robot in ``configs/robots/<name>.yaml`` (or any path a user gives). It
holds the actuated joints or motors *in the order the real robot's driver numbers its
motors*, their PD gains and limits, the default pose, the control rate, the sensors, the
ROS 2 topics and message types the robot's driver speaks, and where its MuJoCo model comes
from: a builder in code (``module:function``) or a user's MJCF/URDF file (Isaac Gym style
``asset_root`` / ``asset_file``).

This module only reads and validates YAML; it imports neither MuJoCo nor JAX, so the
deploy runtime on a robot's computer can use it. ``simreal.sim.robots.build_model`` turns a
spec into an ``MjModel``.

Units: SI throughout. Angles in [rad], gains kp in [N m/rad] (or [N/m]), kd in
[N m s/rad], efforts in [N m] for joints and [N] of thrust for rotors.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any, Literal

from simreal.config import build, configs_dir, field
from simreal.errors import ConfigError, UnknownNameError, printable
from simreal.yaml_io import load_yaml

Family = Literal["quadrotor", "humanoid", "arm", "classic"]


@dataclasses.dataclass(frozen=True)
class ActuatorSpec:
    """One actuated joint or rotor, in driver order.

    For joints: PD position actuation ``tau = kp (q_target - q) - kd qdot`` clamped to
    ``effort_limit``. For rotors: ``effort_limit`` is the maximum thrust in [N].
    """

    name: str
    effort_limit: float = field(min=0.0, doc="max torque [N m] / force [N] / rotor thrust [N]")
    kp: float = field(0.0, min=0.0, doc="position gain [N m/rad]")
    kd: float = field(0.0, min=0.0, doc="damping gain [N m s/rad]")
    velocity_limit: float = field(math.inf, min=0.0, doc="[rad/s]")
    range: tuple[float, ...] | None = field(None, doc="(lower, upper) position limits [rad] or [m]")
    default: float = field(0.0, doc="default (standing/home) position [rad]")
    armature: float = field(0.0, min=0.0, doc="reflected rotor inertia [kg m^2]")
    friction: float = field(0.0, min=0.0, doc="dry friction [N m]")


@dataclasses.dataclass(frozen=True)
class HeldJointSpec:
    """A joint of the real robot that the policy does not drive: its motor is held at ``target``
    by the driver's own PD, ``tau = kp (target - q) - kd qdot`` (a 12-DoF G1's waist and arms, as
    Unitree's unitree_rl_gym deploy holds them: ``arm_waist_kps``, ``arm_waist_kds``,
    ``arm_waist_target``); the training model keeps it a joint under that PD or welds it there
    (``model.options.hold``: ``pd`` or ``weld``; ``simreal.sim.robots.articulated``)."""

    name: str
    kp: float = field(min=0.0, doc="position gain [N m/rad]")
    kd: float = field(min=0.0, doc="damping gain [N m s/rad]")
    target: float = field(0.0, doc="held position [rad]")


@dataclasses.dataclass(frozen=True)
class SiteSpec:
    """A site added to the model: a named frame on ``body`` at ``pos`` [m] in the body frame.

    For a user's model file that lacks a site a task reads (``end_effector``, ``left_foot``),
    so the file itself needs no edit.
    """

    name: str
    body: str
    pos: tuple[float, ...] = field((0.0, 0.0, 0.0), doc="(x, y, z) in the body frame [m]")


@dataclasses.dataclass(frozen=True)
class CameraSpec:
    """A camera added to the model: ``name`` on ``body`` (``world``: fixed in the scene) at ``pos`` [m]
    in the body frame, aimed at ``lookat`` (a point in the same frame, image up towards the body's
    +z) or turned by ``quat`` (wxyz; MuJoCo's camera looks along its -z with +y up).

    ``width`` x ``height`` [px] is the image a policy sees (MuJoCo's ``cam_resolution``), ``fovy_deg``
    the vertical field of view [deg]; ``depth`` adds a depth image [m] beside the RGB one.
    """

    name: str
    body: str = field("world", doc="body the camera moves with ('world': fixed)")
    pos: tuple[float, ...] = field((0.0, 0.0, 0.0), doc="(x, y, z) in the body frame [m]")
    lookat: tuple[float, ...] | None = field(None, doc="(x, y, z) the camera aims at, in the body frame [m]")
    quat: tuple[float, ...] | None = field(None, doc="(w, x, y, z) orientation in the body frame, instead of lookat")
    fovy_deg: float = field(45.0, min=1.0, max=179.0, doc="vertical field of view [deg]")
    width: int = field(64, min=1, max=4096, doc="image width [px]")
    height: int = field(64, min=1, max=4096, doc="image height [px]")
    depth: bool = field(False, doc="also render a depth image [m]")


def check_cameras(cameras: tuple[CameraSpec, ...], key: str, path: str) -> None:
    """ConfigError naming ``key[i].field`` for a malformed pose or a repeated name."""
    seen: set[str] = set()
    for i, cam in enumerate(cameras):
        if cam.name in seen:
            raise ConfigError(f"{key}[{i}].name", f"camera '{cam.name}' is listed twice", path)
        seen.add(cam.name)
        if len(cam.pos) != 3:
            raise ConfigError(f"{key}[{i}].pos", f"expected [x, y, z], got {list(cam.pos)}", path)
        if (cam.lookat is None) == (cam.quat is None):
            raise ConfigError(f"{key}[{i}]", "set exactly one of 'lookat' ([x, y, z]) or 'quat' ([w, x, y, z])", path)
        if cam.lookat is not None and (len(cam.lookat) != 3 or tuple(cam.lookat) == tuple(cam.pos)):
            raise ConfigError(f"{key}[{i}].lookat", f"expected [x, y, z] away from pos, got {list(cam.lookat)}", path)
        if cam.quat is not None and (len(cam.quat) != 4 or not any(cam.quat)):
            raise ConfigError(f"{key}[{i}].quat", f"expected a non-zero [w, x, y, z], got {list(cam.quat)}", path)


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """Where the MuJoCo model comes from: exactly one of ``builder`` or ``asset_file``."""

    builder: str | None = field(None, doc="'module:function' returning an MjSpec or MjModel")
    asset_root: str | None = field(None, doc="folder that asset_file is relative to (relative: to the spec's folder)")
    asset_file: str | None = field(None, doc="user MJCF (.xml) or URDF (.urdf)")
    options: dict[str, Any] = field({}, doc="keyword arguments for the builder; a model file takes self_collision")
    sites: tuple[SiteSpec, ...] = field((), doc="sites to add to the model (e.g. ones a user's file lacks)")
    cameras: tuple[CameraSpec, ...] = field((), doc="cameras to add to the model (a wrist or a scene camera)")


@dataclasses.dataclass(frozen=True)
class TopicSpec:
    """A ROS 2 topic as ROS 2 names it: ``/cf/odom`` of type ``nav_msgs/msg/Odometry``."""

    name: str
    topic: str
    type: str
    action_mode: str | None = field(None, doc="for command topics: the action mode this topic carries")


@dataclasses.dataclass(frozen=True)
class Ros2Spec:
    """The topics the robot's driver publishes (state) and subscribes (command)."""

    state: tuple[TopicSpec, ...] = field(())
    command: tuple[TopicSpec, ...] = field(())
    estop_topic: str = field("/simreal/estop", doc="std_msgs/msg/Bool; true stops the policy")
    driver_note: str = field(
        "",
        doc="what stands between these topics and the robot's own wire (a bridge), for the generated package's README",
    )


@dataclasses.dataclass(frozen=True)
class RobotSpec:
    """A robot as the whole toolkit sees it. See the module docstring for units."""

    name: str
    family: Family
    model: ModelSource
    control_rate_hz: float = field(min=1.0, max=10000.0)
    actuators: tuple[ActuatorSpec, ...] = field(())
    physical: dict[str, float] = field({}, doc="family-specific physical constants, SI")
    sensors: tuple[str, ...] = field(())
    tracking_bodies: tuple[str, ...] = field(
        (),
        doc="bodies a motion-tracking task compares with the clip's "
        "(humanoids: pelvis, feet, knees, torso, elbows, hands)",
    )
    keypoint_map: str = field(
        "",
        doc="the retargeting keypoint map, configs/retarget/NAME.yaml, when not the spec's "
        "own name (a variant with the same links: g1_23dof uses g1's)",
    )
    held: tuple[HeldJointSpec, ...] = field(
        (), doc="joints the driver holds at a target with its own PD, not the policy's (a 12-DoF G1's waist and arms)"
    )
    whole_robot: str = field(
        "",
        doc="the spec of the whole robot this one drives part of (g1_12dof: g1): what a "
        "twin of the real robot simulates",
    )
    ros2: Ros2Spec = field(Ros2Spec())
    source: str = field("", doc="file this spec was read from")

    @property
    def held_names(self) -> tuple[str, ...]:
        """The held joints' names (:attr:`held`), in motor order."""
        return tuple(h.name for h in self.held)

    @property
    def actuator_names(self) -> tuple[str, ...]:
        """Actuated joint or motor names in driver order."""
        return tuple(a.name for a in self.actuators)

    @property
    def control_dt_s(self) -> float:
        """Control period [s]."""
        return 1.0 / self.control_rate_hz

    def actuator(self, name: str) -> ActuatorSpec:
        """Look an actuator up by name; the error lists valid names."""
        for a in self.actuators:
            if a.name == name:
                return a
        raise UnknownNameError(f"actuator of robot '{self.name}'", name, self.actuator_names)


def available_robots() -> list[str]:
    """Names of the robot specs shipped in ``configs/robots``."""
    return sorted(p.stem for p in (configs_dir() / "robots").glob("*.yaml"))


def resolve_robot_path(name_or_path: str) -> Path:
    """A shipped robot's YAML by name, or a user's YAML path."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not os.path.isfile(p):  # unlike Path.is_file, False for a name too long
            raise ConfigError("robot", f"robot spec file not found: {printable(str(p))}")
        return p
    shipped = configs_dir() / "robots" / f"{name_or_path}.yaml"
    if not os.path.isfile(shipped):
        raise UnknownNameError("robot", name_or_path, available_robots())
    return shipped


def load_robot_spec(name_or_path: str) -> RobotSpec:
    """Read and validate a robot spec (by shipped name or YAML path)."""
    path = resolve_robot_path(name_or_path)
    data = load_yaml(path)
    data.setdefault("source", str(path))
    try:
        spec = build(RobotSpec, data, prefix="")
    except ConfigError as e:  # name the file: build knows only the key
        raise ConfigError(e.key, str(e).removeprefix(f"config key '{e.key}': "), str(path)) from None
    _validate(spec, str(path))
    return spec


def _validate(spec: RobotSpec, path: str) -> None:
    m = spec.model
    if (m.builder is None) == (m.asset_file is None):
        raise ConfigError("model", "set exactly one of 'builder' (module:function) or 'asset_file'", path)
    if m.builder is not None and ":" not in m.builder:
        raise ConfigError("model.builder", f"expected 'module:function', got {m.builder!r}", path)
    for i, site in enumerate(m.sites):
        if len(site.pos) != 3:
            raise ConfigError(f"model.sites[{i}].pos", f"expected [x, y, z], got {list(site.pos)}", path)
    check_cameras(m.cameras, "model.cameras", path)
    for key, value in spec.physical.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ConfigError(f"physical.{key}", f"expected a finite number, got {value!r:.60}", path)
    if spec.physical.get("mass_kg", 1.0) <= 0:  # MuJoCo refuses a body without mass, from inside its compiler
        raise ConfigError("physical.mass_kg", f"must be > 0 [kg], got {spec.physical['mass_kg']}", path)
    names = spec.actuator_names
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError("actuators", f"duplicate actuator names: {', '.join(sorted(dup))}", path)
    held = [h.name for h in spec.held]
    for i, name in enumerate(held):
        if name in names or held.count(name) > 1:
            raise ConfigError(
                f"held[{i}].name",
                f"'{name}' is {'an actuator' if name in names else 'held twice'}; a "
                f"held joint is one the policy does not drive",
                path,
            )
    for i, a in enumerate(spec.actuators):
        if a.range is not None:
            if len(a.range) != 2 or a.range[0] >= a.range[1]:
                raise ConfigError(
                    f"actuators[{i}].range", f"expected [lower, upper] with lower < upper, got {list(a.range)}", path
                )
            if not a.range[0] <= a.default <= a.range[1]:
                raise ConfigError(f"actuators[{i}].default", f"{a.default} is outside range {list(a.range)}", path)
