"""bench/data/full_run: the complete run's mutants, committed so that every shard runs the same records. They
must still be those of the bundled solution files (a changed solution makes its mutants stale), and the bundled
evidence's sample must be drawn from them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from oracleaudit.files import file_sha256
from oracleaudit.mutant import PENDING, read_mutants
from oracleaudit.shipped import shipped_dir

ROOT = Path(__file__).resolve().parents[2]


def test_the_full_run_s_mutants_match_the_bundled_solutions_and_hold_the_bundle_s_sample() -> None:
    mutants = read_mutants(ROOT / "bench" / "data" / "full_run")
    assert len(mutants) == 7361 and Counter(m.status for m in mutants)[PENDING] == 6765
    digests = {source: file_sha256(ROOT / source) for source in {m.source for m in mutants}}
    stale = sorted({m.source for m in mutants if m.source_sha256 != digests[m.source]})
    assert not stale, f"solutions changed since their mutants were made: {stale[:3]}"
    by_id = {m.id: m for m in mutants}
    sample = read_mutants(shipped_dir("kill_matrix") / "mutants")
    assert all(by_id.get(m.id) == m for m in sample)
