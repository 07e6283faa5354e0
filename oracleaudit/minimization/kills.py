"""The kill relation minimization chooses from: per problem, which pool inputs reject which witnessed mutants
under a base oracle's comparison at each candidate tolerance, which (mutant, input) pairs the evidence holds,
and on how many seeds of each input's group the problem's original kernel fails (a false alarm).

The comparison is the base oracle's (reference, rule, statuses, timeout), judged by the scoring stage's own
verdicts on a probe protocol with one stage drawing every input: a suite made of these inputs scores exactly
as the relation says. A candidate tolerance is the base oracle's own tolerances (None) or one value t with
atol = rtol = t for every dtype (the evidence's tolerance grid, where verdicts are exact).

An input's seed group is its pool key with the seed left out (`normal/s=3/official` belongs to
`normal/official`): a suite that adds one seed of a group is trusted on the group's other seeds too, so its
false alarms are counted over every seed of the group the pool holds. An input on which the original
itself fails is never a candidate, whatever false alarms are allowed: it rejects everything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pandas as pd

from oracleaudit.scoring.audit import SEED, Audit
from oracleaudit.scoring.oracle import InputSelector, Oracle, Stage
from oracleaudit.scoring.verdicts import FAIL, judge_rows
from oracleaudit.status import ORIGINAL

__all__ = ["ProblemKills", "kill_relation", "seed_group"]


def seed_group(key: str) -> str:
    """The key with its seed left out: the inputs that differ only in their seed."""
    return SEED.sub("", key)


@dataclass
class ProblemKills:
    """One problem's kill relation over its candidate inputs (pool order), witnessed mutants and tolerances."""

    problem: str
    tolerances: list[float | None]  # atol = rtol for every dtype; None: the base oracle's tolerances
    inputs: list[str]  # the pool inputs on which the original kernel was judged
    mutants: list[str]
    families: list[str]
    rules: list[str]
    kills: np.ndarray  # bool [tolerance, mutant, input]: the input rejects the mutant
    observed: np.ndarray  # bool [mutant, input]: the evidence holds the pair
    false_alarms: np.ndarray  # int [tolerance, input]: seeds of the input's group on which the original fails
    fails: np.ndarray  # bool [tolerance, input]: the original fails this very input
    cost_ms: np.ndarray  # per input: the original's recorded time (0 where unknown)

    def alarms(self, t: int, allowance: int) -> np.ndarray:
        """The false alarms of each input as selection counts them at tolerance index t: an input on which
        the original itself fails rejects a correct kernel, whatever the allowance, and is never chosen."""
        return np.where(self.fails[t], allowance + 1, self.false_alarms[t])

    def allowed(self, t: int, allowance: int) -> np.ndarray:
        return self.alarms(t, allowance) <= allowance


def _probe(base: Oracle, tolerance: float | None, scale: float = 1.0) -> Oracle:
    """The base oracle with one stage drawing every input (and one uniform tolerance, if given), its
    tolerances multiplied by `scale`."""
    stage = Stage(name="every input", inputs=(InputSelector(pattern="*"),), tolerance_scale=scale)
    probe = replace(base, name=f"{base.name}-probe", stages=(stage,))
    return probe if tolerance is None else probe.with_tolerance(tolerance, name=probe.name)


def _judged(audit: Audit, oracle: Oracle, rows: np.ndarray) -> pd.DataFrame:
    """(kernel, problem, input, failed) per judged (kernel, input) of the given rows (codes of the frame)."""
    f = audit.obs.frame
    judged = judge_rows(audit.obs, oracle, rows)
    r = judged["row"].to_numpy()
    frame = pd.DataFrame({"kernel": f["kernel"].to_numpy()[r], "problem": f["problem"].cat.codes.to_numpy()[r],
                          "input": f["input_id"].cat.codes.to_numpy()[r],
                          "failed": judged["state"].to_numpy() == FAIL})
    return frame.groupby(["kernel", "problem", "input"], sort=True)["failed"].max().reset_index()


