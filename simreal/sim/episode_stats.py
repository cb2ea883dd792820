"""Episode statistics: how a task reports them and how every trainer averages them.

A task's ``final_stats`` gives, per statistic ``<name>``, its value for the episode that just
ended; the env reports it as the metric ``episode/<name>`` times the done flag, with
``episode/done`` (1 where an episode ended). Summed over any set of ended episodes (the
episodes of a training iteration, the first episode of each evaluation env), the mean is::

    mean(<name>) = sum(episode/<name>) / sum(episode/<name>/n)   where the task reports a count
                 = sum(episode/<name>) / sum(episode/done)        otherwise

A statistic that means something only for some episodes (a position RMSE from the settle time
on, of episodes that did not crash) comes with its count ``<name>/n``: 1 for the episodes it is
defined for, 0 for the others, whose value is 0 (:func:`defined_where`). A mean over no
contributing episode is NaN (printed ``-``), never a 0 that looks like a perfect score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp

#: Suffix of a statistic's count: ``episode/pos_rmse_m/n`` counts the episodes ``pos_rmse_m`` is defined for.
COUNT_SUFFIX = "/n"


def defined_where(name: str, value: jax.Array, defined: jax.Array) -> dict[str, jax.Array]:
    """``{name: value, name/n: 1}`` for an episode the statistic is defined for, ``{name: 0,
    name/n: 0}`` otherwise (the value is replaced, not multiplied, so a NaN there cannot leak)."""
    return {name: jnp.where(defined, value, 0.0), name + COUNT_SUFFIX: defined.astype(jnp.float32)}


def episode_means(sums: Mapping[str, float]) -> dict[str, float]:
    """Per-episode means of the ``episode/<name>`` sums in ``sums`` (see module docstring), keyed
    ``<name>``; NaN for a statistic no episode contributed to; {} when no episode ended."""
    done = float(sums.get("episode/done", 0.0))
    if done <= 0:
        return {}
    out = {}
    for key, total in sums.items():
        if not key.startswith("episode/") or key == "episode/done" or key.endswith(COUNT_SUFFIX):
            continue
        n = float(sums.get(key + COUNT_SUFFIX, done))
        out[key.split("/", 1)[1]] = float(total) / n if n > 0 else math.nan
    return out
