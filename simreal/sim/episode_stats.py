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

A task declares its statistics as a table of named terms, as it declares its reward terms:
``MjEnv.stat_table()`` maps each statistic's name to an :class:`EpisodeStat` (which per-step
sample, reduced how, over which episodes), and ``MjEnv.stat_samples(phys, info)`` gives the
samples after each step. :func:`init_stats`, :func:`update_stats` and :func:`final_stats` run
the table; with ``x_t`` the sample at the steps ``t`` it counts (``n`` of them) the reductions
are::

    mean   sum_t x_t / n            rms    sqrt(sum_t x_t^2 / n)
    last   x at the last counted step
    all    every counted x_t true (an outcome: also false when the episode terminated or counted
           no step)
    terminated / survived   the episode ended early on a failure / did not (no sample)

``over``: ``kept``, defined for the episodes that did not terminate and counted a step; ``every``,
for every episode that counted a step. ``below``: the outcome ``reduced < below`` of an episode
that did not terminate (0 or 1, every episode counts). ``window``: a vector sample (``width`` long) averaged over
consecutive windows of that many steps (one ends where ``info["step"] % window == 0``), each
window's norm one sample (a walk's pace over a gait cycle).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Literal

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


Reduce = Literal["mean", "rms", "last", "all", "terminated", "survived"]


@dataclasses.dataclass(frozen=True)
class EpisodeStat:
    """One statistic of a task's table (module docstring): the sample named ``sample`` (default:
    the statistic's own name) reduced by ``reduce`` over the episode's counted steps."""

    reduce: Reduce
    sample: str = ""
    over: Literal["kept", "every"] = "kept"
    below: float | None = None
    window: int = 1
    width: int = 1  # a windowed sample's length


#: A step's sample: a value, or (value, counted) where only some steps count (counted: bool).
Sample = jax.Array | tuple[jax.Array, jax.Array]


def init_stats(table: Mapping[str, EpisodeStat]) -> dict[str, Any]:
    """The accumulators of ``table`` at an episode's start."""
    z = jnp.zeros(())
    return {
        name: {
            "sum": z,
            "n": z,
            "last": z,
            "all": jnp.ones((), jnp.bool_),
            "win": jnp.zeros(st.width if st.window > 1 else 0),
        }
        for name, st in table.items()
        if st.reduce not in ("terminated", "survived")
    }


def update_stats(
    table: Mapping[str, EpisodeStat], acc: Mapping[str, Any], samples: Mapping[str, Sample], step: Any
) -> dict[str, Any]:
    """The accumulators after one step with ``samples`` (``step``: ``info["step"]``, read by a
    windowed statistic only)."""
    out = {}
    for name, a in acc.items():
        st = table[name]
        x = samples[st.sample or name]
        x, counted = x if isinstance(x, tuple) else (x, jnp.bool_(True))
        win = a["win"]
        if st.window > 1:
            win = win + jnp.where(counted, x, 0.0)
            counted = counted & (step % st.window == 0)
            x, win = jnp.linalg.norm(win / st.window), jnp.where(counted, 0.0, win)
        x = jnp.asarray(x, jnp.float32)  # an "all" sample: true as 1
        out[name] = {
            "sum": a["sum"] + jnp.where(counted, jnp.square(x) if st.reduce == "rms" else x, 0.0),
            "n": a["n"] + counted.astype(jnp.float32),
            "last": jnp.where(counted, x, a["last"]),
            "all": a["all"] & (~counted | (x > 0.5)),
            "win": win,
        }
    return out


def final_stats(table: Mapping[str, EpisodeStat], acc: Mapping[str, Any], terminated: jax.Array) -> dict[str, Any]:
    """Each statistic of ``table`` for the episode that ended with accumulators ``acc``
    (``terminated``: it ended early on a failure); a statistic defined for some episodes only
    comes with its count (:func:`defined_where`)."""
    out: dict[str, Any] = {}
    for name, st in table.items():
        if st.reduce in ("terminated", "survived"):
            out[name] = (terminated if st.reduce == "terminated" else ~terminated).astype(jnp.float32)
            continue
        a = acc[name]
        stepped = a["n"] > 0
        if st.reduce == "all":
            out[name] = (a["all"] & ~terminated & stepped).astype(jnp.float32)
            continue
        n = jnp.maximum(a["n"], 1.0)
        value = {"mean": a["sum"] / n, "rms": jnp.sqrt(a["sum"] / n), "last": a["last"]}[st.reduce]
        if st.below is not None:
            out[name] = ((value < st.below) & ~terminated & stepped).astype(jnp.float32)
        else:
            out.update(defined_where(name, value, (~terminated if st.over == "kept" else True) & stepped))
    return out
