"""Camera frames to mp4 (and PNG) and back, as LeRobot v3.0 encodes and decodes them (PyAV).

Encoding uses lerobot's default RGB encoder (``lerobot/configs/video.py``,
``RGBEncoderConfig``): AV1 through ``libsvtav1``, ``yuv420p``, GOP ``g=2``, ``crf=30``,
``preset=12``, ``svtav1-params=fast-decode=0``; frame k of an episode has pts k in a 1/fps
time base (lerobot's streaming encoder), so it sits at k / fps seconds. Episodes of one camera
share an mp4: they are joined without re-encoding through FFmpeg's concat demuxer
(lerobot's ``concatenate_video_files``), each starting where the previous one ended; the
episodes parquet keeps that start and end (``from_timestamp``, ``to_timestamp``) in seconds.

Decoding follows lerobot's PyAV decoder (``video_utils.decode_video_frames_pyav``): seek to
the keyframe before the first wanted time, decode forward, and take for each wanted time
``from_timestamp + timestamp`` the nearest decoded frame, which must lie within
``tolerance_s`` (lerobot's default 1e-4 s).

A feature of dtype ``image`` keeps each frame as PNG bytes inside the data parquet (zlib level
6, as lerobot's image writer saves them); :func:`encode_png` / :func:`decode_png` use OpenCV.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import av
import cv2
import numpy as np

from simreal.errors import DataFileError, MissingDependencyError
from simreal.npz import short_reason

VIDEO_CODEC: Final = "libsvtav1"
PIX_FMT = "yuv420p"
# lerobot's RGBEncoderConfig defaults; recorded in info.json as video.<name>.
ENCODER_SETTINGS: dict[str, Any] = {
    "g": 2,
    "crf": 30,
    "preset": 12,
    "fast_decode": 0,
    "video_backend": "pyav",
    "extra_options": {},
}
TOLERANCE_S = 1e-4

# SVT-AV1 prints its configuration and a preset warning to stderr for every episode unless
# told otherwise; keep its errors (level 1) and let a user's own SVT_LOG win.
os.environ.setdefault("SVT_LOG", "1")


#: SVT-AV1's level of parallelism: one thread per encoder. With SVT's default (a pool of threads
#: per encoder), ``simreal demos`` (40 episodes of 64x64 frames, saved in background threads beside
#: the simulator and the renderer) hung in ``svt_av1_enc_send_picture`` or failed with EINVAL in 3
#: of 5 runs here (SVT-AV1 4.1 in PyAV's wheel; SVT's users report such hangs for 3.1); with
#: ``lp=1``, 6 of 6 ran through. Episodes are encoded in parallel threads anyway, one per episode.
SVT_PARALLELISM = "lp=1"


def encoder_options() -> dict[str, str]:
    """The codec options lerobot's ``get_codec_options(as_strings=True)`` gives ``libsvtav1``, plus
    :data:`SVT_PARALLELISM`."""
    s = ENCODER_SETTINGS
    return {
        "g": str(s["g"]),
        "crf": str(s["crf"]),
        "preset": str(s["preset"]),
        "svtav1-params": f"fast-decode={s['fast_decode']}:{SVT_PARALLELISM}",
    }


def check_encoder() -> None:
    """Fail early, in one line, when this PyAV build cannot encode AV1 with SVT-AV1.

    Raises:
      MissingDependencyError: naming the encoder and how to get a PyAV that has it.
    """
    try:
        av.codec.Codec(VIDEO_CODEC, "w")
    except (av.FFmpegError, ValueError):  # PyAV raises UnknownCodecError (a ValueError) for a missing encoder
        raise MissingDependencyError(
            f"the {VIDEO_CODEC} encoder",
            "pip install --force-reinstall av (PyPI's PyAV wheels include it)",
            "which this PyAV build lacks",
        ) from None


def encode_frames(frames: np.ndarray, path: Path, fps: int) -> None:
    """Encode RGB frames (T, H, W, 3) uint8 into a new mp4 at ``path``; frame k at k / fps [s]."""
    time_base = Fraction(1, fps)
    before = _realtime_threads()
    with _without_sys_nice(), av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream(VIDEO_CODEC, fps, options=encoder_options())
        stream.pix_fmt = PIX_FMT
        stream.height, stream.width = frames.shape[1:3]
        stream.time_base = time_base
        for k, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            frame.pts, frame.time_base = k, time_base
            container.mux(stream.encode(frame))
            if k % DEMOTE_EVERY_FRAMES == 0:  # the encoder opens at the first frame
                _demote_realtime(before)
        container.mux(stream.encode())


#: Frames between two checks for real-time encoder threads (:func:`_demote_realtime`).
DEMOTE_EVERY_FRAMES = 32
_REALTIME = tuple(getattr(os, name) for name in ("SCHED_FIFO", "SCHED_RR") if hasattr(os, name))


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # not Linux
        return []


def _realtime_threads() -> set[int]:
    """This process's threads that run on a real-time policy (SCHED_FIFO, SCHED_RR)."""
    out = set()
    for tid in _threads():
        try:
            if os.sched_getscheduler(tid) in _REALTIME:
                out.add(tid)
        except OSError:  # the thread ended
            pass
    return out


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAP_VERSION_3 = 0x20080522  # linux/capability.h: _LINUX_CAPABILITY_VERSION_3, two 32-bit words
_CAP_SYS_NICE = 23


