"""The torch trainers (``trainers.sb3``, ``trainers.rsl_rl``) behind the :class:`~trainers.Trainer`
interface, on the shared loop of ``trainers.loop``.

Each library module supplies a driver class, built as ``Driver(cfg, env, resume_from)``, with::

    env_steps: int                      env steps so far
    iterate() -> dict[str, float]       one PPO iteration; 'episode/<name>' summed over the episodes
                                        that ended, 'episode/done' their count, 'loss/<name>' ...
    save(ckpt_dir) -> Path              write checkpoints/step_<env_steps>.<ext> (atomically); its path
    actor() -> DeployedActor            the current deterministic policy
    ext: str                            checkpoint file extension

a static ``prepare(cfg, env)`` raising what its constructor would refuse (a ConfigError naming the
key) with nothing built, and ``load_actor(run_dir, cfg, backend, env=None, **env_overrides) -> (env,
DeployedActor)`` rebuilding the run's policy checkpoint's deterministic policy
(``checkpoint.policy_checkpoint``: the latest intact one, or the best evaluation's with
``train.keep_best``) on ``env`` when the caller built it.
:class:`TorchTrainer` resumes the driver from the latest intact checkpoint
(``checkpoint.resume_point``), prunes old checkpoints, evaluates and exports the actor, so the
run directory and the bundle are the same as the Brax trainer's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from simreal.policies import checkpoint as ckpt
from simreal.policies import torch_policy
from simreal.policies.export import check_flat_observation
from simreal.policies.run_config import RunConfig, make_env
from simreal.policies.trainers import LoadedPolicy
from simreal.policies.trainers import loop as loop_common
from simreal.policies.trainers.loop import TrainResult

ActorLoader = Callable[..., tuple[Any, torch_policy.Actor]]


class DriverClass(Protocol):
    """A library's driver class (module docstring): its checkpoint extension, and
    ``DriverClass(cfg, env, resume_from)`` builds the driver."""

    ext: str

    def __call__(self, cfg: RunConfig, env: Any, resume_from: Path | None) -> Any: ...

    def prepare(self, cfg: RunConfig, env: Any) -> None: ...


class _TorchLearner:
    """A library driver behind the loop's :class:`~loop_common.Learner` interface."""

    def __init__(self, cfg: Any, env: Any, driver: Any):
        self.cfg, self.env, self.driver = cfg, env, driver

    @property
    def env_steps(self) -> int:
        return self.driver.env_steps

    def iterate(self) -> dict[str, float]:
        return self.driver.iterate()

    def save(self, ckpt_dir: Path) -> Path:
        path = self.driver.save(ckpt_dir)
        ckpt.prune(ckpt_dir, ext=self.driver.ext)
        return path

    def prepare_evaluation(self) -> None:
        """Nothing ahead: the evaluation steps the env from Python (``torch_policy.evaluate``)."""

    def evaluate(
        self, episodes: int | None = None, seed: int | None = None, max_failures: int | None = None
    ) -> dict[str, float]:
        # all episodes in one batch: nothing to stop early (max_failures is a permission)
        return torch_policy.evaluate(
            self.env,
            self.driver.actor().act,
            episodes or self.cfg.train.num_eval_envs,
            seed=self.cfg.seed + 1 if seed is None else seed,
        )


class TorchTrainer:
    """One torch library (its ``Driver`` class and ``load_actor``, see module docstring)."""

    def __init__(self, name: str, driver_cls: DriverClass | None, load_actor: ActorLoader):
        # driver_cls None: a trainer without an env-step driver (bc), which replaces train and policy_checkpoint
        self.name, self.driver_cls, self.load_actor = name, driver_cls, load_actor

    def prepare(self, cfg: RunConfig, env: Any) -> None:
        from simreal.policies.trainers import check_observations

        check_observations(cfg, env)
        if self.driver_cls is not None:
            self.driver_cls.prepare(cfg, env)

    def train(
        self,
        run_dir: Path,
        cfg: RunConfig,
        resume: bool = False,
        t_start: float | None = None,
        quiet: bool = False,
        env: Any | None = None,
    ) -> TrainResult:
        assert self.driver_cls is not None  # (see __init__)
        env = env if env is not None else make_env(cfg)
        path = ckpt.resume_point(run_dir / "checkpoints", self.driver_cls.ext) if resume else None
        learner = _TorchLearner(cfg, env, self.driver_cls(cfg, env, path))
        return loop_common.run(run_dir, cfg, learner, t_start if t_start is not None else time.time(), quiet)

    def policy_checkpoint(self, run_dir: Path, cfg: RunConfig) -> Path:
        assert self.driver_cls is not None  # (see __init__)
        return ckpt.policy_checkpoint(run_dir, cfg.train.keep_best, self.driver_cls.ext)

    def load(self, run_dir: Path, cfg: RunConfig, backend: str | None = None, **env_overrides: Any) -> LoadedPolicy:
        env, actor = self.load_actor(run_dir, cfg, backend, **env_overrides)
        return LoadedPolicy(env=env, act=actor.act)

    def evaluate(
        self, run_dir: Path, cfg: RunConfig, episodes: int, seed: int, backend: str | None = None, **env_overrides: Any
    ) -> dict[str, float]:
        policy = self.load(run_dir, cfg, backend, **env_overrides)
        return torch_policy.evaluate(policy.env, policy.act, episodes, seed=seed)

    def export(
        self, run_dir: Path, cfg: RunConfig, out_dir: Path | None = None, env: Any | None = None
    ) -> tuple[Path, float]:
        env, actor = self.load_actor(run_dir, cfg, env=env)
        check_flat_observation(env, cfg.task, run_dir)  # dict observations: a DictActor, with no ONNX form
        assert isinstance(actor, torch_policy.DeployedActor)  # flat observations: the exportable MLP
        out = torch_policy.export_bundle(run_dir, cfg, env, actor, out_dir)
        return out, torch_policy.check_export(out, actor)
