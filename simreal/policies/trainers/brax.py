"""trainer=brax: the JAX PPO of ``rl/ppo.py`` and SAC of ``rl/sac.py`` behind the
:class:`~trainers.Trainer` interface.

    run_dir = RunDir.create(cfg).path           # new runs/<task>/<stamp>/ with config.yaml (policies/run_dir.py)
    result = BRAX.train(run_dir, cfg)           # resume=True continues from the latest checkpoint

Training stops when the env-step budget is spent, when deterministic evaluation shows
``train.target_success`` at 95% confidence (checked whenever the training episodes' success
rate reaches it, and every ``train.eval_every_steps``; ``early_stop``), after
``train.max_wall_s``, or on SIGINT/SIGTERM after saving the last iteration (``trainers.loop``).
Checkpoints are the algorithm's whole state (networks, Adam moments, normaliser, env
states, PRNG key; SAC's replay buffer and target critic too) as named arrays, so a resumed
run continues bit for bit.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from simreal.policies import checkpoint as ckpt
from simreal.policies import devices
from simreal.policies.rl.ppo import PPO, compile_evaluation, evaluate
from simreal.policies.rl.sac import SAC, check_budget
from simreal.policies.run_config import RunConfig, make_env
from simreal.policies.trainers import LoadedPolicy, check_observations
from simreal.policies.trainers import loop as loop_common
from simreal.policies.trainers.loop import TrainResult

#: ``algorithm:`` -> its JAX implementation: ``init()``, ``iterate(state)``, ``make_policy``,
#: ``policy_params(state)``, ``state.env_steps``.
IMPLEMENTATIONS: dict[str, type[PPO] | type[SAC]] = {"ppo": PPO, "sac": SAC}


def make_algorithm(cfg: RunConfig, env: Any) -> PPO | SAC:
    """The run's algorithm, built for ``env``; ConfigError naming the key (:func:`check_algorithm`)."""
    check_algorithm(cfg, env)
    return IMPLEMENTATIONS[cfg.algorithm](env, cfg.train, cfg.seed)


def check_algorithm(cfg: RunConfig, env: Any) -> None:
    """ConfigError naming ``trainer`` for an env with dict observations (camera images), which
    these MLP networks cannot take, ``train.devices`` / ``train.num_envs`` for envs that do not
    split over the devices, ``train.num_timesteps`` for a SAC budget the replay prefill spends."""
    check_observations(cfg, env)
    devices.data_mesh(cfg.train.devices, cfg.train.num_envs)
    if cfg.algorithm == "sac":
        check_budget(cfg.train)


def _template(algo: PPO | SAC) -> Any:
    """Zeros shaped like ``algo.init()``, from its traced shapes: a checkpoint only needs the
    structure, and running ``init`` would compile the batched env reset."""
    return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), algo.state_shapes)


def _carried(template: Any) -> Any:
    """The part of a training state a step reads: all of it but the envs' per-step metrics
    (``env_state.metrics`` and ``info["episode_metrics"]``), which every env step writes afresh.
    A run saved before its task reported a new statistic therefore resumes, bit for bit."""
    env_state = template.env_state
    info = {k: v for k, v in env_state.info.items() if k != "episode_metrics"}
    return template.replace(env_state=env_state.replace(metrics={}, info=info))


class _BraxLearner:
    """A JAX algorithm and its state behind the loop's :class:`~loop_common.Learner` interface."""

    def __init__(self, cfg: RunConfig, env: Any, algo: PPO | SAC, ts: Any):
        self.cfg, self.env, self.algo, self.ts = cfg, env, algo, ts

    @property
    def env_steps(self) -> int:
        return int(self.ts.env_steps)

    def iterate(self) -> dict[str, float]:
        self.ts, m = self.algo.iterate(self.ts)
        m = {k: float(v) for k, v in jax.device_get(m).items()}
        named = {
            k if k.startswith(("reward/", "episode/")) else f"loss/{k}": v
            for k, v in m.items()
            if k != "reward_per_step"
        }
        return {"reward_per_step": m["reward_per_step"], **named}

    def save(self, ckpt_dir: Path) -> Path:
        path = ckpt.checkpoint_path(ckpt_dir, self.env_steps)
        ckpt.save_pytree(path, self.ts)
        ckpt.prune(ckpt_dir)
        return path

    def prepare_evaluation(self) -> None:
        # the program of the periodic evaluation, whose chunks the confirming one runs too
        params = self.algo.policy_params(self.ts)
        compile_evaluation(self.env, self.algo.make_policy, params, self.cfg.train.num_eval_envs)

    def evaluate(
        self, episodes: int | None = None, seed: int | None = None, max_failures: int | None = None
    ) -> dict[str, float]:
        return evaluate(
            self.env,
            self.algo.make_policy,
            self.algo.policy_params(self.ts),
            episodes or self.cfg.train.num_eval_envs,
            seed=self.cfg.seed + 1 if seed is None else seed,
            batch=self.cfg.train.num_eval_envs,
            max_failures=max_failures,
        )


