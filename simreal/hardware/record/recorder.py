"""Teleoperated recording into a LeRobot v3 dataset (:mod:`simreal.dataset.writer`).

One loop at the dataset's ``fps``, sleeping to absolute deadlines ``t0 + k / fps``, ``t0`` just
after a frame of the first camera (the loop runs on its clock)::

    s    = robot.observation()
    u    = teleop.command(s)
    sent = robot.send_action(u)           # the action recorded is what really went out
    imgs = {cam: cam.read()}              # newest frame of each camera, never waits
    writer.add_frame({observation.state: s.joint_pos, action: sent, images...}, task)

What is counted, and reported per episode and in total:

- a *late* tick started more than half a period after its deadline (the loop fell behind);
  the loop then skips to the next period boundary, so the dataset's timestamps stay
  ``frame_index / fps`` and a late tick is a frame recorded off its time, not a lost one;
- a *dropped* frame: a camera delivered no new frame since the previous tick, even after a
  wait of ``FRAME_WAIT`` periods, so the previous image is recorded again (the dataset stays
  rectangular at ``fps``);
- the *gap* between episodes: from the last frame of one episode to the first of the next,
  less the configured reset time; ``save_episode`` hands video encoding to a background
  worker, so the gap is the time to write the episode's table.

An episode ends after ``episode_s``, when the teleoperator reports its end button
(``Teleop.end_requested``), or when anyone sets :attr:`Recorder.end` (a success detector).
Ctrl-C discards the episode in progress and keeps every finished one; the writer's
``close()`` then waits for the encoders.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from simreal.hardware.record.cameras import Camera
from simreal.hardware.robot import Robot
from simreal.hardware.teleop.teleoperator import Teleop
from simreal.stop_signal import interrupt_signal

IMAGE_KEY = "observation.images."
#: How long a tick waits for a camera frame newer than the last one, in periods (cameras.Camera.read).
#: Measured on 2 cores while the previous episode encodes: a camera thread delivers up to 24 ms
#: (0.7 period at 30 fps) after its frame is due (CPU contention, not the GIL); 0.3 periods
#: recorded 2-4 repeated frames per 1,800. With the tick 0.1 period after the frame, 0.8 leaves
#: 0.1 period before the next frame is due, so a late frame is never mistaken for the next one.
FRAME_WAIT = 0.8
#: Where the loop ticks in the first camera's frame period: this fraction after a frame is due.
TICK_AFTER_FRAME = 0.1


@dataclasses.dataclass
class EpisodeStats:
    index: int
    frames: int
    late_ticks: int
    dropped: dict[str, int]
    gap_s: float | None  # from the previous episode's last frame, reset time excluded [s]


@dataclasses.dataclass
class RecordStats:
    episodes: list[EpisodeStats] = dataclasses.field(default_factory=list)
    interrupted: bool = False
    stopped_by: str = ""  # the signal that interrupted it (SIGINT, SIGTERM, SIGHUP)

    def totals(self) -> dict[str, float]:
        gaps = [e.gap_s for e in self.episodes if e.gap_s is not None]
        return {
            "episodes": len(self.episodes),
            "frames": sum(e.frames for e in self.episodes),
            "late_ticks": sum(e.late_ticks for e in self.episodes),
            "dropped_frames": sum(sum(e.dropped.values()) for e in self.episodes),
            "max_gap_s": max(gaps) if gaps else 0.0,
        }


class EndSignal:
    """Set by whoever decides an episode is over early (a device button, a success detector)."""

    def __init__(self) -> None:
        self.flag = False


def dataset_features(robot: Robot, cameras: Sequence[Camera]) -> dict[str, dict]:
    """LeRobot features: ``observation.state`` (joint positions), ``action`` (the sent command),
    one video per camera; names are the robot's actuators, in driver order."""
    n = list(robot.names)
    feats: dict[str, dict] = {
        "observation.state": {"dtype": "float32", "shape": [len(n)], "names": n},
        "action": {"dtype": "float32", "shape": [len(n)], "names": n},
    }
    for cam in cameras:
        feats[IMAGE_KEY + cam.name] = {
            "dtype": "video",
            "shape": [cam.height, cam.width, 3],
            "names": ["height", "width", "channels"],
        }
    return feats


