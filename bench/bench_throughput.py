"""Env-steps/s of simreal tasks on each backend, beside MuJoCo Playground's MJX envs, in one run.

    python bench/bench_throughput.py                     # quadrotor + cartpole vs CartpoleBalance, 1024 envs
    python bench/bench_throughput.py --tasks g1-velocity arm-pick --playground HumanoidWalk --envs 256
    python bench/bench_throughput.py --envs 8192 --backends mjx          # on a GPU
    python bench/bench_throughput.py --tasks quadrotor-hover --backends native mjx --playground --bare

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


def simreal_rate(task: str, backend: str, envs: int, steps: int, repeats: int, overrides: list[str]) -> float:
    from simreal.policies.run_config import make_env, resolve

    env = make_env(resolve(task, overrides), backend=backend)
    return time_env(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, envs, steps, repeats)


def bare_rollout_rate(task: str, envs: int, steps: int, repeats: int, per_env_models: bool) -> float:
    """Env-steps/s of ``mujoco.rollout`` alone on the task's model: ``envs`` states stepped
    ``n_substeps`` physics steps per control step with random controls in range, on the thread
    pool of one thread per core, states and controls prepared beforehand: the engine's limit the
    native backend is measured against. ``per_env_models``: one ``MjModel`` copy per env, as
    domain randomisation needs with ``mujoco.rollout``."""
    import copy
    import os

    import mujoco
    import numpy as np

    from mujoco import rollout

    from simreal.policies.run_config import make_env, resolve

    env = make_env(resolve(task), backend="native")
    m, n = env.mj_model, env.n_substeps
    models = [copy.deepcopy(m) for _ in range(envs)] if per_env_models else [m] * envs
    datas = [mujoco.MjData(m) for _ in range(os.cpu_count() or 1)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty((envs, mujoco.mj_stateSize(m, spec)))
    mujoco.mj_getState(m, mujoco.MjData(m), state[0], spec)
    state[:] = state[0]
    lo, hi = m.actuator_ctrlrange.T
    rng = np.random.default_rng(0)
    ctrls = [np.repeat(rng.uniform(lo, hi, (envs, 1, m.nu)), n, axis=1) for _ in range(steps)]
    out = np.empty((envs, n, state.shape[1]))
    sens = np.empty((envs, n, m.nsensordata))
    best = 0.0
    with rollout.Rollout(nthread=os.cpu_count() or 1) as pool:
        for _ in range(repeats + 1):  # the first warms the pool up
            s = state.copy()
            t = time.perf_counter()
            for c in ctrls:
                pool.rollout(models, datas, s, c, skip_checks=True, nstep=n, state=out, sensordata=sens)
                s[:] = out[:, -1]
            best = max(best, envs * steps / (time.perf_counter() - t))
    return best


def bare_batch_rate(task: str, envs: int, steps: int, repeats: int) -> float:
    """Env-steps/s of ``mujoco.batch`` alone, stepped as the native backend steps it: the task's
    randomised fields expanded per env, ``n_substeps`` physics steps per control step in calls of
    ``inner_loop.every`` steps where the task has an inner loop (a quadrotor's 500 Hz rate loop:
    five calls of one step), random controls held, and *no* controller, observation or reward:
    the floor of the native backend's design, whatever its glue costs."""
    import os

    import numpy as np
    from mujoco import batch as mjbatch

    from simreal.policies.run_config import make_env, resolve

    env = make_env(resolve(task), backend="native")
    m, n = env.mj_model, env.n_substeps
    every = env.inner_loop.every if env.inner_loop is not None else n
    b = mjbatch.Batch(m, envs, nthread=os.cpu_count() or 1)
    for name in env.nominal_params():
        b.expand(name)
    qpos, qvel, ctrl = b.bind("qpos"), b.bind("qvel"), b.bind("ctrl")
    qpos0 = np.array(qpos)
    lo, hi = m.actuator_ctrlrange.T
    ctrls = np.random.default_rng(0).uniform(lo, hi, (steps, envs, m.nu))
    best = 0.0
    for _ in range(repeats + 1):  # the first warms the pool up
        qpos[:], qvel[:] = qpos0, 0.0
        t = time.perf_counter()
        for c in ctrls:
            ctrl[...] = c
            for _ in range(n // every):
                b.step(nstep=every)
        best = max(best, envs * steps / (time.perf_counter() - t))
    return best


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
    p.add_argument("--bare", action="store_true",
                   help="also time bare mujoco.rollout and mujoco.batch (stepped as the native backend) on each task's model")
    p.add_argument("--override", nargs="*", default=[], help="config key=value for every task (robot=my_g1.yaml)")
    a = p.parse_args()
    ours = {(t, b): simreal_rate(t, b, a.envs, a.steps, a.repeats, a.override) for t in a.tasks for b in a.backends}
    theirs = {n: playground_rate(n, a.envs, a.steps, a.repeats) for n in a.playground}
    bare = {(t, per_env): bare_rollout_rate(t, a.envs, a.steps, a.repeats, per_env)
            for t in a.tasks for per_env in (False, True)} if a.bare else {}
    floor = {t: bare_batch_rate(t, a.envs, a.steps, a.repeats) for t in a.tasks} if a.bare else {}
    dev = jax.devices()[0]
    print(f"\n{platform.machine()}, {jax.device_count()}x {dev.platform} {getattr(dev, 'device_kind', '')}, "
          f"{a.envs} envs, {a.steps} control steps, best of {a.repeats}, {time.strftime('%Y-%m-%d')}"
          + (f", {' '.join(a.override)}" if a.override else "") + "\n")
    print("| env | backend | env-steps/s |\n| --- | --- | ---: |")
    for (t, b), v in ours.items():
        print(f"| simreal {t} | {b} | {v:,.0f} |")
    for n, v in theirs.items():
        print(f"| Playground {n} | mjx | {v:,.0f} |")
    for (t, per_env), v in bare.items():
        print(f"| {t}: bare `mujoco.rollout`, {'a model per env' if per_env else 'one model'} | - | {v:,.0f} |")
    for t, v in floor.items():
        print(f"| {t}: bare `mujoco.batch` as the native backend steps it, no controller | - | {v:,.0f} |")
    print()
    for t in a.tasks:
        if ("native" in a.backends) and ("mjx" in a.backends):
            print(f"- {t}: native / mjx = {ours[(t, 'native')] / ours[(t, 'mjx')]:.1f}x")
        if "native" in a.backends and bare:
            print(f"- {t}: native / bare rollout = {ours[(t, 'native')] / bare[(t, False)]:.2f} (one model), "
                  f"{ours[(t, 'native')] / bare[(t, True)]:.2f} (a model per env), "
                  f"{ours[(t, 'native')] / floor[t]:.2f} (bare batch)")
        if "mjx" in a.backends and floor:
            print(f"- {t}: bare batch / mjx = {floor[t] / ours[(t, 'mjx')]:.1f}x (what native / mjx could reach "
                  "with nothing but the engine)")
        if MATCHED.get(t) in theirs:
            for b in a.backends:
                print(f"- {t} simreal {b} / Playground {MATCHED[t]} = {ours[(t, b)] / theirs[MATCHED[t]]:.2f}x")


if __name__ == "__main__":
    main()
