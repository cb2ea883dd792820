"""Reading text and YAML files, and atomic file writes. Only ``yaml.safe_load`` is ever used to read YAML
(through :func:`parse_yaml`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from simreal.errors import DataFileError

#: Deepest nesting of lists and mappings a simreal YAML file may have (configs use about 5).
MAX_DEPTH = 64
#: Widest integer read: a float's range (messages that print a wider one would fail to).
MAX_INT_BITS = 1024


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing what it accepts but no simreal file is.

    An alias may name a node that contains it (``a: &x [*x]``), a cycle no consumer can
    walk, and nesting deeper than :data:`MAX_DEPTH` would exhaust Python's stack in code that
    recurses over the data; a scalar its constructors cannot build (a date 2024-13-45, an
    integer of 5000 digits) escapes PyYAML as a ValueError; and an integer wider than
    :data:`MAX_INT_BITS` is no number simreal reads, nor a mapping key with a line break or a
    control character a name. All raise ``yaml.YAMLError``, as a syntax error does.
    """
    try:
        data = yaml.safe_load(text)
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, OverflowError) as e:  # PyYAML's constructors let these through: 2024-13-45, !!int x
        raise yaml.YAMLError(f"a value cannot be read: {' '.join(str(e).split())[:160]}") from None
    _check_tree(data, 1, set(), set())
    return data


def _check_tree(node: Any, depth: int, on_path: set[int], done: set[int]) -> None:
    """Depth-first over lists, mappings (keys too) and integers; ``done`` keeps shared (aliased)
    nodes linear in time."""
    if isinstance(node, int) and node.bit_length() > MAX_INT_BITS:  # 0x followed by a thousand digits
        raise yaml.YAMLError(f"an integer of {node.bit_length()} bits; numbers stay under {MAX_INT_BITS} bits")
    if isinstance(node, dict):
        for key in node:
            if isinstance(key, str) and not key.isprintable():  # a key is a name: one line, no control codes
                raise yaml.YAMLError(f"key {key!r} holds a line break or control character")
    if not isinstance(node, (dict, list)) or id(node) in done:
        return
    if id(node) in on_path:
        raise yaml.YAMLError("an alias refers to a node that contains it (a cycle)")
    if depth > MAX_DEPTH:
        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
    on_path.add(id(node))
    for child in (*node.keys(), *node.values()) if isinstance(node, dict) else node:
        _check_tree(child, depth + 1, on_path, done)
    on_path.discard(id(node))
    done.add(id(node))


def read_bytes(path: str | os.PathLike, what: str, size: int = -1) -> bytes:
    """The first ``size`` bytes of a file (all: -1); a missing or unreadable file raises DataFileError naming it.

    Args:
      what: what the file should be ("YAML file", "npz file"), for the message.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            return f.read(size)
    except FileNotFoundError:
        raise DataFileError(str(p), "file not found") from None
    except IsADirectoryError:
        raise DataFileError(str(p), f"is a folder, expected a {what}") from None
    except OSError as e:  # no permission, a name too long, ...
        raise DataFileError(str(p), f"cannot be read: {e.strerror or e}") from None


def read_text(path: str | os.PathLike, what: str) -> str:
    """A UTF-8 text file's contents (:func:`read_bytes`); a binary file raises DataFileError too."""
    try:
        return read_bytes(path, what).decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFileError(str(path), f"not a text file (byte {e.start} is not UTF-8), expected a {what}") from None


def load_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML mapping (:func:`parse_yaml`); a missing, unreadable or malformed file raises DataFileError."""
    p = Path(path)
    text = read_text(p, "YAML file")
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or " ".join(str(e).split())
        raise DataFileError(str(p), f"invalid YAML{line}: {problem}") from None
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
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if e.filename is None:  # a write that failed (a full disk) names no file: name the one meant
            raise OSError(e.errno, e.strerror, str(p)) from None
        raise
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


def atomic_folder(out: str | os.PathLike, fill: Callable[[Path], None]) -> Path:
    """The folder ``out`` written by ``fill(tmp)`` into ``out.tmp`` beside it, then renamed into
    place (an earlier ``out`` replaced): a reader sees the old folder or the whole new one; a
    failure or Ctrl-C inside ``fill`` leaves nothing half-built."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
