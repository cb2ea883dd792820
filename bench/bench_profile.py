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

``--overlap`` (PPO) asks whether a pipelined loop would pay: the update alone (its own jitted
program on a collected batch), then the update of one batch and the rollout of the next
dispatched together (the rollout with the parameters before that update, as a loop with one
iteration of policy lag would run them) and waited for together, against the two run one
after the other.

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
    ap.add_argument(
        "--overlap", action="store_true", help="PPO: also time the update and the next rollout dispatched together"
    )
    args = ap.parse_args()

    from pathlib import Path

    from simreal.policies.run_config import make_env, resolve
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers.brax import BRAX, make_algorithm

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
    print(
        f"`python bench/bench_profile.py --task {args.task} {' '.join(args.set)}`, "
        f"{os.cpu_count()} CPU cores, backend {env.backend}, {cfg.algorithm}, {steps} env steps per iteration\n"
    )
    print("| part | wall [ms / iteration] | share | env steps/s | cores busy (CPU s / wall s) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| whole iteration | {it_wall * 1e3:.0f} | 100% | {steps / it_wall:,.0f} | {it_cpu / it_wall:.2f} |")
    print(
        f"| rollout (simulator + policy + normaliser) | {ro_wall * 1e3:.0f} | {ro_wall / it_wall:.0%} | "
        f"{steps / ro_wall:,.0f} | {ro_cpu / ro_wall:.2f} |"
    )
    print(f"| updates (the difference) | {upd * 1e3:.0f} | {upd / it_wall:.0%} | | |")
    if args.overlap and cfg.algorithm == "ppo":
        _overlap(algo, state, args.iterations)


def _overlap(algo, state, n: int) -> None:
    """``--overlap`` (module docstring): rollout, update, both in sequence and both at once."""
    import functools

    import jax.numpy as jnp
    from brax.training.acme import running_statistics

    c = algo.cfg

    @jax.jit
    def collect(s):
        policy = algo.make_policy((s.normalizer_params, s.params.policy))
        env_state, data = acting.generate_unroll(
            algo.venv, s.env_state, policy, s.key, c.unroll_length, extra_fields=("truncation", "episode_metrics")
        )
        return s.replace(env_state=env_state, key=jax.random.split(s.key)[0]), jax.tree.map(
            lambda x: jnp.swapaxes(x, 0, 1), data
        )

    @jax.jit
    def update(s, data):
        normalizer = running_statistics.update(s.normalizer_params, data.observation)
        (params, opt, _, _), _ = jax.lax.scan(
            functools.partial(algo._sgd_epoch, data=data),
            (s.params, s.optimizer_state, normalizer, s.key),
            (),
            length=c.num_updates_per_batch,
        )
        return s.replace(params=params, optimizer_state=opt, normalizer_params=normalizer)

    def clock(fn):
        fn()
        t, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        wall = (time.perf_counter() - t) / n
        return wall, (time.process_time() - cpu) / n / wall

    box = {"s": state}
    box["s"], box["d"] = jax.block_until_ready(collect(box["s"]))

    def roll():
        box["s"], box["d"] = jax.block_until_ready(collect(box["s"]))

    def upd():
        jax.block_until_ready(update(box["s"], box["d"]))

    def together():  # dispatch both, then wait: the rollout does not wait for the update
        u = update(box["s"], box["d"])
        box["s"], box["d"] = collect(box["s"])
        jax.block_until_ready((u, box["d"]))

    (r_w, r_c), (u_w, u_c), (t_w, t_c) = clock(roll), clock(upd), clock(together)
    print("\n| split programs | wall [ms] | cores busy |\n| --- | ---: | ---: |")
    print(f"| rollout alone | {r_w * 1e3:.0f} | {r_c:.2f} |\n| update alone | {u_w * 1e3:.0f} | {u_c:.2f} |")
    print(f"| one after the other (sum) | {(r_w + u_w) * 1e3:.0f} | |")
    print(f"| dispatched together | {t_w * 1e3:.0f} | {t_c:.2f} |")


if __name__ == "__main__":
    main()
