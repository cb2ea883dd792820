"""``simreal train``: train a task from its YAML config, with ``key=value`` overrides.

    simreal train quadrotor-hover
    simreal train quadrotor-hover train.num_envs=512 seed=3 backend=mjx
    simreal train --resume runs/quadrotor-hover/20261121-120000
    simreal train --resume RUN_DIR train.num_timesteps=40000000   # extend the budget
    simreal train arm-reach trainer=sb3                            # brax | sb3 | rsl_rl (policies/trainers.py)

Progress (steps/s, return, success, ETA) goes to stderr; the run directory holds
config.yaml, checkpoints/, metrics.csv, TensorBoard events and plots/learning_curve.png.
"""

from __future__ import annotations

import argparse
import json
import time

HELP = "train a policy"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", help="registered task name (see `simreal list`)")
    p.add_argument("overrides", nargs="*", help="config overrides key=value (e.g. train.num_envs=512)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    import shutil
    from pathlib import Path

    from simreal.errors import ConfigError
    from simreal.policies.cmd_eval import format_eval
    from simreal.policies.run_config import resolve
    from simreal.policies.train import load_config, start_run
    from simreal.policies.trainers import get_trainer
    from simreal.yaml_io import dump_yaml

    if args.resume:
        run_dir = Path(args.resume)
        overrides = ([args.task] if args.task else []) + list(args.overrides)
        base = load_config(run_dir)
        cfg = resolve(None, overrides, base=base.to_dict(), source=str(run_dir / "config.yaml"))
        trainer = get_trainer(cfg.trainer)
        dump_yaml(run_dir / "config.yaml", cfg.to_dict())
    else:
        if not args.task:
            raise ConfigError("task", "give a task name (see `simreal list`) or --resume RUN_DIR")
        if "=" in args.task:
            raise ConfigError("task", f"expected a task name before overrides, got {args.task!r}")
        cfg = resolve(args.task, args.overrides)
        trainer = get_trainer(cfg.trainer)  # before the run directory: a missing library leaves none behind
        run_dir = start_run(cfg)
    print(f"run directory: {run_dir}", flush=True)
    try:
        result = trainer.train(run_dir, cfg, resume=bool(args.resume), t_start=t0)
    except BaseException:
        if not args.resume and not any((run_dir / "checkpoints").glob("*")):
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing finished: leave no orphan run directory
        raise
    summary = {"run_dir": str(result.run_dir), "env_steps": result.env_steps, "wall_s": round(result.wall_s, 2),
               "reached_target": result.reached_target, **{f"eval_{k}": v for k, v in result.eval.items()}}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"done: {result.env_steps} env steps in {result.wall_s:.1f} s; eval {format_eval(result.eval)}")
    return 0
