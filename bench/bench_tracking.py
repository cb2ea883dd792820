"""Tracking a retargeted capture: a short PPO run on ``g1-tracking`` against PD playback.

    python bench/bench_tracking.py /path/to/walk.bvh                       # g1, 10 min budget
    python bench/bench_tracking.py walk.bvh --limit-s 600 --num-envs 128 --episode-s 3
    python bench/bench_tracking.py walk_g1.npz --backend mjx --num-envs 8192 --hidden 512 256 128   # a GPU

Steps, each timed: ``simreal retarget CLIP --robot g1`` (its PD-playback feasibility figure is
reported; skipped when CLIP is already a motion ``.npz``), ``simreal train g1-tracking
env.motion_file=...`` on ``--backend`` (native, the CPU, by default) for an env-step budget or a
wall-clock limit, ``simreal eval RUN --json``, then two baselines judged by
the same evaluation (:func:`simreal.policies.torch_policy.evaluate`: the first episode of each
of ``--episodes`` envs, domain randomisation and action delay as in training, the seed ``simreal
eval`` uses):

- **PD playback**: the action whose set-points are the reference's next frame, read from the
  observation's motion command (its joint part is ``q_ref(next) - default pose``): what the
  task's :meth:`~simreal.sim.tasks.g1_tracking.G1Tracking.reference_action` gives, the robot's
  PD servos following the clip open loop from a reference state;
- **zero action**: set-points at the home pose (the task's action offset), the robot standing
  still while the clip moves on.

Episodes are ``--episode-s`` long (``success``: tracked that long with no early end: root height
within 0.25 m and every tracked body within 0.5 m of the reference). Prints one markdown row
per policy: success, mean episode length [s], joint RMSE [rad] and body position error [m]
of the episodes that stayed on the clip, and the same two over every episode up to its end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import child
import numpy as np


def run_cli(args: list[str]) -> tuple[dict[str, Any], float]:
    """``simreal ARGS --json``: the JSON document that ends its stdout, and the wall-clock [s]."""
    t0 = time.time()
    r = child.run([sys.executable, "-m", "simreal.cli", *args, "--json"])  # its progress stays visible
    if r.returncode != 0:
        raise SystemExit(f"simreal {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    out = r.stdout.strip()
    start = out.rfind("\n{") + 1 if not out.startswith("{") else 0  # a library may print lines before it
    return json.loads(out[start:]), time.time() - t0


def playback_policy(env: Any) -> Callable[[np.ndarray], np.ndarray]:
    """Observation -> the PD-playback action: ``(q_ref(next) - ctrl_home) / action_scale``,
    ``q_ref(next)`` from the motion command's first ``nu`` entries (``q_ref - default pose``)."""
    start = 0
    for term in env.obs_layout:
        if term["name"] == "command":
            break
        start += term["size"]
    nu = env.action_size
    shift = np.asarray(env.default_joint_pos - env.home_ctrl)

    def act(obs: np.ndarray) -> np.ndarray:
        return np.clip((obs[:, start : start + nu] + shift) / env.cfg.action_scale, -1.0, 1.0)

    return act


def baselines(run_dir: Path, episodes: int) -> dict[str, dict[str, float]]:
    """PD playback and zero action, evaluated as ``simreal eval`` evaluates the run's policy."""
    from simreal.policies.evaluation import EVAL_SEED_OFFSET
    from simreal.policies.run_config import make_env
    from simreal.policies.run_dir import load_config
    from simreal.policies.torch_policy import evaluate

    cfg = load_config(run_dir)  # the run's own copy of the clip (run_dir/inputs)
    env = make_env(cfg)
    seed = cfg.seed + EVAL_SEED_OFFSET  # simreal eval's seed
    zero = lambda obs: np.zeros((len(obs), env.action_size))  # noqa: E731
    return {
        "PD playback": evaluate(env, playback_policy(env), episodes, seed),
        "zero action": evaluate(env, zero, episodes, seed),
    }


