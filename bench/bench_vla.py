"""The tiny VLA on the three-instruction task: demos -> BC -> RL fine-tuning, success at each stage.

    python bench/bench_vla.py                                     # 600 + 300 demos, 10 epochs, 10 RL rounds
    python bench/bench_vla.py --episodes 60 --epochs 5 --rounds 2 --eval-episodes 32   # a quick look
    python bench/bench_vla.py --skip-to-rl DIR/bc                 # RL from an existing BC run

The commands a user runs, in this process (``simreal.cli.main``)::

    simreal demos arm-reach-choice env.episode_length_s=L --teacher scripted --episodes N --camera front --out DIR/demos
    simreal demos arm-reach-choice env.episode_length_s=L --teacher scripted --drive random --episodes M \
        --camera front --append --out DIR/demos        # the teacher labels states a random driver visits
    simreal train-bc DIR/demos --policy vla --epochs K --out DIR/bc     # the task's algorithms.bc: lr 3e-4, no state
    simreal finetune-vla DIR/bc train.vla.rl.iterations=R --out DIR/rl

Both policies are then evaluated on the same ``E`` episodes (the deployed, most-likely-bin
action; domain randomisation on, seeds other than the recording's): success overall and per
instruction, and success when told the wrong ball (each episode's instruction names the next
colour; the task still judges the named goal): a policy that follows the words fails those,
one that ignores them does not. The randomly driven episodes are there because the scripted
ones alone teach a copycat: after its first steps the teacher's arm is already moving toward the
goal, so the joints tell which ball, and a cloned policy learns to continue whatever motion it
is in instead of reading the words (measured: success equal with the right and the wrong
instruction); for the same reason the task's BC settings feed the VLA images and words only
(``train.vla.use_state: false``). The table is markdown, with the wall-clock of every stage and the machine's load
average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from simreal.cli import main as simreal


def evaluate(run: Path, episodes: int, seed: int) -> dict[str, float]:
    """Success overall, per instruction, and under the wrong instruction, of a VLA run."""
    from simreal.policies.run_config import make_env
    from simreal.policies.run_dir import load_config
    from simreal.policies.vla.instructions import instruction
    from simreal.policies.vla.model import CHECKPOINT, load_vla
    from simreal.policies.vla.rollout import rollout
    from simreal.sim.tasks.arm_reach_choice import BALLS

    cfg = load_config(run, reward=False)
    env = make_env(cfg)
    model, tok = load_vla(run / CHECKPOINT)
    right = rollout(env, cfg.task, model, tok, episodes, seed, sample=False)
    colours = list(BALLS)

    def wrong(task: str, info) -> str:
        return instruction(task, {**info, "goal_index": np.asarray((int(info["goal_index"]) + 1) % len(colours))})

    misled = rollout(env, cfg.task, model, tok, episodes, seed, sample=False, say=wrong)
    out = {
        "success": float(np.nanmean(right.success)),
        "final_distance_m": right.stats.get("final_distance_m"),
        "success_told_wrong_ball": float(np.nanmean(misled.success)),
    }
    for c in colours:
        mine = [s for s, w in zip(right.success, right.sentences) if f" {c} " in f" {w} "]
        out[f"success_{c}"] = float(np.nanmean(mine)) if mine else float("nan")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=600)
    p.add_argument("--random-driven", type=int, default=300, help="more episodes, a random driver acting")
    p.add_argument("--episode-length", type=float, default=1.0, help="recorded episodes' length [s]")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--rounds", type=int, default=10, help="RL fine-tuning rounds")
    p.add_argument("--rl-envs", type=int, default=16)
    p.add_argument("--eval-episodes", type=int, default=96)
    p.add_argument("--skip-to-rl", default=None, metavar="BC_RUN", help="fine-tune this BC run instead of recording")
    p.add_argument("--out", default=None, help="folder for the dataset and runs (default: a temporary one)")
    a = p.parse_args()
    root = Path(a.out or tempfile.mkdtemp(prefix="bench_vla_"))
    wall: dict[str, float] = {}
    if a.skip_to_rl:
        bc = Path(a.skip_to_rl)
    else:
        t = time.time()
        assert (
            simreal(
                [
                    "demos",
                    "arm-reach-choice",
                    f"env.episode_length_s={a.episode_length}",
                    "--teacher",
                    "scripted",
                    "--episodes",
                    str(a.episodes),
                    "--camera",
                    "front",
                    "--out",
                    str(root / "demos"),
                ]
            )
            == 0
        )
        if a.random_driven:
            assert (
                simreal(
                    [
                        "demos",
                        "arm-reach-choice",
                        f"env.episode_length_s={a.episode_length}",
                        "--teacher",
                        "scripted",
                        "--drive",
                        "random",
                        "--episodes",
                        str(a.random_driven),
                        "--seed",
                        "5",
                        "--camera",
                        "front",
                        "--append",
                        "--out",
                        str(root / "demos"),
                    ]
                )
                == 0
            )
        wall["record_s"] = time.time() - t
        t = time.time()
        bc = root / "bc"
        assert (
            simreal(
                [
                    "train-bc",
                    str(root / "demos"),
                    "train.num_eval_envs=16",
                    "--policy",
                    "vla",
                    "--epochs",
                    str(a.epochs),
                    "--out",
                    str(bc),
                ]
            )
            == 0
        )
        wall["bc_s"] = time.time() - t
    t = time.time()
    rl = root / "rl"
    assert (
        simreal(
            [
                "finetune-vla",
                str(bc),
                f"train.vla.rl.iterations={a.rounds}",
                f"train.vla.rl.num_envs={a.rl_envs}",
                "train.vla.rl.eval_episodes=16",
                "--out",
                str(rl),
            ]
        )
        == 0
    )
    wall["rl_s"] = time.time() - t
    rows = {"BC": evaluate(bc, a.eval_episodes, seed=7), "BC + RL": evaluate(rl, a.eval_episodes, seed=7)}
    load = os.getloadavg()
    print(
        f"\n{platform.node()}, {os.cpu_count()} CPUs, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{a.episodes} + {a.random_driven} randomly driven demos x {a.episode_length} s, {a.epochs} epochs, "
        f"{a.rounds} RL rounds x {a.rl_envs} envs; "
        f"{a.eval_episodes} eval episodes"
    )
    cols = ["success", "success_red", "success_green", "success_blue", "success_told_wrong_ball", "final_distance_m"]
    print("| policy | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols))
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(f"{r[c]:.3f}" for c in cols) + " |")
    print("wall-clock: " + ", ".join(f"{k} {v:.0f}" for k, v in wall.items()))
    (root / "bench_vla.json").write_text(json.dumps({"rows": rows, "wall": wall, "args": vars(a)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
