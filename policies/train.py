"""trainer=brax: the JAX PPO of ``ppo.py`` behind the :class:`~trainers.Trainer` interface,
and the run-directory helpers every trainer shares.

    run_dir = start_run(cfg)                    # new runs/<task>/<stamp>/ with config.yaml
    result = BRAX.train(run_dir, cfg)           # resume=True continues from the latest checkpoint

Training stops when the env-step budget is spent, when deterministic evaluation reaches
``train.target_success`` (checked whenever the training episodes' success rate reaches it,
and every ``train.eval_every_steps``), or after ``train.max_wall_s`` (``loop_common``).
Checkpoints are the whole :class:`~ppo.TrainingState` (networks, Adam moments, normaliser,
env states, PRNG key) as named arrays, so a resumed run continues bit for bit.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from simreal.errors import DataFileError
from simreal.policies import checkpoint as ckpt
from simreal.policies import loop_common
from simreal.policies.loop_common import TrainResult
from simreal.policies.ppo import PPO, TrainingState, evaluate
from simreal.policies.run_config import RunConfig, from_mapping, make_env
from simreal.policies.trainers import LoadedPolicy
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


def _template(ppo: PPO) -> TrainingState:
    """Zeros shaped like ``ppo.init()``, traced rather than run: a checkpoint only needs the
    structure, and running ``init`` would compile the batched env reset."""
    return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(ppo.init))


class _BraxLearner:
    """The JAX PPO and its TrainingState behind the loop's :class:`~loop_common.Learner` interface."""

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
        return evaluate(self.env, self.ppo.make_policy, self.ppo.policy_params(self.ts), self.cfg.train.num_eval_envs,
                        seed=self.cfg.seed + 1)


class BraxTrainer:
    """``trainer=brax`` (see module docstring and :class:`~trainers.Trainer`)."""

    name = "brax"

    def _restore(self, run_dir: Path, cfg: RunConfig, backend: str | None = None,
                 **env_overrides: Any) -> tuple[Any, PPO, TrainingState]:
        """(env, ppo, training state) from the run's latest checkpoint."""
        env = make_env(cfg, backend=backend, **env_overrides)
        ppo = PPO(env, cfg.train, cfg.seed)
        path = ckpt.latest_checkpoint(run_dir / "checkpoints")
        if path is None:
            raise DataFileError(str(run_dir / "checkpoints"), "no step_*.npz checkpoint in this run (train it first)")
        return env, ppo, ckpt.load_pytree(path, _template(ppo))

    def train(self, run_dir: Path, cfg: RunConfig, resume: bool = False, t_start: float | None = None,
              quiet: bool = False) -> TrainResult:
        t_start = t_start if t_start is not None else time.time()
        if resume and ckpt.latest_checkpoint(run_dir / "checkpoints") is not None:
            env, ppo, ts = self._restore(run_dir, cfg)
        else:
            env = make_env(cfg)
            ppo = PPO(env, cfg.train, cfg.seed)
            ts = ppo.init()
        return loop_common.run(run_dir, cfg, _BraxLearner(cfg, env, ppo, ts), t_start, quiet)

    def load(self, run_dir: Path, cfg: RunConfig, backend: str | None = None, **env_overrides: Any) -> LoadedPolicy:
        env, ppo, ts = self._restore(run_dir, cfg, backend, **env_overrides)
        policy = ppo.make_policy(ppo.policy_params(ts), deterministic=True)
        key = jax.random.PRNGKey(0)  # the tanh-Gaussian's mode ignores it
        return LoadedPolicy(env=env, act=jax.jit(lambda obs: policy(obs, key)[0]))

    def evaluate(self, run_dir: Path, cfg: RunConfig, episodes: int, seed: int, backend: str | None = None,
                 **env_overrides: Any) -> dict[str, float]:
        env, ppo, ts = self._restore(run_dir, cfg, backend, **env_overrides)
        return evaluate(env, ppo.make_policy, ppo.policy_params(ts), episodes, seed=seed)

    def export(self, run_dir: Path, cfg: RunConfig, out_dir: Path | None = None) -> tuple[Path, float]:
        from simreal.policies.export import check_export, export_bundle

        env, ppo, ts = self._restore(run_dir, cfg)
        normalizer, policy = ppo.policy_params(ts)
        out = export_bundle(run_dir, cfg, env, normalizer, policy, out_dir)
        return out, check_export(out, ppo.make_policy, (normalizer, policy))


BRAX = BraxTrainer()
