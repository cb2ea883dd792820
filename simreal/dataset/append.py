"""Appending one finished episode to a LeRobot v3.0 dataset's files, as one atomic commit.

The committing half of :class:`simreal.dataset.writer.DatasetWriter`: it places the episode's
rows in the open data parquet, its videos at the end of the open mp4s, its row in the open
episodes parquet, and rewrites tasks, stats and info, all in one
:class:`~simreal.dataset.commit.Commit`. Files are shared until lerobot's size rule starts a
new one (``dataset_writer.py``: ``_save_episode_data``, ``_save_episode_video``;
``dataset_metadata.py``: ``_save_episode_metadata``):

- data parquet: a new file when current size + (current size / frames in it) * T reaches
  ``data_files_size_in_mb``; one row group per episode. (lerobot measures its still-open file,
  footer not yet written, so it fills a file slightly fuller than simreal does.)
- mp4: a new file when current size + this episode's mp4 size reaches
  ``video_files_size_in_mb``; otherwise the episode is appended and starts where the file ended.
- episodes parquet: a new file when current size + one average row reaches
  ``data_files_size_in_mb`` (the limit lerobot applies to it).

The first episode of a session opens new files after the last saved episode's, as a resumed
lerobot recording does, so a resumed dataset never rewrites an earlier session's files.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from simreal.dataset.commit import Commit
from simreal.dataset.layout import (
    EPISODES_PATH,
    IMAGE_FILE_NAME,
    IMAGE_STRUCT,
    INFO_PATH,
    PARQUET_OPTIONS,
    STATS_PATH,
    TASKS_PATH,
    data_schema,
    episodes_schema,
    json_bytes,
    next_chunk_file,
    tasks_table,
    video_keys,
)
from simreal.dataset.stats import Stats, aggregate_stats, stats_to_json
from simreal.dataset.video import concatenate, duration_s, encode_png, video_info
from simreal.errors import DataFileError

_MB = 1024**2


@dataclass
class SavedEpisode:
    """An episode ready to append: its rows, encoded videos and statistics."""

    index: int
    first: int  # the dataset-wide index of its first frame
    tasks: list[str]  # its distinct tasks, in order of first use
    known_tasks: list[str]  # the dataset's task list once this episode is in
    stats: dict[str, Stats]
    table: pa.Table  # its data parquet rows (:meth:`EpisodeAppender.data_table`)
    videos: dict[str, Path]  # video key -> its own mp4 (same file system as the dataset)


@dataclass
class _OpenFile:
    """The parquet or mp4 file the next episode may join, and what this session put in it."""

    chunk: int
    file: int
    parts: list[Any]  # data: the tables written to it; episodes: its rows; video: unused
    end_s: float = 0.0  # video: where the last episode ends [s]


class EpisodeAppender:
    """Appends episodes, one commit each, to the dataset at ``root`` (calls must come one at a time,
    in episode order).

    Args:
      info: the dataset's info.json as it is on disk.
      stats: its stats.json (None before the first episode).
      last_episode: the last saved episode's episodes-parquet row (None for a new dataset).
      scratch: a folder on the dataset's file system for temporary files.
    """

    def __init__(
        self,
        root: Path,
        info: dict[str, Any],
        stats: dict[str, Stats] | None,
        last_episode: dict[str, Any] | None,
        scratch: Path,
    ):
        self.root = root
        self.info = info
        self._stats = stats
        self._last = last_episode
        self._scratch = scratch
        self._schema = data_schema(info["features"])
        self._episodes_schema = episodes_schema(info["features"])
        self._data: _OpenFile | None = None
        self._meta: _OpenFile | None = None
        self._videos: dict[str, _OpenFile] = {}

    def data_table(self, columns: dict[str, np.ndarray]) -> pa.Table:
        """An episode's data parquet rows (every feature but the videos), from feature -> (T, ...) arrays."""
        arrays = []
        for field in self._schema:
            values, ft = columns[field.name], self.info["features"][field.name]
            if ft["dtype"] == "image":
                arrays.append(
                    pa.array(
                        [
                            {"bytes": encode_png(img), "path": IMAGE_FILE_NAME.format(frame_index=k)}
                            for k, img in enumerate(values)
                        ],
                        IMAGE_STRUCT,
                    )
                )
            elif pa.types.is_fixed_size_list(field.type):
                flat = pa.array(values.reshape(-1).astype(ft["dtype"]), field.type.value_type)
                arrays.append(pa.FixedSizeListArray.from_arrays(flat, field.type.list_size))
            else:
                arrays.append(pa.array(values.astype(ft["dtype"]), field.type))
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def append(self, ep: SavedEpisode) -> None:
        """Commit ``ep`` and the metadata it changes; on success the open files advance. ``ep`` must
        be the next episode: one out of order would leave a gap the metadata does not (a data file
        without an episode its episodes parquet lists), so it is refused with nothing written."""
        if ep.index != self.info["total_episodes"]:
            raise DataFileError(
                str(self.root),
                f"episode {ep.index} came to be saved while the dataset holds "
                f"{self.info['total_episodes']}: out of order, not written",
            )
        commit = Commit(self.root)
        try:
            row: dict[str, Any] = {"episode_index": ep.index, "tasks": ep.tasks, "length": ep.table.num_rows}
            data, fields = self._stage_data(commit, ep.table, ep.first)
            row.update(fields)
            videos, probes = {}, {}
            for key in video_keys(self.info["features"]):
                videos[key], fields, probes[key] = self._stage_video(commit, key, ep.videos[key])
                row.update(fields)
            for name, ft_stats in ep.stats.items():
                for stat, value in ft_stats.items():
                    row[f"stats/{name}/{stat}"] = np.asarray(
                        value, np.int64 if stat == "count" else np.float64
                    ).tolist()
            meta = self._stage_episode_row(commit, row)
            if len(ep.known_tasks) > self.info["total_tasks"]:
                pq.write_table(tasks_table(ep.known_tasks), commit.staged(TASKS_PATH), **PARQUET_OPTIONS)
            total = aggregate_stats([self._stats, ep.stats]) if self._stats else ep.stats
            commit.staged(STATS_PATH).write_bytes(json_bytes(stats_to_json(total)))
            info = copy.deepcopy(self.info)
            info["total_episodes"] += 1
            info["total_frames"] += ep.table.num_rows
            info["total_tasks"] = len(ep.known_tasks)
            info["splits"] = {"train": f"0:{info['total_episodes']}"}
            for key, probe in probes.items():  # lerobot records the first mp4's stream and encoder settings
                feature = info["features"][key]
                if "video.codec" not in feature.get("info", {}):
                    feature["info"] = {**feature.get("info", {}), **video_info(probe)}
            commit.staged(INFO_PATH).write_bytes(json_bytes(info))
            commit.apply()
        except BaseException:
            commit.discard()
            raise
        self.info, self._stats, self._data, self._meta = info, total, data, meta
        self._videos.update(videos)

    def _next_file(self, current: _OpenFile | None, prefix: str) -> tuple[int, int]:
        """Where a new file goes: after ``current``, else after the last saved episode's (``<prefix>/chunk_index``,
        ``<prefix>/file_index``), else chunk 0 file 0."""
        if current is not None:
            return next_chunk_file(current.chunk, current.file, self.info["chunks_size"])
        if self._last is not None:
            return next_chunk_file(
                self._last[f"{prefix}/chunk_index"], self._last[f"{prefix}/file_index"], self.info["chunks_size"]
            )
        return 0, 0

    def _stage_data(self, commit: Commit, table: pa.Table, first: int) -> tuple[_OpenFile, dict[str, int]]:
        """Stage the data file with this episode's rows appended (or a new file past the size limit)."""
        current = self._data
        if current is not None:
            size_mb = self._path(self.info["data_path"], current).stat().st_size / _MB
            frames = sum(t.num_rows for t in current.parts)
            if size_mb + size_mb / frames * table.num_rows < self.info["data_files_size_in_mb"]:
                current = _OpenFile(current.chunk, current.file, [*current.parts, table])
            else:
                current = _OpenFile(*self._next_file(current, "data"), [table])
        else:
            current = _OpenFile(*self._next_file(None, "data"), [table])
        path = commit.staged(self._rel(self.info["data_path"], current))
        with pq.ParquetWriter(path, self._schema, **PARQUET_OPTIONS) as writer:
            for part in current.parts:  # one row group per episode, as lerobot writes them
                writer.write_table(part)
        return current, {
            "data/chunk_index": current.chunk,
            "data/file_index": current.file,
            "dataset_from_index": first,
            "dataset_to_index": first + table.num_rows,
        }

    def _stage_video(self, commit: Commit, key: str, encoded: Path) -> tuple[_OpenFile, dict[str, Any], Path]:
        """Stage camera ``key``'s mp4 with this episode appended (or a new mp4 past the size limit).

        Returns the file's new state, the episode's ``videos/<key>/...`` fields, and the staged file."""
        template, prefix = self.info["video_path"], f"videos/{key}"
        current = self._videos.get(key)
        length_s = duration_s(encoded)
        if current is not None:
            path = self._path(template, current, key)
            if (path.stat().st_size + encoded.stat().st_size) / _MB < self.info["video_files_size_in_mb"]:
                start = current.end_s
                current = _OpenFile(current.chunk, current.file, [], start + length_s)
                staged = commit.staged(self._rel(template, current, key))
                concatenate([path, encoded], staged, self._scratch / f"{encoded.stem}.ffconcat")
                return current, _video_fields(prefix, current, start), staged
        current = _OpenFile(*self._next_file(current, prefix), [], length_s)
        staged = commit.staged(self._rel(template, current, key))
        os.replace(encoded, staged)
        return current, _video_fields(prefix, current, 0.0), staged

    def _stage_episode_row(self, commit: Commit, row: dict[str, Any]) -> _OpenFile:
        """Stage the episodes parquet with ``row`` appended (a new file once the current one nears
        ``data_files_size_in_mb``)."""
        current = self._meta
        if current is not None:
            size_mb = self._path(EPISODES_PATH, current).stat().st_size / _MB
            if size_mb + size_mb / len(current.parts) >= self.info["data_files_size_in_mb"]:
                current = _OpenFile(*self._next_file(current, "meta/episodes"), [])
        else:
            current = _OpenFile(*self._next_file(None, "meta/episodes"), [])
        row.update({"meta/episodes/chunk_index": current.chunk, "meta/episodes/file_index": current.file})
        current = _OpenFile(current.chunk, current.file, [*current.parts, row])
        table = pa.Table.from_pylist(current.parts, schema=self._episodes_schema)
        pq.write_table(table, commit.staged(self._rel(EPISODES_PATH, current)), **PARQUET_OPTIONS)
        return current

    @staticmethod
    def _rel(template: str, at: _OpenFile, video_key: str | None = None) -> str:
        return template.format(chunk_index=at.chunk, file_index=at.file, video_key=video_key)

    def _path(self, template: str, at: _OpenFile, video_key: str | None = None) -> Path:
        return self.root / self._rel(template, at, video_key)


def _video_fields(prefix: str, video: _OpenFile, start_s: float) -> dict[str, Any]:
    """An episode's ``videos/<key>/...`` columns: its file and where it sits in it [s]."""
    return {
        f"{prefix}/chunk_index": video.chunk,
        f"{prefix}/file_index": video.file,
        f"{prefix}/from_timestamp": start_s,
        f"{prefix}/to_timestamp": video.end_s,
    }
