"""The refcheck results file, `refcheck.jsonl`: one JSON line per (problem, oracle), appended as each problem
is done, so that an interrupted run keeps what it did and a second run skips it.

A record (schema `SCHEMA_VERSION`): schema_version; problem (its label, `level1/23_Softmax`), problem_file
(`level1/23_Softmax.py`) and problem_sha256; oracle, oracle_sha256 (of its protocol file), math_mode and tf32
([matmul, cuDNN] flags its fp32 reference ran with); pool and pool_digest; device; verdict (`VERDICTS`);
reason (why fp64_incompatible or failed, else null); tolerance, needed_tolerance, margin, max_error, inputs,
failing_inputs (verdict.py defines them; null where the verdict has none); dropped_inputs (pool inputs of the
oracle the problem has no shape for); seconds (the problem's wall time, its process's start included, shared
by its oracles' records: the one field that changes from run to run).

A folder's results are `refcheck.jsonl`, or, where only that is there, `refcheck.jsonl.gz`: the same lines
gzipped (`gzip -9 -n`), read-only (the bundled kill_matrix/refcheck.jsonl.gz: 23 KB against 555 KB).

The last record of a (problem, oracle, device) wins. A record counts as done for a later run when its
problem file, oracle file, pool and device are unchanged and its verdict is not `failed` (a crash, a
timeout or an import error is tried again). An incomplete last line (a run killed while writing) is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from oracleaudit.errors import OracleAuditError
from oracleaudit.files import plain_bytes, plain_or_gzipped

__all__ = ["FAILED", "FP64_INCOMPATIBLE", "GZIPPED_FILE", "RESULTS_FILE", "SCHEMA_VERSION", "VERDICTS",
           "append_records", "bundled_results", "done_keys", "identity", "latest", "read_records", "results_file"]

SCHEMA_VERSION = 1
RESULTS_FILE = "refcheck.jsonl"
GZIPPED_FILE = RESULTS_FILE + ".gz"  # the same lines, read-only (as shipped)
FP64_INCOMPATIBLE, FAILED = "fp64_incompatible", "failed"
VERDICTS = ("refereeable", "unrefereeable", FP64_INCOMPATIBLE, FAILED)
_IDENTITY = ("problem", "problem_sha256", "oracle", "oracle_sha256", "pool_digest", "device")


def results_file(folder: Path) -> Path:
    """The results file of a folder: refcheck.jsonl, or the gzipped one where only that is there."""
    return plain_or_gzipped(folder, RESULTS_FILE)


def bundled_results() -> Path | None:
    """kill_matrix/refcheck.jsonl.gz: the bundled problems under every catalog oracle, measured on a GPU (what
    `score` and `analyze unrefereeable` label the bundled evidence's false alarms with), or None where this
    installation does not ship it."""
    from oracleaudit.shipped import shipped_dir

    try:
        path = results_file(shipped_dir("kill_matrix"))
    except FileNotFoundError:
        return None
    return path if path.is_file() else None


def identity(record: Mapping[str, Any]) -> tuple:
    """What a record was computed from: a later run with the same identity skips it."""
    return tuple(record.get(name) for name in _IDENTITY)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a results file in file order; a missing file has none. A line that is not a record of
    this schema is an error naming the file and line, except an incomplete last line."""
    path = Path(path)
    if not path.exists():
        return []
    lines = plain_bytes(path).decode("utf-8").splitlines(keepends=True)
    records = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if lineno == len(lines) and not line.endswith("\n"):
                break  # the write of the last line was cut short
            raise OracleAuditError(f"{path}:{lineno}: not a JSON line ({err.msg})") from None
        if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
            found = record.get("schema_version") if isinstance(record, dict) else None
            raise OracleAuditError(f"{path}:{lineno}: not a refcheck record of schema {SCHEMA_VERSION} "
                                   f"(schema_version {found!r})")
        if record.get("verdict") not in VERDICTS or not isinstance(record.get("problem"), str) \
                or not isinstance(record.get("oracle"), str):
            raise OracleAuditError(f"{path}:{lineno}: a refcheck record needs problem, oracle and a verdict "
                                   f"({', '.join(VERDICTS)})")
        records.append(record)
    return records


def done_keys(path: Path) -> set[tuple]:
    """The identities of the records a later run skips (see the module docstring)."""
    return {identity(r) for r in read_records(path) if r["verdict"] != FAILED}


def latest(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The last record of each (problem, oracle, device)."""
    return {(r["problem"], r["oracle"], r.get("device")): dict(r) for r in records}


def append_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Append records as JSON lines (sorted keys), flushed to disk before returning; an incomplete last line
    left by a killed run is cut off first."""
    path = Path(path)
    if path.suffix == ".gz":
        raise OracleAuditError(f"{path}: gzipped results are read-only; gunzip it to add records")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"schema_version": SCHEMA_VERSION, **r}, sort_keys=True, allow_nan=False) + "\n"
                   for r in records)
    with open(path, "a+b") as handle:
        handle.seek(0)
        data = handle.read()
        if data and not data.endswith(b"\n"):  # an incomplete last line: dropped, not continued
            handle.truncate(data.rfind(b"\n") + 1)
        handle.write(text.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
