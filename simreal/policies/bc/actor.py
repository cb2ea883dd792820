"""The behaviour-cloned actor: a network between the dataset's normalisations, and its checkpoint.

    actor = make_actor(env, cfg.train, norm=Normalization.from_stats(ds.stats))
    a = actor.act(obs)                       # raw observation (N, n) -> action (N, m) in [-1, 1]
                                             #   (train.policy act: the chunk (N, k, m))
    policy = deployed_policy(actor, action_chunk(env, cfg.train))   # one action per step (N, m)

The computation (``simreal/policies/bc/cloning.py`` fits ``f_theta``)::

    a = clip(mu_a + sigma_a * f_theta((o - mu_o) / sigma_o), -1, 1)

``f_theta`` is ``train.policy``'s row of :data:`NETWORKS`: ``mlp`` (``train.policy_hidden``,
``train.activation``; (N, n) -> (N, m)), ``act`` (``simreal/policies/bc/act.py``, ``train.act``) or ``flow``
(``simreal/policies/bc/flow.py``, ``train.flow``), both (N, n) -> (N, k, m), the actions of the next ``k``
steps, ensembled over steps by :func:`deployed_policy`.

``mu`` and ``sigma`` are the dataset's per-feature mean and standard deviation of
``observation.state`` and ``action`` (``meta/stats.json``), ``sigma`` floored at
:data:`STD_FLOOR`: a feature constant in the demonstrations (a gripper held closed) would turn
the policy's smallest deviation from it into a huge input. Both normalisations are buffers of
the actor (a :class:`~simreal.policies.torch_policy.DeployedActor`, whose input normalisation the
bundle lists as every bundle does), so they are in its checkpoint and in ``policy.onnx``: one
source of truth for training, ``simreal eval`` and the robot. The checkpoint is
``checkpoints/policy.safetensors`` in the run directory: the actor's tensors, never a pickle.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from simreal.action_chunk import ActionChunk, ChunkedPolicy
from simreal.config import to_dict
from simreal.errors import DataFileError
from simreal.policies import torch_policy
from simreal.policies.bc import act, flow
from simreal.policies.demos.record import ACTION, STATE, state_size
from simreal.policies.run_config import RunConfig, make_env

#: Smallest standard deviation a feature is divided by (in its own units: rad, m, action units).
STD_FLOOR = 1e-2
#: safetensors metadata ``format`` of a BC checkpoint.
FORMAT = "simreal-bc-policy/1"
CHECKPOINT = Path("checkpoints") / "policy.safetensors"


class Affine(nn.Module):
    """y = shift + scale * x, with fixed buffers: the action de-normalisation inside the actor."""

    scale: torch.Tensor  # buffers (register_buffer in __init__)
    shift: torch.Tensor

    def __init__(self, scale: np.ndarray, shift: np.ndarray):
        super().__init__()
        self.register_buffer("scale", torch.as_tensor(np.asarray(scale, np.float32)))
        self.register_buffer("shift", torch.as_tensor(np.asarray(shift, np.float32)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shift + self.scale * x


@dataclasses.dataclass(frozen=True)
class Normalization:
    """Per-feature mean and standard deviation of the observation (n,) and action (m,), in their
    own units, the deviations floored at :data:`STD_FLOOR`."""

    obs_mean: np.ndarray
    obs_std: np.ndarray
    act_mean: np.ndarray
    act_std: np.ndarray

    @classmethod
    def from_stats(cls, stats: Mapping[str, Mapping[str, np.ndarray]]) -> Normalization:
        """From a dataset's statistics (``meta/stats.json``: feature -> ``mean``, ``std``, ...)."""

        def mean_std(key: str) -> tuple[np.ndarray, np.ndarray]:
            return (
                np.asarray(stats[key]["mean"], np.float32),
                np.maximum(np.asarray(stats[key]["std"], np.float32), STD_FLOOR),
            )

        return cls(*mean_std(STATE), *mean_std(ACTION))

    @classmethod
    def identity(cls, n: int, m: int) -> Normalization:
        """Mean 0, deviation 1: a placeholder a checkpoint's tensors overwrite."""
        return cls(np.zeros(n), np.ones(n), np.zeros(m), np.ones(m))


def _mlp(env: Any, tc: Any) -> nn.Module:
    """``f_theta`` of ``train.policy: mlp``: (N, n) -> (N, m) through ``train.policy_hidden``."""
    from simreal.policies.trainers.sb3 import ACTIVATIONS

    sizes = (state_size(env), *tc.policy_hidden)
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), ACTIVATIONS[tc.activation]()]
    return nn.Sequential(*layers, nn.Linear(sizes[-1], int(env.action_size)))


