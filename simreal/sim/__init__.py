"""simreal.sim: robots, tasks, domain randomisation, physics backends.

Importing this package imports nothing heavy (the CLI and the robot runtime pass through
it). It only keeps one line off stdout: MuJoCo's MJX prints "Failed to import warp" when
the optional NVIDIA Warp package is absent (always, on CPU machines), whoever imports it
first (Brax, the MJX backend). A meta-path finder runs that one module, ``mujoco.mjx.warp``,
with stdout captured, so the notice stays out of ``--json`` outputs and pipes without
importing MJX here. ``simreal.policies`` imports this package first for the same reason.
"""

import contextlib
import importlib.abc
import importlib.machinery
import io
import sys
import types
from collections.abc import Sequence

_NOTICE_MODULE = "mujoco.mjx.warp"


class _QuietLoader(importlib.abc.Loader):
    """Delegates to the real loader; executes the module with stdout captured."""

    def __init__(self, inner: importlib.abc.Loader):
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self._inner.exec_module(module)

    def __getattr__(self, name: str):  # get_resource_reader, is_package, ...
        return getattr(self._inner, name)


class _QuietWarpNotice(importlib.abc.MetaPathFinder):
    """Finds ``mujoco.mjx.warp`` as the path finder would, wrapped in :class:`_QuietLoader`."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None):
        if fullname != _NOTICE_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


if not any(isinstance(f, _QuietWarpNotice) for f in sys.meta_path):
    sys.meta_path.insert(0, _QuietWarpNotice())
