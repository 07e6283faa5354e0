"""`bench/run_scale.py full --shard K/N` (a run longer than a session's device time, made as N stores that
merge): the shards partition the Pending mutants by whole solutions, every Pending mutant in exactly one,
balanced to within one solution's mutants, the same every time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from oracleaudit.mutant import PENDING, read_mutants
from oracleaudit.shipped import shipped_dir

BENCH = Path(__file__).parents[2] / "bench" / "run_scale.py"


@pytest.fixture(scope="module")
def run_scale():
    spec = importlib.util.spec_from_file_location("run_scale", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shards_partition_the_pending_mutants_by_whole_solutions_and_balance_them(run_scale, tmp_path: Path):
    bundled = shipped_dir("kill_matrix") / "mutants"
    pending = [m for m in read_mutants(bundled) if m.status == PENDING]
    shards = [read_mutants(run_scale.shard(bundled, f"{k}/3", tmp_path / str(k))) for k in (1, 2, 3)]
    ids = [m.id for part in shards for m in part]
    assert sorted(ids) == sorted(m.id for m in pending)  # each Pending mutant in exactly one shard
    sources = [{m.source for m in part} for part in shards]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    sizes = [len(part) for part in shards]
    largest = max(sum(m.source == s for m in pending) for s in {m.source for m in pending})
    assert max(sizes) - min(sizes) <= largest + 1
    again = read_mutants(run_scale.shard(bundled, "2/3", tmp_path / "again"))
    assert [m.id for m in again] == [m.id for m in shards[1]]


@pytest.mark.parametrize("spec", ["0/3", "4/3", "x/3"])
def test_a_shard_outside_one_to_n_is_refused(run_scale, tmp_path: Path, spec: str):
    with pytest.raises(ValueError):
        run_scale.shard(shipped_dir("kill_matrix") / "mutants", spec, tmp_path)