#: A fit's loss of a batch: (f_theta, x (N, n), y targets, valid targets, generator) -> scalar.
Loss = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]
#: An elementwise error of a batch: (f_theta, x, y (N, [k,] m), generator) -> (N, [k,] m).
#: (f_theta is Any: the module its Network's build makes, a FlowPolicy for flow's error)
Error = Callable[[Any, torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


def masked_mean(err: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean of the elementwise error ``err`` (..., m) over the valid targets (...) and the m action
    dimensions (ACT's padded L1 loss; all targets valid: the plain mean)."""
    v = valid.unsqueeze(-1).to(err.dtype)
    return (err * v).sum() / (v.sum() * err.shape[-1]).clamp_min(1)


def masked(error: Error) -> Loss:
    """The loss that averages ``error`` over the valid targets (:func:`masked_mean`)."""

    def loss(
        net: nn.Module, x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        return masked_mean(error(net, x, y, generator), valid)

    return loss


def regression(e: Callable[[torch.Tensor], torch.Tensor]) -> Loss:
    """``mean e(f_theta(x) - y)`` over the valid targets and the action dimensions."""
    return masked(lambda net, x, y, generator: e(net(x) - y))


@dataclasses.dataclass(frozen=True)
class Network:
    """A ``train.policy``: its network, the losses its fit minimises and validates with, and its
    action chunk."""

    build: Callable[[Any, Any], nn.Module]  # (env, train config) -> f_theta on normalised observations
    loss: Loss  # what the fit's gradient steps minimise
    validate: Loss  # what picks the kept epoch: the error of what the network outputs
    settings: tuple[str, ...]  # the train.* keys that shape it (named when a checkpoint does not fit)
    chunk: Callable[[Any, Any], ActionChunk] | None = None  # (env, train config) -> its chunk; None: one action


#: ``train.policy`` -> its network: the MLP's squared error (a regression of the mean action), ACT's
#: L1 error (the paper's loss), the flow head's flow-matching loss (validated on the chunks it samples).
NETWORKS: dict[str, Network] = {
    "mlp": Network(_mlp, regression(torch.square), regression(torch.square), ("policy_hidden", "activation")),
    "act": Network(act.build, regression(torch.abs), regression(torch.abs), ("act",), chunk=act.action_chunk),
    "flow": Network(
        flow.build, masked(flow.flow_matching_error), regression(torch.square), ("flow",), chunk=flow.action_chunk
    ),
}


def action_chunk(env: Any, tc: Any) -> ActionChunk | None:
    """The chunk ``train.policy``'s network predicts for ``env``, None for one action per step."""
    chunk = NETWORKS[tc.policy].chunk
    return None if chunk is None else chunk(env, tc)


def make_actor(env: Any, tc: Any, norm: Normalization | None = None) -> torch_policy.DeployedActor:
    """The deployed BC actor of train config ``tc`` for ``env``,
    ``DeployedActor(Sequential(f_theta, Affine(sigma_a, mu_a)), mu_o, sigma_o)`` (module docstring);
    ``norm`` defaults to :meth:`Normalization.identity`."""
    norm = norm or Normalization.identity(state_size(env), int(env.action_size))
    body = nn.Sequential(NETWORKS[tc.policy].build(env, tc), Affine(norm.act_std, norm.act_mean))
    return torch_policy.DeployedActor(body, norm.obs_mean, norm.obs_std)


def deployed_policy(actor: torch_policy.DeployedActor, chunk: ActionChunk | None) -> Callable[[Any], np.ndarray]:
    """The actor as the per-step policy the robot runs: ``actor.act``, or for a chunked actor its
    chunks temporally ensembled (:class:`~simreal.action_chunk.ChunkedPolicy`, as the bundle's
    ONNX policy does; stateful, one call per control step)."""
    return actor.act if chunk is None else ChunkedPolicy(actor.act, chunk)


def save_actor(path: Path, actor: torch_policy.DeployedActor, meta: dict[str, Any]) -> None:
    """Write the actor's tensors with ``meta`` (as JSON) to ``path`` (safetensors), atomically."""
    from simreal.safetensors_io import save_tensors

    save_tensors(path, actor.state_dict(), FORMAT, {"meta": json.dumps(meta)})


def load_actor(
    run_dir: Path, cfg: RunConfig, backend: str | None = None, env: Any | None = None, **env_overrides: Any
) -> tuple[Any, torch_policy.DeployedActor]:
    """(env, the run's actor) from ``checkpoints/policy.safetensors``, built from the run's config;
    DataFileError naming the file when it is missing, not a BC checkpoint, or of other sizes."""
    from simreal.safetensors_io import load_tensors

    env = env if env is not None else make_env(cfg, backend=backend, **env_overrides)
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        raise DataFileError(str(path), "no BC checkpoint in this run (train it with simreal train-bc)")
    _, tensors = load_tensors(path, "BC checkpoint", FORMAT)
    actor = make_actor(env, cfg.train)
    try:
        actor.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        tc = cfg.train
        shape = ", ".join(f"train.{k} {to_dict(getattr(tc, k))}" for k in NETWORKS[tc.policy].settings)
        raise DataFileError(
            str(path),
            f"tensors do not fit the run's config (train.policy {tc.policy}, {shape}, "
            f"the task's sizes): {str(e).splitlines()[-1].strip()[:200]}",
        ) from None
    return env, actor.eval()
