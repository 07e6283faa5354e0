"""One problem's suite: the tolerance and the inputs chosen for it from its kill relation, by the integer
program or greedily, under a budget of inputs and an allowance of false alarms.

The tolerance is chosen with the inputs: at each candidate tolerance (tightest first) the best suite is
chosen, and the tolerance whose suite catches the most weight wins, the tightest among equals. A tolerance
whose upper bound (`selection.upper_bound`) is no more than the best so far is not tried. Where nothing can be
caught at any tolerance (no weight to fit, as in a fold that holds none of the problem's mutants), the
tolerance with the most allowed inputs is taken (the loosest among equals) and the suite is filled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oracleaudit.minimization.kills import ProblemKills
from oracleaudit.minimization.selection import caught, greedy_select, ilp_select, upper_bound

__all__ = ["METHODS", "Suite", "choose"]

METHODS = ("ilp", "greedy")


@dataclass(frozen=True)
class Suite:
    tolerance: int | None  # index into ProblemKills.tolerances; None: no input is allowed at any tolerance
    inputs: tuple[int, ...]  # indices into ProblemKills.inputs

    def hits(self, kills: ProblemKills) -> np.ndarray:
        """Per mutant: some chosen input rejects it."""
        if self.tolerance is None or not self.inputs:
            return np.zeros(len(kills.mutants), dtype=bool)
        return kills.kills[self.tolerance][:, list(self.inputs)].any(axis=1)

    def seen(self, kills: ProblemKills) -> np.ndarray:
        """Per mutant: the evidence holds it on every chosen input."""
        if not self.inputs:
            return np.ones(len(kills.mutants), dtype=bool)
        return kills.observed[:, list(self.inputs)].all(axis=1)


def choose(kills: ProblemKills, weights: np.ndarray, budget: int, method: str = "ilp", use_cost: bool = False,
           allowance: int = 0) -> Suite:
    """The problem's suite for these mutant weights (zero weight: a mutant not fitted on)."""
    select = ilp_select if method == "ilp" else greedy_select
    cost = kills.cost_ms if use_cost else None
    weights = np.asarray(weights, dtype=np.float64)
    best: tuple[float, int, list[int]] | None = None
    for t in range(len(kills.tolerances)):
        alarms = kills.alarms(t, allowance)
        bound = upper_bound(kills.kills[t], weights, budget, alarms, allowance)
        if bound <= 0 or (best is not None and bound <= best[0]):
            continue
        chosen = select(kills.kills[t], weights, budget, cost=cost, alarms=alarms, allowance=allowance,
                        fill=not use_cost, observed=kills.observed)
        value = caught(kills.kills[t], weights, chosen)
        if best is None or value > best[0]:
            best = (value, t, chosen)
    if best is not None:
        return Suite(best[1], tuple(best[2]))
    allowed = np.array([kills.allowed(t, allowance).sum() for t in range(len(kills.tolerances))])
    if not len(allowed) or allowed.max() == 0:
        return Suite(None, ())
    t = int(np.flatnonzero(allowed == allowed.max())[-1])
    chosen = select(kills.kills[t], weights, budget, cost=cost, alarms=kills.alarms(t, allowance), allowance=allowance,
                    fill=not use_cost, observed=kills.observed)
    return Suite(t, tuple(chosen))
