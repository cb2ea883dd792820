"""IQL's critics and advantage weights (simreal/policies/bc/iql.py) on a chain whose good actions are known."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from simreal.policies.bc import iql
from simreal.policies.run_config import IQLConfig


def test_expectile_loss_matches_hand_values():
    u = torch.tensor([2.0, -1.0])
    # |0.7 - 0| * 4 and |0.7 - 1| * 1, averaged
    assert iql.expectile_loss(u, 0.7).item() == pytest.approx((0.7 * 4 + 0.3 * 1) / 2)
    assert iql.expectile_loss(u, 0.5).item() == pytest.approx(0.5 * (4 + 1) / 2)


def test_transitions_pair_each_frame_with_the_reward_of_the_next():
    obs = [np.arange(3.0)[:, None], np.arange(10.0, 12.0)[:, None]]
    act = [np.array([[1.0], [2.0], [3.0]]), np.array([[4.0], [5.0]])]
    rew = [np.array([0.0, 0.1, 0.2]), np.array([0.0, 0.5])]
    s, a, r, s2 = iql.transitions(obs, act, rew)
    np.testing.assert_array_equal(s[:, 0], [0, 1, 10])
    np.testing.assert_array_equal(a[:, 0], [1, 2, 4])
    np.testing.assert_array_equal(r, [0.1, 0.2, 0.5])
    np.testing.assert_array_equal(s2[:, 0], [1, 2, 11])


def _chain(episodes: int, expert: bool, rng: np.random.Generator):
    """x' = x + 0.1 a on a line, reward -|x'|: the expert steers to 0, the others act at random."""
    obs, act, rew = [], [], []
    for _ in range(episodes):
        x = rng.uniform(-1, 1)
        xs, as_, rs = [], [], [0.0]
        for _ in range(20):
            a = float(np.clip(-5 * x, -1, 1)) if expert else rng.uniform(-1, 1)
            xs.append([x])
            as_.append([a])
            x = x + 0.1 * a
            rs.append(-abs(x))
        obs.append(np.array(xs))
        act.append(np.array(as_))
        rew.append(np.array(rs[:-1]))  # rew[t]: the reward of reaching frame t
    return obs, act, rew


def test_the_experts_frames_weigh_more_than_random_ones():
    rng = np.random.default_rng(0)
    eo, ea, er = _chain(20, True, rng)
    ro, ra, rr = _chain(20, False, rng)
    cfg = dataclasses.replace(IQLConfig(), critic_steps=1500, critic_hidden=(32, 32), learning_rate=1e-3)
    critics = iql.fit_critics(*iql.transitions(eo + ro, ea + ra, er + rr), cfg, seed=0)
    w_expert = iql.advantage_weights(critics, np.concatenate(eo), np.concatenate(ea), cfg)
    w_random = iql.advantage_weights(critics, np.concatenate(ro), np.concatenate(ra), cfg)
    assert np.all(w_expert <= cfg.max_weight) and np.all(w_random > 0)
    assert np.median(w_expert) > 1.3 * np.median(w_random), (np.median(w_expert), np.median(w_random))
    # on the random frames, the actions that head for 0 are the ones weighted up
    x, a = np.concatenate(ro)[:, 0], np.concatenate(ra)[:, 0]
    towards = np.sign(a) == -np.sign(x)
    assert np.median(w_random[towards]) > 1.3 * np.median(w_random[~towards]), (
        np.median(w_random[towards]),
        np.median(w_random[~towards]),
    )
