"""Plain files of named 3D keypoints: CSV or npz (markerless capture, other tools' output).

CSV: a header row, then one row per frame. Columns ``<name>_x, <name>_y, <name>_z`` (or
``<name>.x`` ...) per keypoint, in any order, plus an optional ``time`` column [s] (or
``frame``, with ``fps`` given). Lines starting with ``#`` are comments.

    time,pelvis_x,pelvis_y,pelvis_z,left_hip_x,...
    0.000,0.01,0.00,0.95,0.00,...

npz: ``positions`` (T, K, 3), ``names`` (K,) strings and ``fps`` (scalar). Both go through
the same unit and up-axis handling as BVH.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np

from simreal.errors import ConfigError, DataFileError
from simreal.npz import open_npz
from simreal.retarget import joint_names
from simreal.retarget.skeleton import (
    MAX_LENGTH,
    HumanMotion,
    detect_up_axis,
    snap_fps,
    tree_extent,
    units_scale,
    up_axis_rotation,
)
from simreal.yaml_io import read_text

_COL = re.compile(r"^(.+?)[._]([xyzXYZ])$")
_TIME_COLS = ("time", "t", "time_s", "timestamp")


def load_keypoints_csv(
    path: str | Path, fps: float | None = None, units: str | float = "auto", up: str = "auto"
) -> HumanMotion:
    """Load a CSV of named keypoints; see the module docstring for the layout."""
    p = Path(path)
    text = read_text(p, "keypoint CSV file")
    try:
        rows = [
            (i + 1, r)
            for i, r in enumerate(csv.reader(io.StringIO(text, newline="")))
            if r and not r[0].lstrip().startswith("#")
        ]
    except csv.Error as e:  # a field over csv's size limit
        raise DataFileError(str(p), f"not a readable CSV: {e}") from None
    if len(rows) < 2:
        raise DataFileError(str(p), "expected a header row and at least one frame row")
    head_line, header = rows[0]
    header = [h.strip() for h in header]
    time_col = next((i for i, h in enumerate(header) if h.lower() in _TIME_COLS), None)
    names: list[str] = []
    cols: dict[str, dict[str, int]] = {}
    for i, h in enumerate(header):
        if i == time_col or h.lower() in ("frame", "index"):
            continue
        m = _COL.match(h)
        if m is None:
            raise DataFileError(
                str(p),
                f"line {head_line}, column {i + 1}: header {h!r} is not "
                "'<name>_x', '<name>_y', '<name>_z', 'time' or 'frame'",
            )
        name, axis = m.group(1), m.group(2).lower()
        if name not in cols:
            names.append(name)
            cols[name] = {}
        if axis in cols[name]:
            raise DataFileError(str(p), f"line {head_line}, column {i + 1}: duplicate column {h!r}")
        cols[name][axis] = i
    for name in names:
        missing = [a for a in "xyz" if a not in cols[name]]
        if missing:
            raise DataFileError(
                str(p),
                f"line {head_line}: keypoint {name!r} lacks column(s) " + ", ".join(f"{name}_{a}" for a in missing),
            )
    if not names:
        raise DataFileError(str(p), f"line {head_line}: no keypoint columns in the header")
    T = len(rows) - 1
    data = np.empty((T, len(header)))
    for f, (ln, row) in enumerate(rows[1:]):
        if len(row) != len(header):
            raise DataFileError(str(p), f"line {ln}: {len(row)} values, the header has {len(header)} columns")
        for c, v in enumerate(row):
            try:
                data[f, c] = float(v)
            except ValueError:
                raise DataFileError(str(p), f"line {ln}, column {c + 1} ({header[c]}): {v!r} is not a number") from None
            if not np.isfinite(data[f, c]):
                raise DataFileError(str(p), f"line {ln}, column {c + 1} ({header[c]}): {v!r} is not finite")
    if time_col is not None and fps is None:
        dt = np.diff(data[:, time_col])
        if T < 2 or np.any(dt <= 0):
            bad = int(np.argmax(dt <= 0)) + 1 if T >= 2 else 0
            raise DataFileError(
                str(p), f"line {rows[bad + 1][0]}: the '{header[time_col]}' column must increase from row to row"
            )
        step = float(np.median(dt))
        if not 1e-6 <= step <= 1e3:
            raise DataFileError(
                str(p),
                f"the '{header[time_col]}' column steps {step:g} from row to row; expected a frame period in seconds",
            )
        fps = snap_fps(1.0 / step)
    if fps is None:
        raise DataFileError(str(p), "no time column ('time' in [s]); give the frame rate (--fps)")
    pos = np.stack([data[:, [cols[n][a] for a in "xyz"]] for n in names], axis=1)
    return _finish(pos, tuple(names), float(fps), units, up, {"path": str(p), "format": "keypoints-csv"})


def load_keypoints_npz(
    path: str | Path, fps: float | None = None, units: str | float = "auto", up: str = "auto"
) -> HumanMotion:
    """Load an npz with ``positions`` (T, K, 3), ``names`` (K,) and ``fps``."""
    p = Path(path)
    with open_npz(p, "keypoint npz") as z:
        pos = z.floats("positions", "(T, K, 3) keypoint positions")
        names = z.strings("names", "(K,) keypoint names")
        if fps is None:
            if "fps" not in z:
                raise DataFileError(str(p), "missing field 'fps' (frame rate [Hz]); or give --fps")
            fps = z.number("fps", "the frame rate [Hz]")
    if pos.ndim != 3 or pos.shape[2] != 3 or 0 in pos.shape:
        raise DataFileError(str(p), f"field 'positions' must have shape (T, K, 3) with T, K >= 1, got {pos.shape}")
    if pos.shape[1] != len(names):
        raise DataFileError(str(p), f"field 'names' has {len(names)} entries, 'positions' has {pos.shape[1]} keypoints")
    if not np.all(np.isfinite(pos)):
        t, k = np.argwhere(~np.isfinite(pos).all(-1))[0]
        raise DataFileError(str(p), f"field 'positions': frame {t}, keypoint {names[k]!r} is not finite")
    if not (np.isfinite(fps) and fps > 0):
        raise DataFileError(str(p), f"field 'fps' must be a finite rate > 0 [Hz], got {fps}")
    return _finish(pos, names, float(fps), units, up, {"path": str(p), "format": "keypoints-npz"})


def _finish(pos, names, fps, units, up, source) -> HumanMotion:
    if np.abs(pos).max() > MAX_LENGTH:
        raise DataFileError(
            source["path"],
            f"a keypoint coordinate is {np.abs(pos).max():g}; positions in any unit stay under {MAX_LENGTH:g}",
        )
    if up not in ("auto", "y", "z"):
        raise ConfigError("up", f"unknown up axis {up!r}; valid: auto, y, z")
    scale, unit_name = units_scale(units, tree_extent(pos))
    if up == "auto":
        up = "z"
        try:
            idx = joint_names.resolve_keypoints(names, required=("left_ankle", "right_ankle"))
            top = idx.get("head", idx.get("neck", idx.get("torso", idx.get("pelvis"))))
            if top is not None:
                feet = 0.5 * (pos[:, idx["left_ankle"]] + pos[:, idx["right_ankle"]])
                up = detect_up_axis(pos[:, top], feet, default="z")
        except ConfigError:
            pass
    positions = scale * np.einsum("ab,tjb->tja", up_axis_rotation(up), pos)
    source.update(units=unit_name, metres_per_unit=scale, up_axis=up)
    return HumanMotion(names, positions, fps, None, source)
