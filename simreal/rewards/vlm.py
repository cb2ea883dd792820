"""Zero-shot vision-language reward: a CLIP or SigLIP model scores rendered frames against prompts.

Configured by a ``reward:`` mapping (:class:`ClipRewardConfig`)::

    reward:
      kind: clip
      model: models/clip-vit-base-patch32     # local directory or a repo id in the local HF cache
      prompts: ["a robot arm pushing the red cube onto the green target"]
      baselines: ["a robot arm and a red cube"]   # VLM-RM goal-baseline projection ...
      alpha: 0.5
      # negatives: ["the red cube far from the target"]   # ... or VLM-RL contrast instead
      weight: 1.0
      every_k_steps: 4

The score (:mod:`simreal.rewards.vlm_math` has the formulas):

- ``baselines`` given: VLM-RM, ``R = 1 - 1/2 |(s - g) P|^2``, ``P = a d d^T/|d|^2 + (1 - a) I``,
  ``d = g - b``;
- ``negatives`` given: VLM-RL, ``R = cos(s, pos) - cos(s, neg)``;
- neither: ``R = cos(s, g)`` (VLM-RM with ``a = 0``).

``g`` (or ``pos``), ``b`` and ``neg`` each average their prompts' unit embeddings. The text
embeddings and ``P`` are computed once, at construction; a call embeds a batch of frames.

    >>> reward = ClipReward(build(ClipRewardConfig, section, prefix="reward"))   # doctest: +SKIP
    >>> reward(frames)            # (N, H, W, 3) uint8 -> (N,) float32           # doctest: +SKIP

``ClipReward`` returns the unweighted ``R``. In training (a run's ``reward:`` section,
``simreal.policies.learned_reward``) ``weight * R`` is the term ``reward/clip`` beside the
task's hand-written terms scaled by ``task_weight`` (0: alone), scored on ``camera``'s frame of
the state after the step every ``every_k_steps``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from simreal.config import field
from simreal.errors import ConfigError
from simreal.rewards.vlm_loading import load_clip_family
from simreal.rewards.vlm_math import (
    contrast_reward,
    goal_baseline_projection,
    goal_baseline_reward,
    prompt_mean,
    unit_rows,
)

#: |g - b| below this: the baselines say what the prompts say, and P = d d^T/|d|^2 is undefined.
_MIN_GOAL_BASELINE_DISTANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class ClipRewardConfig:
    """The ``reward:`` section of a task config for a CLIP-family zero-shot reward."""

    model: str = field(doc="local model directory, or a repo id in the local Hugging Face cache")
    prompts: tuple[str, ...] = field(doc="goal (positive) descriptions, averaged")
    kind: str = field("clip", choices=("clip",), doc="clip: CLIP or SigLIP, read from the model's config")
    baselines: tuple[str, ...] = field((), doc="VLM-RM baseline descriptions (the scene without the goal)")
    negatives: tuple[str, ...] = field((), doc="VLM-RL negative descriptions (what to move away from)")
    alpha: float = field(
        0.5,
        min=0.0,
        max=1.0,
        doc="VLM-RM projection strength with baselines: 0 = plain cosine, 1 = only the baseline-to-goal direction",
    )
    weight: float = field(1.0, doc="scale of the reward term reward/clip")
    task_weight: float = field(1.0, min=0.0, doc="multiplies the task's own reward terms (0: the CLIP reward alone)")
    camera: str = field("front", doc="the model camera whose frames are scored (at its own resolution)")
    every_k_steps: int = field(
        1, min=1, doc="score every K-th control step's frame; the steps between keep the last score"
    )
    batch_size: int = field(64, min=1, doc="frames per forward pass (bounds memory)")

    def __post_init__(self) -> None:
        # Cross-key checks; build() has checked each key on its own. The section is `reward:`.
        if not self.prompts or not all(p.strip() for p in self.prompts):
            raise ConfigError(
                "reward.prompts",
                'expected one or more non-empty goal descriptions, e.g. ["a robot arm holding the red cube"]',
            )
        if self.baselines and self.negatives:
            raise ConfigError(
                "reward.negatives",
                "give reward.baselines (VLM-RM goal-baseline projection) or "
                "reward.negatives (VLM-RL contrast), not both",
            )
        for key in ("baselines", "negatives"):
            if not all(p.strip() for p in getattr(self, key)):
                raise ConfigError(f"reward.{key}", "an empty description; expected non-empty strings")


class ClipReward:
    """Maps a batch of RGB frames to zero-shot rewards (module docstring).

    Args:
      cfg: the validated ``reward:`` section.
      device: torch device of the model (``cpu``, ``cuda``).
    """

    def __init__(self, cfg: ClipRewardConfig, device: str = "cpu"):
        self.cfg = cfg
        self.device = device
        self.model, self.processor = load_clip_family(cfg.model)
        self.model.to(device)  # type: ignore[arg-type]  # transformers @wraps(Module.to): mypy sees the unbound signature
        # SigLIP was trained on text padded to its full length; CLIP on text padded to the batch's longest.
        self._text_padding = "max_length" if self.model.config.model_type == "siglip" else "longest"
        self.goal = prompt_mean(self.embed_text(cfg.prompts))  # (D,)
        self.negative = prompt_mean(self.embed_text(cfg.negatives)) if cfg.negatives else None
        if cfg.baselines:
            baseline = prompt_mean(self.embed_text(cfg.baselines))
            if np.linalg.norm(self.goal - baseline) < _MIN_GOAL_BASELINE_DISTANCE:
                raise ConfigError(
                    "reward.baselines",
                    "the baseline prompts embed where the goal prompts do; "
                    "describe the scene without the goal achieved",
                )
            self.P = goal_baseline_projection(self.goal, baseline, cfg.alpha)  # (D, D)
        else:
            self.P = np.eye(self.goal.shape[0])  # a = 0: R = cos(s, g)

    def embed_text(self, texts: Sequence[str]) -> np.ndarray:
        """Unit text embeddings (K, D) of ``texts``, through the model's own tokenizer."""
        import torch

        tokens = self.processor(text=list(texts), padding=self._text_padding, truncation=True, return_tensors="pt")
        with torch.inference_mode():
            out = self.model.get_text_features(**{k: v.to(self.device) for k, v in tokens.items()})
        return unit_rows(out.pooler_output.float().cpu().numpy())

    def embed_images(self, images: np.ndarray) -> np.ndarray:
        """Unit image embeddings (N, D) of RGB frames (N, H, W, 3) uint8, ``cfg.batch_size`` at a time.

        The model's own processor resizes, crops and normalises each frame as in pre-training."""
        import torch

        chunks = []
        for i in range(0, len(images), self.cfg.batch_size):
            pixels = self.processor(
                images=images[i : i + self.cfg.batch_size], input_data_format="channels_last", return_tensors="pt"
            )["pixel_values"]
            with torch.inference_mode():
                out = self.model.get_image_features(pixel_values=pixels.to(self.device))
            chunks.append(out.pooler_output.float().cpu().numpy())
        return unit_rows(np.concatenate(chunks, axis=0))

    def __call__(self, images: np.ndarray) -> np.ndarray:
        """Rewards (N,) float32 of frames (N, H, W, 3) uint8 (unweighted; see the module docstring)."""
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ValueError(f"expected RGB frames (N, H, W, 3) uint8, got {images.shape} {images.dtype}")
        if len(images) == 0:
            return np.zeros(0, np.float32)
        s = self.embed_images(images)  # (N, D)
        if self.negative is not None:
            return contrast_reward(s, self.goal, self.negative).astype(np.float32)
        return goal_baseline_reward(s, self.goal, self.P).astype(np.float32)
