"""The verification records file: merged by problem, sorted, versioned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oracleaudit.dataset.records import SCHEMA_VERSION, merge_records, read_records
from oracleaudit.errors import OracleAuditError


def record(level: int, ident: int, verified: bool = True, **extra) -> dict:
    return {"schema_version": SCHEMA_VERSION, "problem": {"level": level, "id": ident, "name": f"P{ident}"},
            "verified": verified, **extra}


def test_merged_records_are_sorted_by_level_and_id(tmp_path: Path) -> None:
    out = tmp_path / "verification.jsonl"
    merge_records(out, [record(2, 1), record(1, 30)])
    merge_records(out, [record(1, 4)])
    keys = [(r["problem"]["level"], r["problem"]["id"]) for r in map(json.loads, out.read_text().splitlines())]
    assert keys == [(1, 4), (1, 30), (2, 1)]


def test_a_new_record_replaces_the_problems_old_record(tmp_path: Path) -> None:
    out = tmp_path / "verification.jsonl"
    merge_records(out, [record(1, 4, verified=False), record(1, 5)])
    merge_records(out, [record(1, 4, verified=True, note="again")])
    records = read_records(out)
    assert len(records) == 2 and records[(1, 4)]["note"] == "again"


def test_merging_writes_no_temporary_files_behind(tmp_path: Path) -> None:
    merge_records(tmp_path / "verification.jsonl", [record(1, 1)])
    assert [p.name for p in tmp_path.iterdir()] == ["verification.jsonl"]


def test_merging_is_byte_identical_for_the_same_records(tmp_path: Path) -> None:
    merge_records(tmp_path / "a.jsonl", [record(1, 2), record(1, 1)])
    merge_records(tmp_path / "b.jsonl", [record(1, 1), record(1, 2)])
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_missing_records_file_has_no_records(tmp_path: Path) -> None:
    assert read_records(tmp_path / "verification.jsonl") == {}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (json.dumps({**record(1, 1), "schema_version": 99}), "schema_version is 99"),
        (json.dumps({"problem": {"level": 1, "id": 1}}), "schema_version is None"),
        ("{not json", "not a JSON line"),
        (json.dumps({"schema_version": SCHEMA_VERSION, "problem": {"level": "1"}}), "no problem level and id"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_a_bad_records_file_is_an_error_naming_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    out = tmp_path / "verification.jsonl"
    out.write_text(json.dumps(record(1, 2)) + "\n" + line + "\n")
    with pytest.raises(OracleAuditError, match=message) as info:
        read_records(out)
    assert f"{out}:2" in str(info.value)


def test_merging_into_a_file_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "verification.jsonl"
    before = json.dumps({**record(1, 1), "schema_version": 0}) + "\n"
    out.write_text(before)
    with pytest.raises(OracleAuditError, match="schema_version is 0"):
        merge_records(out, [record(1, 2)])
    assert out.read_text() == before
