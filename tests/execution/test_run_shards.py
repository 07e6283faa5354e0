"""`bench/run_scale.py full --shard K/N` (a run longer than a session's device time, made as N stores that
merge): the shards partition the Pending mutants by whole solutions, every Pending mutant in exactly one,
balanced to within one solution's mutants, the same every time; `report` gathers the shards' states and calls
the run complete only when every shard has ended without a hole."""

from __future__ import annotations

import argparse
import importlib.util
import json
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


def _call(wall: float, variants: int, stopped: bool) -> dict:
    return {"wall_s": wall, "variants_run": variants, "pairs_run": variants * 68, "stopped": stopped,
            "phases": {"evidence_s": wall, "idle_s": 1.0}, "gpu_busy_fraction": 0.8, "execution_wall_s": wall,
            "restarts": 0, "hangs": 1, "crashes": 2, "replays": 5, "errors": [], "cold_cache": False}


def _shard(spec: str, calls: list[dict], holes: int) -> dict:
    return {"full": {"shard": spec, "calls": calls, "holes": holes, "inferred_rows": 3}, "gpu": "NVIDIA H200"}


def test_the_report_gathers_the_shards_states_and_is_complete_only_with_every_shard_ended(run_scale, tmp_path):
    real = {"real_size": {"problems": ["level1/x"], "oom": 0}, "memory": {"ratio_60_vs_10": 1.03}, "code": "b2"}
    one = {**_shard("1/2", [_call(100.0, 50, True), _call(200.0, 150, False)], 0), "code": "a1"}
    two = _shard("2/2", [_call(300.0, 100, False)], 0)
    paths = []
    for name, state in (("s1", one), ("s2", two), ("real", real)):
        paths.append(tmp_path / f"{name}.json")
        run_scale._save(paths[-1], state)

    def report(*chosen: Path) -> dict:
        out = tmp_path / "run_scale.json"
        run_scale.report(argparse.Namespace(state=list(chosen), out=out))
        return json.loads(out.read_text())

    whole = report(*paths)
    assert whole["bundled_full_complete"] and whole["shards"] == ["1/2", "2/2"]
    assert whole["bundled_full_wall_s"] == 600.0 and whole["variants"] == 300 and whole["holes"] == 0
    assert whole["variants_per_min"] == 30.0 and whole["phases"] == {"evidence_s": 600.0, "idle_s": 3.0}
    assert whole["real_size"] == real["real_size"] and whole["peak_gpu_mem_ratio_60_vs_10_inputs"] == 1.03
    assert whole["events"] == {"inferred_rows": 6, "restarts": 0, "hangs": 3, "crashes": 6, "replays": 15}
    assert whole["code"] == "shard 1/2: a1; real size: b2"  # each state's code, named by what it ran
    half = report(paths[0], paths[2])  # shard 2 of 2 not run yet: a partial run, whatever shard 1 says
    assert not half["bundled_full_complete"] and half["bundled_full_wall_s"] is None
    assert half["partial"]["variants"] == 200 and half["partial"]["pairs_not_yet_run"] == 0
    assert half["partial"]["replays"] == 10 and half["events"] is None
    two["full"]["holes"] = 68
    two["full"]["calls"][-1]["stopped"] = True
    run_scale._save(paths[1], two)
    cut = report(*paths)
    assert not cut["bundled_full_complete"] and cut["partial"]["pairs_not_yet_run"] == 68


def test_a_reobserve_run_counts_towards_the_whole_run_but_is_no_shard(run_scale, tmp_path):
    """Shards 1 and 2 of 2 ended, and a `reobserve` run (no shard): complete only once it has ended too, its
    wall time and variants in the totals, the shards listed as before."""
    states = {"s1": _shard("1/2", [_call(100.0, 50, False)], 0), "s2": _shard("2/2", [_call(300.0, 100, False)], 0),
              "re": {"full": {"reobserves": True, "calls": [_call(60.0, 43, True)], "holes": 68, "inferred_rows": 3}}}
    paths = []
    for name, state in states.items():
        paths.append(tmp_path / f"{name}.json")
        run_scale._save(paths[-1], state)

    def report() -> dict:
        out = tmp_path / "run_scale.json"
        run_scale.report(argparse.Namespace(state=paths, out=out))
        return json.loads(out.read_text())

    assert not report()["bundled_full_complete"]
    states["re"]["full"].update(holes=0, calls=[_call(60.0, 43, False)])
    run_scale._save(paths[2], states["re"])
    whole = report()
    assert whole["bundled_full_complete"] and whole["shards"] == ["1/2", "2/2"]
    assert whole["bundled_full_wall_s"] == 460.0 and whole["variants"] == 193


