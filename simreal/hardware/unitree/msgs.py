"""Unitree's low-level DDS messages (``unitree_hg`` for G1 / H1-2, ``unitree_go`` for H1 / Go2)
and their CRC, written here instead of installed.

Why by hand: Unitree's Python SDK (``unitree_sdk2py``) is the only package that ships these
types, and its PyPI build pins ``cyclonedds==0.10.2``, which has no wheel and needs a Cyclone
DDS C source build (the SDK's most reported install failure). The types below are Unitree's
IDL (``unitree_sdk2py/idl/unitree_{hg,go}/msg/dds_``) field for field, with its DDS type names
(``unitree_hg::msg::dds_::LowCmd_`` ...), so the installed ``cyclonedds`` wheel matches the
robot's own readers and writers.

Two layouts of one message:

- the wire: XCDR1, little endian, each primitive aligned to its size from the payload's start
  (what :class:`cyclonedds.idl.IdlStruct` ``serialize`` writes);
- the C struct (natural alignment, structs padded to their alignment), which is what Unitree's
  CRC covers: the SDK packs the message with ``struct.pack`` formats that spell out exactly
  this layout (``'<2B2x' + 'B3x5fI' * 35 + '5I'`` for ``unitree_hg`` LowCmd) and runs
  ``crc32_core`` over every 32-bit word but the last (the ``crc`` field itself).

At 500 Hz the bindings' generic serializer is too slow (0.5 ms to serialize a LowCmd, more
to read a LowState, measured here), so the hot path holds a message as a numpy record in the
C layout (:meth:`Codec.zeros`, field access ``rec["motor_cmd"]["q"]``) and maps it to and from
the wire with one precomputed byte gather (:class:`Codec`); the IdlStruct classes give DDS
its type (names, XTypes information) and are the reference the tests compare the bytes with.
"""

# No ``from __future__ import annotations``: cyclonedds reads the field annotations as objects
# (as strings, ``types.uint8`` would resolve to the standard library's ``types``).
import dataclasses
import functools
import typing
import zlib

import cyclonedds.idl as idl
import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types
import numpy as np

from simreal.errors import SimrealError


class WireError(SimrealError):
    """A sample that is not the message it claims to be (encoding, size)."""


class CrcError(WireError):
    """A message whose ``crc`` field does not match its content."""


def _final_struct(cls: type) -> type:
    """``@dataclass @annotate.final @annotate.autoid("sequential")``, as Unitree's generated types."""
    return dataclasses.dataclass(annotate.final(annotate.autoid("sequential")(cls)))


# -- unitree_hg (G1, H1-2): unitree_sdk2py/idl/unitree_hg/msg/dds_ ---------------------------------
@_final_struct
class HgMotorCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorCmd_"):
    mode: types.uint8
    q: types.float32
    dq: types.float32
    tau: types.float32
    kp: types.float32
    kd: types.float32
    reserve: types.uint32


@_final_struct
class HgMotorState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorState_"):
    mode: types.uint8
    q: types.float32
    dq: types.float32
    ddq: types.float32
    tau_est: types.float32
    temperature: types.array[types.int16, 2]
    vol: types.float32
    sensor: types.array[types.uint32, 2]
    motorstate: types.uint32
    reserve: types.array[types.uint32, 4]


@_final_struct
class HgIMUState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.IMUState_"):
    quaternion: types.array[types.float32, 4]  # w, x, y, z
    gyroscope: types.array[types.float32, 3]  # [rad/s], IMU frame
    accelerometer: types.array[types.float32, 3]  # [m/s^2], specific force
    rpy: types.array[types.float32, 3]
    temperature: types.int16


@_final_struct
class HgLowCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowCmd_"):
    mode_pr: types.uint8
    mode_machine: types.uint8
    motor_cmd: types.array[HgMotorCmd_, 35]
    reserve: types.array[types.uint32, 4]
    crc: types.uint32


@_final_struct
class HgLowState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowState_"):
    version: types.array[types.uint32, 2]
    mode_pr: types.uint8
    mode_machine: types.uint8
    tick: types.uint32
    imu_state: HgIMUState_
    motor_state: types.array[HgMotorState_, 35]
    wireless_remote: types.array[types.uint8, 40]
    reserve: types.array[types.uint32, 4]
    crc: types.uint32


# -- unitree_go (H1, Go2, B2): unitree_sdk2py/idl/unitree_go/msg/dds_ ---------------------------------
@_final_struct
class GoMotorCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.MotorCmd_"):
    mode: types.uint8
    q: types.float32
    dq: types.float32
    tau: types.float32
    kp: types.float32
    kd: types.float32
    reserve: types.array[types.uint32, 3]


