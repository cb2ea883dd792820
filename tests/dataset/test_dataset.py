"""simreal's LeRobot v3.0 dataset writer and reader.

What is recorded comes back exactly (numbers, PNG images, tasks, bookkeeping columns), videos
within codec error, statistics equal plain numpy ones, episodes share files up to the size
limits, a resumed recording appends, a crash keeps every finished episode, bad frames and
damaged datasets fail in one line, and the files carry the columns and schema lerobot's own
writer produces (hard-coded below from lerobot's source).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from simreal.dataset import commit as dataset_commit
from simreal.dataset.reader import Dataset
from simreal.dataset.stats import QUANTILES, aggregate_stats, vector_stats
from simreal.dataset.writer import STAGING_DIR, DatasetWriter
from simreal.errors import ConfigError, DataFileError, SimrealError

H, W, FPS = 32, 48, 30
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [4], "names": ["x", "y", "z", "grip"]},
    "action": {"dtype": "float64", "shape": [3], "names": None},
    "observation.gripper": {"dtype": "int64", "shape": [1], "names": None},
    "observation.images.front": {"dtype": "video", "shape": [H, W, 3], "names": ["height", "width", "channels"]},
    "observation.images.wrist": {"dtype": "image", "shape": [H, W, 3]},
}
CAMERAS = ("observation.images.front", "observation.images.wrist")
EPISODES = [(9, "pick up the cube"), (12, "place it in the bowl"), (7, "pick up the cube")]


def smooth_image(k: int, episode: int) -> np.ndarray:
    """A smooth colour gradient (no wrap-around edges: easy on the codec) that moves with the frame index."""
    y, x = np.mgrid[0:H, 0:W]
    image = np.stack([4 * x + 3 * k, 6 * y + 10 * episode, 2 * (x + y) + 5 * k], axis=-1)
    return np.clip(image, 0, 255).astype(np.uint8)


def make_frame(rng: np.random.Generator, k: int, episode: int) -> dict[str, np.ndarray]:
    return {
        "observation.state": rng.normal(size=4).astype(np.float32),
        "action": rng.normal(size=3),
        "observation.gripper": rng.integers(0, 5, size=1),
        "observation.images.front": smooth_image(k, episode),
        "observation.images.wrist": rng.integers(0, 256, size=(H, W, 3), dtype=np.uint8),
    }


def record(root: Path, episodes=EPISODES, seed: int = 0, first_episode: int = 0, **create) -> list[list[dict]]:
    """Record ``episodes`` (length, task) into a new dataset (or, with resume=True, append); return the frames."""
    rng = np.random.default_rng(seed)
    writer = (
        DatasetWriter.resume(root)
        if create.pop("resume", False)
        else DatasetWriter.create(root, fps=FPS, features=FEATURES, robot_type="so100", **create)
    )
    recorded = []
    with writer:
        for e, (length, task) in enumerate(episodes):
            frames = [make_frame(rng, k, first_episode + e) for k in range(length)]
            for frame in frames:
                writer.add_frame(frame, task=task)
            assert writer.save_episode() == first_episode + e
            recorded.append(frames)
    return recorded


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, list[list[dict]]]:
    root = tmp_path_factory.mktemp("ds") / "pick"
    return root, record(root)


def test_round_trip_is_exact(recorded):
    root, frames = recorded
    ds = Dataset(root)
    assert (ds.fps, ds.robot_type, ds.num_episodes) == (FPS, "so100", len(EPISODES))
    assert ds.num_frames == sum(n for n, _ in EPISODES)
    assert ds.tasks == ["pick up the cube", "place it in the bowl"]
    start = 0
    for i, (length, task) in enumerate(EPISODES):
        ep = ds.episode(i)
        assert ds.episode_task(i) == task and ds.episode_tasks(i) == [task]
        for name in ("observation.state", "action", "observation.gripper", "observation.images.wrist"):
            want = np.stack([f[name] for f in frames[i]])
            assert ep[name].dtype == want.dtype and np.array_equal(ep[name], want), name
        assert ep["observation.images.front"].shape == (length, H, W, 3)
        assert np.array_equal(ep["frame_index"], np.arange(length))
        assert np.array_equal(ep["episode_index"], np.full(length, i))
        assert np.array_equal(ep["index"], np.arange(start, start + length))
        assert np.array_equal(ep["task_index"], np.full(length, ds.tasks.index(task)))
        assert ep["timestamp"].dtype == np.float32
        assert np.array_equal(ep["timestamp"], (np.arange(length) / FPS).astype(np.float32))
        start += length
    assert ds.table().num_rows == ds.num_frames
    assert sum(1 for _ in ds.frames()) == ds.num_frames
    assert not (root / STAGING_DIR).exists()


def test_videos_decode_within_codec_error(recorded):
    """AV1 at crf 30 on smooth 32x48 gradients: mean abs error under 3 of 255 per episode."""
    root, frames = recorded
    ds = Dataset(root)
    for i in range(ds.num_episodes):
        want = np.stack([f["observation.images.front"] for f in frames[i]]).astype(int)
        got = ds.episode(i)["observation.images.front"].astype(int)
        assert np.abs(got - want).mean() < 3.0
        other = np.roll(want, 1, axis=0)  # the decoder returns each frame at its own time, not a neighbour
        assert np.abs(got - want).mean() < np.abs(got - other).mean()


def test_stats_match_numpy(recorded):
    root, frames = recorded
    ds = Dataset(root)
    everything = [f for ep in frames for f in ep]
    for name in ("observation.state", "action", "observation.gripper"):
        x = np.stack([f[name] for f in everything]).astype(np.float64)
        s = ds.stats[name]
        assert np.array_equal(s["min"], x.min(0)) and np.array_equal(s["max"], x.max(0))
        np.testing.assert_allclose(s["mean"], x.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(s["std"], x.std(0), rtol=1e-4, atol=1e-6)
        assert s["count"].tolist() == [len(x)]
    for name in CAMERAS:  # per channel over every pixel of every frame, scaled to [0, 1], shape (3, 1, 1)
        x = np.stack([f[name] for f in everything]).reshape(-1, 3) / 255.0
        s = ds.stats[name]
        assert s["mean"].shape == (3, 1, 1) and s["count"].tolist() == [len(everything)]
        np.testing.assert_allclose(s["mean"].ravel(), x.mean(0), atol=1e-6)  # of the recorded frames, not decoded
        # lerobot's std is sqrt(E[x^2] - E[x]^2) with pixel values summed in float32: E[x^2] rounds
        np.testing.assert_allclose(s["std"].ravel(), x.std(0), rtol=1e-3)
        np.testing.assert_allclose(s["min"].ravel(), x.min(0), atol=1e-7)
        np.testing.assert_allclose(s["max"].ravel(), x.max(0), atol=1e-7)
    ts = np.concatenate([np.arange(n) / FPS for n, _ in EPISODES])
    np.testing.assert_allclose(ds.stats["timestamp"]["mean"], [ts.mean()], rtol=1e-12)
    assert ds.stats["index"]["max"].tolist() == [ds.num_frames - 1]


def test_episode_quantiles_and_aggregation(recorded):
    """Each episode's quantiles lie within one histogram bin of numpy's inverted-CDF quantile; the dataset's
    lower quantiles are the minimum over episodes and the upper ones the maximum, as lerobot aggregates."""
    root, frames = recorded
    ds = Dataset(root)
    per_episode = [ds.episode_stats(i) for i in range(ds.num_episodes)]
    for i, ep in enumerate(frames):
        x = np.stack([f["observation.state"] for f in ep]).astype(np.float64)
        s = per_episode[i]["observation.state"]
        width = (x.max(0) - x.min(0)) / 5000
        for q in QUANTILES:
            want = np.quantile(x, q, axis=0, method="inverted_cdf")
            assert np.all(np.abs(s[f"q{round(q * 100):02d}"] - want) <= width + 1e-6), q
    for q in ("q01", "q10", "q50"):
        assert np.array_equal(ds.stats["action"][q], np.min([s["action"][q] for s in per_episode], axis=0))
    for q in ("q90", "q99"):
        assert np.array_equal(ds.stats["action"][q], np.max([s["action"][q] for s in per_episode], axis=0))


def test_aggregation_equals_pooled_statistics():
    rng = np.random.default_rng(4)
    parts = [rng.normal(loc=k, scale=k + 1, size=(n, 5)) for k, n in enumerate((17, 40, 3))]
    total = aggregate_stats([{"x": vector_stats(p)} for p in parts])["x"]
    pooled = np.concatenate(parts)
    np.testing.assert_allclose(total["mean"], pooled.mean(0), rtol=1e-12)
    np.testing.assert_allclose(total["std"], pooled.std(0), rtol=1e-10)
    assert np.array_equal(total["min"], pooled.min(0)) and total["count"].tolist() == [60]


def test_episodes_share_files_until_the_size_limit(recorded, tmp_path):
    root, _ = recorded
    ds = Dataset(root)
    infos = [ds.episode_info(i) for i in range(ds.num_episodes)]
    key = "videos/observation.images.front"
    assert {(m["data/chunk_index"], m["data/file_index"], m[f"{key}/file_index"]) for m in infos} == {(0, 0, 0)}
    assert infos[0][f"{key}/from_timestamp"] == 0.0
    for a, b in zip(infos, infos[1:]):
        assert b[f"{key}/from_timestamp"] == a[f"{key}/to_timestamp"]
    for m in infos:
        assert m[f"{key}/to_timestamp"] - m[f"{key}/from_timestamp"] == pytest.approx(m["length"] / FPS)
    assert pq.ParquetFile(root / "data/chunk-000/file-000.parquet").num_row_groups == len(EPISODES)

    small = tmp_path / "small"  # limits of a few kB: the files roll over, chunks after 2 files each
    frames = record(
        small, episodes=[(6, "a")] * 5, chunks_size=2, data_files_size_in_mb=0.07, video_files_size_in_mb=0.002
    )
    ds = Dataset(small)
    where = [(ds.episode_info(i)["data/chunk_index"], ds.episode_info(i)["data/file_index"]) for i in range(5)]
    assert 1 < len(set(where)) < 5 and max(c for c, _ in where) >= 1
    assert len(list((small / "videos").rglob("*.mp4"))) > 1
    for i in range(5):
        ep = ds.episode(i)
        assert np.array_equal(ep["observation.state"], np.stack([f["observation.state"] for f in frames[i]]))
        want = np.stack([f["observation.images.front"] for f in frames[i]]).astype(int)
        assert np.abs(ep["observation.images.front"].astype(int) - want).mean() < 3.0


def test_resume_appends(tmp_path):
    root = tmp_path / "ds"
    first = record(root, episodes=EPISODES[:2])
    second = record(
        root, episodes=[(5, "stack the blocks"), (4, "pick up the cube")], seed=1, first_episode=2, resume=True
    )
    ds = Dataset(root)
    assert ds.num_episodes == 4 and ds.num_frames == 9 + 12 + 5 + 4
    assert ds.tasks == ["pick up the cube", "place it in the bowl", "stack the blocks"]
    assert [ds.episode_task(i) for i in range(4)] == [t for _, t in EPISODES[:2]] + [
        "stack the blocks",
        "pick up the cube",
    ]
    assert np.array_equal(ds.table()["index"].to_numpy(), np.arange(ds.num_frames))
    for i, frames in enumerate(first + second):
        assert np.array_equal(ds.episode(i)["action"], np.stack([f["action"] for f in frames]))
    assert ds.episode_info(2)["data/file_index"] == 1  # a resumed recording starts new files, as lerobot's
    assert ds.stats["action"]["count"].tolist() == [ds.num_frames]


CRASH_SCRIPT = """
import os, signal, sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_dataset import FEATURES, make_frame
from simreal.dataset.writer import DatasetWriter
rng = np.random.default_rng(0)
writer = DatasetWriter.create({root!r}, fps=30, features=FEATURES)
for e in range(2):
    for k in range(8):
        writer.add_frame(make_frame(rng, k, e), task="pick")
    writer.save_episode()
