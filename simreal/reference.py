"""A time-varying task reference the robot side plays back: a figure-8 to fly, a motion to imitate.

Some tasks feed the policy inputs that change with time on a fixed schedule: ``quadrotor-track``
observes the figure-8's current point and velocity, ``g1-tracking`` the motion clip's next frame.
On the robot nobody publishes those; the bundle carries them as a table sampled at the control
rate, and the runner looks the current row up by time::

    bundle.yaml:    reference: {file: reference.npz, rate_hz: 50.0, loop: false}
    reference.npz:  command (N, k), target_pos_w (N, 3), ...   one array per robot-state key

Row ``k`` is the input of the policy's ``k``-th observation, i.e. the value the training env
had at control step ``k`` of the episode the bundle was exported for. Playback time ``t`` runs
from the runner's first policy evaluation (the hand-over)::

    row(t) = round(t * rate_hz) mod N     (loop: a periodic reference, one period stored)
    row(t) = min(round(t * rate_hz), N-1)  (otherwise: the last row is held, as in training)

Only task inputs may be played back (:data:`PLAYABLE_KEYS`); what the robot measures comes
from its sensors. Loaded with ``allow_pickle=False``; every error names the file and the key.
Imports: numpy only (the robot runtime reads it).
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simreal.errors import BundleError
from simreal.npz import open_npz
from simreal.yaml_io import atomic_write_bytes

#: Robot-state keys (:mod:`simreal.observations`) a reference may supply: task inputs, never sensors.
PLAYABLE_KEYS = ("command", "target_pos_w", "gait_phase")
REFERENCE_NPZ = "reference.npz"


@dataclasses.dataclass(frozen=True)
class Reference:
    """A control-rate table of task inputs (see module docstring)."""

    rate_hz: float
    values: Mapping[str, np.ndarray]  # key -> (N, d) float64, every key the same N
    loop: bool = False

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.values.values())))

    @property
    def duration_s(self) -> float:
        """Time covered by the table [s] (one period when looping)."""
        return self.num_rows / self.rate_hz

    def row(self, t_s: float) -> int:
        """The row played at ``t_s`` seconds after the hand-over (before it: row 0)."""
        k = max(0, int(np.floor(t_s * self.rate_hz + 0.5)))
        return k % self.num_rows if self.loop else min(k, self.num_rows - 1)

    def at(self, t_s: float) -> dict[str, np.ndarray]:
        """Every key's value at ``t_s`` [s] after the hand-over."""
        k = self.row(t_s)
        return {name: v[k] for name, v in self.values.items()}


def check_reference(ref: Reference, where: str) -> None:
    """Raise BundleError naming the key for a table the runner could not play."""
    if not (np.isfinite(ref.rate_hz) and ref.rate_hz > 0):
        raise BundleError("reference.rate_hz", f"must be a finite rate > 0 [Hz], got {ref.rate_hz}", where)
    if not ref.values:
        raise BundleError("reference.file", "the table has no arrays", where)
    rows = None
    for key, v in ref.values.items():
        if key not in PLAYABLE_KEYS:
            raise BundleError(f"reference.{key}", f"not a task input; playable keys: {', '.join(PLAYABLE_KEYS)}", where)
        if v.ndim != 2 or len(v) == 0:
            raise BundleError(
                f"reference.{key}", f"expected a non-empty (rows, width) array, got shape {v.shape}", where
            )
        if rows is not None and len(v) != rows:
            raise BundleError(f"reference.{key}", f"{len(v)} rows, other keys have {rows}", where)
        rows = len(v)
        if not np.all(np.isfinite(v)):
            raise BundleError(f"reference.{key}", "contains NaN or Inf", where)


def write_reference(path: str | Path, ref: Reference) -> None:
    """Atomically write the table's arrays as an npz (no pickles)."""
    check_reference(ref, str(path))
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v, np.float64) for k, v in ref.values.items()})  # type: ignore[arg-type]  # numpy stub: **arrays might bind allow_pickle
    atomic_write_bytes(path, buf.getvalue())


def as_rate_hz(value: Any) -> float | None:
    """A YAML value as a finite rate > 0 [Hz], or None when it is not one (a bool, text, NaN, 1e999)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        rate = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return rate if math.isfinite(rate) and rate > 0 else None


def read_reference(entry: Any, bundle_dir: Path, where: str) -> Reference | None:
    """The bundle.yaml ``reference`` entry (``{file, rate_hz, loop}``) and its npz; None if absent."""
    if entry is None:
        return None
    if not isinstance(entry, Mapping) or "file" not in entry or "rate_hz" not in entry:
        raise BundleError("reference", "expected {file: reference.npz, rate_hz: <Hz>, loop: <bool>}", where)
    rate, loop = as_rate_hz(entry["rate_hz"]), entry.get("loop", False)
    if rate is None:
        raise BundleError("reference.rate_hz", f"expected a finite rate > 0 [Hz], got {entry['rate_hz']!r:.60}", where)
    if not isinstance(loop, bool):
        raise BundleError("reference.loop", f"expected true or false, got {loop!r}", where)
    f = bundle_dir / str(entry["file"])
    if not os.path.exists(f):  # unlike Path.exists, False for a name too long
        raise BundleError("reference.file", f"file not found: {f}", where)
    with open_npz(f, "reference table") as z:
        values = {k: z.floats(k, "a (rows, width) table of task inputs") for k in z.files}
    ref = Reference(rate, values, loop)
    check_reference(ref, where)
    return ref
