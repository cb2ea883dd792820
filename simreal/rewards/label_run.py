"""The labelling loop: pairs of observations -> preference labels, through the cache, within a budget.

Each pair ``(i, j)`` of ``observations`` is looked up in the :class:`LabelCache` by its query key
(model, prompts, task, both observations' pixels); only a pair never answered is sent to the
model (two requests, RL-VLM-F's analysis and labelling stages), and its answer is cached at
once, one that states no label too: the cache keeps the raw text and labels are parsed when read,
so a better parser re-labels it without a request. Only an empty reply (a reasoning model out of
tokens) is not an answer, and is asked again. So a rerun, or a run resumed after a crash, asks
nothing twice. When the request budget cannot cover a whole pair the loop stops asking, still
collects the pairs the cache already holds, and says it stopped; nothing is lost, and a later
run with more budget goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from simreal.rewards.label_account import BudgetExhausted, CostAccount
from simreal.rewards.label_cache import LabelCache
from simreal.rewards.labelling import UNSURE, VlmChat, ask_preference, query_key, stated_label

#: Requests one uncached pair costs (analysis + labelling).
REQUESTS_PER_PAIR = 2


@dataclasses.dataclass(frozen=True)
class LabelRun:
    """The pairs that got a label (positions into the pairs asked for), their labels, and why it stopped early."""

    done: np.ndarray  # (K,) int64 positions into ``pairs``
    labels: np.ndarray  # (K,) int8 in {0, 1, -1}
    stopped: str | None  # None: every pair labelled; else the reason (the budget)


def label_pairs(
    chat: VlmChat,
    cache: LabelCache,
    account: CostAccount,
    observations: np.ndarray,
    pairs: Sequence[tuple[int, int]] | np.ndarray,
    task: str,
    analysis_tokens: int = 512,
    label_tokens: int = 32,
    on_pair: Callable[[int], None] | None = None,
) -> LabelRun:
    """Label ``pairs`` of ``observations`` (N, H, W, 3) frames or (N, T, H, W, 3) clips, uint8.

    Label 0: observation ``pairs[k][0]`` is closer to the goal ``task``; 1: ``pairs[k][1]``; -1: the
    model cannot tell (or stated no label). ``on_pair(k)`` follows each pair handled (progress)."""
    done: list[int] = []
    labels: list[int] = []
    stopped = None
    for k, (i, j) in enumerate(np.asarray(pairs, dtype=np.int64).reshape(-1, 2)):
        key = query_key(chat.model, task, observations[i], observations[j])
        answer = cache.get(key)
        if answer is not None:
            account.pairs_cached += 1
        elif stopped is None:
            remaining = account.remaining()
            try:
                if remaining is not None and remaining < REQUESTS_PER_PAIR:
                    raise BudgetExhausted(f"request budget of {account.budget} spent ({account.requests} sent)")
                answer = ask_preference(chat, observations[i], observations[j], task, analysis_tokens, label_tokens)
            except BudgetExhausted as e:  # before a pair, or during a retry
                stopped = str(e)
                continue
            account.pairs_asked += 1
            if answer.answer.strip():  # an empty reply is no answer: the next run asks again
                cache.put(key, answer, chat.model)
        else:
            continue
        label = stated_label(answer.answer)
        if label is None:
            account.unparsed += 1
            label = UNSURE
        done.append(k)
        labels.append(label)
        if on_pair is not None:
            on_pair(k + 1)
    return LabelRun(done=np.asarray(done, np.int64), labels=np.asarray(labels, np.int8), stopped=stopped)
