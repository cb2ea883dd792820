"""The Feetech serial bus (STS/SMS servos, protocol 0): packets, the STS3215 registers, a master.

Wire format (Feetech's SCS/STS manual; the same as Dynamixel protocol 1.0), bytes::

    instruction:  FF FF id len inst p_1 .. p_n chk      len = n + 2
    status:       FF FF id len err  p_1 .. p_n chk      err: the servo's error bits
    chk = ~(id + len + inst|err + p_1 + .. + p_n) & 0xFF

======================  ====  ===============================  =============================
instruction             inst  params                           answer
======================  ====  ===============================  =============================
PING                    0x01  -                                status, no params
READ                    0x02  addr, n                          status with n register bytes
WRITE                   0x03  addr, data...                    status, no params
SYNC_READ (id 0xFE)     0x82  addr, n, id_1 .. id_k            k status packets, in that order
SYNC_WRITE (id 0xFE)    0x83  addr, n, (id, n data bytes)...   none
======================  ====  ===============================  =============================

Registers are little-endian (protocol 0; protocol 1 servos, the SCS series, are big-endian and
are not served here). Signed registers are sign-magnitude, not two's complement: bit 15 is the
direction of a position or speed, bit 11 of the homing offset, bit 10 of the load.

Why not Feetech's ``scservo_sdk``: its reads poll a zero-timeout port in a busy loop against the
wall clock, its packet timeout is the one LeRobot monkeypatches, its byte order is global state,
and it is a master only, while the twin (:mod:`simreal.hardware.feetech.twin`) needs the servo
side. So one codec here serves both, over pyserial; ``tests/hardware/test_feetech.py`` checks it against
hand-computed bytes and drives the twin with the SDK as an independent master.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from simreal.hardware.robot import HardwareError

if TYPE_CHECKING:
    import serial

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
#: Longest packet a servo takes (Feetech's SDK buffers).
MAX_PACKET = 250
#: Encoder steps per turn of the STS3215 (12 bit).
STEPS_PER_TURN = 4096
#: Model number register value of an STS3215 (LeRobot's ``MODEL_NUMBER_TABLE``).
STS3215_MODEL = 777


class Instruction(enum.IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


#: The STS3215 registers used here: name -> (address, size in bytes); LeRobot's names and
#: ``STS_SMS_SERIES_CONTROL_TABLE``. Addresses < 40 are EPROM (written with Lock = 0).
STS3215: dict[str, tuple[int, int]] = {
    "Model_Number": (3, 2),
    "ID": (5, 1),
    "Return_Delay_Time": (7, 1),  # x 2 us
    "Min_Position_Limit": (9, 2),  # steps
    "Max_Position_Limit": (11, 2),  # steps
    "Max_Torque_Limit": (16, 2),  # 0.1 % of stall torque
    "Phase": (18, 1),  # bit 4: angle feedback mode
    "P_Coefficient": (21, 1),
    "D_Coefficient": (22, 1),
    "I_Coefficient": (23, 1),
    "Protection_Current": (28, 2),  # x 6.5 mA
    "Homing_Offset": (31, 2),  # steps; Present_Position = encoder - Homing_Offset
    "Operating_Mode": (33, 1),  # 0: position servo
    "Overload_Torque": (36, 1),  # % of stall torque
    "Torque_Enable": (40, 1),
    "Acceleration": (41, 1),  # x 100 steps/s^2
    "Goal_Position": (42, 2),  # steps
    "Lock": (55, 1),  # 1: EPROM write-protected
    "Present_Position": (56, 2),  # steps
    "Present_Velocity": (58, 2),  # steps/s
    "Present_Load": (60, 2),  # 0.1 % of stall torque
    "Present_Voltage": (62, 1),  # 0.1 V
    "Present_Temperature": (63, 1),  # deg C
    "Maximum_Acceleration": (85, 1),
}

#: Sign-magnitude registers: name -> index of the direction bit (LeRobot's encodings table).
SIGN_BIT: dict[str, int] = {
    "Homing_Offset": 11,
    "Goal_Position": 15,
    "Present_Position": 15,
    "Present_Velocity": 15,
    "Present_Load": 10,
}

ERROR_BITS: dict[int, str] = {
    0x01: "input voltage",
    0x02: "angle sensor",
    0x04: "overheat",
    0x08: "overcurrent",
    0x20: "overload",
}


def checksum(body: bytes) -> int:
    """``~(sum of id, length, instruction/error and params) & 0xFF``."""
    return ~sum(body) & 0xFF


def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    """``|value|`` with bit ``sign_bit`` set when ``value < 0``; ValueError if ``|value|`` needs that bit."""
    if abs(value) >= 1 << sign_bit:
        raise ValueError(f"{value} does not fit in {sign_bit} magnitude bits")
    return (1 << sign_bit) | -value if value < 0 else value


def decode_sign_magnitude(raw: int, sign_bit: int) -> int:
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw >> sign_bit & 1 else magnitude


def encode_register(name: str, value: int) -> bytes:
    """The register's bytes for ``value`` (sign-magnitude where :data:`SIGN_BIT` says, little-endian)."""
    size = STS3215[name][1]
    raw = encode_sign_magnitude(int(value), SIGN_BIT[name]) if name in SIGN_BIT else int(value)
    if not 0 <= raw < 1 << 8 * size:
        raise ValueError(f"{name}: {value} does not fit in {size} byte(s)")
    return raw.to_bytes(size, "little")


