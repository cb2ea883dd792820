"""Load a CLIP-family model (CLIP, SigLIP) and its processor from local files only.

``name`` is a local directory (``save_pretrained`` / ``hf download --local-dir`` output: a
``config.json``, ``model.safetensors`` and the processor's files) or a Hugging Face repo id
already in the local cache (``openai/clip-vit-base-patch32``). Nothing downloads: every
``from_pretrained`` call passes ``local_files_only=True``, and missing files are one
:class:`~simreal.errors.DataFileError` naming ``name``, the config key and how to get the
weights on a machine with network::

    hf download openai/clip-vit-base-patch32 --local-dir models/clip-vit-base-patch32
    hf download google/siglip-base-patch16-224 --local-dir models/siglip-base-patch16-224

transformers is imported here, lazily (about 5 s), so code that never builds a VLM reward
never pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from simreal.dependencies import require
from simreal.errors import DataFileError

if TYPE_CHECKING:
    from transformers import CLIPModel, ProcessorMixin, SiglipModel

#: ``config.model_type`` values whose models have ``get_image_features`` / ``get_text_features``
#: over one joint embedding space and whose processors take plain RGB images.
CLIP_FAMILY: tuple[str, ...] = ("clip", "siglip")

_HOW_TO_GET = (
    "nothing downloads at run time; on a machine with network run "
    "`hf download openai/clip-vit-base-patch32 --local-dir DIR` (or "
    "google/siglip-base-patch16-224), copy DIR here and set {key}=DIR"
)


def load_clip_family(name: str, key: str = "reward.model") -> tuple[CLIPModel | SiglipModel, ProcessorMixin]:
    """(model in eval mode on the CPU, processor) of the CLIP or SigLIP model at ``name``.

    Args:
      name: a local directory, or a repo id in the local Hugging Face cache.
      key: the config key ``name`` came from, for the error message.

    Raises:
      DataFileError: no such directory or cache entry, a directory without weights or
        processor files, or a model that is not CLIP-family (lists :data:`CLIP_FAMILY`).
    """
    from huggingface_hub import constants
    from transformers import AutoConfig, AutoModel, AutoProcessor

    is_dir = Path(name).expanduser().is_dir()
    source = str(Path(name).expanduser()) if is_dir else name
    how = _HOW_TO_GET.format(key=key)
    if is_dir and not (Path(source) / "config.json").is_file():
        raise DataFileError(name, f"({key}) no config.json here: not a saved CLIP/SigLIP model; {how}")
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=True)
    except OSError as e:  # transformers: a missing cache entry, a malformed repo id or unreadable JSON
        if is_dir:
            raise DataFileError(name, f"({key}) {str(e).splitlines()[0]}") from None
        raise DataFileError(
            name,
            f"({key}) not a local directory, and no such model in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}); {how}",
        ) from None
    except ValueError:  # transformers: a model_type it does not know
        raise DataFileError(
            name,
            f"({key}) config.json names a model type transformers does not know; supported: {', '.join(CLIP_FAMILY)}",
        ) from None
    if config.model_type not in CLIP_FAMILY:
        raise DataFileError(
            name,
            f"({key}) model_type '{config.model_type}' is not a CLIP-family model; supported: {', '.join(CLIP_FAMILY)}",
        )
    if config.model_type == "siglip":
        require("sentencepiece")  # SigLIP's tokenizer; without it AutoProcessor fails deep inside transformers
    try:
        model = AutoModel.from_pretrained(source, local_files_only=True)
    except OSError:
        raise DataFileError(
            name, f"({key}) config.json but no weights (model.safetensors or pytorch_model.bin); {how}"
        ) from None
    except Exception as e:  # safetensors', torch's or transformers' own errors on a damaged file, whatever their type
        raise DataFileError(
            name,
            f"({key}) the weights cannot be read ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else 'no detail'}); a truncated or damaged "
            f"file? {how}",
        ) from None
    try:
        processor = AutoProcessor.from_pretrained(source, local_files_only=True)
    except OSError:
        raise DataFileError(
            name,
            f"({key}) weights but no processor files (preprocessor_config.json or "
            f"processor_config.json, and the tokenizer's); {how}",
        ) from None
    except ValueError:  # sentencepiece without its model file: "Either model_file or model_proto ..."
        raise DataFileError(
            name, f"({key}) the tokenizer's files are missing (spiece.model for SigLIP); {how}"
        ) from None
    # transformers builds an empty tokenizer where its files are missing: every word would be the
    # one unknown token, and every prompt the same embedding
    words, vocab = len(processor.tokenizer), int(config.text_config.vocab_size)
    if words < vocab // 2:
        raise DataFileError(
            name,
            f"({key}) its tokenizer knows {words} tokens for a text model of {vocab}: the "
            "tokenizer's files are missing (tokenizer.json, or vocab.json and merges.txt for "
            f"CLIP, spiece.model for SigLIP); {how}",
        )
    # AutoModel of a CLIP_FAMILY model_type (checked above): a CLIPModel or a SiglipModel
    return cast("CLIPModel | SiglipModel", model.eval()), processor
