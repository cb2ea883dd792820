"""Preference labels from a vision-language model: RL-VLM-F's two-stage query.

Given two observations (a frame each, or a short clip each) and a task description, the VLM
says which one is closer to the goal (Wang et al. 2024, "RL-VLM-F"; the prompts are the text of
its code's ``prompt.py``, github.com/yufeiwang63/RL-VLM-F):

1. analysis: both observations and :data:`ANALYSIS_PROMPT`: the model describes each and how
   they differ with respect to the goal;
2. labelling: :data:`LABEL_PROMPT` quoting that description, text only: the model answers
   ``0`` (the first is closer to the goal), ``1`` (the second) or ``-1`` (cannot tell), which
   ``simreal.rewards.label_answer`` reads from a line or from prose ("Image 2 is better.").

    >>> answer = ask_preference(chat, frame_a, frame_b, "to move the red cube onto the green target")  # doctest: +SKIP
    >>> answer.label                                                            # doctest: +SKIP
    0

A backend is anything with the :class:`VlmChat` method ``complete(parts) -> Reply``: one user
turn of text and images in, the model's text out (``simreal.rewards.labellers`` has an
OpenAI-compatible HTTP client and a local Hugging Face model). Label semantics follow the
prompt: :data:`FIRST` = 0, :data:`SECOND` = 1, :data:`UNSURE` = -1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Protocol

import numpy as np

# re-exported: the answer grammar has a module of its own
from simreal.rewards.label_answer import FIRST, SECOND, UNSURE, parse_label, stated_label  # noqa: F401

#: Stage 1 (RL-VLM-F's analysis prompt). ``{image_1}`` / ``{image_2}`` mark where each
#: observation's frames go; ``{task}`` is the task description.
ANALYSIS_PROMPT = """Consider the following two images:
Image 1:
{image_1}
Image 2:
{image_2}
1. What is shown in Image 1?
2. What is shown in Image 2?
3. The goal is {task}. Is there any difference between Image 1 and Image 2 in terms of achieving the goal?"""

#: Stage 2 (RL-VLM-F's labelling prompt), text only: the analysis questions and the model's own answer.
LABEL_PROMPT = """Based on the text below to the questions:
1. What is shown in Image 1?
2. What is shown in Image 2?
3. The goal is {task}. Is there any difference between Image 1 and Image 2 in terms of achieving the goal?
{analysis}

Is the goal better achieved in Image 1 or Image 2?
Reply a single line of 0 if the goal is better achieved in Image 1, or 1 if it is better achieved in Image 2.
Reply -1 if the text is unsure or there is no difference."""

#: Bumped whenever the prompts or their assembly change, so cached answers to old prompts are not reused.
#: The answer parser is not part of it: the cache holds raw texts, parsed when read, so a better
#: parser re-labels old entries without a request. (Caching answers that state no label, issue 54,
#: kept the entry format, so caches written before it stay valid and are read as they are.)
PROTOCOL_VERSION = 1

#: One part of a user turn: text, or one RGB frame (H, W, 3) uint8.
Part = str | np.ndarray


@dataclasses.dataclass(frozen=True)
class Reply:
    """A model's answer to one request; token counts are None when the backend does not report them."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class VlmChat(Protocol):
    """A vision-language model behind one request: a user turn of ``parts`` in, a :class:`Reply` out."""

    model: str

    def complete(self, parts: Sequence[Part], max_tokens: int) -> Reply:
        """The model's reply to one user turn (text and (H, W, 3) uint8 frames, in order)."""
        ...


@dataclasses.dataclass(frozen=True)
class Preference:
    """A two-stage answer: the analysis text, the labelling text, and the label parsed from it."""

    analysis: str
    answer: str

    @property
    def label(self) -> int:
        """:data:`FIRST`, :data:`SECOND` or :data:`UNSURE`, parsed from :attr:`answer`."""
        return parse_label(self.answer)


def as_frames(obs: np.ndarray, what: str = "observation") -> np.ndarray:
    """``obs`` as a clip (T, H, W, 3) uint8: a single frame (H, W, 3) becomes T = 1."""
    arr = np.asarray(obs)
    if arr.ndim == 3:
        arr = arr[None]
    if arr.ndim != 4 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
        raise ValueError(
            f"{what}: expected RGB frames (H, W, 3) or a clip (T, H, W, 3) of uint8, "
            f"got shape {arr.shape} dtype {arr.dtype}"
        )
    return arr


def frame_digest(frame: np.ndarray) -> str:
    """SHA-256 (hex) of one array's dtype, shape and C-order bytes: the content hash labels are cached by."""
    arr = np.ascontiguousarray(frame)
    h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def query_key(model: str, task: str, obs_a: np.ndarray, obs_b: np.ndarray) -> str:
    """Cache key (SHA-256 hex) of one query: the model, both prompts, the task and both observations' digests.

    Order matters: (a, b) and (b, a) are different queries (VLMs favour one position)."""
    content = {
        "protocol": PROTOCOL_VERSION,
        "analysis_prompt": ANALYSIS_PROMPT,
        "label_prompt": LABEL_PROMPT,
        "model": model,
        "task": task,
        "a": frame_digest(as_frames(obs_a, "observation a")),
        "b": frame_digest(as_frames(obs_b, "observation b")),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def analysis_parts(frames_a: np.ndarray, frames_b: np.ndarray, task: str) -> list[Part]:
    """Stage 1's user turn: :data:`ANALYSIS_PROMPT` with each observation's frames at its marker."""
    head, rest = ANALYSIS_PROMPT.format(task=task, image_1="\0", image_2="\0").split("\0", 1)
    middle, tail = rest.split("\0", 1)
    return [head, *frames_a, middle, *frames_b, tail]


def ask_preference(
    chat: VlmChat, obs_a: np.ndarray, obs_b: np.ndarray, task: str, analysis_tokens: int = 512, label_tokens: int = 32
) -> Preference:
    """RL-VLM-F's two requests for one pair (module docstring); no cache, see ``LabelCache``.

    Args:
      chat: the backend.
      obs_a, obs_b: frames (H, W, 3) or clips (T, H, W, 3), uint8 RGB.
      task: the goal, as a phrase that completes "The goal is ..." ("to open the drawer", as RL-VLM-F words it).
      analysis_tokens, label_tokens: the most tokens each stage may generate.
    """
    frames_a, frames_b = as_frames(obs_a, "observation a"), as_frames(obs_b, "observation b")
    analysis = chat.complete(analysis_parts(frames_a, frames_b, task), analysis_tokens).text
    answer = chat.complete([LABEL_PROMPT.format(task=task, analysis=analysis)], label_tokens).text
    return Preference(analysis=analysis, answer=answer)
