"""`oracleaudit refcheck`: whether each problem can be refereed at all by an oracle — does the problem's own
fp32 reference, run as the oracle runs it (its pool inputs and seeds, its TF32 math mode), pass the oracle's
own rule against the fp64 truth on the same inputs? No solution and no mutant is needed.

Each problem runs in a fresh process (`isolation.py`) measuring the reference rows (`reference.py`); each
oracle judges them with scoring's own rule (`verdict.py`); the records are appended to `refcheck.jsonl`
under the output folder (`results.py`) as each problem is done, so a second run skips what is recorded.
`score --refcheck FILE` and `analyze unrefereeable --refcheck FILE` read that file to label the false
alarms an unrefereeable reference causes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from oracleaudit.errors import OracleAuditError
from oracleaudit.files import file_sha256
from oracleaudit.problem import Problem, bundled_root, discover_problems, problem_at
from oracleaudit.refcheck.isolation import measure_isolated
from oracleaudit.refcheck.reference import Measured, Task, check_device
from oracleaudit.refcheck.results import (
    FAILED,
    FP64_INCOMPATIBLE,
    GZIPPED_FILE,
    RESULTS_FILE,
    append_records,
    done_keys,
    identity,
    latest,
    read_records,
    results_file,
)
from oracleaudit.refcheck.verdict import REFEREEABLE, UNREFEREEABLE, judge_reference
from oracleaudit.scoring.oracle import MATH_MODES, Oracle

__all__ = ["RESULTS_FILE", "check_references", "find_problems", "read_verdicts", "summary"]

DEFAULT_TIMEOUT_S = 1800.0


def find_problems(paths: Sequence[Path], root: Path | None) -> tuple[list[Problem], list[str]]:
    """The problems to check: PATHs (problem files, or problem roots), else a root's problems, else the
    bundled ones; and one error line per path that is not a problem (the others are still checked)."""
    if paths and root is not None:
        raise OracleAuditError("give --problems ROOT or problem PATHs, not both")
    if not paths:
        return discover_problems(root if root is not None else bundled_root()), []
    found: dict[Path, Problem] = {}
    errors = []
    for path in map(Path, paths):
        if not path.exists():
            errors.append(f"{path}: no such problem file or folder")
            continue
        try:
            for problem in (discover_problems(path) if path.is_dir() else [problem_at(path)]):
                found.setdefault(problem.path.resolve(), problem)
        except OracleAuditError as err:
            errors.append(str(err) if path.is_dir() else
                          f"{path}: not a problem file (expected ROOT/levelL/{{id}}_{{Name}}.py)")
    return list(found.values()), errors


def _draws(oracle: Oracle, problem: Problem, keys: Iterable[str]) -> list[str]:
    stages = [s for s in oracle.stages if s.applies(problem.label)]
    return [k for k in keys if any(s.draws(k) for s in stages)]


def _records(problem: Problem, oracles: Sequence[Oracle], measured: Measured, base: dict[str, Any],
             drawn: dict[str, list[str]]) -> list[dict[str, Any]]:
    """One record per oracle from a problem's measurement (results.py lists the fields)."""
    records = []
    for oracle in oracles:
        mode = oracle.reference.math_mode
        record = {**base, "oracle": oracle.name, "oracle_sha256": file_sha256(oracle.path) if oracle.path else None,
                  "math_mode": mode, "tf32": list(MATH_MODES[mode]), "reason": None, "tolerance": None,
                  "needed_tolerance": None, "margin": None, "max_error": None, "inputs": len(drawn[oracle.name]),
                  "failing_inputs": [], "dropped_inputs": sorted(set(drawn[oracle.name]) & set(measured.dropped))}
        if measured.failed or measured.incompatible:
            record.update(verdict=FAILED if measured.failed else FP64_INCOMPATIBLE,
                          reason=measured.failed or measured.incompatible)
        elif oracle.reference.precision == "fp64":
            record.update(verdict=REFEREEABLE, reason="the oracle's reference is the fp64 one", needed_tolerance=0.0,
                          margin=0.0)
        else:
            judged = judge_reference(measured.rows.get(mode, []), oracle, problem.label)
            record.update(judged or {"verdict": FAILED, "reason": "the pool has no input of this oracle that the "
                                                                   "problem's shapes allow"})
        records.append(record)
    return records


