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
"""

from __future__ import annotations

import math
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
    DasGupta 2001). scipy's ``binomtest(...).proportion_ci(method="wilson")`` computes it.
    0 when ``episodes`` is 0.
    """
    from scipy.stats import binomtest

    if episodes <= 0:
        return 0.0
    k = min(max(round(success * episodes), 0), episodes)
    return float(binomtest(k, episodes, alternative="greater").proportion_ci(confidence, method="wilson").low)


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
    on fewer than ``CONFIRM_EPISODES`` episodes; with :func:`with_bound`'s ``success_lower``."""
    tc = cfg.train
    result = with_bound(learner.evaluate())
    if (tc.target_success > 0 and result.get("success", 0.0) >= tc.target_success
            and tc.num_eval_envs < CONFIRM_EPISODES):
        result = with_bound(learner.evaluate(episodes=CONFIRM_EPISODES, seed=cfg.seed + 2))
    return result


def reached(result: Mapping[str, Any], target: float) -> bool:
    """The stop rule's step 3: a positive target and a lower bound at or above it."""
    return target > 0 and result.get("success_lower", -1.0) >= target


def describe(result: Mapping[str, Any], target: float) -> str:
    """The rule's verdict in words: ``eval success 0.967 on 512 episodes, 95% lower bound
    0.951 >= target 0.95``; empty when the evaluation has no success statistic."""
    if "success_lower" not in result:
        return ""
    text = (f"eval success {result['success']:.3f} on {int(result['episodes'])} episodes, "
            f"{CONFIDENCE:.0%} lower bound {result['success_lower']:.3f}")
    if target > 0:
        text += f" {'>=' if reached(result, target) else '<'} target {target:g}"
    return text
