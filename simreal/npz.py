"""Opening npz inputs safely: no pickles, and every failure one DataFileError naming the file and field.

    with open_npz(path, "AMASS clip") as z:
        poses = z.floats("poses", "(T, 72 | 156 | 165) axis-angle rotations [rad]")
        names = z.strings("names", "(K,) keypoint names")
        fps = z.number("fps", "the frame rate [Hz]")

An npz is a zip of ``.npy`` members that numpy reads lazily, so a truncated or bit-flipped
file may open and fail only when one member is read. Every read goes through :class:`Npz`,
which turns whatever numpy, zipfile or zlib raise into ``<file>: field '<key>' ...`` with
the caller's description of what the field should hold.
"""

from __future__ import annotations

import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

from simreal.errors import DataFileError
from simreal.yaml_io import read_bytes

# What numpy, zipfile and zlib raise on bytes that are not a well-formed npz: an unreadable
# path (OSError), a short read (EOFError), a bad zip directory or CRC (BadZipFile), a corrupt
# deflate stream (zlib.error), a mangled .npy header (ValueError, SyntaxError, TokenError and
# TypeError from its tokenizer, literal parser and dtype lookup; OverflowError from its
# shape), an unknown compression method (NotImplementedError), an encrypted member
# (RuntimeError), a header asking for more memory than there is (MemoryError). They share no
# narrower base class.
_UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    SyntaxError,
    tokenize.TokenError,
    TypeError,
    OverflowError,
    zipfile.BadZipFile,
    zlib.error,
    NotImplementedError,
    RuntimeError,
    MemoryError,
)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first member, or an empty zip
_NPY_MAGIC = b"\x93NUMPY"


def short_reason(e: BaseException) -> str:
    """The first line of a library's message, short enough for a one-line error."""
    text = str(e).strip().splitlines()
    return (text[0][:160] if text else "") or type(e).__name__


class Npz:
    """An open npz archive whose reads raise DataFileError naming the file and the field.

    Every getter takes ``expected``, a few words on what the field holds ("(T, 3) root
    positions [m]"), which the error repeats so the user knows what to write instead.
    """

    def __init__(self, archive: np.lib.npyio.NpzFile, path: str):
        self._archive = archive
        self.path = path
        self.files: tuple[str, ...] = tuple(archive.files)

    def __enter__(self) -> Npz:
        return self

    def __exit__(self, *exc: object) -> None:
        self._archive.close()

    def __contains__(self, key: object) -> bool:
        return key in self.files

    def error(self, key: str, message: str) -> DataFileError:
        """``<file>: field '<key>' <message>``."""
        return DataFileError(self.path, f"field '{key}' {message}")

    def array(self, key: str, expected: str) -> np.ndarray:
        """Member ``key`` as stored (any dtype but object)."""
        if key not in self.files:
            found = ", ".join(self.files) or "no fields"
            raise DataFileError(self.path, f"missing field '{key}' ({expected}); found: {found}")
        try:
            return self._archive[key]
        except _UNREADABLE as e:
            # numpy refuses an object member with a plain ValueError; its message is the only tell
            if isinstance(e, ValueError) and "allow_pickle" in str(e):
                raise self.error(
                    key,
                    "is an object array (pickled Python objects), which simreal never "
                    f"unpickles; expected {expected}, saved with a plain numeric or string "
                    "dtype",
                ) from None
            raise self.error(key, f"cannot be read ({short_reason(e)}); the file is damaged or truncated") from None

    def floats(self, key: str, expected: str) -> np.ndarray:
        """Member ``key`` as float64; booleans and integers widen, anything else is refused."""
        arr = self.array(key, expected)
        if arr.dtype.kind not in "biuf":
            raise self.error(key, f"has dtype {arr.dtype}, expected numbers: {expected}")
        return arr.astype(np.float64)

    def number(self, key: str, expected: str) -> float:
        """Member ``key`` as one float (a 0-d or single-element array)."""
        arr = self.floats(key, expected)
        if arr.size != 1:
            raise self.error(key, f"has shape {arr.shape}, expected a single number: {expected}")
        return float(arr.reshape(()))

    def strings(self, key: str, expected: str) -> tuple[str, ...]:
        """Member ``key``, a 0-d or 1-d array of str (or UTF-8 bytes), as a tuple of str."""
        arr = self.array(key, expected)
        if arr.dtype.kind not in "US" or arr.ndim > 1:
            raise self.error(key, f"has dtype {arr.dtype} and shape {arr.shape}, expected text: {expected}")
        try:
            return tuple(s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in arr.reshape(-1))
        except UnicodeDecodeError as e:
            raise self.error(key, f"holds bytes that are not UTF-8 (at byte {e.start}); expected {expected}") from None

    def text(self, key: str, expected: str) -> str:
        """Member ``key``, a single string."""
        values = self.strings(key, expected)
        if len(values) != 1:
            raise self.error(key, f"holds {len(values)} strings, expected one: {expected}")
        return values[0]


def open_npz(path: str | Path, what: str = "npz file") -> Npz:
    """Open ``path`` with ``np.load(allow_pickle=False)``; DataFileError if it is not a readable ``what``."""
    p = Path(path)
    head = read_bytes(p, what, len(_NPY_MAGIC))
    if not head:
        raise DataFileError(str(p), f"not a readable {what}: the file is empty")
    if head.startswith(_NPY_MAGIC):
        raise DataFileError(
            str(p), f"not a readable {what}: a single .npy array, not an npz archive of named arrays (numpy.savez)"
        )
    if not head.startswith(_ZIP_MAGIC):
        raise DataFileError(str(p), f"not a readable {what}: not an npz archive (numpy.savez writes a zip file)")
    try:
        archive = np.load(p, allow_pickle=False)
    except _UNREADABLE as e:
        raise DataFileError(
            str(p), f"not a readable {what}: a damaged or truncated npz archive ({short_reason(e)})"
        ) from None
    return Npz(archive, str(p))
