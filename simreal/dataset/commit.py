"""All-or-nothing updates of several files in a dataset folder.

Saving an episode rewrites up to six files (data parquet, one mp4 per camera, episodes
parquet, tasks, stats, info). A :class:`Commit` makes that one step a crash cannot split:

1. every new file is written beside its destination as ``.<name>.<random>.simreal-tmp`` and
   fsynced (no LeRobot reader globs these: they end neither in ``.parquet`` nor ``.mp4``);
2. a journal ``meta/.commit.json`` listing (temp, destination) pairs is written atomically;
3. each temp file is renamed over its destination (``os.replace``, atomic per file);
4. the journal is deleted.

A crash before step 2 leaves the old dataset plus stray temp files; after it, :func:`recover`
(run by the reader and the writer when they open a dataset) finishes the renames. So a
reader sees the dataset before the commit or after it, never a mixture.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from simreal.errors import DataFileError
from simreal.yaml_io import atomic_write_bytes, read_text

JOURNAL = "meta/.commit.json"
TMP_SUFFIX = ".simreal-tmp"


class Commit:
    """Files staged for one atomic update of the dataset at ``root``.

    commit = Commit(root)
    commit.staged("meta/info.json").write_bytes(data)   # or pq.write_table(table, commit.staged(...))
    commit.apply()
    """

    def __init__(self, root: Path):
        self.root = root
        self._moves: list[tuple[Path, Path]] = []
        self._journaled = False  # from then on the commit must finish: recover() completes it

    def staged(self, rel: str) -> Path:
        """A fresh temp path beside ``root / rel`` for the new content; :meth:`apply` moves it there."""
        final = self.root / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:12]}{TMP_SUFFIX}")
        self._moves.append((tmp, final))
        return tmp

    def apply(self) -> None:
        """Make every staged file durable, then move them all into place (see the module doc)."""
        for tmp, _ in self._moves:
            _fsync(tmp)
        pairs = [[str(t.relative_to(self.root)), str(f.relative_to(self.root))] for t, f in self._moves]
        atomic_write_bytes(self.root / JOURNAL, json.dumps(pairs).encode("utf-8"))
        self._journaled = True
        _replay(self.root, pairs)

    def discard(self) -> None:
        """Delete the staged files of a commit abandoned before its journal was written (after that,
        the files belong to the journal and :func:`recover` finishes the commit)."""
        if self._journaled:
            return
        for tmp, _ in self._moves:
            tmp.unlink(missing_ok=True)
        self._moves.clear()


def recover(root: Path, *, remove_strays: bool = False) -> None:
    """Finish a commit a crash interrupted; optionally delete temp files no journal lists.

    Raises:
      DataFileError: the journal is unreadable, or the renames fail (a read-only folder).
    """
    journal = root / JOURNAL
    if journal.exists():
        try:
            pairs = json.loads(read_text(journal, "commit journal"))
            if not (isinstance(pairs, list) and all(isinstance(p, list) and len(p) == 2 for p in pairs)):
                raise ValueError("expected [[temp, destination], ...]")
            _replay(root, pairs)
        except (ValueError, OSError) as e:
            raise DataFileError(str(journal), f"an interrupted save could not be finished: {e}") from None
    if remove_strays:
        for sub in ("meta", "data", "videos"):
            for stray in (root / sub).rglob(f"*{TMP_SUFFIX}"):
                stray.unlink()


def _replay(root: Path, pairs: list[list[str]]) -> None:
    """Rename each listed temp file that still exists over its destination, then drop the journal."""
    for tmp, final in pairs:
        if not (
            isinstance(tmp, str)
            and isinstance(final, str)
            and tmp.endswith(TMP_SUFFIX)
            and _inside(tmp)
            and _inside(final)
        ):
            raise ValueError(f"not a temp/destination pair inside the dataset: {tmp!r}, {final!r}")
        if (root / tmp).exists():
            os.replace(root / tmp, root / final)
    (root / JOURNAL).unlink()


def _inside(rel: str) -> bool:
    """A relative path that stays inside the dataset folder (a journal never names anything else)."""
    p = Path(rel)
    return not p.is_absolute() and ".." not in p.parts


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
