"""Cameras for recording: a background thread per camera keeps the newest frame.

``read()`` returns the newest frame with its capture time and a sequence number, waiting at
most a given bound for one newer than the last it saw, so a recorder at 30 fps sees when a
camera delivered nothing new since its last tick (a dropped frame) instead of stalling its
loop (LeRobot's ``async_read`` idea, without its blocking ``read``). Each camera's grab
thread spends its time inside the driver (OpenCV releases the GIL while it waits), so two
cameras and the control loop share two cores.

- :class:`OpenCVCamera`: a V4L2/USB/AVFoundation device index or a video file or stream URL,
  via ``cv2.VideoCapture``; frames are converted to RGB.
- :class:`PatternCamera`: a moving test pattern at a set frame rate, like a v4l2 ``vivid``
  device: exercises a recording pipeline (timing, encoding, disk) without a camera.

Frames are uint8 (H, W, 3) RGB; times on the monotonic clock [s].
"""

from __future__ import annotations

import abc
import dataclasses
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING

import numpy as np

from simreal.hardware.robot import HardwareError

if TYPE_CHECKING:
    import cv2


@dataclasses.dataclass(frozen=True)
class Frame:
    image: np.ndarray  # (H, W, 3) uint8 RGB
    t_s: float  # capture time, monotonic [s]
    seq: int  # 0, 1, 2, ... per camera; a gap or a repeat means frames were missed


class Camera(abc.ABC):
    """A camera with a grab thread (see module docstring)."""

    def __init__(self, name: str, width: int, height: int, fps: float):
        self.name, self.width, self.height, self.fps = name, width, height, fps
        self._latest: Frame | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: str = ""
        self._ready = threading.Event()
        self._new = threading.Condition()

    @abc.abstractmethod
    def _open(self) -> None: ...

    @abc.abstractmethod
    def _grab(self) -> np.ndarray | None:
        """Block until the next frame (None: the source ended)."""

    @abc.abstractmethod
    def _close(self) -> None: ...

    def connect(self, timeout_s: float = 5.0) -> None:
        self._open()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"camera-{self.name}", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            self.disconnect()
            raise HardwareError(
                f"camera '{self.name}': no frame within {timeout_s:.0f} s"
                + (f" ({self._error})" if self._error else "")
            )

    def _loop(self) -> None:
        seq = 0
        while not self._stop.is_set():
            try:
                img = self._grab()
            except Exception as e:  # a driver error ends the stream; read() reports it
                self._error = f"{type(e).__name__}: {e}"
                return
            if img is None:
                self._error = "the stream ended"
                return
            with self._new:
                self._latest = Frame(img, time.monotonic(), seq)
                self._new.notify_all()
            seq += 1
            self._ready.set()

    def read(self, newer_than: int | None = None, timeout_s: float = 0.0) -> Frame:
        """The newest frame; HardwareError if the stream died. With ``newer_than`` (a sequence
        number already seen), wait up to ``timeout_s`` [s] for a later frame, then return the
        newest either way: a camera and a recorder at the same nominal rate drift in phase, and
        a short bounded wait keeps each tick on a fresh frame without ever stalling the loop."""
        if newer_than is not None and timeout_s > 0:
            with self._new:
                self._new.wait_for(
                    lambda: self._error or (self._latest is not None and self._latest.seq > newer_than), timeout_s
                )
        if self._error:
            raise HardwareError(f"camera '{self.name}': {self._error}")
        if self._latest is None:
            raise HardwareError(f"camera '{self.name}' read before connect()")
        return self._latest

    def disconnect(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        self._close()

    def __enter__(self) -> Camera:
        self.connect()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.disconnect()


class OpenCVCamera(Camera):
    """``source``: a device index (0 = /dev/video0) or a file/URL."""

    def __init__(self, name: str, source: int | str, width: int = 640, height: int = 480, fps: float = 30.0):
        super().__init__(name, width, height, fps)
        self.source = source
        self._cap: cv2.VideoCapture | None = None

    def _open(self) -> None:
        import cv2

        cap = cv2.VideoCapture(self.source)
        if not cap.isOpened():
            raise HardwareError(
                f"camera '{self.name}': cannot open {self.source!r} (check the index with "
                f"`v4l2-ctl --list-devices` and permissions on /dev/video*)"
            )
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
        cap.set(cv2.CAP_PROP_FPS, self.fps)
        self._cap = cap

    def _grab(self) -> np.ndarray | None:
        import cv2

        if self._cap is None:  # a grab thread that outlived disconnect()'s join
            raise HardwareError(f"camera '{self.name}': grab after disconnect()")
        ok, bgr = self._cap.read()
        if not ok:
            return None
        if bgr.shape[:2] != (self.height, self.width):
            bgr = cv2.resize(bgr, (self.width, self.height), interpolation=cv2.INTER_AREA)
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def _close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class PatternCamera(Camera):
    """A test pattern: a colour gradient scrolling one pixel per frame, at ``fps``."""

    def __init__(self, name: str, width: int = 640, height: int = 480, fps: float = 30.0):
        super().__init__(name, width, height, fps)
        y, x = np.mgrid[0:height, 0:width]
        self._base = np.stack(
            [x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) * 255 // max(width + height - 2, 1)],
            -1,
        ).astype(np.uint8)
        self._k = 0
        self._next = 0.0

    def _open(self) -> None:
        self._k, self._next = 0, time.monotonic()

    def _grab(self) -> np.ndarray:
        self._next += 1.0 / self.fps
        delay = self._next - time.monotonic()
        if delay > 0:
            self._stop.wait(delay)
        self._k += 1
        return np.roll(self._base, self._k, axis=1)

    def _close(self) -> None:
        pass
