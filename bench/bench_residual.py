"""Residual RL over a weak behaviour-cloned base: the base alone, base + residual, PPO from scratch.

    python bench/bench_residual.py                       # arm-reach: 10 demos, scales 0.1 and 0.5, 120 s of PPO each
    python bench/bench_residual.py --cases arm-push --scales 0.1 --max-wall-s 480 --no-scratch
    python bench/bench_residual.py --cases arm-pick --base scripted --scales 0.1 --max-wall-s 600 --no-scratch

Each case runs what a user runs, in this process (``simreal.cli.main``)::

    simreal demos TASK OVERRIDES --teacher scripted --episodes D --out DIR/TASK-demos
    simreal train-bc DIR/TASK-demos --epochs K --out DIR/TASK-bc                # the weak base
    simreal train TASK OVERRIDES residual.base=DIR/TASK-bc residual.scale=S \\
        train.max_wall_s=W --json                                               # per scale S
    simreal train TASK OVERRIDES train.max_wall_s=W --json                      # from scratch, same budget
    simreal export RUN_DIR                                                      # each run

(``--base scripted``: no demonstrations and no BC; ``residual.base=scripted``, the task's
scripted controller as a graph of the observation, ``simreal/policies/demos/scripted_bundle.py``), then
evaluates the bundles, the base frozen into the first residual run (``RUN_DIR/base``),
each composed one and the scratch policy's, on the same ``E`` episodes: the same env (the
run's config, domain randomisation on), the same seed (``simreal eval``'s, ``seed + EVAL_SEED_OFFSET``)
and the same evaluation (``ppo.evaluate``, each bundle's ONNX graph run by ONNX Runtime inside
the rollout). It prints a markdown table with each PPO run's budget spent: env steps,
wall-clock and the process's CPU time, on this machine's cores, with its load average (the
development machines are shared, so wall-clock is what a loaded 2-core machine gave).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

from bench_bc import CASES, _run

from simreal.yaml_io import load_yaml


def _cpu_s() -> float:
    """CPU time [s] of this process and its finished children, user + system."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def evaluate_bundle(env, bundle_dir: Path, episodes: int, seed: int) -> dict:
    """``ppo.evaluate`` of a bundle's ONNX policy (deterministic, first episode of each env)."""
    from simreal.bundle import OnnxPolicy, load_bundle
    from simreal.policies.rl.ppo import evaluate
    from simreal.policies.trainers.residual_env import onnx_base

    act = onnx_base(OnnxPolicy(load_bundle(bundle_dir)))
    return evaluate(env, lambda _params, deterministic=True: lambda obs, _key: (act(obs), {}), None, episodes, seed)


def _train(
    task: str, overrides: list[str], root: Path, args: argparse.Namespace, extra: list[str]
) -> tuple[dict, float, float]:
    """``simreal train TASK ... --json`` at the bench's PPO budget: (its JSON summary, wall [s], CPU [s])."""
    budget = [
        f"train.num_timesteps={args.timesteps}",
        f"train.max_wall_s={args.max_wall_s}",
        f"train.num_envs={args.num_envs}",
        "train.num_eval_envs=64",
        f"runs_root={root / 'runs'}",
    ]
    cpu, t = _cpu_s(), time.perf_counter()
    out = _run(["train", task, *overrides, *budget, *extra, *args.set, "--json"])
    result = json.loads(out.strip().splitlines()[-1])
    return result, time.perf_counter() - t, _cpu_s() - cpu


