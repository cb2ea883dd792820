"""Env-steps/s of simreal tasks on each backend, beside MuJoCo Playground's MJX envs, in one run.

    python bench/bench_throughput.py                     # quadrotor + cartpole vs CartpoleBalance, 1024 envs
    python bench/bench_throughput.py --tasks g1-velocity arm-pick --playground HumanoidWalk --envs 256
    python bench/bench_throughput.py --envs 8192 --backends mjx          # on a GPU

Each row: compile once, then the best of ``--repeats`` timed ``lax.scan`` rollouts of
``--steps`` control steps of the vmapped env with uniform random actions (the shape of a
PPO rollout). simreal's ``cartpole-balance`` matches Playground's ``CartpoleBalance`` (same
model, timestep and control rate), so that pair is also printed as a ratio. Playground
envs run with ``impl=jax`` (MJX). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax

#: simreal task -> the Playground env built to match it.
MATCHED = {"cartpole-balance": "CartpoleBalance"}


def time_env(reset, step, action_size: int, envs: int, steps: int, repeats: int) -> float:
    """Best env-steps/s over ``repeats`` scans of ``steps`` batched steps."""

    @jax.jit
    def run(state, key):
        def body(s, k):
            return step(s, jax.random.uniform(k, (envs, action_size), minval=-1, maxval=1)), None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    state = jax.jit(reset)(jax.random.split(jax.random.PRNGKey(0), envs))
    state = run(state, jax.random.PRNGKey(1))
    jax.block_until_ready(state)
    best = 0.0
    for r in range(repeats):
        t = time.perf_counter()
        state = run(state, jax.random.PRNGKey(2 + r))
        jax.block_until_ready(state)
        best = max(best, envs * steps / (time.perf_counter() - t))
    return best


def simreal_rate(task: str, backend: str, envs: int, steps: int, repeats: int) -> float:
    from simreal.policies.run_config import make_env, resolve

    env = make_env(resolve(task), backend=backend)
    return time_env(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, envs, steps, repeats)


def playground_rate(name: str, envs: int, steps: int, repeats: int) -> float:
    from mujoco_playground import registry

    env = registry.load(name, config_overrides={"impl": "jax"})
    return time_env(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, envs, steps, repeats)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["quadrotor-hover", "cartpole-balance"])
    p.add_argument("--playground", nargs="*", default=["CartpoleBalance"], help="Playground env names")
    p.add_argument("--backends", nargs="+", default=["native", "mjx"])
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    ours = {(t, b): simreal_rate(t, b, a.envs, a.steps, a.repeats) for t in a.tasks for b in a.backends}
    theirs = {n: playground_rate(n, a.envs, a.steps, a.repeats) for n in a.playground}
    dev = jax.devices()[0]
    print(f"\n{platform.machine()}, {jax.device_count()}x {dev.platform} {getattr(dev, 'device_kind', '')}, "
          f"{a.envs} envs, {a.steps} control steps, best of {a.repeats}, {time.strftime('%Y-%m-%d')}\n")
    print("| env | backend | env-steps/s |\n| --- | --- | ---: |")
    for (t, b), v in ours.items():
        print(f"| simreal {t} | {b} | {v:,.0f} |")
    for n, v in theirs.items():
        print(f"| Playground {n} | mjx | {v:,.0f} |")
    print()
    for t in a.tasks:
        if ("native" in a.backends) and ("mjx" in a.backends):
            print(f"- {t}: native / mjx = {ours[(t, 'native')] / ours[(t, 'mjx')]:.1f}x")
        if MATCHED.get(t) in theirs:
            for b in a.backends:
                print(f"- {t} simreal {b} / Playground {MATCHED[t]} = {ours[(t, b)] / theirs[MATCHED[t]]:.2f}x")


if __name__ == "__main__":
    main()
