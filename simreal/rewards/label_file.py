"""The labels file ``simreal label`` writes: an npz of preference labels over a frames file.

| key | shape, dtype | holds |
| --- | --- | --- |
| ``index_a``, ``index_b`` | (M,) int64 | the pair: rows of the frames file's ``frames`` |
| ``label`` | (M,) int8 | 0: ``index_a`` is closer to the goal; 1: ``index_b``; -1: the labeller cannot tell |
| ``model`` | str | the labelling model's name |
| ``task`` | str | the goal as the labeller was told it |
| ``frames_sha256`` | str | :func:`~simreal.rewards.labelling.frame_digest` of the whole ``frames`` array |
| ``protocol`` | int | :data:`~simreal.rewards.labelling.PROTOCOL_VERSION` of the prompts |

Plain arrays and strings, no pickle (``np.load(allow_pickle=False)`` reads it). Written
atomically (temp file, rename). The stage texts behind each label stay in the label cache.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np

from simreal.errors import DataFileError
from simreal.npz import open_npz
from simreal.rewards.labelling import PROTOCOL_VERSION
from simreal.yaml_io import atomic_write_bytes


@dataclasses.dataclass(frozen=True)
class Labels:
    """Preference labels over one frames array (the module docstring's fields)."""

    index_a: np.ndarray
    index_b: np.ndarray
    label: np.ndarray
    model: str
    task: str
    frames_sha256: str
    protocol: int = PROTOCOL_VERSION

    def pairs(self) -> set[tuple[int, int]]:
        """The (index_a, index_b) pairs labelled."""
        return set(zip(self.index_a.tolist(), self.index_b.tolist()))


def save_labels(path: str | Path, labels: Labels) -> None:
    """Write ``labels`` to ``path`` (npz) atomically."""
    buf = io.BytesIO()
    np.savez(
        buf,
        index_a=labels.index_a.astype(np.int64),
        index_b=labels.index_b.astype(np.int64),
        label=labels.label.astype(np.int8),
        model=np.str_(labels.model),
        task=np.str_(labels.task),
        frames_sha256=np.str_(labels.frames_sha256),
        protocol=np.int64(labels.protocol),
    )
    atomic_write_bytes(path, buf.getvalue())


def load_labels(path: str | Path) -> Labels:
    """Read a labels file; DataFileError naming the field when one is missing or malformed."""
    with open_npz(path, "labels file") as z:
        index_a = z.array("index_a", "(M,) integer rows of the frames")
        index_b = z.array("index_b", "(M,) integer rows of the frames")
        label = z.array("label", "(M,) labels in {0, 1, -1}")
        texts = {
            k: z.text(k, what)
            for k, what in (
                ("model", "the labelling model's name"),
                ("task", "the goal as the labeller was told it"),
                ("frames_sha256", "the frames array's SHA-256"),
            )
        }
        protocol = int(z.number("protocol", "the prompts' protocol version"))
    for key, arr in (("index_a", index_a), ("index_b", index_b), ("label", label)):
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or len(arr) != len(label):
            raise DataFileError(
                str(path), f"field '{key}' has shape {arr.shape} dtype {arr.dtype}, expected ({len(label)},) integers"
            )
    if not np.isin(label, (-1, 0, 1)).all():
        raise DataFileError(str(path), "field 'label' holds values other than 0, 1 and -1")
    return Labels(
        index_a=index_a.astype(np.int64),
        index_b=index_b.astype(np.int64),
        label=label.astype(np.int8),
        protocol=protocol,
        **texts,
    )
