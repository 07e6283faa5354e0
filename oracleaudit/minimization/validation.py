"""Held-out validation of chosen suites: fit on part of the witnessed mutants, measure on the rest.

Folds: `random` (F folds by a stable hash of the mutant id), `family` (leave one mutation family out: a
suite chosen without ever seeing, say, precision mutants, measured on them) and `rule` (leave one rule
out). A measured mutant counts as caught when a chosen input rejects it, as unobserved when it is not caught
and the evidence lacks it on some chosen input, and as escaped otherwise; detection is caught over caught
plus escaped, summed over every fold and problem (the scoring stage's definition).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from oracleaudit.errors import OracleAuditError
from oracleaudit.minimization.kills import ProblemKills
from oracleaudit.minimization.suite import Suite

__all__ = ["HOLDOUTS", "Tally", "folds", "tally"]

HOLDOUTS = ("random", "family", "rule")


@dataclass
class Tally:
    caught: int = 0
    escaped: int = 0
    unobserved: int = 0

    def add(self, other: "Tally") -> None:
        self.caught += other.caught
        self.escaped += other.escaped
        self.unobserved += other.unobserved

    @property
    def detection(self) -> float | None:
        total = self.caught + self.escaped
        return round(self.caught / total, 6) if total else None

    def as_json(self) -> dict[str, int | float | None]:
        return {"caught": self.caught, "escaped": self.escaped, "unobserved": self.unobserved,
                "detection": self.detection}


def tally(kills: ProblemKills, suite: Suite, mask: np.ndarray | None = None) -> Tally:
    """How the suite fares on the problem's mutants (those of `mask`, or all)."""
    mask = np.ones(len(kills.mutants), dtype=bool) if mask is None else mask
    hit, seen = suite.hits(kills), suite.seen(kills)
    return Tally(int((mask & hit).sum()), int((mask & ~hit & seen).sum()), int((mask & ~hit & ~seen).sum()))


def _bucket(mutant_id: str, count: int) -> int:
    return int(hashlib.sha256(mutant_id.encode()).hexdigest()[:8], 16) % count


def folds(kills: ProblemKills, mode: str, count: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(group, train mask, test mask) over the problem's mutants, for one holdout mode; the group is the fold
    number, the family or the rule held out."""
    n = len(kills.mutants)
    if mode == "random":
        if count < 2:
            raise OracleAuditError(f"--folds must be ≥ 2, got {count}")
        bucket = np.array([_bucket(m, count) for m in kills.mutants], dtype=np.int64)
        return [(str(k), bucket != k, bucket == k) for k in range(count) if (bucket == k).any()]
    key: Callable[[int], str]
    if mode == "family":
        key = kills.families.__getitem__
    elif mode == "rule":
        key = kills.rules.__getitem__
    else:
        raise OracleAuditError(f"--holdout must be one of {', '.join(HOLDOUTS)}, got {mode!r}")
    groups = np.array([key(i) for i in range(n)], dtype=object)
    return [(g, groups != g, groups == g) for g in sorted(set(groups.tolist()))]
