"""``simreal train-bc``: behaviour cloning from a LeRobot dataset of demonstrations.

    simreal train-bc data/reach50                      # task and env from the dataset's meta/simreal.yaml
    simreal train-bc data/reach50 train.policy_hidden=[256,256] train.activation=relu --epochs 100
    simreal train-bc data/reach50 train.act.chunk_size=40 --policy act   # ACT, chunks of 0.8 s at 50 Hz
    simreal train-bc data/reach50 --policy flow train.flow.steps=10      # flow matching, 10 Euler steps
    simreal train-bc data/teleop --task arm-reach      # recorded elsewhere: name the task
    simreal train-bc data/reach50 --out runs/arm-reach/bc-reach50
    simreal train-bc data/mixed --iql reward.safetensors   # offline RL: IQL under a learned reward
    simreal train-bc data/choice --policy vla --epochs 15  # vision-language-action (images + instruction)
    simreal eval RUN_DIR && simreal export RUN_DIR     # as for every run

Writes a run directory (``runs/<task>/<stamp>/`` unless ``--out``) with ``config.yaml``
(``trainer: bc``, ``algorithm: bc``, ``train.dataset``), ``checkpoints/policy.safetensors`` and
``metrics.csv``, then evaluates the policy in simulation (``train.num_eval_envs`` episodes) and
prints the task's statistics. The env is the one the demonstrations were recorded in (the
resolved config ``simreal demos`` keeps in ``meta/simreal.yaml``); ``key=value`` overrides
change it or the ``train.*`` settings (``simreal/policies/bc/cloning.py``: normalisation from the dataset's
``stats.json``, MSE on normalised actions, episodes split into training and validation).
Progress (gradient steps/s, epoch, losses, ETA) goes to stderr; with ``--iql`` in two stages,
``critics 1/2`` then ``actor 2/2``, each line's ETA its own stage's. Ctrl-C or SIGTERM stops it:
the run keeps the checkpoint of its best epoch so far and ``metrics.csv`` (written every
epoch), is not evaluated, and the command exits 130 / 143; a run stopped before its first
epoch is removed.

``--policy`` is ``mlp``, ``act`` (ACT's action chunking transformer, ``simreal/policies/bc/act.py``: it
predicts the next ``train.act.chunk_size`` actions, ensembled over steps in ``simreal eval`` and on
the robot alike; its bundle says so in ``action_chunk``) or ``flow`` (a flow-matching action head
over the same chunks, the diffusion family's, ``simreal/policies/bc/flow.py``; ``train.flow.*``) or ``vla`` (a
vision encoder and a language model with a binned-action head, reading the dataset's camera images
and each episode's instruction, ``simreal/policies/vla/model.py``; ``train.vla.*``; ``simreal finetune-vla`` then
trains it further with RL in simulation).
"""

from __future__ import annotations

import argparse

HELP = "train a policy by behaviour cloning from a dataset"

#: Every --policy (``bc_actor.NETWORKS``).
POLICIES = ("mlp", "act", "flow", "vla")
#: The packages every policy needs (torch; pyarrow reads the dataset), and those one needs beside them.
NEEDS = {"any": ("torch", "pyarrow"), "vla": ("transformers", "tokenizers")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="LeRobot v3 dataset folder (simreal demos writes one)")
    p.add_argument(
        "overrides",
        nargs="*",
        default=[],
        help="config overrides key=value (e.g. train.learning_rate=0.0003; YAML reads 3e-4 as a string)",
    )
    p.add_argument(
        "--policy",
        choices=POLICIES,
        default="mlp",
        help="policy network: an MLP, ACT's chunking transformer, a flow-matching chunk head, or a "
        "vision-language-action model (camera images and the instruction)",
    )
    p.add_argument("--task", default=None, help="the task (default: the one the dataset was recorded in)")
    p.add_argument("--epochs", type=int, default=None, help="passes over the training episodes (train.epochs)")
    p.add_argument("--out", default=None, help="run directory to create (default runs/<task>/<stamp>)")
    p.add_argument(
        "--iql",
        default=None,
        metavar="REWARD_MODEL",
        help="offline RL: IQL's advantage weights under this learned reward (simreal fit-reward) "
        "(train.iql.reward_model)",
    )


