"""A run directory as one object, for every verb: create a new run (its resolved config written),
open an existing one, read its config, list its checkpoints, and undo what a command that trained
nothing did (a new run's folder removed, a resumed run's ``config.yaml`` put back).

    run = RunDir.create(cfg)                 # runs/<task>/<stamp>/ with config.yaml
    run = RunDir.open("runs/g1-velocity/20261203-062954")
    cfg = run.config(reward=False)           # the policy's config (eval, play, export, demos)
    run.save_config(cfg)                     # a resume's overrides; restore_config() undoes it

The layout of the folder is :mod:`simreal.rundir`'s (config.yaml, checkpoints/, metrics.csv,
plots/, videos/, bundle/).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simreal.errors import ConfigError
from simreal.input_files import resolve_inputs, snapshot_inputs
from simreal.policies.run_config import RunConfig, from_mapping
from simreal.rundir import load_run_config, new_run_dir, open_run_dir
from simreal.yaml_io import atomic_write_bytes, dump_yaml


class RunDir:
    """One run's folder (module docstring)."""

    def __init__(self, path: Path, new: bool):
        self.path = Path(path)
        self.new = new  # made by this command: removed again if nothing finished in it
        self._config_before: bytes | None = None  # a resumed run's config.yaml before save_config
        self._checkpoints_before: list[Path] = []

    @classmethod
    def create(cls, cfg: RunConfig, out: str | Path | None = None) -> RunDir:
        """A new run directory holding the resolved config: ``runs/<task>/<stamp>``, or ``out``
        (ConfigError naming ``--out`` when it exists and is not empty)."""
        if out is None:
            path = new_run_dir(cfg.runs_root, cfg.task)
        else:
            path = Path(out)
            if path.exists() and any(path.iterdir()):
                raise ConfigError("--out", f"{path} exists and is not empty; a run directory starts empty")
            (path / "checkpoints").mkdir(parents=True, exist_ok=True)
        run = cls(path, new=True)
        run._write(cfg)
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run directory; a ConfigError saying what is missing otherwise."""
        return cls(open_run_dir(path), new=False)

    def config(self, reward: bool = True) -> RunConfig:
        """The resolved config saved here; ``reward=False`` drops its ``reward:`` section, for using
        the trained policy (eval, play, demos): the policy's observations and actions and the task's
        success do not depend on it, and a frame or CLIP reward would render a camera every few
        steps for a figure nobody reads. Env settings the file lacks take the value it was trained
        with (:data:`simreal.sim.env.SAVED_WITHOUT`), not today's default."""
        from simreal.sim.env import as_saved
        from simreal.sim.tasks import TASKS, task_class

        data = load_run_config(self.path)
        if isinstance(data, dict) and isinstance(data.get("env"), Mapping):
            data = {**data, "env": resolve_inputs(data["env"], self.path)}  # the run's own copies
            if data.get("task") in TASKS:
                cls: Any = task_class(data["task"])  # a task env class (its config_class)
                data = {**data, "env": as_saved(cls.config_class, data["env"])}
        cfg = from_mapping(data, str(self.path / "config.yaml"))
        return cfg if reward else dataclasses.replace(cfg, reward=None)

    def checkpoints(self) -> list[Path]:
        """Every ``step_*`` file of the run (any trainer's format and side files), sorted."""
        return sorted((self.path / "checkpoints").glob("step_*"))

    def save_config(self, cfg: RunConfig) -> None:
        """Write ``cfg`` (a resume's overrides applied) as the run's config, remembering the one
        before and the checkpoints it describes, for :meth:`restore_config`."""
        self._config_before = (self.path / "config.yaml").read_bytes()
        self._checkpoints_before = self.checkpoints()
        self._write(cfg)

    def restore_config(self) -> bool:
        """Put the config from before :meth:`save_config` back when no checkpoint was saved since:
        the run's checkpoints were made with that config. True if it did."""
        if self._config_before is None or self.checkpoints() != self._checkpoints_before:
            return False
        atomic_write_bytes(self.path / "config.yaml", self._config_before)
        return True

    def discard_if_empty(self) -> bool:
        """Remove a new run's folder when nothing finished in it (no orphan run directory), and
        ``runs/<task>/`` when this run was its only one. True if it did."""
        if not self.new or any((self.path / "checkpoints").glob("*")):
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        try:
            self.path.parent.rmdir()
        except OSError:
            pass
        return True

    def _write(self, cfg: RunConfig) -> None:
        data = cfg.to_dict()
        data["env"] = snapshot_inputs(data["env"], self.path)  # the run keeps its own copy of a clip it reads
        dump_yaml(self.path / "config.yaml", data)


def load_config(run_dir: str | Path, reward: bool = True) -> RunConfig:
    """``RunDir.open(run_dir).config(reward)``: what most verbs need of a run."""
    return RunDir.open(run_dir).config(reward)
