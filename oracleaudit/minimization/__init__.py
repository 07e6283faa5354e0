"""Stage 4 — minimization: per problem, the at most K pool inputs (and the tolerance) that catch the most
witnessed mutants without false alarms on the original kernel, chosen exactly (an integer program) and
greedily (the baseline), validated on held-out mutants, and exported as an oracle file that `score` loads.

`minimize(audit, base)` returns a `Minimized`: the result (`as_json` keys: budget, in_sample_detection,
heldout_detection, greedy_detection, problems, curve, subsumption, ...), the suite's oracle file and the
maintainers' page. The in-sample detection is the exported suite's own score, so the two always agree;
`selection_detection` is what the kill relation predicted for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from joblib import Parallel, delayed

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import DEFAULT_GRID
from oracleaudit.files import write_atomic
from oracleaudit.minimization.export import suite_markdown, suite_toml
from oracleaudit.minimization.kills import ProblemKills, kill_relation
from oracleaudit.minimization.subsumption import dominators
from oracleaudit.minimization.suite import Suite, choose
from oracleaudit.minimization.validation import HOLDOUTS, Tally, folds, tally
from oracleaudit.scoring.audit import Audit
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.terminal import dumps_json

__all__ = ["COSTS", "HOLDOUTS", "WEIGHTS", "Minimized", "minimize", "tolerances"]

WEIGHTS = ("uniform", "family")
COSTS = ("none", "runtime")
SUITE_FILE, RESULT_FILE, PAGE_FILE = "suite.toml", "minimize.json", "suite.md"


@dataclass
class Minimized:
    result: dict[str, Any]
    oracle_text: str
    page: str

    def write(self, out: Path) -> list[Path]:
        """suite.toml, minimize.json (the result less its runtime) and suite.md in `out`, each written whole or
        not at all."""
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / SUITE_FILE, out / RESULT_FILE, out / PAGE_FILE]
        stable = {k: v for k, v in self.result.items() if k != "runtime_s"}  # the same files for the same input
        for path, text in zip(paths, (self.oracle_text, dumps_json(stable) + "\n", self.page)):
            write_atomic(path, text)
        return paths


def tolerances(spec: str | float) -> list[float | None]:
    """The candidate tolerances of a `--tolerance` value: auto (the evidence's grid, tightest first), base
    (the base oracle's own) or one number."""
    if spec == "auto":
        return sorted(DEFAULT_GRID)
    if spec == "base":
        return [None]
    try:
        value = float(spec)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise OracleAuditError(f"--tolerance must be auto, base or a number > 0, got {spec!r}")
    return [value]


def _weights(relation: list[ProblemKills], mode: str) -> list[np.ndarray]:
    """Per problem, per mutant: 1, or (family) the share that gives every family the same total weight."""
    if mode not in WEIGHTS:
        raise OracleAuditError(f"--weight must be one of {', '.join(WEIGHTS)}, got {mode!r}")
    if mode == "uniform":
        return [np.ones(len(k.mutants)) for k in relation]
    families = [f for k in relation for f in k.families]
    counts = {f: families.count(f) for f in set(families)}
    scale = len(families) / max(len(counts), 1)
    return [np.array([scale / counts[f] for f in k.families]) for k in relation]


def _check(budget: int, folds_count: int, holdouts: Sequence[str], cost: str, max_false_alarms: int,
           margin: float, curve: Sequence[int], jobs: int) -> None:
    if budget < 1:
        raise OracleAuditError(f"--budget must be ≥ 1, got {budget}")
    if folds_count < 2:
        raise OracleAuditError(f"--folds must be ≥ 2, got {folds_count}")
    unknown = [h for h in holdouts if h not in HOLDOUTS]
    if unknown or not holdouts:
        raise OracleAuditError(f"--holdout must be among {', '.join(HOLDOUTS)}, got {', '.join(holdouts) or 'none'}")
    if cost not in COSTS:
        raise OracleAuditError(f"--cost must be one of {', '.join(COSTS)}, got {cost!r}")
    if max_false_alarms < 0:
        raise OracleAuditError(f"--max-false-alarms must be ≥ 0, got {max_false_alarms}")
    if not margin >= 1.0 or margin == float("inf"):
        raise OracleAuditError(f"--margin must be a number ≥ 1, got {margin}")
    if any(k < 1 for k in curve):
        raise OracleAuditError(f"curve budgets must be ≥ 1, got {list(curve)}")
    if jobs < 1:
        raise OracleAuditError(f"--jobs must be ≥ 1, got {jobs}")


def minimize(audit: Audit, base: Oracle, budget: int = 2, tolerance: str | float = "auto",
             max_false_alarms: int = 0, margin: float = 1.0, holdouts: Sequence[str] = HOLDOUTS, folds_count: int = 5,
             weight: str = "uniform", cost: str = "none", curve: Sequence[int] = (1, 2, 3, 4, 5),
             judges: Sequence[Oracle] = (), progress: Callable[[int, int], None] | None = None,
             jobs: int = 1) -> Minimized:
    """Choose, validate and export a suite of at most `budget` inputs per problem (see the module docstring).
    `judges` are the oracles whose dominator score is reported; `progress(done, total)` hears of every
    problem fitted (one pass for the suites, one per holdout mode, one per point of the curve). Problems are
    fitted in `jobs` processes (1: in this one); the result does not depend on it. Each process imports torch and
    is sent every problem's kills: on 2 cores, 2 processes made the whole 1.02× faster on the bundled evidence and
    1.23× on shards 1 and 2 of the complete run (bench/minimize_cost.py), hence one by default."""
    _check(budget, folds_count, holdouts, cost, max_false_alarms, margin, curve, jobs)
    with Parallel(n_jobs=jobs, return_as="generator") as parallel:
        return _minimize(audit, base, budget, tolerance, max_false_alarms, margin, holdouts, folds_count, weight, cost,
                         curve, judges, progress, parallel)


def _minimize(audit: Audit, base: Oracle, budget: int, tolerance: str | float, max_false_alarms: int, margin: float,
              holdouts: Sequence[str], folds_count: int, weight: str, cost: str, curve: Sequence[int],
              judges: Sequence[Oracle], progress: Callable[[int, int], None] | None, parallel: Any) -> Minimized:
    started = time.perf_counter()
    candidates = tolerances(tolerance)
    relation = kill_relation(audit, base, candidates, margin)
    if not sum(len(k.mutants) for k in relation):
        raise OracleAuditError("the evidence holds no witnessed mutant: there is nothing to choose inputs for")
    weights = _weights(relation, weight)
    passes = 1 + len(holdouts) + len(set(curve))
    fit = _Fitter(relation, weights, cost == "runtime", max_false_alarms,
                  _Counter(progress, passes * len(relation)), parallel)

    ilp, greedy = fit.all(budget, "ilp"), fit.all(budget, "greedy")
    fit.counter.step(len(relation))
    mine, theirs = _total(relation, ilp), _total(relation, greedy)
    heldout: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for mode in holdouts:
        total, by_group = fit.heldout(budget, mode, folds_count)
        heldout[mode] = total.detection
        if mode != "random":
            groups[mode] = {g: t.as_json() for g, t in sorted(by_group.items())}
    first = "random" if "random" in holdouts else holdouts[0]
    points = []
    for k in sorted(set(curve)):
        points.append({"budget": k, "in_sample": _total(relation, fit.all(k, "ilp")).detection,
                       "greedy": _total(relation, fit.all(k, "greedy")).detection,
                       "heldout": fit.heldout(k, first, folds_count)[0].detection})

    picks = [(k.problem, [k.inputs[i] for i in s.inputs], None if s.tolerance is None else k.tolerances[s.tolerance])
             for k, s in zip(relation, ilp)]
    name = f"{base.name}-suite-k{budget}"
    text = suite_toml(base, name, f"oracleaudit minimize: at most {budget} inputs per problem on {base.name}'s "
                                  f"comparison (tolerance {tolerance}, margin {margin:g}, false alarms ≤ "
                                  f"{max_false_alarms})", picks)
    suite = Oracle.from_text(text, source=SUITE_FILE)
    scored = audit.score(suite, top=0)
    base_score = audit.score(base, top=0)

    result: dict[str, Any] = {
        "budget": budget, "base": base.name, "tolerance": str(tolerance), "max_false_alarms": max_false_alarms,
        "margin": margin, "weight": weight, "cost": cost, "mutants": sum(len(k.mutants) for k in relation),
        "in_sample_detection": scored["detection"], "selection_detection": mine.detection,
        "greedy_detection": theirs.detection, "heldout_detection": heldout, "heldout_groups": groups,
        "base_detection": base_score["detection"], "suite_false_alarms": scored["false_alarms"],
        "suite_unobserved": scored["unobserved"],
        "objective": {"weight": weight, "ilp": _objective(relation, weights, ilp),
                      "greedy": _objective(relation, weights, greedy)},
        "ilp_over_greedy": {"caught": mine.caught - theirs.caught,
                            "problems": sum(1 for k, a, b in zip(relation, ilp, greedy)
                                            if tally(k, a).caught > tally(k, b).caught)},
        "problems": [_problem(k, a, b, max_false_alarms) for k, a, b in zip(relation, ilp, greedy)],
        "curve": points, "subsumption": _subsumption(audit, relation, ilp, max_false_alarms, judges),
        "oracle_file": SUITE_FILE,
    }
    if scored["detection"] != mine.detection:
        result["warning"] = (f"the suite scores {scored['detection']} but its kill relation predicted "
                             f"{mine.detection}: a verdict of the suite differs from the probe's")
    result["runtime_s"] = round(time.perf_counter() - started, 2)
    return Minimized(result, text, suite_markdown(result))


class _Counter:
    def __init__(self, progress: Callable[[int, int], None] | None, total: int):
        self.progress, self.total, self.done = progress, total, 0

    def step(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)


class _Fitter:
    """Suites of every problem for one budget and method, on all mutants or on folds; the problems fitted side by
    side by `parallel` (a joblib.Parallel whose results come in order, as they are done)."""

    def __init__(self, relation: list[ProblemKills], weights: list[np.ndarray], use_cost: bool, allowance: int,
                 counter: _Counter, parallel: Any):
        self.relation, self.weights, self.use_cost, self.allowance = relation, weights, use_cost, allowance
        self.counter, self.parallel = counter, parallel

    def all(self, budget: int, method: str) -> list[Suite]:
        return list(self.parallel(delayed(choose)(k, w, budget, method, self.use_cost, self.allowance)
                                  for k, w in zip(self.relation, self.weights)))

    def heldout(self, budget: int, mode: str, count: int) -> tuple[Tally, dict[str, Tally]]:
        total, by_group = Tally(), {}
        parts = self.parallel(delayed(_heldout_parts)(k, w, budget, mode, count, self.use_cost, self.allowance)
                              for k, w in zip(self.relation, self.weights))
        for problem in parts:
            for group, part in problem:
                total.add(part)
                by_group.setdefault(group, Tally()).add(part)
            self.counter.step()
        return total, by_group


def _heldout_parts(k: ProblemKills, w: np.ndarray, budget: int, mode: str, count: int, use_cost: bool,
                   allowance: int) -> list[tuple[str, Tally]]:
    """One problem's held-out tallies: per fold, the suite chosen on its training mutants, judged on the rest."""
    return [(group, tally(k, choose(k, w * train, budget, "ilp", use_cost, allowance), test))
            for group, train, test in folds(k, mode, count)]


def _total(relation: list[ProblemKills], suites: list[Suite]) -> Tally:
    total = Tally()
    for k, s in zip(relation, suites):
        total.add(tally(k, s))
    return total


def _objective(relation: list[ProblemKills], weights: list[np.ndarray], suites: list[Suite]) -> float:
    """The weight the suites catch: what the selection maximises."""
    return round(sum(float(w[s.hits(k)].sum()) for k, w, s in zip(relation, weights, suites)), 6)


def _problem(k: ProblemKills, ilp: Suite, greedy: Suite, allowance: int) -> dict[str, Any]:
    t = ilp.tolerance
    mine = tally(k, ilp)
    allowed = np.zeros(len(k.inputs), dtype=bool) if t is None else k.allowed(t, allowance)
    catchable = 0 if t is None else int((k.kills[t] & allowed[None, :]).any(axis=1).sum())
    return {
        "problem": k.problem,
        "inputs": [k.inputs[i] for i in ilp.inputs],
        "tolerance": None if t is None else k.tolerances[t],
        "witnessed": len(k.mutants), "caught": mine.caught, "escaped": mine.escaped, "unobserved": mine.unobserved,
        "catchable": catchable,
        "false_alarms": 0 if t is None else int(k.false_alarms[t][list(ilp.inputs)].sum()),
        "inputs_with_false_alarms": 0 if t is None else int((~allowed).sum()),
        "candidates": len(k.inputs),
        "greedy_inputs": [k.inputs[i] for i in greedy.inputs], "greedy_caught": tally(k, greedy).caught,
    }


def _subsumption(audit: Audit, relation: list[ProblemKills], suites: list[Suite], allowance: int,
                 judges: Sequence[Oracle]) -> dict[str, Any]:
    """Dominator mutants per problem (at the suite's tolerance, over the allowed inputs) and each judge's
    share of them."""
    per_problem, dominating = {}, []
    minimal = caught = 0
    for k, s in zip(relation, suites):
        if s.tolerance is None:
            continue
        allowed = k.allowed(s.tolerance, allowance)
        d = dominators(k.kills[s.tolerance][:, allowed], k.mutants)
        per_problem[k.problem] = {"minimal_set": len(d.mutants), "caught": d.caught}
        minimal += len(d.mutants)
        caught += d.caught
        dominating += d.dominating
    index = {m: i for i, m in enumerate(audit.mutants["mutant_id"])}
    rows = np.array([index[m] for m in dominating], dtype=np.int64)
    scores = {}
    for oracle in judges:
        killed = audit.verdicts(oracle).killed[rows] if len(rows) else np.zeros(0, dtype=bool)
        scores[oracle.name] = round(float(killed.mean()), 6) if len(rows) else None
    return {"minimal_set_size": minimal, "dominators": len(dominating), "catchable": caught,
            "by_problem": per_problem, "dominator_score": scores}
