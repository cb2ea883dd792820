"""A policy trained on a reward learned from noisy preference labels, against the same policy
trained on the task's hand-written reward (issue 12's target: at least 80% of its success).

    python bench/bench_learned_reward.py                     # arm-reach, 10% label noise, 600k PPO steps each

What a user runs, in this process (``simreal.cli.main``), with the loopback oracle labeller of
the tests standing in for a vision-language model (it answers from the simulator's truth, the
end effector's distance to the goal, each answer flipped with probability ``--noise``)::

    simreal demos arm-reach --teacher scripted --episodes D --camera front --image-size 64x64 --out DIR/demos
    simreal demos arm-reach --teacher random --episodes R --camera front --image-size 64x64 --out DIR/explore
    simreal frames DIR/demos DIR/explore --camera front --every K --out DIR/frames.npz
    simreal label DIR/frames.npz --endpoint ORACLE --model oracle --pairs P --out DIR/labels.npz
    simreal fit-reward DIR/frames.npz DIR/labels.npz --out DIR/reward.safetensors
    simreal train arm-reach train.num_timesteps=S --json                                # hand-written reward
    simreal train arm-reach reward.kind=learned reward.model=DIR/reward.safetensors \\
        reward.task_weight=0 train.num_timesteps=S --json                               # the learned reward alone
    simreal eval RUN_DIR --episodes E --json                                            # each, the task's success

With ``--rounds N``, PEBBLE's idea of labelling where the policy goes, after the learned-reward
run: record that run's policy (``simreal demos arm-reach --teacher RUN``), add its frames, label
``--round-pairs`` more pairs over all frames (pairs already asked come from the cache), refit,
and train a fresh policy on the refitted reward; once per round, each a row of the table.

It prints the fit's report and a markdown table (env steps, wall-clock, success), with the
machine's load average: the development machines are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_bc import _run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.oracle_server import OracleServer  # noqa: E402  (the tests' loopback labeller)
from simreal.rewards.labelling import frame_digest  # noqa: E402


def _json(out: str) -> dict:
    """The JSON document a verb printed with --json (from its first line opening one)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads("\n".join(lines[start:]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=40, help="scripted demonstrations recorded")
    p.add_argument("--random-episodes", type=int, default=40, help="episodes of held random actions (0: none)")
    p.add_argument("--every", type=int, default=4, help="keep every K-th frame")
    p.add_argument("--pairs", type=int, default=2000, help="pairs labelled")
    p.add_argument("--noise", type=float, default=0.1, help="share of the oracle's answers flipped")
    p.add_argument("--timesteps", type=int, default=600_000, help="PPO env-step budget per run (the same for both)")
    p.add_argument("--eval-episodes", type=int, default=256)
    p.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    p.add_argument("--input", choices=("state", "frames"), default="state", help="what the reward model reads")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the demos, the label pairs, the oracle's flips and the policies"
    )
    p.add_argument("--rounds", type=int, default=0, help="rounds of labelling the learned-reward policy's own frames")
    p.add_argument("--round-episodes", type=int, default=40, help="policy episodes recorded per round")
    p.add_argument("--round-pairs", type=int, default=2000, help="pairs added per round")
    args = p.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench_learned_reward_"))
    root.mkdir(parents=True, exist_ok=True)
    demos, frames, labels, model = (root / n for n in ("demos", "frames.npz", "labels.npz", "reward.safetensors"))

    _run(
        [
            "demos",
            "arm-reach",
            "--teacher",
            "scripted",
            "--episodes",
            str(args.episodes),
            "--camera",
            "front",
            "--image-size",
            "64x64",
            "--seed",
            str(args.seed),
            "--out",
            str(demos),
        ]
    )
    sources = [str(demos)]
    if args.random_episodes:
        sources.append(str(root / "explore"))
        _run(
            [
                "demos",
                "arm-reach",
                "--teacher",
                "random",
                "--episodes",
                str(args.random_episodes),
                "--camera",
                "front",
                "--image-size",
                "64x64",
                "--seed",
                str(args.seed),
                "--out",
                sources[-1],
            ]
        )
    fit = _label_and_fit(args, root, sources, frames, labels, model, args.pairs)
    print(json.dumps(fit))

    rows = []
    budget = [
        f"train.num_timesteps={args.timesteps}",
        "train.target_success=0",
        f"runs_root={root / 'runs'}",
        f"seed={args.seed}",
    ]
    for name, extra in (
        ("hand-written (the task's)", []),
        ("learned alone", ["reward.kind=learned", f"reward.model={model}", "reward.task_weight=0"]),
    ):
        rows.append((name, *_train_and_eval(args, budget, extra)))
    for k in range(1, args.rounds + 1):
        sources.append(str(root / f"round{k}"))
        _run(
            [
                "demos",
                "arm-reach",
                "--teacher",
                rows[-1][1]["run_dir"],
                "--episodes",
                str(args.round_episodes),
                "--camera",
                "front",
                "--image-size",
                "64x64",
                "--seed",
                str(args.seed),
                "--out",
                sources[-1],
            ]
        )
        frames, labels, model = (
            root / f"{n}{k}.{e}" for n, e in (("frames", "npz"), ("labels", "npz"), ("reward", "safetensors"))
        )
        fit = _label_and_fit(args, root, sources, frames, labels, model, args.pairs + k * args.round_pairs)
        print(json.dumps(fit))
        extra = ["reward.kind=learned", f"reward.model={model}", "reward.task_weight=0"]
        rows.append(
            (
                f"learned alone, round {k} (+{args.round_episodes} policy episodes)",
                *_train_and_eval(args, budget, extra),
            )
        )
    print(
        f"\n{args.episodes} scripted and {args.random_episodes} random episodes, every {args.every}th frame, "
        f"{args.pairs} pairs (+{args.round_pairs} per round) at {args.noise:.0%} noise, reward model on "
        f"{args.input}\n"
    )
    print("| reward | env steps | wall-clock [s] | eval success | load at start |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, s, ev, load in rows:
        print(
            f"| {name} | {s.get('env_steps')} | {s.get('wall_s', float('nan')):.0f} | "
            f"{ev.get('success', float('nan')):.3f} | {load:.1f} |"
        )
    base = rows[0][2].get("success")
    if base:
        for name, _, ev, _ in rows[1:]:
            print(f"\n{name} / hand-written success: {ev.get('success', 0.0) / base:.2f} (target >= 0.8)")


def _label_and_fit(
    args: argparse.Namespace, root: Path, sources: list[str], frames: Path, labels: Path, model: Path, pairs: int
) -> dict:
    """Frames of ``sources``, ``pairs`` oracle labels over them (the cache answers pairs already
    asked), and the reward model fitted on them; the fit's report."""
    _run(
        [
            "frames",
            *sources,
            "--camera",
            "front",
            "--every",
            str(args.every),
            "--task",
            "to move the gripper to the green marker",
            "--out",
            str(frames),
        ]
    )
    z = np.load(frames, allow_pickle=False)
    progress = -np.linalg.norm(z["state"][:, 3:6] - z["state"][:, :3], axis=1)  # target_pos_w - ee_pos_w
    with OracleServer(
        {frame_digest(f): float(v) for f, v in zip(z["frames"], progress)}, noise=args.noise, seed=args.seed + 1
    ) as server:
        _run(
            [
                "label",
                str(frames),
                "--endpoint",
                server.url,
                "--model",
                "oracle",
                "--pairs",
                str(pairs),
                "--seed",
                str(args.seed),
                "--out",
                str(labels),
                "--cache",
                str(root / "cache"),
            ]
        )
    return _json(_run(["fit-reward", str(frames), str(labels), "--out", str(model), "--input", args.input]))


def _train_and_eval(args: argparse.Namespace, budget: list[str], extra: list[str]) -> tuple[dict, dict, float]:
    """Train arm-reach with ``extra`` overrides, evaluate it: (train summary, eval, load at start)."""
    load = os.getloadavg()[0]
    summary = _json(_run(["train", "arm-reach", *budget, *extra, "--json"]))
    ev = _json(_run(["eval", summary["run_dir"], "--episodes", str(args.eval_episodes), "--json"]))
    return summary, ev[ev["trained_on"]], load


if __name__ == "__main__":
    main()
