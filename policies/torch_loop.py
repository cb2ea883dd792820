"""The torch trainers (``train_sb3``, ``train_rsl_rl``) on the shared loop of ``loop_common``.

Each supplies a library driver class, built as ``Driver(cfg, env, resume_from)``, with::

    env_steps: int                      env steps so far
    iterate() -> dict[str, float]       one PPO iteration; 'episode/<name>' summed over the episodes
                                        that ended, 'episode/done' their count, 'loss/<name>' ...
    save(ckpt_dir) -> None              write checkpoints/step_<env_steps>.<ext>
    actor() -> DeployedActor            the current deterministic policy
    ext: str                            checkpoint file extension

and :func:`train` resumes it from the latest checkpoint, prunes old checkpoints and evaluates
the actor, so the run directory is the same as the Brax trainer's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from simreal.policies import checkpoint as ckpt
from simreal.policies import loop_common, torch_policy
from simreal.policies.loop_common import TrainResult
from simreal.policies.run_config import make_env


class _TorchTrainer:
    """A library driver behind the loop's :class:`~loop_common.Trainer` interface."""

    def __init__(self, cfg: Any, env: Any, driver: Any):
        self.cfg, self.env, self.driver = cfg, env, driver

    @property
    def env_steps(self) -> int:
        return self.driver.env_steps

    def iterate(self) -> dict[str, float]:
        return self.driver.iterate()

    def save(self, ckpt_dir: Path) -> None:
        self.driver.save(ckpt_dir)
        ckpt.prune(ckpt_dir, ext=self.driver.ext)

    def evaluate(self) -> dict[str, float]:
        return torch_policy.evaluate(self.env, self.driver.actor().act, self.cfg.train.num_eval_envs,
                                     seed=self.cfg.seed + 1)


def train(run_dir: Path, cfg: Any, driver_cls: Any, resume: bool, t_start: float | None, quiet: bool) -> TrainResult:
    """Train (or continue) ``run_dir`` with ``driver_cls``; writes the run directory like the Brax trainer."""
    env = make_env(cfg)
    path = ckpt.latest_checkpoint(run_dir / "checkpoints", driver_cls.ext) if resume else None
    trainer = _TorchTrainer(cfg, env, driver_cls(cfg, env, path))
    return loop_common.run(run_dir, cfg, trainer, t_start or time.time(), quiet)
