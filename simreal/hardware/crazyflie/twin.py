"""The Crazyflie twin: a MuJoCo Crazyflie that answers CRTP over UDP as the firmware does.

The wire is cflib's UDP link (``udp://HOST:PORT``, what Crazyflie SITL serves): one CRTP
packet per datagram, the header byte ``port << 4 | 0b1100 | channel`` then up to 30 bytes.
The driver (:class:`simreal.hardware.crazyflie.driver.CrazyflieRobot`), cfclient or any cflib script
connect to it unchanged; behind it the robot spec's model (the rehearsal robot of
:mod:`simreal.deploy.sim_robot`, ctbr through the onboard body-rate loop) flies::

    $ python -m simreal.hardware.crazyflie.twin --robot crazyflie2
    Crazyflie twin of crazyflie2 on udp://127.0.0.1:19850; Ctrl-C stops

This module is the fake device and does not import cflib: it is written from the firmware's
side of the protocol (Bitcraze's ``crtp``, ``log.c``, ``param_logic.c``, ``mem.c``,
``platformservice.c``, ``crtp_commander_rpyt.c``, ``commander.c``), so the tests check one
implementation against another. What it serves:

=====================  =========================================================================
port (channel)         answers
=====================  =========================================================================
LINKCTRL 15 (0, 1)     echo (0) returns the packet (cflib's latency pings); source (1) says
                       "Bitcraze Crazyflie"; a null packet (0xFF, a scan) gets one back
PLATFORM 13 (1)        protocol version (:data:`PROTOCOL_VERSION`)
MEM 4 (0)              number of memories: none
LOG 5 (0, 1, 2)        TOC v2 (:data:`LOG_TOC`: ``stateEstimate`` pose, velocity, quaternion;
                       ``gyro``); blocks v2: create, start (period in 10 ms), stop, delete,
                       reset, with the firmware's errno answers; data on channel 2 as
                       ``[block, time_ms (3 bytes), values in each variable's fetch type]``
PARAM 2 (0, 1, 2)      TOC v2 (:data:`PARAM_TOC`: ``flightmode.stabModeRoll/Pitch/Yaw``); read
                       ``[id, status 0, value]``; write sets and echoes ``[id, value]``
COMMANDER 3 (0)        RPYT ``<fffH`` roll, pitch, yaw, thrust, decoded as the firmware does
COMMANDER_GENERIC 7    the stop set-point (type 0): zero thrust
=====================  =========================================================================

Anything else is counted in ``ignored``. The RPYT decode, after ``crtp_commander_rpyt.c``:
thrust is locked until a packet with thrust 0 arrives; below 1000 it is 0, above 60000 it is
60000, and it means ``thrust / 65535`` of the rotors' summed limit (the firmware's battery
compensation makes it linear). In rate mode the body-rate set-point (FLU, deg/s) is
``(roll, -pitch, -yaw)``: the firmware's pitch rate is tracked against ``-gyro.y`` and the
legacy yaw rate input is inverted. In angle mode (the firmware's default for roll and pitch)
the set-point is refused and counted in ``unsupported``: the twin has no attitude loop.

The vehicle (:class:`~simreal.hardware.quadrotor_twin.QuadrotorTwin`) is held where it starts
(the rehearsal's hover hold) until the first set-point with thrust; then the commander
watchdog of ``commander.c`` applies: 0.5 s without a set-point, the vehicle is levelled (body
rates toward upright, the thrust kept); 2 s, the motors stop and thrust locks again. Disarming
does not exist on a brushed Crazyflie. Needs MuJoCo.
"""

from __future__ import annotations

import argparse
import select
import socket
import struct
import time
import zlib
from collections.abc import Sequence

import numpy as np

from simreal.hardware.quadrotor_twin import QuadrotorTwin
from simreal.hardware.twin_runtime import serve_until_interrupted
from simreal.robot_spec import RobotSpec
from simreal.rotations import quat_to_rotmat

