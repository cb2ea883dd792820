"""Offline RL from a dataset relabelled with a learned reward: IQL's critics, then weighted BC.

Implicit Q-learning (Kostrikov, Nair, Levine 2021) never queries an action outside the
dataset. On transitions ``(s_t, a_t, r_t, s_{t+1})`` of the demonstrations it fits, with target
critics ``Qbar_i`` (Polyak averages of ``Q_i``, rate ``target_update``)::

    L_V = E[ L2_tau(min_i Qbar_i(s, a) - V(s)) ],       L2_tau(u) = |tau - 1(u < 0)| u^2
    L_Q = E[ sum_i (r + gamma V(s') - Q_i(s, a))^2 ]

and extracts the policy by advantage-weighted regression: the BC fit of ``simreal/policies/bc/cloning.py``
minimises its error weighted per frame by ::

    w(s, a) = min(exp(beta (min_i Qbar_i(s, a) - V(s))), w_max)

self-normalised in each minibatch (the weighted mean of the error). Because the critics never
look at the policy, they are fitted first and the weights computed once; IQL's joint updates
reach the same fixed point. The rewards are the learned reward model's
(``simreal/rewards/reward_model.py``, the members' mean) of the scene state each step reaches,
``r_t = R(e_{t+1})`` from ``observation.environment_state``, standardised over the dataset's
frames (a Bradley-Terry reward has no scale of its own, and ``beta`` needs one: unscaled, the
weights of a 60-episode arm-reach dataset sat at 0 or at the clip); an episode's last frame has no
successor and makes no transition (its weight still comes from ``Q - V``). Episodes end by time
limit, so no transition is terminal.

Defaults are d3rlpy's ``IQLConfig``: expectile 0.7, weight temperature 3.0, max weight 100,
discount 0.99, target update 0.005, two critics, learning rate 3e-4, batch 256. Written here
rather than taken from d3rlpy: d3rlpy 2.8 pins ``gymnasium==1.0.0`` and requires the retired
``gym``, which the project's other learners do not; the three losses above are all it needs.
Networks see the dataset's normalised observations and actions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class Critics:
    """IQL's fitted value functions and their final losses."""

    q: nn.ModuleList  # the target critics Qbar_i(s, a)
    v: nn.Module  # V(s)
    losses: dict[str, float]


def _mlp(n_in: int, hidden: Sequence[int]) -> nn.Module:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(n_in, h), nn.ReLU()]
        n_in = h
    return nn.Sequential(*layers, nn.Linear(n_in, 1))


def expectile_loss(u: torch.Tensor, tau: float) -> torch.Tensor:
    """``mean |tau - 1(u < 0)| u^2``: an asymmetric square, the tau-expectile's loss."""
    return (torch.abs(tau - (u < 0).to(u.dtype)) * u.square()).mean()


