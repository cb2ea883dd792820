"""Torch tensors with a format tag and metadata in one safetensors file: never a pickle.

    save_tensors("policy.safetensors", model.state_dict(), "simreal-bc-policy/1", {"epoch": "12"})
    meta, tensors = load_tensors("policy.safetensors", "BC checkpoint", "simreal-bc-policy/1")

The file is written atomically (temp file, then rename). Reading checks the metadata
``format`` so a file of another kind is refused by name; every failure is one
:class:`~simreal.errors.DataFileError` naming the file. torch and safetensors are imported
when called (the ``[torch]`` extra), so importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simreal.errors import DataFileError


def save_tensors(path: str | Path, tensors: Mapping[str, Any], fmt: str, meta: Mapping[str, str] = {}) -> None:
    """Write ``tensors`` (name -> torch tensor) and ``meta`` with ``format: fmt`` to ``path``, atomically."""
    from safetensors.torch import save

    from simreal.yaml_io import atomic_write_bytes

    data = {k: v.detach().contiguous() for k, v in tensors.items()}
    atomic_write_bytes(path, save(data, metadata={**meta, "format": fmt}))


def load_tensors(path: str | Path, what: str, fmt: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(metadata, name -> torch tensor) of the file at ``path``; DataFileError when it is missing,
    not a safetensors file, or its ``format`` is not ``fmt`` (``what`` names the expected file)."""
    from safetensors import SafetensorError, safe_open

    from simreal.yaml_io import read_bytes

    read_bytes(path, what, 8)  # a missing or unreadable file: DataFileError naming it
    try:
        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError) as e:
        raise DataFileError(str(path), f"not a safetensors file ({str(e).splitlines()[0][:120]})") from None
    if meta.get("format") != fmt:
        raise DataFileError(str(path), f"metadata 'format' is {meta.get('format')!r}, expected {fmt!r} (a {what})")
    return meta, tensors
