"""A small vision-language-action policy: a vision encoder and a language model from
``transformers`` with a binned-action head (``train.policy: vla``).

One prediction, for N observations of C cameras::

    v_c = P(ViT(resize(image_c) / 127.5 - 1))     (N, p, d)  patch tokens of camera c, projected
    t   = E[ids]                                   (N, L, d)  the instruction's token embeddings
    s   = W_s (state - mu_s) / sigma_s             (N, 1, d)  the proprioceptive state as one token (times 0
                                                              with ``train.vla.use_state`` false)
    h   = LM([v_1 .. v_C, t, s, q]; mask)[:, -1]   (N, d)     q: a learned query token, last
    logits = W_h h                                 (N, m, B)  B bins per action dimension

Attention is the language model's own (causal), with the instruction's padding masked out, so
the query token reads everything before it. Action dimension j is binned uniformly over
[lo_j, hi_j], the dataset's 1st and 99th percentiles (OpenVLA's binning; actions outside are
clipped to the end bins); the deployed action is the centre of the most likely bin of each
dimension (the mode, as OpenVLA decodes), clipped to [-1, 1]. The bins' categorical
distribution is also what RL fine-tunes: log pi(a | o) = sum_j log softmax(logits_j)[b_j]
(``simreal/policies/vla/rl.py``). The dimensions are predicted in parallel from one query (OpenVLA-OFT's
parallel decoding), not one token at a time.

Models: ``train.vla.vision_model`` and ``train.vla.language_model`` name local folders of
Hugging Face checkpoints: a SigLIP checkpoint (a ``SiglipVisionModel`` or a whole ``SiglipModel``,
whose vision tower is taken) and a causal language model with its ``tokenizer.json`` (e.g.
SmolLM2-135M, a ``LlamaForCausalLM``: its base model is taken), the parts SmolVLM is assembled
from. A composite VLM folder (SmolVLM's own ``Idefics3`` checkpoint) is not split here: a folder
whose weights do not fill the model is refused, naming the key and the first missing weights.
Empty, they are tiny randomly initialised models built in code
(``train.vla.width``, ``layers``, ``heads``) and a word-level tokenizer of the dataset's
instructions: what tests and CPU toy runs use; nothing is ever downloaded. The checkpoint
(``checkpoints/policy.safetensors``, format :data:`FORMAT`) holds every weight and both models'
configurations, so loading it needs neither folder; the tokenizer is
``checkpoints/tokenizer.json`` beside it (and ``tokenizer.json`` in the bundle).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from simreal.bundle import PAD, fixed_length
from simreal.errors import ConfigError, DataFileError
from simreal.npz import short_reason

FORMAT = "simreal-vla-policy/1"
CHECKPOINT = Path("checkpoints") / "policy.safetensors"
TOKENIZER = Path("checkpoints") / "tokenizer.json"
#: The word-level tokenizer's special tokens (ids 0 and 1).
UNK = "[UNK]"


@dataclasses.dataclass(frozen=True)
class VLASpec:
    """What the policy reads and writes: cameras (name -> (H, W) [px]), sizes, bins, tokens."""

    cameras: dict[str, tuple[int, int]]
    state_size: int
    action_size: int
    bins: int
    max_tokens: int
    use_state: bool = True  # False: the state token carries nothing (images and words only)

    def to_json(self) -> str:
        return json.dumps(
            {
                "cameras": {k: list(v) for k, v in self.cameras.items()},
                "state_size": self.state_size,
                "action_size": self.action_size,
                "bins": self.bins,
                "max_tokens": self.max_tokens,
                "use_state": self.use_state,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> VLASpec:
        d = json.loads(text)
        return cls(
            cameras={k: (int(v[0]), int(v[1])) for k, v in d["cameras"].items()},
            state_size=int(d["state_size"]),
            action_size=int(d["action_size"]),
            bins=int(d["bins"]),
            max_tokens=int(d["max_tokens"]),
            use_state=bool(d.get("use_state", True)),
        )  # older checkpoints: the state was read


# -- tokenizer -----------------------------------------------------------------------------------
def word_tokenizer(sentences: Sequence[str], max_tokens: int) -> Any:
    """A word-level ``tokenizers.Tokenizer`` over the words of ``sentences`` (lower-cased, split
    on whitespace and punctuation; ids: 0 padding, 1 unknown, then the words sorted)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    pre = pre_tokenizers.Whitespace()
    words = sorted({w for s in sentences for w, _ in pre.pre_tokenize_str(s.lower())})
    tok = Tokenizer(WordLevel({PAD: 0, UNK: 1, **{w: i + 2 for i, w in enumerate(words)}}, unk_token=UNK))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre
    return fixed_length(tok, max_tokens)


