"""One oracle's verdicts as a mutation-testing-elements report (schema version 2, the JSON that Stryker's
HTML viewer and dashboard read): the mutated source files with their mutants, each with its status.

Statuses, per mutant of mutants.jsonl
    Killed        a witnessed mutant the oracle rejects; `killedBy` lists the inputs of its failed trials and
                  `statusReason` how they failed (wrong values, or a crash or hang the oracle flags)
    Survived      a witnessed mutant the oracle observed on all its inputs and accepted
    Timeout       a witnessed mutant not rejected whose run a hang cut short (unobserved; scoring counts it
                  neither way, mutation-testing-elements counts a Timeout as detected)
    RuntimeError  likewise, cut short by a crash (unobserved; excluded from the score as an error)
    Ignored       Equivalent and Duplicate mutants (by their machine code) and unwitnessed mutants (no input
                  shows them wrong: possibly equivalent), with the reason; scoring does not count them either
    CompileError  mutants that did not compile (mutate stage) or whose clone failed to build (run stage)
    Pending       compiled mutants the evidence store has no rows of
So the viewer's score, Killed / (Killed + Survived), is scoring's detection wherever no unobserved mutant hung.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from oracleaudit.mutant import COMPILE_ERROR, DUPLICATE, EQUIVALENT, Mutant
from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.scoring.verdicts import FAIL
from oracleaudit.status import Status

__all__ = ["MTE_SCHEMA_VERSION", "STATUSES", "THRESHOLDS", "mte_report", "read_source", "summary"]

MTE_SCHEMA_VERSION = "2"
THRESHOLDS = {"high": 80, "low": 60}
STATUSES = ("Killed", "Survived", "NoCoverage", "CompileError", "RuntimeError", "Timeout", "Ignored", "Pending")


def read_source(source: str, roots: Sequence[Path]) -> str | None:
    """The text of a mutated file named as mutants.jsonl names it: absolute, or relative to one of `roots`."""
    path = Path(source)
    for candidate in [path] if path.is_absolute() else [root / path for root in roots]:
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8", errors="replace")
    return None


def _failures(audit: Audit, oracle: Oracle) -> pd.DataFrame:
    """The failed rows of the oracle's verdicts: kernel, input_id, status (one row per distinct triple)."""
    v = audit.verdicts(oracle)
    f = audit.obs.frame
    rows = v.rows.loc[v.rows["state"] == FAIL, "row"].to_numpy()
    failed = pd.DataFrame({"kernel": f["kernel"].to_numpy()[rows],
                           "input_id": f["input_id"].to_numpy(dtype=object)[rows],
                           "status": f["status"].to_numpy(dtype=object)[rows]})
    return failed.drop_duplicates().sort_values(["kernel", "input_id", "status"])


def _killed_reason(failed: pd.DataFrame) -> str:
    inputs = failed["input_id"].nunique()
    statuses = failed.groupby("status", sort=True)["input_id"].nunique()
    parts = []
    for status, count in statuses.items():
        if status == Status.OK:
            parts.append(f"wrong values on {count}")
        else:
            what = {Status.RUNTIME_ERROR: "a crash", Status.TIMEOUT: "a hang"}.get(status, "no comparable output")
            parts.append(f"{status} ({what}, which the oracle flags) on {count}")
    return f"rejected on {inputs} input{'s' if inputs != 1 else ''}: " + "; ".join(parts)


def _scored_status(audit: Audit, i: int, killed: bool, complete: bool, failed: pd.DataFrame | None,
                   hung: bool) -> dict[str, Any]:
    w = audit.witness.iloc[i]
    if not w["witnessed"]:
        reason = "unwitnessed: no input shows it wrong against the fp64 reference (possibly equivalent)"
        if killed:
            reason += "; the oracle rejects it anyway"
        return {"status": "Ignored", "statusReason": reason}
    if killed:
        return {"status": "Killed", "statusReason": _killed_reason(failed),
                "killedBy": sorted(failed["input_id"].unique().tolist())}
    if complete:
        error = w["error"]
        where = "" if error is None or pd.isna(error) else f", error {float(error):.3g}"
        return {"status": "Survived", "statusReason": f"escapes; witness: {w['kind']} on {w['input_id']}{where}"}
    cause = "a hang" if hung else "a crash"
    return {"status": "Timeout" if hung else "RuntimeError",
            "statusReason": f"unobserved: {cause} cut its run short before every input of the oracle was seen"}


