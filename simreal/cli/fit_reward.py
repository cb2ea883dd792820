"""``simreal fit-reward``: a Bradley-Terry reward ensemble fitted to ``simreal label``'s preferences.

    simreal fit-reward frames.npz labels.npz --out reward.safetensors
    simreal train arm-reach reward.kind=learned reward.model=reward.safetensors reward.task_weight=0

The frames file is ``simreal frames``'s (or any npz with ``frames`` and, for ``--input
state``, ``state`` and ``state_terms``); the labels file must have been made from these very
frames (its ``frames_sha256``). ``--input state`` (default) fits on the state beside each frame
(the model then records its observation terms, and training rebuilds them from the
simulator); ``--input frames`` fits a small CNN on the pixels (training then renders the camera of the frames
file, ``camera``, at their size).

A random ``--holdout`` share of the labelled pairs is kept out of the fit; the report (one JSON
line) gives the ensemble's agreement with those held-out labels, and, when the frames file has
``task_reward`` (the task's own reward: ``simreal frames`` copies a dataset's ``next.reward``),
the agreement of the labels and of the model with it on held-out pairs, where the rewards differ.
"""

from __future__ import annotations

import argparse
import json

from simreal.config import seed_arg

HELP = "fit a reward model (Bradley-Terry ensemble) to preference labels from simreal label"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("frames", help="frames npz the labels were made from (simreal frames)")
    p.add_argument("labels", help="labels npz (simreal label)")
    p.add_argument("--out", required=True, help="reward model to write (safetensors)")
    p.add_argument(
        "--input",
        choices=("state", "frames"),
        default="state",
        help="what the model reads: the state beside each frame (default), or the frames",
    )
    p.add_argument("--members", type=int, default=3, help="ensemble members")
    p.add_argument("--hidden", type=int, default=64, help="hidden width")
    p.add_argument("--epochs", type=int, default=100, help="passes over the labels")
    p.add_argument("--holdout", type=float, default=0.1, help="share of labelled pairs kept out to score the fit")
    p.add_argument("--unsure", choices=("skip", "tie"), default="skip", help="what a -1 label does")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the split and of the members' initialisation")


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from simreal.cpu_threads import limit_torch_threads
    from simreal.errors import DataFileError, SimrealError
    from simreal.npz import open_npz
    from simreal.progress import Progress
    from simreal.rewards.label_file import load_labels
    from simreal.rewards.labelling import frame_digest
    from simreal.rewards.reward_model import BTEnsemble, RewardModelConfig, agreement, fit, save_reward_model

    if not 0.0 <= args.holdout < 1.0:
        raise SimrealError(f"--holdout {args.holdout}: expected a share in [0, 1)")
    limit_torch_threads()
    from pathlib import Path

    if Path(args.out).resolve() in (Path(args.frames).resolve(), Path(args.labels).resolve()):
        raise SimrealError(f"--out {args.out} is an input of this command; write the model elsewhere")
    for flag in ("members", "hidden", "epochs"):
        if getattr(args, flag) < 1:
            raise SimrealError(f"--{flag} {getattr(args, flag)}: expected an integer >= 1")
    with open_npz(args.frames, "frames file") as z:
        frames = z.array("frames", "(N, H, W, 3) uint8 frames")
        if args.input == "state":
            x = z.floats("state", "(N, d) state features beside the frames (simreal frames writes them)").astype(
                np.float32
            )
            terms = z.strings("state_terms", "the observation terms the state concatenates")
        else:
            x, terms = frames, ()
        camera = z.text("camera", "the camera's name") if args.input == "frames" else ""
        truth = z.floats("task_reward", "(N,) the task's reward at each frame") if "task_reward" in z else None
    labels = load_labels(args.labels)
    if labels.frames_sha256 != frame_digest(frames):
        raise DataFileError(
            args.labels, f"field 'frames_sha256' does not match {args.frames}: the labels were made from other frames"
        )
    for key, rows in (("index_a", labels.index_a), ("index_b", labels.index_b)):
        bad = np.flatnonzero((rows < 0) | (rows >= len(frames)))
        if bad.size:  # a negative row once wrapped to the last frame, one past the end was a traceback
            raise DataFileError(
                args.labels,
                f"field '{key}' holds row {int(rows[bad[0]])} (pair {int(bad[0])}); "
                f"{args.frames} has rows 0..{len(frames) - 1}",
            )
    if args.input == "state" and (x.ndim != 2 or len(x) != len(frames)):
        raise DataFileError(args.frames, f"field 'state' has shape {x.shape}, expected ({len(frames)}, d)")
    n = len(labels.label)
    if n < 2:
        raise DataFileError(args.labels, f"{n} labelled pair(s); fitting needs at least 2")
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(n)
    n_out = int(round(args.holdout * n))
    held, kept = order[:n_out], order[n_out:]
    if len(kept) < 2:
        raise SimrealError(
            f"--holdout {args.holdout:g} holds out {n_out} of the {n} pairs and leaves {len(kept)} "
            "to fit; fitting needs at least 2 (lower --holdout)"
        )
    a, b, y = labels.index_a, labels.index_b, labels.label
    torch.manual_seed(args.seed)
    model = BTEnsemble(
        RewardModelConfig(
            input_shape=tuple(x.shape[1:]),
            members=args.members,
            hidden=args.hidden,
            obs_terms=tuple(terms),
            camera=camera,
        )
    )
    progress = Progress(args.epochs, unit="epochs")
    try:
        losses = fit(
            model,
            x[a[kept]],
            x[b[kept]],
            y[kept],
            epochs=args.epochs,
            unsure=args.unsure,
            seed=args.seed,
            on_epoch=lambda done, loss: progress.update(done, force=done == args.epochs, loss=loss),
        )
    except ValueError as e:
        raise DataFileError(args.labels, str(e)) from None
    finally:
        progress.close()
    save_reward_model(args.out, model)
    report: dict[str, object] = {
        "model": str(args.out),
        "input": args.input,
        "obs_terms": list(terms),
        "pairs_fitted": int(len(kept)),
        "pairs_held_out": int(len(held)),
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4),
    }
    if len(held):
        r, ha, hb = model.reward(x), a[held], b[held]
        report["held_out_agreement_with_labels"] = agreement(r[ha], r[hb], y[held])
        if truth is not None:  # the task's reward as labels: 0, 1, or -1 where it cannot tell
            truth_labels = np.where(truth[ha] > truth[hb], 0, np.where(truth[hb] > truth[ha], 1, -1))
            report["held_out_labels_agreement_with_task_reward"] = agreement(truth[ha], truth[hb], y[held])
            report["held_out_model_agreement_with_task_reward"] = agreement(r[ha], r[hb], truth_labels)
    print(json.dumps(report))
    return 0
