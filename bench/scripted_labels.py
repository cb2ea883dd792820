"""Preference labels without a vision-language model, to try the labelling chain offline: a
scripted teacher (PEBBLE's) answers from the simulator's own reward, over the same
OpenAI-protocol requests, answer cache and cost account ``simreal label`` gives a VLM.

    simreal demos arm-reach --teacher scripted --camera front --image-size 64x64 --episodes 40 --out data/reach_cam
    simreal demos arm-reach --teacher random --camera front --image-size 64x64 --episodes 40 --out data/explore
    simreal frames data/reach_cam data/explore --camera front --every 5 \\
        --task "to move the gripper to the green marker" --out frames.npz
    python bench/scripted_labels.py frames.npz --pairs 500 --out labels.npz   # in place of simreal label --endpoint ...
    simreal fit-reward frames.npz labels.npz --out reward.safetensors

It serves the tests' loopback labeller (``tests/fixtures/oracle_server.py``) on 127.0.0.1 and runs
``simreal label FRAMES --endpoint <it> --model scripted-teacher ...`` (any other ``simreal label``
flag passes through). The teacher prefers the frame whose ``task_reward`` is higher (the
dataset's ``next.reward``, which ``simreal frames`` copies from a ``simreal demos`` dataset), says
-1 for equal ones, and flips ``--noise`` of its answers. It is the simulator's truth, not a
VLM: a reward model fitted on it shows that the chain works, not how well a VLM labels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.oracle_server import OracleServer  # noqa: E402  (the tests' loopback labeller)
from simreal.cli import main as simreal  # noqa: E402
from simreal.rewards.labelling import frame_digest  # noqa: E402

MODEL = "scripted-teacher"  # the cache keys answers by model: these never pass for a VLM's


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("frames", help="simreal frames' npz, with task_reward (frames of a simreal demos dataset)")
    p.add_argument("--noise", type=float, default=0.0, help="share of the teacher's answers flipped (default 0)")
    p.add_argument("--noise-seed", type=int, default=0, help="seed of the flips")
    args, label_args = p.parse_known_args(argv)
    with np.load(args.frames, allow_pickle=False) as z:
        if "task_reward" not in z or z["frames"].ndim != 4:
            print(
                f"scripted_labels: {args.frames} needs (N, H, W, 3) frames and task_reward: the frames of a "
                "simreal demos dataset (simreal frames copies its next.reward)",
                file=sys.stderr,
            )
            return 2
        progress = {frame_digest(f): float(r) for f, r in zip(z["frames"], z["task_reward"])}
    with OracleServer(progress, noise=args.noise, seed=args.noise_seed) as server:
        return simreal(["label", args.frames, "--endpoint", server.url, "--model", MODEL, *label_args])


if __name__ == "__main__":
    sys.exit(main())