def kill_relation(audit: Audit, base: Oracle, tolerances: Sequence[float | None],
                  margin: float = 1.0) -> list[ProblemKills]:
    """The kill relation of every problem with an original, by problem label. The original counts as failing
    an input at a tolerance when it fails it at the tolerance divided by `margin` (≥ 1): a suite's tolerance
    then leaves that factor of headroom to the original's own error on other GPUs and libraries."""
    f = audit.obs.frame
    problems = f["problem"].cat.categories
    inputs = f["input_id"].cat.categories
    group_code = pd.Series([seed_group(str(k)) for k in inputs]).astype("category").cat.codes.to_numpy()
    n_groups = int(group_code.max()) + 1 if len(group_code) else 0
    original_rows = np.flatnonzero((f["mutant_id"] == ORIGINAL).to_numpy())
    m = audit.mutants
    witnessed = audit.witness["witnessed"].to_numpy()
    mutant_rows = np.flatnonzero(np.isin(f["kernel"].to_numpy(), m["kernel"].to_numpy()[witnessed]))
    code_of = {str(name): code for code, name in enumerate(problems)}
    mutant_problem = np.array([code_of[str(p)] for p in m["problem"]], dtype=np.int64)

    originals = [_judged(audit, _probe(base, t, 1.0 / margin), original_rows) for t in tolerances]
    mutants = [_judged(audit, _probe(base, t), mutant_rows) for t in tolerances]
    cost = f.iloc[original_rows].groupby(["problem", "input_id"], observed=True)["time_ms"].max()

    result = []
    for p in sorted(set(originals[0]["problem"].tolist()), key=lambda code: str(problems[code])):
        label = str(problems[p])
        mine = [o[(o["problem"] == p).to_numpy()] for o in originals]
        candidates = sorted(set(mine[0]["input"].tolist()))
        column = np.full(len(inputs), -1, dtype=np.int64)
        column[candidates] = np.arange(len(candidates))
        alarms = np.zeros((len(tolerances), len(candidates)), dtype=np.int64)
        fails = np.zeros((len(tolerances), len(candidates)), dtype=bool)
        for k, o in enumerate(mine):
            fails[k, column[o["input"].to_numpy()]] = o["failed"].to_numpy()
            failing = np.bincount(group_code[o["input"].to_numpy()[o["failed"].to_numpy()]], minlength=n_groups)
            alarms[k] = failing[group_code[candidates]]
        rows = np.flatnonzero((mutant_problem == p) & witnessed)
        row_of = {int(kernel): j for j, kernel in enumerate(m["kernel"].to_numpy()[rows])}
        kills = np.zeros((len(tolerances), len(rows), len(candidates)), dtype=bool)
        observed = np.zeros((len(rows), len(candidates)), dtype=bool)
        for k, judged in enumerate(mutants):
            part = judged[(judged["problem"] == p).to_numpy()]
            col = column[part["input"].to_numpy()]
            row = np.array([row_of.get(int(u), -1) for u in part["kernel"].to_numpy()], dtype=np.int64)
            keep = (col >= 0) & (row >= 0)
            observed[row[keep], col[keep]] = True
            kills[k, row[keep], col[keep]] = part["failed"].to_numpy()[keep]
        result.append(ProblemKills(
            problem=label, tolerances=list(tolerances), inputs=[str(inputs[i]) for i in candidates],
            mutants=[str(x) for x in m["mutant_id"].to_numpy()[rows]],
            families=[str(x) for x in m["family"].to_numpy()[rows]],
            rules=[str(x) for x in m["rule"].to_numpy()[rows]], kills=kills, observed=observed,
            false_alarms=alarms, fails=fails,
            cost_ms=np.array([float(np.nan_to_num(cost.get((label, str(inputs[i])), 0.0))) for i in candidates])))
    return result
