"""A VLM behind an OpenAI-compatible chat-completions endpoint (vLLM, Ollama, SGLang, hosted APIs).

One request per :meth:`OpenAIChat.complete`::

    POST <endpoint>/chat/completions
    Authorization: Bearer $<api_key_env>          (only when labeller.api_key_env is set)
    {"model": ..., "temperature": ..., "max_tokens": ...,
     "messages": [{"role": "user", "content": [
        {"type": "text", "text": "..."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}, ...]}]}

The reply's ``choices[0].message.content`` is the text, ``usage.prompt_tokens`` /
``usage.completion_tokens`` the tokens when the server reports them.

Politeness: requests start at most ``max_requests_per_s`` per second; a 429, a 5xx, a timeout or
a lost connection is retried up to ``max_retries`` times after the server's ``Retry-After``
(seconds) or else ``backoff_s * 2**k``, capped at ``max_backoff_s``. Any other HTTP status is
one error line, and so is a connection refused before the server ever answered (nothing listens
there: a wrong ``--endpoint``; it took six attempts and 31 s to say so). Every attempt is
charged to the run's :class:`CostAccount` (its budget included).

Written on the standard library's urllib: a single JSON POST needs no HTTP client dependency,
and the core install (no extras) can label.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from simreal.errors import ConfigError, SimrealError
from simreal.rewards.label_account import CostAccount
from simreal.rewards.labelling import Part, Reply

if TYPE_CHECKING:
    from simreal.rewards.labellers import LabellerConfig

#: HTTP statuses worth a retry: rate limited, or the server's own trouble.
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class LabellerError(SimrealError):
    """The labelling endpoint refused a request or kept failing; the message names the URL and status."""


def png_data_url(frame: np.ndarray) -> str:
    """One (H, W, 3) uint8 frame as a ``data:image/png;base64,...`` URL (lossless)."""
    import imageio.v3 as iio

    return "data:image/png;base64," + base64.b64encode(iio.imwrite("<bytes>", frame, extension=".png")).decode("ascii")


def chat_content(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """A user turn's ``content`` list: text parts as ``text``, frames as PNG ``image_url`` parts."""
    return [
        {"type": "text", "text": p}
        if isinstance(p, str)
        else {"type": "image_url", "image_url": {"url": png_data_url(p)}}
        for p in parts
    ]


def _retry_after_s(headers: Any) -> float | None:
    """The ``Retry-After`` header in seconds, when it is a number (an HTTP date is ignored)."""
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class OpenAIChat:
    """:class:`~simreal.rewards.labelling.VlmChat` over HTTP; see the module docstring."""

    def __init__(self, config: LabellerConfig, account: CostAccount):
        self.model = config.model
        self.config = config
        self.account = account
        self.url = config.endpoint.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json"}
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise ConfigError(
                    "labeller.api_key_env",
                    f"environment variable {config.api_key_env} is not set or empty; export it with the API key",
                )
            self._headers["Authorization"] = f"Bearer {key}"
        self._next_start = 0.0  # time.monotonic() before which no request may start
        self._answered = False  # has the server ever replied (then a refused connection is a restart)

    def __repr__(self) -> str:  # never show the headers (the key)
        return f"OpenAIChat(model={self.model!r}, url={self.url!r})"

    def _wait_turn(self) -> None:
        """Sleep until the rate limit lets the next request start."""
        now = time.monotonic()
        if now < self._next_start:
            time.sleep(self._next_start - now)
        if self.config.max_requests_per_s > 0:
            self._next_start = max(now, self._next_start) + 1.0 / self.config.max_requests_per_s

    def _post(self, body: bytes) -> dict[str, Any]:
        request = urllib.request.Request(self.url, data=body, headers=self._headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
            return json.loads(response.read())

    def complete(self, parts: Sequence[Part], max_tokens: int) -> Reply:
        """One chat completion, retried as the module docstring says."""
        body = json.dumps(
            {
                "model": self.model,
                "temperature": self.config.temperature,
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": chat_content(parts)}],
            }
        ).encode()
        cfg = self.config
        for attempt in range(cfg.max_retries + 1):
            self.account.reserve(1)
            self._wait_turn()
            start = time.monotonic()
            retry_after = None
            try:
                data = self._post(body)
            except urllib.error.HTTPError as e:
                self.account.record(None, time.monotonic() - start)
                detail = e.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
                why = f"HTTP {e.code}" + (f" ({detail})" if detail else "")
                if e.code not in RETRY_STATUS:
                    hint = f"; check the key in ${cfg.api_key_env}" if e.code in (401, 403) and cfg.api_key_env else ""
                    raise LabellerError(f"{self.url}: {why}{hint}") from None
                retry_after = _retry_after_s(e.headers)
            except json.JSONDecodeError as e:
                self.account.record(None, time.monotonic() - start)
                raise LabellerError(f"{self.url}: the reply is not JSON ({e.msg})") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as e:
                self.account.record(None, time.monotonic() - start)
                why = f"{type(e).__name__}: {getattr(e, 'reason', None) or e}"
                refused = isinstance(getattr(e, "reason", e), ConnectionRefusedError)
                if refused and not self._answered:  # nothing listens there: a wrong --endpoint, not a restart
                    raise LabellerError(
                        f"{self.url}: connection refused; is the server running, and is --endpoint "
                        "its base URL (.../v1)?"
                    ) from None
            else:
                reply = _reply(data, self.url)
                self.account.record(reply, time.monotonic() - start)
                self._answered = True
                return reply
            if attempt == cfg.max_retries:
                break
            wait_s = min(cfg.max_backoff_s, retry_after if retry_after is not None else cfg.backoff_s * 2**attempt)
            self.account.retries += 1
            time.sleep(wait_s)
            self.account.request_s += wait_s
        raise LabellerError(f"{self.url}: gave up after {cfg.max_retries + 1} attempts, the last: {why}")


def _reply(data: Any, url: str) -> Reply:
    """The :class:`Reply` in a chat-completions response; LabellerError naming the missing field."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LabellerError(
            f"{url}: expected a chat completion with choices[0].message.content, got {json.dumps(data)[:200]}"
        ) from None
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    tokens = [usage.get(k) if isinstance(usage.get(k), int) else None for k in ("prompt_tokens", "completion_tokens")]
    return Reply(text=str(content or ""), prompt_tokens=tokens[0], completion_tokens=tokens[1])
