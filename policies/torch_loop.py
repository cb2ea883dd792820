"""The outer training loop of the torch trainers: the same run directory as the Brax trainer.

A library driver (``train_sb3``, ``train_rsl_rl``) supplies one object with::

    env_steps: int                      env steps so far
    iterate() -> dict[str, float]       one PPO iteration; 'episode/<name>' summed over the episodes
                                        that ended, 'episode/done' their count, 'loss/<name>' ...
    save(ckpt_dir) -> None              write checkpoints/step_<env_steps>.<ext>
    actor() -> DeployedActor            the current deterministic policy
    ext: str                            checkpoint file extension

and this loop writes metrics.csv, TensorBoard events, plots/learning_curve.png, shows
progress, evaluates when the training success rate reaches ``train.target_success`` and at the
end, checkpoints every ``train.checkpoint_every_s``, and stops on budget, target or wall time
(the rules of ``policies/train.py``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from simreal.policies import torch_policy
from simreal.policies.progress import Progress
from simreal.policies.train import CURVES, TrainResult, _episode_means
from simreal.rundir import MetricsCsv, plot_curves


def run(run_dir: Path, cfg: Any, env: Any, driver: Any, t_start: float, quiet: bool) -> TrainResult:
    """Train ``driver`` until budget, target success or wall-time limit; see module docstring."""
    from tensorboardX import SummaryWriter

    tc = cfg.train
    ckpt_dir = run_dir / "checkpoints"
    metrics_csv = MetricsCsv(run_dir / "metrics.csv")
    metrics_csv.truncate_after(float(driver.env_steps))
    tb = SummaryWriter(str(run_dir))
    progress = Progress(tc.num_timesteps, stream=open(os.devnull, "w")) if quiet else Progress(tc.num_timesteps)
    last_ckpt = time.time()
    next_eval = driver.env_steps + tc.eval_every_steps if tc.eval_every_steps else None
    eval_result: dict[str, float] = {}
    reached = False

    def run_eval() -> dict[str, float]:
        return torch_policy.evaluate(env, driver.actor().act, tc.num_eval_envs, seed=cfg.seed + 1)

    def save() -> None:
        driver.save(ckpt_dir)
        torch_policy.prune(ckpt_dir, driver.ext)
        metrics_csv.flush()
        plot_curves(metrics_csv, run_dir / "plots" / "learning_curve.png", CURVES, f"{cfg.task} ({run_dir.name})")

    while driver.env_steps < tc.num_timesteps:
        m = driver.iterate()
        steps = driver.env_steps
        ep = _episode_means(m)
        row: dict[str, Any] = {"env_steps": steps, "wall_s": time.time() - t_start}
        row.update({k: v for k, v in m.items() if not k.startswith("episode/")})
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
    if not reached:
        eval_result = run_eval()
        if metrics_csv.rows:
            metrics_csv.rows[-1].update({f"eval_{k}": v for k, v in eval_result.items()})
        reached = tc.target_success > 0 and eval_result.get("success", 0.0) >= tc.target_success
    save()
    tb.close()
    return TrainResult(run_dir=run_dir, env_steps=driver.env_steps, wall_s=time.time() - t_start,
                       eval=eval_result, reached_target=reached)
