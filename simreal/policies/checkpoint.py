"""Checkpoints: a whole pytree as named arrays in an ``.npz``, never a pickle.

Each leaf is stored under its pytree path (``params.policy.params.hidden_0.kernel``...).
Loading needs a *template* pytree of the same structure (built from the same config): every
template path must be present with the same shape and dtype, or :class:`DataFileError`
names the first one that is not. A load that uses only part of the tree (evaluation and export
need the policy, not the envs' state) names that part: a path outside it that is missing keeps
the template's value, so a run whose task has since gained an episode statistic still exports.
Files are written atomically (temp file, then rename) and read with ``allow_pickle=False``.

Finding a run's checkpoint (shared by every trainer: Brax ``.npz``, SB3 ``.zip``, rsl_rl
``.pt``): :func:`latest_checkpoint` is the newest ``step_<env_steps>.<ext>`` that is *intact*,
and a damaged newer one is skipped with a one-line warning naming it. All three formats are
zip archives (``np.savez``, SB3's ``save``, ``torch.save``), so intact means: every file of
that step (the checkpoint and side files such as SB3's ``step_N.normalizer.npz``) is a zip
whose central directory reads and whose members match their CRC-32 (:func:`damage`). An
atomic write never leaves a partial ``step_*`` file; a truncated or overwritten one comes
from elsewhere (a full disk under a non-atomic copy, a sync tool, a hand edit).

The best evaluation's checkpoint (``train.keep_best``): :func:`keep_best` links the files of a
step into ``checkpoints/best/`` and names it in ``best/eval.yaml`` with its evaluation; that
step, not the latest, is then the run's policy for eval, export and play
(:func:`policy_checkpoint`), while ``--resume`` still continues from the latest.
"""

from __future__ import annotations

import io
import math
import os
import re
import shutil
import sys
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from simreal.errors import DataFileError
from simreal.yaml_io import atomic_write_bytes, dump_yaml, load_yaml

_STEP = re.compile(r"step_(\d+)\.")


def _name(path: tuple) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".")


def save_pytree(path: str | Path, tree: Any) -> None:
    """Write every leaf of ``tree`` under its path name, atomically."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    # values Any: mypy checks **arrays against savez's allow_pickle: bool too
    arrays: dict[str, Any] = {_name(p): np.asarray(jax.device_get(v)) for p, v in leaves}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def load_pytree(path: str | Path, template: Any, needed: Any = None) -> Any:
    """Read a checkpoint into the structure of ``template`` (see module docstring). ``needed``:
    a subtree of ``template`` (its leaves the same objects), the part the caller uses; the other
    paths may be missing and then keep the template's value. None: every path is needed."""
    p = Path(path)
    if not p.is_file():
        raise DataFileError(str(p), "checkpoint not found")
    why = _not_zip(p)  # before np.load: it would take random bytes for a pickle and say so
    if why is not None:
        raise DataFileError(str(p), why)
    try:
        # Reading every member checks its CRC-32 (zipfile): no separate damage() pass, which
        # would read the whole file once more.
        with np.load(p, allow_pickle=False) as z:
            stored = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
        raise DataFileError(str(p), f"a damaged zip archive ({type(e).__name__}: {e})") from None
    except (ValueError, OSError) as e:
        raise DataFileError(str(p), f"not a readable npz checkpoint ({e})") from None
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    used = None if needed is None else {id(leaf) for leaf in jax.tree.leaves(needed)}
    out = []
    for path_, ref in leaves:
        name = _name(path_)
        if name not in stored:
            if used is not None and id(ref) not in used:
                out.append(ref)
                continue
            raise DataFileError(
                str(p),
                f"missing array '{name}' (a checkpoint from another config, or "
                "from an older simreal whose training state lacked it)",
            )
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


def _step_files(ckpt_dir: Path, steps: int) -> list[Path]:
    """Every file of one checkpoint: ``step_<steps>.*`` (the checkpoint and its side files)."""
    return sorted(ckpt_dir.glob(f"step_{steps:012d}.*"))


# What a damaged zip raises while its directory or members are read: a bad header or CRC
# (BadZipFile), a cut-off or garbled deflate stream (zlib.error, EOFError), a nonsense size or
# method field (ValueError, NotImplementedError), a read error (OSError).
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError, OSError)