def _shipped(run_scale, tmp_path: Path, state: dict, monkeypatch) -> tuple[Path, Path]:
    """A store of real rows and its state shipped as a call would (paths relative to the repository root);
    returns the store and the folder the pieces unpack in."""
    import subprocess

    from oracleaudit.store import EvidenceStore
    from tests.shared.test_store import META, all_rows

    monkeypatch.chdir(tmp_path)
    store = EvidenceStore(Path("out/shard2")).create(META)
    rows = all_rows()
    store.append(rows[:4])
    store.append(rows[4:])
    Path("out/scale2.json").write_text(json.dumps(state))
    run_scale.ship(argparse.Namespace(store=store.path, state=Path("out/scale2.json"), name="shard2",
                                      out=tmp_path / "OUT"))
    pieces = sorted((tmp_path / "OUT").glob("shard2.tar.*"))
    assert pieces and all(p.stat().st_size <= run_scale.CHUNK_BYTES for p in pieces)
    (tmp_path / "back").mkdir()
    subprocess.run(f"cat {' '.join(map(str, pieces))} | tar -xf - -C {tmp_path / 'back'}", shell=True, check=True)
    return tmp_path / store.path, tmp_path / "back"


def test_a_shard_ships_packed_and_an_unfinished_one_goes_on_merged_back_with_its_rows(run_scale, tmp_path: Path,
                                                                                     monkeypatch):
    from oracleaudit.packed import FAST_CODEC, FILES, PACKED_DIR
    from oracleaudit.store import KEY_COLUMNS, EvidenceStore, merge_stores
    from tests.shared.test_store import all_rows

    done = _shard("2/3", [_call(10.0, 5, stopped=False)], holes=0)
    (tmp_path / "done").mkdir()
    path, back = _shipped(run_scale, tmp_path / "done", done, monkeypatch)
    packed = EvidenceStore(back / "out" / "shard2-packed").open()
    in_key_order = EvidenceStore(path).open().read_table().sort_by([(k, "ascending") for k in KEY_COLUMNS])
    assert packed.packed and packed.read_table().equals(in_key_order)
    EvidenceStore(path).open().pack(tmp_path / "fast", codec=FAST_CODEC)  # shipped with the fast codec
    assert all((tmp_path / "fast" / PACKED_DIR / f"{name}.parquet").read_bytes()
               == (back / "out" / "shard2-packed" / PACKED_DIR / f"{name}.parquet").read_bytes() for name in FILES)
    assert json.loads((back / "out" / "scale2.json").read_text()) == done

    going = _shard("2/3", [_call(10.0, 5, stopped=True)], holes=7)
    (tmp_path / "going").mkdir()
    path, back = _shipped(run_scale, tmp_path / "going", going, monkeypatch)
    assert not (back / "out" / "shard2").exists()
    merge_stores(back / "out" / "shard2", [back / "out" / "shard2-packed"])  # device_call.sh's restore
    plain = EvidenceStore(back / "out" / "shard2").open()
    in_key_order = EvidenceStore(path).open().read_table().sort_by([(k, "ascending") for k in KEY_COLUMNS])
    assert not plain.packed and plain.read_table().sort_by([(k, "ascending") for k in KEY_COLUMNS]).equals(in_key_order)
    more = [{**all_rows()[0], "mutant_id": "another"}]
    plain.append(more)  # the run goes on appending to it
    assert plain.num_rows == in_key_order.num_rows + 1


def test_reobserve_takes_the_mutants_with_an_inferred_row_on_a_cover_input_only(run_scale, tmp_path: Path):
    """Three Pending mutants of one bundled problem in a store: one with an inferred row on an input of the
    problem's cover (taken), one with an inferred row on another input only, one with observed rows only."""
    from oracleaudit.pool import Pool
    from oracleaudit.problem import problem_at
    from oracleaudit.scoring.oracle import covering
    from oracleaudit.store import EvidenceStore

    bundled = shipped_dir("kill_matrix") / "mutants"
    pending = [m for m in read_mutants(bundled) if m.status == PENDING]
    first = pending[0]
    a, b, c = [m for m in pending if m.source == first.source][:3]
    problem = problem_at(Path(run_scale.ROOT) / first.problem_file)
    entries = Pool.load("default").entries_for(problem)
    cover = set(covering()(problem.label, [e.key for e in entries]))
    on_cover = next(e for e in entries if e.key in cover)
    elsewhere = next(e for e in entries if e.key not in cover)

    def row(mutant, entry, inferred):
        return {"problem": problem.label, "mutant_id": mutant.id, "input_id": entry.key, "input_seed": entry.seed,
                "shape_variant": entry.shape, "distribution": entry.distribution, "output_index": 0,
                "status": "RuntimeError" if inferred else "Ok", "inferred": inferred}

    store = EvidenceStore(tmp_path / "store").create({"pool": "default"})
    store.append([row(a, elsewhere, False), row(a, on_cover, True), row(b, on_cover, False),
                  row(b, elsewhere, True), row(c, on_cover, False)])
    out = tmp_path / "again"
    run_scale.reobserve(argparse.Namespace(store=tmp_path / "store", mutants=bundled, pool="default", out=out))
    assert [m.id for m in read_mutants(out)] == [a.id]


def test_reobserve_of_a_folder_that_is_no_store_is_one_line_naming_it(tmp_path: Path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(BENCH), "reobserve", "--store", str(tmp_path), "--mutants",
                           str(shipped_dir("kill_matrix") / "mutants"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=BENCH.parents[1])
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"run_scale.py: error: {tmp_path}/manifest.json: no such file (not an evidence store)"]
