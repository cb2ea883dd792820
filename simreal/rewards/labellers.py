"""Which vision-language model answers preference queries: the ``labeller`` config and its backends.

    labeller:
      backend: openai                       # any OpenAI-compatible chat-completions API
      endpoint: http://127.0.0.1:8000/v1     # vLLM; Ollama: http://127.0.0.1:11434/v1; https://api.openai.com/v1
      model: Qwen/Qwen2.5-VL-7B-Instruct
      api_key_env: OPENAI_API_KEY            # the NAME of the variable; empty for a local server
      max_requests_per_s: 2.0

    labeller:
      backend: hf                           # a local Hugging Face VLM, nothing downloads
      model: models/Qwen2.5-VL-3B-Instruct   # local directory or a repo id in the local HF cache

:func:`make_chat` builds the backend named by ``backend`` from :data:`BACKENDS` (import paths,
so a backend's libraries load only when it is used). The API key is read from the environment
variable ``api_key_env`` when the client is built; no config, log, cache or label file holds it.
"""

from __future__ import annotations

import dataclasses
import importlib
import urllib.parse

from simreal.config import field
from simreal.errors import ConfigError
from simreal.rewards.label_account import CostAccount
from simreal.rewards.labelling import VlmChat

#: backend name -> "module:class"; each class is built as ``cls(config, account)``.
BACKENDS: dict[str, str] = {
    "openai": "simreal.rewards.labeller_http:OpenAIChat",
    "hf": "simreal.rewards.labeller_hf:HFChat",
}


@dataclasses.dataclass(frozen=True)
class LabellerConfig:
    """The ``labeller:`` section: the model that answers, and how it may be asked."""

    model: str = field(doc="model name the endpoint serves (openai), or a local directory / cached repo id (hf)")
    backend: str = field(
        "openai", choices=tuple(BACKENDS), doc="openai: OpenAI-compatible HTTP API; hf: local Hugging Face VLM"
    )
    endpoint: str = field("", doc="openai: base URL, requests go to <endpoint>/chat/completions")
    api_key_env: str = field(
        "",
        doc="openai: name of the environment variable holding the API key (sent as "
        "'Authorization: Bearer'); empty = no key",
    )
    temperature: float = field(0.0, min=0.0, max=2.0, doc="sampling temperature; 0 = greedy")
    analysis_tokens: int = field(512, min=1, doc="most tokens of the stage-1 description")
    label_tokens: int = field(32, min=1, doc="most tokens of the stage-2 answer")
    timeout_s: float = field(120.0, min=0.001, doc="openai: seconds one request may take")
    max_requests_per_s: float = field(0.0, min=0.0, doc="openai: client-side rate limit; 0 = none")
    max_retries: int = field(5, min=0, doc="openai: re-sends after a 429, a 5xx or a lost connection")
    backoff_s: float = field(
        1.0,
        min=0.0,
        doc="openai: first wait after a 429/5xx without Retry-After; doubles each retry, capped at max_backoff_s",
    )
    max_backoff_s: float = field(60.0, min=0.0, doc="openai: longest wait between retries, Retry-After included")

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ConfigError("labeller.model", "expected a model name (openai) or a local model directory (hf)")
        if self.backend == "openai":
            url = urllib.parse.urlsplit(self.endpoint)
            if url.scheme not in ("http", "https") or not url.netloc:
                raise ConfigError(
                    "labeller.endpoint",
                    f"expected an http(s) base URL such as http://127.0.0.1:8000/v1, got {self.endpoint!r}",
                )
        if self.api_key_env and not self.api_key_env.replace("_", "").isalnum():
            raise ConfigError(
                "labeller.api_key_env",
                "expected the NAME of an environment variable (letters, digits, _), e.g. OPENAI_API_KEY, not the key",
            )


def make_chat(config: LabellerConfig, account: CostAccount) -> VlmChat:
    """The backend ``config.backend`` names, charging its requests to ``account``."""
    module, cls = BACKENDS[config.backend].split(":")
    return getattr(importlib.import_module(module), cls)(config, account)
