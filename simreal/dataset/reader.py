"""Reading a LeRobot v3.0 dataset (simreal's or lerobot's): metadata, episodes, frames, videos.

    ds = Dataset("data/pick_cube")
    ds.fps, ds.num_episodes, ds.num_frames, ds.tasks, ds.stats["action"]["mean"]
    ep = ds.episode(0)          # {"action": (T, 6) float32, "observation.images.front": (T, H, W, 3) uint8, ...}
    ds.episode_task(0)          # "pick up the cube"
    ds.table()                  # every frame's non-video columns, for training

The layout is described in :mod:`simreal.dataset.layout`. Opening a dataset whose last save
was interrupted first finishes that save (:func:`simreal.dataset.commit.recover`). Every
missing or malformed file, column or field is one :class:`~simreal.errors.DataFileError`
naming the file and what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from simreal.dataset.commit import recover
from simreal.dataset.layout import (
    DEFAULT_FEATURES,
    EPISODES_DIR,
    EPISODES_PATH,
    STATS_PATH,
    TASKS_PATH,
    load_info,
    read_json,
    video_keys,
)
from simreal.dataset.stats import Stats, stats_from_json
from simreal.dataset.video import decode_frames, decode_png
from simreal.errors import DataFileError
from simreal.npz import short_reason

_EPISODE_COLUMNS = (
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
    "meta/episodes/chunk_index",
    "meta/episodes/file_index",
)
_VIDEO_COLUMNS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")


class Dataset:
    """A LeRobot v3.0 dataset on disk, read-only.

    Attributes:
      root: the dataset folder.
      info: ``meta/info.json`` (features checked and normalised).
      features: name -> ``{"dtype", "shape", "names"}``, the user's then the five default ones.
      tasks: the task strings; ``tasks[task_index]``.
      stats: ``meta/stats.json``, feature -> stat -> array ({} when the file is absent).
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        recover(self.root)
        self.info = load_info(self.root)
        self.features: dict[str, dict[str, Any]] = self.info["features"]
        self.tasks = read_tasks(self.root) if (self.root / TASKS_PATH).exists() or self.info["total_tasks"] else []
        if len(self.tasks) != self.info["total_tasks"]:
            raise DataFileError(
                str(self.root / TASKS_PATH),
                f"{len(self.tasks)} tasks but info.json field 'total_tasks' is {self.info['total_tasks']}",
            )
        self._episodes = self._read_episodes()
        stats_path = self.root / STATS_PATH
        self.stats: dict[str, Stats] = (
            stats_from_json(read_json(stats_path), str(stats_path)) if stats_path.exists() else {}
        )
        self._cached: tuple[Path, pa.Table] | None = None  # the data file read last

    @property
    def fps(self) -> int:
        """Frames per second [Hz]."""
        return self.info["fps"]

    @property
    def robot_type(self) -> str | None:
        """The robot the dataset was recorded with, as the recorder named it."""
        return self.info.get("robot_type")

    @property
    def num_episodes(self) -> int:
        """Number of saved episodes."""
        return self.info["total_episodes"]

    @property
    def num_frames(self) -> int:
        """Number of frames over all episodes."""
        return self.info["total_frames"]

    @property
    def video_keys(self) -> list[str]:
        """Features stored as mp4 videos."""
        return video_keys(self.features)

    def episode_info(self, i: int) -> dict[str, Any]:
        """Episode i's row of the episodes parquet, without its statistics (lengths, file indices, timestamps)."""
        self._check_index(i)
        return {name: self._episodes[name][i].as_py() for name in self._episodes.column_names}

    def episode_tasks(self, i: int) -> list[str]:
        """The distinct tasks of episode i's frames."""
        return list(self.episode_info(i)["tasks"])

    def episode_task(self, i: int) -> str:
        """Episode i's instruction: its only task, or the task of its first frame when it has several."""
        tasks = self.episode_tasks(i)
        if len(tasks) == 1:
            return tasks[0]
        return self.tasks[int(self._rows(i)["task_index"][0].as_py())]

    def episode(self, i: int) -> dict[str, np.ndarray]:
        """Every feature of episode i over its T frames.

        Returns:
          name -> array: the default features (``timestamp`` float32 [s], ``frame_index``,
          ``episode_index``, ``index``, ``task_index``) as (T,); numeric features as
          (T, n); video and image features decoded to (T, H, W, 3) uint8.
        """
        rows, path = self._rows(i), self._data_path(i)
        out = {name: self._column(rows, name, path) for name, ft in self.features.items() if ft["dtype"] != "video"}
        if self.video_keys:
            meta = self.episode_info(i)
            for key in self.video_keys:
                start = meta[f"videos/{key}/from_timestamp"]
                out[key] = decode_frames(self._video_path(meta, key), [start + float(t) for t in out["timestamp"]])
        return {name: out[name] for name in self.features}

    def check_files(self) -> None:
        """Check that the files the episodes list are there, without decoding them: every data file
        holds exactly the rows its episodes' index ranges name, and every video file exists. The
        metadata alone (what opening the dataset checks) does not see a data or video file deleted
        or cut short; appending to such a dataset would grow a broken one.

        Raises:
          DataFileError: naming the file and the episodes it should hold.
        """
        by_file: dict[Path, list[int]] = {}
        for i in range(self.num_episodes):
            by_file.setdefault(self._data_path(i), []).append(i)
            for key in self.video_keys:
                video = self._video_path(self.episode_info(i), key)
                if not video.is_file():
                    raise DataFileError(str(video), f"file not found (episode {i}'s {key})")
        for path, episodes in by_file.items():
            index = np.sort(_read_parquet(path, columns=["index"])["index"].to_numpy())
            wanted = np.concatenate(
                [
                    np.arange(
                        self._episodes["dataset_from_index"][i].as_py(), self._episodes["dataset_to_index"][i].as_py()
                    )
                    for i in episodes
                ]
            )
            if not np.array_equal(index, wanted):
                raise DataFileError(
                    str(path),
                    f"should hold the {len(wanted)} rows of episodes {episodes[0]}.."
                    f"{episodes[-1]}, holds {len(index)} rows that are not those",
                )

    def _video_path(self, meta: dict[str, Any], key: str) -> Path:
        """The video file of ``key`` that the episode row ``meta`` points to."""
        return self.root / self.info["video_path"].format(
            video_key=key, chunk_index=meta[f"videos/{key}/chunk_index"], file_index=meta[f"videos/{key}/file_index"]
        )

    def frames(self) -> Iterator[dict[str, np.ndarray]]:
        """Every frame in order, one episode decoded at a time: name -> that frame's value."""
        for i in range(self.num_episodes):
            ep = self.episode(i)
            for k in range(len(ep["index"])):
                yield {name: values[k] for name, values in ep.items()}

    def table(self) -> pa.Table:
        """Every frame's non-video columns, over all data files, in ``index`` order."""
        files = dict.fromkeys(self._data_path(i) for i in range(self.num_episodes))
        table = pa.concat_tables([_read_parquet(p) for p in files]) if files else pa.table({})
        if table.num_rows != self.num_frames:
            raise DataFileError(
                str(self.root / "data"),
                f"{table.num_rows} frames but info.json field 'total_frames' is {self.num_frames}",
            )
        return table

    def episode_stats(self, i: int) -> dict[str, Stats]:
        """Episode i's statistics as stored in its episodes parquet row (``stats/<feature>/<stat>``)."""
        meta = self.episode_info(i)
        path = self.root / EPISODES_PATH.format(
            chunk_index=meta["meta/episodes/chunk_index"], file_index=meta["meta/episodes/file_index"]
        )
        table = _read_parquet(path)
        rows = np.flatnonzero(table["episode_index"].to_numpy() == i)
        if len(rows) != 1:
            raise DataFileError(str(path), f"field 'episode_index' has {len(rows)} rows for episode {i}")
        out: dict[str, Stats] = {}
        for name in table.column_names:
            if name.startswith("stats/"):
                feature, stat = name[len("stats/") :].rsplit("/", 1)
                out.setdefault(feature, {})[stat] = np.asarray(table[name][int(rows[0])].as_py())
        return out

    def _check_index(self, i: int) -> None:
        if not isinstance(i, int | np.integer) or not 0 <= i < self.num_episodes:
            raise IndexError(f"episode {i} out of range: the dataset has {self.num_episodes} episodes")

    def _data_path(self, i: int) -> Path:
        meta = self.episode_info(i)
        return self.root / self.info["data_path"].format(
            chunk_index=meta["data/chunk_index"], file_index=meta["data/file_index"]
        )

    def _rows(self, i: int) -> pa.Table:
        """Episode i's rows of its data file, checked against its episodes-parquet row."""
        meta, path = self.episode_info(i), self._data_path(i)
        if self._cached is None or self._cached[0] != path:
            self._cached = (path, _read_parquet(path))
        table = self._cached[1]
        if "index" not in table.column_names:
            raise DataFileError(str(path), "column 'index' missing")
        index = table["index"].to_numpy()
        first, end = meta["dataset_from_index"], meta["dataset_to_index"]
        rows = table.take(np.flatnonzero((index >= first) & (index < end)))
        if not np.array_equal(rows["index"].to_numpy(), np.arange(first, end)):
            raise DataFileError(
                str(path), f"episode {i} should be rows with index {first}..{end - 1}, found {rows.num_rows} of them"
            )
        return rows

    def _column(self, rows: pa.Table, name: str, path: Path) -> np.ndarray:
        """One feature's values in ``rows`` as the numpy array :meth:`episode` documents."""
        ft = self.features[name]
        if name not in rows.column_names:
            raise DataFileError(str(path), f"column '{name}' missing (a feature in info.json)")
        column = rows[name].combine_chunks()
        if ft["dtype"] == "image":
            return np.stack([decode_png(v["bytes"], str(path), name) for v in column.to_pylist()])
        try:
            if (
                pa.types.is_list(column.type)
                or pa.types.is_fixed_size_list(column.type)
                or pa.types.is_large_list(column.type)
            ):
                values = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), *ft["shape"])
            else:
                values = column.to_numpy(zero_copy_only=False)
                if name not in DEFAULT_FEATURES:
                    values = values.reshape(len(column), *ft["shape"])
            return values.astype(ft["dtype"], copy=False)
        except (ValueError, TypeError, pa.ArrowException) as e:
            raise DataFileError(
                str(path),
                f"column '{name}' does not hold {ft['dtype']} values of shape {list(ft['shape'])}: {short_reason(e)}",
            ) from None

    def _read_episodes(self) -> pa.Table:
        """The episodes parquet files' rows without statistics, checked against info.json."""
        folder = self.root / EPISODES_DIR
        files = sorted(folder.glob("*/*.parquet"))
        if not files:
            if self.num_episodes:
                raise DataFileError(
                    str(folder), f"no episodes parquet files, but info.json lists {self.num_episodes} episodes"
                )
            return pa.table({name: pa.array([], pa.int64()) for name in _EPISODE_COLUMNS})
        parts = []
        for path in files:
            names = _read_schema(path).names
            wanted = list(_EPISODE_COLUMNS) + [f"videos/{k}/{c}" for k in self.video_keys for c in _VIDEO_COLUMNS]
            missing = [c for c in wanted if c not in names]
            if missing:
                raise DataFileError(str(path), f"column '{missing[0]}' missing")
            parts.append(_read_parquet(path, columns=wanted))
        try:
            table = pa.concat_tables(parts, promote_options="permissive")
        except pa.ArrowException as e:
            raise DataFileError(str(folder), f"episodes parquet files disagree: {short_reason(e)}") from None
        _check_episode_ranges(table, self.info, str(folder))
        return table


