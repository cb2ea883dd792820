"""Checkpoints: a whole pytree as named arrays in an ``.npz``, never a pickle.

Each leaf is stored under its pytree path (``params.policy.params.hidden_0.kernel``...).
Loading needs a *template* pytree of the same structure (built from the same config): every
template path must be present with the same shape and dtype, or :class:`DataFileError`
names the first one that is not. Files are written atomically (temp file, then rename) and
read with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import jax
import numpy as np

from simreal.errors import DataFileError
from simreal.yaml_io import atomic_write_bytes

_STEP = re.compile(r"step_(\d+)\.")


def _name(path: tuple) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".")


def save_pytree(path: str | Path, tree: Any) -> None:
    """Write every leaf of ``tree`` under its path name, atomically."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    arrays = {_name(p): np.asarray(jax.device_get(v)) for p, v in leaves}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def load_pytree(path: str | Path, template: Any) -> Any:
    """Read a checkpoint into the structure of ``template`` (see module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise DataFileError(str(p), "checkpoint not found")
    try:
        with np.load(p, allow_pickle=False) as z:
            stored = {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise DataFileError(str(p), f"not a readable npz checkpoint ({e})") from None
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    out = []
    for path_, ref in leaves:
        name = _name(path_)
        if name not in stored:
            raise DataFileError(str(p), f"missing array '{name}' (checkpoint from another config?)")
        v = stored[name]
        ref = np.asarray(ref)
        if v.shape != ref.shape:
            raise DataFileError(str(p), f"array '{name}' has shape {v.shape}, config expects {ref.shape}")
        out.append(v.astype(ref.dtype, copy=False))
    return jax.tree_util.tree_unflatten(treedef, out)


def checkpoint_path(ckpt_dir: Path, env_steps: int, ext: str = "npz") -> Path:
    """``ckpt_dir/step_<env_steps>.<ext>`` (zero-padded so names sort by steps)."""
    return ckpt_dir / f"step_{env_steps:012d}.{ext}"


def checkpoint_steps(path: Path) -> int:
    """The env steps in a checkpoint's name (``step_000001024.npz`` -> 1024)."""
    m = _STEP.match(Path(path).name)
    if m is None:
        raise DataFileError(str(path), "not a step_<env_steps>.* checkpoint name")
    return int(m.group(1))


def _found(ckpt_dir: Path, ext: str) -> list[tuple[int, Path]]:
    return sorted((int(m.group(1)), f) for f in ckpt_dir.glob(f"step_*.{ext}") if (m := _STEP.match(f.name)))


def latest_checkpoint(ckpt_dir: Path, ext: str = "npz") -> Path | None:
    """The ``step_*.<ext>`` checkpoint with the most env steps, or None."""
    found = _found(ckpt_dir, ext)
    return found[-1][1] if found else None


def prune(ckpt_dir: Path, keep: int = 3, ext: str = "npz") -> None:
    """Keep only the ``keep`` newest ``step_*.<ext>`` checkpoints (with their ``step_N.*`` side files)."""
    for steps, _ in _found(ckpt_dir, ext)[:-keep]:
        for f in ckpt_dir.glob(f"step_{steps:012d}.*"):
            f.unlink(missing_ok=True)
