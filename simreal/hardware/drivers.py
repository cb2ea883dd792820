"""The drivers table: ``--driver NAME`` -> the robot class, its config and its twin, in one place.

==========  ==================================  =======================================  ==========
driver      robot class                          twin (same wire)                         robots
==========  ==================================  =======================================  ==========
so100       hardware.so100.SO100Robot            FeetechTwin: the bus on a pseudo-tty     so100
unitree     hardware.unitree.UnitreeRobot        UnitreeTwin: LowState/LowCmd over DDS    g1, h1 ...
crazyflie   hardware.crazyflie.CrazyflieRobot    CrazyflieTwin: CRTP over UDP (cflib's)   crazyflie2
px4         hardware.px4_mavlink.PX4Robot        PX4Twin: MAVLink 2 over UDP loopback     crazyflie2
px4-ros2    hardware.px4_ros2.PX4Ros2Robot       PX4Ros2Twin: px4_msgs over DDS loopback  crazyflie2
franka      hardware.franka.FrankaRobot          FrankaTwin: franky's API (not FCI's wire)  franka
==========  ==================================  =======================================  ==========

:func:`open_robot` builds the driver's config from ``robot`` plus ``KEY=VALUE`` settings
(validated by :func:`simreal.config.build`: an unknown key is one line listing the valid
ones) and, with ``twin=True``, first starts the twin and points the config at it (the pty's
path, a private DDS domain on loopback), so every command that drives hardware also runs
against the twin, over the very same wire. Modules load when a driver is used, so naming
one never imports another's dependencies (pyserial, cyclonedds, pymavlink, cflib, franky).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from simreal.deploy.private_domain import claim_domain
from simreal.errors import UnknownNameError
from simreal.hardware.robot import Robot


def _load(path: str) -> Any:
    mod, name = path.split(":")
    return getattr(importlib.import_module(mod), name)


@contextlib.contextmanager
def _px4_ros2_twin(robot: str) -> Iterator[dict[str, Any]]:
    twin_mod = importlib.import_module("simreal.hardware.px4.ros2_twin")
    with (
        claim_domain(100, 149) as domain_id,
        twin_mod.PX4Ros2Twin(robot, domain_id=domain_id, loopback=True),
    ):  # private, as the Unitree twin's
        yield {"domain_id": domain_id, "loopback": True}


@contextlib.contextmanager
def _unitree_twin(robot: str) -> Iterator[dict[str, Any]]:
    twin_mod = importlib.import_module("simreal.hardware.unitree.twin")
    # private: away from ROS's 0 and from `deploy sim`'s 150..230
    with (
        claim_domain(100, 149) as domain_id,
        twin_mod.UnitreeTwin(twin_mod.TwinConfig(robot=robot, domain_id=domain_id, network_interface="lo")),
    ):
        yield {"domain_id": domain_id, "network_interface": "lo"}


def _serving(twin_class: str, setting: str) -> Callable[[str], contextlib.AbstractContextManager[dict[str, Any]]]:
    """The twin of a ``module:Class`` built from the robot's name alone, serving while in use;
    the driver's ``setting`` reaches it, and the twin has the attribute of that name."""

    @contextlib.contextmanager
    def serve(robot: str) -> Iterator[dict[str, Any]]:
        with _load(twin_class)(robot) as twin:
            yield {setting: getattr(twin, setting)}

    return serve


@dataclasses.dataclass(frozen=True)
class Driver:
    """One row of the table: ``robot`` is ``module:Class``; ``twin(robot)`` is a context manager
    that serves the wire and yields the config settings that reach it."""

    robot: str
    twin: Callable[[str], contextlib.AbstractContextManager[dict[str, Any]]]
    robots: tuple[str, ...]  # robot specs it drives by default
    summary: str

    def robot_class(self) -> type[Robot]:
        return _load(self.robot)


