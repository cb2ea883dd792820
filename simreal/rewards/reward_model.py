"""A learned reward: an ensemble of Bradley-Terry reward models fitted to preference labels.

Each member ``k`` maps one observation (a state-feature vector (d,) through an MLP, or an RGB
frame (H, W, 3) uint8 through a small CNN) to a scalar reward ``r_k``; a segment (T, ...) scores
the sum over its steps (PEBBLE, Lee et al. 2021). The preference model is Bradley-Terry:

    P(a > b) = sigmoid(R(a) - R(b))

fitted by binary cross-entropy with target ``1`` for label 0 (``a`` closer to the goal), ``0`` for
label 1, and for label -1 (cannot tell) either no term (``unsure="skip"``) or target 0.5
(``unsure="tie"``). Members differ by initialisation and by the order of their minibatches, and
all see every label (as PEBBLE and RL-VLM-F train theirs); the learned reward is the members'
mean, their spread an uncertainty. State features are standardised with the mean and standard
deviation of the observations fitted on (kept in the model); frames are scaled to [0, 1].

    >>> model = BTEnsemble(RewardModelConfig(input_shape=(3,)))               # doctest: +SKIP
    >>> fit(model, obs_a, obs_b, labels)                                      # doctest: +SKIP
    >>> preference_accuracy(model, test_a, test_b, true_labels)               # doctest: +SKIP
    >>> save_reward_model("reward.safetensors", model)                        # doctest: +SKIP

Saved with safetensors (tensors plus the config as JSON metadata), never pickle.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from simreal.errors import ConfigError, DataFileError
from simreal.safetensors_io import load_tensors, save_tensors

#: safetensors metadata ``format`` of a saved model.
FORMAT = "simreal-bt-reward-ensemble/1"


@dataclasses.dataclass(frozen=True)
class RewardModelConfig:
    """Shape of one observation, (d,) state features or (H, W, 3) frames, and the network's size."""

    input_shape: tuple[int, ...]
    members: int = 3
    hidden: int = 64
    #: For state features: the observation terms (``simreal.observations``) they concatenate, in
    #: order, so training can rebuild them from the simulator; empty for frames or unnamed features.
    obs_terms: tuple[str, ...] = ()
    #: For frames: the model camera they were rendered from (training renders it at input_shape).
    camera: str = ""

    def __post_init__(self) -> None:
        shape = tuple(self.input_shape)
        if not (len(shape) == 1 or (len(shape) == 3 and shape[-1] == 3)) or min(shape) < 1:
            raise ConfigError(
                "reward_model.input_shape", f"expected (d,) state features or (H, W, 3) frames, got {shape}"
            )
        if self.members < 1 or self.hidden < 1:
            raise ConfigError("reward_model.members", "members and hidden must be >= 1")

    @property
    def is_image(self) -> bool:
        return len(self.input_shape) == 3


def _member(config: RewardModelConfig) -> nn.Module:
    """One reward network: observation (N, *input_shape) -> reward (N, 1)."""
    h = config.hidden
    if not config.is_image:
        return nn.Sequential(
            nn.Linear(config.input_shape[0], h), nn.LeakyReLU(), nn.Linear(h, h), nn.LeakyReLU(), nn.Linear(h, 1)
        )
    height, width, _ = config.input_shape
    conv = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.LeakyReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.LeakyReLU(),
        nn.Flatten(),
    )
    flat = conv(torch.zeros(1, 3, height, width)).shape[1]  # spatial size after the two stride-2 convs
    return nn.Sequential(conv, nn.Linear(flat, h), nn.LeakyReLU(), nn.Linear(h, 1))


