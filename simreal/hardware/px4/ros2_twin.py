"""The PX4 twin on ROS 2 ``px4_msgs``: a MuJoCo quadrotor answering as PX4 behind MicroXRCEAgent.

The driver (:class:`simreal.hardware.px4.ros2.PX4Ros2Robot`) or a ROS 2 node finds it on a DDS
domain as it finds PX4's bridge; behind it the commander and vehicle of
:mod:`~simreal.hardware.px4.autopilot` fly (set-points through the onboard body-rate loop)::

    $ python -m simreal.hardware.px4.ros2_twin --domain-id 42 --px4-version 1.16
    PX4 1.16 twin of crazyflie2 on DDS domain 42 (loopback); Ctrl-C stops

    >>> with PX4Ros2Twin("crazyflie2", domain_id=42) as twin, \\
    ...         PX4Ros2Robot(PX4Ros2Config("crazyflie2", domain_id=42, loopback=True)) as px4:
    ...     px4.observation()["pos_w"]

What it speaks (topics of :mod:`~simreal.hardware.px4.ros2`, types of
:mod:`simreal.deploy.ros_types`):

- ``/fmu/out/vehicle_odometry`` at 100 Hz (the bridge's rate limit for it): the simulation's
  true state in NED / FRD, ``timestamp`` in µs since the twin started (PX4's boot clock);
- ``/fmu/out/vehicle_status`` (``_v1`` / ``_v4`` by ``px4_version``) at 5 Hz and after every
  command: arming and navigation state. Only the first nine fields, all any version shares: a
  ROS 2 node with a whole ``px4_msgs/VehicleStatus`` would not read it;
- ``/fmu/in/vehicle_command``: commands for system 1 (or 0) go to the commander, and each is
  answered on ``/fmu/out/vehicle_command_ack`` with its MAV_RESULT;
- ``/fmu/in/offboard_control_mode`` and ``/fmu/in/vehicle_rates_setpoint``: a rates set-point
  counts (for OFFBOARD's proof of life and as the command) only while the newest
  OffboardControlMode, at most :data:`~simreal.hardware.px4.autopilot.OFFBOARD_PROOF_S` old,
  asks for body rates; ``thrust_body`` z is minus the normalised thrust. Other set-points are
  counted in ``ignored``.

Needs MuJoCo (the simulation side) and cyclonedds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from simreal.config import domain_id_arg
from simreal.deploy import ros_types as R
from simreal.deploy.adapters import encode_state
from simreal.hardware.px4.autopilot import OFFBOARD_PROOF_S, PX4Autopilot
from simreal.hardware.px4.common import mode_name
from simreal.hardware.px4.ros2 import NAV_STATES, STATUS_TOPICS, TOPICS, px4_topics
from simreal.hardware.twin_runtime import serve_until_interrupted
from simreal.robot_spec import RobotSpec

ODOMETRY_PERIOD_S = 0.01
STATUS_PERIOD_S = 0.2
#: VehicleStatus.NAVIGATION_STATE_* by PX4's mode name (the driver's table, inverted).
NAV_STATE_OF = {name: n for n, name in NAV_STATES.items()}


class PX4Ros2Twin(PX4Autopilot):
    """The quadrotor behind px4_msgs topics on a DDS domain (see module docstring).

    Args:
      robot: a quadrotor robot spec name or path.
      domain_id: the DDS domain (ROS_DOMAIN_ID).
      px4_version: which release's topic names to use (``STATUS_TOPICS``).
      namespace: topic prefix (``/px4_1``), as PX4's ``uxrce_dds_ns``.
      loopback: discover and talk on 127.0.0.1 only.
      start_pos_w: where the vehicle is held before the hand-over, ENU [m].
      offboard_loss_s: set-point silence after which OFFBOARD fails over to AUTO.LAND [s].
    """

    def __init__(
        self,
        robot: str | RobotSpec = "crazyflie2",
        *,
        domain_id: int = 0,
        px4_version: str = "1.16",
        namespace: str = "",
        loopback: bool = True,
        start_pos_w: Sequence[float] = (0.0, 0.0, 1.0),
        offboard_loss_s: float = 1.0,
    ):
        from simreal.deploy.transport_dds import DdsTransport

        super().__init__(robot, start_pos_w, offboard_loss_s, f"px4-ros2-twin {domain_id}")
        self.domain_id, self.px4_version = domain_id, px4_version
        t = px4_topics(namespace, px4_version)
        self.transport = DdsTransport(domain_id, loopback=loopback)
        self.pubs = {
            k: self.transport.publisher(t[k], TOPICS[k][1], qos="best_effort") for k in ("odometry", "status", "ack")
        }
        # taken in this order from each batch of samples: what a driver sent just before a
        # command (the mode's heartbeat, then the set-point) is in place when the command runs
        for k, take, qos in (
            ("offboard", self._on_offboard, "best_effort"),
            ("rates", self._on_rates, "best_effort"),
            ("command", self._on_command, "reliable"),
        ):
            self.transport.subscribe(t[k], TOPICS[k][1], take, qos=qos)
        self.offboard: tuple[R.OffboardControlMode, float] | None = None
        self.commands = 0
        self._status_due = 0.0

    def _release(self) -> None:
        self.transport.close()

    def _boot_us(self) -> int:
        return int(self.sim.time_s * 1e6)

    # -- the wire ------------------------------------------------------------------------------
    def _serve(self) -> None:
        next_odom = time.monotonic()
        while not self._stop.is_set():
            self.transport.poll(max(0.0, min(next_odom, self._status_due) - time.monotonic()))
            now = time.monotonic()
            with self.lock:
                self._advance()
                if now >= next_odom:
                    self._send_odometry()
                    next_odom = max(next_odom + ODOMETRY_PERIOD_S, now)
                if now >= self._status_due:
                    self._send_status()

    def _send_odometry(self) -> None:
        """The true state as VehicleOdometry, by the deploy runner's encoder (NED / FRD)."""
        self.pubs["odometry"].publish(
            encode_state("px4_msgs/msg/VehicleOdometry", self.sim.true_state(), int(self.sim.time_s * 1e9), R.msg_class)
        )

    def _send_status(self) -> None:
        self.pubs["status"].publish(
            R.VehicleStatusHead(
                timestamp=self._boot_us(),
                arming_state=R.VehicleStatusHead.ARMING_STATE_ARMED if self.armed else 1,
                nav_state=NAV_STATE_OF[mode_name(*self.mode)],
            )
        )
        self._status_due = time.monotonic() + STATUS_PERIOD_S

    def _on_command(self, m: Any, t_rx: float, data: bytes) -> None:
        if m.target_system not in (0, 1):
            return  # another vehicle's: PX4's commander ignores it
        with self.lock:
            self._advance()
            result = self.run_command(m.command, [m.param1, m.param2, m.param3, m.param4, m.param5, m.param6, m.param7])
            self.commands += 1
            self.pubs["ack"].publish(
                R.VehicleCommandAck(
                    timestamp=self._boot_us(),
                    command=m.command,
                    result=result,
                    target_system=m.source_system,
                    target_component=m.source_component,
                    from_external=False,
                )
            )
            self._send_status()

    def _on_offboard(self, m: Any, t_rx: float, data: bytes) -> None:
        self.offboard = (m, t_rx)

    def _on_rates(self, m: Any, t_rx: float, data: bytes) -> None:
        ob = self.offboard
        if ob is None or not ob[0].body_rate or t_rx - ob[1] > OFFBOARD_PROOF_S:
            self.ignored += 1
            return
        with self.lock:
            self._advance()
            self.take_setpoint(-m.thrust_body[2], [m.roll, m.pitch, m.yaw])


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the twin until Ctrl-C, printing where it is first."""
    ap = argparse.ArgumentParser(prog="python -m simreal.hardware.px4.ros2_twin", description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default="crazyflie2", help="quadrotor robot spec name or path (default crazyflie2)")
    ap.add_argument("--domain-id", type=domain_id_arg, default=0, help="DDS domain, ROS_DOMAIN_ID (default 0)")
    ap.add_argument("--px4-version", default="1.16", choices=tuple(STATUS_TOPICS), help="topic names of this release")
    ap.add_argument("--namespace", default="", help="topic prefix, PX4's uxrce_dds_ns (default none)")
    ap.add_argument("--network", action="store_true", help="all interfaces (default: loopback only)")
    args = ap.parse_args(argv)
    with PX4Ros2Twin(
        args.robot,
        domain_id=args.domain_id,
        px4_version=args.px4_version,
        namespace=args.namespace,
        loopback=not args.network,
    ) as twin:
        serve_until_interrupted(
            f"PX4 {twin.px4_version} twin of {twin.spec.name} on DDS domain {twin.domain_id} "
            f"({'all interfaces' if args.network else 'loopback'}); Ctrl-C stops"
        )


if __name__ == "__main__":
    main()
