"""Action chunks: a policy that predicts its next ``k`` actions at every control step, and the
temporal ensembling that turns those overlapping predictions into one action per step (ACT,
Zhao et al. 2023, Algorithm 2; LeRobot's ``ACTTemporalEnsembler``).

    chunk = ActionChunk(size=20, temporal_ensemble_coeff=0.01)
    policy = ChunkedPolicy(predict, chunk)   # predict: obs (B, n) -> chunk (B, k, m)
    a = policy(obs)                          # obs (n,) or (B, n) -> this step's action (m,) or (B, m)
    policy.reset()                           # a new episode: forget every earlier prediction

At step ``t`` the policy predicts ``A_t = (a_{t|t}, a_{t+1|t}, ..., a_{t+k-1|t})``. Step ``t`` has
then been predicted by the chunks of steps ``t-n+1 .. t``, ``n = min(t+1, k)`` of them (``t``
counted from the last reset), and the action sent is their weighted mean, oldest first::

    a_t = sum_{i=0}^{n-1} w_i a_{t|t-n+1+i} / sum_{i=0}^{n-1} w_i,      w_i = exp(-m i)

``m = 0.01`` (ACT's value) weighs older predictions slightly more, ``m = 0`` is the plain mean,
``m < 0`` favours the newest. The sums are kept running (one weighted sum and one weight total
per upcoming step), so a step costs O(k m) whatever the history.

``simreal eval`` (the torch actor's chunks) and the robot (the bundle's ONNX chunks through
:class:`simreal.bundle.OnnxPolicy`, inside the deploy runner) both go through
:class:`ChunkedPolicy`, so training-side evaluation and deployment ensemble identically.
Imports: numpy only (the robot computer's lean runtime).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

#: Horizon of a chunk whose size is 0 (a chunked policy's default) [s].
CHUNK_S = 0.4


@dataclasses.dataclass(frozen=True)
class ActionChunk:
    """A chunked policy's output: ``size`` (k) actions per prediction, ensembled with
    ``temporal_ensemble_coeff`` (m, module docstring). A bundle's ``action_chunk`` section."""

    size: int
    temporal_ensemble_coeff: float

    @classmethod
    def at_rate(cls, size: int, temporal_ensemble_coeff: float, control_rate_hz: float) -> ActionChunk:
        """A chunk of ``size`` actions, or of :data:`CHUNK_S` of control steps at ``control_rate_hz``
        when ``size`` is 0 (20 steps at 50 Hz; ACT's paper: 100 at 50 Hz)."""
        return cls(int(size) or max(1, round(CHUNK_S * control_rate_hz)), float(temporal_ensemble_coeff))

    def to_yaml(self) -> dict[str, Any]:
        return {"size": self.size, "temporal_ensemble_coeff": self.temporal_ensemble_coeff}


class TemporalEnsembler:
    """Chunks in, one ensembled action out per step (module docstring), for a batch of B envs
    stepping together. A chunk of another batch size than the last one starts over (another
    set of envs)."""

    def __init__(self, chunk: ActionChunk):
        self.k = chunk.size
        self.w = np.exp(-chunk.temporal_ensemble_coeff * np.arange(self.k))  # (k,) w_i, i = 0 the oldest
        self.reset()

    def reset(self) -> None:
        """Forget every prediction: the next step is an episode's first."""
        self._sum: np.ndarray | None = None  # (B, k, m): sum_i w_i a_{t+j|.} over step t+j's predictions
        self._total = np.zeros(self.k)  # (k,): sum_i w_i over the same predictions
        self._count = np.zeros(self.k, np.int64)  # (k,): how many predictions step t+j has had

    def __call__(self, chunk: np.ndarray) -> np.ndarray:
        """This step's chunk (B, k, m) -> this step's action (B, m), in the chunk's dtype."""
        c = np.asarray(chunk)
        if c.ndim != 3 or c.shape[1] != self.k:
            raise ValueError(f"expected a chunk of shape (B, {self.k}, m), got {c.shape}")
        if self._sum is None or self._sum.shape != c.shape:
            self.reset()
            self._sum = np.zeros(c.shape)
        w = self.w[self._count]  # step t+j's earlier predictions are older: this one's index is their count
        self._sum += w[None, :, None] * c
        self._total += w
        self._count += 1
        a = self._sum[:, 0] / self._total[0]
        # step t is done: index 0 becomes step t+1, and step t+k (no prediction yet) comes in last
        self._sum = np.concatenate([self._sum[:, 1:], np.zeros_like(self._sum[:, :1])], axis=1)
        self._total = np.append(self._total[1:], 0.0)
        self._count = np.append(self._count[1:], 0)
        return a.astype(c.dtype)


class ChunkedPolicy:
    """A chunk predictor as a per-step policy: ``predict`` (B, n) -> (B, k, m) each call, the
    ensembled action out (module docstring). The eval side and the bundle's ONNX policy share it."""

    def __init__(self, predict: Callable[[np.ndarray], np.ndarray], chunk: ActionChunk):
        self.predict = predict
        self.chunk = chunk
        self.ensembler = TemporalEnsembler(chunk)

    def reset(self) -> None:
        """A new episode (or a gap in the steps): the ensemble starts over."""
        self.ensembler.reset()

    def __call__(self, obs: Any) -> np.ndarray:
        """obs (n,) or (B, n) (numpy or JAX) -> this step's action (m,) or (B, m)."""
        x = np.asarray(obs, np.float32)
        single = x.ndim == 1
        a = self.ensembler(self.predict(x.reshape(1, -1) if single else x))
        return a[0] if single else a