def _not_zip(p: Path) -> str | None:
    """Why ``p`` is not a zip archive at all (its signature), or None when it is one."""
    if zipfile.is_zipfile(p):
        return None
    size = p.stat().st_size if p.is_file() else 0
    return (
        f"not a zip archive ({size} bytes; every checkpoint format here, .npz, .zip and .pt, is one): "
        "truncated, or overwritten with something else"
    )


def damage(path: str | Path) -> str | None:
    """Why the file at ``path`` is not an intact checkpoint, or None when it is one.

    Every checkpoint format here is a zip archive (module docstring): intact means the
    central directory reads and every member's bytes match their CRC-32 (``ZipFile.testzip``
    reads them all). This checks the container only; whether the arrays fit the config is
    :func:`load_pytree`'s (or the library loader's) business.
    """
    p = Path(path)
    with open(p, "rb"):  # a file we may not read is the user's to fix (PermissionError), not a damaged one
        pass
    why = _not_zip(p)
    if why is not None:
        return why
    try:
        with zipfile.ZipFile(p) as z:
            bad = z.testzip()
    except _ZIP_ERRORS as e:
        return f"a damaged zip archive ({type(e).__name__}: {e})"
    return None if bad is None else f"a damaged zip archive (member {bad!r} fails its CRC-32 check)"


def _step_damage(ckpt_dir: Path, steps: int) -> list[tuple[Path, str]]:
    """(file, why) for every damaged file of one checkpoint (:func:`damage`, side files included)."""
    return [(f, why) for f in _step_files(ckpt_dir, steps) if (why := damage(f)) is not None]


_warned: set[Path] = set()  # damaged files already reported by this process (eval loads twice)


def latest_checkpoint(ckpt_dir: Path, ext: str = "npz") -> Path | None:
    """The intact ``step_*.<ext>`` checkpoint with the most env steps, or None when there is
    no ``step_*.<ext>`` file at all.

    Newer damaged ones (:func:`damage`, side files included) are skipped, each with one
    warning line on stderr naming the file and what it is not. When every checkpoint is
    damaged, :class:`DataFileError` lists them: falling back to step 0 would silently
    throw the run away.
    """
    damaged: list[str] = []
    for steps, path in reversed(_found(ckpt_dir, ext)):
        bad = _step_damage(ckpt_dir, steps)
        if not bad:
            if damaged and path not in _warned:
                _warned.add(path)
                print(f"warning: using the newest intact checkpoint instead, {path}", file=sys.stderr)
            return path
        for f, why in bad:
            damaged.append(f"{f.name} ({why})")
            if f not in _warned:
                _warned.add(f)
                print(f"warning: skipping damaged checkpoint {f}: {why}", file=sys.stderr)
    if damaged:
        raise DataFileError(str(ckpt_dir), "no intact checkpoint: " + "; ".join(damaged))
    return None


def require_latest(ckpt_dir: Path, ext: str = "npz") -> Path:
    """:func:`latest_checkpoint`, or DataFileError when the run has none (eval, export, play)."""
    path = latest_checkpoint(ckpt_dir, ext)
    if path is None:
        raise DataFileError(str(ckpt_dir), f"no step_*.{ext} checkpoint in this run (train it first)")
    return path


def resume_point(ckpt_dir: Path, ext: str = "npz") -> Path | None:
    """The checkpoint ``simreal train --resume`` continues from (:func:`latest_checkpoint`),
    said on stderr with its env steps; None, said too, when the run has none yet: the run
    then starts from step 0 in its own directory with its saved config."""
    path = latest_checkpoint(ckpt_dir, ext)
    if path is None:
        print(f"resume: no step_*.{ext} checkpoint in {ckpt_dir}: starting from step 0", file=sys.stderr)
    else:
        print(f"resume: continuing from {path} ({checkpoint_steps(path)} env steps)", file=sys.stderr)
    return path