def _record_status(m: Mutant, build_failed: set[str]) -> dict[str, Any]:
    if m.status == COMPILE_ERROR:
        return {"status": "CompileError", "statusReason": m.status_reason or "does not compile"}
    if m.status == EQUIVALENT:
        return {"status": "Ignored", "statusReason": f"Equivalent: {m.status_reason or 'same machine code'}"}
    if m.status == DUPLICATE:
        return {"status": "Ignored", "statusReason": f"Duplicate of {m.duplicate_of}: {m.status_reason}".rstrip(": ")}
    if m.id in build_failed:
        return {"status": "CompileError", "statusReason": "its clone does not build with torch's flags (run stage)"}
    return {"status": "Pending", "statusReason": "no observations in the evidence store"}


def _language(source: str) -> str:
    return "python" if source.endswith(".py") else "cpp"


def mte_report(audit: Audit, oracle: Oracle, records: Sequence[Mutant], roots: Sequence[Path],
               version: str, config: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """(report, warnings): the oracle's mutation-testing-elements report over every mutant of `records`, the
    mutated files read from `roots`; a file that cannot be read, or differs from the one mutated, is warned
    about (its `source` is then empty or what is on disk)."""
    v = audit.verdicts(oracle)
    index = {mid: i for i, mid in enumerate(audit.mutants["mutant_id"])}
    kernels = audit.mutants["kernel"].to_numpy()
    failures = {k: part for k, part in _failures(audit, oracle).groupby("kernel", sort=False)}
    f = audit.obs.frame
    statuses = f["status"].to_numpy(dtype=object)
    hung = set(f["kernel"].to_numpy()[statuses == Status.TIMEOUT].tolist())
    build_failed = set(f["mutant_id"].to_numpy(dtype=object)[statuses == Status.BUILD_ERROR].tolist())
    files: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    for m in sorted(records, key=lambda r: (r.source, r.start_line, r.start_col, r.id)):
        if m.source not in files:
            text = read_source(m.source, roots)
            if text is None:
                warnings.append(f"{m.source}: not found (relative to {', '.join(map(str, roots))}); its source is "
                                "left empty in the mutation-testing report")
            elif hashlib.sha256(text.encode("utf-8")).hexdigest() != m.source_sha256:
                warnings.append(f"{m.source}: differs from the file that was mutated; locations may be off")
            files[m.source] = {"language": _language(m.source), "source": text or "", "mutants": []}
        i = index.get(m.id)
        if i is None:
            verdict = _record_status(m, build_failed)
        else:
            k = int(kernels[i])
            verdict = _scored_status(audit, i, bool(v.killed[i]), bool(v.complete[i]), failures.get(k), k in hung)
        files[m.source]["mutants"].append({
            "id": m.id, "mutatorName": m.rule, "description": m.family, "replacement": m.replacement,
            "location": {"start": {"line": m.start_line, "column": m.start_col},
                         "end": {"line": m.end_line, "column": m.end_col}},
            **verdict})
    tests = sorted({t for file in files.values() for mu in file["mutants"] for t in mu.get("killedBy", ())})
    report = {
        "schemaVersion": MTE_SCHEMA_VERSION,
        "thresholds": dict(THRESHOLDS),
        "files": files,
        "testFiles": {f"inputs of {oracle.name}": {"tests": [{"id": t, "name": t} for t in tests]}},
        "framework": {"name": "oracleaudit", "version": version},
        "config": {"oracle": oracle.name, **(config or {})},
    }
    return report, warnings


def summary(report: dict[str, Any]) -> dict[str, int]:
    """Mutants per status over every file of a report."""
    counts = {s: 0 for s in STATUSES}
    for file in report["files"].values():
        for mu in file["mutants"]:
            counts[mu["status"]] += 1
    return {s: n for s, n in counts.items() if n}

