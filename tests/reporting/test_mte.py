"""The mutation-testing-elements reports: valid against the required fields and types of the published
schema (mutation-testing-report-schema, schemaVersion 2; checked here field by field), their statuses
agreeing with scoring's counts, their locations pointing at the mutated text, and every status of
mutants.jsonl mapped (Equivalent, Duplicate, CompileError, not run)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from oracleaudit.mutant import (
    COMPILE_ERROR,
    DUPLICATE,
    EQUIVALENT,
    MUTANTS_FILE,
    Mutant,
    read_mutants,
)
from oracleaudit.reporting.mte import mte_report, summary
from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.shipped import shipped_dir

REPO = Path(__file__).resolve().parents[2]
STATUS_ENUM = {"Killed", "Survived", "NoCoverage", "CompileError", "RuntimeError", "Timeout", "Ignored", "Pending"}
VERSION = re.compile(r"^([1-2]\d*|0)(\.(([1-9]\d*)|0)){0,2}$")


def schema_problems(report: Any) -> list[str]:
    """What `report` breaks of the schema's required fields, their types and ranges (empty: valid)."""
    wrong: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            wrong.append(what)

    def position(p: Any, where: str) -> None:
        need(isinstance(p, dict), f"{where}: not an object")
        for key in ("line", "column"):
            v = p.get(key) if isinstance(p, dict) else None
            need(isinstance(v, int) and not isinstance(v, bool) and v >= 1, f"{where}.{key}: integer ≥ 1, got {v!r}")

    need(isinstance(report, dict), "report: not an object")
    need(isinstance(report.get("schemaVersion"), str) and VERSION.match(report["schemaVersion"]) is not None,
         "schemaVersion")
    t = report.get("thresholds")
    need(isinstance(t, dict) and all(isinstance(t.get(k), int) and 0 <= t[k] <= 100 for k in ("high", "low")),
         "thresholds.high/low: integers 0–100")
    files = report.get("files")
    need(isinstance(files, dict), "files: not an object")
    for path, f in (files or {}).items():
        need(isinstance(f.get("language"), str) and isinstance(f.get("source"), str), f"{path}: language, source")
        mutants = f.get("mutants")
        need(isinstance(mutants, list), f"{path}.mutants: not an array")
        ids = [m.get("id") for m in mutants or []]
        need(len(ids) == len(set(ids)), f"{path}: mutants repeat")
        for m in mutants or []:
            where = f"{path}:{m.get('id')}"
            need(isinstance(m.get("id"), str) and isinstance(m.get("mutatorName"), str), f"{where}: id, mutatorName")
            need(m.get("status") in STATUS_ENUM, f"{where}: status {m.get('status')!r}")
            loc = m.get("location")
            need(isinstance(loc, dict), f"{where}: location")
            for end in ("start", "end"):
                position((loc or {}).get(end), f"{where}.location.{end}")
            for key in ("killedBy", "coveredBy"):
                need(key not in m or (isinstance(m[key], list) and all(isinstance(x, str) for x in m[key])),
                     f"{where}.{key}: array of strings")
            for key in ("description", "statusReason", "replacement"):
                need(key not in m or isinstance(m[key], str), f"{where}.{key}: string")
    framework = report.get("framework")
    need(framework is None or (isinstance(framework, dict) and isinstance(framework.get("name"), str)),
         "framework.name")
    for name, test_file in (report.get("testFiles") or {}).items():
        tests = test_file.get("tests")
        need(isinstance(tests, list) and all(isinstance(x.get("id"), str) and isinstance(x.get("name"), str)
                                             for x in tests), f"testFiles.{name}.tests")
    return wrong


def test_the_check_finds_what_breaks_the_schema() -> None:
    bad = {"schemaVersion": 2, "thresholds": {"high": 80}, "files": {"a.py": {"language": "python", "mutants": [
        {"id": "x", "mutatorName": "r", "status": "Equivalent", "location": {"start": {"line": 0, "column": 1}}}]}}}
    found = schema_problems(bad)
    for part in ("schemaVersion", "thresholds", "a.py: language, source", "status 'Equivalent'",
                 "location.start.line", "location.end"):
        assert any(part in line for line in found), part


