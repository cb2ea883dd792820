"""What a vision-language-action bundle reads beside the state: camera images and an instruction.

    p = Perception(bundle, cfg.perception)
    p.on_image("front", msg, now_s)        # sensor_msgs/msg/Image, any size: cropped and resized
    p.on_instruction(msg)                  # std_msgs/msg/String: tokenised once, held until replaced
    extra = p.inputs(now_s)                # the graph's image.<cam>, instruction_ids/mask, or None

An image is converted to the RGB the policy was trained on (encodings ``rgb8``, ``bgr8``,
``rgba8``, ``bgra8``, ``mono8``; rows read with the message's ``step``), centre-cropped to the
bundle's aspect ratio and resized to its size: shrinking averages each output pixel's source
box (area resampling, as a camera's own binning would; point sampling would alias a large image
into pixels training never saw), enlarging repeats the nearest pixel. Written with numpy: the
robot's runtime carries no image library.

An instruction is refused (and the last one kept) when it is empty or holds a word the bundle's
tokenizer does not know (its unknown token): a policy told "reach the yellow ball" must not act
on "reach the [UNK] ball". :meth:`Perception.inputs` is None while any camera has no image
received within ``perception.image_timeout_s`` or no instruction was accepted (nor set in
``perception.instruction``); the runner then counts its state as stale (the watchdog's safe
command, a latched fault once it was running). Freshness is by arrival time, as the state
watchdog's: a driver that re-sends a frozen frame is not detected here. Publish the instruction
after the node is up (the subscription is reliable, volatile: a message sent before it existed
is not delivered), or set ``perception.instruction``. The tokenizer is loaded when the
:class:`Perception` is made, so a bad ``tokenizer.json`` or a missing ``tokenizers`` package
fails the runner's start in one line, not a callback.

Callbacks store one reference each (never block); the tick reads them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simreal.bundle import Bundle, ImageInput
from simreal.deploy.adapters import StateMessageError
from simreal.errors import ConfigError

#: ``sensor_msgs/Image`` encoding -> (channels, the RGB channels' order in a pixel).
ENCODINGS: dict[str, tuple[int, tuple[int, ...]]] = {
    "rgb8": (3, (0, 1, 2)),
    "bgr8": (3, (2, 1, 0)),
    "rgba8": (4, (0, 1, 2)),
    "bgra8": (4, (2, 1, 0)),
    "mono8": (1, (0, 0, 0)),
}


def decode_image(msg: Any, height: int, width: int) -> np.ndarray:
    """(height, width, 3) uint8 RGB of a ``sensor_msgs/Image`` (module docstring); StateMessageError
    saying what is wrong with the message."""
    enc = str(msg.encoding).lower()
    if enc not in ENCODINGS:
        raise StateMessageError(f"image encoding '{msg.encoding}' not read; expected one of {', '.join(ENCODINGS)}")
    ch, order = ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    data = msg.data
    buf = (
        np.frombuffer(data, np.uint8)
        if isinstance(data, (bytes, bytearray, memoryview))
        else np.asarray(data, np.uint8)
    )
    if h < 1 or w < 1 or step < w * ch or buf.size < h * step:
        raise StateMessageError(
            f"image {w}x{h} {enc} with step {step} needs {h * max(step, w * ch)} bytes, has {buf.size}"
        )
    px = buf[: h * step].reshape(h, step)[:, : w * ch].reshape(h, w, ch)[..., list(order)]
    if w * height > h * width:  # centre crop to the policy's aspect ratio
        cw, ch_ = round(h * width / height), h
    else:
        cw, ch_ = w, round(w * height / width)
    y0, x0 = (h - ch_) // 2, (w - cw) // 2
    crop = px[y0 : y0 + ch_, x0 : x0 + cw].astype(np.float32)
    return np.round(_resize_axis(_resize_axis(crop, height, 0), width, 1)).astype(np.uint8)


def _resize_axis(x: np.ndarray, n: int, axis: int) -> np.ndarray:
    """``x`` resized to ``n`` along ``axis``: output i is the mean of source [floor(i s),
    floor((i + 1) s)), s = size / n (area) when shrinking, source floor((i + 0.5) s) otherwise."""
    size = x.shape[axis]
    if size == n:
        return x
    if size < n:
        return np.take(x, ((np.arange(n) + 0.5) * size / n).astype(int), axis=axis)
    edges = (np.arange(n + 1) * size / n).astype(int)
    shape = [1] * x.ndim
    shape[axis] = n
    return np.add.reduceat(x, edges[:-1], axis=axis) / np.diff(edges).reshape(shape)


class Perception:
    """The latest image per camera and the tokenised instruction of a VLA bundle (module docstring).

    Args:
      bundle: a bundle with ``images`` and/or ``instruction``.
      cfg: the deploy config's ``perception`` section.
    """

    def __init__(self, bundle: Bundle, cfg: Any):
        self.bundle, self.cfg = bundle, cfg
        self.cameras: dict[str, ImageInput] = {im.name: im for im in bundle.images}
        self._images: dict[str, tuple[float, np.ndarray]] = {}
        self._words: dict[str, np.ndarray] | None = None
        self.instruction = ""
        self.bad_images = 0
        self.last_error = ""
        self._unknown: int | None = None  # the tokenizer's unknown-word id
        if bundle.instruction is not None:
            tok = bundle.tokenizer()  # loaded now: a bad file fails the start in one line
            ids = [tok.token_to_id(t) for t in ("[UNK]", "<unk>")]
            self._unknown = next((i for i in ids if i is not None), None)
            if cfg.instruction and not self.set_instruction(cfg.instruction):
                raise ConfigError("perception.instruction", self.last_error)

    @property
    def active(self) -> bool:
        """Whether the bundle reads any of it."""
        return bool(self.cameras) or self.bundle.instruction is not None

    def on_image(self, camera: str, msg: Any, now_s: float) -> bool:
        """Store ``camera``'s image received at ``now_s``; False (and counted) if it cannot be read."""
        spec = self.cameras[camera]
        try:
            self._images[camera] = (now_s, decode_image(msg, spec.height, spec.width))
        except (StateMessageError, AttributeError, ValueError, TypeError) as e:
            self.bad_images += 1
            self.last_error = f"image {camera}: {e}"
            return False
        return True

    def on_instruction(self, msg: Any) -> bool:
        """A ``std_msgs/String`` instruction: tokenised now, used from the next tick on; False (the
        last accepted one kept) when refused (module docstring)."""
        return self.set_instruction(str(getattr(msg, "data", msg)))

    def set_instruction(self, sentence: str) -> bool:
        sentence = sentence.strip()
        words = self.bundle.instruction_inputs(sentence)
        ids = words["instruction_ids"][words["instruction_mask"] > 0]
        if not sentence or not len(ids):
            self.last_error = "instruction: empty, refused"
            return False
        if self._unknown is not None and np.any(ids == self._unknown):
            self.last_error = f"instruction {sentence!r}: words the policy's tokenizer does not know, refused"
            return False
        self._words, self.instruction = words, sentence  # one assignment each: the tick reads both
        return True

    def inputs(self, now_s: float) -> dict[str, np.ndarray] | None:
        """The graph's extra inputs (unbatched), or None while an image is missing or stale or no
        instruction has arrived."""
        out: dict[str, np.ndarray] = {}
        images = dict(self._images)
        for name, spec in self.cameras.items():
            if name not in images or now_s - images[name][0] > self.cfg.image_timeout_s:
                return None
            out[spec.onnx_input] = images[name][1]
        if self.bundle.instruction is not None:
            if self._words is None:
                return None
            out.update(self._words)
        return out
