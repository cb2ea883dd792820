"""The physics backends run the same task and agree on a short rollout."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.envs.wrappers.training import VmapWrapper

from simreal.policies.run_config import make_env, resolve

N_ENVS, N_STEPS = 8, 20


def rollout(backend: str, action_mode: str = "rotor_thrust"):
    cfg = resolve("quadrotor-hover", [f"env.action_mode={action_mode}"])
    env = VmapWrapper(make_env(cfg, backend=backend, obs_noise_scale=0.0), batch_size=N_ENVS)

    @jax.jit
    def run(key):
        s = env.reset(key)
        acts = 0.3 * jnp.sin(jnp.arange(N_STEPS)[:, None, None] * 0.7 + jnp.arange(4)[None, None, :])
        acts = jnp.broadcast_to(acts, (N_STEPS, N_ENVS, 4))
        return jax.lax.scan(lambda s, a: (env.step(s, a), (s.pipeline_state.qpos, s.obs)), s, acts)

    return jax.tree.map(np.asarray, run(jax.random.PRNGKey(7)))


@pytest.fixture(scope="module")
def native():
    return rollout("native")


@pytest.fixture(scope="module")
def mjx():
    return rollout("mjx")


@pytest.fixture(scope="module")
def rigid():
    return rollout("rigid")


@pytest.mark.parametrize("other", ["mjx", "rigid"])
def test_backends_agree(native, other, request):
    (s_n, (q_n, o_n)), (s_m, (q_m, o_m)) = native, request.getfixturevalue(other)
    np.testing.assert_allclose(q_n, q_m, atol=1e-4)  # float32 engines, 100 physics steps
    np.testing.assert_allclose(o_n, o_m, atol=2e-3)
    np.testing.assert_array_equal(s_n.done, s_m.done)
    # the same randomised episodes: every randomised field of the task, per env
    for k, v in s_n.info["model_params"].items():
        np.testing.assert_array_equal(v, s_m.info["model_params"][k])


def test_rollout_is_finite_and_shaped(native):
    s, (q, o) = native
    # 22 + 8: the hover default also observes its two actions before the last (action_history_steps: 2)
    assert q.shape == (N_STEPS, N_ENVS, 7) and o.shape == (N_STEPS, N_ENVS, 22 + 8)
    assert np.isfinite(q).all() and np.isfinite(o).all()


def test_domain_randomisation_varies_per_env(native):
    s, _ = native
    mass = np.asarray(s.info["model_params"]["body_mass"])[:, 1]
    assert mass.std() > 0 and (mass > 0.032 * 0.89).all() and (mass < 0.032 * 1.11).all()


def test_ctbr_mode_runs_rate_loop_on_every_backend():
    (_, (q_n, _)), (_, (q_m, _)), (_, (q_r, _)) = (rollout(b, "ctbr") for b in ("native", "mjx", "rigid"))
    np.testing.assert_allclose(q_n, q_m, atol=1e-4)
    np.testing.assert_allclose(q_n, q_r, atol=1e-4)


@pytest.mark.parametrize("backend", ["native", "mjx", "rigid"])
def test_inner_loop_equals_one_update_per_physics_step(backend):
    """The ctbr rate loop as an InnerLoop (native: in numpy inside one callback; MJX: inside the
    XLA program) gives the state of updating the controls by hand before each physics step."""
    cfg = resolve("quadrotor-hover", ["env.action_mode=ctbr"])
    env = make_env(cfg, backend=backend, obs_noise_scale=0.0)
    loop = env.inner_loop
    assert loop is not None and loop.every == 1 and env.n_substeps == 5
    state = env.reset(jax.random.PRNGKey(3))
    params, phys0 = state.info["model_params"], state.pipeline_state
    command = env.control(phys0, jnp.array([0.2, 0.5, -0.4, 0.3]), state.info)  # T, roll/pitch/yaw rate
    np.testing.assert_allclose(command[1:], [5.0, -4.0, 3.0], rtol=1e-6)

    at_once = jax.jit(lambda p, c: env.physics.step(params, p, c, env.n_substeps, loop))(phys0, command)

    @jax.jit
    def by_hand(p, c):
        for _ in range(env.n_substeps):
            p = env.physics.step(params, p, loop.fn(c, p.qvel, jnp), 1)
        return p

    manual = by_hand(phys0, command)
    np.testing.assert_allclose(at_once.qvel, manual.qvel, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(at_once.qpos, manual.qpos, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(at_once.act, manual.act, rtol=1e-4, atol=1e-7)
    # the loop acted: the body rates moved towards the command from where they started
    err0 = np.abs(np.asarray(command[1:]) - np.asarray(phys0.qvel[3:6]))
    assert (np.abs(np.asarray(command[1:]) - np.asarray(at_once.qvel[3:6])) < err0).all()


def test_a_rate_loop_that_does_not_divide_the_control_period_is_a_config_error():
    """170 Hz on 2 ms physics steps is every 3 steps, which does not divide the 5 steps of a
    100 Hz control period: refused naming the key (the loop would otherwise drop steps)."""
    import dataclasses

    from simreal.errors import ConfigError
    from simreal.robot_spec import load_robot_spec

    env = make_env(resolve("quadrotor-hover", []), backend="native")
    spec = load_robot_spec("crazyflie2")
    bad = dataclasses.replace(spec, physical={**spec.physical, "rate_controller_hz": 170.0})
    with pytest.raises(ConfigError, match="rate_controller_hz.*every 3 physics steps.*5 physics steps"):
        type(env)(bad, env.cfg, "native")
    ok = dataclasses.replace(spec, physical={**spec.physical, "rate_controller_hz": 100.0})
    assert type(env)(ok, env.cfg, "native").inner_loop.every == 5


def test_concurrent_host_steps_get_their_own_states():
    """The native backend's host step, called from two threads at once as the shards of a
    data-parallel step call it, returns what each call returns alone; shards of one size share
    a batch, so without the backend's lock one call steps the other's states."""
    import threading

    from simreal.sim.backends.native import NativeBackend

    env = make_env(resolve("quadrotor-hover"), backend="native")
    m, n = env.mj_model, 64
    backend = NativeBackend(m)
    names = tuple(sorted(env.nominal_params()))
    nominal = {k: np.asarray(v, np.float32) for k, v in env.nominal_params().items()}
    params = [np.broadcast_to(nominal[k], (n,) + nominal[k].shape).copy() for k in names]
    rng = np.random.default_rng(0)

    def inputs(seed_shift: float):
        qpos = np.tile(m.qpos0.astype(np.float32), (n, 1))
        qpos[:, :3] += rng.normal(0.0, 1.0, (n, 3)).astype(np.float32) + seed_shift
        qvel = rng.normal(0.0, 2.0, (n, m.nv)).astype(np.float32)
        act = np.zeros((n, m.na), np.float32)
        ctrl = rng.uniform(0.0, 0.4, (n, 4)).astype(np.float32)
        return (qpos, qvel, act, ctrl, *params)

    def call(args):
        out = tuple(np.zeros((n, k), np.float32) for k in (m.nq, m.nv, m.na, m.nsensordata))
        backend._host_step(env.n_substeps, names, env.inner_loop, None, out, *args)
        return out[0]

    calls = [inputs(0.0), inputs(10.0)]
    alone = [call(a) for a in calls]
    got: dict[tuple[int, int], np.ndarray] = {}

    def worker(i: int) -> None:
        for r in range(30):
            got[(i, r)] = call(calls[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not np.allclose(alone[0], alone[1])
    for (i, _), q in got.items():
        np.testing.assert_array_equal(q, alone[i])


def test_the_copying_callback_steps_as_the_in_place_one(monkeypatch):
    """Lowered for a platform other than the CPU (a GPU, whose buffers numpy cannot read), the
    native backend's host calls go through ``jax.pure_callback``; forced here on the CPU, that
    path gives the in-place path's rollout bit for bit (rate loop, resets, sensors)."""
    in_place = rollout("native", "ctbr")
    monkeypatch.setattr(jax.lax, "platform_dependent", lambda *a, cpu, default: default(*a))
    copied = rollout("native", "ctbr")
    for a, b in zip(jax.tree.leaves(in_place), jax.tree.leaves(copied)):
        np.testing.assert_array_equal(a, b)


