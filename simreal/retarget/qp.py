"""Small dense QPs with hard rows and, only when those are infeasible, slack on the soft ones.

    minimise    1/2 x^T H x + f^T x
    subject to  lb <= x <= ub                      (always hard: joint limits)
                lo <= A x <= hi                     (rows; eq rows have lo == hi)

Rows flagged ``soft`` (contacts, stance) are first solved as hard constraints. If the QP is
infeasible, soft rows get slack variables s >= 0 that relax them, penalised by ``w (s^2 + s)``
(the linear term makes the relaxation exact: rows that can hold keep zero slack), and the QP
is solved again: first with slack only on the soft rows binding or nearly binding at x = 0 (few
extra variables, fast), then, if still infeasible, on all of them. The result says by how much
each row was relaxed. Backends: daqp (dual active set; the default, about 2x faster here) and
quadprog (Goldfarb-Idnani). Both are dense, which suits these ~100-variable problems.
"""

from __future__ import annotations

import dataclasses

import numpy as np

INF = 1e20
NEAR_ACTIVE = 0.02  # a row within this of binding at x = 0 [m or rad] is a slack candidate


@dataclasses.dataclass
class QPResult:
    """x: solution; status: "optimal", "relaxed" (needed slack) or "failed"; slack: (m,) relaxation per row."""

    x: np.ndarray
    status: str
    slack: np.ndarray


def _quadprog(H, f, lb, ub, A, lo, hi):
    import quadprog

    eq = (lo == hi) & (np.abs(lo) < INF)
    rows, rhs = [A[eq]], [lo[eq]]
    fin_lo, fin_hi = (~eq) & (lo > -INF), (~eq) & (hi < INF)
    rows += [A[fin_lo], -A[fin_hi]]
    rhs += [lo[fin_lo], -hi[fin_hi]]
    n = len(f)
    eye = np.eye(n)
    blo, bhi = lb > -INF, ub < INF
    rows += [eye[blo], -eye[bhi]]
    rhs += [lb[blo], -ub[bhi]]
    C = np.concatenate(rows)
    b = np.concatenate(rhs)
    try:
        x = quadprog.solve_qp(H, -f, C.T.copy(), b, int(eq.sum()))[0]
    except ValueError:
        return None
    return x


def _daqp(H, f, lb, ub, A, lo, hi):
    import daqp

    eq = (lo == hi) & (np.abs(lo) < INF)
    sense = np.zeros(len(f) + len(lo), dtype=np.int32)
    sense[len(f) :][eq] = 5
    bu = np.concatenate([np.minimum(ub, INF), np.minimum(hi, INF)])
    bl = np.concatenate([np.maximum(lb, -INF), np.maximum(lo, -INF)])
    x, _, flag, _ = daqp.solve(H, f, A, bu, bl, sense)
    return x if flag >= 1 else None


BACKENDS = {"quadprog": _quadprog, "daqp": _daqp}


def solve_qp(
    H: np.ndarray,
    f: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    A: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    soft: np.ndarray,
    slack_weight: float = 1e4,
    backend: str = "quadprog",
) -> QPResult:
    """Solve the QP of the module docstring; ``soft`` (m,) flags the rows that may take slack."""
    solve = BACKENDS[backend]
    m, n = A.shape
    x = solve(H, f, lb, ub, A, lo, hi)
    if x is not None:
        return QPResult(x, "optimal", np.zeros(m))
    # Slack first only on the soft rows that are binding or nearly so at x = 0 (a few, so the
    # relaxed QP stays small); if that is still infeasible, on every soft row.
    near = soft & ((lo == hi) | (lo > -NEAR_ACTIVE) | (hi < NEAR_ACTIVE))
    for rows in (near, soft) if near.sum() < soft.sum() else (soft,):
        res = _relaxed(solve, H, f, lb, ub, A, lo, hi, rows, slack_weight)
        if res is not None:
            return res
    return QPResult(np.zeros(n), "failed", np.zeros(m))


def _relaxed(solve, H, f, lb, ub, A, lo, hi, soft, slack_weight) -> QPResult | None:
    """Rows ``soft`` relaxed: A x + s_lo - s_hi within [lo, hi], s >= 0, cost w (s^2 + s): an exact
    penalty, so rows that can hold keep zero slack and the violation is the least needed."""
    m, n = A.shape
    idx = np.flatnonzero(soft)
    k = len(idx)
    if k == 0:
        return None
    up = hi[idx] < INF  # rows with an upper side need the second slack
    ku = int(up.sum())
    S = np.zeros((m, k + ku))
    S[idx, np.arange(k)] = 1.0
    S[idx[up], k + np.arange(ku)] = -1.0
    H2 = np.zeros((n + k + ku, n + k + ku))
    H2[:n, :n] = H
    H2[n:, n:] = slack_weight * np.eye(k + ku)
    f2 = np.concatenate([f, np.full(k + ku, slack_weight)])
    lb2 = np.concatenate([lb, np.zeros(k + ku)])
    ub2 = np.concatenate([ub, np.full(k + ku, INF)])
    x2 = solve(H2, f2, lb2, ub2, np.concatenate([A, S], axis=1), lo, hi)
    if x2 is None:
        return None
    slack = np.zeros(m)
    slack[idx] = x2[n : n + k]
    slack[idx[up]] += x2[n + k :]
    return QPResult(x2[:n], "relaxed", slack)
