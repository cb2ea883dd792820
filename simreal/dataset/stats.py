"""Dataset statistics as LeRobot v3.0 computes them: per episode, then aggregated over episodes.

Every feature gets ``min``, ``max``, ``mean``, ``std`` (population), ``count`` and the
quantiles ``q01``, ``q10``, ``q50``, ``q90``, ``q99`` (lerobot's ``compute_stats.py``:
``compute_episode_stats``, ``get_feature_stats``, ``RunningQuantileStats``,
``aggregate_feature_stats``, ``aggregate_stats``):

- numeric feature, episode values x (T, n): statistics over T per component, shape (n,);
  ``count = [T]``. A shape (1,) feature gives shape (1,) statistics.
- ``std = sqrt(max(0, E[x^2] - E[x]^2))`` in float32 (float64 for 64-bit integers and floats:
  the values are promoted to ``result_type(dtype, float32)``).
- quantiles come from a 5000-bin histogram per component over
  ``[min - 1e-10, max + 1e-10]``: with cumulative counts c and target ``q * T``, the first bin
  index i with ``c[i] >= q T`` gives ``edge[i] + (q T - c[i-1]) / (c[i] - c[i-1]) * bin width``
  (``edge[0]`` when i = 0, ``edge[i]`` for an empty bin). An episode of one frame has every
  quantile equal to its mean.
- camera feature, frames (T, H, W, 3) uint8: up to ``estimate_num_samples(T)`` frames, evenly
  spaced; frames with a side of 300 px or more are strided down to about 150 px; statistics
  per channel over samples and pixels, divided by 255, shape (3, 1, 1); ``count`` = number
  of sampled frames.
- aggregation over episodes k with counts n_k: ``mean = sum n_k mean_k / N``,
  ``var = sum n_k (std_k^2 + (mean_k - mean)^2) / N``, min of mins, max of maxes, counts
  summed; lower quantiles (q <= 50) take the minimum over episodes and upper ones the maximum
  (a conservative envelope: exact global quantiles cannot be recovered from summaries).
  lerobot folds each new episode into the running total (``aggregate([total, episode])``),
  and so does :class:`simreal.dataset.writer.DatasetWriter`.

Written here rather than imported because lerobot does not install beside this project's
torch. When written, these gave values identical to lerobot's own functions on 72 random
vector, integer, boolean, constant and image cases, episode and aggregated statistics alike;
``tests/dataset/test_dataset.py`` checks them against plain numpy statistics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simreal.errors import DataFileError

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)
STAT_KEYS = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)
NUM_QUANTILE_BINS = 5000
_EDGE_PAD = 1e-10  # lerobot widens the histogram range by this much on each side
_DOWNSAMPLE_ABOVE_PX = 300  # frames this large or larger are strided down before image stats
_DOWNSAMPLE_TARGET_PX = 150

Stats = dict[str, np.ndarray]


def vector_stats(x: np.ndarray) -> Stats:
    """Statistics of one episode's numeric feature.

    Args:
      x: (T,) for a shape (1,) feature or (T, n).
    Returns:
      ``STAT_KEYS`` -> arrays of shape (1,) or (n,); ``count`` is ``[T]``.
    """
    x = np.asarray(x)
    return _stats_over_rows(x.reshape(len(x), -1), count=len(x))


def image_stats(frames: np.ndarray) -> Stats:
    """Per-channel statistics of one episode's camera frames, scaled to [0, 1].

    Args:
      frames: (T, H, W, C) uint8.
    Returns:
      ``STAT_KEYS`` -> (C, 1, 1) arrays; ``count`` is the number of sampled frames.
    """
    t, h, w, c = frames.shape
    sampled = frames[sample_indices(t)]
    if max(h, w) >= _DOWNSAMPLE_ABOVE_PX:
        step = int(max(h, w) / _DOWNSAMPLE_TARGET_PX)
        sampled = sampled[:, ::step, ::step]
    stats = _stats_over_rows(sampled.reshape(-1, c), count=len(sampled))
    return {k: v if k == "count" else (v / 255.0).reshape(c, 1, 1) for k, v in stats.items()}


def sample_indices(num_frames: int) -> np.ndarray:
    """The frames image statistics look at: ``n = max(min(100, T), min(int(T^0.75), 10000))``
    indices spread evenly over [0, T - 1], rounded."""
    n = max(min(100, num_frames), min(int(num_frames**0.75), 10_000))
    return np.round(np.linspace(0, num_frames - 1, n)).astype(int)


def _stats_over_rows(x: np.ndarray, count: int) -> Stats:
    """Statistics over the rows of x (M, D), per column; ``count`` is what the ``count`` field reports."""
    if x.shape[0] < 2:  # too few values for a histogram: every quantile is the mean
        mean = np.mean(x, axis=0)
        out = {"min": np.min(x, axis=0), "max": np.max(x, axis=0), "mean": mean, "std": np.std(x, axis=0)}
        return {**out, "count": np.array([count]), **{q: mean.copy() for q in QUANTILE_KEYS}}
    x = x.astype(np.result_type(x.dtype, np.float32), copy=False)
    mean = np.mean(x, axis=0)
    var = np.mean(x**2, axis=0) - mean**2  # E[x^2] - E[x]^2, as lerobot's running estimate has it
    lo, hi = np.min(x, axis=0), np.max(x, axis=0)
    out = {"min": lo, "max": hi, "mean": mean, "std": np.sqrt(np.maximum(0, var)), "count": np.array([count])}
    q, on_edge = zip(*(_histogram_quantiles(x[:, d], lo[d], hi[d]) for d in range(x.shape[1])), strict=True)
    q, on_edge = np.stack(q, axis=1), np.stack(on_edge, axis=1)  # (Q, D)
    # A quantile that lands on a bin edge for every component keeps the data's precision (lerobot's
    # edges are in that dtype); image statistics are then scaled in it too.
    return {**out, **{key: q[j].astype(x.dtype) if on_edge[j].all() else q[j] for j, key in enumerate(QUANTILE_KEYS)}}


def _histogram_quantiles(v: np.ndarray, lo: np.floating, hi: np.floating) -> tuple[np.ndarray, np.ndarray]:
    """``QUANTILES`` of the values v (M,) read off a ``NUM_QUANTILE_BINS``-bin histogram (see module doc),
    and whether each is a bin edge rather than interpolated."""
    edges = np.linspace(lo - _EDGE_PAD, hi + _EDGE_PAD, NUM_QUANTILE_BINS + 1)  # in v's float dtype, like lerobot
    cum = np.cumsum(np.histogram(v, bins=edges)[0]).astype(np.float64)
    edges = edges.astype(np.float64)
    target = np.asarray(QUANTILES) * len(v)
    i = np.searchsorted(cum, target)
    inner = np.clip(i, 1, NUM_QUANTILE_BINS - 1)
    before = cum[inner - 1]
    in_bin = cum[inner] - before
    with np.errstate(invalid="ignore", divide="ignore"):
        interp = edges[inner] + (target - before) / in_bin * (edges[inner + 1] - edges[inner])
    out = np.where(in_bin == 0, edges[inner], interp)
    on_edge = (i == 0) | (i >= NUM_QUANTILE_BINS) | (in_bin == 0)
    return np.where(i == 0, edges[0], np.where(i >= NUM_QUANTILE_BINS, edges[-1], out)), on_edge


def episode_stats(columns: Mapping[str, np.ndarray], features: Mapping[str, Mapping[str, Any]]) -> dict[str, Stats]:
    """Statistics of every feature of one episode, in ``features`` order.

    Args:
      columns: feature -> the episode's values: (T,) or (T, n) numbers, (T, H, W, 3) uint8 frames.
      features: the dataset's feature specification (dtype decides numeric or camera).
    """
    return {
        k: image_stats(columns[k]) if ft["dtype"] in ("video", "image") else vector_stats(columns[k])
        for k, ft in features.items()
    }


def aggregate_feature_stats(stats: Sequence[Stats]) -> Stats:
    """One feature's statistics over several episodes (see the module doc for the formulas)."""
    means = np.stack([s["mean"] for s in stats])
    counts = np.stack([s["count"] for s in stats])  # (K, 1)
    total = counts.sum(axis=0)
    n = counts.reshape(counts.shape + (1,) * (means.ndim - counts.ndim))
    mean = (means * n).sum(axis=0) / total
    # each std is squared in its own precision before stacking (float32 episodes beside a float64 total)
    var = ((np.stack([s["std"] ** 2 for s in stats]) + (means - mean) ** 2) * n).sum(axis=0) / total
    out = {
        "min": np.min(np.stack([s["min"] for s in stats]), axis=0),
        "max": np.max(np.stack([s["max"] for s in stats]), axis=0),
        "mean": mean,
        "std": np.sqrt(var),
        "count": total,
    }
    for key in QUANTILE_KEYS:
        if all(key in s for s in stats):
            values = np.stack([s[key] for s in stats])
            out[key] = values.min(axis=0) if int(key[1:]) <= 50 else values.max(axis=0)
    return out