def resolve_bc(
    dataset: str, task: str | None, policy: str, epochs: int | None, overrides: list[str], iql: str | None = None
):
    """The BC run's config: the task's defaults, the recorded env (``meta/simreal.yaml``), then
    ``trainer: bc``, ``algorithm: bc``, the ``train`` settings given, then ``overrides``."""
    from pathlib import Path

    from simreal.config import deep_merge
    from simreal.errors import ConfigError, DataFileError
    from simreal.policies.demos.record import SOURCE_FILE, read_source
    from simreal.policies.run_config import resolve, task_yaml
    from simreal.yaml_io import load_yaml

    root = Path(dataset)
    if not (root / "meta" / "info.json").is_file():
        raise DataFileError(str(root), "not a LeRobot dataset (no meta/info.json)")
    source = read_source(root)
    recorded = source["config"] if source else None
    if recorded is None and task is None:
        raise ConfigError("--task", f"{root} has no {SOURCE_FILE} (not recorded by simreal demos): name the task")
    if recorded is not None and task is not None and task != recorded.get("task"):
        raise ConfigError("--task", f"{root} was recorded in {recorded.get('task')}, not {task}")
    if not task:
        assert recorded is not None  # checked above: without --task the dataset names it
        task = recorded["task"]
    path = task_yaml(task)
    base = load_yaml(path) if path.is_file() else {"task": task}
    if recorded is not None:
        base = deep_merge(base, {k: recorded[k] for k in ("robot", "seed", "backend", "env") if k in recorded})
    train = {
        "dataset": str(root.resolve()),
        "policy": policy,
        **({"epochs": epochs} if epochs is not None else {}),
        **({"iql": {"reward_model": str(Path(iql).resolve())}} if iql else {}),
    }
    base = deep_merge(base, {"task": task, "trainer": "bc", "algorithm": "bc", "train": train})
    cfg = resolve(None, overrides, base=base, source=str(root / SOURCE_FILE) if source else str(path))
    recorded_scale = (recorded or {}).get("env", {}).get("action_scale")
    if recorded_scale is not None and recorded_scale != getattr(cfg.env, "action_scale", recorded_scale):
        raise ConfigError(
            "env.action_scale",
            f"{root}'s actions were recorded at env.action_scale={recorded_scale}; "
            f"a policy learned from them at {cfg.env.action_scale} would command "
            f"other motions than the demonstrations (leave it as recorded)",
        )
    return cfg


def run(args: argparse.Namespace) -> int:
    import shutil
    import sys

    from simreal.dependencies import require
    from simreal.errors import ConfigError

    if args.epochs is not None and args.epochs < 1:
        raise ConfigError("--epochs", f"expected an integer >= 1, got {args.epochs}")
    # what the policy needs, checked before anything loads: a VLA without the [vlm] extra once
    # failed after 90 s of loading the dataset
    require(*NEEDS["any"], *NEEDS.get(args.policy, ()))
    from simreal.cpu_threads import limit_torch_threads
    from simreal.policies.bc.actor import CHECKPOINT
    from simreal.policies.bc.cloning import check_dataset, train_bc
    from simreal.policies.evaluation import format_eval
    from simreal.policies.run_dir import RunDir
    from simreal.stop_signal import interrupt_exit_code, interrupt_signal

    limit_torch_threads()
    cfg = resolve_bc(args.dataset, args.task, args.policy, args.epochs, args.overrides, args.iql)
    env = check_dataset(cfg)  # before the run directory: a dataset that does not fit leaves none behind
    run_dir = RunDir.create(cfg, args.out).path
    print(f"run directory: {run_dir}", flush=True)
    try:  # SIGTERM and SIGHUP arrive as Ctrl-C's KeyboardInterrupt (simreal.cli), between torch operations
        result = train_bc(run_dir, cfg, env=env)
    except BaseException as e:
        kept = (run_dir / CHECKPOINT).is_file()  # the VLA's checkpoint has the same name
        if not kept:  # nothing trained: leave no empty run behind
            shutil.rmtree(run_dir, ignore_errors=True)
        if isinstance(e, KeyboardInterrupt):
            print(
                f"simreal train-bc: stopped by {interrupt_signal(e)}: "
                + (
                    f"{run_dir} keeps the checkpoint of its best epoch so far and metrics.csv (not evaluated: "
                    f"simreal eval {run_dir}; a BC run does not resume: train-bc again for more epochs)"
                    if kept
                    else "no epoch finished, nothing kept"
                ),
                file=sys.stderr,
            )
            return interrupt_exit_code(e)
        raise
    f = result.fit
    print(
        f"done: {cfg.train.epochs} epochs ({f.gradient_steps} gradient steps) in {result.wall_s:.1f} s; kept epoch "
        f"{f.best_epoch} (loss train {f.train_loss:.4g}, val {f.val_loss:.4g})"
    )
    print(f"eval ({result.eval['episodes']} episodes) {format_eval(result.eval)}")
    return 0