@contextlib.contextmanager
def _without_sys_nice() -> Iterator[None]:
    """Inside, this thread's effective capabilities lack CAP_SYS_NICE (Linux; elsewhere, or where
    capset is refused, nothing changes); on exit they are restored from the permitted set.

    Why: SVT-AV1 run as root asks for SCHED_FIFO 99 threads (:func:`_demote_realtime`); without
    the capability that request fails and SVT creates ordinary threads, which inherit the
    reduced set. Measured here: a thread so reduced encodes the same mp4 with no real-time
    thread at any time, where demoting them after the first frame left them real-time for the
    encoder's start-up (a 30 fps recording loop stalled 50-70 ms just after an episode's save,
    while the next one recorded). Capabilities are per thread, so the recording loop's own are
    untouched."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
        ok = libc.capget(ctypes.byref(header), data) == 0
    except (OSError, AttributeError):  # no capget: not Linux
        ok = False
    had = ok and bool(data[0].effective & (1 << _CAP_SYS_NICE))
    if had:
        data[0].effective &= ~(1 << _CAP_SYS_NICE)
        had = libc.capset(ctypes.byref(header), data) == 0
    try:
        yield
    finally:
        if had:
            data[0].effective |= 1 << _CAP_SYS_NICE
            libc.capset(ctypes.byref(header), data)


def _demote_realtime(before: set[int]) -> None:
    """Put every thread of this process that turned real-time since ``before`` back on the normal
    scheduler (SCHED_OTHER, its nice value kept).

    SVT-AV1 run as root (a robot computer's usual user, and this container's) creates its
    encoder threads SCHED_FIFO at priority 99 and moves the thread that opens the encoder there
    too: seen here with ``ps -L``, they preempted a 30 fps recording loop and a 100 Hz test loop
    for up to 94 ms, nice or not. A deliberately real-time thread of ours (the deploy runner's
    loop) was real-time before the encoder opened and is left alone. Where :func:`_without_sys_nice`
    could drop the capability no thread turns real-time; this is the fallback where it could not."""
    for tid in _realtime_threads() - before:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:  # the thread ended, or no permission: nothing to undo then
            pass


def concatenate(inputs: Sequence[Path], output: Path, list_file: Path) -> None:
    """Join mp4s of the same codec and size into ``output`` without re-encoding.

    Args:
      list_file: where to write the ffconcat list (a scratch path; removed afterwards).
    """
    lines = ["ffconcat version 1.0"] + ["file '" + str(p.resolve()).replace("'", "'\\''") + "'" for p in inputs]
    list_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        with (
            av.open(str(list_file), "r", format="concat", options={"safe": "0"}) as src,
            av.open(str(output), "w", format="mp4", options={"movflags": "faststart"}) as dst,
        ):
            in_stream = src.streams.video[0]
            out_stream = dst.add_stream_from_template(in_stream, opaque=True)
            out_stream.time_base = in_stream.time_base
            for packet in src.demux(in_stream):
                if packet.dts is None:  # the demuxer's flush packet
                    continue
                packet.stream = out_stream
                dst.mux(packet)
    finally:
        list_file.unlink(missing_ok=True)


def duration_s(path: Path) -> float:
    """The video stream's duration [s] (the container's when the stream has none)."""
    with _open(path) as container:
        stream = container.streams.video[0]
        if stream.duration is not None:
            assert stream.time_base is not None  # PyAV gives every demuxed stream one
            return float(stream.duration * stream.time_base)
        if container.duration is None:
            raise DataFileError(str(path), "has no duration (neither its video stream nor the container)")
        return float(container.duration / av.time_base)


def video_info(path: Path) -> dict[str, Any]:
    """The ``info`` block lerobot's ``get_video_info`` records for a video feature in info.json."""
    with _open(path) as container:
        stream = container.streams.video[0]
        assert stream.base_rate is not None and stream.pix_fmt is not None  # a decodable video stream's
        info: dict[str, Any] = {
            "video.height": stream.height,
            "video.width": stream.width,
            "video.codec": stream.codec.canonical_name,
            "video.pix_fmt": stream.pix_fmt,
            "video.fps": int(stream.base_rate),
            "video.channels": len(av.VideoFormat(stream.pix_fmt).components),
            "has_audio": bool(container.streams.audio),
        }
    info.update({f"video.{k}": v for k, v in ENCODER_SETTINGS.items()})
    info["is_depth_map"] = False
    return info


