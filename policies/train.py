"""Training driver: run directory, PPO iterations, evaluation, checkpoints, resume.

    run = start_run(cfg)                # new runs/<task>/<stamp>/ with config.yaml
    result = train(run_dir, cfg)        # or resume_run(run_dir) to continue

Stops when the env-step budget is spent, when deterministic evaluation reaches
``train.target_success`` (checked whenever the training episodes' success rate reaches it,
and every ``train.eval_every_steps``), or after ``train.max_wall_s``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import jax

from simreal.policies import checkpoint as ckpt
from simreal.policies.ppo import PPO, TrainingState, evaluate
from simreal.policies.progress import Progress
from simreal.policies.run_config import RunConfig, from_mapping, make_env
from simreal.rundir import MetricsCsv, load_run_config, new_run_dir, open_run_dir, plot_curves
from simreal.yaml_io import dump_yaml

CURVES = ("episode_return", "success", "eval_success", "pos_rmse_m")


@dataclasses.dataclass
class TrainResult:
    run_dir: Path
    env_steps: int
    wall_s: float
    eval: dict[str, float]
    reached_target: bool


def start_run(cfg: RunConfig) -> Path:
    """A new run directory holding the resolved config."""
    run_dir = new_run_dir(cfg.runs_root, cfg.task)
    dump_yaml(run_dir / "config.yaml", cfg.to_dict())
    return run_dir


def load_config(run_dir: Path) -> RunConfig:
    """The resolved config saved in a run directory."""
    return from_mapping(load_run_config(open_run_dir(run_dir)), str(run_dir / "config.yaml"))


def load_policy(run_dir: Path, cfg: RunConfig | None = None, backend: str | None = None):
    """(env, ppo, training_state) from a run's latest checkpoint."""
    cfg = cfg or load_config(run_dir)
    env = make_env(cfg, backend=backend)
    ppo = PPO(env, cfg.train, cfg.seed)
    path = ckpt.latest_checkpoint(run_dir / "checkpoints")
    if path is None:
        from simreal.errors import DataFileError

        raise DataFileError(str(run_dir / "checkpoints"), "no checkpoint in this run (train it first)")
    return env, ppo, ckpt.load_pytree(path, ppo.init())


def _episode_means(m: dict[str, float]) -> dict[str, float]:
    n = m.get("episode/done", 0.0)
    if n <= 0:
        return {}
    return {k.split("/", 1)[1]: m[k] / n for k in m if k.startswith("episode/") and k != "episode/done"}


def train(run_dir: Path, cfg: RunConfig, resume: bool = False, t_start: float | None = None,
          quiet: bool = False) -> TrainResult:
    """Train (or continue training) the run in ``run_dir``; see module docstring.

    ``cfg.trainer`` other than 'brax' hands the run to ``simreal.policies.train_<trainer>``,
    which writes the same run directory and returns the same :class:`TrainResult`.
    """
    t_start = t_start if t_start is not None else time.time()
    if cfg.trainer != "brax":
        import importlib

        driver = importlib.import_module(f"simreal.policies.train_{cfg.trainer}")
        return driver.train(run_dir, cfg, resume=resume, t_start=t_start, quiet=quiet)
    tc = cfg.train
    env = make_env(cfg)
    ppo = PPO(env, tc, cfg.seed)
    ts: TrainingState = ppo.init()
    metrics_csv = MetricsCsv(run_dir / "metrics.csv")
    if resume:
        path = ckpt.latest_checkpoint(run_dir / "checkpoints")
        if path is not None:
            ts = ckpt.load_pytree(path, ts)
        metrics_csv.truncate_after(float(ts.env_steps))
    from tensorboardX import SummaryWriter

    tb = SummaryWriter(str(run_dir))
    progress = Progress(tc.num_timesteps, stream=open(os.devnull, "w")) if quiet else Progress(tc.num_timesteps)
    last_ckpt = time.time()
    next_eval = int(ts.env_steps) + tc.eval_every_steps if tc.eval_every_steps else None
    eval_result: dict[str, float] = {}
    reached = False

    def save() -> None:
        ckpt.save_pytree(ckpt.checkpoint_path(run_dir / "checkpoints", int(ts.env_steps)), ts)
        ckpt.prune(run_dir / "checkpoints")
        metrics_csv.flush()
        plot_curves(metrics_csv, run_dir / "plots" / "learning_curve.png", CURVES, f"{cfg.task} ({run_dir.name})")

    def run_eval() -> dict[str, float]:
        r = evaluate(env, ppo.make_policy, ppo.policy_params(ts), tc.num_eval_envs, seed=cfg.seed + 1)
        return r

    while int(ts.env_steps) < tc.num_timesteps:
        ts, m = ppo.iterate(ts)
        m = {k: float(v) for k, v in jax.device_get(m).items()}
        steps = int(ts.env_steps)
        ep = _episode_means(m)
        row: dict[str, Any] = {"env_steps": steps, "wall_s": time.time() - t_start,
                               "reward_per_step": m["reward_per_step"]}
        row.update({k if k.startswith("reward/") else f"loss/{k}": v for k, v in m.items()
                    if not k.startswith("episode/") and k != "reward_per_step"})
        row.update({("episode_return" if k == "return" else k): v for k, v in ep.items()})
        due = next_eval is not None and steps >= next_eval
        hit = tc.target_success > 0 and ep.get("success", 0.0) >= tc.target_success
        if due or hit:
            eval_result = run_eval()
            row.update({f"eval_{k}": v for k, v in eval_result.items()})
            if next_eval is not None:
                next_eval += tc.eval_every_steps
            reached = tc.target_success > 0 and eval_result.get("success", 0.0) >= tc.target_success
        metrics_csv.append(row)
        for k, v in row.items():
            if k != "env_steps":
                tb.add_scalar(k, v, steps)
        status = {"return": row.get("episode_return", float("nan")), "success": ep.get("success", float("nan"))}
        if "eval_success" in row:
            status["eval_success"] = row["eval_success"]
        progress.update(steps, force=due or hit, **status)
        out_of_time = tc.max_wall_s > 0 and time.time() - t_start >= tc.max_wall_s
        if reached or out_of_time or time.time() - last_ckpt >= tc.checkpoint_every_s:
            save()
            last_ckpt = time.time()
        if reached or out_of_time:
            break
    progress.close()
    if not eval_result or "success" not in eval_result or not reached:
        eval_result = run_eval()
        if metrics_csv.rows:
            metrics_csv.rows[-1].update({f"eval_{k}": v for k, v in eval_result.items()})
        reached = tc.target_success > 0 and eval_result.get("success", 0.0) >= tc.target_success
    save()
    tb.close()
    return TrainResult(run_dir=run_dir, env_steps=int(ts.env_steps), wall_s=time.time() - t_start,
                       eval=eval_result, reached_target=reached)
