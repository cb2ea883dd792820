"""Both physics backends run the same task and agree on a short rollout."""

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


def test_backends_agree(native, mjx):
    (s_n, (q_n, o_n)), (s_m, (q_m, o_m)) = native, mjx
    np.testing.assert_allclose(q_n, q_m, atol=1e-4)          # float32 engines, 100 physics steps
    np.testing.assert_allclose(o_n, o_m, atol=2e-3)
    np.testing.assert_array_equal(s_n.done, s_m.done)


def test_rollout_is_finite_and_shaped(native):
    s, (q, o) = native
    # 22 + 8: the hover default also observes its two actions before the last (action_history_steps: 2)
    assert q.shape == (N_STEPS, N_ENVS, 7) and o.shape == (N_STEPS, N_ENVS, 22 + 8)
    assert np.isfinite(q).all() and np.isfinite(o).all()


def test_domain_randomisation_varies_per_env(native):
    s, _ = native
    mass = np.asarray(s.info["model_params"]["body_mass"])[:, 1]
    assert mass.std() > 0 and (mass > 0.032 * 0.89).all() and (mass < 0.032 * 1.11).all()


def test_ctbr_mode_runs_rate_loop_on_both_backends():
    (_, (q_n, _)), (_, (q_m, _)) = rollout("native", "ctbr"), rollout("mjx", "ctbr")
    np.testing.assert_allclose(q_n, q_m, atol=1e-4)