@_final_struct
class GoMotorState_(idl.IdlStruct, typename="unitree_go.msg.dds_.MotorState_"):
    mode: types.uint8
    q: types.float32
    dq: types.float32
    ddq: types.float32
    tau_est: types.float32
    q_raw: types.float32
    dq_raw: types.float32
    ddq_raw: types.float32
    temperature: types.uint8
    lost: types.uint32
    reserve: types.array[types.uint32, 2]


@_final_struct
class GoIMUState_(idl.IdlStruct, typename="unitree_go.msg.dds_.IMUState_"):
    quaternion: types.array[types.float32, 4]
    gyroscope: types.array[types.float32, 3]
    accelerometer: types.array[types.float32, 3]
    rpy: types.array[types.float32, 3]
    temperature: types.uint8


@_final_struct
class GoBmsCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.BmsCmd_"):
    off: types.uint8
    reserve: types.array[types.uint8, 3]


@_final_struct
class GoBmsState_(idl.IdlStruct, typename="unitree_go.msg.dds_.BmsState_"):
    version_high: types.uint8
    version_low: types.uint8
    status: types.uint8
    soc: types.uint8
    current: types.int32
    cycle: types.uint16
    bq_ntc: types.array[types.uint8, 2]
    mcu_ntc: types.array[types.uint8, 2]
    cell_vol: types.array[types.uint16, 15]


@_final_struct
class GoLowCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.LowCmd_"):
    head: types.array[types.uint8, 2]
    level_flag: types.uint8
    frame_reserve: types.uint8
    sn: types.array[types.uint32, 2]
    version: types.array[types.uint32, 2]
    bandwidth: types.uint16
    motor_cmd: types.array[GoMotorCmd_, 20]
    bms_cmd: GoBmsCmd_
    wireless_remote: types.array[types.uint8, 40]
    led: types.array[types.uint8, 12]
    fan: types.array[types.uint8, 2]
    gpio: types.uint8
    reserve: types.uint32
    crc: types.uint32


@_final_struct
class GoLowState_(idl.IdlStruct, typename="unitree_go.msg.dds_.LowState_"):
    head: types.array[types.uint8, 2]
    level_flag: types.uint8
    frame_reserve: types.uint8
    sn: types.array[types.uint32, 2]
    version: types.array[types.uint32, 2]
    bandwidth: types.uint16
    imu_state: GoIMUState_
    motor_state: types.array[GoMotorState_, 20]
    bms_state: GoBmsState_
    foot_force: types.array[types.int16, 4]
    foot_force_est: types.array[types.int16, 4]
    tick: types.uint32
    wireless_remote: types.array[types.uint8, 40]
    bit_flag: types.uint8
    adc_reel: types.float32
    temperature_ntc1: types.uint8
    temperature_ntc2: types.uint8
    power_v: types.float32
    power_a: types.float32
    fan_frequency: types.array[types.uint16, 4]
    reserve: types.uint32
    crc: types.uint32


# -- layouts ---------------------------------------------------------------------------------------
_PRIMITIVES = {
    "uint8": "u1",
    "int8": "i1",
    "uint16": "<u2",
    "int16": "<i2",
    "uint32": "<u4",
    "int32": "<i4",
    "float32": "<f4",
}
#: XCDR1 / plain XCDR2 little-endian encapsulation ids (identical layouts for these types: none
#: holds an 8-byte primitive, where the two differ in alignment).
_LE_ENCODINGS = (b"\x00\x01", b"\x00\x07")


def _field_type(ann: typing.Any) -> tuple[typing.Any, int]:
    """(element type, count) of a field annotation: a primitive name or an IdlStruct class."""
    if typing.get_origin(ann) is typing.Annotated:
        base, meta = typing.get_args(ann)[:2]
        if isinstance(meta, types.array):
            elem, _ = _field_type(meta.subtype)
            return elem, meta.length
        if isinstance(meta, str) and meta in _PRIMITIVES:
            return meta, 1
    if isinstance(ann, type) and issubclass(ann, idl.IdlStruct):
        return ann, 1
    raise TypeError(f"unsupported IDL field type {ann!r}")


def _fields(cls: type) -> list[tuple[str, typing.Any, int]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f.name, *_field_type(hints[f.name])) for f in dataclasses.fields(cls)]


@functools.cache
def c_dtype(cls: type) -> np.dtype:
    """The message's C struct as a numpy dtype (natural alignment, nested structs padded)."""
    out = []
    for name, elem, n in _fields(cls):
        sub = np.dtype(_PRIMITIVES[elem]) if isinstance(elem, str) else c_dtype(elem)
        out.append((name, sub, (n,)) if n > 1 else (name, sub))
    return np.dtype(out, align=True)