class BTEnsemble(nn.Module):
    """``members`` reward networks and the input normalisation they share."""

    obs_mean: torch.Tensor  # buffers (register_buffer), declared for the type checker
    obs_std: torch.Tensor

    def __init__(self, config: RewardModelConfig):
        super().__init__()
        self.config = config
        self.members = nn.ModuleList(_member(config) for _ in range(config.members))
        d = config.input_shape[0] if not config.is_image else 1
        self.register_buffer("obs_mean", torch.zeros(d))
        self.register_buffer("obs_std", torch.ones(d))

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        """(N, *input_shape) raw observations -> the networks' input."""
        if self.config.is_image:
            return x.float().permute(0, 3, 1, 2) / 255.0  # (N, 3, H, W) in [0, 1]
        return (x.float() - self.obs_mean) / self.obs_std

    def forward(self, x: torch.Tensor, member: int | None = None) -> torch.Tensor:
        """Rewards (K, N) of observations (N, *input_shape), or returns of segments (N, T, *input_shape);
        (N,) of one ``member`` only when given."""
        nd = len(self.config.input_shape)
        if tuple(x.shape[-nd:]) != tuple(self.config.input_shape) or x.ndim not in (nd + 1, nd + 2):
            raise ValueError(
                f"expected observations (N, *{self.config.input_shape}) or segments "
                f"(N, T, *{self.config.input_shape}), got {tuple(x.shape)}"
            )
        lead = x.shape[:-nd]
        flat = self._prepare(x.reshape(-1, *self.config.input_shape))
        nets = self.members if member is None else [self.members[member]]
        r = torch.stack([net(flat)[:, 0] for net in nets]).reshape(len(nets), *lead)
        r = r.sum(-1) if x.ndim == nd + 2 else r  # a segment scores the sum of its steps
        return r if member is None else r[0]

    @torch.no_grad()
    def reward(self, obs: np.ndarray) -> np.ndarray:
        """The learned reward: the members' mean (N,) float32, of observations (N, *input_shape)."""
        return (
            self(torch.as_tensor(np.array(obs))).mean(0).numpy().astype(np.float32)
        )  # a copy: jax hands read-only arrays


def bt_targets(labels: np.ndarray, unsure: str = "skip") -> tuple[np.ndarray, np.ndarray]:
    """(rows used, P(a > b) targets) for labels in {0, 1, -1}: 0 -> 1.0, 1 -> 0.0, -1 -> dropped or 0.5."""
    labels = np.asarray(labels)
    if unsure not in ("skip", "tie"):
        raise ConfigError("reward_model.unsure", f"expected skip or tie, got {unsure!r}")
    keep = np.flatnonzero(labels != -1) if unsure == "skip" else np.arange(len(labels))
    target = np.where(labels[keep] == 0, 1.0, np.where(labels[keep] == 1, 0.0, 0.5))
    return keep, target.astype(np.float32)


