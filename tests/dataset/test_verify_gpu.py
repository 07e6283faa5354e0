"""Verification of the bundled exemplar on a real GPU (load_inline build, ~1 minute)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracleaudit.dataset.records import read_records
from oracleaudit.dataset.verify import verify_solutions
from oracleaudit.problem import bundled_root


@pytest.mark.gpu
def test_the_exemplar_softmax_solution_is_verified(tmp_path: Path) -> None:
    out = tmp_path / "verification.jsonl"
    solution = bundled_root() / "solutions" / "level1" / "23_Softmax.py"
    report = verify_solutions([solution], out=out, jobs=1, logs_dir=tmp_path / "logs", progress=False)
    record = read_records(out)[(1, 23)]
    assert record["error"] is None, record["error"]
    assert [c["name"] for c in record["checks"] if not c["passed"]] == []
    assert len(record["checks"]) == 10 and record["verified"]
    assert record["gpu"] and record["cuda"]
    assert 0 < record["forward_ms"] < 10, "the exemplar's forward is timed and well under 10 ms"
    assert [o.status for o in report.outcomes] == ["verified"]

    again = verify_solutions([solution], out=out, jobs=1, progress=False)
    assert [o.status for o in again.outcomes] == ["skipped"]
