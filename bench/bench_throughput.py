"""Env-steps/s of simreal's backends, beside MuJoCo Playground's MJX env, in one run.

    python bench/bench_throughput.py                   # 1024 envs, 100 control steps
    python bench/bench_throughput.py --envs 8192 --backends mjx   # on a GPU

Measures: quadrotor-hover on each backend (5 physics substeps per control step), and
simreal's cartpole-balance on each backend beside Playground's ``CartpoleBalance`` (same
model, timestep and control rate). Each row: compile once, then the best of ``--repeats``
timed scans of ``--steps`` control steps with random actions. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp


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


def simreal_row(task: str, backend: str, envs: int, steps: int, repeats: int) -> float:
    from simreal.policies.run_config import make_env, resolve

    env = make_env(resolve(task), backend=backend)
    return time_env(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, envs, steps, repeats)


def playground_row(envs: int, steps: int, repeats: int) -> float:
    from mujoco_playground import registry

    env = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    return time_env(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, envs, steps, repeats)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--backends", default="native,mjx")
    p.add_argument("--skip-playground", action="store_true")
    a = p.parse_args()
    backends = a.backends.split(",")
    rows = []
    quad = {b: simreal_row("quadrotor-hover", b, a.envs, a.steps, a.repeats) for b in backends}
    for b, v in quad.items():
        rows.append(("simreal quadrotor-hover", b, v))
    cart = {b: simreal_row("cartpole-balance", b, a.envs, a.steps, a.repeats) for b in backends}
    for b, v in cart.items():
        rows.append(("simreal cartpole-balance", b, v))
    pg = None if a.skip_playground else playground_row(a.envs, a.steps, a.repeats)
    if pg:
        rows.append(("Playground CartpoleBalance", "mjx", pg))
    dev = jax.devices()[0]
    print(f"\nmachine: {platform.processor() or platform.machine()}, {jax.device_count()}x {dev.platform} "
          f"({getattr(dev, 'device_kind', '')}), envs {a.envs}, {a.steps} control steps x best of {a.repeats}\n")
    print("| env | backend | env-steps/s |")
    print("| --- | --- | ---: |")
    for name, b, v in rows:
        print(f"| {name} | {b} | {v:,.0f} |")
    if "native" in quad and "mjx" in quad:
        print(f"\nquadrotor native / mjx: {quad['native'] / quad['mjx']:.1f}x")
    if pg:
        for b, v in cart.items():
            print(f"cartpole simreal {b} / Playground mjx: {v / pg:.2f}x")


if __name__ == "__main__":
    main()
