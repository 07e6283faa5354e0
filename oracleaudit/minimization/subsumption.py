"""Subsumption between mutants, from the kill relation: A subsumes B when every input that rejects A also
rejects B (A is at least as hard to catch). The dominator mutants of a problem are those whose set of
rejecting inputs is minimal (no other caught mutant's set is strictly smaller); mutants with the same set
count once, so the minimal mutant set of a problem has one mutant per distinct minimal set. A suite that
catches every dominator catches every mutant the inputs can catch; an oracle's dominator score is the share
of dominators it catches."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Dominators", "dominators"]


@dataclass
class Dominators:
    mutants: list[str]  # the minimal mutant set: one per distinct minimal set, the least id
    dominating: list[str]  # every mutant whose set is minimal (the minimal set's mutants and their equals)
    caught: int  # mutants some input rejects


def dominators(kills: np.ndarray, mutants: list[str]) -> Dominators:
    """Dominators of one relation: kills is bool [mutant, input]."""
    caught = np.flatnonzero(kills.any(axis=1))
    sets = kills[caught].astype(np.int64)
    inside = (sets @ (1 - sets).T) == 0  # inside[a, b]: every input rejecting a rejects b
    strictly_smaller = inside.T & ~inside  # [a, b]: b's set is a strict subset of a's
    minimal = caught[~strictly_smaller.any(axis=1)]
    chosen: dict[bytes, str] = {}
    for row in minimal:
        key = np.packbits(kills[row]).tobytes()
        if key not in chosen or mutants[row] < chosen[key]:
            chosen[key] = mutants[row]
    return Dominators(sorted(chosen.values()), sorted(mutants[r] for r in minimal), len(caught))
