"""Where a training iteration's time goes, and how busy the cores are.

    python bench/bench_profile.py                          # quadrotor-hover, its default config
    python bench/bench_profile.py --run runs/quadrotor-hover/RUN   # from a trained run's checkpoint
    python bench/bench_profile.py --task quadrotor-hover --set algorithm=sac

For the task's default config, after compilation: the wall-clock of one whole iteration
(``algo.iterate``), of the rollout alone (the same unroll with the same policy, no update:
simulator, policy inference and the normaliser), and the difference (the gradient updates);
plus CPU time / wall-clock over the whole iterations, the number of cores kept busy. The
rollout is timed through Brax's ``acting.generate_unroll`` (PPO) or the algorithm's own
experience step (SAC) so it is the same code the iteration runs. Prints a markdown table.

From a fresh start the random policy crashes within a few steps, so resets (a new
randomised model per env on the native backend) weigh on the rollout; ``--run`` profiles
from a trained run's latest checkpoint instead, the regime most of a training run is in.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
from brax.training import acting


def _timed(fn, state, n: int) -> tuple[float, float, object]:
    """(wall s, cpu s) per call of ``state = fn(state)`` over ``n`` calls after a warm-up call."""
    state = fn(state)
    jax.block_until_ready(state)
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        state = fn(state)
    jax.block_until_ready(state)
    return (time.perf_counter() - t) / n, (time.process_time() - c) / n, state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="quadrotor-hover")
    ap.add_argument("--set", nargs="*", default=[], help="config overrides")
    ap.add_argument("--run", help="profile from this brax run's latest checkpoint (its config)")
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args()

    from pathlib import Path

    from simreal.policies.run_config import make_env, resolve
    from simreal.policies.train import BRAX, load_config, make_algorithm

    if args.run:
        cfg = load_config(Path(args.run))
        env, algo, state = BRAX.restore(Path(args.run), cfg)
        args.task = f"{cfg.task} --run {args.run}"
    else:
        cfg = resolve(args.task, args.set)
        env = make_env(cfg)
        algo = make_algorithm(cfg, env)
        state = algo.init()

    def whole(s):
        return algo.iterate(s)[0]

    if cfg.algorithm == "ppo":
        def rollout_fn(s):
            policy = algo.make_policy((s.normalizer_params, s.params.policy))
            env_state, _ = acting.generate_unroll(algo.venv, s.env_state, policy, s.key, cfg.train.unroll_length)
            return s.replace(env_state=env_state)
        steps = cfg.train.num_envs * cfg.train.unroll_length
    else:
        def rollout_fn(s):
            def step(c, k):
                return algo.experience(c, k)[0], None
            keys = jax.random.split(s.key, cfg.train.steps_per_iteration)
            return jax.lax.scan(step, s, keys)[0]
        steps = cfg.train.num_envs * cfg.train.steps_per_iteration
    rollout = jax.jit(rollout_fn)

    it_wall, it_cpu, state = _timed(whole, state, args.iterations)
    ro_wall, ro_cpu, _ = _timed(rollout, state, args.iterations)
    upd = max(it_wall - ro_wall, 0.0)
    print(f"`python bench/bench_profile.py --task {args.task} {' '.join(args.set)}`, "
          f"{os.cpu_count()} CPU cores, backend {env.backend}, {cfg.algorithm}, {steps} env steps per iteration\n")
    print("| part | wall [ms / iteration] | share | env steps/s | cores busy (CPU s / wall s) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| whole iteration | {it_wall * 1e3:.0f} | 100% | {steps / it_wall:,.0f} | {it_cpu / it_wall:.2f} |")
    print(f"| rollout (simulator + policy + normaliser) | {ro_wall * 1e3:.0f} | {ro_wall / it_wall:.0%} | "
          f"{steps / ro_wall:,.0f} | {ro_cpu / ro_wall:.2f} |")
    print(f"| updates (the difference) | {upd * 1e3:.0f} | {upd / it_wall:.0%} | | |")


if __name__ == "__main__":
    main()
