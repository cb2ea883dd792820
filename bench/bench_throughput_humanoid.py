"""Env-step throughput of g1-velocity and arm-reach on the native and MJX backends.

    python bench/bench_throughput_humanoid.py                          # defaults below
    python bench/bench_throughput_humanoid.py --envs 64 256 --steps 200 --backends native mjx
    python bench/bench_throughput_humanoid.py --tasks arm-reach --robot so100

Times a jitted ``lax.scan`` of ``--steps`` control steps of the vmapped env with random
actions (the shape of a PPO rollout), after one warm-up call that compiles it; prints
env-steps/s per (task, backend, batch) and a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp

from simreal.policies.run_config import make_env, resolve


def measure(task: str, backend: str, num_envs: int, steps: int, overrides: list[str]) -> float:
    """Env-steps/s of ``steps`` control steps of ``num_envs`` envs."""
    env = make_env(resolve(task, [f"backend={backend}", *overrides]))
    reset = jax.jit(jax.vmap(env.reset))

    @jax.jit
    def rollout(state, key):
        def body(s, k):
            a = jax.random.uniform(k, (num_envs, env.action_size), minval=-1.0, maxval=1.0)
            return jax.vmap(env.step)(s, a), None

        s, _ = jax.lax.scan(body, state, jax.random.split(key, steps))
        return s

    state = reset(jax.random.split(jax.random.PRNGKey(0), num_envs))
    jax.block_until_ready(rollout(state, jax.random.PRNGKey(1)))  # compile
    t = time.perf_counter()
    state = rollout(state, jax.random.PRNGKey(2))
    jax.block_until_ready(state)
    return num_envs * steps / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["g1-velocity", "arm-reach"])
    p.add_argument("--backends", nargs="+", default=["native", "mjx"])
    p.add_argument("--envs", nargs="+", type=int, default=[16, 64])
    p.add_argument("--steps", type=int, default=100, help="control steps per timed rollout")
    p.add_argument("--robot", default=None, help="override the task's robot (e.g. so100 for arm-reach)")
    args = p.parse_args()
    extra = [f"robot={args.robot}"] if args.robot else []
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, jax devices: {jax.devices()}")
    rows = []
    for task in args.tasks:
        for backend in args.backends:
            for n in args.envs:
                try:
                    sps = measure(task, backend, n, args.steps, extra)
                    print(f"{task:14s} {backend:8s} envs={n:6d} {sps:12.0f} env-steps/s", flush=True)
                except Exception as e:  # one failing backend must not hide the others' numbers
                    sps = float("nan")
                    print(f"{task:14s} {backend:8s} envs={n:6d} FAILED: {type(e).__name__}: {e}", flush=True)
                rows.append((task, backend, n, sps))
    print("\n| task | backend | envs | env-steps/s |\n| --- | --- | --- | --- |")
    for task, backend, n, sps in rows:
        print(f"| {task} | {backend} | {n} | {sps:.0f} |")


if __name__ == "__main__":
    main()