def decode_frames(path: Path, timestamps: Sequence[float], tolerance_s: float = TOLERANCE_S) -> np.ndarray:
    """The frames nearest to ``timestamps`` [s] in the mp4, as (len(timestamps), H, W, 3) uint8.

    Raises:
      DataFileError: the file cannot be decoded, or a wanted time has no frame within tolerance_s.
    """
    first, last = min(timestamps), max(timestamps)
    times: list[float] = []
    frames: list[np.ndarray] = []
    try:
        with _open(path) as container:
            stream = container.streams.video[0]
            assert stream.time_base is not None  # PyAV gives every demuxed stream one
            container.seek(max(0, round(first / stream.time_base) - 1), backward=True, any_frame=False, stream=stream)
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                times.append(float(frame.pts * stream.time_base))
                frames.append(frame.to_ndarray(format="rgb24"))
                if times[-1] >= last:
                    break
    except (av.FFmpegError, ValueError, IndexError) as e:
        raise DataFileError(str(path), f"cannot decode video: {short_reason(e)}") from None
    if not frames:
        raise DataFileError(str(path), f"no frames between {first:.4f} s and {last:.4f} s")
    t = np.asarray(times)
    gap = np.abs(np.asarray(timestamps, dtype=np.float64)[:, None] - t[None, :])
    nearest = gap.argmin(axis=1)
    worst = int(np.argmax(gap[np.arange(len(nearest)), nearest]))
    if gap[worst, nearest[worst]] > tolerance_s:
        raise DataFileError(
            str(path),
            f"no frame within {tolerance_s} s of {timestamps[worst]:.6f} s (nearest "
            f"{t[nearest[worst]]:.6f} s); the episodes parquet and the video disagree",
        )
    return np.stack([frames[i] for i in nearest])


def _open(path: Path) -> av.container.InputContainer:
    """Open an mp4 for reading; a missing or unreadable file is a DataFileError naming it."""
    try:
        container = av.open(str(path), "r")
    except (av.FFmpegError, OSError) as e:
        raise DataFileError(str(path), f"cannot open video: {short_reason(e)}") from None
    if not container.streams.video:
        container.close()
        raise DataFileError(str(path), "has no video stream")
    return container


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of an RGB image (H, W, 3) uint8."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 6])
    if not ok:
        raise ValueError("OpenCV could not encode the image as PNG")
    return buf.tobytes()


def decode_png(data: bytes | None, path: str, field: str) -> np.ndarray:
    """An RGB image (H, W, 3) uint8 from PNG (or any OpenCV-readable) bytes.

    Raises:
      DataFileError: naming the file and ``field`` when the bytes are not an image.
    """
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
    if image is None:
        raise DataFileError(path, f"field '{field}' is not a readable image")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
