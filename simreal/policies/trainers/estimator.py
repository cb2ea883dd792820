"""A state estimator learned beside the policy (``train.estimate``, trainer rsl_rl).

Ji et al., "Concurrent Training of a Control Policy and a State Estimator for Dynamic and Robust
Legged Locomotion" (RA-L 2022), as HIMLoco and DreamWaQ use it: the actor observes what the robot
measures, the critic also its base velocity; an estimator network learns the privileged terms
from the actor's own observation and the actor sees its estimate::

    x      = (o - mean) / std                    the actor's observation, normalised (rsl_rl's)
    e      = E(x)                                 an MLP; e estimates the critic's terms ``train.estimate``
    a      = pi([x, stopgrad(e)])                 the actor's MLP on the observation and the estimate

E is fitted by regression, not by PPO: each rollout's (observation, critic terms) pairs, with
their left-right mirrors when ``train.symmetry`` is on, minimise ``mean ||E(x) - y||^2`` under E's
own Adam before PPO's update, and the estimate enters the actor detached, so E learns the velocity
and not whatever helps the surrogate. The deployed graph is the same computation, obs -> action,
so the runner and the bundle need nothing new.

Written here because rsl_rl (5.x) has no estimator module; its ``MLPModel`` is extended, not
copied: only the latent (``get_latent``) changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from rsl_rl.models import MLPModel
from rsl_rl.modules import MLP, HiddenState
from tensordict import TensorDict
from torch import nn

from simreal.errors import ConfigError


def estimate_slices(env: Any, terms: Sequence[str]) -> list[slice]:
    """Where each of ``terms`` lies in the env's critic observation; ConfigError naming
    ``train.estimate`` when one is not a critic term, or is one the actor observes already."""
    if not terms:
        return []
    critic = tuple(getattr(env, "critic_obs_terms", None) or env.obs_terms)
    seen = set(env.obs_terms)
    hidden = [t for t in critic if t not in seen]
    for t in terms:
        if t not in critic or t in seen:
            why = "the actor observes it already" if t in seen else "not a critic observation term"
            raise ConfigError("train.estimate", f"'{t}': {why}; terms to estimate here: {', '.join(hidden) or 'none'}")
    slices, start = {}, 0
    for t in env.layout_of(critic):
        slices[t["name"]] = slice(start, start + int(t["size"]))
        start += int(t["size"])
    return [slices[t] for t in terms]


class EstimatorModel(MLPModel):
    """rsl_rl's MLP actor whose latent is ``[x, stopgrad(E(x))]`` (module docstring)."""

    def __init__(
        self,
        obs: TensorDict,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int,
        estimate_dim: int = 3,
        estimator_hidden: Sequence[int] = (128, 64),
        activation: str = "elu",
        **kwargs: Any,
    ) -> None:
        self._estimate_dim = int(estimate_dim)  # read by _get_latent_dim inside MLPModel.__init__
        super().__init__(obs, obs_groups, obs_set, output_dim, activation=activation, **kwargs)
        self.estimator = MLP(self.obs_dim, self._estimate_dim, list(estimator_hidden), activation)

    def _get_latent_dim(self) -> int:
        return self.obs_dim + self._estimate_dim

    def get_latent(
        self, obs: TensorDict, masks: torch.Tensor | None = None, hidden_state: HiddenState = None
    ) -> torch.Tensor:
        x = super().get_latent(obs, masks, hidden_state)
        return torch.cat([x, self.estimator(x).detach()], dim=-1)


class EstimatedBody(nn.Module):
    """The deployed body: normalised obs x -> pi([x, E(x)]) (the torch_policy.DeployedActor's body)."""

    def __init__(self, estimator: nn.Module, mlp: nn.Module):
        super().__init__()
        self.estimator, self.mlp = estimator, mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([x, self.estimator(x)], dim=-1))


class EstimatorFit:
    """E's regression on each rollout (module docstring): ``epochs`` passes in ``minibatches``."""

    def __init__(
        self,
        model: EstimatorModel,
        slices: list[slice],
        epochs: int,
        minibatches: int,
        learning_rate: float = 1e-3,
        mirror: Callable[[TensorDict], TensorDict] | None = None,
    ):
        self.model, self.slices, self.epochs, self.minibatches = model, slices, epochs, minibatches
        self.mirror = mirror
        self.optimizer = torch.optim.Adam(model.estimator.parameters(), lr=learning_rate)

    def targets(self, critic: torch.Tensor) -> torch.Tensor:
        return torch.cat([critic[..., s] for s in self.slices], dim=-1)

    def fit(self, observations: TensorDict) -> dict[str, float]:
        """One rollout's observations (T, N) with groups ``policy`` and ``critic`` -> the mean
        squared error over the updates and the RMS error per estimated value after them."""
        obs = observations.flatten(0, 1)
        if self.mirror is not None:
            obs = self.mirror(obs)
        with torch.no_grad():
            x = self.model.obs_normalizer(obs["policy"])  # the actor's input, as in get_latent
            y = self.targets(obs["critic"])
        n, losses = x.shape[0], []
        for _ in range(self.epochs):
            for idx in torch.randperm(n).chunk(self.minibatches):
                loss = (self.model.estimator(x[idx]) - y[idx]).pow(2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                losses.append(loss.item())
        with torch.no_grad():
            rms = float((self.model.estimator(x) - y).pow(2).mean().sqrt())
        return {"estimator": sum(losses) / len(losses), "estimator_rms": rms}

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)
