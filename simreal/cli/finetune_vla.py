"""``simreal finetune-vla``: RL fine-tuning of a cloned vision-language-action policy in simulation.

    simreal finetune-vla runs/arm-reach-choice/20261123-231500                # train.vla.rl defaults
    simreal finetune-vla RUN train.vla.rl.iterations=40 train.vla.rl.num_envs=32 --out runs/choice/rl
    simreal eval NEW_RUN && simreal export NEW_RUN                            # as for every run

Starts from the VLA of a ``simreal train-bc --policy vla`` run (or of an earlier fine-tuning)
and writes a new run directory (``runs/<task>/<stamp>`` unless ``--out``): PPO on the action
bins' log-probabilities with the sparse success reward and a critic on the simulator's state
(``simreal/policies/vla/rl.py``; settings ``train.vla.rl.*``). The cloned policy is evaluated before the
first round and the fine-tuned one after the last, on the same episodes, and both are printed.
Progress (round, sampled success, KL, ETA) goes to stderr.
"""

from __future__ import annotations

import argparse

HELP = "fine-tune a VLA run with RL in simulation (PPO, sparse success reward)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run of simreal train-bc --policy vla (or of finetune-vla)")
    p.add_argument("overrides", nargs="*", default=[], help="train.vla.rl.* overrides key=value")
    p.add_argument("--out", default=None, help="run directory to create (default runs/<task>/<stamp>)")


def run(args: argparse.Namespace) -> int:
    import shutil
    import sys
    from pathlib import Path

    from simreal.dependencies import require

    require("torch", "transformers", "tokenizers")  # the [torch,vlm] extras, said before the run loads

    from simreal.config import deep_merge
    from simreal.cpu_threads import limit_torch_threads
    from simreal.errors import ConfigError
    from simreal.policies.evaluation import format_eval
    from simreal.policies.run_config import make_env, resolve
    from simreal.policies.run_dir import RunDir, load_config
    from simreal.policies.vla.model import CHECKPOINT, load_vla
    from simreal.policies.vla.rl import finetune
    from simreal.progress import Progress
    from simreal.stop_signal import interrupt_exit_code, interrupt_signal

    source = Path(args.run_dir)
    base = load_config(source, reward=False)
    if base.trainer != "bc" or base.train.policy != "vla":
        raise ConfigError(
            "run_dir",
            f"{source} is a trainer={base.trainer} run of policy "
            f"{getattr(base.train, 'policy', '-')}; finetune-vla takes a VLA run "
            "(simreal train-bc DATASET --policy vla)",
        )
    for o in args.overrides:
        if not o.startswith("train.vla.rl."):
            raise ConfigError(
                o.split("=", 1)[0],
                "finetune-vla changes train.vla.rl.* only (the env and the policy are the cloned run's)",
            )
    data = deep_merge(base.to_dict(), {"train": {"vla": {"finetuned_from": str(source.resolve())}}})
    cfg = resolve(None, args.overrides, base=data, source=str(source / "config.yaml"))
    limit_torch_threads()
    model, tok = load_vla(source / CHECKPOINT)
    env = make_env(cfg)
    run_dir = RunDir.create(cfg, args.out).path
    print(f"run directory: {run_dir}", flush=True)
    rc = cfg.train.vla.rl
    progress = Progress(rc.iterations, stream=sys.stderr)
    try:  # SIGTERM and SIGHUP arrive as Ctrl-C's KeyboardInterrupt (simreal.cli)
        result = finetune(
            run_dir,
            cfg,
            model,
            tok,
            env,
            lambda it, row: progress.update(it, train_success=row["success_sampled"], kl=row["approx_kl"]),
        )
    except BaseException as e:
        kept = (run_dir / CHECKPOINT).is_file()
        if not kept:  # no round finished: leave no run that eval and export would refuse
            shutil.rmtree(run_dir, ignore_errors=True)
        if isinstance(e, KeyboardInterrupt):
            print(
                f"simreal finetune-vla: stopped by {interrupt_signal(e)}: "
                + (
                    f"{run_dir} keeps the policy of its last finished round and metrics.csv (simreal eval {run_dir})"
                    if kept
                    else "no round finished, nothing kept"
                ),
                file=sys.stderr,
            )
            return interrupt_exit_code(e)
        raise
    progress.close()
    print(f"done: {result.rounds} rounds in {result.wall_s:.1f} s")
    print(f"before ({result.before.get('episodes', 0)} episodes) {format_eval(result.before)}")
    print(f"after  ({result.after.get('episodes', 0)} episodes) {format_eval(result.after)}")
    return 0
