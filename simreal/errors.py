"""The exception family: every user-facing error names what is wrong and what was expected.

The CLI catches :class:`SimrealError` and prints its message on one line with exit code 2,
so a bad key, file or value never surfaces as a traceback from inside a library.
"""

from __future__ import annotations

from collections.abc import Iterable


class SimrealError(Exception):
    """Base class of every error simreal raises on purpose."""


class ConfigError(SimrealError):
    """A config key is unknown, missing, of the wrong type or out of range.

    Args:
      key: dotted path of the offending key (``train.num_envs``).
      message: what was expected.
      source: the file the key came from, when known.
    """

    def __init__(self, key: str, message: str, source: str | None = None):
        self.key, self.message, self.source = key, message, source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}config key '{key}': {message}")


def printable(text: str) -> str:
    """``text`` with newlines and other control characters escaped (``\\n``), for a one-line message."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class UnknownNameError(SimrealError):
    """A name (task, robot, backend, ...) is not registered; the message lists valid ones."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]):
        self.kind, self.name = kind, name
        choices = ", ".join(sorted(valid)) or "(none registered)"
        super().__init__(f"unknown {kind} '{printable(str(name))}'; valid {kind}s: {choices}")


class BundleError(SimrealError):
    """A policy bundle is missing, malformed, or does not match what deploy expects."""

    def __init__(self, field: str, message: str, path: str | None = None):
        self.field = field
        where = f"{path}: " if path else ""
        super().__init__(f"{where}bundle field '{field}': {message}")


class DataFileError(SimrealError):
    """An input data file (motion capture, dataset, checkpoint) is missing or malformed.

    Args:
      path: the file.
      message: what is wrong, naming the line, key or field where possible.
    """

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


class MissingDependencyError(SimrealError):
    """A package the command needs is not installed; the message says what to pip install.

    Args:
      module: the import that failed (``mink``, ``torch``).
      command: the pip command that installs it.
      where: which part of simreal's install provides it, when that helps.
    """

    def __init__(self, module: str, command: str, where: str | None = None):
        self.module, self.command = module, command
        super().__init__(f"needs {module}" + (f", {where}" if where else "") + f": {command}")