def test_only_the_envs_that_reset_get_new_model_constants():
    """mj_setConst (100 us an env) runs for the envs whose randomised fields changed. A reset's
    sensor pass once wrote every env's discarded new-episode candidate into the batch, so the
    next step wrote them all back, and both recomputed every env's constants: two full
    mj_setConst passes a control step, 20% of a G1 training's time (models with sensors, whose
    reset computes them)."""
    from simreal.sim.backends import native

    env = make_env(resolve("g1-velocity", ["train.num_envs=64"]))  # a model with sensors: a reset's pass
    recomputed = []

    class Counting:
        def __init__(self, batch):
            self._batch = batch

        def __getattr__(self, name):
            return getattr(self._batch, name)

        def set_const(self, rows):
            recomputed.append(len(rows))
            return self._batch.set_const(rows)

    step = jax.jit(jax.vmap(env.step))
    s = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 64))
    s = step(s, jnp.zeros((64, env.action_size)))
    for sims in env.physics._sims.values():
        sims.batch = Counting(sims.batch)
    resets = 0
    for i in range(40):
        s = step(s, jax.random.uniform(jax.random.PRNGKey(i), (64, env.action_size), minval=-1, maxval=1))
        resets += int(np.asarray(s.done).sum())
    assert resets > 0
    assert sum(recomputed) <= 2 * resets, (sum(recomputed), resets)  # was ~64 twice a step
    assert isinstance(env.physics, native.NativeBackend)


def test_mjx_on_a_cpu_warns_where_two_cholesky_factorizations_can_hang(capsys):
    """The walking G1 (Newton solver, implicitfast integrator) steps two batched Cholesky
    factorizations on MJX, the pair that hung on a 2-core CPU (simreal.sim.backends.mjx_backend);
    the quadrotor's model (no implicit integrator) does not warn."""
    from simreal.robot_spec import load_robot_spec
    from simreal.sim.backends.mjx_backend import warn_cpu_cholesky
    from simreal.sim.robots import build_model

    g1 = build_model(load_robot_spec("g1_12dof"))
    assert warn_cpu_cholesky(g1)
    assert "backend=native" in capsys.readouterr().err
    g1.opt.integrator = 0  # Euler: one factorization a step (the solver's)
    assert not warn_cpu_cholesky(g1)
    assert not warn_cpu_cholesky(build_model(load_robot_spec("crazyflie2"))) and not capsys.readouterr().err