DRIVERS: dict[str, Driver] = {
    "so100": Driver(
        "simreal.hardware.feetech.so100:SO100Robot",
        _serving("simreal.hardware.feetech.twin:FeetechTwin", "port"),
        ("so100",),
        "SO-100/101 arm on its Feetech bus (settings: port=/dev/ttyACM0 calibration=FILE ...)",
    ),
    "unitree": Driver(
        "simreal.hardware.unitree.driver:UnitreeRobot",
        _unitree_twin,
        ("g1", "g1_23dof", "g1_12dof", "h1", "h1_10dof"),
        "Unitree G1/H1 low level over DDS (settings: network_interface=enp3s0 domain_id=0 ...)",
    ),
    "crazyflie": Driver(
        "simreal.hardware.crazyflie.driver:CrazyflieRobot",
        _serving("simreal.hardware.crazyflie.twin:CrazyflieTwin", "uri"),
        ("crazyflie2",),
        "Crazyflie 2.x over cflib, RPYT in rate mode (settings: uri=radio://0/80/2M/E7E7E7E7E7 ...)",
    ),
    "px4": Driver(
        "simreal.hardware.px4.mavlink:PX4Robot",
        _serving("simreal.hardware.px4.mavlink_twin:PX4Twin", "connection"),
        ("crazyflie2",),
        "PX4 over MAVLink, ctbr offboard (settings: connection=udpin:0.0.0.0:14540 system_id=1 ...)",
    ),
    "px4-ros2": Driver(
        "simreal.hardware.px4.ros2:PX4Ros2Robot",
        _px4_ros2_twin,
        ("crazyflie2",),
        "PX4 over ROS 2 px4_msgs (uXRCE-DDS), ctbr offboard (settings: px4_version=1.16 domain_id=0 ...)",
    ),
    "franka": Driver(
        "simreal.hardware.franka.driver:FrankaRobot",
        _serving("simreal.hardware.franka.twin:FrankaTwin", "ip"),
        ("franka",),
        "Franka Panda/FR3 and Hand through franky (settings: ip=172.16.0.2 relative_dynamics_factor=0.1 ...)",
    ),
}


def add_driver_arguments(p: Any, twin_help: str) -> None:
    """The ``--driver``, ``--driver-set`` and ``--twin`` options of every verb that opens a robot
    (``--set``, the old spelling of ``--driver-set``, kept for one release)."""
    p.add_argument("--driver", help="hardware driver (default: the one that drives the robot)")
    p.add_argument(
        "--driver-set",
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="driver setting, e.g. --driver-set port=/dev/ttyACM0 (repeatable; --set: the old spelling, "
        "kept for one release)",
    )
    p.add_argument("--twin", action="store_true", help=twin_help)
    p.add_argument(
        "--bag",
        metavar="DIR",
        help="record the driver's DDS traffic (every state received, every command "
        "sent) as a rosbag2 (MCAP) in DIR; DDS drivers only (unitree, px4-ros2)",
    )


def default_driver(robot: str, chosen: str | None) -> str:
    """``chosen``, or the driver whose row lists robot spec ``robot``; ConfigError naming
    ``--driver`` when none does."""
    from simreal.errors import ConfigError

    name = chosen or next((n for n, d in DRIVERS.items() if robot in d.robots), None)
    if name is None:
        raise ConfigError("--driver", f"no driver drives robot '{robot}' by default; pick one of {', '.join(DRIVERS)}")
    return name


def driver(name: str) -> Driver:
    try:
        return DRIVERS[name]
    except KeyError:
        raise UnknownNameError("driver", name, DRIVERS) from None


@contextlib.contextmanager
def open_robot(
    driver_name: str,
    robot: str,
    settings: Mapping[str, Any] | None = None,
    *,
    twin: bool = False,
    bag: str | None = None,
) -> Iterator[Robot]:
    """A connected robot of ``driver_name`` for the robot spec ``robot``; on exit it sends its
    safe command and disconnects (and the twin, if any, stops).

    ``bag``: a rosbag2 folder (MCAP) to create, recording the driver's wire from before
    ``connect()`` to after the safe command (:class:`simreal.deploy.bag.BagRecorder`); a
    ConfigError naming ``--bag`` when the driver's wire is not DDS."""
    from simreal.config import build
    from simreal.errors import ConfigError

    entry = driver(driver_name)
    if robot in {r for d in DRIVERS.values() for r in d.robots} and robot not in entry.robots:
        raise ConfigError(
            "--driver",
            f"driver '{driver_name}' drives {', '.join(entry.robots)}, not robot '{robot}'; "
            f"robot '{robot}' is driven by {default_driver(robot, None)}",
        )
    cls = entry.robot_class()
    with contextlib.ExitStack() as stack:
        data = {"robot": robot, **(settings or {})}
        if twin:
            data.update(stack.enter_context(entry.twin(robot)))
        r = cls(build(cls.config_class, data, prefix="driver"))
        if bag:
            topics = r.ros_topics()
            if not topics:
                raise ConfigError(
                    "--bag",
                    f"driver '{driver_name}' speaks no DDS (ROS 2) wire to record; "
                    f"rosbag2 recording takes a DDS driver (unitree)",
                )
            from simreal.deploy.bag import BagRecorder
            from simreal.deploy.ros_types import ros_type_name

            rec = stack.enter_context(BagRecorder(bag, classes=tuple(topics.values())))
            for topic, msg in topics.items():
                rec.add_topic(topic, ros_type_name(msg))
            r.wire_tap = lambda topic, payload: rec.write(topic, payload, time.time_ns())
        with r:
            yield r