class Recorder:
    """The loop (module docstring). ``writer``: a :class:`simreal.dataset.writer.DatasetWriter`."""

    def __init__(
        self,
        robot: Robot,
        teleop: Teleop,
        cameras: Sequence[Camera],
        writer,
        *,
        fps: float,
        task: str,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[str], None] | None = None,
        status_every_s: float = 5.0,
    ):
        self.robot, self.teleop, self.cameras, self.writer = robot, teleop, list(cameras), writer
        self.status_every_s = status_every_s  # [s] between the status lines of an episode
        self.fps, self.task, self.clock, self.sleep = fps, task, clock, sleep
        self._dt = 1.0 / fps
        self.progress = progress
        self.end = EndSignal()
        self.stats = RecordStats()
        self._last_frame_t: float | None = None

    def _frame(
        self, s: Mapping[str, np.ndarray], sent: np.ndarray, seen: dict[str, int], dropped: dict[str, int]
    ) -> dict[str, np.ndarray]:
        frame = {"observation.state": np.asarray(s["joint_pos"], np.float32), "action": np.asarray(sent, np.float32)}
        for cam in self.cameras:
            f = cam.read(newer_than=seen.get(cam.name), timeout_s=FRAME_WAIT * self._dt)
            if seen.get(cam.name) == f.seq:
                dropped[cam.name] += 1
            seen[cam.name] = f.seq
            frame[IMAGE_KEY + cam.name] = f.image
        return frame

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def episode(self, duration_s: float, reset_s: float = 0.0, label: str = "episode") -> EpisodeStats:
        """Record one episode of at most ``duration_s`` [s]; save it (encoding continues in the
        background) and return its counters. Raises KeyboardInterrupt after discarding it.
        ``label`` starts its status lines (``episode 2/10``), one every ``status_every_s``."""
        dt = 1.0 / self.fps
        n_max = int(round(duration_s * self.fps))
        dropped = {c.name: 0 for c in self.cameras}
        seen: dict[str, int] = {}
        late = 0
        self.end.flag = False
        # the session's long-lived objects out of the collector's reach: a full collection during
        # the episode then scans only what the episode made (20-27 ms with them, on these cores:
        # a pause that stalls every thread holding for the GIL, cameras included)
        gc.collect()
        gc.freeze()
        t0 = self._first_tick()
        self.sleep(max(0.0, t0 - self.clock()))
        gap = None if self._last_frame_t is None else max(0.0, t0 - self._last_frame_t - reset_s)
        k = 0  # frames recorded
        slot = 0  # schedule slots since t0 (skips ahead after a late tick)
        self._say(f"{label}: recording, up to {duration_s:g} s")
        said = t0
        try:
            while k < n_max and not self.end.flag:
                s = self.robot.observation()
                sent = self.robot.send_action(self.teleop.command(s))
                self.writer.add_frame(self._frame(s, sent, seen, dropped), task=self.task)
                self.end.flag |= self.teleop.end_requested()
                self._last_frame_t = self.clock()
                k += 1
                slot += 1
                now = self.clock()
                if now > t0 + (slot + 0.5) * dt:
                    late += 1
                    slot = math.ceil((now - t0) / dt)
                if now - said >= self.status_every_s:
                    said = now
                    self._say(f"{label}: {now - t0:.0f} s of {duration_s:g}, {k} frames, {late} late")
                self.sleep(max(0.0, t0 + slot * dt - now))
        except KeyboardInterrupt as e:
            self.writer.discard_episode()
            self.stats.interrupted, self.stats.stopped_by = True, interrupt_signal(e)
            raise
        index = self.writer.save_episode()
        ep = EpisodeStats(index, k, late, dropped, gap)
        self.stats.episodes.append(ep)
        return ep

    def _first_tick(self) -> float:
        """When an episode's first tick goes: now without cameras; with cameras,
        :data:`TICK_AFTER_FRAME` of a frame period after the first camera's next frame.

        The loop then runs on that camera's clock and each tick finds its frame just delivered.
        Started at an arbitrary phase, a free-running camera and a loop at the same rate put some
        episodes' frame arrivals at the edge of the tick's wait, where jitter decides between a
        fresh frame and a repeated one (0 to 13 repeats per 600 frames, by episode). The frames'
        times must be on this recorder's clock (both monotonic by default)."""
        now = self.clock()
        if not self.cameras:
            return now
        cam = self.cameras[0]
        period = 1.0 / cam.fps
        last = cam.read().t_s
        n = math.ceil((now - last) / period - TICK_AFTER_FRAME)
        return last + (n + TICK_AFTER_FRAME) * period

    def reset_period(self, duration_s: float) -> None:
        """Teleoperate without recording for ``duration_s`` [s] (the operator resets the scene)."""
        self._say(f"reset: {duration_s:g} s to set the scene, not recorded")
        t_end = self.clock() + duration_s
        while self.clock() < t_end:
            s = self.robot.observation()
            self.robot.send_action(self.teleop.command(s))
            self.sleep(1.0 / self.fps)

    def run(self, episodes: int, episode_s: float, reset_s: float) -> RecordStats:
        """``episodes`` episodes with a reset period between them; Ctrl-C ends the session
        keeping every finished episode."""
        try:
            for i in range(episodes):
                ep = self.episode(episode_s, reset_s, label=f"episode {i + 1}/{episodes}")
                self._say(
                    f"episode {ep.index}: {ep.frames} frames, {ep.late_ticks} late, "
                    f"{sum(ep.dropped.values())} dropped{_per_camera(ep.dropped)} ({i + 1}/{episodes})"
                )
                if i + 1 < episodes and reset_s > 0:
                    self.reset_period(reset_s)
        except KeyboardInterrupt as e:
            self.stats.interrupted, self.stats.stopped_by = True, interrupt_signal(e)
        return self.stats


def _per_camera(dropped: Mapping[str, int]) -> str:
    """`` (front 2, wrist 0)`` when any camera dropped a frame, else nothing."""
    return f" ({', '.join(f'{k} {v}' for k, v in dropped.items())})" if any(dropped.values()) else ""
