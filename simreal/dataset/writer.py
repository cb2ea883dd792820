"""Recording a LeRobot v3.0 dataset episode by episode, videos encoded in the background.

    features = {
        "observation.state": {"dtype": "float32", "shape": [7], "names": ["j1", ..., "j7"]},
        "action": {"dtype": "float32", "shape": [7], "names": ["j1", ..., "j7"]},
        "observation.images.front": {"dtype": "video", "shape": [480, 640, 3]},
    }
    with DatasetWriter.create("data/pick", fps=30, features=features, robot_type="panda") as writer:
        for _ in range(num_episodes):
            for obs, act, rgb in rollout():
                writer.add_frame({"observation.state": obs, "action": act, "observation.images.front": rgb},
                                 task="pick up the cube")
            writer.save_episode()              # returns at once

    with DatasetWriter.resume("data/pick") as writer:   # appends to the dataset
        ...

``save_episode()`` hands the episode to a background thread that computes its statistics,
encodes its videos and PNGs, waits for the previous episode's thread, and then commits the
episode: data rows, mp4s, episodes row, tasks, stats and info in one
:class:`~simreal.dataset.commit.Commit`, so the dataset on disk is always whole and
readable. The next episode records meanwhile; at most ``_MAX_PENDING`` episodes wait in the
background before ``save_episode`` blocks. An episode is finished once committed. The threads
are not daemons, so Ctrl-C or an exception in the recording loop still lets every saved
episode commit before Python exits; a hard kill loses at most the episodes still in the
background, never half an episode. ``close()`` (or leaving the ``with`` block) waits for them
and drops the frames of an episode never saved.

Layout, file sharing and size limits: :mod:`simreal.dataset.layout`; statistics:
:mod:`simreal.dataset.stats`; video: :mod:`simreal.dataset.video`.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from simreal.dataset.append import EpisodeAppender, SavedEpisode
from simreal.dataset.commit import recover
from simreal.dataset.layout import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_DATA_FILE_SIZE_IN_MB,
    DEFAULT_FEATURES,
    DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    INFO_PATH,
    build_info,
    json_bytes,
    validate_features,
    video_keys,
)
from simreal.dataset.reader import Dataset
from simreal.dataset.stats import Stats, episode_stats
from simreal.dataset.video import TOLERANCE_S, check_encoder, encode_frames
from simreal.errors import ConfigError, DataFileError, SimrealError, printable
from simreal.npz import short_reason
from simreal.yaml_io import atomic_write_bytes

STAGING_DIR = ".simreal-staging"  # encoded episode videos waiting for their commit (same file system)
_MAX_PENDING = 3  # episodes encoding or committing in the background before save_episode waits


@dataclass
class _Episode:
    """A recorded episode handed to the background, frames not yet stacked."""

    index: int
    first: int  # the dataset-wide index of its first frame
    values: dict[str, list[np.ndarray]]  # user feature -> one value per frame
    times: list[float]  # [s]
    task_ids: list[int]  # per frame
    tasks: list[str]  # its distinct tasks, in order of first use
    known_tasks: list[str]  # the dataset's task list once this episode is in

    @property
    def length(self) -> int:
        return len(self.times)

    def columns(self, features: Mapping[str, Mapping[str, Any]]) -> dict[str, np.ndarray]:
        """Every feature over the T frames, in ``features`` order: (T,) for shape (1,) features and
        the defaults (timestamp float64 [s], as lerobot computes its statistics), (T, n), (T, H, W, 3)."""
        n = self.length
        out = {
            name: np.stack(v).reshape(n) if tuple(features[name]["shape"]) == (1,) else np.stack(v)
            for name, v in self.values.items()
        }
        out.update(
            timestamp=np.asarray(self.times, dtype=np.float64),
            frame_index=np.arange(n, dtype=np.int64),
            episode_index=np.full(n, self.index, dtype=np.int64),
            index=np.arange(self.first, self.first + n, dtype=np.int64),
            task_index=np.asarray(self.task_ids, dtype=np.int64),
        )
        return {k: out[k] for k in features}


class DatasetWriter:
    """Writes a LeRobot v3.0 dataset; build one with :meth:`create` or :meth:`resume`."""

    def __init__(
        self,
        root: Path,
        info: dict[str, Any],
        tasks: list[str],
        stats: dict[str, Stats] | None,
        last_episode: dict[str, Any] | None,
    ):
        """Use :meth:`create` or :meth:`resume`; this takes their already-checked state."""
        self.root = root
        self.features: dict[str, dict[str, Any]] = info["features"]
        self._fps: int = info["fps"]
        self._user_features = [k for k in self.features if k not in DEFAULT_FEATURES]
        self._video_keys = video_keys(self.features)
        if self._video_keys:
            check_encoder()
        self._appender = EpisodeAppender(root, info, stats, last_episode, root / STAGING_DIR)  # background only
        # pyarrow imports pandas (when installed) on its first array. In a background thread that runs
        # while Python shuts down (after Ctrl-C) the import fails ("can't register atexit after
        # shutdown"), so take it now.
        pa.array(np.zeros(1))
        self._tasks = list(tasks)
        self._num_episodes = info["total_episodes"]
        self._num_frames = info["total_frames"]
        self._buffer: dict[str, list[np.ndarray]] = {}
        self._buffer_tasks: list[str] = []
        self._buffer_times: list[float] = []
        self.discard_episode()
        self._threads: list[threading.Thread] = []
        self._newest: threading.Thread | None = None  # the thread of the last episode handed over
        self._append_lock = threading.Lock()
        self._failure: BaseException | None = None
        self._closed = False

    @classmethod
    def create(
        cls,
        root: str | Path,
        *,
        fps: int,
        features: Mapping[str, Mapping[str, Any]],
        robot_type: str | None = None,
        use_videos: bool = True,
        chunks_size: int = DEFAULT_CHUNK_SIZE,
        data_files_size_in_mb: float = DEFAULT_DATA_FILE_SIZE_IN_MB,
        video_files_size_in_mb: float = DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    ) -> DatasetWriter:
        """Start a new dataset in ``root`` (a new or empty folder).

        Args:
          fps: frame rate [Hz], a positive integer.
          features: name -> ``{"dtype", "shape", "names"}`` (:func:`~simreal.dataset.layout.validate_features`);
            the five default features are added after them.
          robot_type: stored in info.json (lerobot's ``robot_type``).
          use_videos: store ``video`` features as mp4; False stores every camera as PNGs in the
            data parquet (dtype ``image``), as lerobot does without videos.
          chunks_size: files per chunk folder.
          data_files_size_in_mb, video_files_size_in_mb: size [MiB] at which episodes move on to
            a new data parquet / mp4 (lerobot's limits; its own tests use fractions).
        Raises:
          ConfigError: a bad argument or feature, naming it.
          DataFileError: ``root`` already holds something.
        """
        root = Path(root)
        if (root / INFO_PATH).exists():
            raise DataFileError(
                str(root),
                "already holds a dataset; append to it (record --resume, demos --append) or give another --out",
            )
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise DataFileError(str(root), "exists and is not an empty folder; choose a new folder for the dataset")
        for key, value in (("fps", fps), ("chunks_size", chunks_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(key, f"got {printable(repr(value))}; expected a positive integer")
        for key, mb in (
            ("data_files_size_in_mb", data_files_size_in_mb),
            ("video_files_size_in_mb", video_files_size_in_mb),
        ):
            if not isinstance(mb, int | float) or isinstance(mb, bool) or not 0 < mb < math.inf:
                raise ConfigError(key, f"got {printable(repr(mb))}; expected a positive number of megabytes")
        if robot_type is not None and not isinstance(robot_type, str):
            raise ConfigError("robot_type", f"got {printable(repr(robot_type))}; expected a string or None")
        checked = validate_features(features, lambda field, message: ConfigError(field, message))
        if not use_videos:
            for ft in checked.values():
                if ft["dtype"] == "video":
                    ft["dtype"] = "image"
        info = build_info(
            fps=fps,
            features=checked,
            robot_type=robot_type,
            use_videos=use_videos,
            chunks_size=chunks_size,
            data_files_size_in_mb=data_files_size_in_mb,
            video_files_size_in_mb=video_files_size_in_mb,
        )
        atomic_write_bytes(root / INFO_PATH, json_bytes(info))
        return cls(root, info, [], None, None)

    @classmethod
    def resume(cls, root: str | Path) -> DatasetWriter:
        """Append to the dataset in ``root``; new episodes go to new data, video and episodes files.

        Raises:
          DataFileError: ``root`` is not a readable LeRobot v3 dataset, or a data or video file its
            episodes list is missing or cut short (:meth:`Dataset.check_files`); naming the file.
        """
        root = Path(root)
        recover(root, remove_strays=True)
        shutil.rmtree(root / STAGING_DIR, ignore_errors=True)
        ds = Dataset(root)
        ds.check_files()
        last = ds.episode_info(ds.num_episodes - 1) if ds.num_episodes else None
        return cls(root, ds.info, ds.tasks, ds.stats or None, last)

    # ------------------------------------------------------------------ recording

    @property
    def fps(self) -> int:
        """Frame rate [Hz]."""
        return self._fps

    @property
    def num_episodes(self) -> int:
        """Episodes saved so far (some may still be on their way to disk; see :meth:`wait`)."""
        return self._num_episodes

    @property
    def num_frames(self) -> int:
        """Frames in the saved episodes."""
        return self._num_frames

    @property
    def episode_length(self) -> int:
        """Frames added to the episode being recorded."""
        return len(self._buffer_times)

    @property
    def tasks(self) -> list[str]:
        """Every task string so far; an episode's ``task_index`` points into this list."""
        return list(self._tasks)

    def add_frame(self, frame: Mapping[str, Any], task: str, timestamp: float | None = None) -> None:
        """Append one frame to the episode being recorded.

        Args:
          frame: every user feature -> its value: a numeric feature an array of its shape
            (any dtype that casts to the feature's without changing kind), a camera an
            (H, W, 3) uint8 RGB image. The values are copied.
          task: the episode's language instruction (lerobot's task).
          timestamp: seconds since the episode started; default frame_index / fps. A dataset
            with videos needs evenly spaced frames (within 1e-4 s of frame_index / fps),
            since lerobot finds a frame in the mp4 by its timestamp.
        Raises:
          DataFileError: one line naming the episode, frame and feature, and what was expected.
        """
        self._check_open()
        k = len(self._buffer_times)
        where = f"episode {self._num_episodes} frame {k}"
        if not isinstance(frame, Mapping):
            raise DataFileError(
                str(self.root), f"{where}: expected a dict feature -> value, got {type(frame).__name__}"
            )
        missing = [n for n in self._user_features if n not in frame]
        extra = [str(n) for n in frame if n not in self._user_features]
        if missing or extra:
            problem = f"feature '{missing[0]}' missing" if missing else f"unknown feature '{printable(extra[0])}'"
            raise DataFileError(
                str(self.root), f"{where}: {problem}; the features are " + ", ".join(self._user_features)
            )
        if not isinstance(task, str) or not task.strip():
            raise DataFileError(
                str(self.root), f"{where}: task must be a non-empty instruction string, got {printable(repr(task))}"
            )
        time_s = self._check_time(k, timestamp, where)
        values = {name: self._check_value(name, frame[name], where) for name in self._user_features}
        for name, value in values.items():
            self._buffer[name].append(value)
        self._buffer_tasks.append(task)
        self._buffer_times.append(time_s)

    def _check_time(self, k: int, timestamp: float | None, where: str) -> float:
        """The frame's time [s]; it must be finite, >= 0, increasing, and on the fps grid with videos."""
        if timestamp is None:
            return k / self.fps
        try:
            t = float(timestamp)
        except (TypeError, ValueError):
            raise DataFileError(
                str(self.root), f"{where}: timestamp {printable(repr(timestamp))} is not a number of seconds"
            ) from None
        previous = self._buffer_times[-1] if self._buffer_times else -math.inf
        if not math.isfinite(t) or t < 0 or t <= previous:
            raise DataFileError(
                str(self.root),
                f"{where}: timestamp {t} s must be finite, >= 0 and after the previous frame's ({previous} s)",
            )
        if self._video_keys and abs(t - k / self.fps) > TOLERANCE_S:
            raise DataFileError(
                str(self.root),
                f"{where}: timestamp {t:.6f} s is not frame_index / fps = "
                f"{k / self.fps:.6f} s; a dataset with videos needs evenly spaced frames "
                "(leave timestamp out)",
            )
        return t

    def _check_value(self, name: str, value: Any, where: str) -> np.ndarray:
        """A copy of one feature's value as its dtype and shape, or a one-line error."""
        ft = self.features[name]
        shape, dtype = tuple(ft["shape"]), ft["dtype"]
        arr = np.asarray(value)
        if dtype in ("video", "image"):
            if arr.dtype != np.uint8 or arr.shape != shape:
                raise DataFileError(
                    str(self.root),
                    f"{where}: feature '{name}' is {arr.dtype} {arr.shape}; expected "
                    f"uint8 {shape} (height, width, RGB)",
                )
            return arr.copy()
        if arr.shape == () and shape == (1,):
            arr = arr.reshape(1)
        if arr.shape != shape or not np.can_cast(arr.dtype, dtype, "same_kind"):
            raise DataFileError(
                str(self.root), f"{where}: feature '{name}' is {arr.dtype} {arr.shape}; expected {dtype} {shape}"
            )
        arr = arr.astype(dtype)  # a copy: the caller may reuse its buffer
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            bad = np.flatnonzero(~np.isfinite(arr))
            raise DataFileError(
                str(self.root),
                f"{where}: feature '{name}' has non-finite values (NaN or inf) at components {bad[:8].tolist()}",
            )
        return arr

    def discard_episode(self) -> None:
        """Drop the frames added since the last :meth:`save_episode`."""
        self._buffer = {k: [] for k in self._user_features}
        self._buffer_tasks = []
        self._buffer_times = []

    def save_episode(self) -> int:
        """Hand the recorded frames to the background as the next episode and return its index.

        Raises:
          DataFileError: no frames were added, or an earlier episode failed to save.
        """
        self._check_open()
        self._raise_failure()
        if not self._buffer_times:
            raise DataFileError(
                str(self.root), f"episode {self._num_episodes} has no frames: call add_frame before save_episode"
            )
        ep = self._take_episode()
        pending = [t for t in self._threads if t.is_alive()]
        while len(pending) >= _MAX_PENDING:
            pending.pop(0).join()
        # chained to the newest episode's thread and tracked before it starts: whatever interrupts
        # this (a KeyboardInterrupt in join or start), appends stay in order and close() waits for it
        thread = threading.Thread(target=self._finish, args=(ep, self._newest), name=f"dataset-episode-{ep.index}")
        self._threads, self._newest = [*pending, thread], thread
        thread.start()
        return ep.index

    def _take_episode(self) -> _Episode:
        """Hand the buffered frames over as the next episode (stacked later, in the background) and
        start an empty buffer."""
        known = {task: i for i, task in enumerate(self._tasks)}
        for task in self._buffer_tasks:
            if task not in known:
                known[task] = len(self._tasks)
                self._tasks.append(task)
        ep = _Episode(
            self._num_episodes,
            self._num_frames,
            self._buffer,
            self._buffer_times,
            [known[task] for task in self._buffer_tasks],
            list(dict.fromkeys(self._buffer_tasks)),
            list(self._tasks),
        )
        self._num_episodes += 1
        self._num_frames += len(self._buffer_times)
        self.discard_episode()
        return ep

    def wait(self) -> None:
        """Block until every saved episode is on disk.

        Raises:
          DataFileError: an episode failed to save (the ones before it are on disk).
        """
        for thread in self._threads:
            if thread.ident is not None or thread.is_alive():  # never started: nothing to wait for
                thread.join()
        self._threads.clear()
        self._raise_failure()

    def close(self) -> None:
        """Drop an unsaved episode's frames, wait for the saved ones, and remove scratch files."""
        if self._closed:
            return
        self._closed = True
        self.discard_episode()
        try:
            self.wait()
        finally:
            shutil.rmtree(self.root / STAGING_DIR, ignore_errors=True)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise DataFileError(
                str(self.root), "the dataset writer is closed; DatasetWriter.resume(root) appends more episodes"
            )

    def _raise_failure(self) -> None:
        error = self._failure
        if error is None:
            return
        if isinstance(error, SimrealError):
            raise error
        raise DataFileError(str(self.root), f"saving an episode failed: {short_reason(error)}") from error

    # ------------------------------------------------------------------ background

    def _finish(self, ep: _Episode, previous: threading.Thread | None) -> None:
        """Prepare episode ``ep``, wait for the episode before it, then append it. The first failure
        is kept (the caller's next save_episode, wait or close raises it) and stops later appends."""
        encoded: dict[str, Path] = {}
        _yield_cpu()
        try:
            try:
                saved = self._prepare(ep, encoded)
            finally:
                if previous is not None:
                    previous.join()  # appends stay in episode order, and a failure stays the first one
            with self._append_lock:  # one commit at a time, in episode order (the appender checks it)
                if self._failure is None:
                    self._appender.append(saved)
        except BaseException as e:  # a full disk, a codec error, ...: anything, reported to the caller's thread
            if self._failure is None:
                self._failure = e
        finally:
            for path in encoded.values():
                path.unlink(missing_ok=True)

    def _prepare(self, ep: _Episode, encoded: dict[str, Path]) -> SavedEpisode:
        """Episode ``ep``'s statistics and data rows, its videos encoded into ``encoded`` (key -> mp4)."""
        columns = ep.columns(self.features)
        ep.values.clear()  # free the per-frame copies
        staging = self.root / STAGING_DIR
        staging.mkdir(exist_ok=True)
        for n, key in enumerate(self._video_keys):
            encoded[key] = staging / f"episode-{ep.index:06d}-{n}.mp4"
            encode_frames(columns[key], encoded[key], self._fps)
        return SavedEpisode(
            ep.index,
            ep.first,
            ep.tasks,
            ep.known_tasks,
            episode_stats(columns, self.features),
            self._appender.data_table(columns),
            encoded,
        )


#: Niceness of the background save threads: a recording loop at 30 fps shares the CPU with them.
BACKGROUND_NICE = 10


def _yield_cpu() -> None:
    """Lower the calling thread's scheduling priority (Linux: each thread is a task with its own
    nice value, and the encoder threads SVT-AV1 starts inherit it), so a control or recording
    loop in the same process keeps its period while an episode encodes. No-op elsewhere."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass
