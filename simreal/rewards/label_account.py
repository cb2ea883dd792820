"""What a labelling run spends: requests against a budget, tokens, seconds, cache hits.

A backend calls :meth:`CostAccount.reserve` before it sends each request (a retry too: the
budget caps requests sent, which is what a provider's rate limits and most bills count) and
:meth:`CostAccount.record` after; the labelling loop counts pairs and cache hits. The report
(:meth:`CostAccount.report`) is what ``simreal label`` prints and writes beside its labels.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from simreal.errors import SimrealError
from simreal.rewards.labelling import Reply


class BudgetExhausted(SimrealError):
    """The request budget would be exceeded; the run stops and keeps what it has."""


@dataclasses.dataclass
class CostAccount:
    """Counters of one run. ``budget``: the most requests it may send (None = no limit)."""

    budget: int | None = None
    requests: int = 0  # requests sent, retries included
    retries: int = 0  # of which re-sends after a 429, a 5xx or a lost connection
    prompt_tokens: int = 0  # as the backend reported them (0 when it reports none)
    completion_tokens: int = 0
    request_s: float = 0.0  # wall time spent in requests and backoff waits [s]
    pairs_asked: int = 0  # pairs answered by the model in this run
    pairs_cached: int = 0  # pairs answered from the cache (no request)
    unparsed: int = 0  # answers, asked or cached, that state no label (counted as -1)

    def remaining(self) -> int | None:
        """Requests left in the budget (None = no limit)."""
        return None if self.budget is None else max(0, self.budget - self.requests)

    def reserve(self, n: int = 1) -> None:
        """Count ``n`` requests about to be sent; BudgetExhausted (counting none) if they would pass the budget."""
        if self.budget is not None and self.requests + n > self.budget:
            raise BudgetExhausted(f"request budget of {self.budget} spent ({self.requests} sent)")
        self.requests += n

    def record(self, reply: Reply | None, seconds: float) -> None:
        """Add one attempt's time [s] and, when it got a reply, the tokens the reply reports."""
        self.request_s += seconds
        if reply is not None:
            self.prompt_tokens += reply.prompt_tokens or 0
            self.completion_tokens += reply.completion_tokens or 0

    def report(self) -> dict[str, Any]:
        """All counters as a JSON-ready mapping (``request_s`` rounded to ms)."""
        out = dataclasses.asdict(self)
        out["request_s"] = round(self.request_s, 3)
        return out