def decode_register(name: str, data: bytes) -> int:
    raw = int.from_bytes(data, "little")
    return decode_sign_magnitude(raw, SIGN_BIT[name]) if name in SIGN_BIT else raw


def register_span(names: Sequence[str]) -> tuple[int, int]:
    """(address, length) of the contiguous block holding ``names``; ValueError if it has gaps."""
    regs = sorted(STS3215[n] for n in names)
    for (a, n), (b, _) in zip(regs, regs[1:]):
        if a + n != b:
            raise ValueError(f"registers {list(names)} are not contiguous")
    return regs[0][0], regs[-1][0] + regs[-1][1] - regs[0][0]


@dataclasses.dataclass(frozen=True)
class Packet:
    """One packet: ``code`` is the instruction (master to servo) or the error bits (servo to master)."""

    servo_id: int
    code: int
    params: bytes = b""

    def encode(self) -> bytes:
        body = bytes([self.servo_id, len(self.params) + 2, self.code]) + self.params
        return HEADER + body + bytes([checksum(body)])


class PacketReader:
    """Splits a byte stream into packets. Bytes before a header are skipped; a packet whose
    checksum fails is dropped whole (what the SDK does) and counted in ``corrupt``."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.corrupt = 0

    def feed(self, data: bytes) -> None:
        self.buf += data

    def next(self) -> Packet | None:
        """The next whole packet, or None until more bytes arrive."""
        while True:
            start = self.buf.find(HEADER)
            if start < 0:  # keep a trailing 0xFF: it may start a header
                del self.buf[: -1 if self.buf.endswith(b"\xff") else len(self.buf)]
                return None
            del self.buf[:start]
            if len(self.buf) < 4:
                return None
            length = self.buf[3]
            if self.buf[2] == 0xFF or not 2 <= length <= MAX_PACKET - 4:  # FF FF FF preamble, bad length
                del self.buf[0]
                continue
            if len(self.buf) < length + 4:
                return None
            raw = bytes(self.buf[: length + 4])
            del self.buf[: length + 4]
            if raw[-1] != checksum(raw[2:-1]):
                self.corrupt += 1
                continue
            return Packet(raw[2], raw[4], raw[5:-1])


def error_text(bits: int) -> str:
    return ", ".join(txt for b, txt in ERROR_BITS.items() if bits & b) or f"error bits {bits:#04x}"


class FeetechBus:
    """The master on one Feetech bus: each call is one transaction, retried on a lost or
    corrupt answer, then :class:`HardwareError` naming the port and the servo.

    Args:
      port: serial device (``/dev/ttyACM0``, the twin's pseudo-terminal).
      baudrate: [bit/s]; STS3215s ship at 1 Mbit/s.
      timeout_s: how long a status packet may take [s].
      retries: extra tries of a transaction whose answer was lost or corrupt.
      names: servo id -> motor name, for messages.
    """

    def __init__(
        self,
        port: str,
        *,
        baudrate: int = 1_000_000,
        timeout_s: float = 0.1,
        retries: int = 2,
        names: Mapping[int, str] | None = None,
    ):
        self.port, self.baudrate, self.timeout_s, self.retries = port, baudrate, timeout_s, retries
        self.names = dict(names or {})
        self.reader = PacketReader()
        self._serial: serial.Serial | None = None

    def open(self) -> None:
        import serial  # pyserial, the [so100] extra

        try:
            self._serial = serial.Serial(self.port, self.baudrate, timeout=self.timeout_s)
        except (serial.SerialException, OSError) as e:
            raise HardwareError(f"Feetech bus {self.port}: cannot open the port ({e})") from None

    def close(self) -> None:
        if self._serial is not None:
            self._serial.close()
            self._serial = None

    def servo(self, servo_id: int) -> str:
        name = self.names.get(servo_id)
        return f"servo id {servo_id}" + (f" ({name})" if name else "")

    # -- transactions --------------------------------------------------------------------------
    def ping(self, servo_id: int) -> bool:
        """Whether ``servo_id`` answers a PING (after the retries); HardwareError on error bits."""
        answers, _ = self._exchange(Packet(servo_id, Instruction.PING), [servo_id], 0)
        if servo_id in answers and answers[servo_id].code:
            err = error_text(answers[servo_id].code)
            raise HardwareError(f"Feetech bus {self.port}: {self.servo(servo_id)} reports {err}")
        return servo_id in answers

    def read(self, servo_id: int, name: str) -> int:
        address, size = STS3215[name]
        p = self._transact(Packet(servo_id, Instruction.READ, bytes([address, size])), [servo_id], size, f"READ {name}")
        return decode_register(name, p[servo_id].params)

    def write(self, servo_id: int, name: str, value: int) -> None:
        packet = Packet(servo_id, Instruction.WRITE, bytes([STS3215[name][0]]) + encode_register(name, value))
        self._transact(packet, [servo_id], 0, f"WRITE {name}")

    def sync_read(self, ids: Sequence[int], names: Sequence[str]) -> dict[str, list[int]]:
        """The contiguous registers ``names`` of every servo in ``ids``, in one SYNC_READ:
        ``{name: [value of ids[0], ...]}``."""
        address, length = register_span(names)
        packet = Packet(BROADCAST_ID, Instruction.SYNC_READ, bytes([address, length, *ids]))
        answers = self._transact(packet, ids, length, f"SYNC_READ {'+'.join(names)}")
        out: dict[str, list[int]] = {}
        for n in names:
            a, size = STS3215[n][0] - address, STS3215[n][1]
            out[n] = [decode_register(n, answers[i].params[a : a + size]) for i in ids]
        return out

    def sync_write(self, name: str, values: Mapping[int, int]) -> None:
        """Register ``name`` of each servo id to its value, in one SYNC_WRITE (no answer)."""
        address, size = STS3215[name]
        params = bytes([address, size]) + b"".join(bytes([i]) + encode_register(name, v) for i, v in values.items())
        self._send(Packet(BROADCAST_ID, Instruction.SYNC_WRITE, params))

    # -- the wire ------------------------------------------------------------------------------
    def _send(self, packet: Packet) -> None:
        if self._serial is None:
            raise HardwareError(f"Feetech bus {self.port}: the port is not open")
        with self._link():
            self._serial.reset_input_buffer()  # a late answer to an earlier try must not answer this one
            self._serial.write(packet.encode())

    @contextlib.contextmanager
    def _link(self) -> Iterator[None]:
        """A failure of the serial link itself (a USB adapter unplugged, the port gone: pyserial's
        SerialException, an OSError, termios.error) as a HardwareError: the driver counts it as a
        failed read, so the watchdog acts, and the safe command's own failure is one line."""
        import termios

        import serial

        try:
            yield
        except (serial.SerialException, OSError, termios.error) as e:
            raise HardwareError(f"Feetech bus {self.port}: the serial link failed ({e})") from None

    def _exchange(self, packet: Packet, ids: Sequence[int], n_params: int) -> tuple[dict[int, Packet], bool]:
        """Send ``packet`` and collect the status packets of ``ids`` (each ``n_params`` long), up
        to ``1 + retries`` tries: (answers, whether the last try ended on a corrupt packet)."""
        for _ in range(1 + self.retries):
            self._send(packet)
            assert self._serial is not None  # _send raised HardwareError if the port is not open
            self.reader.buf.clear()
            answers: dict[int, Packet] = {}
            corrupt = self.reader.corrupt
            deadline = time.monotonic() + self.timeout_s
            while len(answers) < len(ids) and self.reader.corrupt == corrupt and time.monotonic() < deadline:
                # the bytes still due: one read that blocks until they are in (or timeout_s), not a poll
                due = (len(ids) - len(answers)) * (6 + n_params) - len(self.reader.buf)
                with self._link():
                    self.reader.feed(self._serial.read(max(1, due)))
                while (p := self.reader.next()) is not None:
                    # another servo's packet, or one of the wrong shape: a late answer to an
                    # earlier transaction (a PING retried while a servo or a twin was slow to
                    # answer gets its answers after the next READ is out), no answer to this one
                    if p.servo_id in ids and len(p.params) == n_params:
                        answers[p.servo_id] = p
            if len(answers) == len(ids):
                break
        return answers, self.reader.corrupt != corrupt

    def _transact(self, packet: Packet, ids: Sequence[int], n_params: int, what: str) -> dict[int, Packet]:
        """:meth:`_exchange`, or HardwareError naming the first servo that did not answer."""
        answers, corrupt = self._exchange(packet, ids, n_params)
        if len(answers) == len(ids):
            return answers
        missing = next(i for i in ids if i not in answers)
        why = "a corrupt status packet" if corrupt else f"no answer within {self.timeout_s * 1e3:.0f} ms"
        raise HardwareError(
            f"Feetech bus {self.port}: {self.servo(missing)} gave {why} to {what} "
            f"({1 + self.retries} tries); check its power, cable and id"
        )