def bt_loss(r_a: torch.Tensor, r_b: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of P(a > b) = sigmoid(r_a - r_b) against ``target`` (per member, then summed)."""
    logits = r_a - r_b  # (K, N)
    return (
        nn.functional.binary_cross_entropy_with_logits(logits, target.expand_as(logits), reduction="none")
        .mean(-1)
        .sum()
    )


def fit(
    model: BTEnsemble,
    obs_a: np.ndarray,
    obs_b: np.ndarray,
    labels: np.ndarray,
    epochs: int = 100,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    unsure: str = "skip",
    seed: int = 0,
    on_epoch: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Fit every member to the labelled pairs (module docstring); returns each epoch's loss per pair and member.

    Args:
      obs_a, obs_b: (M, *input_shape) or segments (M, T, *input_shape).
      labels: (M,) in {0, 1, -1}.
      unsure: what a -1 label does: "skip" or "tie" (target 0.5).
      on_epoch: called after each epoch with (epochs done, its loss): progress.
    """
    keep, target = bt_targets(labels, unsure)
    if len(keep) == 0:
        raise ValueError(f"no usable labels: all {len(labels)} are -1 (cannot tell) and unsure='skip'")
    a = torch.as_tensor(np.asarray(obs_a)[keep])
    b = torch.as_tensor(np.asarray(obs_b)[keep])
    t = torch.as_tensor(target)
    if not model.config.is_image:  # standardise with the statistics of every observation fitted on
        seen = torch.cat([a, b]).reshape(-1, model.config.input_shape[0]).double()
        model.obs_mean.copy_(seen.mean(0).float())
        model.obs_std.copy_(seen.std(0).clamp_min(1e-6).float() if len(seen) > 1 else torch.ones_like(model.obs_std))
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    # each member walks the data in its own order: one permutation per member per epoch
    generator = torch.Generator().manual_seed(seed)
    n, k = len(t), len(model.members)
    history = []
    model.train()
    for _ in range(epochs):
        orders = torch.stack([torch.randperm(n, generator=generator) for _ in range(k)])  # (K, n)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = orders[:, start : start + batch_size]  # (K, B)
            r_a = torch.stack([model(a[idx[m]], member=m) for m in range(k)])
            r_b = torch.stack([model(b[idx[m]], member=m) for m in range(k)])
            loss = bt_loss(r_a, r_b, t[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * idx.shape[1]
        history.append(total / (n * k))
        if on_epoch is not None:
            on_epoch(len(history), history[-1])
    model.eval()
    return history


def agreement(reward_a: np.ndarray, reward_b: np.ndarray, labels: np.ndarray) -> float | None:
    """Share of the pairs labelled 0 (``a`` preferred) or 1 whose rewards (M,) order them the same
    way, over the pairs whose rewards differ; None when no pair counts."""
    labels = np.asarray(labels)
    rows = (labels != -1) & (reward_a != reward_b)
    if not rows.any():
        return None
    return float((np.where(reward_a[rows] > reward_b[rows], 0, 1) == labels[rows]).mean())


def preference_accuracy(model: BTEnsemble, obs_a: np.ndarray, obs_b: np.ndarray, labels: np.ndarray) -> float:
    """:func:`agreement` of the ensemble's mean reward with ``labels`` (-1 labels ignored)."""
    labels = np.asarray(labels)
    rows = np.flatnonzero(labels != -1)
    score = (
        agreement(model.reward(np.asarray(obs_a)[rows]), model.reward(np.asarray(obs_b)[rows]), labels[rows])
        if len(rows)
        else None
    )
    if score is None:
        raise ValueError("no pairs labelled 0 or 1 to score")
    return score


def save_reward_model(path: str | Path, model: BTEnsemble) -> None:
    """Write the ensemble's tensors and config to ``path`` (safetensors), atomically."""
    save_tensors(path, model.state_dict(), FORMAT, {"config": json.dumps(dataclasses.asdict(model.config))})


def load_reward_model(path: str | Path) -> BTEnsemble:
    """The ensemble saved at ``path``; DataFileError when it is not one (naming what is wrong)."""
    meta, tensors = load_tensors(path, "reward model saved by save_reward_model", FORMAT)
    try:
        fields = json.loads(meta["config"])
        config = RewardModelConfig(
            input_shape=tuple(fields["input_shape"]),
            members=int(fields["members"]),
            hidden=int(fields["hidden"]),
            obs_terms=tuple(fields.get("obs_terms", ())),
            camera=str(fields.get("camera", "")),
        )
    except (KeyError, TypeError, ValueError, json.JSONDecodeError, ConfigError) as e:
        raise DataFileError(str(path), f"metadata 'config' is not a reward model config ({e})") from None
    model = BTEnsemble(config)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        raise DataFileError(
            str(path), f"tensors do not match the config {config}: {str(e).splitlines()[-1].strip()[:200]}"
        ) from None
    bad = [name for name, t in model.state_dict().items() if not bool(torch.isfinite(t).all())]
    if bad or not bool((model.obs_std > 0).all()):  # a NaN reward trained on as 0, silently
        raise DataFileError(
            str(path),
            f"tensor '{bad[0]}' holds NaN or inf"
            if bad
            else "tensor 'obs_std' holds a value <= 0 (features are divided by it)",
        )
    return model.eval()
