"""An evaluation of a trained run, and its result as text and JSON.

Every trainer's runs (brax, sb3, rsl_rl) are evaluated the same way: the deterministic policy's
first episode in each env, each of the task's episode statistics averaged over the episodes it
is defined for (:mod:`simreal.sim.episode_stats`); a statistic no episode contributed to is NaN,
printed as ``-`` and written to JSON as ``null``, never as 0. ``simreal eval``, ``simreal train``
(its closing evaluation), ``train-bc`` and ``finetune-vla`` print results with these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simreal.policies.run_config import RunConfig

#: The seed of an evaluation's envs: the run's seed plus this, so it never replays training's.
EVAL_SEED_OFFSET = 12345


def evaluate_run(run_dir: Path, cfg: RunConfig, backend: str, episodes: int | None, randomize: bool) -> dict[str, Any]:
    """The run's latest policy on ``backend``: its trainer's evaluation (first episode of each
    of ``episodes`` envs, default ``eval.episodes``) plus the backend's name."""
    from simreal.policies.trainers import get_trainer

    n = cfg.eval.episodes if episodes is None else episodes
    r: dict[str, Any] = get_trainer(cfg.trainer).evaluate(
        run_dir, cfg, n, seed=cfg.seed + EVAL_SEED_OFFSET, backend=backend, randomize=randomize
    )
    r["backend"] = backend
    return r


def evaluated_checkpoint(run_dir: Path, cfg: RunConfig) -> dict[str, Any]:
    """Which checkpoint the run's evaluation reads: ``checkpoint`` (relative to ``run_dir``),
    ``env_steps`` (None for a file without steps in its name), and ``skipped``: the newer
    ``step_*`` checkpoints passed over as damaged (``checkpoint.damage``)."""
    from simreal.policies import checkpoint as ckpt
    from simreal.policies.trainers import get_trainer

    path = get_trainer(cfg.trainer).policy_checkpoint(run_dir, cfg)
    steps = _steps(path)
    newer = (
        []
        if steps is None
        else sorted(  # a step is damaged where any of its files is (side files too)
            f
            for f in (run_dir / "checkpoints").glob(f"step_*{path.suffix}")
            if (_steps(f) or -1) > steps
            and any(ckpt.damage(g) is not None for g in f.parent.glob(f"step_{_steps(f):012d}.*"))
        )
    )
    return {
        "checkpoint": str(path.relative_to(run_dir)),
        "env_steps": steps,
        "skipped": [str(f.relative_to(run_dir)) for f in newer],
    }


def _steps(path: Path) -> int | None:
    """The env steps in a ``step_<env_steps>.*`` name; None for another name."""
    from simreal.errors import DataFileError
    from simreal.policies import checkpoint as ckpt

    try:
        return ckpt.checkpoint_steps(path)
    except DataFileError:
        return None


def number_text(v: float, fmt: str = ".4g") -> str:
    """``v`` formatted, or ``-`` for NaN (a mean over no episode)."""
    return "-" if math.isnan(v) else format(v, fmt)


def statistics(r: Mapping[str, Any]) -> dict[str, float]:
    """The episode statistics in an evaluation result: ``success`` (and its bound) first, the
    task's own next, ``return`` and ``length`` (every task's) last."""
    stats = {
        k: float(v)
        for k, v in r.items()
        if k not in ("episodes", "backend") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    rank = {"return": 2, "length": 3}
    return dict(sorted(stats.items(), key=lambda kv: 0 if kv[0].startswith("success") else rank.get(kv[0], 1)))


def format_eval(r: Mapping[str, Any]) -> str:
    """The task's own episode statistics as one line (``success 0.953  crash 0.039  pos_rmse_m
    0.032  return 41.2  length 400 steps``): whatever the task's ``final_stats`` reports, so a
    humanoid shows its fall rate and velocity error, a quadrotor its crash rate and position RMSE;
    NaN (nothing to average) as ``-``. ``length`` is in control steps (``steps``)."""
    return "  ".join(f"{k} {number_text(v)}" + (" steps" if k == "length" else "") for k, v in statistics(r).items())


def jsonable(x: Any) -> Any:
    """``x`` with every NaN float replaced by None (``null``): JSON has no NaN."""
    if isinstance(x, Mapping):
        return {k: jsonable(v) for k, v in x.items()}
    return None if isinstance(x, float) and math.isnan(x) else x
