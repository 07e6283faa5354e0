"""Choosing at most K inputs that reject the most (weighted) mutants: exactly, as an integer program solved by
HiGHS (`scipy.optimize.milp`), and greedily (each step the input that adds the most), the baseline.

The integer program: binary x_i (input i chosen), y_j ∈ [0, 1] (mutant j caught); maximise Σ w_j y_j subject
to y_j ≤ Σ_i kills[j, i] x_i, Σ x_i ≤ K and Σ a_i x_i ≤ N (a_i: the false alarms input i brings, N the
allowance). Among the suites that catch the most it takes the one of least cost: the fewest inputs (or the
least recorded runtime), earlier inputs breaking ties. When the greedy suite reaches an upper bound (the
weight some allowed input rejects, or the K best inputs' weights added) or K is 1, it is optimal, and with
no cost to minimise it is taken without solving the program.

With `fill`, a suite that catches all it can with fewer than K inputs is topped up to K with the allowed
inputs that reject the most mutants (then the most observed pairs, then pool order): extra inputs cost
nothing in sample and add margin for mutants not yet seen. Both choosers fill the same way.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

import numpy as np

__all__ = ["caught", "greedy_select", "ilp_select", "upper_bound"]

_SLACK = 1e-7  # relative: with weights not all whole, the second phase keeps the first's catch up to this


def caught(kills: np.ndarray, weights: np.ndarray, chosen: list[int]) -> float:
    """The weight of the mutants some chosen input rejects."""
    if not chosen or not len(weights):
        return 0.0
    return float(weights[kills[:, chosen].any(axis=1)].sum())


def _secondary_cost(n: int, cost: np.ndarray | None) -> np.ndarray:
    """Per input: what the second phase minimises (an input counts 1, or its share of the runtime), plus a
    tie-break smaller than any difference of the main term, favouring earlier inputs."""
    main = np.ones(n) if cost is None else np.asarray(cost, dtype=np.float64) / max(float(np.sum(cost)), 1e-12)
    return main + (np.arange(n) + 1) / (n + 1) ** 3


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """HiGHS prints some diagnostics from C on file descriptor 1, whatever its options say: keep them off
    stdout (a --json result goes there)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _allowed(n: int, alarms: np.ndarray | None, allowance: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.zeros(n, dtype=np.int64) if alarms is None else np.asarray(alarms, dtype=np.int64)
    return a, a <= allowance


def _fill(kills: np.ndarray, weights: np.ndarray, observed: np.ndarray | None, chosen: list[int], budget: int,
          a: np.ndarray, allowance: int) -> list[int]:
    """Top the suite up to `budget` inputs (see the module docstring)."""
    left = allowance - int(a[chosen].sum())
    score = weights @ kills.astype(np.float64) if len(weights) else np.zeros(kills.shape[1])
    seen = observed.sum(axis=0) if observed is not None else np.zeros(kills.shape[1])
    order = sorted(range(kills.shape[1]), key=lambda i: (-score[i], -seen[i], i))
    out = list(chosen)
    for i in order:
        if len(out) >= budget:
            break
        if i not in out and a[i] <= left:
            out.append(i)
            left -= int(a[i])
    return sorted(out)


def _greedy(kills: np.ndarray, weights: np.ndarray, budget: int, tie: np.ndarray, a: np.ndarray,
            allowance: int) -> list[int]:
    m, n = kills.shape
    chosen: list[int] = []
    left = np.ones(m, dtype=bool)
    spare = allowance
    while len(chosen) < budget and n:
        gains = (kills & left[:, None]).astype(np.float64).T @ weights if m else np.zeros(n)
        gains[chosen] = -1.0
        gains[a > spare] = -1.0
        if gains.max() <= 0:
            break
        best = max(range(n), key=lambda i: (gains[i], -tie[i]))
        chosen.append(best)
        spare -= int(a[best])
        left &= ~kills[:, best]
    return sorted(chosen)


def greedy_select(kills: np.ndarray, weights: np.ndarray, budget: int, cost: np.ndarray | None = None,
                  alarms: np.ndarray | None = None, allowance: int = 0, fill: bool = True,
                  observed: np.ndarray | None = None) -> list[int]:
    """Greedy-additional: while the budget allows, the allowed input that catches the most weight not yet
    caught (ties: the cheaper, then the earlier); stops when no input adds anything, then fills."""
    weights = np.asarray(weights, dtype=np.float64)
    a, _ = _allowed(kills.shape[1], alarms, allowance)
    chosen = _greedy(kills, weights, budget, _secondary_cost(kills.shape[1], cost), a, allowance)
    return _fill(kills, weights, observed, chosen, budget, a, allowance) if fill else chosen


def _reduced(kills: np.ndarray, weights: np.ndarray, tie: np.ndarray,
             a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same choice on fewer variables: mutants no input rejects dropped, mutants rejected by the same
    inputs merged (their weights added), and inputs dominated by another (rejecting a subset of its mutants
    at no lower secondary cost and no fewer false alarms) dropped. Returns the reduced relation, weights and
    the kept input indices."""
    any_kill = kills.any(axis=1)
    rows, w = kills[any_kill], weights[any_kill]
    if len(rows):
        unique, inverse = np.unique(rows, axis=0, return_inverse=True)
        rows, w = unique, np.bincount(inverse.reshape(-1), weights=w, minlength=len(unique))
    c = rows.astype(np.int64)
    useful = c.any(axis=0)
    inside = (c.T @ (1 - c)) == 0  # inside[i, j]: every mutant i rejects, j rejects too
    strict = inside & ~inside.T  # ... and j rejects more
    better = (tie[None, :] < tie[:, None]) | (strict & (tie[None, :] <= tie[:, None]))
    better &= a[None, :] <= a[:, None]
    np.fill_diagonal(better, False)
    dominated = (inside & better & useful[None, :]).any(axis=1)
    keep = np.flatnonzero(useful & ~dominated)
    return rows[:, keep], w, keep


def ilp_select(kills: np.ndarray, weights: np.ndarray, budget: int, cost: np.ndarray | None = None,
               alarms: np.ndarray | None = None, allowance: int = 0, fill: bool = True,
               observed: np.ndarray | None = None) -> list[int]:
    """The inputs (sorted indices) of an optimal suite of at most `budget` inputs (see the module docstring)."""
    weights = np.asarray(weights, dtype=np.float64)
    n_all = kills.shape[1]
    a, allowed = _allowed(n_all, alarms, allowance)
    tie_all = _secondary_cost(n_all, cost)
    usable = kills & allowed[None, :]
    chosen: list[int] = []
    if budget >= 1 and usable.any():
        greedy = _greedy(kills, weights, budget, tie_all, a, allowance)
        bound = upper_bound(kills, weights, budget, a, allowance)
        # One input, or a greedy suite that reaches the bound, is optimal without the program.
        exact = caught(kills, weights, greedy) >= bound - _SLACK * max(bound, 1.0) or (budget == 1 and not a.any())
        if cost is None and exact:
            chosen = greedy
        else:
            chosen = _solve(usable, weights, budget, tie_all, a, allowance, greedy if exact else None)
    return _fill(kills, weights, observed, chosen, budget, a, allowance) if fill else chosen


def upper_bound(kills: np.ndarray, weights: np.ndarray, budget: int, alarms: np.ndarray | None = None,
                allowance: int = 0) -> float:
    """No suite of `budget` allowed inputs catches more weight than this: the weight some allowed input rejects,
    and the weight the `budget` best allowed inputs reject each on its own."""
    a, allowed = _allowed(kills.shape[1], alarms, allowance)
    usable = kills & allowed[None, :]
    if not usable.any():
        return 0.0
    columns = np.sort(weights @ usable.astype(np.float64))[::-1]
    return min(float(weights[usable.any(axis=1)].sum()), float(columns[:budget].sum()))


def _solve(kills: np.ndarray, weights: np.ndarray, budget: int, tie_all: np.ndarray, a_all: np.ndarray,
           allowance: int, known: list[int] | None) -> list[int]:
    """The two phases: the most weight caught (unless `known` is an optimal suite already), then the least cost
    among the suites that catch as much (should the solver fail that, the first phase's suite)."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # scipy loads when a program is solved
    from scipy.sparse import csr_matrix, hstack, identity

    full_kills, full_weights = kills, weights
    kills, weights, kept = _reduced(kills, weights, tie_all, a_all)
    tie, a = tie_all[kept], a_all[kept]
    m, n = kills.shape
    # variables: x_0..x_{n-1}, y_0..y_{m-1}
    cover = hstack([-csr_matrix(kills.astype(np.float64)), identity(m, format="csr")], format="csr")
    zeros = np.zeros(m)
    constraints = [LinearConstraint(cover, -np.inf, 0.0),
                   LinearConstraint(csr_matrix(np.concatenate([np.ones(n), zeros])[None, :]), 0.0, float(budget))]
    if a.any():
        constraints.append(LinearConstraint(csr_matrix(np.concatenate([a.astype(np.float64), zeros])[None, :]),
                                            0.0, float(allowance)))
    integrality = np.concatenate([np.ones(n), zeros])
    bounds = Bounds(np.zeros(n + m), np.ones(n + m))
    options = {"mip_rel_gap": 0.0}  # the optimum, not one within HiGHS's default gap of 1e-4
    with _quiet():
        if known is None:
            first = milp(np.concatenate([np.zeros(n), -weights]), constraints=constraints, integrality=integrality,
                         bounds=bounds, options=options)
            if first.x is None:
                raise RuntimeError(f"the integer program failed: {first.message}")
            known = sorted(int(kept[i]) for i in np.flatnonzero(first.x[:n] > 0.5))
        best = caught(full_kills, full_weights, known)
        # Catch values differ by at least 1 when every weight is whole; else by more than the slack.
        whole = bool(np.all(full_weights == np.round(full_weights)))
        floor = best - 0.5 if whole else best - _SLACK * max(best, 1.0)
        keep = LinearConstraint(csr_matrix(np.concatenate([np.zeros(n), weights])[None, :]), floor, np.inf)
        second = milp(np.concatenate([tie, zeros]), constraints=[*constraints, keep], integrality=integrality,
                      bounds=bounds, options=options)
    if second.x is None:
        return known
    return sorted(int(kept[i]) for i in np.flatnonzero(second.x[:n] > 0.5))
