"""A local Hugging Face vision-language model as a labeller (Qwen2.5-VL, LLaVA, Idefics, SmolVLM, ...).

``labeller.model`` is a local directory (``save_pretrained`` / ``hf download --local-dir``
output) or a repo id already in the local Hugging Face cache; nothing downloads (every
``from_pretrained`` passes ``local_files_only=True``). The model loads through
``AutoModelForImageTextToText`` and its processor's chat template:

    hf download Qwen/Qwen2.5-VL-3B-Instruct --local-dir models/Qwen2.5-VL-3B-Instruct   # with network
    simreal label frames.npz --task "..." --backend hf --model models/Qwen2.5-VL-3B-Instruct --out labels.npz

One :meth:`HFChat.complete` is one ``generate`` call (greedy at temperature 0), charged to the
run's :class:`CostAccount` as one request with its prompt and generated token counts. Needs
``pip install 'simreal[torch,vlm]'``; on a CPU a real VLM takes seconds to minutes per answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from simreal.errors import DataFileError
from simreal.rewards.label_account import CostAccount
from simreal.rewards.labelling import Part, Reply

if TYPE_CHECKING:
    from simreal.rewards.labellers import LabellerConfig

_HOW_TO_GET = (
    "nothing downloads at run time; on a machine with network run `hf download "
    "Qwen/Qwen2.5-VL-3B-Instruct --local-dir DIR`, copy DIR here and pass --model DIR"
)


class HFChat:
    """:class:`~simreal.rewards.labelling.VlmChat` on a local image-text-to-text model (CPU or a GPU torch sees)."""

    def __init__(self, config: LabellerConfig, account: CostAccount):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.model, self.config, self.account = config.model, config, account
        path = Path(config.model).expanduser()
        if not path.is_dir() and (
            path.is_absolute() or config.model.startswith((".", "~")) or config.model.count("/") > 1
        ):  # a path, not a repo id ("org/name")
            raise DataFileError(config.model, f"(labeller.model) no such model directory; {_HOW_TO_GET}")
        source = str(path) if path.is_dir() else config.model
        try:
            self._processor = AutoProcessor.from_pretrained(source, local_files_only=True)
            self._net = AutoModelForImageTextToText.from_pretrained(source, local_files_only=True).eval()
        except (OSError, ValueError) as e:  # transformers: missing files or cache entry; a model type it cannot load
            why = str(e).splitlines()[0][:160]
            raise DataFileError(
                config.model,
                f"(labeller.model) cannot load an image-text-to-text model and its "
                f"processor here ({why}); {_HOW_TO_GET}",
            ) from None
        if torch.cuda.is_available():
            self._net = self._net.to("cuda")

    def complete(self, parts: Sequence[Part], max_tokens: int) -> Reply:
        """One ``generate`` over the chat template of one user turn."""
        import torch
        from PIL import Image

        self.account.reserve(1)
        start = time.monotonic()
        content = [
            {"type": "text", "text": p} if isinstance(p, str) else {"type": "image", "image": Image.fromarray(p)}
            for p in parts
        ]
        inputs = self._processor.apply_chat_template(
            [{"role": "user", "content": content}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
        )
        inputs = inputs.to(self._net.device)
        sampling = (
            {"do_sample": True, "temperature": self.config.temperature}
            if self.config.temperature > 0
            else {"do_sample": False}
        )
        with torch.no_grad():
            out = self._net.generate(**inputs, max_new_tokens=max_tokens, **sampling)
        n_prompt = inputs["input_ids"].shape[1]
        new = out[0, n_prompt:]
        reply = Reply(
            text=self._processor.decode(new, skip_special_tokens=True),
            prompt_tokens=int(n_prompt),
            completion_tokens=int(len(new)),
        )
        self.account.record(reply, time.monotonic() - start)
        return reply