# CRTP ports
LINKCTRL, PLATFORM, MEM, LOG, PARAM, COMMANDER, COMMANDER_GENERIC = 15, 13, 4, 5, 2, 3, 7
#: The CRTP protocol version the twin reports (cflib speaks the v2 TOC from 4 on).
PROTOCOL_VERSION = 10
#: Log variable types (``log.h``): id -> struct format.
LOG_TYPES = {1: "<B", 2: "<H", 3: "<I", 4: "<b", 5: "<h", 6: "<i", 7: "<f", 8: "<e"}
LOG_FLOAT, PARAM_UINT8 = 7, 0x08
#: The log TOC: (group, name); all stored as float.
LOG_TOC = tuple(("stateEstimate", n) for n in ("x", "y", "z", "vx", "vy", "vz", "qx", "qy", "qz", "qw")) + tuple(
    ("gyro", n) for n in ("x", "y", "z")
)
#: The parameter TOC: (group, name, default), uint8; RATE = 0, ANGLE = 1 (the firmware's defaults).
PARAM_TOC = (("flightmode", "stabModeRoll", 1), ("flightmode", "stabModePitch", 1), ("flightmode", "stabModeYaw", 0))
LOG_MAX_BLOCKS, LOG_MAX_OPS, LOG_MAX_DATA = 16, 128, 26
# errno values the firmware answers with
ENOENT, E2BIG, ENOEXEC, EEXIST = 2, 7, 8, 17
MIN_THRUST, MAX_THRUST = 1000, 60000
#: commander.c's watchdog: level after, stop the motors after [s].
WDT_STABILIZE_S, WDT_SHUTDOWN_S = 0.5, 2.0
#: How fast the stabilising watchdog levels the vehicle [1/s] (the firmware's roll/pitch attitude P gain, 6).
LEVEL_GAIN = 6.0


def header(port: int, channel: int) -> int:
    """The CRTP header byte (bits 2-3 set: the link's legacy bits)."""
    return (port & 0x0F) << 4 | 0x0C | (channel & 0x03)


def _toc_crc(entries: Sequence[bytes]) -> int:
    return zlib.crc32(b"".join(entries))


