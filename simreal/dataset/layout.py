"""The LeRobot dataset v3.0 layout: paths, constants, the feature schema and ``meta/info.json``.

simreal writes and reads datasets exactly as lerobot's ``CODEBASE_VERSION = "v3.0"`` does, so
lerobot and the tools built on it read them unchanged. What follows was read from lerobot's
source (``src/lerobot/datasets/``: ``utils.py``, ``dataset_metadata.py``, ``dataset_writer.py``,
``io_utils.py``, ``feature_utils.py``, ``compute_stats.py``, ``video_utils.py``,
``dataset_reader.py``, ``lerobot/configs/video.py``, ``lerobot/utils/constants.py``,
``lerobot/utils/feature_utils.py``, ``tests/fixtures/{constants,dataset_factories}.py``) and
checked against datasets lerobot itself wrote (lerobot at commit 7427f31, ``LeRobotDataset.create``
/ ``add_frame`` / ``save_episode`` / ``finalize`` / ``resume``; datasets 4.8.5, pyarrow 26, PyAV
15.1): simreal's files for the same frames carry identical info.json, stats.json, tasks and
episodes rows and data columns (PNG and mp4 bytes aside), and lerobot's ``LeRobotDataset`` reads
simreal's item for item::

    meta/info.json                               json.dump(indent=4, ensure_ascii=False)
    meta/stats.json                              {feature: {min, max, mean, std, count, q01, q10, q50, q90, q99}}
    meta/tasks.parquet                           columns task_index (int64), task (string; pandas index)
    meta/episodes/chunk-000/file-000.parquet     one row per episode (columns below)
    data/chunk-000/file-000.parquet              one row per frame, one row group per episode
    videos/<video_key>/chunk-000/file-000.mp4    the episodes of one camera, back to back

``info.json`` keys, in lerobot's ``DatasetInfo`` order: ``codebase_version`` ("v3.0"), ``fps``
(int), ``features``, ``total_episodes``, ``total_frames``, ``total_tasks``, ``chunks_size``
(1000 files per chunk folder), ``data_files_size_in_mb`` (100), ``video_files_size_in_mb``
(200), ``data_path``, ``video_path`` (null without videos), ``robot_type``, ``splits``
(``{"train": "0:<total_episodes>"}`` once an episode is saved). Every feature is
``{"dtype", "shape", "names"}`` (a video feature adds an ``info`` block probed from its first
mp4: ``video.height``, ``video.width``, ``video.codec``, ``video.pix_fmt``, ``video.fps``,
``video.channels``, ``has_audio``, the encoder's ``video.g``, ``video.crf``, ``video.preset``,
``video.fast_decode``, ``video.video_backend``, ``video.extra_options``, and
``is_depth_map``); the recorder adds five bookkeeping features after the user's, each shape
``(1,)``: ``timestamp`` float32 [s] (frame_index / fps), ``frame_index``, ``episode_index``,
``index`` (over the whole dataset) and ``task_index``, all int64.

Data parquet columns are the non-video features in ``features`` order, typed as lerobot's
``get_hf_features_from_features`` makes them: a shape ``(1,)`` feature is a scalar column, a
shape ``(n,)`` feature a ``fixed_size_list<dtype>[n]``, an ``image`` feature a
``struct<bytes: binary, path: string>`` holding a PNG (path ``frame-000000.png``). The schema
carries Hugging Face ``datasets``' metadata (``{"info": {"features": ...}}``, 4.x type names
``Value``/``List``/``Image``) and files are snappy-compressed with dictionary encoding.

Episodes parquet columns, in this order: ``episode_index``, ``tasks`` (list<string>),
``length``, ``data/chunk_index``, ``data/file_index``, ``dataset_from_index``,
``dataset_to_index`` (the episode's ``index`` range, end exclusive), per video key
``videos/<key>/chunk_index``, ``/file_index``, ``/from_timestamp``, ``/to_timestamp`` [s] (where
the episode sits in its mp4), then ``stats/<feature>/<stat>`` for every feature and statistic
(list<double>, ``count`` list<int64>, image stats nested (3, 1, 1) lists), then
``meta/episodes/chunk_index``, ``meta/episodes/file_index``. Episodes share a data file and
an mp4 until the size limit (lerobot's rule: start the next file when the current size plus
this episode's estimated size reaches the limit); file indices then advance, and after
``chunks_size`` files the chunk index does. A resumed recording starts new files, as lerobot's
does. File placement: :mod:`simreal.dataset.append`; statistics: :mod:`simreal.dataset.stats`;
videos: :mod:`simreal.dataset.video`.

simreal writes numeric features of shape ``(n,)`` (lerobot stores 2-D and larger ones as
``datasets`` extension types, which simreal does not write), RGB ``video`` and ``image``
features of shape ``(H, W, 3)`` uint8, and no depth or string features.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from simreal.dataset.stats import STAT_KEYS
from simreal.errors import DataFileError, SimrealError, printable
from simreal.yaml_io import read_text

CODEBASE_VERSION = "v3.0"
DEFAULT_CHUNK_SIZE = 1000  # files per chunk folder
DEFAULT_DATA_FILE_SIZE_IN_MB = 100
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_DIR = "meta/episodes"
DATA_DIR = "data"
CHUNK_FILE_PATTERN = "chunk-{chunk_index:03d}/file-{file_index:03d}"
EPISODES_PATH = EPISODES_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
DATA_PATH = DATA_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE_PATTERN + ".mp4"
IMAGE_FILE_NAME = "frame-{frame_index:06d}.png"  # the ``path`` lerobot stores beside an image's PNG bytes

# Added after the user's features by the recorder; never given in a frame.
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": (1,), "names": None},
    "frame_index": {"dtype": "int64", "shape": (1,), "names": None},
    "episode_index": {"dtype": "int64", "shape": (1,), "names": None},
    "index": {"dtype": "int64", "shape": (1,), "names": None},
    "task_index": {"dtype": "int64", "shape": (1,), "names": None},
}
NUMERIC_DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
CAMERA_DTYPES = ("video", "image")
CAMERA_NAMES = ["height", "width", "channels"]
_SPEC_KEYS = ("dtype", "shape", "names", "info")

# Parquet writer settings of lerobot's ParquetWriter calls.
PARQUET_OPTIONS: dict[str, Any] = {"compression": "snappy", "use_dictionary": True}
IMAGE_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])

Fail = Callable[[str, str], SimrealError]  # (field, what is wrong) -> the error to raise


def validate_features(features: Any, fail: Fail, *, stored: bool = False) -> dict[str, dict[str, Any]]:
    """Check a feature specification and return a normalised deep copy (shapes as tuples).

    Args:
      features: ``{name: {"dtype", "shape", "names"?, "info"?}}``; dtype one of
        ``NUMERIC_DTYPES`` (shape ``(n,)``) or ``video`` / ``image`` (shape ``(H, W, 3)``).
      fail: builds the error for a bad field, e.g. ``lambda f, m: ConfigError(f, m)``.
      stored: the specification is a dataset's (``info.json``): it must end with
        ``DEFAULT_FEATURES``, and keys or names simreal does not use are kept as they are.
        Otherwise it is a recorder's: those names are reserved (and added), every key is known,
        and a numeric feature's names, when given, name each component.
    """
    if not isinstance(features, Mapping) or not features:
        raise fail("features", "expected a non-empty mapping {name: {dtype, shape, names}}")
    out: dict[str, dict[str, Any]] = {}
    for name, spec in features.items():
        if not isinstance(name, str) or not name or "/" in name or not name.isprintable():
            raise fail(f"features.{printable(str(name))}", "a feature name must be a non-empty string without '/'")
        if name in DEFAULT_FEATURES and not stored:
            raise fail(
                f"features.{name}", f"'{name}' is added by the recorder; reserved names: " + ", ".join(DEFAULT_FEATURES)
            )
        out[name] = _check_spec(f"features.{name}", spec, fail, stored)
    if not stored:
        return {**out, **copy.deepcopy(DEFAULT_FEATURES)}
    for name, spec in DEFAULT_FEATURES.items():
        if name not in out or (out[name]["dtype"], out[name]["shape"]) != (spec["dtype"], spec["shape"]):
            raise fail(
                f"features.{name}", f"expected {{dtype: {spec['dtype']}, shape: [1]}} (lerobot's default feature)"
            )
    return out


def _check_spec(key: str, spec: Any, fail: Fail, stored: bool) -> dict[str, Any]:
    """One feature's specification, checked (see :func:`validate_features`); ``key`` names it in errors."""
    if not isinstance(spec, Mapping):
        raise fail(key, "expected a mapping with dtype, shape and names")
    unknown = sorted(str(k) for k in spec if k not in _SPEC_KEYS)
    if unknown and not stored:
        raise fail(f"{key}.{printable(unknown[0])}", "unknown key; valid keys: " + ", ".join(_SPEC_KEYS))
    dtype = spec.get("dtype")
    if dtype not in NUMERIC_DTYPES + CAMERA_DTYPES:
        raise fail(
            f"{key}.dtype",
            f"got {printable(repr(dtype))}; simreal handles dtypes " + ", ".join(NUMERIC_DTYPES + CAMERA_DTYPES),
        )
    shape = spec.get("shape")
    if (
        not isinstance(shape, list | tuple)
        or not shape
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
    ):
        raise fail(f"{key}.shape", f"got {printable(repr(shape))}; expected a list of positive integers")
    shape = tuple(shape)
    camera = dtype in CAMERA_DTYPES
    if camera and (len(shape) != 3 or shape[2] != 3):
        raise fail(f"{key}.shape", f"got {list(shape)}; a {dtype} feature is an RGB image [height, width, 3]")
    if not camera and len(shape) != 1:
        raise fail(f"{key}.shape", f"got {list(shape)}; a numeric feature has shape [n] (flatten it)")
    names = spec.get("names", CAMERA_NAMES if camera else None)
    if not stored and names is not None:
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise fail(f"{key}.names", f"got {printable(repr(names))}; expected a list of strings or null")
        if not camera and len(names) != shape[0]:
            raise fail(f"{key}.names", f"{len(names)} names for shape [{shape[0]}]")
        names = list(names)
    info = spec.get("info")
    if info is not None and not stored and not (camera and isinstance(info, Mapping)):
        raise fail(f"{key}.info", "only a video or image feature has an info mapping")
    if camera and isinstance(info, Mapping) and (info.get("is_depth_map") or info.get("video.is_depth_map")):
        raise fail(f"{key}.info.is_depth_map", "depth cameras are not supported; record RGB [height, width, 3]")
    out = copy.deepcopy({k: v for k, v in spec.items() if k not in ("dtype", "shape", "names")})
    return {"dtype": dtype, "shape": shape, "names": copy.deepcopy(names), **out}