@pytest.fixture(scope="module")
def audit_and_records(tmp_path_factory: pytest.TempPathFactory) -> tuple[Audit, list[Mutant]]:
    """The bundle with four made-up lines added to its mutants.jsonl: an equivalent, a duplicate and a
    non-compiling mutant, and a compiled one the store never ran."""
    km = shipped_dir("kill_matrix")
    records = read_mutants(km / "mutants")
    base = records[0]
    extra = [dataclasses.replace(base, id=f"feed0000000000{i:02d}", status=status, status_reason=reason,
                                 duplicate_of=base.id if status == DUPLICATE else None)
             for i, (status, reason) in enumerate([(EQUIVALENT, "same SASS"), (DUPLICATE, "same SASS as another"),
                                                   (COMPILE_ERROR, "nvcc: error"), ("Pending", "compiles")])]
    folder = tmp_path_factory.mktemp("mutants")
    (folder / MUTANTS_FILE).write_text("".join(m.to_json() + "\n" for m in records + extra))
    return Audit.load(km / "evidence", folder), records + extra


@pytest.mark.parametrize("name", ["kernelbench", "robust-kbench"])
def test_a_report_validates_and_agrees_with_scoring(audit_and_records, name: str) -> None:
    audit, records = audit_and_records
    oracle = Oracle.load(name)
    report, warnings = mte_report(audit, oracle, records, [REPO], "test")
    assert warnings == []
    assert schema_problems(report) == []
    assert report["schemaVersion"] == "2" and report["framework"] == {"name": "oracleaudit", "version": "test"}
    counts = summary(report)
    result = audit.score(oracle)
    assert counts["Killed"] == result["killed"] and counts["Survived"] == result["escaped"]
    assert counts.get("RuntimeError", 0) + counts.get("Timeout", 0) == result["unobserved"]
    assert counts["Ignored"] == result["unwitnessed"] + 2 and counts["CompileError"] == 1 and counts["Pending"] == 1
    assert round(counts["Killed"] / (counts["Killed"] + counts["Survived"]), 6) == result["detection"]
    mutants = {m["id"]: m for f in report["files"].values() for m in f["mutants"]}
    assert mutants["feed000000000000"]["statusReason"].startswith("Equivalent")
    assert mutants["feed000000000001"]["statusReason"].startswith(f"Duplicate of {records[0].id}")
    inputs = set(audit.obs.frame["input_id"].astype(str))
    declared = {t["id"] for tf in report["testFiles"].values() for t in tf["tests"]}
    for m in mutants.values():
        assert (m["status"] == "Killed") == bool(m.get("killedBy"))
        assert set(m.get("killedBy", ())) <= declared <= inputs


def test_crashes_the_oracle_flags_are_killed_with_a_reason(audit_and_records) -> None:
    audit, records = audit_and_records
    report, _ = mte_report(audit, Oracle.load("kernelbench"), records, [REPO], "test")
    reasons = [m["statusReason"] for f in report["files"].values() for m in f["mutants"] if m["status"] == "Killed"]
    assert any("RuntimeError (a crash, which the oracle flags)" in r for r in reasons)
    assert any(r.startswith("rejected on") and "wrong values" in r for r in reasons)


def test_locations_point_at_the_mutated_text(audit_and_records) -> None:
    audit, records = audit_and_records
    report, _ = mte_report(audit, Oracle.load("kernelbench"), records, [REPO], "test")
    originals = {m.id: m.original for m in records}
    checked = 0
    for f in report["files"].values():
        lines = f["source"].splitlines()
        for m in f["mutants"]:
            start, end = m["location"]["start"], m["location"]["end"]
            if start["line"] == end["line"]:
                assert lines[start["line"] - 1][start["column"] - 1:end["column"] - 1] == originals[m["id"]]
                checked += 1
    assert checked > 1000


def test_a_missing_source_file_is_warned_about_and_left_empty(audit_and_records, tmp_path: Path) -> None:
    audit, records = audit_and_records
    report, warnings = mte_report(audit, Oracle.load("kernelbench"), records, [tmp_path], "test")
    assert warnings and all("not found" in w for w in warnings)
    assert all(f["source"] == "" for f in report["files"].values()) and schema_problems(report) == []
