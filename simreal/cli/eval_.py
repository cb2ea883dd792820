"""``simreal eval``: the task's own episode statistics under domain randomisation.

    simreal eval runs/quadrotor-hover/20261121-120000
    simreal eval RUN_DIR --episodes 512 --backend mjx --json

Every trainer's runs (brax, sb3, rsl_rl) are evaluated the same way: the deterministic
policy's first episode in each env, each of the task's episode statistics averaged over the
episodes it is defined for (a quadrotor's success and crash rates over all, its position RMSE
over those that did not crash: :mod:`simreal.sim.episode_stats`). A statistic no episode
contributed to prints as ``-`` (``null`` in ``--json``), never as 0.

Evaluating on the other backend than training used is the sim-to-sim gate: both are run,
the gap is printed, and the command exits with 1 when success drops by more than the task
config's ``eval.sim_to_sim_max_gap``.

The result names the checkpoint evaluated (``checkpoint``, relative to the run, and its
``env_steps``; a BC run's one file has none): the newest intact one, or with ``train.keep_best``
the best evaluation's. A newer checkpoint that is damaged is skipped with a warning, and listed
in ``skipped``, so a JSON reader sees that an older step was evaluated.

Ctrl-C or SIGTERM is acted on when the rollout under way ends (it is one XLA program); the
command then exits 130 / 143 with no result.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HELP = "evaluate a trained run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument("--episodes", type=int, default=None, help="episodes, >= 1 (default: eval.episodes of the run)")
    p.add_argument(
        "--backend",
        choices=("native", "mjx", "mjx-warp", "rigid"),
        default=None,
        help="physics backend; when it differs from training's, both are run and the gap printed",
    )
    p.add_argument("--no-randomize", action="store_true", help="evaluate without domain randomisation")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    import sys

    from simreal.errors import SimrealError
    from simreal.policies.evaluation import (
        evaluate_run,
        evaluated_checkpoint,
        format_eval,
        jsonable,
        number_text,
        statistics,
    )
    from simreal.policies.run_dir import load_config
    from simreal.sim.backends.base import default_backend_name
    from simreal.stop_signal import stop_on_signals

    if args.episodes is not None and args.episodes < 1:  # before anything loads: 0 is no default
        raise SimrealError(f"--episodes: expected an integer >= 1, got {args.episodes}")
    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir, reward=False)
    trained_on = cfg.backend if cfg.backend != "auto" else default_backend_name()
    randomize = not args.no_randomize and cfg.eval.randomize
    results: dict[str, Any] = {"trained_on": trained_on}
    target = args.backend or trained_on
    # a rollout is one XLA program: a signal cannot cut it short (raised inside it, it would be a
    # traceback from the physics callback), so it is recorded, said, and acted on when it ends
    with stop_on_signals("stopping when the rollout under way ends (one XLA program)") as stop:
        results[target] = evaluate_run(run_dir, cfg, target, args.episodes, randomize)
        if target != trained_on and not stop.requested:
            results[trained_on] = evaluate_run(run_dir, cfg, trained_on, args.episodes, randomize)
    if stop.requested:
        print(f"simreal eval: stopped by {stop.name}; no result", file=sys.stderr)
        return stop.exit_code
    results.update(evaluated_checkpoint(run_dir, cfg))  # the file the evaluation read (its warnings said why)
    if target != trained_on:
        base = statistics(results[trained_on])
        results["gap"] = {k: v - base[k] for k, v in statistics(results[target]).items() if k in base}
        results["sim_to_sim_passed"] = -results["gap"].get("success", 0.0) <= cfg.eval.sim_to_sim_max_gap
    status = 0 if results.get("sim_to_sim_passed", True) else 1
    if args.json:
        print(json.dumps(jsonable(results), indent=2))
        return status
    steps = f" ({results['env_steps']} env steps)" if results["env_steps"] is not None else ""
    print(
        f"checkpoint {results['checkpoint']}{steps}"
        + (f"; newer, damaged, skipped: {', '.join(results['skipped'])}" if results["skipped"] else "")
    )
    for name in (trained_on, target) if target != trained_on else (target,):
        r = results[name]
        print(f"[{name}] episodes {r['episodes']}: {format_eval(r)}")
    if "gap" in results:
        g = results["gap"]
        print(
            f"sim-to-sim gap ({target} - {trained_on}): "
            + "  ".join(f"{k} {number_text(v, '+.4f')}" for k, v in g.items())
        )
        verdict = "PASS" if results["sim_to_sim_passed"] else "FAIL"
        print(f"sim-to-sim gate: {verdict} (success may drop by at most {cfg.eval.sim_to_sim_max_gap:g})")
    return status