def fit_critics(
    obs: np.ndarray,
    act: np.ndarray,
    rew: np.ndarray,
    next_obs: np.ndarray,
    cfg,
    seed: int,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> Critics:
    """Fit IQL's critics (module docstring) on normalised transitions: ``obs`` (N, n), ``act``
    (N, m), ``rew`` (N,), ``next_obs`` (N, n); ``cfg`` the ``train.iql`` settings."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    s, a, r, s2 = (torch.as_tensor(np.asarray(v, np.float32)) for v in (obs, act, rew, next_obs))
    n, m = s.shape[1], a.shape[1]
    q = nn.ModuleList([_mlp(n + m, cfg.critic_hidden) for _ in range(2)])
    q_target = nn.ModuleList([_mlp(n + m, cfg.critic_hidden) for _ in range(2)])
    q_target.load_state_dict(q.state_dict())
    v = _mlp(n, cfg.critic_hidden)
    opt_q = torch.optim.Adam(q.parameters(), lr=cfg.learning_rate)
    opt_v = torch.optim.Adam(v.parameters(), lr=cfg.learning_rate)
    losses = {"v": float("nan"), "q": float("nan")}
    for step in range(1, cfg.critic_steps + 1):
        i = torch.randint(len(s), (cfg.batch_size,), generator=gen)
        sa = torch.cat([s[i], a[i]], -1)
        with torch.no_grad():
            q_min = torch.minimum(q_target[0](sa), q_target[1](sa))[:, 0]
        loss_v = expectile_loss(q_min - v(s[i])[:, 0], cfg.expectile)
        opt_v.zero_grad()
        loss_v.backward()
        opt_v.step()
        with torch.no_grad():
            target = r[i] + cfg.discounting * v(s2[i])[:, 0]
        loss_q = sum(((qi(sa)[:, 0] - target).square()).mean() for qi in q)
        opt_q.zero_grad()
        loss_q.backward()
        opt_q.step()
        with torch.no_grad():
            for p, pt in zip(q.parameters(), q_target.parameters()):
                pt.lerp_(p, cfg.target_update)
        losses = {"v": loss_v.item(), "q": loss_q.item()}
        if on_step is not None:
            on_step(step, losses)
    return Critics(q=q_target, v=v, losses=losses)


@torch.no_grad()
def advantage_weights(critics: Critics, obs: np.ndarray, act: np.ndarray, cfg) -> np.ndarray:
    """``w = min(exp(beta (min_i Qbar_i(s, a) - V(s))), w_max)`` (N,) of normalised (s, a)."""
    s, a = torch.as_tensor(np.asarray(obs, np.float32)), torch.as_tensor(np.asarray(act, np.float32))
    sa = torch.cat([s, a], -1)
    adv = torch.minimum(critics.q[0](sa), critics.q[1](sa))[:, 0] - critics.v(s)[:, 0]
    return torch.exp(cfg.temperature * adv).clamp(max=cfg.max_weight).numpy()


def transitions(
    obs: Sequence[np.ndarray], act: Sequence[np.ndarray], rew: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(s_t, a_t, r_t, s_{t+1}) of every episode's frames but its last; ``rew[e][t]`` is the reward
    of reaching frame t (so ``r_t = rew[e][t + 1]``)."""
    cat = np.concatenate
    return (
        cat([o[:-1] for o in obs]),
        cat([a[:-1] for a in act]),
        cat([r[1:] for r in rew]),
        cat([o[1:] for o in obs]),
    )


def episode_weights(
    obs: Sequence[np.ndarray],
    act: Sequence[np.ndarray],
    env_state: Sequence[np.ndarray],
    norm,
    cfg,
    seed: int,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    state_terms: Sequence[str] = (),
) -> tuple[list[np.ndarray], Critics]:
    """Each episode's frame weights (module docstring) from its observations, actions and scene
    states, the rewards from ``cfg.reward_model``; ``norm`` the dataset's normalisation;
    ``state_terms`` the observation terms the scene states concatenate (the dataset's feature
    names), which must be the model's: two tasks' states of one width are not one input."""
    from simreal.errors import DataFileError
    from simreal.rewards.reward_model import load_reward_model

    model = load_reward_model(cfg.reward_model)
    shape = tuple(model.config.input_shape)
    if model.config.is_image or shape != (env_state[0].shape[-1],):
        raise DataFileError(
            cfg.reward_model,
            f"reward model reads {shape}; the dataset's observation.environment_state has ({env_state[0].shape[-1]},)",
        )
    reads = tuple(model.config.obs_terms)
    if reads and state_terms and reads != tuple(state_terms):
        raise DataFileError(
            cfg.reward_model,
            f"reward model reads the terms {', '.join(reads)}; the dataset's "
            f"observation.environment_state holds {', '.join(state_terms)} "
            "(a model fitted for another task?)",
        )
    rew = [model.reward(e) for e in env_state]
    flat = np.concatenate(rew)
    rew = [(r - flat.mean()) / max(float(flat.std()), 1e-6) for r in rew]  # standardised (module docstring)
    x = [(o - norm.obs_mean) / norm.obs_std for o in obs]
    y = [(a - norm.act_mean) / norm.act_std for a in act]
    critics = fit_critics(*transitions(x, y, rew), cfg, seed, on_step)
    return [advantage_weights(critics, xi, yi, cfg) for xi, yi in zip(x, y)], critics
