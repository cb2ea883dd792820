"""Env-steps/s of simreal tasks on each backend, beside MuJoCo Playground's MJX envs, in one run.

    python bench/bench_throughput.py                     # quadrotor + cartpole vs CartpoleBalance, 1024 envs
    python bench/bench_throughput.py --tasks g1-velocity arm-pick --playground HumanoidWalk --envs 256
    python bench/bench_throughput.py --envs 8192 --backends mjx          # on a GPU
    python bench/bench_throughput.py --tasks quadrotor-hover --backends native mjx --playground --bare
    python bench/bench_throughput.py --tasks quadrotor-hover --backends native rigid --playground --bare
    python bench/bench_throughput.py --tasks quadrotor-hover --backends native rigid --playground --bare \
        --crazyflow --physics   # crazyflow beside the task and beside its physics alone
    python bench/bench_throughput.py --tasks g1-velocity g1-velocity:robot=g1,env.episode_length_s=20 \
        --backends native --envs 256 --steps 50 --bare --playground    # a task beside a variant of it

Each row: compile once, then the best of ``--repeats`` timed ``lax.scan`` rollouts of
``--steps`` control steps of the vmapped env with uniform random actions (the shape of a
PPO rollout). A task may name a variant of its config, ``task:key=value,key=value`` (the
12-DoF G1 default beside ``g1-velocity:robot=g1``, the 29-DoF one): its rows are timed in the
same rounds and its speed is printed as a ratio to the task's first row. The rows take turns,
one timed rollout each per round, so a change in the
machine's speed during the run (a shared VM's neighbours) reaches every row alike; a ratio is
the median over the rounds of the two rows' same-round ratio. simreal's ``cartpole-balance``
matches Playground's ``CartpoleBalance`` (same model, timestep and control rate), so that pair
is also printed as a ratio. Playground
envs run with ``impl=jax`` (MJX). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import time
from collections.abc import Callable

import jax
import numpy as np

#: simreal task -> the Playground env built to match it.
MATCHED = {"cartpole-balance": "CartpoleBalance", "g1-velocity": "G1JoystickFlatTerrain"}


Runner = Callable[[], float]


def env_runner(reset, step, action_size: int, envs: int, steps: int) -> Runner:
    """Compile and warm up a scan of ``steps`` batched steps; each call of the result times one
    scan and returns its env-steps/s."""

    @jax.jit
    def run(state, key):
        def body(s, k):
            return step(s, jax.random.uniform(k, (envs, action_size), minval=-1, maxval=1)), None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    state = run(jax.jit(reset)(jax.random.split(jax.random.PRNGKey(0), envs)), jax.random.PRNGKey(1))
    jax.block_until_ready(state)
    rounds = 0

    def once() -> float:
        nonlocal state, rounds
        rounds += 1
        t = time.perf_counter()
        state = run(state, jax.random.PRNGKey(1 + rounds))
        jax.block_until_ready(state)
        return envs * steps / (time.perf_counter() - t)

    return once


def time_env(reset, step, action_size: int, envs: int, steps: int, repeats: int) -> float:
    """Best env-steps/s over ``repeats`` scans of ``steps`` batched steps."""
    once = env_runner(reset, step, action_size, envs, steps)
    return max(once() for _ in range(repeats))


def variant(spec: str, overrides: list[str]) -> tuple[str, list[str]]:
    """(task, overrides) of a ``--tasks`` entry ``task`` or ``task:key=value,key=value``, with the
    ``--override`` ones first."""
    task, _, own = spec.partition(":")
    return task, [*overrides, *(kv for kv in own.split(",") if kv)]


def task_env(spec: str, backend: str, overrides: list[str]):
    """The env of a ``--tasks`` entry on ``backend``."""
    from simreal.policies.run_config import make_env, resolve

    task, overrides = variant(spec, overrides)
    return make_env(resolve(task, overrides), backend=backend)


def simreal_runner(spec: str, backend: str, envs: int, steps: int, overrides: list[str]) -> Runner:
    env = task_env(spec, backend, overrides)
    return env_runner(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, envs, steps)


def bare_rollout_runner(spec: str, envs: int, steps: int, per_env_models: bool, overrides: list[str]) -> Runner:
    """A runner (:func:`env_runner`) of ``mujoco.rollout`` alone on the task's model: ``envs`` states stepped
    ``n_substeps`` physics steps per control step with random controls in range, on the thread
    pool of one thread per core, states and controls prepared beforehand: the engine's limit the
    native backend is measured against. ``per_env_models``: one ``MjModel`` copy per env, as
    domain randomisation needs with ``mujoco.rollout``."""
    import copy
    import os

    import mujoco
    from mujoco import rollout

    env = task_env(spec, "native", overrides)
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
    pool = rollout.Rollout(nthread=os.cpu_count() or 1)  # lives as long as the runner

    def once() -> float:
        s = state.copy()
        t = time.perf_counter()
        for c in ctrls:
            pool.rollout(models, datas, s, c, skip_checks=True, nstep=n, state=out, sensordata=sens)
            s[:] = out[:, -1]
        return envs * steps / (time.perf_counter() - t)

    once()  # warms the pool up
    return once


def bare_batch_runner(spec: str, envs: int, steps: int, overrides: list[str]) -> Runner:
    """A runner (:func:`env_runner`) of ``mujoco.batch`` alone, stepped as the native backend steps it: the task's
    randomised fields expanded per env, ``n_substeps`` physics steps per control step in calls of
    ``inner_loop.every`` steps where the task has an inner loop (a quadrotor's 500 Hz rate loop:
    five calls of one step), random controls held, and *no* controller, observation or reward:
    the floor of the native backend's design, whatever its glue costs."""
    import os

    from mujoco import batch as mjbatch

    env = task_env(spec, "native", overrides)
    m, n = env.mj_model, env.n_substeps
    every = env.inner_loop.every if env.inner_loop is not None else n
    b = mjbatch.Batch(m, envs, nthread=os.cpu_count() or 1)
    for name in env.nominal_params():
        b.expand(name)
    qpos, qvel, ctrl = b.bind("qpos"), b.bind("qvel"), b.bind("ctrl")
    qpos0 = np.array(qpos)
    lo, hi = m.actuator_ctrlrange.T
    ctrls = np.random.default_rng(0).uniform(lo, hi, (steps, envs, m.nu))

    def once() -> float:
        qpos[:], qvel[:] = qpos0, 0.0
        t = time.perf_counter()
        for c in ctrls:
            ctrl[...] = c
            for _ in range(n // every):
                b.step(nstep=every)
        return envs * steps / (time.perf_counter() - t)

    once()  # warms the pool up
    return once


def playground_runner(name: str, envs: int, steps: int) -> Runner:
    from mujoco_playground import registry

    env = registry.load(name, config_overrides={"impl": "jax"})
    return env_runner(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, envs, steps)


def physics_runner(spec: str, backend: str, envs: int, steps: int, overrides: list[str]) -> Runner:
    """A runner (:func:`env_runner`) of the task's physics alone: each control step the action
    mapped to the backend's command (``env.control``) and ``env.physics.step`` with the task's
    inner loop (the quadrotor's 500 Hz rate loop), from states reset once, on each env's model
    parameters; no observations, rewards, terminations, delays or resets. What crazyflow's row
    times of crazyflow."""
    env = task_env(spec, backend, overrides)

    def one(state, action):
        info = state.info
        ctrl = env.control(state.pipeline_state, action, info)
        phys = env.physics.step(info["model_params"], state.pipeline_state, ctrl, env.n_substeps, env.inner_loop)
        return state.replace(pipeline_state=phys)

    return env_runner(jax.vmap(env.reset), jax.vmap(one), env.action_size, envs, steps)


def crazyflow_runner(envs: int, steps: int, physics_steps: int) -> Runner:
    """A runner (:func:`env_runner`) of crazyflow's Crazyflie 2.1 (``crazyflow.sim.Sim``: its
    first-principles analytic model in JAX, one drone per world, the floor clipped), stepped as
    simreal's quadrotor tasks step: a random (body rates, collective thrust) command at each control
    step (1 rad/s, hover thrust +-50%), then ``physics_steps`` dynamics steps at 500 Hz, its
    body-rate controller at 500 Hz (``pip install crazyflow``; it needs a jax other than 0.10.2)."""
    import jax.numpy as jnp
    from crazyflow.sim import Sim
    from crazyflow.sim import functional as cf_functional

    sim = Sim(n_worlds=envs, n_drones=1, control="body_rate", freq=500, body_rate_freq=500, device="cpu")
    hover_thrust_n = float(np.asarray(sim.data.params.mass).ravel()[0]) * 9.81

    def step(data, a):
        cmd = jnp.concatenate([a[:, :3], hover_thrust_n * (1.0 + 0.5 * a[:, 3:])], axis=1)[:, None, :]
        return sim._step(cf_functional.body_rate_control(data, cmd), n_steps=physics_steps)

    return env_runner(lambda keys: sim.data, step, 4, envs, steps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["quadrotor-hover", "cartpole-balance"])
    p.add_argument("--playground", nargs="*", default=["CartpoleBalance"], help="Playground env names")
    p.add_argument("--backends", nargs="+", default=["native", "mjx"])
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--bare",
        action="store_true",
        help="also time bare mujoco.rollout and mujoco.batch (stepped as the native backend) on each task's model",
    )
    p.add_argument("--override", nargs="*", default=[], help="config key=value for every task (robot=my_g1.yaml)")
    p.add_argument(
        "--physics",
        action="store_true",
        help="also time each backend's physics alone (no observations, rewards, resets), as crazyflow's row is",
    )
    p.add_argument(
        "--crazyflow",
        action="store_true",
        help="also time crazyflow's Crazyflie at the quadrotor tasks' rates (100 Hz control, 5 physics steps)",
    )
    a = p.parse_args()
    if a.playground and importlib.util.find_spec("mujoco_playground") is None:
        p.error(
            "--playground needs MuJoCo Playground (pip install playground); pass --playground with no "
            "names to leave it out"
        )
    runners: dict[tuple[str, str], Runner] = {}
    if a.crazyflow:  # first: crazyflow refuses a scipy imported without its array-API flag
        os.environ.setdefault("SCIPY_ARRAY_API", "1")
        runners[("crazyflow", "crazyflow")] = crazyflow_runner(a.envs, a.steps, physics_steps=5)
    for t in a.tasks:
        for b in a.backends:
            runners[(t, b)] = simreal_runner(t, b, a.envs, a.steps, a.override)
        if a.physics:
            for b in a.backends:
                runners[(t, f"{b} physics")] = physics_runner(t, b, a.envs, a.steps, a.override)
    for n in a.playground:
        runners[(n, "playground")] = playground_runner(n, a.envs, a.steps)
    if a.bare:
        for t in a.tasks:
            runners[(t, "rollout")] = bare_rollout_runner(t, a.envs, a.steps, False, a.override)
            runners[(t, "rollout per env")] = bare_rollout_runner(t, a.envs, a.steps, True, a.override)
            runners[(t, "batch")] = bare_batch_runner(t, a.envs, a.steps, a.override)
    rounds: dict[tuple[str, str], list[float]] = {k: [] for k in runners}
    for _ in range(a.repeats):  # the rows take turns (module docstring)
        for k, once in runners.items():
            rounds[k].append(once())
    best = {k: max(v) for k, v in rounds.items()}

    def ratio(x: tuple[str, str], y: tuple[str, str]) -> str:
        r = np.array(rounds[x]) / np.array(rounds[y])
        return f"{np.median(r):.2f}x (rounds {r.min():.2f}-{r.max():.2f})"

    dev = jax.devices()[0]
    print(
        f"\n{platform.machine()}, {jax.device_count()}x {dev.platform} {getattr(dev, 'device_kind', '')}, "
        f"{a.envs} envs, {a.steps} control steps, best of {a.repeats} rounds, {time.strftime('%Y-%m-%d')}"
        + (f", {' '.join(a.override)}" if a.override else "")
        + "\n"
    )
    label = {"playground": "mjx", "rollout": "-", "rollout per env": "-", "batch": "-", "crazyflow": "JAX"}
    print("| env | backend | env-steps/s |\n| --- | --- | ---: |")
    for (t, b), v in best.items():
        name = {
            "playground": f"Playground {t}",
            "rollout": f"{t}: bare `mujoco.rollout`, one model",
            "rollout per env": f"{t}: bare `mujoco.rollout`, a model per env (as domain randomisation needs)",
            "batch": f"{t}: bare `mujoco.batch` as the native backend steps it, no controller",
            "crazyflow": "crazyflow Crazyflie 2.1, body rates at 500 Hz, 5 physics steps a control step",
        }.get(b, f"simreal {t}" + (": physics alone" if b.endswith(" physics") else ""))
        print(f"| {name} | {label.get(b, b)} | {v:,.0f} |")
    print()
    for t in a.tasks:
        if (t, "native") in runners and (t, "mjx") in runners:
            print(f"- {t}: native / mjx = {ratio((t, 'native'), (t, 'mjx'))}")
        if (t, "native") in runners and a.bare:
            print(
                f"- {t}: native / bare rollout = {ratio((t, 'native'), (t, 'rollout'))} (one model), "
                f"{ratio((t, 'native'), (t, 'rollout per env'))} (a model per env), "
                f"{ratio((t, 'native'), (t, 'batch'))} (bare batch)"
            )
        if (t, "rigid") in runners and (t, "native") in runners:
            print(f"- {t}: rigid / native = {ratio((t, 'rigid'), (t, 'native'))}")
        if (t, "rigid") in runners and a.crazyflow:
            print(f"- {t}: rigid / crazyflow = {ratio((t, 'rigid'), ('crazyflow', 'crazyflow'))}")
        if (t, "rigid physics") in runners and a.crazyflow:
            print(f"- {t}: rigid physics alone / crazyflow = {ratio((t, 'rigid physics'), ('crazyflow', 'crazyflow'))}")
        if (t, "native") in runners and a.crazyflow:
            print(f"- {t}: native / crazyflow = {ratio((t, 'native'), ('crazyflow', 'crazyflow'))}")
        if (t, "rigid") in runners and a.bare:
            print(
                f"- {t}: rigid / bare rollout = {ratio((t, 'rigid'), (t, 'rollout'))} (one model), "
                f"{ratio((t, 'rigid'), (t, 'rollout per env'))} (a model per env)"
            )
        if (t, "mjx") in runners and a.bare:
            print(
                f"- {t}: bare batch / mjx = {ratio((t, 'batch'), (t, 'mjx'))} (what native / mjx could reach "
                "with nothing but the engine)"
            )
        first = next(s for s in a.tasks if variant(s, [])[0] == variant(t, [])[0])
        if first != t:
            for b in a.backends:
                print(f"- {t} / {first}, {b} = {ratio((t, b), (first, b))}")
        if (MATCHED.get(t), "playground") in runners:
            for b in a.backends:
                print(f"- {t} simreal {b} / Playground {MATCHED[t]} = {ratio((t, b), (MATCHED[t], 'playground'))}")


if __name__ == "__main__":
    main()
