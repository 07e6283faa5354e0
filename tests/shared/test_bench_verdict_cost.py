"""bench/verdict_cost.py: the two ways of telling a thinned hull's verdict exact (the hull arrays at once, one
ErrorEvidence per row) agree on the bundle's thinned rows, the script prints them side by side with a ratio, and
half of --evidence/--mutants is refused in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "verdict_cost.py"


def test_both_ways_agree_on_the_bundled_thinned_rows_and_the_figures_compare_them(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("verdict_cost", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    audit = Audit.load(ROOT / "kill_matrix" / "evidence", ROOT / "kill_matrix" / "mutants")
    oracles = [Oracle.load("kernelbench"), Oracle.load("robust-kbench")]
    _, told, fast = module.run(audit, oracles, module.verdict_module._exact_where_thinned)
    _, told_again, slow = module.run(audit, oracles, module.per_row)
    assert told == told_again > 0  # the bundle has rows whose hull was thinned, and both ways are asked the same
    for a, b in zip(fast, slow):
        assert np.array_equal(a.killed, b.killed) and a.rows["inexact"].equals(b.rows["inexact"])
    assert any(a.inexact for a in fast)  # and some of them are inexact: the answers are not all alike

    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(BENCH), "--json", str(out)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["same_verdicts"] and figures["oracles"] >= 11 and figures["thinned_rows_told"] > 0
    # the ratio of the two timings (printed rounded; the ratio is of the unrounded seconds)
    assert figures["speedup"] == pytest.approx(figures["per_row_evidence_s"] / figures["hull_arrays_s"], rel=0.02)


def test_evidence_without_mutants_is_refused_in_one_line() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--evidence", "kill_matrix/evidence"], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0 and "go together" in done.stderr
