"""The PX4 twin: a MuJoCo quadrotor behind a MAVLink endpoint that answers as PX4 does.

The driver (:class:`simreal.hardware.px4.mavlink.PX4Robot`), MAVSDK, QGroundControl or a
pymavlink script reach it over UDP on localhost as they reach PX4 SITL; behind it the robot
spec's model (the rehearsal robot of :mod:`simreal.deploy.sim_robot`, in ``ctbr`` mode: every
set-point goes through the onboard body-rate loop of :mod:`simreal.quadrotor_control`) flies::

    $ python -m simreal.hardware.px4.mavlink_twin --robot crazyflie2
    PX4 twin of crazyflie2 on udp 127.0.0.1:40123 (connection=udpout:127.0.0.1:40123); Ctrl-C stops

    >>> with PX4Twin("crazyflie2") as twin, PX4Robot(PX4Config("crazyflie2", connection=twin.connection)) as px4:
    ...     px4.observation()["pos_w"]

What it speaks (MAVLink 2, ``common``; system 1, component 1, like PX4 with ``MAV_SYS_ID`` 1):

- HEARTBEAT at 1 Hz: ``MAV_TYPE_QUADROTOR``, ``MAV_AUTOPILOT_PX4``, ``base_mode`` with
  CUSTOM_MODE_ENABLED and SAFETY_ARMED when armed, ``custom_mode`` PX4's (main, sub) mode;
- ATTITUDE_QUATERNION (with the body rates) and LOCAL_POSITION_NED at the intervals
  ``MAV_CMD_SET_MESSAGE_INTERVAL`` asks for (none before; -1 stops one), in NED / FRD
  (:func:`~simreal.ned_frames.swap_attitude` and friends; the twin's world is ENU:
  x east, y north), from the simulation's true state; ``time_boot_ms`` counts from the twin's
  start. Another message id gets FAILED, as PX4 answers for a stream it does not have;
- COMMAND_LONG, each answered with COMMAND_ACK: ``SET_MESSAGE_INTERVAL`` here, the rest as
  PX4's commander answers them (:mod:`~simreal.hardware.px4.autopilot`); a command for another
  system or component FAILED;
- SET_ATTITUDE_TARGET with the attitude ignored (``type_mask`` bit 128): FRD body rates and
  thrust in [0, 1] of the rotors' summed limit, the ctbr command ``(thrust * sum f_max, FLU
  rates)``. Set-points with an attitude are counted in ``ignored`` (the twin has no attitude
  loop).

The vehicle and its commander: :mod:`~simreal.hardware.px4.autopilot`. Needs MuJoCo (the
simulation side).
"""

from __future__ import annotations

import argparse
import math
import select
import time
from collections.abc import Sequence

from simreal.hardware.px4.autopilot import PX4Autopilot
from simreal.hardware.px4.mavlink import custom_mode, mavlink, open_link
from simreal.hardware.twin_runtime import serve_until_interrupted
from simreal.ned_frames import swap_attitude, swap_frd_flu, swap_ned_enu
from simreal.robot_spec import RobotSpec

#: The message ids the twin can stream.
STREAMS = (mavlink.MAVLINK_MSG_ID_ATTITUDE_QUATERNION, mavlink.MAVLINK_MSG_ID_LOCAL_POSITION_NED)


