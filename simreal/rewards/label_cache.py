"""The on-disk cache of VLM preference answers, keyed by content hash, so nothing is asked twice.

One JSON file per query, ``DIR/<key[:2]>/<key>.json``, where ``key`` is
:func:`simreal.rewards.labelling.query_key` (SHA-256 of the model, both prompts, the task and
both observations' pixels). The file holds the two stage texts, raw; the label is parsed from
them when read, so a better parser applies to old answers too, and an answer that states no label
is stored like any other (a later parser may read one). Entries written before such answers were
stored (issue 54) have the same fields, and are read as they are. Writes are atomic (temp file,
fsync, rename), so a run killed mid-write leaves the old state or the new one, never half a
file, and a rerun or a resumed run finds every answer already given. The key and the answers
hold no credentials: the API key never reaches this module.

The default folder is ``$XDG_CACHE_HOME/simreal/labels`` (``~/.cache/simreal/labels``), shared by
every run on the machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from simreal.errors import DataFileError
from simreal.rewards.labelling import Preference
from simreal.yaml_io import atomic_write_text


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/simreal/labels``, or ``~/.cache/simreal/labels``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "simreal" / "labels"


class LabelCache:
    """Answers by query key; ``get`` returns None for a key never answered."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        """Where the answer for ``key`` lives (sharded by its first two hex digits)."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Preference | None:
        """The cached answer, or None. A damaged entry is a DataFileError naming the file."""
        p = self.path(key)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise DataFileError(str(p), f"label cache entry cannot be read ({e.strerror})") from None
        try:
            data = json.loads(text)
            return Preference(analysis=str(data["analysis"]), answer=str(data["answer"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise DataFileError(
                str(p), "label cache entry is not a JSON object with 'analysis' and 'answer'; delete it to ask again"
            ) from None

    def put(self, key: str, preference: Preference, model: str) -> None:
        """Store ``preference`` for ``key`` atomically (``model`` is kept for the reader's information)."""
        record = {"model": model, "analysis": preference.analysis, "answer": preference.answer}
        atomic_write_text(self.path(key), json.dumps(record, ensure_ascii=False))