def _leaves(cls: type, dt: np.dtype, base: int):
    """(C offset, size) of every primitive in declaration order (the wire's order)."""
    fields = dt.fields
    assert fields is not None  # a struct dtype: c_dtype(cls), or a nested struct's
    for name, elem, n in _fields(cls):
        sub, off = fields[name][0], base + fields[name][1]
        item = sub.base if sub.shape else sub
        for i in range(n):
            if isinstance(elem, str):
                yield off + i * item.itemsize, item.itemsize
            else:
                yield from _leaves(elem, item, off + i * item.itemsize)


@dataclasses.dataclass(frozen=True)
class Codec:
    """One message type: its C-layout record and the byte maps to and from the wire.

    ``wire_from_c[k]`` is the C-layout byte that wire byte ``k`` (after the 4-byte
    encapsulation header) copies, ``c_from_wire[j]`` the wire byte C byte ``j`` copies; padding
    points at an appended zero byte.
    """

    idl: type[idl.IdlStruct]
    dtype: np.dtype
    wire_from_c: np.ndarray
    c_from_wire: np.ndarray

    @property
    def typename(self) -> str:
        """The DDS type name (``unitree_hg::msg::dds_::LowCmd_``)."""
        return self.idl.__idl_typename__.replace(".", "::")

    def zeros(self) -> np.ndarray:
        """A zeroed message record (shape ``()``)."""
        return np.zeros((), self.dtype)

    def encode(self, rec: np.ndarray) -> bytes:
        """The wire bytes of ``rec``: XCDR1 little-endian header plus payload."""
        c = np.frombuffer(rec.tobytes() + b"\0", np.uint8)
        return b"\x00\x01\x00\x00" + c[self.wire_from_c].tobytes()

    def decode(self, data: bytes, *, check_crc: bool = False) -> np.ndarray:
        """The record of one wire sample; :class:`WireError` if it is not this message,
        :class:`CrcError` if ``check_crc`` and its ``crc`` field does not match."""
        if data[:2] not in _LE_ENCODINGS or len(data) < 4 + len(self.wire_from_c):
            raise WireError(
                f"{self.typename}: not a little-endian CDR sample of {4 + len(self.wire_from_c)} "
                f"bytes (encoding {data[:2].hex()}, {len(data)} bytes)"
            )
        w = np.frombuffer(data[4 : 4 + len(self.wire_from_c)] + b"\0", np.uint8)
        rec = np.frombuffer(w[self.c_from_wire].tobytes(), self.dtype).reshape(())
        if check_crc and not crc_ok(rec):
            raise CrcError(f"{self.typename}: crc {int(rec['crc'])} does not match its content")
        return rec


@functools.cache
def codec(cls: type[idl.IdlStruct]) -> Codec:
    """The :class:`Codec` of an IdlStruct message class above."""
    dt = c_dtype(cls)
    wire: list[int] = []
    c_from_wire = np.full(dt.itemsize, -1, np.intp)
    for c_off, size in _leaves(cls, dt, 0):
        pad = -len(wire) % size  # XCDR1: a primitive is aligned to its size from the payload's start
        wire.extend([dt.itemsize] * pad)
        c_from_wire[c_off : c_off + size] = np.arange(len(wire), len(wire) + size)
        wire.extend(range(c_off, c_off + size))
    c_from_wire[c_from_wire < 0] = len(wire)
    # DDS's XTypes data now, once: the bindings build it lazily at the first Topic, and two threads
    # doing that at once (a twin's thread and a driver) fail with DDS_RETCODE_ERROR.
    cls.__idl__.fill_type_data()
    return Codec(cls, dt, np.array(wire, np.intp), c_from_wire)


# -- CRC -------------------------------------------------------------------------------------------
_REV8 = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


def crc32_core(words: np.ndarray) -> int:
    """Unitree's ``crc32_core``: CRC-32 with polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no
    reflection and no final xor, over 32-bit words fed most significant bit first (the SDK's
    ``crc_amd64.so`` and its pure-Python ``_crc_py``).

    That is CRC-32/MPEG-2 over each word's big-endian bytes. zlib's CRC-32 is the reflected form
    of the same polynomial, so it runs here in C on bit-reversed bytes and the register is
    reversed back: one library call instead of a 32-step Python loop per word, and no package
    ships this variant.
    """
    be = np.asarray(words, np.uint32).astype(">u4").tobytes()
    reflected = zlib.crc32(be.translate(_REV8)) ^ 0xFFFFFFFF
    return int(f"{reflected:032b}"[::-1], 2)


def message_crc(rec: np.ndarray) -> int:
    """The ``crc`` field's value for a LowCmd or LowState record: :func:`crc32_core` over the C
    struct's 32-bit little-endian words, all but the last (the ``crc`` field itself)."""
    words = np.frombuffer(rec.tobytes(), "<u4")
    return crc32_core(words[:-1])


def crc_ok(rec: np.ndarray) -> bool:
    """Whether a received record's ``crc`` field matches its content."""
    return int(rec["crc"]) == message_crc(rec)
