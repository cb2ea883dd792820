"""Training driver: run directory, PPO iterations, evaluation, checkpoints, resume.

    run = start_run(cfg)                # new runs/<task>/<stamp>/ with config.yaml
    result = train(run_dir, cfg)        # resume=True continues from the latest checkpoint

Stops when the env-step budget is spent, when deterministic evaluation reaches
``train.target_success`` (checked whenever the training episodes' success rate reaches it,
and every ``train.eval_every_steps``), or after ``train.max_wall_s``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax

from simreal.policies import checkpoint as ckpt
from simreal.policies import loop_common
from simreal.policies.loop_common import TrainResult
from simreal.policies.ppo import PPO, TrainingState, evaluate
from simreal.policies.run_config import RunConfig, from_mapping, make_env
from simreal.rundir import load_run_config, new_run_dir, open_run_dir
from simreal.yaml_io import dump_yaml


def start_run(cfg: RunConfig) -> Path:
    """A new run directory holding the resolved config."""
    run_dir = new_run_dir(cfg.runs_root, cfg.task)
    dump_yaml(run_dir / "config.yaml", cfg.to_dict())
    return run_dir


def load_config(run_dir: Path) -> RunConfig:
    """The resolved config saved in a run directory."""
    return from_mapping(load_run_config(open_run_dir(run_dir)), str(run_dir / "config.yaml"))


def load_policy(run_dir: Path, cfg: RunConfig | None = None, backend: str | None = None, **env_overrides: Any):
    """(env, ppo, training_state) from a run's latest checkpoint; ``env_overrides`` change env
    settings (e.g. ``randomize=False``) without touching the checkpoint's shapes."""
    cfg = cfg or load_config(run_dir)
    env = make_env(cfg, backend=backend, **env_overrides)
    ppo = PPO(env, cfg.train, cfg.seed)
    path = ckpt.latest_checkpoint(run_dir / "checkpoints")
    if path is None:
        from simreal.errors import DataFileError

        raise DataFileError(str(run_dir / "checkpoints"), "no checkpoint in this run (train it first)")
    return env, ppo, ckpt.load_pytree(path, ppo.init())


class _BraxTrainer:
    """The JAX PPO and its TrainingState behind the loop's :class:`~loop_common.Trainer` interface."""

    def __init__(self, cfg: RunConfig, env: Any, ppo: PPO, ts: TrainingState):
        self.cfg, self.env, self.ppo, self.ts = cfg, env, ppo, ts

    @property
    def env_steps(self) -> int:
        return int(self.ts.env_steps)

    def iterate(self) -> dict[str, float]:
        self.ts, m = self.ppo.iterate(self.ts)
        m = {k: float(v) for k, v in jax.device_get(m).items()}
        named = {k if k.startswith(("reward/", "episode/")) else f"loss/{k}": v for k, v in m.items()
                 if k != "reward_per_step"}
        return {"reward_per_step": m["reward_per_step"], **named}

    def save(self, ckpt_dir: Path) -> None:
        ckpt.save_pytree(ckpt.checkpoint_path(ckpt_dir, self.env_steps), self.ts)
        ckpt.prune(ckpt_dir)

    def evaluate(self) -> dict[str, float]:
        tc = self.cfg.train
        return evaluate(self.env, self.ppo.make_policy, self.ppo.policy_params(self.ts), tc.num_eval_envs,
                        seed=self.cfg.seed + 1)


def train(run_dir: Path, cfg: RunConfig, resume: bool = False, t_start: float | None = None,
          quiet: bool = False) -> TrainResult:
    """Train (or continue training) the run in ``run_dir``; see module docstring.

    ``cfg.trainer`` other than 'brax' trains ``simreal.policies.train_<trainer>.Driver`` on the
    same loop (``torch_loop``): the same run directory and the same :class:`TrainResult`.
    """
    t_start = t_start if t_start is not None else time.time()
    if cfg.trainer != "brax":
        import importlib

        from simreal.policies import torch_loop

        library = importlib.import_module(f"simreal.policies.train_{cfg.trainer}")
        return torch_loop.train(run_dir, cfg, library.Driver, resume, t_start, quiet)
    env = make_env(cfg)
    ppo = PPO(env, cfg.train, cfg.seed)
    ts: TrainingState = ppo.init()
    path = ckpt.latest_checkpoint(run_dir / "checkpoints") if resume else None
    if path is not None:
        ts = ckpt.load_pytree(path, ts)
    return loop_common.run(run_dir, cfg, _BraxTrainer(cfg, env, ppo, ts), t_start, quiet)
