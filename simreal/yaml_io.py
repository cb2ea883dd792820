"""YAML and atomic file writes. Only ``yaml.safe_load`` is ever used to read."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from simreal.errors import DataFileError


def load_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML mapping with ``yaml.safe_load``; missing or malformed files raise DataFileError."""
    p = Path(path)
    if not p.is_file():
        raise DataFileError(str(p), "file not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise DataFileError(str(p), f"invalid YAML{line}: {getattr(e, 'problem', e)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DataFileError(str(p), f"expected a YAML mapping at the top level, got {type(data).__name__}")
    return data


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temp file in the same folder, fsync, then rename."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Atomic text write (UTF-8); see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def dump_yaml(path: str | os.PathLike, data: dict[str, Any]) -> None:
    """Write a mapping as YAML atomically, keys in insertion order."""
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=None))
