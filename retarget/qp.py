"""Small dense QPs with hard rows and, only when those are infeasible, slack on the soft ones.

    minimise    1/2 x^T H x + f^T x
    subject to  lb <= x <= ub                      (always hard: joint limits)
                lo <= A x <= hi                     (rows; eq rows have lo == hi)

Rows flagged ``soft`` (contacts, stance) are first solved as hard constraints. If the QP is
infeasible, each soft row gets a slack variable s >= 0 that relaxes it, penalised by
``w (s^2 + s)`` for inequality rows (the linear term makes the relaxation exact) and
``w s^2`` for equality rows, and the QP is solved again; the report says by how much
each row was relaxed. Backends: quadprog (Goldfarb-Idnani, dense) and daqp (dual active set).
"""

from __future__ import annotations

import dataclasses

import numpy as np

INF = 1e20


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
    I = np.eye(n)
    blo, bhi = lb > -INF, ub < INF
    rows += [I[blo], -I[bhi]]
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
    sense[len(f):][eq] = 5
    bu = np.concatenate([np.minimum(ub, INF), np.minimum(hi, INF)])
    bl = np.concatenate([np.maximum(lb, -INF), np.maximum(lo, -INF)])
    x, _, flag, _ = daqp.solve(H, f, A, bu, bl, sense)
    return x if flag >= 1 else None


BACKENDS = {"quadprog": _quadprog, "daqp": _daqp}


def solve_qp(H: np.ndarray, f: np.ndarray, lb: np.ndarray, ub: np.ndarray, A: np.ndarray, lo: np.ndarray,
             hi: np.ndarray, soft: np.ndarray, slack_weight: float = 1e4, backend: str = "quadprog") -> QPResult:
    """Solve the QP of the module docstring; ``soft`` (m,) flags the rows that may take slack."""
    solve = BACKENDS[backend]
    m, n = A.shape
    x = solve(H, f, lb, ub, A, lo, hi)
    if x is not None:
        return QPResult(x, "optimal", np.zeros(m))
    # Relax soft rows with one slack each: inequality rows A x + s >= lo (s >= 0), equality rows
    # A x + s = lo (s free, quadratic penalty only).
    idx = np.flatnonzero(soft)
    k = len(idx)
    if k == 0:
        return QPResult(np.zeros(n), "failed", np.zeros(m))
    is_eq = lo[idx] == hi[idx]
    S = np.zeros((m, k))
    S[idx, np.arange(k)] = 1.0
    H2 = np.zeros((n + k, n + k))
    H2[:n, :n] = H
    H2[n:, n:] = slack_weight * np.eye(k)
    f2 = np.concatenate([f, np.where(is_eq, 0.0, slack_weight)])
    lb2 = np.concatenate([lb, np.where(is_eq, -INF, 0.0)])
    ub2 = np.concatenate([ub, np.full(k, INF)])
    x2 = solve(H2, f2, lb2, ub2, np.concatenate([A, S], axis=1), lo, hi)
    if x2 is None:
        return QPResult(np.zeros(n), "failed", np.zeros(m))
    slack = np.zeros(m)
    slack[idx] = np.abs(x2[n:])
    return QPResult(x2[:n], "relaxed", slack)
