"""The outer training loop shared by every trainer (Brax in ``trainers.brax``, torch in ``trainers.torch_loop``).

A trainer supplies one object (:class:`Learner`) and this loop writes metrics.csv, TensorBoard
events, plots/learning_curve.png, shows progress, evaluates when the training success rate
reaches ``train.target_success``, every ``train.eval_every_steps`` and at the end: the budget
spent or ``train.max_wall_s`` reached, so a run stopped by the clock still says how good its
policy is, but not after a stop signal (the stop rule and its confirming evaluation:
``early_stop``). It checkpoints every
``train.checkpoint_every_s``, and stops on budget, target, wall time or a stop signal
(SIGINT/SIGTERM: ``stop_signal``; the last completed iteration is saved). A resumed run that
already spent its budget or reached its target returns at once (``stop="nothing_left"``).

With ``train.keep_best`` every evaluation that ranks above the best so far (:func:`rank`:
the success rate's 95% lower bound, then the mean return) saves the iteration and keeps it
as the run's best (``checkpoint.keep_best``); a resumed run ranks against the best it kept.
PPO runs drift away from their peak (docs/benchmarks-log.md, the residual over the scripted pick),
and the best evaluation's policy is the one to deploy, as stable-baselines3's
``EvalCallback(best_model_save_path=...)`` keeps it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from simreal.errors import DataFileError
from simreal.policies import checkpoint as ckpt
from simreal.policies.trainers import early_stop
from simreal.progress import PausePlan, Progress
from simreal.rundir import MetricsCsv, plot_curves
from simreal.sim.episode_stats import episode_means
from simreal.stop_signal import stop_on_signals

CURVES = ("episode_return", "success", "eval_success", "pos_rmse_m")
#: metrics.csv's ``success`` is the training episodes' (kept so older runs read the same), shown as
#: ``train_success`` beside the deterministic evaluation's ``eval_success``.
SHOWN = {"success": "train_success"}
#: Why :func:`run` returned: the env-step budget, the stop rule's target, ``train.max_wall_s``,
#: SIGINT/SIGTERM, or (a resumed run) nothing left to do.
STOPS = ("budget", "target", "wall_time", "signal", "nothing_left")


@dataclasses.dataclass
class TrainResult:
    """What a training call ends with: where, how far, the last evaluation, target reached.

    stop: why it ended (one of :data:`STOPS`).
    signum: the signal that stopped it (``stop == "signal"``), else None.
    checkpoint: the checkpoint this call wrote last (the checkpoint folder when the learner's
      ``save`` does not say); None when it wrote none (stopped before its first iteration
      ended, or nothing left to do).
    """

    run_dir: Path
    env_steps: int
    wall_s: float
    eval: dict[str, float]
    reached_target: bool
    stop: str = "budget"
    signum: int | None = None
    checkpoint: Path | None = None


class Learner(Protocol):
    """A training library's algorithm and state, one iteration at a time."""

    @property
    def env_steps(self) -> int:
        """Env steps so far."""

    def iterate(self) -> dict[str, float]:
        """One iteration: metrics.csv columns ('loss/<name>', ...), 'episode/<name>' summed over
        the episodes that ended and 'episode/done' their count."""

    def save(self, ckpt_dir: Path) -> Path | None:
        """Write ``ckpt_dir``/step_<env_steps>.<ext> (``checkpoint.save_pytree`` or the library's
        format, atomically), prune the old ones, and return the file written."""

    def prepare_evaluation(self) -> None:
        """Start, in the background, what the first evaluation would otherwise stop training for
        (the Brax learner compiles its evaluation program); called after the first iteration."""

    def evaluate(
        self, episodes: int | None = None, seed: int | None = None, max_failures: int | None = None
    ) -> dict[str, float]:
        """Deterministic evaluation of the current policy: the first episode of each of
        ``episodes`` envs (None: ``train.num_eval_envs``) from ``seed`` (None: the run's seed + 1),
        the task's episode statistics averaged, plus ``episodes`` (the episodes read). The loop
        passes these only for the stop rule's confirming evaluation (``early_stop``).
        ``max_failures``: the learner may stop once more episodes than this failed (the
        confirmation can no longer pass); its figures are then those of the episodes it ran. A
        learner that runs all its episodes at once ignores it."""