def _check_episode_ranges(table: pa.Table, info: dict[str, Any], where: str) -> None:
    """Episodes 0..N-1 in order, lengths > 0, index ranges back to back and matching info.json's totals."""
    n = table.num_rows
    if n != info["total_episodes"]:
        raise DataFileError(where, f"{n} episodes but info.json field 'total_episodes' is {info['total_episodes']}")
    if not n:
        return
    episode = table["episode_index"].to_numpy()
    length = table["length"].to_numpy()
    first = table["dataset_from_index"].to_numpy()
    end = table["dataset_to_index"].to_numpy()
    if not np.array_equal(episode, np.arange(n)):
        raise DataFileError(where, "field 'episode_index' is not 0, 1, 2, ... in file order")
    starts = np.concatenate([[0], np.cumsum(length)[:-1]])
    if np.any(length <= 0) or not np.array_equal(first, starts) or not np.array_equal(end, starts + length):
        bad = int(np.flatnonzero((length <= 0) | (first != starts) | (end != starts + length))[0])
        raise DataFileError(
            where,
            f"episode {bad}: fields 'length', 'dataset_from_index', 'dataset_to_index' "
            f"are {length[bad]}, {first[bad]}, {end[bad]}; episodes must be back to back "
            f"(this one from index {starts[bad]}, at least one frame)",
        )
    if int(end[-1]) != info["total_frames"]:
        raise DataFileError(
            where, f"{int(end[-1])} frames but info.json field 'total_frames' is {info['total_frames']}"
        )