def bench_case(name: str, root: Path, args: argparse.Namespace) -> list[dict]:
    """The rows of one task: the BC base alone, base + residual per scale, PPO from scratch (module docstring)."""
    from simreal.policies.evaluation import EVAL_SEED_OFFSET
    from simreal.policies.run_config import make_env
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers.residual import BASE_DIR

    task, overrides = CASES[name]
    if args.base == "scripted":
        base, what = "scripted", "scripted controller graph"
        head = {"case": name, "overrides": " ".join(overrides) or "-", "demos": 0, "teacher": float("nan")}
    else:
        demos, base, what = root / f"{name}-demos", root / f"{name}-bc", "BC base"
        _run(
            [
                "demos",
                task,
                *overrides,
                "--teacher",
                "scripted",
                "--episodes",
                str(args.demos),
                "--seed",
                str(args.seed),
                "--out",
                str(demos),
            ]
        )
        teacher = load_yaml(demos / "meta" / "simreal.yaml")["teacher_success"]
        _run(["train-bc", str(demos), "train.num_eval_envs=16", "--epochs", str(args.epochs), "--out", str(base)])
        head = {
            "case": name,
            "overrides": " ".join(overrides) or "-",
            "demos": args.demos,
            "teacher": teacher["succeeded"] / teacher["episodes"],
        }
    rows, env, seed = [], None, 0
    ppo = {**head, "overrides": " ".join([*overrides, *args.set]) or "-"}  # the PPO runs' rows: with --set
    for scale in args.scales:
        result, wall_s, cpu_s = _train(
            task, overrides, root, args, [f"residual.base={base}", f"residual.scale={scale}"]
        )
        run_dir = Path(result["run_dir"])
        _run(["export", str(run_dir)])
        if env is None:  # every row on the first run's env and episodes (the runs share the task's config)
            cfg = load_config(run_dir)
            env, seed = make_env(cfg), cfg.seed + EVAL_SEED_OFFSET  # simreal eval's episodes
            rows.append(
                {
                    **head,
                    "policy": f"{what} alone",
                    "eval": evaluate_bundle(env, run_dir / BASE_DIR, args.eval_episodes, seed),
                }
            )
        rows.append(
            {
                **ppo,
                "policy": f"{what} + residual, scale {scale:g}",
                "result": result,
                "wall_s": wall_s,
                "cpu_s": cpu_s,
                "eval": evaluate_bundle(env, run_dir / "bundle", args.eval_episodes, seed),
            }
        )
    if args.scratch:
        result, wall_s, cpu_s = _train(task, overrides, root, args, [])
        _run(["export", result["run_dir"]])
        rows.append(
            {
                **ppo,
                "policy": "PPO from scratch",
                "result": result,
                "wall_s": wall_s,
                "cpu_s": cpu_s,
                "eval": evaluate_bundle(env, Path(result["run_dir"]) / "bundle", args.eval_episodes, seed),
            }
        )
    return rows


def _m(v) -> str:
    return "-" if v is None or v != v else f"{v:.3f}"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", choices=list(CASES), default=["arm-reach"])
    p.add_argument(
        "--base",
        choices=("bc", "scripted"),
        default="bc",
        help="the frozen base: BC on scripted demonstrations, or the scripted controller itself",
    )
    p.add_argument("--demos", type=int, default=10, help="scripted demonstrations the BC base learns from")
    p.add_argument("--epochs", type=int, default=100, help="BC epochs")
    p.add_argument("--scales", type=float, nargs="+", default=[0.1, 0.5], help="residual.scale values (ResiP: 0.1)")
    p.add_argument(
        "--scratch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also train PPO from scratch at the same budget",
    )
    p.add_argument("--num-envs", type=int, default=256, help="train.num_envs of each PPO run")
    p.add_argument("--timesteps", type=int, default=20_000_000, help="train.num_timesteps (the wall clock stops first)")
    p.add_argument("--max-wall-s", type=float, default=120.0, help="train.max_wall_s: each PPO run's budget [s]")
    p.add_argument("--eval-episodes", type=int, default=256)
    p.add_argument("--seed", type=int, default=0, help="the recording's seed")
    p.add_argument("--set", nargs="*", default=[], help="more key=value overrides of every PPO run")
    p.add_argument("--out", default=None, help="folder for the datasets and runs (default: a temporary one)")
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out or tmp)
        rows = [row for c in args.cases for row in bench_case(c, root, args)]
    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores; load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after\n"
    )
    print(
        "| task | overrides | demos (teacher success) | policy | PPO env steps (stop) | PPO wall [s] | PPO CPU [s] "
        "| eval episodes | success | final distance [m] |"
    )
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        ev, res = r["eval"], r.get("result")
        ppo = f"{res['env_steps']} ({res['stop']}) | {r['wall_s']:.0f} | {r['cpu_s']:.0f}" if res else "- | - | -"
        demos = f"{r['demos']} ({r['teacher']:.2f})" if r["demos"] else "-"
        print(
            f"| {r['case']} | `{r['overrides']}` | {demos} | {r['policy']} | {ppo} | "
            f"{ev['episodes']} | {ev['success']:.3f} | {_m(ev.get('final_distance_m'))} |"
        )


if __name__ == "__main__":
    main()
