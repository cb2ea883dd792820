"""Rate input devices for teleoperation: keyboard, gamepad, SpaceMouse (:mod:`simreal.hardware.teleop.teleoperator`).

Each reads without blocking and returns :class:`~simreal.hardware.teleop.teleoperator.DeviceInput`: six
axes in [-1, 1] and buttons.

- :class:`Keyboard`: the terminal, raw mode (works over SSH, no X server, unlike pynput).
  Key pairs move the axes: ``q/a w/s e/d r/f t/g y/h`` are axes 0..5 plus/minus; space is
  button 0 (reset the target to the measured pose), ``c`` and ``v`` buttons 1 and 2 (gripper
  close/open in recorders), ``Esc`` or ``x`` button 3 (end the episode). A terminal reports
  key presses and auto-repeats, never releases, so a key counts as held for ``hold_s`` after
  its last byte (longer than the first auto-repeat delay, typically 0.25-0.5 s, would keep a
  tapped key moving: 0.12 s, with the repeat rate (~30/s) bridging the gaps of a held key).
- :class:`Gamepad`: pygame's joystick API (SDL2; Xbox/PS layouts), axes with a dead zone.
- :class:`SpaceMouse`: 3Dconnexion devices over HID with the ``hidapi`` wheel, which bundles
  libhidapi (pyspacemouse needs ``easyhid`` and a system libhidapi, absent on many robot
  computers, so the few lines of report parsing are written here). Report format, as
  pyspacemouse's ``devices.toml`` records it: report 1 holds x, y, z as little-endian int16
  at bytes 1-6, and on 6-axis-in-one-report devices (SpaceMouse Wireless, Compact,
  Enterprise) pitch, roll, yaw at bytes 7-12; older devices send those in report 2 at bytes
  1-6; report 3 holds the buttons as a bit mask from byte 1. Full scale is about +-350;
  y, z, pitch and roll are negated so +x right, +y forward, +z up.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from simreal.hardware.robot import HardwareError
from simreal.hardware.teleop.teleoperator import DeviceInput, InputDevice

KEY_AXES = {
    b"q": (0, 1),
    b"a": (0, -1),
    b"w": (1, 1),
    b"s": (1, -1),
    b"e": (2, 1),
    b"d": (2, -1),
    b"r": (3, 1),
    b"f": (3, -1),
    b"t": (4, 1),
    b"g": (4, -1),
    b"y": (5, 1),
    b"h": (5, -1),
}
KEY_BUTTONS = {b" ": 0, b"c": 1, b"v": 2, b"\x1b": 3, b"x": 3}


def key_help(axes: Sequence[str], buttons: Mapping[int, str]) -> str:
    """The keys for ``axes`` (what each device axis moves, in order) and ``buttons`` (index:
    what it does): ``q/a shoulder_pan, w/s shoulder_lift, ..., space back to the measured pose, x
    end the episode`` (:data:`KEY_AXES`, :data:`KEY_BUTTONS`)."""
    key = {axis_sign: k.decode() for k, axis_sign in KEY_AXES.items()}
    parts = [f"{key[(i, 1)]}/{key[(i, -1)]} {name}" for i, name in enumerate(axes)]
    names = {b" ": "space", b"\x1b": "Esc"}
    for index, does in sorted(buttons.items()):
        keys = sorted((names.get(k, k.decode()) for k, b in KEY_BUTTONS.items() if b == index), key=len)
        parts.append(f"{' or '.join(keys)} {does}")
    return ", ".join(parts)


class Keyboard(InputDevice):
    """Terminal keys as axes (see module docstring). ``fd``: the terminal (default stdin)."""

    def __init__(self, fd: int | None = None, *, hold_s: float = 0.12, clock: Callable[[], float] = time.monotonic):
        self.fd = sys.stdin.fileno() if fd is None else fd
        self.hold_s, self.clock = hold_s, clock
        self._last: dict[bytes, float] = {}
        self._saved: list[Any] | None = None

    def open(self) -> None:
        if not os.isatty(self.fd):
            raise HardwareError("keyboard teleop needs a terminal on stdin (run it in a terminal, not a pipe)")
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)

    def close(self) -> None:
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def read(self) -> DeviceInput:
        now = self.clock()
        while select.select([self.fd], [], [], 0)[0]:
            data = os.read(self.fd, 64)
            if not data:
                break
            for i in range(len(data)):
                self._last[data[i : i + 1].lower()] = now
        held = {k for k, t in self._last.items() if now - t <= self.hold_s}
        axes = np.zeros(6)
        for k in held & KEY_AXES.keys():
            i, sign = KEY_AXES[k]
            axes[i] += sign
        buttons = [False] * 4
        for k in held & KEY_BUTTONS.keys():
            buttons[KEY_BUTTONS[k]] = True
        return DeviceInput(np.clip(axes, -1, 1), tuple(buttons))


class Gamepad(InputDevice):
    """The first joystick SDL finds; ``joystick``: a factory for tests (default pygame's)."""

    def __init__(self, index: int = 0, *, dead_zone: float = 0.1, joystick: Callable[[], Any] | None = None):
        self.index, self.dead_zone, self._factory = index, dead_zone, joystick
        self._js: Any = None
        self._pump: Callable[[], None] = lambda: None

    def open(self) -> None:
        if self._factory is not None:
            self._js = self._factory()
            return
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import pygame

        pygame.joystick.init()
        pygame.display.init()  # the event queue joystick updates arrive through
        if pygame.joystick.get_count() <= self.index:
            raise HardwareError(
                f"gamepad {self.index}: SDL sees {pygame.joystick.get_count()} joystick(s); "
                f"plug one in or pick another --teleop"
            )
        self._js = pygame.joystick.Joystick(self.index)
        self._pump = pygame.event.pump

    def close(self) -> None:
        self._js = None

    def read(self) -> DeviceInput:
        if self._js is None:
            raise HardwareError("gamepad read before open()")
        self._pump()
        n = min(self._js.get_numaxes(), 6)
        axes = np.zeros(6)
        axes[:n] = [self._js.get_axis(i) for i in range(n)]
        axes[np.abs(axes) < self.dead_zone] = 0.0
        buttons = tuple(bool(self._js.get_button(i)) for i in range(self._js.get_numbuttons()))
        return DeviceInput(np.clip(axes, -1, 1), buttons)


#: 3Dconnexion USB vendor ids: the current one and Logitech's (older devices).
SPACEMOUSE_VENDORS = (0x256F, 0x046D)
FULL_SCALE = 350.0
SIGN = np.array([1, -1, -1, -1, -1, 1], np.float64)  # x, y, z, pitch, roll, yaw


def parse_spacemouse_report(report: bytes | list[int], axes: np.ndarray, buttons: list[bool]) -> None:
    """Update ``axes`` (6,) and ``buttons`` in place from one HID report (module docstring)."""
    data = bytes(report)
    if not data:
        return

    def int16s(start: int, count: int) -> np.ndarray:
        return np.frombuffer(data[start : start + 2 * count], "<i2").astype(np.float64)

    rid = data[0]
    if rid == 1 and len(data) >= 7:
        axes[:3] = int16s(1, 3) / FULL_SCALE * SIGN[:3]
        if len(data) >= 13:
            axes[3:] = int16s(7, 3) / FULL_SCALE * SIGN[3:]
    elif rid == 2 and len(data) >= 7:
        axes[3:] = int16s(1, 3) / FULL_SCALE * SIGN[3:]
    elif rid == 3:
        bits = int.from_bytes(data[1:], "little")
        buttons[:] = [bool(bits >> i & 1) for i in range(max(len(buttons), 8 * (len(data) - 1)))]


class SpaceMouse(InputDevice):
    """A 3Dconnexion SpaceMouse over HID (module docstring); ``device``: a factory for tests."""

    def __init__(self, *, device: Callable[[], Any] | None = None):
        self._factory = device
        self._dev: Any = None
        self._axes = np.zeros(6)
        self._buttons: list[bool] = [False, False]

    def open(self) -> None:
        if self._factory is not None:
            self._dev = self._factory()
            return
        try:
            import hid
        except ImportError as e:
            raise HardwareError("SpaceMouse teleop needs the hidapi wheel: pip install 'simreal[teleop]'") from e
        found = [d for d in hid.enumerate() if d["vendor_id"] in SPACEMOUSE_VENDORS]
        if not found:
            raise HardwareError(
                "no 3Dconnexion device on USB (vendor 256f or 046d); check the cable and "
                "the udev rule giving your user access to /dev/hidraw*"
            )
        self._dev = hid.device()
        self._dev.open_path(found[0]["path"])
        self._dev.set_nonblocking(True)

    def close(self) -> None:
        if self._dev is not None:
            self._dev.close()
            self._dev = None

    def read(self) -> DeviceInput:
        if self._dev is None:
            raise HardwareError("SpaceMouse read before open()")
        while True:  # drain: the newest report of each kind wins
            report = self._dev.read(64)
            if not report:
                break
            parse_spacemouse_report(report, self._axes, self._buttons)
        return DeviceInput(np.clip(self._axes, -1, 1), tuple(self._buttons))


#: ``--teleop`` name -> the rate device (``simreal record``, ``simreal drive``).
DEVICES: dict[str, type[InputDevice]] = {"keyboard": Keyboard, "gamepad": Gamepad, "spacemouse": SpaceMouse}