class BraxTrainer:
    """``trainer=brax`` (see module docstring and :class:`~trainers.Trainer`)."""

    name = "brax"

    def prepare(self, cfg: RunConfig, env: Any) -> None:
        check_algorithm(cfg, env)

    def build(
        self,
        run_dir: Path,
        cfg: RunConfig,
        backend: str | None = None,
        task_env: Any | None = None,
        **env_overrides: Any,
    ) -> tuple[Any, PPO | SAC]:
        """(env, algorithm) of the run: the task's env on ``backend`` (``task_env`` when the caller
        built it already) and the config's algorithm on it (``residual.ResidualTrainer`` wraps the
        env around its frozen base)."""
        env = task_env if task_env is not None else make_env(cfg, backend=backend, **env_overrides)
        return env, make_algorithm(cfg, env)

    def restore(
        self,
        run_dir: Path,
        cfg: RunConfig,
        backend: str | None = None,
        path: Path | None = None,
        policy_only: bool = False,
        task_env: Any | None = None,
        **env_overrides: Any,
    ) -> tuple[Any, PPO | SAC, Any]:
        """(env, algorithm, training state) from ``path`` (default: the run's policy,
        ``checkpoint.policy_checkpoint``). ``policy_only``: the caller uses only
        ``algo.policy_params`` of the state (evaluation, export), so the rest may be missing from
        the checkpoint (it then holds zeros); a resume needs all but the per-step metrics
        (:func:`_carried`)."""
        env, algo = self.build(run_dir, cfg, backend, task_env, **env_overrides)
        path = path or self.policy_checkpoint(run_dir, cfg)
        template = _template(algo)
        needed = algo.policy_params(template) if policy_only else _carried(template)
        # placed as the iteration's outputs are: host arrays would make the second call compile again
        return env, algo, jax.device_put(ckpt.load_pytree(path, template, needed), algo.shardings)

    def train(
        self,
        run_dir: Path,
        cfg: RunConfig,
        resume: bool = False,
        t_start: float | None = None,
        quiet: bool = False,
        env: Any | None = None,
    ) -> TrainResult:
        t_start = t_start if t_start is not None else time.time()
        path = ckpt.resume_point(run_dir / "checkpoints") if resume else None
        if path is not None:
            env, algo, ts = self.restore(run_dir, cfg, path=path, task_env=env)
        else:
            env, algo = self.build(run_dir, cfg, task_env=env)
            ts = algo.init()
        return loop_common.run(run_dir, cfg, _BraxLearner(cfg, env, algo, ts), t_start, quiet)

    def policy_checkpoint(self, run_dir: Path, cfg: RunConfig) -> Path:
        return ckpt.policy_checkpoint(run_dir, cfg.train.keep_best)

    def load(self, run_dir: Path, cfg: RunConfig, backend: str | None = None, **env_overrides: Any) -> LoadedPolicy:
        env, algo, ts = self.restore(run_dir, cfg, backend, policy_only=True, **env_overrides)
        policy = algo.make_policy(algo.policy_params(ts), deterministic=True)
        key = jax.random.PRNGKey(0)  # the tanh-Gaussian's mode ignores it
        return LoadedPolicy(env=env, act=jax.jit(lambda obs: policy(obs, key)[0]))

    def evaluate(
        self, run_dir: Path, cfg: RunConfig, episodes: int, seed: int, backend: str | None = None, **env_overrides: Any
    ) -> dict[str, float]:
        env, algo, ts = self.restore(run_dir, cfg, backend, policy_only=True, **env_overrides)
        return evaluate(env, algo.make_policy, algo.policy_params(ts), episodes, seed=seed)

    def export(
        self, run_dir: Path, cfg: RunConfig, out_dir: Path | None = None, env: Any | None = None
    ) -> tuple[Path, float]:
        from simreal.policies.export import check_export, export_bundle

        env, algo, ts = self.restore(run_dir, cfg, policy_only=True, task_env=env)
        normalizer, policy = algo.policy_params(ts)
        out = export_bundle(run_dir, cfg, env, normalizer, policy, out_dir)
        return out, check_export(out, algo.make_policy, (normalizer, policy))


BRAX = BraxTrainer()