def check_references(problems: Sequence[Problem], oracles: Sequence[Oracle], out: Path, *, device: str = "cuda",
                     pool: str = "default", timeout_s: float = DEFAULT_TIMEOUT_S, jobs: int = 1,
                     progress: Callable[..., None] | None = None) -> Path:
    """Check every problem's reference under every oracle, one process per problem (`jobs` of them at once),
    appending to `out/refcheck.jsonl` in problem order (problems recorded already are skipped; with all of
    them recorded, `device` need not be present, and the results may be the read-only refcheck.jsonl.gz);
    `progress(tally=...)` is called once per problem. Returns the results file."""
    from concurrent.futures import ThreadPoolExecutor

    from oracleaudit.pool import Pool

    check_device(device, used=False)
    if not timeout_s > 0:
        raise OracleAuditError(f"--timeout must be > 0, got {timeout_s:g}")
    if jobs < 1:
        raise OracleAuditError(f"--jobs must be ≥ 1, got {jobs}")
    loaded = Pool.load(pool)
    digest = loaded.digest()
    path = results_file(Path(out))
    done = done_keys(path)
    todo = []
    for problem in problems:
        base = {"problem": problem.label, "problem_file": problem.relpath, "problem_sha256": file_sha256(problem.path),
                "pool": loaded.name, "pool_digest": digest, "device": device}
        wanted = [o for o in oracles if identity({**base, "oracle": o.name,
                                                  "oracle_sha256": file_sha256(o.path) if o.path else None}) not in done]
        if wanted:
            todo.append((problem, wanted, base))
        elif progress:
            progress(tally="skipped")

    if todo:  # with every record there already, the results need no device (a table printed anywhere)
        if path.name == GZIPPED_FILE:
            raise OracleAuditError(f"{path}: {len(todo)} of the problems are not recorded there, and gzipped "
                                   "results are read-only; gunzip it (or choose another --out) to check them")
        check_device(device)

    def check(item: tuple[Problem, list[Oracle], dict[str, Any]]) -> list[dict[str, Any]]:
        problem, wanted, base = item
        drawn = {o.name: _draws(o, problem, loaded.keys()) for o in wanted}
        keys = sorted({k for ks in drawn.values() for k in ks})
        modes = sorted({o.reference.math_mode for o in wanted if o.reference.precision == "fp32"}) or ["default"]
        started = time.perf_counter()
        measured = measure_isolated(Task(str(problem.path), str(loaded.path or pool), tuple(keys), tuple(modes),
                                         device), timeout_s) if keys else Measured(failed="no pool input is drawn")
        return _records(problem, wanted, measured, {**base, "seconds": round(time.perf_counter() - started, 3)}, drawn)

    with ThreadPoolExecutor(jobs, thread_name_prefix="refcheck") as executor:
        for records in executor.map(check, todo):  # in problem order: the file is the same whatever `jobs`
            append_records(path, records)
            if progress:
                progress(tally=_worst(r["verdict"] for r in records))
    return path


def _worst(verdicts: Iterable[str]) -> str:
    order = (FAILED, FP64_INCOMPATIBLE, UNREFEREEABLE, REFEREEABLE)
    found = set(verdicts)
    return next(v for v in order if v in found)


def summary(path: Path, problems: Sequence[Problem], oracles: Sequence[Oracle], device: str) -> dict[str, Any]:
    """The `--json` result for the given problems and oracles from the results file: problems (each with
    its verdict per oracle), unrefereeable (per oracle: problem, margin, needed_tolerance, tolerance),
    fp64_incompatible and failed (problem, reason), refereeable (per oracle: problems)."""
    records = latest(read_records(path))
    names = [o.name for o in oracles]
    result: dict[str, Any] = {"results": str(path), "device": device, "oracles": names, "problems": [],
                              "unrefereeable": {n: [] for n in names}, "refereeable": {n: [] for n in names},
                              "fp64_incompatible": [], "failed": []}
    for problem in problems:
        found = {n: records.get((problem.label, n, device)) for n in names}
        found = {n: r for n, r in found.items() if r is not None}
        if not found:
            continue
        result["problems"].append({"problem": problem.label, "seconds": next(iter(found.values()))["seconds"],
                                   "oracles": {n: {k: r[k] for k in ("verdict", "reason", "tolerance", "needed_tolerance",
                                                                     "margin", "max_error", "failing_inputs")}
                                               for n, r in found.items()}})
        for name, r in found.items():
            if r["verdict"] == UNREFEREEABLE:
                result["unrefereeable"][name].append({"problem": problem.label, "margin": r["margin"],
                                                      "needed_tolerance": r["needed_tolerance"],
                                                      "tolerance": r["tolerance"]})
            elif r["verdict"] == REFEREEABLE:
                result["refereeable"][name].append(problem.label)
        reasons = {r["verdict"]: r["reason"] for r in found.values() if r["verdict"] in (FP64_INCOMPATIBLE, FAILED)}
        for verdict, reason in sorted(reasons.items()):
            result[verdict].append({"problem": problem.label, "reason": reason})
    return result


def read_verdicts(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The verdicts of a results file by oracle and problem (`score`/`analyze --refcheck`): the last record
    of each, a CUDA one preferred to a CPU one."""
    by_key: dict[str, dict[str, dict[str, Any]]] = {}
    for (problem, oracle, device), record in sorted(latest(read_records(path)).items(),
                                                   key=lambda item: item[0][2] == "cuda"):
        by_key.setdefault(oracle, {})[problem] = record
    return by_key
