"""Behaviour cloning from scripted demonstrations: demos -> train-bc -> eval, per arm task.

    python bench/bench_bc.py                                  # 50 demos, arm-reach, arm-push and arm-pick
    python bench/bench_bc.py --episodes 20 --epochs 50 --eval-episodes 64 --cases arm-reach
    python bench/bench_bc.py --policy act --epochs 30 --cases arm-reach  # ACT's chunking transformer
    python bench/bench_bc.py --policy flow --epochs 100              # the flow-matching chunk head
    python bench/bench_bc.py --cases arm-push --dagger 3              # + 3 DAgger rounds of 50 episodes

Each case runs the three commands a user runs, in this process (``simreal.cli.main``)::

    simreal demos TASK OVERRIDES --teacher scripted --episodes N --out DIR/TASK-demos
    simreal train-bc DIR/TASK-demos train.num_eval_envs=16 --policy P --epochs K --out DIR/TASK-bc
    simreal eval DIR/TASK-bc --episodes E --json

and prints a markdown table: the scripted teacher's success over the recorded episodes, the BC
policy's success and final distance over ``E`` evaluation episodes (``simreal eval``: domain
randomisation on, seeds other than the recording's), and the wall-clock of recording and
training. ``arm-push`` runs with ``env.action_scale=1.5``: at the task's default 0.3 rad around
the home pose the Franka's fingertips stay above z = 0.27 m and cannot touch the cube (z < 0.05 m).
The machine's load average is printed with the table (the development machines are shared).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from simreal.cli import main as simreal
from simreal.policies.bc.actor import NETWORKS
from simreal.yaml_io import load_yaml

#: case name -> (task, config overrides)
CASES: dict[str, tuple[str, list[str]]] = {
    "arm-reach": ("arm-reach", []),
    "arm-push": ("arm-push", ["env.action_scale=1.5"]),
    "arm-pick": ("arm-pick", []),
}


def _run(argv: list[str]) -> str:
    """``simreal ARGV`` in this process; its stdout (SystemExit or a nonzero exit raises)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = simreal(argv)
    if code != 0:
        raise SystemExit(f"simreal {' '.join(argv)} exited with {code}")
    return out.getvalue()


def bench_case(
    name: str,
    root: Path,
    episodes: int,
    epochs: int,
    eval_episodes: int,
    seed: int,
    policy: str = "mlp",
    dagger: int = 0,
) -> list[dict]:
    """Rows of one case: record ``episodes`` scripted demos, train BC (``--policy policy``) for
    ``epochs``, evaluate it; then ``dagger`` rounds of DAgger, each recording ``episodes`` more with
    the last BC run driving and the teacher labelling (``demos --drive RUN --append``), training a
    new BC run on the whole dataset and evaluating it."""
    task, overrides = CASES[name]
    demos = root / f"{name}-demos"
    t = time.perf_counter()
    _run(
        [
            "demos",
            task,
            *overrides,
            "--teacher",
            "scripted",
            "--episodes",
            str(episodes),
            "--seed",
            str(seed),
            "--out",
            str(demos),
        ]
    )
    demo_s = time.perf_counter() - t
    teacher = load_yaml(demos / "meta" / "simreal.yaml")["teacher_success"]
    rows = []
    for k in range(dagger + 1):
        run_dir = root / f"{name}-bc{k}"
        if k:
            t = time.perf_counter()
            _run(
                [
                    "demos",
                    task,
                    *overrides,
                    "--teacher",
                    "scripted",
                    "--drive",
                    str(root / f"{name}-bc{k - 1}"),
                    "--episodes",
                    str(episodes),
                    "--seed",
                    str(seed + k),
                    "--append",
                    "--out",
                    str(demos),
                ]
            )
            demo_s = time.perf_counter() - t
        t = time.perf_counter()
        # train-bc's own evaluation kept small: simreal eval below is the figure reported
        _run(
            [
                "train-bc",
                str(demos),
                "train.num_eval_envs=16",
                "--policy",
                policy,
                "--epochs",
                str(epochs),
                "--out",
                str(run_dir),
            ]
        )
        train_s = time.perf_counter() - t
        result = json.loads(_run(["eval", str(run_dir), "--episodes", str(eval_episodes), "--json"]))
        ev = result[result["trained_on"]]
        rows.append(
            {
                "case": name,
                "policy": policy,
                "overrides": " ".join(overrides) or "-",
                "round": k,
                "demos": episodes * (k + 1),
                "teacher": teacher["succeeded"] / teacher["episodes"],
                "demo_s": demo_s,
                "epochs": epochs,
                "train_s": train_s,
                "eval_episodes": ev["episodes"],
                "success": ev["success"],
                "final_distance_m": ev.get("final_distance_m"),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    p.add_argument("--episodes", type=int, default=50, help="scripted demonstrations per case")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--policy", choices=(*NETWORKS, "vla"), default="mlp", help="train-bc --policy")
    p.add_argument("--eval-episodes", type=int, default=128)
    p.add_argument("--seed", type=int, default=0, help="the recording's seed")
    p.add_argument("--out", default=None, help="folder for the datasets and runs (default: a temporary one)")
    p.add_argument(
        "--dagger",
        type=int,
        default=0,
        help="DAgger rounds after the first BC run (each adds "
        "--episodes episodes the last run drove, the teacher labelled)",
    )
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out or tmp)
        rows = [
            r
            for c in args.cases
            for r in bench_case(
                c, root, args.episodes, args.epochs, args.eval_episodes, args.seed, args.policy, args.dagger
            )
        ]
    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores; load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after\n"
    )
    print(
        "| task | policy | overrides | DAgger round | episodes | teacher success | demos wall [s] | BC epochs "
        "| train-bc wall [s] | eval episodes | BC success | BC final distance [m] |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        dist = "-" if r["final_distance_m"] is None else f"{r['final_distance_m']:.3f}"
        print(
            f"| {r['case']} | {r['policy']} | `{r['overrides']}` | {r['round']} | {r['demos']} | {r['teacher']:.2f} | "
            f"{r['demo_s']:.0f} | {r['epochs']} | {r['train_s']:.0f} | {r['eval_episodes']} | {r['success']:.3f} "
            f"| {dist} |"
        )


if __name__ == "__main__":
    main()