def rank(result: dict[str, float]) -> tuple[float, float]:
    """How ``train.keep_best`` orders evaluations: the success rate's one-sided 95% lower bound
    (``early_stop.with_bound``: it compares a 128-episode periodic evaluation with a 512-episode
    confirming one fairly), then the mean episode return; a missing, None (``best/eval.yaml``'s
    NaN) or NaN figure ranks lowest."""

    def figure(key: str) -> float:
        v = result.get(key)
        return float(v) if v is not None and math.isfinite(v) else -math.inf

    return figure("success_lower"), figure("return")


def _finished_before(metrics_csv: MetricsCsv, env_steps: int, tc: Any) -> dict[str, float] | None:
    """For a resumed run: the evaluation it ended on when nothing is left to do (the budget is
    spent, or the stop rule's target was reached there and the target is unchanged or lower);
    None when training should go on. The verdict is read from metrics.csv's row at the
    checkpoint's env steps, where the loop writes its last evaluation before saving."""
    row = next((r for r in reversed(metrics_csv.rows) if r.get("env_steps") == env_steps), {})
    last_eval = {k[len("eval_") :]: v for k, v in row.items() if k.startswith("eval_")}
    if env_steps > 0 and (env_steps >= tc.num_timesteps or early_stop.reached(last_eval, tc.target_success)):
        return last_eval
    return None


def summary_writer(run_dir: Path, resumed_at: int = 0) -> Any:
    """tensorboardX's ``SummaryWriter`` on ``run_dir``; a run resumed at env step ``resumed_at``
    (> 0) purges the events an earlier command logged from that step on (the iterations after its
    last checkpoint, trained again now), which TensorBoard otherwise draws as a second, overlapping
    curve. Imported without torch when torch is not
    loaded yet: tensorboardX imports torch (where installed) only to name torch tensors in type
    hints, which costs a training run about a second and a few hundred MB; every value this
    loop logs is a float. An ``import torch`` inside tensorboardX meanwhile reads as torch
    missing, which it handles; the entry is removed after, so later imports of torch work."""
    blocked = "torch" not in sys.modules
    if blocked:
        sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError
    try:
        from tensorboardX import SummaryWriter
    finally:
        if blocked:
            del sys.modules["torch"]
    return SummaryWriter(str(run_dir), purge_step=resumed_at or None)


