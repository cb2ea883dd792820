"""The early-stop rule: stop once evaluation shows, at 95% confidence, a success rate of at
least ``train.target_success``.

A success rate measured on n episodes is noisy: a policy that truly succeeds 93% of the time
reads >= 95% on 128 episodes one time in five, so stopping on that point estimate (as this
loop once did) stops early on luck and claims more than ``simreal eval`` later measures. The
rule, for every evaluation the loop runs (periodic, success-triggered, final):

1. the periodic evaluation: ``train.num_eval_envs`` episodes (seed + 1, the same episodes
   every time, so its curve compares iterations);
2. when its success reaches the target, a confirming evaluation on
   ``max(train.num_eval_envs, CONFIRM_EPISODES)`` new episodes (seed + 2); none when the
   periodic one has that many already. Its result replaces the periodic one (metrics.csv,
   the summary);
3. the target is reached when that evaluation's one-sided lower confidence bound on the
   success rate (:func:`success_lower_bound`, at ``CONFIDENCE``) is >= the target.

With 512 episodes and a 0.95 target, step 3 needs 495 successes (0.967); a policy at exactly
0.95 passes 4% of the time, one at 0.96 26%, one at 0.97 72%. The bound is per evaluation:
a run that confirms many times has more chances to pass on luck, which is why it is a bound
and not the point estimate. The confirming evaluation costs ``CONFIRM_EPISODES /
num_eval_envs`` periodic ones (4 at the defaults) and runs only when the cheap one passed.

It stops early for futility: step 3 needs at least :func:`successes_needed` successes (495 of
512 at 0.95), so once more than ``CONFIRM_EPISODES`` minus that many episodes have failed
(17) it cannot pass, and a learner that runs its episodes in chunks stops after the chunk that
showed it (``Learner.evaluate``'s ``max_failures``). The verdict is the one the whole
evaluation would give; its figures are then those of the episodes run. A policy at 0.93-0.95,
the usual failed confirmation, stops after 256-384 of the 512 episodes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

CONFIDENCE = 0.95  # one-sided
CONFIRM_EPISODES = 512  # what `simreal eval --episodes 512` measures, the number the issue compared


def success_lower_bound(success: float, episodes: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Wilson score lower bound on a success probability.

    Each episode succeeds or not (every task's ``success`` statistic is 0 or 1), so
    k = round(success * n) successes in n episodes is binomial(n, p), and with
    z = Phi^-1(confidence) and p^ = k / n::

        LB = (p^ + z^2/(2n) - z sqrt(p^(1 - p^)/n + z^2/(4n^2))) / (1 + z^2/n)

    P(LB <= p) is about ``confidence`` for every p, also near 1 where the normal
    approximation p^ - z sqrt(p^(1-p^)/n) reads 1.0 after n successes out of n (Brown, Cai &
    DasGupta 2001). 0 when ``episodes`` is 0. Evaluated here as written, not through scipy's
    ``binomtest(...).proportion_ci(method="wilson")`` (the same number, held to it by
    tests/policies/test_run_faults.py): importing ``scipy.stats`` took 0.4 s, a pause in the
    middle of training at its first evaluation.
    """
    if episodes <= 0:
        return 0.0
    n = episodes
    p = min(max(round(success * n), 0), n) / n
    z = statistics.NormalDist().inv_cdf(confidence)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (p + z * z / (2 * n) - half) / (1 + z * z / n)


def successes_needed(episodes: int, target: float, confidence: float = CONFIDENCE) -> int:
    """The fewest successes out of ``episodes`` whose lower bound (:func:`success_lower_bound`)
    reaches ``target``; ``episodes + 1`` when not even all of them do. The bound grows with the
    successes, so a bisection finds it."""
    lo, hi = 0, episodes + 1  # the answer lies in [lo, hi]; hi = episodes + 1 means "none"
    while lo < hi:
        k = (lo + hi) // 2
        if success_lower_bound(k / episodes, episodes, confidence) >= target:
            hi = k
        else:
            lo = k + 1
    return lo


def with_bound(result: Mapping[str, Any]) -> dict[str, Any]:
    """An evaluation's statistics plus ``success_lower`` (its bound; absent without a ``success``
    that is a number: NaN when no episode ended)."""
    out = dict(result)
    if "episodes" in out and math.isfinite(out.get("success", math.nan)):
        out["success_lower"] = success_lower_bound(float(out["success"]), int(out["episodes"]))
    return out


def evaluate(learner: Any, cfg: Any) -> dict[str, Any]:
    """Steps 1 and 2 of the rule for a ``loop_common.Learner``: the periodic evaluation, and
    the confirming one in its place when the periodic one reached ``train.target_success``
    on fewer than ``CONFIRM_EPISODES`` episodes (stopped for futility, module docstring; it
    carries ``episodes_planned``); with :func:`with_bound`'s ``success_lower``."""
    tc = cfg.train
    result = with_bound(learner.evaluate())
    if (
        tc.target_success > 0
        and result.get("success", 0.0) >= tc.target_success
        and tc.num_eval_envs < CONFIRM_EPISODES
    ):
        allowed = CONFIRM_EPISODES - successes_needed(CONFIRM_EPISODES, tc.target_success)
        if allowed < 0:  # a target no 512 episodes can confirm (above 0.9947): none is run
            return result
        result = with_bound(learner.evaluate(episodes=CONFIRM_EPISODES, seed=cfg.seed + 2, max_failures=allowed))
        result["episodes_planned"] = CONFIRM_EPISODES
    return result


def reached(result: Mapping[str, Any], target: float) -> bool:
    """The stop rule's step 3: a positive target and a lower bound at or above it."""
    return target > 0 and result.get("success_lower", -1.0) >= target


def describe(result: Mapping[str, Any], target: float) -> str:
    """The rule's verdict in words: ``eval success 0.967 on 512 episodes, 95% lower bound
    0.951 >= target 0.95`` (a confirmation stopped for futility says so); empty when the
    evaluation has no success statistic."""
    if "success_lower" not in result:
        return ""
    n, planned = int(result["episodes"]), int(result.get("episodes_planned", 0))
    stopped = f" (of {planned}: stopped once it could no longer pass)" if n < planned else ""
    text = (
        f"eval success {result['success']:.3f} on {n} episodes{stopped}, "
        f"{CONFIDENCE:.0%} lower bound {result['success_lower']:.3f}"
    )
    if target > 0:
        text += f" {'>=' if reached(result, target) else '<'} target {target:g}"
    return text
