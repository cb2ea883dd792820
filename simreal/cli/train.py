"""``simreal train``: train a task from its YAML config, with ``key=value`` overrides.

    simreal train quadrotor-hover
    simreal train quadrotor-hover train.num_envs=512 seed=3 backend=mjx
    simreal train --resume runs/quadrotor-hover/20261121-120000
    simreal train --resume RUN_DIR train.num_timesteps=40000000   # extend the budget
    simreal train arm-reach trainer=sb3                            # brax | sb3 | rsl_rl (simreal.policies.trainers)

Progress (steps/s, return, train_success, eval_success, ETA) goes to stderr; the run directory holds
config.yaml, checkpoints/, metrics.csv, TensorBoard events and plots/learning_curve.png.

Ctrl-C (SIGINT) or SIGTERM stops after the current iteration: its checkpoint is saved and
the command exits 130 / 143; a second signal stops at once without saving. A new run stopped
before its first iteration finished has nothing to save and its directory is removed.
``--resume`` says on stderr which checkpoint it continues from; a run with no checkpoint yet
starts from step 0 in its directory (said too); a run that spent its budget or reached its
target says nothing is left to do and exits 0, its ``config.yaml`` left as it was.

A resumed run keeps what its checkpoint is shaped by (``trainers.RESUME_KEEPS``: the task, robot,
trainer, algorithm, network sizes, and each trainer row's ``resume_keeps``: for ``trainer=brax``
the env count and SAC's replay size, for ``trainer=residual`` the env count and the residual's
base and scale, for ``trainer=rsl_rl`` the estimator's terms and sizes): an override
of one is refused, naming the key, before anything is written. Any other resume that fails
before its first new checkpoint (an env setting that changes the observation size) leaves
``config.yaml`` as it was, so eval, export and a plain ``--resume`` still match the checkpoints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simreal.policies.run_config import RunConfig
    from simreal.policies.trainers.loop import TrainResult
    from simreal.stop_signal import StopRequest

HELP = "train a policy"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", help="registered task name (see `simreal list`)")
    p.add_argument("overrides", nargs="*", default=[], help="config overrides key=value (e.g. train.num_envs=512)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    from simreal.stop_signal import stop_on_signals

    # Open from the start: a signal during imports, config or the first compile is kept for
    # the loop (which then saves nothing: no iteration finished) instead of a traceback.
    with stop_on_signals() as stop:
        return _train(args, t0, stop)


def _train(args: argparse.Namespace, t0: float, stop: StopRequest) -> int:
    from simreal.config import parse_overrides
    from simreal.errors import ConfigError, DataFileError
    from simreal.policies.devices import initialize_distributed
    from simreal.policies.evaluation import jsonable
    from simreal.policies.run_config import check_input_files, make_env, resolve
    from simreal.policies.run_dir import RunDir
    from simreal.policies.trainers import get_trainer

    initialize_distributed()  # a multi-host launch (SLURM, JAX_COORDINATOR_ADDRESS); else nothing

    overrides = ([args.task] if args.task else []) + list(args.overrides)
    env = None  # a resume's env is built by the trainer, once it knows the checkpoint
    if args.resume:
        run = RunDir.open(args.resume)
        base = run.config()
        source = str(run.path / "config.yaml")
        task = parse_overrides(overrides).get("task", base.task)  # before resolving: another
        if task != base.task:  # task's keys would be the error
            raise ConfigError("task", f"a resumed run keeps its task ({base.task}); start a new run for {task}", source)
        cfg = resolve(None, overrides, base=base.to_dict(), source=source)
        if run.checkpoints():
            _check_resume(base, cfg, f"{source} + command-line overrides")
        trainer = get_trainer(cfg.trainer)
        run.save_config(cfg)  # a clip the overrides name is copied in too
    else:
        if not args.task:
            raise ConfigError("task", "give a task name (see `simreal list`) or --resume RUN_DIR")
        if "=" in args.task:
            raise ConfigError("task", f"expected a task name before overrides, got {args.task!r}")
        cfg = resolve(args.task, args.overrides)
        check_input_files(cfg)  # before the run directory, as the library check below
        trainer = get_trainer(cfg.trainer)  # before the run directory: a missing library leaves none behind
        env = make_env(cfg)  # the env's own checks (a clip's reach, ...), as above; the trainer takes it
        trainer.prepare(cfg, env)  # and the trainer's (devices, estimator terms, a residual's base, ...)
        if stop.requested:
            print(f"simreal train: stopped by {stop.name} before the run started: nothing done", file=sys.stderr)
            return stop.exit_code
        run = RunDir.create(cfg)
    run_dir = run.path
    # with --json, stdout carries the one JSON object (it names the run directory too)
    print(f"run directory: {run_dir}", file=sys.stderr if args.json else sys.stdout, flush=True)

    try:
        result = trainer.train(run_dir, cfg, resume=bool(args.resume), t_start=t0, env=env)
    except DataFileError as e:
        run.discard_if_empty()
        if run.restore_config() and overrides:
            raise DataFileError(
                e.path,
                f"{str(e).removeprefix(f'{e.path}: ')}, resumed with the overrides "
                f"{' '.join(overrides)}; {run_dir / 'config.yaml'} is left as it was",
            ) from None
        raise
    except BaseException:
        run.discard_if_empty()
        run.restore_config()
        raise
    summary = {
        "run_dir": str(result.run_dir),
        "env_steps": result.env_steps,
        "wall_s": round(result.wall_s, 2),
        "reached_target": result.reached_target,
        "stop": result.stop,
        **{f"eval_{k}": v for k, v in result.eval.items()},
    }
    best = _best(run_dir, cfg)
    if best is not None:
        summary.update({"best_env_steps": best["env_steps"], **{f"best_eval_{k}": v for k, v in best["eval"].items()}})
    if result.stop == "signal":
        removed = run.discard_if_empty()
        print(f"simreal train: {_interrupted(result, stop, removed)}", file=sys.stderr)
    elif result.stop == "nothing_left":
        run.restore_config()  # the overrides trained nothing: config.yaml still describes the checkpoints
        print(f"simreal train: {_summary(result, cfg)}", file=sys.stderr)
    elif not args.json:
        print(_summary(result, cfg, best))
    if args.json:
        print(json.dumps(jsonable(summary)))
    return stop.exit_code if result.stop == "signal" else 0


def _check_resume(base: RunConfig, cfg: RunConfig, source: str) -> None:
    """ConfigError naming the first ``RESUME_KEEPS`` or trainer ``resume_keeps`` setting that
    ``cfg`` (the saved config plus the overrides) changes from ``base`` (the config the
    checkpoints were made with)."""
    from simreal.errors import ConfigError
    from simreal.policies.trainers import RESUME_KEEPS, TRAINERS

    for key in RESUME_KEEPS + TRAINERS[base.trainer].resume_keeps:
        was, now = _setting(base, key), _setting(cfg, key)
        if was == now:
            continue
        if key == "train.num_envs":
            why = (
                f"the checkpoint has {was} envs, the overrides ask for {now}; a resumed run keeps num_envs "
                "(and the network sizes)"
            )
        else:
            why = (
                f"the checkpoint was made with {key.rsplit('.', 1)[-1]} {_shown(was)}, the overrides ask for "
                f"{_shown(now)}; a resumed run keeps what its checkpoint is shaped by"
            )
        raise ConfigError(key, f"{why}: start a new run to change it", source)


def _setting(cfg: RunConfig, key: str) -> object:
    """The value of dotted ``key`` in ``cfg`` (None where the algorithm has no such setting)."""
    value: object = cfg
    for part in key.split("."):
        value = getattr(value, part, None)
    return value


def _shown(value: object) -> str:
    """A setting as the user writes it in an override (tuples as lists)."""
    return str(list(value)) if isinstance(value, tuple) else str(value)


def _interrupted(result: TrainResult, stop: StopRequest, removed: bool) -> str:
    """What a stop signal left behind, and how to go on."""
    if result.checkpoint is not None:
        return (
            f"stopped by {stop.name} at {result.env_steps} env steps; checkpoint {result.checkpoint}; "
            f"continue with: simreal train --resume {result.run_dir}"
        )
    if removed:
        return f"stopped by {stop.name} before the first iteration finished: nothing saved, run directory removed"
    return (
        f"stopped by {stop.name} before an iteration finished: nothing new saved "
        f"(the run stays at {result.env_steps} env steps)"
    )


def _best(run_dir: Path, cfg: RunConfig) -> dict | None:
    """The kept best evaluation (``checkpoint.best_record``) of a ``train.keep_best`` run, else None."""
    from simreal.policies import checkpoint as ckpt

    return ckpt.best_record(run_dir / "checkpoints") if cfg.train.keep_best else None


def _summary(result: TrainResult, cfg: RunConfig, best: dict | None = None) -> str:
    """The last lines: why training stopped (with the stop rule's verdict), the evaluation, and
    ``best`` (:func:`_best`) when one was kept."""
    from simreal.policies.evaluation import format_eval
    from simreal.policies.trainers import early_stop

    tc = cfg.train
    verdict = early_stop.describe(result.eval, tc.target_success)
    if result.stop == "nothing_left":
        if result.reached_target:
            return (
                f"nothing left to do: the run reached its target at {result.env_steps} env steps ({verdict}); "
                "to train on, raise train.target_success (0: train to the budget)"
            )
        return (
            f"nothing left to do: {result.env_steps} env steps done of the budget of {tc.num_timesteps}; "
            "to train on, raise train.num_timesteps"
        )
    why = {
        "target": "target reached",
        "budget": f"budget of {tc.num_timesteps} env steps spent",
        "wall_time": f"train.max_wall_s ({tc.max_wall_s:g} s) reached",
    }[result.stop]
    lines = [
        f"done: {result.env_steps} env steps in {result.wall_s:.1f} s, {why}" + (f"; {verdict}" if verdict else "")
    ]
    if result.eval:
        lines.append(f"eval {format_eval(result.eval)}")
    if best is not None:
        lines.append(
            f"best (the run's policy for eval, export and play): {best['env_steps']} env steps, "
            f"eval {format_eval({k: v for k, v in best['eval'].items() if v is not None})}"
        )
    return "\n".join(lines)