def run(run_dir: Path, cfg: Any, learner: Learner, t_start: float, quiet: bool) -> TrainResult:
    """Train until budget, target, wall-time limit or stop signal; see module docstring."""
    tc = cfg.train
    ckpt_dir = run_dir / "checkpoints"
    metrics_csv = MetricsCsv(run_dir / "metrics.csv")
    start_steps = learner.env_steps
    trained = max((r.get("env_steps", 0) for r in metrics_csv.rows), default=0)
    if start_steps == 0 and trained > 0:  # a resume that found no checkpoint would start over
        raise DataFileError(
            str(ckpt_dir),
            f"no checkpoint, but metrics.csv records {trained:g} env steps of this run; "
            "resuming from step 0 would overwrite them: restore the checkpoints, "
            "or train a new run",
        )
    done = _finished_before(metrics_csv, start_steps, tc)
    if done is not None:
        return TrainResult(
            run_dir=run_dir,
            env_steps=start_steps,
            wall_s=time.time() - t_start,
            eval=done,
            reached_target=early_stop.reached(done, tc.target_success),
            stop="nothing_left",
        )
    metrics_csv.truncate_after(float(start_steps))  # a resumed run rewrites what it repeats
    # wall_s counts the run's training time over every command that trained it
    wall_before = float(metrics_csv.rows[-1].get("wall_s", 0.0)) if metrics_csv.rows else 0.0
    with stop_on_signals() as stop:
        tb = summary_writer(run_dir, int(start_steps))
        last_ckpt = time.time()
        saved_steps, saved = start_steps, None
        # Every evaluation moves the next periodic one on by eval_every_steps; a resumed run counts
        # those its metrics.csv holds, so its schedule is the uninterrupted run's (it once restarted
        # the count at the resume point and evaluated elsewhere).
        evals = [r["env_steps"] for r in metrics_csv.rows if "eval_episodes" in r]
        next_eval = tc.eval_every_steps * (1 + len(evals)) if tc.eval_every_steps else None
        # A training-success trigger evaluates at most every half eval period: with few episodes
        # ending per iteration, the training success rate reads 1.0 often and eval is not free.
        min_gap = tc.eval_every_steps // 2
        last_eval = evals[-1] if evals else -min_gap

        # Evaluation ahead, in episodes, for the ETA: one evaluation at every eval_every_steps and at
        # the end; with a target, one as often as the training success may trigger it (a run meant
        # to reach its target reads it there), each with the stop rule's confirmation. The budget
        # spent that way is the most the run takes: reaching its target sooner ends it sooner.
        confirm = (
            early_stop.CONFIRM_EPISODES
            if 0 < tc.target_success and tc.num_eval_envs < early_stop.CONFIRM_EPISODES
            else 0
        )
        per_eval = tc.num_eval_envs + confirm

        def eval_episodes_left(steps: int) -> int:
            if steps >= tc.num_timesteps:  # the final evaluation, unless the last iteration's was it
                return per_eval * int(last_eval != steps)
            if tc.target_success > 0 and min_gap > 0:  # at most one per min_gap after the last
                n = -(-(tc.num_timesteps - max(steps, last_eval + min_gap)) // min_gap)
            else:
                n = -(-(tc.num_timesteps - next_eval) // tc.eval_every_steps) if next_eval is not None else 0
            return per_eval * (max(n, 0) + 1)

        # sys.stderr read now, not Progress's default (bound when progress.py was imported): a caller
        # may have replaced it since (pytest's capture, contextlib.redirect_stderr). Made just before
        # the first iteration: its time to the first update is the compile the first evaluation's
        # estimate scales.
        progress = Progress(
            tc.num_timesteps,
            stream=open(os.devnull, "w") if quiet else sys.stderr,
            deadline=time.perf_counter() + tc.max_wall_s - (time.time() - t_start) if tc.max_wall_s > 0 else None,
            plan=PausePlan(eval_episodes_left, getattr(getattr(learner, "env", None), "episode_steps", 0)),
        )
        eval_result: dict[str, float] = {}
        reason = "budget"

        def save_metrics() -> None:
            metrics_csv.flush()
            plot_curves(
                metrics_csv, run_dir / "plots" / "learning_curve.png", CURVES, f"{cfg.task} ({run_dir.name})", SHOWN
            )

        def save() -> Path:
            path = learner.save(ckpt_dir)
            save_metrics()
            return path or ckpt_dir

        record = ckpt.best_record(ckpt_dir) if tc.keep_best else None
        best = rank(record["eval"]) if record else (-math.inf, -math.inf)

        def consider(result: dict[str, float]) -> None:
            """Keep this evaluation's policy as the best when it ranks above the best so far."""
            nonlocal best, saved, saved_steps, last_ckpt
            if not tc.keep_best or rank(result) <= best:
                return
            if saved_steps != learner.env_steps or saved is None:
                saved, saved_steps, last_ckpt = save(), learner.env_steps, time.time()
            if saved.is_file():
                ckpt.keep_best(ckpt_dir, saved, result)
                best = rank(result)

        if learner.env_steps < tc.num_timesteps and not stop.requested:
            # the first iteration compiles the rollout and the update (XLA): the status line
            # needs two iterations for a rate, so say why nothing moves meanwhile
            import jax

            progress.message(
                f"compiling the training step for {jax.devices()[0].platform.upper()} (the first "
                "iteration: 5-20 s for the quadrotor on 2 CPU cores, longer on a busy machine or "
                "for a humanoid) ..."
            )
        first = True
        while learner.env_steps < tc.num_timesteps and not stop.requested:
            m = learner.iterate()
            if first:  # the training step is compiled: the evaluation's compile overlaps the next iterations
                learner.prepare_evaluation()
                first = False
            steps = learner.env_steps
            ep = episode_means(m)
            row: dict[str, Any] = {"env_steps": steps, "wall_s": wall_before + time.time() - t_start}
            row.update({k: v for k, v in m.items() if not k.startswith("episode/")})
            row.update({("episode_return" if k == "return" else k): v for k, v in ep.items()})
            due = next_eval is not None and steps >= next_eval
            hit = tc.target_success > 0 and ep.get("success", 0.0) >= tc.target_success and steps - last_eval >= min_gap
            if due or hit:
                last_eval = steps
                with progress.paused() as pause:
                    eval_result = early_stop.evaluate(learner, cfg)
                    # the episodes run: a confirmation's, after the periodic ones it replaced
                    pause.work = int(eval_result.get("episodes", 0)) + tc.num_eval_envs * (
                        "episodes_planned" in eval_result
                    )
                row.update({f"eval_{k}": v for k, v in eval_result.items()})
                if next_eval is not None:
                    next_eval += tc.eval_every_steps
                if early_stop.reached(eval_result, tc.target_success):
                    reason = "target"
            metrics_csv.append(row)
            if due or hit:
                consider(eval_result)  # after the row: its save flushes metrics.csv
            for k, v in row.items():
                if k != "env_steps" and v == v:  # NaN: a statistic no episode defined yet
                    tb.add_scalar(k, v, steps)
            # the training episodes' success (exploration noise on), beside the deterministic evaluation's
            status = {
                "return": row.get("episode_return", float("nan")),
                SHOWN["success"]: ep.get("success", float("nan")),
            }
            if "eval_success" in row:
                status["eval_success"] = row["eval_success"]
            progress.update(steps, force=due or hit, **status)
            if reason == "budget" and tc.max_wall_s > 0 and time.time() - t_start >= tc.max_wall_s:
                reason = "wall_time"
            if reason != "budget":
                break
            if time.time() - last_ckpt >= tc.checkpoint_every_s:
                saved, saved_steps, last_ckpt = save(), steps, time.time()
        progress.close()
        if reason == "budget" and stop.requested:
            reason = "signal"  # no final evaluation: whoever sent it wants the process to end
        finished = reason in ("budget", "wall_time")  # a final evaluation, unless a signal asked to end
        if finished or learner.env_steps > saved_steps:  # before the final evaluation: a kill during it
            saved, saved_steps = save(), learner.env_steps  # (a scheduler's second signal) loses nothing
        if finished and last_eval != learner.env_steps:  # not twice for one policy
            eval_result = early_stop.evaluate(learner, cfg)
            if metrics_csv.rows:
                metrics_csv.rows[-1].update({f"eval_{k}": v for k, v in eval_result.items()})
            save_metrics()
        if finished:
            consider(eval_result)  # the final evaluation (a no-op when the last periodic one was it)
        tb.close()
    return TrainResult(
        run_dir=run_dir,
        env_steps=learner.env_steps,
        wall_s=time.time() - t_start,
        eval=eval_result,
        reached_target=early_stop.reached(eval_result, tc.target_success),
        stop=reason,
        signum=stop.signum if reason == "signal" else None,
        checkpoint=saved,
    )
