"""The input files an env reads (a motion clip, a demonstration), kept with the run and the bundle.

A task config names them by path (``env.motion_file``). A run directory or a bundle that kept
only that path would depend on the file staying there: moved, every later verb failed; replaced
by another clip, ``export`` shipped a reference the policy never trained on. So the run
directory (``simreal train``) and the bundle (``simreal export``) each copy the file into their
own ``inputs/`` folder, and their config names the copy by a path relative to themselves::

    env:
      motion_file: inputs/motion_file.npz     # RUN_DIR/inputs/motion_file.npz, BUNDLE/inputs/...

:func:`resolve_inputs` turns those back into paths when the run or the bundle is read. Only
files are copied; a folder (a LeRobot dataset as ``env.demo_file``) keeps its path.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Env config keys that name an input file.
INPUT_KEYS = ("motion_file", "demo_file")
#: The folder of the copies, in a run directory or a bundle.
INPUTS_DIR = "inputs"


def snapshot_inputs(env: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """Copy each input file ``env`` names into ``root/inputs/<key><suffix>`` and return ``env``
    naming the copies relative to ``root``; values already there, empty or folders are kept."""
    out = dict(env)
    for key in INPUT_KEYS:
        value = out.get(key)
        if not value or _is_copy(key, value):
            continue
        src = Path(value).expanduser()
        if not src.is_file():
            continue
        rel = f"{INPUTS_DIR}/{key}{src.suffix}"
        if src.resolve() != (root / rel).resolve():  # not the copy itself (a resumed run's)
            (root / INPUTS_DIR).mkdir(parents=True, exist_ok=True)
            tmp = root / f"{rel}.tmp"
            shutil.copyfile(src, tmp)
            tmp.replace(root / rel)  # atomic: a copy is whole or absent
        out[key] = rel
    return out


def resolve_inputs(env: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """``env`` with each ``inputs/...`` value made a path under ``root`` (the run directory or
    the bundle that holds the copy)."""
    return {k: str(root / v) if _is_copy(k, v) else v for k, v in env.items()}


def bundled_inputs(env: Mapping[str, Any], root: Path) -> tuple[Path, ...]:
    """The copies ``env`` (a bundle's task config) names under ``root``."""
    return tuple(root / v for k, v in env.items() if _is_copy(k, v))


def _is_copy(key: str, value: Any) -> bool:
    """Whether ``key: value`` names a copy in ``inputs/``, relative to the folder holding it."""
    return key in INPUT_KEYS and isinstance(value, str) and value.startswith(f"{INPUTS_DIR}/")