class CrazyflieTwin(QuadrotorTwin):
    """The Crazyflie behind a UDP CRTP endpoint (see module docstring).

    Args:
      robot: a quadrotor robot spec name or path.
      host, port: where the twin listens (port 0: a free one; ``uri`` names it).
      start_pos_w: where the vehicle is held before the first set-point [m].
      watchdog_s: set-point silence after which the vehicle is levelled, and its motors stopped [s].
    """

    def __init__(
        self,
        robot: str | RobotSpec = "crazyflie2",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        start_pos_w: Sequence[float] = (0.0, 0.0, 1.0),
        watchdog_s: tuple[float, float] = (WDT_STABILIZE_S, WDT_SHUTDOWN_S),
    ):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.uri = f"udp://{host}:{self.port}"
        super().__init__(robot, start_pos_w, f"crazyflie-twin {self.port}")  # released: thrust came
        self.client: tuple[str, int] | None = None
        self.log_toc = [bytes([LOG_FLOAT]) + f"{g}\0{n}\0".encode() for g, n in LOG_TOC]
        self.param_toc = [bytes([PARAM_UINT8]) + f"{g}\0{n}\0".encode() for g, n, _ in PARAM_TOC]
        self.params = [default for _, _, default in PARAM_TOC]
        self.blocks: dict[int, list[tuple[int, int]]] = {}  # block id -> [(variable id, fetch type)]
        self.periods: dict[int, float] = {}  # started block id -> period [s]
        self._due: dict[int, float] = {}
        self.stabilize_s, self.shutdown_s = watchdog_s
        self.thrust_locked = True
        self.rpyt = (0.0, 0.0, 0.0, 0)  # the newest RPYT packet's fields as they came
        self.unsupported = 0

    def _release(self) -> None:
        self.sock.close()

    # -- what tests and users look at ----------------------------------------------------------
    def param(self, name: str) -> int:
        """The value of parameter ``group.name`` as the firmware holds it now."""
        return self.params[[f"{g}.{n}" for g, n, _ in PARAM_TOC].index(name)]

    # -- the firmware --------------------------------------------------------------------------
    def _command(self, now: float) -> np.ndarray | None:
        """Before the first thrust: hold; then the set-point, under the commander's watchdog."""
        if not self.released:
            return None
        silent = now - self.setpoint_at
        if silent > self.shutdown_s:  # motors off; the next set-point finds thrust locked (_rpyt)
            return np.zeros(4)
        if silent > self.stabilize_s:  # level: turn body z toward world up (w = K e_z x up_b), yaw rate 0
            up_b = quat_to_rotmat(self.sim.true_state()["quat_wxyz"], np)[2]  # R^T e_z: world up, body frame
            rates = LEVEL_GAIN * np.cross([0.0, 0.0, 1.0], up_b)
            return np.array([self.setpoint[0], rates[0], rates[1], 0.0])
        return self.setpoint

    def _rpyt(self, data: bytes) -> None:
        """crtp_commander_rpyt.c's decode of the legacy set-point (module docstring)."""
        if len(data) < 14:
            self.ignored += 1
            return
        roll, pitch, yaw, raw = self.rpyt = struct.unpack("<fffH", data[:14])
        if time.monotonic() - self.setpoint_at > self.shutdown_s:  # the commander had shut down
            self.thrust_locked = True
        if raw == 0:
            self.thrust_locked = False
        if (
            self.param("flightmode.stabModeRoll")
            or self.param("flightmode.stabModePitch")
            or self.param("flightmode.stabModeYaw")
        ):
            self.unsupported += 1
            return
        thrust = 0 if self.thrust_locked or raw < MIN_THRUST else min(raw, MAX_THRUST)
        rates = np.radians([roll, -pitch, -yaw])
        self.setpoint = np.concatenate([[thrust / 65535 * self.full_thrust_n], rates])
        self.setpoint_at = time.monotonic()
        self.setpoints += 1
        self.released = self.released or thrust > 0

    # -- the wire ------------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            wait = min([0.05] + [t - now for t in self._due.values()])
            ready = select.select([self.sock], [], [], max(wait, 0.0))[0]
            with self.lock:
                self._advance()
                while ready:
                    try:
                        data, self.client = self.sock.recvfrom(64)
                    except BlockingIOError:
                        break
                    self._answer(data)
                    ready = select.select([self.sock], [], [], 0.0)[0]
                now = time.monotonic()
                for block, due in list(self._due.items()):
                    if now >= due:
                        self._send_block(block)
                        period = self.periods[block]
                        self._due[block] = due + period if now - due < period else now + period

    def _send(self, port: int, channel: int, payload: bytes) -> None:
        if self.client is not None:
            try:
                self.sock.sendto(bytes([header(port, channel)]) + payload, self.client)
            except OSError:  # the client went away; it may come back
                pass

    def _send_block(self, block: int) -> None:
        s = self.sim.true_state()
        values = np.concatenate(
            [s["pos_w"], s["lin_vel_w"], s["quat_wxyz"][[1, 2, 3, 0]], np.degrees(s["ang_vel_b"])]
        )  # in LOG_TOC's order
        t_ms = int(self.sim.time_s * 1e3) & 0xFFFFFF
        out = bytes([block]) + t_ms.to_bytes(3, "little")
        for var, fetch in self.blocks[block]:
            fmt = LOG_TYPES[fetch]
            out += struct.pack(fmt, float(values[var]) if fmt in ("<f", "<e") else int(values[var]))
        self._send(LOG, 2, out)

    def _answer(self, data: bytes) -> None:
        if not data:
            return
        port, channel, body = data[0] >> 4, data[0] & 0x03, data[1:]
        if data[0] == 0xFF:  # a null packet: cflib's scan probe
            assert self.client is not None  # _serve set it with the datagram answered here
            self.sock.sendto(b"\xff", self.client)
        elif port == LINKCTRL and channel == 0:
            self._send(LINKCTRL, 0, body)
        elif port == LINKCTRL and channel == 1:
            self._send(LINKCTRL, 1, b"Bitcraze Crazyflie")
        elif port == PLATFORM and channel == 1 and body[:1] == b"\x00":
            self._send(PLATFORM, 1, bytes([0, PROTOCOL_VERSION]))
        elif port == MEM and channel == 0 and body[:1] == b"\x01":
            self._send(MEM, 0, bytes([1, 0]))
        elif port in (LOG, PARAM) and channel == 0 and body:
            self._toc(port, body)
        elif port == LOG and channel == 1 and body:
            self._log_control(body)
        elif port == PARAM and channel in (1, 2) and len(body) >= 2:
            self._param(channel, body)
        elif port == COMMANDER and channel == 0:
            self._rpyt(body)
        elif port == COMMANDER_GENERIC and channel == 0 and body[:1] == b"\x00":  # stop
            self.setpoint, self.setpoint_at = np.zeros(4), time.monotonic()
            self.setpoints += 1
        else:
            self.ignored += 1

    def _toc(self, port: int, body: bytes) -> None:
        """TOC v2: info (3) -> count, CRC (and for the log its limits); item (2, id) -> type, names."""
        toc = self.log_toc if port == LOG else self.param_toc
        if body[0] == 3:
            extra = bytes([LOG_MAX_BLOCKS, LOG_MAX_OPS]) if port == LOG else b""
            self._send(port, 0, struct.pack("<BHI", 3, len(toc), _toc_crc(toc)) + extra)
        elif body[0] == 2 and len(body) >= 3:
            ident = body[1] | body[2] << 8
            if ident < len(toc):
                self._send(port, 0, bytes([2, body[1], body[2]]) + toc[ident])
        else:
            self.ignored += 1

    def _log_control(self, body: bytes) -> None:
        """log.c's control channel: every answer is ``[command, block, errno]``."""
        cmd, block = body[0], body[1] if len(body) > 1 else 0
        ret = 0
        if cmd == 6:  # CREATE_BLOCK_V2: (fetch type, id low, id high) per variable
            ops = [(body[i + 1] | body[i + 2] << 8, body[i] & 0x0F) for i in range(2, len(body) - 2, 3)]
            if block in self.blocks:
                ret = EEXIST
            elif len(self.blocks) >= LOG_MAX_BLOCKS:
                ret = E2BIG
            elif any(var >= len(LOG_TOC) or fetch not in LOG_TYPES for var, fetch in ops):
                ret = ENOENT
            elif sum(struct.calcsize(LOG_TYPES[f]) for _, f in ops) > LOG_MAX_DATA:
                ret = E2BIG
            else:
                self.blocks[block] = ops
        elif cmd == 3:  # START_LOGGING, period in 10 ms
            if block not in self.blocks or len(body) < 3:
                ret = ENOENT
            else:
                self.periods[block] = max(body[2], 1) * 0.01
                self._due[block] = time.monotonic()
        elif cmd in (4, 2):  # STOP_LOGGING, DELETE_BLOCK
            if block not in self.blocks:
                ret = ENOENT
            self.periods.pop(block, None)
            self._due.pop(block, None)
            if cmd == 2:
                self.blocks.pop(block, None)
        elif cmd == 5:  # RESET
            self.blocks.clear()
            self.periods.clear()
            self._due.clear()
        else:
            ret = ENOEXEC
        self._send(LOG, 1, bytes([cmd, block, ret]))

    def _param(self, channel: int, body: bytes) -> None:
        """param_logic.c: read -> ``[id, 0, value]``; write -> set, echo ``[id, value]``."""
        ident = body[0] | body[1] << 8
        if ident >= len(PARAM_TOC):
            self.ignored += 1
            return
        if channel == 2 and len(body) >= 3:
            self.params[ident] = body[2]
            self._send(PARAM, 2, body[:2] + bytes([self.params[ident]]))
        elif channel == 1:
            self._send(PARAM, 1, body[:2] + bytes([0, self.params[ident]]))


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the twin of ``--robot`` until Ctrl-C, printing its URI first."""
    ap = argparse.ArgumentParser(prog="python -m simreal.hardware.crazyflie.twin", description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default="crazyflie2", help="quadrotor robot spec name or path (default crazyflie2)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument(
        "--port", type=int, default=19850, help="UDP port (default 19850, where cflib's scan looks; 0: free)"
    )
    args = ap.parse_args(argv)
    with CrazyflieTwin(args.robot, host=args.host, port=args.port) as twin:
        serve_until_interrupted(f"Crazyflie twin of {twin.spec.name} on {twin.uri}; Ctrl-C stops")


if __name__ == "__main__":
    main()
