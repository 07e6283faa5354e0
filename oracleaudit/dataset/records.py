"""The verification records file, `verification.jsonl`.

Records are one JSON line per problem in `verification.jsonl` (schema `SCHEMA_VERSION`), merged by problem,
sorted by (level, id) and written atomically after each problem. A record holds: schema_version; problem
{level, id, name}; problem_file and solution_file (relative to the problem root) and their sha256; gpu, torch,
cuda, date (UTC); criterion {atol, rtol, fp32_margin, fp32_reference_tf32}; checks, each {name, distribution,
seed, overrides, passed, max_abs_err, max_rel_err, excess, fp32_excess, nonfinite, fp32_nonfinite, error};
dropped_variants [{name, reason}]; forward_ms (fastest timed forward of ModelNew on the official inputs,
present when the official checks passed on a GPU); verified; error (the first line of a build/import/worker failure, else
null). Numbers that cannot be computed (no comparable element, a shape mismatch) are null, never a sentinel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from oracleaudit.errors import OracleAuditError
from oracleaudit.files import write_atomic

__all__ = ["RECORDS_FILE", "SCHEMA_VERSION", "merge_records", "read_records"]

SCHEMA_VERSION = 1
RECORDS_FILE = "verification.jsonl"


# The records file


def _record_key(record: Any, where: str) -> tuple[int, int]:
    if not isinstance(record, dict):
        raise OracleAuditError(f"{where}: a verification record must be a JSON object")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise OracleAuditError(f"{where}: schema_version is {version!r}, this oracleaudit reads {SCHEMA_VERSION}")
    problem = record.get("problem")
    level = problem.get("level") if isinstance(problem, dict) else None
    ident = problem.get("id") if isinstance(problem, dict) else None
    if not isinstance(level, int) or not isinstance(ident, int):
        raise OracleAuditError(f"{where}: the record has no problem level and id")
    return (level, ident)


def read_records(path: Path) -> dict[tuple[int, int], dict[str, Any]]:
    """The verification records of a file by (level, id); a missing file has none.

    Every line must be a JSON object with the current schema_version.
    """
    path = Path(path)
    if not path.exists():
        return {}
    records: dict[tuple[int, int], dict[str, Any]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise OracleAuditError(f"{path}:{lineno}: not a JSON line ({err.msg}: column {err.colno})") from None
        records[_record_key(record, f"{path}:{lineno}")] = record
    return records


def merge_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Merge records into a records file: each replaces its problem's old record; sorted; written atomically."""
    path = Path(path)
    merged = read_records(path)
    for record in records:
        merged[_record_key(record, f"record for {path}")] = record
    lines = [json.dumps(merged[key], sort_keys=True, allow_nan=False) + "\n" for key in sorted(merged)]
    write_atomic(path, "".join(lines), sync=True)
