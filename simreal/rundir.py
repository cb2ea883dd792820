"""Run directories: ``runs/<task>/<YYYYmmdd-HHMMSS>/`` (DESIGN.md, Run directory).

config.yaml        the fully resolved config
checkpoints/       step_<env_steps>.npz, written atomically
metrics.csv        one row per training iteration
events.*           TensorBoard
plots/*.png        learning curves
videos/*.mp4       ``simreal play``
bundle/            after ``simreal export``
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simreal.errors import ConfigError, DataFileError
from simreal.yaml_io import atomic_write_text, load_yaml


def new_run_dir(root: str | Path, task: str) -> Path:
    """Create a fresh ``root/task/<timestamp>`` folder (suffixed ``-1``, ``-2``, ... if the
    second is taken). The folder is claimed by ``mkdir`` itself, which fails if it exists, so
    two runs started in the same second (a sweep) never share one."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    parent = Path(root) / task
    parent.mkdir(parents=True, exist_ok=True)
    i = 0
    while True:
        path = parent / (stamp if i == 0 else f"{stamp}-{i}")
        try:
            path.mkdir()
            break
        except FileExistsError:
            i += 1
    (path / "checkpoints").mkdir()
    (path / "plots").mkdir()
    return path


def open_run_dir(path: str | Path) -> Path:
    """An existing run folder; the error says what is missing."""
    p = Path(path)
    if not (p / "config.yaml").is_file():
        raise ConfigError("run_dir", f"{p} is not a simreal run directory (no config.yaml)")
    return p


def load_run_config(run_dir: Path) -> dict[str, Any]:
    """The run's resolved config as a mapping."""
    return load_yaml(run_dir / "config.yaml")


def _read_rows(path: Path) -> list[dict[str, float]]:
    """metrics.csv's rows; DataFileError naming the line when it is not the file this class
    writes (a header and rows of numbers, as many as the header's columns)."""
    fix = "move it aside to go on: the checkpoints hold the training state, metrics.csv its history"
    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            rows = []
            for r in reader:
                if None in r or None in r.values():  # more or fewer cells than the header
                    raise DataFileError(
                        str(path),
                        f"line {reader.line_num}: {len(reader.fieldnames or [])} columns "
                        f"expected, the row has another count; {fix}",
                    )
                rows.append({k: _number(v) for k, v in r.items() if v != ""})
            return rows
    except (UnicodeDecodeError, csv.Error) as e:
        raise DataFileError(str(path), f"not a readable CSV file ({e}); {fix}") from None
    except ValueError as e:
        raise DataFileError(str(path), f"a cell is not a number ({e}); {fix}") from None


def _number(text: str) -> float:
    """A metrics.csv cell: an integer stays one (env steps are written back as 2007040, not
    2007040.0, when a resumed run rewrites the file)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


class MetricsCsv:
    """``metrics.csv`` rewritten atomically on each flush, so a crash never leaves half a row."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: list[dict[str, float]] = []
        if path.is_file():
            self.rows = _read_rows(path)

    def append(self, row: Mapping[str, float]) -> None:
        self.rows.append(dict(row))

    def truncate_after(self, env_steps: float) -> None:
        """Drop rows past ``env_steps`` (a resumed run rewrites what it repeats)."""
        self.rows = [r for r in self.rows if r.get("env_steps", 0) <= env_steps]

    def flush(self) -> None:
        keys: list[str] = []
        for r in self.rows:
            keys += [k for k in r if k not in keys]
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=keys)
        w.writeheader()
        w.writerows(self.rows)
        atomic_write_text(self.path, buf.getvalue())

    def column(self, key: str) -> tuple[list[float], list[float]]:
        """(env_steps, values) where ``key`` is present."""
        xs = [r["env_steps"] for r in self.rows if key in r]
        return xs, [r[key] for r in self.rows if key in r]


def plot_curves(
    metrics: MetricsCsv, out_png: Path, keys: Sequence[str], title: str, titles: Mapping[str, str] | None = None
) -> None:
    """Learning curves (one panel per key, titled ``titles[key]`` or the key) against env steps, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in keys if metrics.column(k)[0]]
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.2), squeeze=False)
    for ax, k in zip(axes[0], keys):
        xs, ys = metrics.column(k)
        ax.plot(xs, ys, marker="." if len(xs) < 50 else None)
        ax.set_xlabel("env steps")
        ax.set_title((titles or {}).get(k, k))
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_png.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out_png)
