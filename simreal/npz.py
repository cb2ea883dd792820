"""Opening npz inputs safely: no pickles, and a missing or unreadable file named in the error.

    with open_npz(path) as z:
        poses = z["poses"]
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simreal.errors import DataFileError


def open_npz(path: Path, what: str = "npz file") -> np.lib.npyio.NpzFile:
    """``np.load(path, allow_pickle=False)``; DataFileError if missing or not a readable ``what``."""
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DataFileError(str(path), "file not found") from None
    except (ValueError, OSError) as e:
        raise DataFileError(str(path), f"not a readable {what}: {e}") from None