def read_tasks(root: Path) -> list[str]:
    """``meta/tasks.parquet``'s task strings ordered by ``task_index`` (which must be 0, 1, 2, ...).

    The strings are the column ``task`` (lerobot 0.5 on) or the table's pandas index (lerobot
    0.4.x wrote them as an unnamed index, stored as ``__index_level_0__``; lerobot reads the index
    by position, so both are valid v3.0)."""
    path = root / TASKS_PATH
    table = _read_parquet(path)
    task_column = "task" if "task" in table.column_names else _pandas_index_column(table)
    for name in ("task_index", task_column or "task"):
        if name not in table.column_names:
            raise DataFileError(str(path), f"column '{name}' missing (nor a pandas index holding the task strings)")
    order = table["task_index"].to_numpy()
    if not np.array_equal(np.sort(order), np.arange(len(order))):
        raise DataFileError(str(path), "field 'task_index' is not 0, 1, 2, ...")
    tasks = table[task_column].to_pylist()
    return [tasks[j] for j in np.argsort(order)]


def _pandas_index_column(table: pa.Table) -> str | None:
    """The one column pandas stored its index in (``index_columns`` of the pandas metadata), or None."""
    meta = table.schema.pandas_metadata or {}
    stored = [c for c in meta.get("index_columns", []) if isinstance(c, str) and c in table.column_names]
    return stored[0] if len(stored) == 1 else None


def _read_schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except FileNotFoundError:
        raise DataFileError(str(path), "file not found") from None
    except (pa.ArrowException, OSError) as e:
        raise DataFileError(str(path), f"not a readable parquet file: {short_reason(e)}") from None


def _read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    try:
        return pq.read_table(path, columns=columns)
    except FileNotFoundError:
        raise DataFileError(str(path), "file not found") from None
    except (pa.ArrowException, OSError) as e:
        raise DataFileError(str(path), f"not a readable parquet file: {short_reason(e)}") from None