def prune(ckpt_dir: Path, keep: int = 3, ext: str = "npz") -> None:
    """Keep only the ``keep`` newest ``step_*.<ext>`` checkpoints (with their ``step_N.*`` side
    files), and delete the temp files a killed writer left (``.step_*.tmp``; only one process
    trains a run, and it calls this right after its own write finished)."""
    for steps, path in _found(ckpt_dir, ext)[:-keep]:
        path.unlink(
            missing_ok=True
        )  # the checkpoint first: a prune cut short leaves no checkpoint without its side files
        for f in _step_files(ckpt_dir, steps):
            f.unlink(missing_ok=True)
    for f in ckpt_dir.glob(".step_*.tmp"):
        f.unlink(missing_ok=True)


BEST_DIR = "best"
BEST_EVAL = "eval.yaml"


def _link_atomic(src: Path, dst: Path) -> None:
    """``dst`` becomes ``src``'s content in one rename: a hard link (no copy of a replay buffer),
    or a copy where the file system has no hard links."""
    tmp = dst.with_name(f".{dst.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def keep_best(ckpt_dir: Path, path: Path, result: Mapping[str, Any]) -> Path:
    """Make the checkpoint at ``path`` (a ``step_N.*`` in ``ckpt_dir``, side files included) the
    run's best: its files linked into ``ckpt_dir/best/``, then ``best/eval.yaml`` naming step N
    with ``result`` (the evaluation that chose it), then the previous best's files removed. Each
    step is atomic and eval.yaml names a step whose files exist at every point, so a crash
    leaves the previous best or the new one. Returns the kept checkpoint's path."""
    steps = checkpoint_steps(path)
    best = ckpt_dir / BEST_DIR
    best.mkdir(parents=True, exist_ok=True)
    for f in _step_files(ckpt_dir, steps):
        _link_atomic(f, best / f.name)
    record = {k: (float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None) for k, v in result.items()}
    dump_yaml(best / BEST_EVAL, {"env_steps": steps, "checkpoint": path.name, "eval": record})
    for f in best.glob("step_*"):
        if (m := _STEP.match(f.name)) and int(m.group(1)) != steps:
            f.unlink(missing_ok=True)
    return best / path.name


def best_record(ckpt_dir: Path) -> dict[str, Any] | None:
    """``best/eval.yaml`` (``env_steps``, ``checkpoint``, ``eval``), or None when no best was kept,
    or when the file is not such a record (invalid YAML, a field of another type: one warning line
    naming it; the run goes on from its latest checkpoint, and the next better evaluation writes
    the file again)."""
    meta = ckpt_dir / BEST_DIR / BEST_EVAL
    if not meta.is_file():
        return None
    try:
        record = load_yaml(meta)
        why = next(
            (
                f"'{k}' is not {what}"
                for k, kind, what in (("checkpoint", str, "a file name"), ("eval", dict, "a mapping of figures"))
                if not isinstance(record.get(k), kind)
            ),
            None,
        )
    except DataFileError as e:
        why = str(e).removeprefix(f"{e.path}: ")
    if why is None:
        return record
    if meta not in _warned:
        _warned.add(meta)
        print(
            f"warning: the best checkpoint's record {meta} is unusable ({why}); using the latest instead",
            file=sys.stderr,
        )
    return None


def policy_checkpoint(run_dir: Path, keep_best: bool, ext: str = "npz") -> Path:
    """The checkpoint that is a run's policy (eval, export, play): with ``train.keep_best`` the
    best evaluation's (:func:`keep_best`) once one was kept, else :func:`require_latest`. A kept
    best that is missing or damaged is passed over with one warning line naming it."""
    ckpt_dir = Path(run_dir) / "checkpoints"
    record = best_record(ckpt_dir) if keep_best else None
    if record is not None:
        path = ckpt_dir / BEST_DIR / str(record.get("checkpoint", ""))
        if path.suffix == f".{ext}" and path.is_file():
            bad = _step_damage(path.parent, checkpoint_steps(path))
            if not bad:
                return path
            why = bad[0][1]
        else:
            why = f"no {path.name} beside {BEST_EVAL}"
        if path not in _warned:
            _warned.add(path)
            print(f"warning: the best checkpoint {path} is unusable ({why}); using the latest instead", file=sys.stderr)
    return require_latest(ckpt_dir, ext)