class PX4Twin(PX4Autopilot):
    """The quadrotor behind a MAVLink UDP endpoint (see module docstring).

    Args:
      robot: a quadrotor robot spec name or path.
      host, port: where the twin listens (port 0: a free one; ``connection`` names it).
      start_pos_w: where the vehicle is held before the hand-over, ENU [m].
      offboard_loss_s: set-point silence after which OFFBOARD fails over to AUTO.LAND [s].
    """

    def __init__(
        self,
        robot: str | RobotSpec = "crazyflie2",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        start_pos_w: Sequence[float] = (0.0, 0.0, 1.0),
        offboard_loss_s: float = 1.0,
    ):
        self.system_id, self.component_id = 1, 1
        self.conn = open_link(f"udpin:{host}:{port}", self.system_id, self.component_id)
        self.port = self.conn.port.getsockname()[1]
        self.connection = f"udpout:{host}:{self.port}"
        super().__init__(robot, start_pos_w, offboard_loss_s, f"px4-twin {self.port}")
        self.intervals: dict[int, float] = {}  # message id -> interval [s]
        self._due: dict[int, float] = {}

    def _release(self) -> None:
        self.conn.close()

    # -- the wire ------------------------------------------------------------------------------
    def _serve(self) -> None:
        beat_at = -math.inf
        while not self._stop.is_set():
            now = time.monotonic()
            wait = min([0.05, beat_at + 1.0 - now] + [t - now for t in self._due.values()])
            if wait > 0:
                select.select([self.conn.port], [], [], wait)
            with self.lock:
                self._advance()
                peers = len(self.conn.clients)
                while (m := self.conn.recv_match(blocking=False)) is not None:
                    self._answer(m)
                now = time.monotonic()
                # PX4 beats at 1 Hz whoever listens; a new peer also gets one at once, so a
                # driver's connect() does not wait up to a second for it
                if now - beat_at >= 1.0 or len(self.conn.clients) > peers:
                    self._heartbeat()
                    beat_at = now
                for msg_id, due in list(self._due.items()):
                    if now >= due:
                        self._send_stream(msg_id)
                        interval = self.intervals[msg_id]
                        self._due[msg_id] = due + interval if now - due < interval else now + interval

    def _heartbeat(self) -> None:
        base = mavlink.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED | (mavlink.MAV_MODE_FLAG_SAFETY_ARMED if self.armed else 0)
        self.conn.mav.heartbeat_send(
            mavlink.MAV_TYPE_QUADROTOR,
            mavlink.MAV_AUTOPILOT_PX4,
            base,
            custom_mode(*self.mode),
            mavlink.MAV_STATE_ACTIVE if self.armed else mavlink.MAV_STATE_STANDBY,
        )

    def _send_stream(self, msg_id: int) -> None:
        s = self.sim.true_state()
        t_ms = int(self.sim.time_s * 1e3)
        if msg_id == mavlink.MAVLINK_MSG_ID_ATTITUDE_QUATERNION:
            self.conn.mav.attitude_quaternion_send(t_ms, *swap_attitude(s["quat_wxyz"]), *swap_frd_flu(s["ang_vel_b"]))
        else:
            self.conn.mav.local_position_ned_send(t_ms, *swap_ned_enu(s["pos_w"]), *swap_ned_enu(s["lin_vel_w"]))

    def _for_me(self, m) -> bool:
        return m.target_system == self.system_id and m.target_component in (self.component_id, 0)

    def _answer(self, m) -> None:
        kind = m.get_type()
        if kind == "SET_ATTITUDE_TARGET":
            if not self._for_me(m) or not m.type_mask & mavlink.ATTITUDE_TARGET_TYPEMASK_ATTITUDE_IGNORE:
                self.ignored += 1
                return
            self.take_setpoint(m.thrust, [m.body_roll_rate, m.body_pitch_rate, m.body_yaw_rate])
        elif kind == "COMMAND_LONG":
            result = self._run(m) if self._for_me(m) else mavlink.MAV_RESULT_FAILED
            self.conn.mav.command_ack_send(
                m.command, result, target_system=m.get_srcSystem(), target_component=m.get_srcComponent()
            )

    def _run(self, m) -> int:
        """One COMMAND_LONG: a stream's interval here, the rest the commander's; its MAV_RESULT."""
        if m.command != mavlink.MAV_CMD_SET_MESSAGE_INTERVAL:
            return self.run_command(m.command, [m.param1, m.param2, m.param3, m.param4, m.param5, m.param6, m.param7])
        msg_id, interval_us = int(m.param1), m.param2
        if msg_id not in STREAMS:
            return mavlink.MAV_RESULT_FAILED
        if interval_us < 0:
            self.intervals.pop(msg_id, None)
            self._due.pop(msg_id, None)
        elif interval_us > 0:
            self.intervals[msg_id] = interval_us / 1e6
            self._due[msg_id] = time.monotonic()
        return mavlink.MAV_RESULT_ACCEPTED


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the twin of ``--robot`` until Ctrl-C, printing its connection string first."""
    ap = argparse.ArgumentParser(prog="python -m simreal.hardware.px4.mavlink_twin", description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default="crazyflie2", help="quadrotor robot spec name or path (default crazyflie2)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="UDP port (default: a free one; PX4 SITL's is 14580)")
    args = ap.parse_args(argv)
    with PX4Twin(args.robot, host=args.host, port=args.port) as twin:
        serve_until_interrupted(
            f"PX4 twin of {twin.spec.name} on udp {args.host}:{twin.port} (connection={twin.connection}); Ctrl-C stops"
        )


if __name__ == "__main__":
    main()