def video_keys(features: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Names of the features stored as mp4 videos, in feature order."""
    return [k for k, ft in features.items() if ft["dtype"] == "video"]


def image_keys(features: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Names of the features stored as PNG images inside the data parquet, in feature order."""
    return [k for k, ft in features.items() if ft["dtype"] == "image"]


def build_info(
    *,
    fps: int,
    features: dict[str, dict[str, Any]],
    robot_type: str | None,
    use_videos: bool,
    chunks_size: int = DEFAULT_CHUNK_SIZE,
    data_files_size_in_mb: float = DEFAULT_DATA_FILE_SIZE_IN_MB,
    video_files_size_in_mb: float = DEFAULT_VIDEO_FILE_SIZE_IN_MB,
) -> dict[str, Any]:
    """The ``info.json`` of an empty dataset, keys in lerobot's ``DatasetInfo.to_dict`` order."""
    return {
        "codebase_version": CODEBASE_VERSION,
        "fps": fps,
        "features": copy.deepcopy(features),
        "total_episodes": 0,
        "total_frames": 0,
        "total_tasks": 0,
        "chunks_size": chunks_size,
        "data_files_size_in_mb": data_files_size_in_mb,
        "video_files_size_in_mb": video_files_size_in_mb,
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if use_videos else None,
        "robot_type": robot_type,
        "splits": {},
    }


def load_info(root: Path) -> dict[str, Any]:
    """Read and check ``meta/info.json``; every problem is a DataFileError naming the file and field."""
    path = root / INFO_PATH
    info = read_json(path)

    def fail(field: str, message: str) -> DataFileError:
        return DataFileError(str(path), f"field '{field}' {message}")

    version = info.get("codebase_version")
    if not isinstance(version, str) or not re.fullmatch(r"v3\.\d+", version):
        raise fail(
            "codebase_version", f"is {printable(repr(version))}; simreal reads LeRobot v3 datasets ({CODEBASE_VERSION})"
        )
    for key in ("fps", "chunks_size", "total_episodes", "total_frames", "total_tasks"):
        value, low = info.get(key), 1 if key in ("fps", "chunks_size") else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise fail(key, f"is {printable(repr(value))}; expected an integer >= {low}")
    for key in ("data_files_size_in_mb", "video_files_size_in_mb"):
        value = info.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
            raise fail(key, f"is {printable(repr(value))}; expected a positive number")
    for key in ("data_path", "video_path"):
        if not (isinstance(info.get(key), str) or (key == "video_path" and info.get(key) is None)):
            raise fail(key, "expected a path template string")
    features = validate_features(info.get("features"), fail, stored=True)
    if video_keys(features) and info["video_path"] is None:
        raise fail("video_path", "is null but features " + ", ".join(video_keys(features)) + " are videos")
    info["features"] = features
    return info


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; missing, unreadable or malformed files raise DataFileError."""
    try:
        data = json.loads(read_text(path, "JSON file"))
    except json.JSONDecodeError as e:
        raise DataFileError(str(path), f"invalid JSON at line {e.lineno}: {e.msg}") from None
    if not isinstance(data, dict):
        raise DataFileError(str(path), f"expected a JSON object, got {type(data).__name__}")
    return data


def json_bytes(data: Any) -> bytes:
    """``data`` serialised as lerobot's ``write_json`` does (4-space indent, UTF-8, no ASCII escapes)."""
    return json.dumps(_jsonable(data), indent=4, ensure_ascii=False).encode("utf-8")


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def next_chunk_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) indices after these: file indices run to ``chunks_size - 1``, then the chunk advances."""
    if file_index == chunks_size - 1:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1


def data_schema(features: Mapping[str, Mapping[str, Any]]) -> pa.Schema:
    """The data parquet's Arrow schema with the Hugging Face ``datasets`` metadata lerobot's files carry."""
    fields: list[pa.Field] = []
    hf: dict[str, dict[str, Any]] = {}
    for name, ft in features.items():
        if ft["dtype"] == "video":
            continue
        if ft["dtype"] == "image":
            fields.append(pa.field(name, IMAGE_STRUCT))
            hf[name] = {"_type": "Image"}
            continue
        value = pa.from_numpy_dtype(np.dtype(ft["dtype"]))
        n = ft["shape"][0]
        if tuple(ft["shape"]) == (1,):
            fields.append(pa.field(name, value))
            hf[name] = {"dtype": ft["dtype"], "_type": "Value"}
        else:
            fields.append(pa.field(name, pa.list_(value, n)))
            hf[name] = {"feature": {"dtype": ft["dtype"], "_type": "Value"}, "length": n, "_type": "List"}
    meta = {"huggingface": json.dumps({"info": {"features": hf}})}
    return pa.schema(fields, metadata=meta)


# The pandas metadata `DataFrame.to_parquet` writes for lerobot's tasks frame (index "task",
# column "task_index"), so `pd.read_parquet` restores the index without pandas installed here.
# pandas_version names the release whose output this copies.
_TASKS_PANDAS_META = {
    "index_columns": ["task"],
    "column_indexes": [
        {
            "name": None,
            "field_name": None,
            "pandas_type": "unicode",
            "numpy_type": "object",
            "metadata": {"encoding": "UTF-8"},
        }
    ],
    "columns": [
        {
            "name": "task_index",
            "field_name": "task_index",
            "pandas_type": "int64",
            "numpy_type": "int64",
            "metadata": None,
        },
        {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
    ],
    "attributes": {},
    "creator": {"library": "pyarrow", "version": pa.__version__},
    "pandas_version": "2.3.3",
}


def tasks_table(tasks: list[str]) -> pa.Table:
    """``meta/tasks.parquet`` as lerobot writes it: ``task_index`` then ``task`` (the pandas index)."""
    return pa.table(
        {"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())},
        metadata={"pandas": json.dumps(_TASKS_PANDAS_META)},
    )


def episodes_schema(features: Mapping[str, Mapping[str, Any]]) -> pa.Schema:
    """The episodes parquet's columns and types, in the order lerobot writes them (module doc)."""
    fields = [
        pa.field("episode_index", pa.int64()),
        pa.field("tasks", pa.list_(pa.string())),
        pa.field("length", pa.int64()),
    ]
    fields += [
        pa.field(n, pa.int64())
        for n in ("data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index")
    ]
    for key in video_keys(features):
        fields += [
            pa.field(f"videos/{key}/chunk_index", pa.int64()),
            pa.field(f"videos/{key}/file_index", pa.int64()),
            pa.field(f"videos/{key}/from_timestamp", pa.float64()),
            pa.field(f"videos/{key}/to_timestamp", pa.float64()),
        ]
    for name, ft in features.items():
        value = pa.list_(pa.list_(pa.list_(pa.float64()))) if ft["dtype"] in CAMERA_DTYPES else pa.list_(pa.float64())
        fields += [
            pa.field(f"stats/{name}/{stat}", pa.list_(pa.int64()) if stat == "count" else value) for stat in STAT_KEYS
        ]
    fields += [pa.field("meta/episodes/chunk_index", pa.int64()), pa.field("meta/episodes/file_index", pa.int64())]
    return pa.schema(fields)
