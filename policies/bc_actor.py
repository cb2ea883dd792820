"""The behaviour-cloned actor: an MLP between the dataset's normalisations, and its checkpoint.

    actor = make_actor(n, m, hidden=(64, 64), activation="tanh", norm=Normalization.from_stats(ds.stats))
    a = actor.act(obs)                       # raw observation (N, n) -> action (N, m) in [-1, 1]

The computation (``policies/bc.py`` fits ``f_theta``)::

    a = clip(mu_a + sigma_a * f_theta((o - mu_o) / sigma_o), -1, 1)

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from simreal.errors import DataFileError
from simreal.policies import torch_policy
from simreal.policies.demos import ACTION, STATE, state_size
from simreal.policies.run_config import RunConfig, make_env

#: Smallest standard deviation a feature is divided by (in its own units: rad, m, action units).
STD_FLOOR = 1e-2
#: safetensors metadata ``format`` of a BC checkpoint.
FORMAT = "simreal-bc-policy/1"
CHECKPOINT = Path("checkpoints") / "policy.safetensors"


class Affine(nn.Module):
    """y = shift + scale * x, with fixed buffers: the action de-normalisation inside the actor."""

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
            return (np.asarray(stats[key]["mean"], np.float32),
                    np.maximum(np.asarray(stats[key]["std"], np.float32), STD_FLOOR))

        return cls(*mean_std(STATE), *mean_std(ACTION))

    @classmethod
    def identity(cls, n: int, m: int) -> Normalization:
        """Mean 0, deviation 1: a placeholder a checkpoint's tensors overwrite."""
        return cls(np.zeros(n), np.ones(n), np.zeros(m), np.ones(m))


def make_actor(obs_size: int, action_size: int, hidden: tuple[int, ...], activation: str,
               norm: Normalization | None = None) -> torch_policy.DeployedActor:
    """The deployed BC actor, ``DeployedActor(Sequential(mlp, Affine(sigma_a, mu_a)), mu_o, sigma_o)``
    (module docstring); ``norm`` defaults to :meth:`Normalization.identity`."""
    from simreal.policies.train_sb3 import ACTIVATIONS

    norm = norm or Normalization.identity(obs_size, action_size)
    sizes = (obs_size, *hidden)
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), ACTIVATIONS[activation]()]
    mlp = nn.Sequential(*layers, nn.Linear(sizes[-1], action_size))
    body = nn.Sequential(mlp, Affine(norm.act_std, norm.act_mean))
    return torch_policy.DeployedActor(body, norm.obs_mean, norm.obs_std)




def save_actor(path: Path, actor: torch_policy.DeployedActor, meta: dict[str, Any]) -> None:
    """Write the actor's tensors with ``meta`` (as JSON) to ``path`` (safetensors), atomically."""
    from simreal.safetensors_io import save_tensors

    save_tensors(path, actor.state_dict(), FORMAT, {"meta": json.dumps(meta)})


def load_actor(run_dir: Path, cfg: RunConfig, backend: str | None = None,
               **env_overrides: Any) -> tuple[Any, torch_policy.DeployedActor]:
    """(env, the run's actor) from ``checkpoints/policy.safetensors``, built from the run's config;
    DataFileError naming the file when it is missing, not a BC checkpoint, or of other sizes."""
    from simreal.safetensors_io import load_tensors

    env = make_env(cfg, backend=backend, **env_overrides)
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        raise DataFileError(str(path), "no BC checkpoint in this run (train it with simreal train-bc)")
    _, tensors = load_tensors(path, "BC checkpoint", FORMAT)
    actor = make_actor(state_size(env), int(env.action_size), tuple(cfg.train.policy_hidden), cfg.train.activation)
    try:
        actor.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        raise DataFileError(str(path), f"tensors do not fit the run's config (train.policy_hidden "
                                       f"{list(cfg.train.policy_hidden)}, the task's sizes): "
                                       f"{str(e).splitlines()[-1].strip()[:200]}") from None
    return env, actor.eval()