def load_tokenizer(path: str | Path, max_tokens: int) -> Any:
    """The tokenizer saved at ``path`` (a ``tokenizer.json``), fixed to ``max_tokens``;
    DataFileError naming the file when it is missing or not a tokenizer."""
    from tokenizers import Tokenizer

    if not Path(path).is_file():
        raise DataFileError(str(path), "no tokenizer.json (a VLA run or bundle keeps its tokenizer here)")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception on a malformed file
        raise DataFileError(str(path), f"not a tokenizers tokenizer.json ({str(e)[:120]})") from None
    return fixed_length(tok, max_tokens)


def tokenize(tok: Any, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask), each (N, L) int64, of ``sentences`` (padded and truncated to L)."""
    enc = tok.encode_batch(list(sentences))
    return (np.asarray([e.ids for e in enc], np.int64), np.asarray([e.attention_mask for e in enc], np.int64))


# -- the network ---------------------------------------------------------------------------------
def _tiny_configs(vc: Any, spec: VLASpec, vocab: int) -> tuple[Any, Any]:
    """The tiny random models' configurations (module docstring): SigLIP and Llama of width ``vc.width``."""
    from transformers import LlamaConfig, SiglipVisionConfig

    side = max(max(hw) for hw in spec.cameras.values())
    side = -(-side // vc.patch_size) * vc.patch_size  # the cameras' images resized to a whole number of patches
    vision = SiglipVisionConfig(
        hidden_size=vc.width,
        intermediate_size=2 * vc.width,
        num_hidden_layers=vc.layers,
        num_attention_heads=vc.heads,
        image_size=side,
        patch_size=vc.patch_size,
    )
    text = LlamaConfig(
        vocab_size=vocab,
        hidden_size=vc.width,
        intermediate_size=2 * vc.width,
        num_hidden_layers=vc.layers,
        num_attention_heads=vc.heads,
        num_key_value_heads=vc.heads,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
    )
    return vision, text


class VLA(nn.Module):
    """The policy of the module docstring: (state, ids, mask, images...) -> logits (N, m, B).

    Args:
      spec: cameras, sizes, bins and tokens.
      vision, text: the vision tower's and the language model's ``transformers`` configurations.
      state_mean, state_std: (n,) the state's normalisation.
      action_low, action_high: (m,) the bins' range per action dimension.
    """

    # buffers (register_buffer in __init__), typed for nn.Module's dynamic attributes
    state_mean: torch.Tensor
    state_std: torch.Tensor
    action_low: torch.Tensor
    action_high: torch.Tensor

    def __init__(
        self,
        spec: VLASpec,
        vision: Any,
        text: Any,
        state_mean: np.ndarray,
        state_std: np.ndarray,
        action_low: np.ndarray,
        action_high: np.ndarray,
    ):
        super().__init__()
        from transformers import AutoModel, SiglipVisionModel

        self.spec = spec
        self.vision = SiglipVisionModel(vision)
        self.text = AutoModel.from_config(text)
        d = text.hidden_size
        self.project = nn.Linear(vision.hidden_size, d)
        self.state_in = nn.Linear(spec.state_size, d)
        self.query = nn.Parameter(torch.zeros(1, 1, d))
        self.head = nn.Linear(d, spec.action_size * spec.bins)
        f32 = torch.float32
        self.register_buffer("state_mean", torch.as_tensor(np.asarray(state_mean), dtype=f32))
        self.register_buffer("state_std", torch.as_tensor(np.asarray(state_std), dtype=f32))
        self.register_buffer("action_low", torch.as_tensor(np.asarray(action_low), dtype=f32))
        self.register_buffer("action_high", torch.as_tensor(np.asarray(action_high), dtype=f32))
        self.image_side = int(vision.image_size)

    @property
    def bin_centres(self) -> torch.Tensor:
        """(m, B) the centre of each bin in action units."""
        k = (torch.arange(self.spec.bins, dtype=torch.float32) + 0.5) / self.spec.bins
        return self.action_low[:, None] + (self.action_high - self.action_low)[:, None] * k

    def bin_of(self, action: torch.Tensor) -> torch.Tensor:
        """(N, m) int64: the bin each action falls in, clipped to the end bins."""
        u = (action - self.action_low) / (self.action_high - self.action_low)
        return torch.clamp((u * self.spec.bins).long(), 0, self.spec.bins - 1)

    def _camera_tokens(self, image: torch.Tensor) -> torch.Tensor:
        x = image.permute(0, 3, 1, 2).to(torch.float32) / 127.5 - 1.0  # SigLIP's mean 0.5, std 0.5
        if tuple(x.shape[-2:]) != (self.image_side, self.image_side):
            x = F.interpolate(x, size=(self.image_side, self.image_side), mode="bilinear", align_corners=False)
        return self.project(self.vision(pixel_values=x).last_hidden_state)

    def forward(
        self, state: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor, *images: torch.Tensor
    ) -> torch.Tensor:
        n = state.shape[0]
        vis = [self._camera_tokens(im) for im in images]
        x = (state - self.state_mean) / self.state_std * float(self.spec.use_state)
        tokens = torch.cat(
            [self.text.get_input_embeddings()(ids), *vis, self.state_in(x)[:, None], self.query.expand(n, -1, -1)],
            dim=1,
        )
        ones = torch.ones(n, sum(v.shape[1] for v in vis) + 2, dtype=mask.dtype, device=mask.device)
        full = torch.cat([mask, ones], dim=1)
        h = self.text(inputs_embeds=tokens, attention_mask=full).last_hidden_state[:, -1]
        return self.head(h).view(n, self.spec.action_size, self.spec.bins)

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        """(N, m) the deployed action: the most likely bin's centre of each dimension, in [-1, 1]."""
        centres = self.bin_centres.expand(logits.shape[0], -1, -1)
        return torch.clamp(torch.gather(centres, 2, logits.argmax(-1, keepdim=True))[..., 0], -1.0, 1.0)


class DeployedVLA(nn.Module):
    """The bundle's graph: (obs, instruction_ids, instruction_mask, image.<cam>...) -> action (N, m)."""

    def __init__(self, vla: VLA):
        super().__init__()
        self.vla = vla

    def forward(
        self, state: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor, *images: torch.Tensor
    ) -> torch.Tensor:
        return self.vla.mode(self.vla(state, ids, mask, *images))


def build_vla(
    vc: Any,
    spec: VLASpec,
    sentences: Sequence[str],
    state_mean: np.ndarray,
    state_std: np.ndarray,
    action_low: np.ndarray,
    action_high: np.ndarray,
) -> tuple[VLA, Any]:
    """(a new VLA, its tokenizer) from ``train.vla`` (``vc``): the local checkpoints it names, or
    tiny random models and a word tokenizer of ``sentences`` (module docstring)."""
    vision_folder = _local_folder(vc.vision_model, "train.vla.vision_model") if vc.vision_model else ""
    text_folder = _local_folder(vc.language_model, "train.vla.language_model") if vc.language_model else ""
    if text_folder:
        tok = load_tokenizer(Path(text_folder) / "tokenizer.json", spec.max_tokens)
    else:
        tok = word_tokenizer(sentences, spec.max_tokens)
    vision, text = _tiny_configs(vc, spec, tok.get_vocab_size())
    model = VLA(
        spec,
        vision if not vision_folder else _pretrained_config(vision_folder, "train.vla.vision_model"),
        text if not text_folder else _pretrained_config(text_folder, "train.vla.language_model"),
        state_mean,
        state_std,
        action_low,
        action_high,
    )
    if vision_folder:
        _load_pretrained(model.vision, vision_folder, "train.vla.vision_model", vision_tower=True)
    if text_folder:
        _load_pretrained(model.text, text_folder, "train.vla.language_model", vision_tower=False)
    return model, tok


def _local_folder(name: str, key: str) -> str:
    """The folder of the model ``name``: a local directory as it is, else a repo id's snapshot in the
    local Hugging Face cache (nothing is downloaded); ConfigError naming ``key`` when it is neither."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    from huggingface_hub import constants, snapshot_download

    try:
        return snapshot_download(name, local_files_only=True)
    except Exception:  # huggingface_hub's: no cache entry, a malformed repo id (several types, no shared base)
        raise ConfigError(
            key,
            f"{name}: not a local folder, and no such model in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}); nothing is downloaded",
        ) from None


def _pretrained_config(folder: str, key: str) -> Any:
    """The configuration of the local checkpoint ``folder``: a SigLIP vision tower's (``key``
    ``train.vla.vision_model``; a whole SigLIP's vision part) or a language model's; ConfigError
    naming ``key`` for a folder without one or of another kind."""
    from transformers import AutoConfig

    if not (Path(folder) / "config.json").is_file():
        raise ConfigError(
            key, f"{folder} has no config.json: expected a local Hugging Face model folder (nothing is downloaded)"
        )
    cfg = AutoConfig.from_pretrained(folder, local_files_only=True)
    if not key.endswith("vision_model"):
        return getattr(cfg, "text_config", cfg)
    cfg = getattr(cfg, "vision_config", cfg)
    if cfg.model_type != "siglip_vision_model":
        raise ConfigError(
            key,
            f"{folder} is a {cfg.model_type} checkpoint; expected a SigLIP one "
            "(siglip_vision_model, or siglip with its vision tower)",
        )
    return cfg


def _load_pretrained(module: nn.Module, folder: str, key: str, vision_tower: bool) -> None:
    """Copy a local checkpoint's weights into ``module`` (a SigLIP vision tower or a base language
    model); ConfigError naming ``key`` when the folder's weights leave any of them unset
    (transformers would otherwise initialise those at random and only log it)."""
    from transformers import AutoModel, SiglipVisionModel
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the unused text tower of a whole SigLIP is expected, not news
    what = "a SigLIP vision checkpoint" if vision_tower else "a causal language model"
    try:
        # output_loading_info=True: (model, info), which transformers' annotation (the model) leaves out
        loaded, info = (SiglipVisionModel if vision_tower else AutoModel).from_pretrained(  # type: ignore[misc]
            folder, local_files_only=True, output_loading_info=True
        )
    except (OSError, RuntimeError, ValueError) as e:  # transformers' report on weights of other shapes
        raise ConfigError(key, f"{folder} does not hold the weights of {what} ({short_reason(e)})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys") or []) + sorted(info.get("mismatched_keys") or [])
    if missing:
        raise ConfigError(
            key,
            f"{folder} does not hold the weights of {what}: missing "
            f"{', '.join(map(str, missing[:3]))} (of {len(missing)})",
        )
    module.load_state_dict(loaded.state_dict(), strict=True)


# -- checkpoint ----------------------------------------------------------------------------------
def save_vla(path: Path, model: VLA, tok: Any, meta: Mapping[str, Any]) -> None:
    """The model's tensors and both configurations (safetensors, atomically), the tokenizer beside it."""
    from simreal.safetensors_io import save_tensors
    from simreal.yaml_io import atomic_write_text

    save_tensors(
        path,
        model.state_dict(),
        FORMAT,
        {
            "meta": json.dumps(dict(meta)),
            "spec": model.spec.to_json(),
            "vision_config": model.vision.config.to_json_string(),
            "text_config": model.text.config.to_json_string(),
        },
    )
    atomic_write_text(path.parent / TOKENIZER.name, tok.to_str())


def load_vla(path: Path) -> tuple[VLA, Any]:
    """(the VLA in eval mode, its tokenizer) from a checkpoint written by :func:`save_vla`."""
    from transformers import AutoConfig

    from simreal.safetensors_io import load_tensors

    if not path.is_file():
        raise DataFileError(str(path), "no VLA checkpoint in this run (train it with simreal train-bc --policy vla)")
    meta, tensors = load_tensors(path, "VLA checkpoint", FORMAT)
    spec = VLASpec.from_json(meta["spec"])
    vision, text = (json.loads(meta[k]) for k in ("vision_config", "text_config"))
    vision_cfg = AutoConfig.for_model(**vision)
    text_cfg = AutoConfig.for_model(**text)
    m = spec.action_size
    model = VLA(
        spec, vision_cfg, text_cfg, np.zeros(spec.state_size), np.ones(spec.state_size), -np.ones(m), np.ones(m)
    )
    model.load_state_dict(tensors, strict=True)
    return model.eval(), load_tokenizer(path.parent / TOKENIZER.name, spec.max_tokens)
