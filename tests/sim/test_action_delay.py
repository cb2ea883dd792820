"""The env's action delay (simreal/sim/env.py): whole and fractional control periods."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simreal.policies.run_config import make_env, resolve

QUIET = ["backend=native", "env.randomize=false", "env.obs_noise_scale=0"]


def _rollout(delay: float, actions: np.ndarray):
    env = make_env(resolve("cartpole-balance", QUIET + [f"env.action_delay_steps=[{delay},{delay}]"]))
    step = jax.jit(env.step)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    applied = []
    for a in actions:
        state = step(state, jnp.asarray(a, jnp.float32))
        applied.append(np.asarray(env.applied_action(state.info)))
    return np.array(applied), np.asarray(state.pipeline_state.qvel)


@pytest.fixture(scope="module")
def runs():
    actions = np.array([[0.0]] * 3 + [[1.0]] * 3 + [[-0.5]] * 2)
    return actions, {d: _rollout(d, actions) for d in (1.0, 1.5, 2.0)}


def test_whole_delays_apply_the_action_that_many_periods_back(runs):
    actions, out = runs
    np.testing.assert_allclose(out[1.0][0][1:], actions[:-1], atol=1e-6)
    np.testing.assert_allclose(out[2.0][0][2:], actions[:-2], atol=1e-6)
    np.testing.assert_allclose(out[2.0][0][:2], 0.0, atol=1e-6)  # nothing chosen yet: zeros


def test_a_fractional_delay_applies_the_average_of_its_two_neighbours(runs):
    actions, out = runs
    np.testing.assert_allclose(out[1.5][0][2:], 0.5 * (actions[1:-1] + actions[:-2]), atol=1e-6)
    # the physics sees it: the cart's velocity after a step input lies between the whole delays'
    v1, v15, v2 = (out[d][1][0] for d in (1.0, 1.5, 2.0))
    assert min(v1, v2) < v15 < max(v1, v2)
    assert abs(v15 - 0.5 * (v1 + v2)) < 0.05 * abs(v1 - v2)


def test_negative_delay_is_refused_naming_the_element():
    from simreal.errors import ConfigError

    with pytest.raises(ConfigError, match=r"env.action_delay_steps\[0\]"):
        resolve("cartpole-balance", ["env.action_delay_steps=[-1,1]"])


def test_action_history_observes_the_actions_before_the_last_newest_first():
    env = make_env(resolve("quadrotor-hover", QUIET + ["env.action_history_steps=2"]))
    assert env.obs_terms[-2:] == ("last_action", "action_history") and env.observation_size == 22 + 8
    step = jax.jit(env.step)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(state.obs)[-12:], 0.0)  # nothing chosen yet
    actions = [np.array([0.1, 0.11, 0.12, 0.13]) + 0.1 * i for i in range(3)]
    for a in actions:
        state = step(state, jnp.asarray(a, jnp.float32))
    obs = np.asarray(state.obs)
    np.testing.assert_allclose(obs[-12:-8], actions[2], atol=1e-6)  # last_action
    np.testing.assert_allclose(obs[-8:], np.concatenate([actions[1], actions[0]]), atol=1e-6)


def test_without_action_history_the_observation_is_unchanged():
    env = make_env(resolve("quadrotor-hover", QUIET + ["env.action_history_steps=0"]))
    assert "action_history" not in env.obs_terms and env.observation_size == 22


def _frames(history: int, episode_s: float = 5.0) -> list[np.ndarray]:
    env = make_env(
        resolve("quadrotor-hover", QUIET + [f"env.obs_history_steps={history}", f"env.episode_length_s={episode_s}"])
    )
    step = jax.jit(env.step)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    out = [np.asarray(state.obs)]
    for i in range(4):
        state = step(state, jnp.full((4,), 0.1 * i, jnp.float32))
        out.append(np.asarray(state.obs))
    return out


def test_obs_history_stacks_the_frames_newest_first_and_an_episode_starts_with_its_first():
    """``env.obs_history_steps=3``: the observation is [f_t, f_t-1, f_t-2] of the frames the
    one-frame env observes on the same rollout; the first observation repeats its frame."""
    single, stacked = _frames(1), _frames(3)
    n = single[0].size
    assert all(s.shape == (3 * n,) for s in stacked)
    np.testing.assert_allclose(stacked[0], np.tile(single[0], 3), atol=1e-6)
    np.testing.assert_allclose(stacked[1], np.concatenate([single[1], single[0], single[0]]), atol=1e-6)
    for t in (2, 3, 4):
        np.testing.assert_allclose(stacked[t], np.concatenate([single[t], single[t - 1], single[t - 2]]), atol=1e-5)


def test_an_auto_reset_episode_starts_its_history_again():
    """An episode of 2 control steps: after its end the next episode's first observation is its
    own frame three times, nothing of the last episode."""
    obs = _frames(3, episode_s=0.02)
    n = obs[0].size // 3
    after = obs[2]  # the step that ended the first episode returns the second's first observation
    np.testing.assert_allclose(after[:n], after[n : 2 * n], atol=1e-6)
    np.testing.assert_allclose(after[:n], after[2 * n :], atol=1e-6)
    assert not np.allclose(obs[3][:n], obs[3][n : 2 * n])  # and then it moves on


def test_obs_history_below_one_is_refused_naming_the_key():
    from simreal.errors import ConfigError

    with pytest.raises(ConfigError, match=r"env.obs_history_steps"):
        resolve("quadrotor-hover", ["env.obs_history_steps=0"])
