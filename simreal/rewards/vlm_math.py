"""Zero-shot vision-language reward math: VLM-RM's goal-baseline projection and VLM-RL's contrast.

Embeddings are rows of a CLIP-family model's joint image-text space, unit-normalised before
use (cosine geometry). Shapes: ``s`` (N, D) image embeddings, ``g``, ``b``, ``pos``, ``neg`` (D,)
text embeddings, ``P`` (D, D).

- Goal-baseline projection (Rocamonde et al. 2024, "Vision-Language Models are Zero-Shot
  Reward Models for Reinforcement Learning", ICLR 2024)::

      d = g - b
      P = a d d^T / |d|^2 + (1 - a) I
      R = 1 - 1/2 |(s - g) P|^2

  ``a = 0`` gives ``P = I`` and ``R = 1 - 1/2 |s - g|^2 = cos(s, g)``, the plain CLIP reward;
  ``a = 1`` keeps only the component of ``s - g`` along the baseline-to-goal direction.
- Positive-minus-negative contrast (Huang et al. 2024, "VLM-RL: A Unified Vision Language
  Models and Reinforcement Learning Framework for Safe Autonomous Driving", its contrasting
  language goal with unit weights)::

      R = cos(s, pos) - cos(s, neg)

- Several prompts for one role (goal, baseline, positive, negative) are averaged after
  normalising each, and the mean normalised again (VLM-RM's prompt ensembles).

Pure numpy; the reward model (:mod:`simreal.rewards.vlm`) computes the embeddings in torch.
"""

from __future__ import annotations

import numpy as np


def unit_rows(x: np.ndarray) -> np.ndarray:
    """``x`` (..., D) with each row scaled to unit Euclidean norm (a zero row stays zero)."""
    x = np.asarray(x, dtype=np.float64)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norm > 0.0, norm, 1.0)


def prompt_mean(embeddings: np.ndarray) -> np.ndarray:
    """One unit direction (D,) for several prompts' embeddings (K, D): normalise, average, normalise."""
    return unit_rows(unit_rows(embeddings).mean(axis=0))


def goal_baseline_projection(g: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    """``P = a d d^T/|d|^2 + (1 - a) I`` (D, D) with ``d = g - b``; ``alpha`` in [0, 1], ``d != 0``.

    g, b: unit goal and baseline text embeddings (D,)."""
    d = np.asarray(g, dtype=np.float64) - np.asarray(b, dtype=np.float64)  # (D,)
    return alpha * np.outer(d, d) / float(d @ d) + (1.0 - alpha) * np.eye(d.shape[0])


def goal_baseline_reward(s: np.ndarray, g: np.ndarray, P: np.ndarray) -> np.ndarray:
    """VLM-RM reward ``R = 1 - 1/2 |(s - g) P|^2`` (N,) for unit image embeddings ``s`` (N, D).

    g: unit goal embedding (D,); P: :func:`goal_baseline_projection` (D, D). R <= 1, with 1 at
    ``s = g``; P is symmetric, so the row-vector product ``(s - g) P`` needs no transpose."""
    r = (np.asarray(s, dtype=np.float64) - g) @ P  # (N, D)
    return 1.0 - 0.5 * np.einsum("nd,nd->n", r, r)


def contrast_reward(s: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """VLM-RL reward ``R = cos(s, pos) - cos(s, neg)`` (N,), in [-2, 2].

    s: image embeddings (N, D); pos, neg: text embeddings (D,); none need be unit."""
    s = unit_rows(s)
    return s @ unit_rows(pos) - s @ unit_rows(neg)