def aggregate_stats(stats: Sequence[Mapping[str, Stats]]) -> dict[str, Stats]:
    """Statistics over several episodes or datasets; a feature missing from some is aggregated over the others."""
    keys = list(dict.fromkeys(k for s in stats for k in s))
    return {k: aggregate_feature_stats([s[k] for s in stats if k in s]) for k in keys}


def stats_to_json(stats: Mapping[str, Stats]) -> dict[str, dict[str, Any]]:
    """``stats.json`` content: nested lists and numbers (lerobot's ``serialize_dict``)."""
    return {k: {s: np.asarray(v).tolist() for s, v in ft.items()} for k, ft in stats.items()}


def stats_from_json(data: Any, path: str) -> dict[str, Stats]:
    """Statistics read back from ``stats.json`` as arrays of at least one dimension.

    Raises:
      DataFileError: naming the file and the ``<feature>.<stat>`` field that is not numeric.
    """
    if not isinstance(data, Mapping):
        raise DataFileError(path, "expected a JSON object {feature: {stat: values}}")
    out: dict[str, Stats] = {}
    for key, ft in data.items():
        if not isinstance(ft, Mapping):
            raise DataFileError(path, f"field '{key}' expected an object {{stat: values}}")
        out[key] = {}
        for stat, value in ft.items():
            try:
                arr = np.atleast_1d(np.array(value, dtype=np.float64 if stat != "count" else np.int64))
            except (TypeError, ValueError, OverflowError):
                raise DataFileError(path, f"field '{key}.{stat}' is not a numeric array") from None
            out[key][stat] = arr
    return out
