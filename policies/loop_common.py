"""The outer training loop shared by every trainer (Brax in ``train``, torch in ``torch_loop``).

A trainer supplies one object (:class:`Learner`) and this loop writes metrics.csv, TensorBoard
events, plots/learning_curve.png, shows progress, evaluates when the training success rate
reaches ``train.target_success``, every ``train.eval_every_steps`` and at the end, checkpoints
every ``train.checkpoint_every_s``, and stops on budget, target or wall time.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from simreal.policies.progress import Progress
from simreal.rundir import MetricsCsv, plot_curves

CURVES = ("episode_return", "success", "eval_success", "pos_rmse_m")


@dataclasses.dataclass
class TrainResult:
    """What a training call ends with: where, how far, the last evaluation, target reached."""

    run_dir: Path
    env_steps: int
    wall_s: float
    eval: dict[str, float]
    reached_target: bool


class Learner(Protocol):
    """A training library's algorithm and state, one PPO iteration at a time."""

    @property
    def env_steps(self) -> int:
        """Env steps so far."""

    def iterate(self) -> dict[str, float]:
        """One PPO iteration: metrics.csv columns ('loss/<name>', ...), 'episode/<name>' summed over
        the episodes that ended and 'episode/done' their count."""

    def save(self, ckpt_dir: Path) -> None:
        """Write ``ckpt_dir``/step_<env_steps>.<ext> and prune the old ones."""

    def evaluate(self) -> dict[str, float]:
        """Deterministic evaluation of the current policy."""


def episode_means(m: dict[str, float]) -> dict[str, float]:
    """Per-episode means of the 'episode/<name>' sums in ``m``; {} when no episode ended."""
    n = m.get("episode/done", 0.0)
    if n <= 0:
        return {}
    return {k.split("/", 1)[1]: m[k] / n for k in m if k.startswith("episode/") and k != "episode/done"}


def run(run_dir: Path, cfg: Any, learner: Learner, t_start: float, quiet: bool) -> TrainResult:
    """Train until budget, target success or wall-time limit; see module docstring."""
    from tensorboardX import SummaryWriter

    tc = cfg.train
    ckpt_dir = run_dir / "checkpoints"
    metrics_csv = MetricsCsv(run_dir / "metrics.csv")
    metrics_csv.truncate_after(float(learner.env_steps))  # a resumed run rewrites what it repeats
    tb = SummaryWriter(str(run_dir))
    # sys.stderr read now, not Progress's default (bound when progress.py was imported): a caller
    # may have replaced it since (pytest's capture, contextlib.redirect_stderr).
    progress = Progress(tc.num_timesteps, stream=open(os.devnull, "w") if quiet else sys.stderr)
    last_ckpt = time.time()
    next_eval = learner.env_steps + tc.eval_every_steps if tc.eval_every_steps else None
    # A training-success trigger evaluates at most every half eval period: with few episodes
    # ending per iteration, the training success rate reads 1.0 often and eval is not free.
    min_gap = tc.eval_every_steps // 2
    last_eval = -min_gap
    eval_result: dict[str, float] = {}
    reached = False

    def save() -> None:
        learner.save(ckpt_dir)
        metrics_csv.flush()
        plot_curves(metrics_csv, run_dir / "plots" / "learning_curve.png", CURVES, f"{cfg.task} ({run_dir.name})")

    while learner.env_steps < tc.num_timesteps:
        m = learner.iterate()
        steps = learner.env_steps
        ep = episode_means(m)
        row: dict[str, Any] = {"env_steps": steps, "wall_s": time.time() - t_start}
        row.update({k: v for k, v in m.items() if not k.startswith("episode/")})
        row.update({("episode_return" if k == "return" else k): v for k, v in ep.items()})
        due = next_eval is not None and steps >= next_eval
        hit = (tc.target_success > 0 and ep.get("success", 0.0) >= tc.target_success
               and steps - last_eval >= min_gap)
        if due or hit:
            last_eval = steps
            eval_result = learner.evaluate()
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
    if not reached:  # reached implies a fresh evaluation with 'success' in it
        eval_result = learner.evaluate()
        if metrics_csv.rows:
            metrics_csv.rows[-1].update({f"eval_{k}": v for k, v in eval_result.items()})
        reached = tc.target_success > 0 and eval_result.get("success", 0.0) >= tc.target_success
    save()
    tb.close()
    return TrainResult(run_dir=run_dir, env_steps=learner.env_steps, wall_s=time.time() - t_start,
                       eval=eval_result, reached_target=reached)
