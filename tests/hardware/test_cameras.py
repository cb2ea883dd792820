"""Cameras with grab threads: newest-frame reads, sequence numbers, clear errors."""

from __future__ import annotations

import time

import numpy as np
import pytest

from simreal.hardware.record.cameras import OpenCVCamera, PatternCamera
from simreal.hardware.robot import HardwareError


def test_pattern_camera_delivers_at_its_rate():
    with PatternCamera("front", 64, 48, fps=50) as cam:
        f0 = cam.read()
        time.sleep(0.4)
        f1 = cam.read()
    assert f1.image.shape == (48, 64, 3) and f1.image.dtype == np.uint8
    assert 12 <= f1.seq - f0.seq <= 28  # ~20 frames in 0.4 s at 50 fps, on a loaded machine
    assert not np.array_equal(f0.image, f1.image)


def test_opencv_camera_reads_a_file_then_reports_its_end(tmp_path):
    import cv2

    path = str(tmp_path / "clip.avi")
    w = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 30, (32, 24))
    for k in range(5):
        w.write(np.full((24, 32, 3), 40 * k, np.uint8))
    w.release()
    cam = OpenCVCamera("file", path, width=32, height=24)
    cam.connect()
    time.sleep(0.3)
    with pytest.raises(HardwareError, match="camera 'file': the stream ended"):
        cam.read()
    cam.disconnect()


def test_opencv_camera_missing_device_is_one_line():
    with pytest.raises(HardwareError, match="cannot open"):
        OpenCVCamera("cam", "/nonexistent/video.mp4").connect()


def test_read_waits_a_bounded_time_for_a_newer_frame():
    with PatternCamera("front", 32, 24, fps=10) as cam:
        f0 = cam.read()
        assert cam.read().seq == f0.seq  # no wait asked: the same frame at once
        t = time.monotonic()
        f1 = cam.read(newer_than=f0.seq, timeout_s=0.5)
        assert f1.seq > f0.seq and time.monotonic() - t < 0.2  # a frame every 0.1 s
        t = time.monotonic()
        f2 = cam.read(newer_than=f1.seq + 100, timeout_s=0.05)  # nothing that new will come in time
        assert 0.04 < time.monotonic() - t < 0.5 and f2.seq >= f1.seq