def row(clip: str, name: str, r: dict[str, Any], ctrl_dt: float, extra: str) -> str:
    def num(k: str, fmt: str) -> str:
        v = r.get(k)
        return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, fmt)

    length = r.get("length")
    length_s = "-" if length is None else f"{length * ctrl_dt:.2f}"
    return (
        f"| {clip} | {name} | {extra} | {num('success', '.3f')} | {length_s} | {num('joint_rmse_rad', '.3f')} "
        f"| {num('body_pos_err_m', '.3f')} | {num('joint_rmse_to_end_rad', '.3f')} "
        f"| {num('body_pos_err_to_end_m', '.3f')} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("clip", help="BVH (or any `simreal retarget` source), or a motion .npz it wrote")
    p.add_argument("--robot", default="g1")
    p.add_argument("--workdir", default="/tmp/simreal-bench-tracking")
    p.add_argument("--num-envs", type=int, default=128)
    p.add_argument("--backend", default="native", choices=("native", "mjx", "mjx-warp"))
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 128], help="policy and value layer widths")
    p.add_argument("--override", nargs="*", default=[], help="more training config key=value (robot=my_g1.yaml)")
    p.add_argument("--steps", type=int, default=3_000_000, help="env-step budget")
    p.add_argument("--limit-s", type=float, default=600.0, help="training wall-clock limit [s]")
    p.add_argument("--episode-s", type=float, default=3.0, help="episode length, training and evaluation [s]")
    p.add_argument("--episodes", type=int, default=256, help="evaluation episodes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run", default=None, help="evaluate this finished run instead of retargeting and training")
    a = p.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    clip = Path(a.clip).stem
    motion = work / f"{clip}_{a.robot}.npz"

    if a.run is None and not a.clip.endswith(".npz"):
        ret, t_ret = run_cli(["retarget", a.clip, "--robot", a.robot, "--out", str(motion)])
        part = max(ret["parts"], key=lambda p: p["quality"]["frames"])  # a clip cut in pieces: the longest
        motion = Path(part["out"])
        feas = part["quality"]["checks"].get("feasibility", {})
        print(
            f"retarget {t_ret:.0f} s: frames {part['frames']}, "
            f"verdict {part['quality']['verdict']}, PD playback follows "
            f"{feas.get('mean_follow_s', float('nan')):.2f} s of each {feas.get('window_s', float('nan')):.0f} s "
            "window",
            file=sys.stderr,
        )
    elif a.run is None:
        motion = Path(a.clip)
    if a.run is None:
        hidden = "[" + ",".join(map(str, a.hidden)) + "]"
        train, t_train = run_cli(
            [
                "train",
                "g1-tracking",
                f"env.motion_file={motion}",
                f"runs_root={work / 'runs'}",
                f"backend={a.backend}",
                f"seed={a.seed}",
                f"env.episode_length_s={a.episode_s}",
                f"train.num_envs={a.num_envs}",
                f"train.num_timesteps={a.steps}",
                f"train.max_wall_s={a.limit_s}",
                "train.eval_every_steps=0",
                f"eval.episodes={a.episodes}",
                f"train.policy_hidden={hidden}",
                f"train.value_hidden={hidden}",
                *a.override,
            ]
        )
        run_dir, steps = Path(train["run_dir"]), train["env_steps"]
    else:  # the run's own record: its last metrics row
        run_dir, t_train = Path(a.run), float("nan")
        rows = (run_dir / "metrics.csv").read_text().strip().splitlines()
        last = dict(zip(rows[0].split(","), rows[-1].split(",")))
        steps, t_train = int(float(last["env_steps"])), float(last["wall_s"])
    print(f"train {t_train:.0f} s, {steps:,} env steps: {run_dir}", file=sys.stderr)
    evaluated, _ = run_cli(["eval", str(run_dir), "--episodes", str(a.episodes)])
    policy = evaluated[evaluated["trained_on"]]
    base = baselines(run_dir, a.episodes)
    from simreal.robot_spec import load_robot_spec

    ctrl_dt = load_robot_spec(a.robot).control_dt_s
    print(f"\n{a.robot}, {a.episode_s:g} s episodes, {a.episodes} evaluation episodes, domain randomisation on\n")
    print(
        "| clip | policy | training | success | mean length [s] | joint RMSE [rad] | body error [m] "
        "| joint RMSE, all to their end [rad] | body error, all to their end [m] |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(row(clip, "PPO", policy, ctrl_dt, f"{steps / 1e6:.2f} M steps, {t_train / 60:.1f} min"))
    for name, r in base.items():
        print(row(clip, name, r, ctrl_dt, "-"))


if __name__ == "__main__":
    main()