for k in range(5):  # an episode never saved
    writer.add_frame(make_frame(rng, k, 2), task="pick")
if {hard!r}:
    writer.wait()
    writer.discard_episode()
    writer.add_frame(make_frame(rng, 0, 3), task="pick")
    writer.save_episode()
    os.kill(os.getpid(), signal.SIGKILL)  # while the third episode may be half way to disk
raise KeyboardInterrupt  # Ctrl-C in the recording loop, no close()
"""


@pytest.mark.parametrize("hard", [False, True], ids=["ctrl-c", "sigkill"])
def test_crash_keeps_finished_episodes(tmp_path, hard):
    root = tmp_path / "ds"
    script = CRASH_SCRIPT.format(tests=str(Path(__file__).parent), root=str(root), hard=hard)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    ds = Dataset(root)
    assert ds.num_episodes in ((2, 3) if hard else (2,))
    assert ds.num_frames == 16 + (ds.num_episodes - 2)
    for i in range(ds.num_episodes):
        assert ds.episode(i)["observation.images.front"].shape[0] == ds.episode_info(i)["length"]
    record(root, episodes=[(3, "place")], first_episode=ds.num_episodes, resume=True)
    assert Dataset(root).num_episodes == ds.num_episodes + 1
    assert not list(root.rglob(f"*{dataset_commit.TMP_SUFFIX}")) and not (root / STAGING_DIR).exists()


def test_interrupted_commit_is_finished_when_the_dataset_opens(tmp_path, monkeypatch):
    root = tmp_path / "ds"
    record(root, episodes=EPISODES[:1])
    renames = []
    real_replace = dataset_commit.os.replace

    def crash_after_two(src, dst):
        if len(renames) == 2:
            raise OSError("power cut")
        renames.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(dataset_commit.os, "replace", crash_after_two)
    with pytest.raises(DataFileError, match="power cut"):
        record(root, episodes=EPISODES[1:2], first_episode=1, resume=True)
    monkeypatch.undo()
    assert (root / dataset_commit.JOURNAL).exists()
    ds = Dataset(root)  # finishes the renames the journal lists
    assert ds.num_episodes == 2 and not (root / dataset_commit.JOURNAL).exists()
    assert ds.episode(1)["action"].shape == (12, 3)


def one_line(e: pytest.ExceptionInfo) -> str:
    message = str(e.value)
    assert "\n" not in message and isinstance(e.value, SimrealError)
    return message


@pytest.mark.parametrize(
    "change, expect",
    [
        (lambda f: f.pop("action"), "feature 'action' missing"),
        (lambda f: f.update(extra=np.zeros(1)), "unknown feature 'extra'"),
        (lambda f: f.update(action=np.zeros(4)), "feature 'action' is float64 (4,); expected float64 (3,)"),
        (lambda f: f.update({"observation.gripper": np.array([1.5])}), "expected int64 (1,)"),
        (lambda f: f.update({"observation.state": np.array([0, np.nan, 0, 0], np.float32)}), "non-finite"),
        (
            lambda f: f.update({"observation.images.front": np.zeros((H, W, 3), np.float32)}),
            f"expected uint8 ({H}, {W}, 3)",
        ),
        (lambda f: f.update({"observation.images.wrist": np.zeros((W, H, 3), np.uint8)}), "observation.images.wrist"),
    ],
)
def test_bad_frames_fail_in_one_line(tmp_path, change, expect):
    writer = DatasetWriter.create(tmp_path / "ds", fps=FPS, features=FEATURES)
    frame = make_frame(np.random.default_rng(0), 0, 0)
    change(frame)
    with pytest.raises(DataFileError) as e:
        writer.add_frame(frame, task="pick")
    assert expect in one_line(e) and "episode 0 frame 0" in str(e.value)
    writer.close()


def test_bad_calls_fail_in_one_line(tmp_path):
    writer = DatasetWriter.create(tmp_path / "ds", fps=FPS, features=FEATURES)
    frame = make_frame(np.random.default_rng(0), 0, 0)
    with pytest.raises(DataFileError) as e:
        writer.save_episode()
    assert "no frames" in one_line(e)
    with pytest.raises(DataFileError) as e:
        writer.add_frame(frame, task="")
    assert "task" in one_line(e)
    writer.add_frame(frame, task="pick")
    with pytest.raises(DataFileError) as e:
        writer.add_frame(frame, task="pick", timestamp=0.05)
    assert "evenly spaced" in one_line(e)
    writer.discard_episode()
    assert writer.episode_length == 0
    writer.close()
    assert Dataset(tmp_path / "ds").num_episodes == 0  # a dataset with no episode yet still reads
    with pytest.raises(DataFileError) as e:
        writer.add_frame(frame, task="pick")
    assert "closed" in one_line(e)
    with pytest.raises(DataFileError) as e:
        DatasetWriter.create(tmp_path / "ds", fps=FPS, features=FEATURES)
    assert "resume" in one_line(e)


def test_an_episode_with_two_tasks(tmp_path):
    features = {"action": {"dtype": "float32", "shape": [1]}}
    with DatasetWriter.create(tmp_path / "ds", fps=10, features=features) as writer:
        for k, task in enumerate(["reach", "reach", "grasp"]):
            writer.add_frame({"action": k}, task=task)
        writer.save_episode()
    ds = Dataset(tmp_path / "ds")
    assert ds.tasks == ["reach", "grasp"] and ds.episode_tasks(0) == ["reach", "grasp"]
    assert ds.episode_task(0) == "reach" and ds.episode(0)["task_index"].tolist() == [0, 0, 1]


def test_tasks_stored_as_lerobot_0_4_wrote_them(tmp_path):
    """lerobot 0.4.x saved meta/tasks.parquet from a pandas frame indexed by the task strings: no
    column ``task``, the strings in ``__index_level_0__`` named by the pandas metadata."""
    import pyarrow as pa

    features = {"action": {"dtype": "float32", "shape": [1]}}
    with DatasetWriter.create(tmp_path / "ds", fps=10, features=features) as writer:
        for k, task in enumerate(["reach", "reach", "grasp"]):
            writer.add_frame({"action": k}, task=task)
        writer.save_episode()
    pandas_meta = {"index_columns": ["__index_level_0__"], "column_indexes": [], "columns": []}
    table = pa.table({"task_index": pa.array([1, 0], pa.int64()), "__index_level_0__": ["grasp", "reach"]})
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    pq.write_table(table, tmp_path / "ds" / "meta" / "tasks.parquet")
    ds = Dataset(tmp_path / "ds")
    assert ds.tasks == ["reach", "grasp"] and ds.episode_tasks(0) == ["reach", "grasp"]

    pq.write_table(table.replace_schema_metadata(None), tmp_path / "ds" / "meta" / "tasks.parquet")
    with pytest.raises(DataFileError, match="column 'task' missing"):  # no pandas metadata: nothing names them
        Dataset(tmp_path / "ds")


def test_free_timestamps_without_videos(tmp_path):
    features = {"action": {"dtype": "float32", "shape": [2]}}
    with DatasetWriter.create(tmp_path / "ds", fps=10, features=features) as writer:
        for t in (0.0, 0.13, 0.21):
            writer.add_frame({"action": np.array([t, t])}, task="wave", timestamp=t)
        writer.save_episode()
    ep = Dataset(tmp_path / "ds").episode(0)
    assert np.array_equal(ep["timestamp"], np.array([0.0, 0.13, 0.21], np.float32))
    assert ep["action"].dtype == np.float32


@pytest.mark.parametrize(
    "features, key",
    [
        ({"a": {"dtype": "float", "shape": [2]}}, "features.a.dtype"),
        ({"a": {"dtype": "float32", "shape": [2, 2]}}, "features.a.shape"),
        ({"a": {"dtype": "float32", "shape": [0]}}, "features.a.shape"),
        ({"a": {"dtype": "float32", "shape": [2], "names": ["x"]}}, "features.a.names"),
        ({"a": {"dtype": "float32", "shap": [2]}}, "features.a.shap"),
        ({"a/b": {"dtype": "float32", "shape": [2]}}, "features.a/b"),
        ({"index": {"dtype": "int64", "shape": [1]}}, "features.index"),
        ({"cam": {"dtype": "video", "shape": [32, 48, 1]}}, "features.cam.shape"),
        ({}, "features"),
    ],
)
def test_bad_feature_specs_name_the_key(tmp_path, features, key):
    with pytest.raises(ConfigError) as e:
        DatasetWriter.create(tmp_path / "ds", fps=FPS, features=features)
    assert f"'{key}'" in one_line(e)
    with pytest.raises(ConfigError) as e:
        DatasetWriter.create(tmp_path / "ds2", fps=29.97, features={"a": {"dtype": "float32", "shape": [1]}})
    assert "'fps'" in one_line(e)


def test_use_videos_false_stores_cameras_as_png(tmp_path):
    frames = record(tmp_path / "ds", episodes=[(4, "pick")], use_videos=False)
    ds = Dataset(tmp_path / "ds")
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    assert info["video_path"] is None and info["features"]["observation.images.front"]["dtype"] == "image"
    assert not (tmp_path / "ds/videos").exists()
    want = np.stack([f["observation.images.front"] for f in frames[0]])
    assert np.array_equal(ds.episode(0)["observation.images.front"], want)  # PNG is lossless


# --- the format lerobot writes ------------------------------------------------------------------------
# From lerobot (huggingface/lerobot, src/lerobot/datasets/): DatasetInfo's fields in utils.py,
# DEFAULT_FEATURES in utils/constants.py, the episode dict built by dataset_metadata.py's
# save_episode/_save_episode_metadata and dataset_writer.py's _save_episode_data/_save_episode_video,
# the stats keys of compute_stats.py (DEFAULT_QUANTILES = [0.01, 0.10, 0.50, 0.90, 0.99]),
# get_video_info in video_utils.py with RGBEncoderConfig's defaults (configs/video.py), write_tasks
# in io_utils.py; checked against a dataset lerobot wrote with datasets 4.8.5.
LEROBOT_INFO_KEYS = [
    "codebase_version",
    "fps",
    "features",
    "total_episodes",
    "total_frames",
    "total_tasks",
    "chunks_size",
    "data_files_size_in_mb",
    "video_files_size_in_mb",
    "data_path",
    "video_path",
    "robot_type",
    "splits",
]
LEROBOT_DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
LEROBOT_VIDEO_INFO = {
    "video.height": H,
    "video.width": W,
    "video.codec": "av1",
    "video.pix_fmt": "yuv420p",
    "video.fps": FPS,
    "video.channels": 3,
    "has_audio": False,
    "video.g": 2,
    "video.crf": 30,
    "video.preset": 12,
    "video.fast_decode": 0,
    "video.video_backend": "pyav",
    "video.extra_options": {},
    "is_depth_map": False,
}
LEROBOT_STATS = ["min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"]


def lerobot_episode_columns(features: list[str], videos: list[str]) -> list[str]:
    cols = [
        "episode_index",
        "tasks",
        "length",
        "data/chunk_index",
        "data/file_index",
        "dataset_from_index",
        "dataset_to_index",
    ]
    for v in videos:
        cols += [
            f"videos/{v}/chunk_index",
            f"videos/{v}/file_index",
            f"videos/{v}/from_timestamp",
            f"videos/{v}/to_timestamp",
        ]
    cols += [f"stats/{f}/{s}" for f in features for s in LEROBOT_STATS]
    return cols + ["meta/episodes/chunk_index", "meta/episodes/file_index"]


def test_files_match_what_lerobot_writes(recorded):
    root, _ = recorded
    info = json.loads((root / "meta/info.json").read_text())
    assert list(info) == LEROBOT_INFO_KEYS
    assert info["codebase_version"] == "v3.0" and info["splits"] == {"train": f"0:{len(EPISODES)}"}
    assert (info["chunks_size"], info["data_files_size_in_mb"], info["video_files_size_in_mb"]) == (1000, 100, 200)
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert list(info["features"]) == list(FEATURES) + list(LEROBOT_DEFAULT_FEATURES)
    assert {k: info["features"][k] for k in LEROBOT_DEFAULT_FEATURES} == LEROBOT_DEFAULT_FEATURES
    assert info["features"]["observation.images.front"]["info"] == LEROBOT_VIDEO_INFO
    assert info["features"]["observation.state"] == {**FEATURES["observation.state"], "shape": [4]}

    features = list(info["features"])
    episodes = pq.read_schema(root / "meta/episodes/chunk-000/file-000.parquet")
    assert episodes.names == lerobot_episode_columns(features, ["observation.images.front"])
    assert str(episodes.field("tasks").type) == "list<element: string>"
    assert str(episodes.field("stats/action/mean").type) == "list<element: double>"
    assert str(episodes.field("stats/action/count").type) == "list<element: int64>"
    assert (
        str(episodes.field("stats/observation.images.front/mean").type)
        == "list<element: list<element: list<element: double>>>"
    )

    data = pq.read_schema(root / "data/chunk-000/file-000.parquet")
    assert data.names == [f for f in features if f != "observation.images.front"]
    assert str(data.field("observation.state").type) == "fixed_size_list<element: float>[4]"
    assert str(data.field("observation.gripper").type) == "int64"
    assert str(data.field("timestamp").type) == "float"
    assert str(data.field("observation.images.wrist").type) == "struct<bytes: binary, path: string>"
    hf = json.loads(data.metadata[b"huggingface"])["info"]["features"]
    assert hf["observation.state"] == {"feature": {"dtype": "float32", "_type": "Value"}, "length": 4, "_type": "List"}
    assert hf["timestamp"] == {"dtype": "float32", "_type": "Value"} and hf["observation.images.wrist"] == {
        "_type": "Image"
    }

    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert tasks.column_names == ["task_index", "task"]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]

    stats = json.loads((root / "meta/stats.json").read_text())
    assert list(stats) == features and all(list(s) == LEROBOT_STATS for s in stats.values())
    assert np.array(stats["observation.images.front"]["q50"]).shape == (3, 1, 1)


@pytest.mark.parametrize(
    "damage, where",
    [
        (lambda r: (r / "meta/info.json").unlink(), "meta/info.json: file not found"),
        (lambda r: (r / "meta/info.json").write_text("{"), "meta/info.json: invalid JSON"),
        (lambda r: _edit_info(r, codebase_version="v2.1"), "field 'codebase_version'"),
        (lambda r: _edit_info(r, total_episodes=5), "'total_episodes' is 5"),
        (lambda r: _edit_info(r, fps="30"), "field 'fps'"),
        (
            lambda r: (r / "meta/episodes/chunk-000/file-000.parquet").write_bytes(b"PAR1 garbage"),
            "file-000.parquet: not a readable parquet file",
        ),
        (lambda r: (r / "meta/stats.json").write_text('{"action": {"mean": ["x"]}}'), "field 'action.mean'"),
        (lambda r: (r / "meta/tasks.parquet").unlink(), "meta/tasks.parquet: file not found"),
    ],
)
def test_damaged_datasets_fail_in_one_line(tmp_path, damage, where):
    root = tmp_path / "ds"
    record(root, episodes=EPISODES[:1])
    damage(root)
    with pytest.raises(DataFileError) as e:
        Dataset(root)
    assert where in one_line(e)


@pytest.mark.parametrize(
    "damage, where",
    [
        (lambda r: (r / "data/chunk-000/file-000.parquet").unlink(), "data/chunk-000/file-000.parquet: file not found"),
        (
            lambda r: (r / "videos/observation.images.front/chunk-000/file-000.mp4").write_bytes(b"not a video"),
            "file-000.mp4: cannot open video",
        ),
    ],
)
def test_damaged_episode_files_fail_in_one_line(tmp_path, damage, where):
    root = tmp_path / "ds"
    record(root, episodes=EPISODES[:1])
    damage(root)
    with pytest.raises(DataFileError) as e:
        Dataset(root).episode(0)
    assert where in one_line(e)


def _edit_info(root: Path, **changes) -> None:
    path = root / "meta/info.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


class _WatchedFrames:
    """Frames for ``encode_frames`` that note, at frame ``at``, the threads of this process that
    run on a real-time policy."""

    def __init__(self, n: int, at: int):
        self.images = np.zeros((n, 48, 64, 3), np.uint8)
        self.shape, self.at, self.seen = self.images.shape, at, None

    def __iter__(self):
        from simreal.dataset import video as dataset_video

        for k, image in enumerate(self.images):
            if k == self.at:
                self.seen = dataset_video._realtime_threads()
            yield image


def test_the_video_encoder_leaves_no_thread_real_time(tmp_path, monkeypatch):
    """SVT-AV1 as root asks for SCHED_FIFO 99 threads, above any control or recording loop;
    encode_frames encodes without CAP_SYS_NICE, so none turns real-time, even before the
    fallback demotion could act, and gives the capability back afterwards."""
    import contextlib
    import os

    from simreal.dataset import video as dataset_video

    def sys_nice() -> bool:
        with open("/proc/thread-self/status") as f:
            return bool(int(next(ln.split()[1] for ln in f if ln.startswith("CapEff")), 16) & (1 << 23))

    had = sys_nice()
    before = dataset_video._realtime_threads()
    demote = dataset_video._demote_realtime
    monkeypatch.setattr(dataset_video, "_demote_realtime", lambda before: None)
    watched = _WatchedFrames(40, at=1)
    dataset_video.encode_frames(watched, tmp_path / "a.mp4", 30)
    assert watched.seen == before
    assert sys_nice() == had
    if os.geteuid() != 0:
        pytest.skip("SVT-AV1 makes its threads real-time only as root: the check above cannot fail here")
    monkeypatch.setattr(dataset_video, "_without_sys_nice", contextlib.nullcontext)
    unguarded = _WatchedFrames(40, at=1)
    dataset_video.encode_frames(unguarded, tmp_path / "b.mp4", 30)
    demote(before)  # SVT moved this thread to SCHED_FIFO too: not for the rest of the session
    assert unguarded.seen - before, "expected SVT-AV1's real-time threads with the capability kept"


def test_an_interrupt_while_an_episode_thread_starts_keeps_the_dataset_whole(tmp_path, monkeypatch):
    """Ctrl-C inside ``Thread.start`` (it waits for the new thread) once left that episode's thread
    untracked: close() did not wait for it and the next thread was not chained to it, and a
    recording interrupted so ended with an episode its metadata listed missing from the data."""
    import threading

    real_start = threading.Thread.start

    def start(thread):
        real_start(thread)
        if thread.name == "dataset-episode-1":
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(KeyboardInterrupt):
        record(tmp_path / "ds", episodes=EPISODES)
    monkeypatch.setattr(threading.Thread, "start", real_start)
    ds = Dataset(tmp_path / "ds")
    assert ds.num_episodes == 2  # episode 1 was handed over before the interrupt: written, whole
    for i in range(2):
        ds.episode(i)
