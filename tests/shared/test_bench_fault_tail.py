"""bench/fault_tail.py on the CPU: the faulty mutants read from a committed shard of the complete run, the sample
drawn around them, and the comparison of two stores' statuses (its GPU part runs on the device)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oracleaudit.mutant import read_mutants
from oracleaudit.store import EvidenceStore

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "bench" / "fault_tail.py"
spec = importlib.util.spec_from_file_location("fault_tail", SCRIPT)
fault_tail = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fault_tail)
SHARD = ROOT / "bench" / "results" / "full_run" / "shard3"


@pytest.fixture(scope="module")
def faults() -> dict[str, str]:
    return fault_tail.faulty_mutants([SHARD])


def test_a_hung_mutant_has_an_observed_timeout_and_a_crashed_one_a_sticky_cuda_error(faults) -> None:
    rows = EvidenceStore(SHARD).open().read(columns=["mutant_id", "status", "error_class", "inferred"])
    observed = rows[rows["inferred"].ne(True)]
    hung = {m for m, kind in faults.items() if kind == "hung"}
    crashed = {m for m, kind in faults.items() if kind == "crashed"}
    assert hung and crashed and not hung & crashed
    assert hung == set(observed.loc[(observed["status"] == "Timeout") & ~observed["mutant_id"].isin(
        ["original", "reference"]), "mutant_id"])
    assert crashed <= set(observed.loc[observed["error_class"] == "AcceleratorError", "mutant_id"])
    inferred_only = set(rows.loc[rows["inferred"].eq(True) & (rows["status"] == "Timeout"), "mutant_id"]) - hung
    assert not inferred_only  # an inferred Timeout always follows an observed one of the same mutant


def test_the_sample_holds_every_faulty_mutant_of_the_chosen_solutions_and_the_first_others_by_id(faults) -> None:
    mutants = read_mutants(fault_tail.FULL_RUN)
    picked = fault_tail.sample(mutants, faults, solutions=2, others=3)
    sources = {m.source for m in picked}
    assert len(sources) == 2
    for source in sources:
        group = sorted((m for m in mutants if m.source == source and m.status == "Pending"), key=lambda m: m.id)
        chosen = [m.id for m in picked if m.source == source]
        assert {m.id for m in group if m.id in faults} <= set(chosen)
        assert [i for i in chosen if i not in faults] == sorted(m.id for m in group if m.id not in faults)[:3]
    # the chosen solutions have the most hung mutants of all
    hung = {s: sum(faults.get(m.id) == "hung" for m in mutants if m.source == s) for s in {m.source for m in mutants}}
    assert min(hung[s] for s in sources) >= max(n for s, n in hung.items() if s not in sources) >= 1
    assert fault_tail.sample(mutants, faults, solutions=2, others=3) == picked


def test_prepare_writes_a_mutants_folder_that_a_run_reads(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "prepare", "--work", str(tmp_path), "--solutions", "2",
                           "--others", "4"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    written = read_mutants(tmp_path / "mutants")
    part = json.loads((tmp_path / "fault_tail.json").read_text())["prepare"]
    assert part["mutants"] == len(written) and part["solutions"] == 2 == len({m.source for m in written})
    assert part["hung"] + part["crashed"] + 2 * 4 >= len(written) > 2 * 4
    assert all((tmp_path / "mutants" / "diffs" / f"{m.id}.diff").is_file() for m in written)


def test_statuses_of_a_store_are_keyed_by_each_rows_pair_and_output() -> None:
    rows = EvidenceStore(SHARD).open().read(columns=["problem", "mutant_id", "input_id", "output_index", "status"])
    found = fault_tail.statuses(SHARD)
    assert len(found) == len(rows.drop_duplicates(["problem", "mutant_id", "input_id", "output_index"]))
    first = rows.iloc[0]
    assert found[(first["problem"], first["mutant_id"], first["input_id"], first["output_index"])] == first["status"]
    assert fault_tail.differences(found, found) == []


def test_the_committed_list_of_faulty_mutants_is_what_faulty_writes_from_the_shards(tmp_path: Path) -> None:
    out = tmp_path / "faulty.tsv"
    done = subprocess.run([sys.executable, str(SCRIPT), "faulty", "--out", str(out)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in out.read_text().splitlines() if not line.startswith("#")]
    expected = fault_tail.faulty_mutants(sorted(p for p in SHARD.parent.glob("shard*") if p.is_dir()))
    assert dict(rows) == expected and [m for m, _ in rows] == sorted(expected)
    assert {"hung", "crashed"} == set(expected.values())
    assert out.read_text() == (ROOT / "bench" / "data" / "faulty_mutants.tsv").read_text()


def test_faulty_with_the_shards_parked_is_one_error_line(tmp_path: Path) -> None:
    stand_in = tmp_path / "bench" / "fault_tail.py"  # the script in a tree whose shards are parked
    stand_in.parent.mkdir()
    stand_in.write_text(SCRIPT.read_text())
    done = subprocess.run([sys.executable, str(stand_in), "faulty", "--out", str(tmp_path / "faulty.tsv")],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("fault_tail.py: error: ") and "no shard stores (parked?" in done.stderr
    assert not (tmp_path / "faulty.tsv").exists()


def test_differences_name_each_pair_whose_status_changed_or_is_missing_on_one_side() -> None:
    a = {("P", "m1", "k", 0): "Ok", ("P", "m2", "k", 0): "Timeout", ("P", "m3", "k", 0): "Ok"}
    b = {("P", "m1", "k", 0): "Ok", ("P", "m2", "k", 0): "Ok", ("P", "m4", "k", 0): "Ok"}
    assert fault_tail.differences(a, b) == [
        {"key": ["P", "m2", "k", 0], "statuses": ["Timeout", "Ok"]},
        {"key": ["P", "m3", "k", 0], "statuses": ["Ok", None]},
        {"key": ["P", "m4", "k", 0], "statuses": [None, "Ok"]},
    ]


def test_run_refuses_an_order_that_does_not_name_both_supervisions(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "run", "--work", str(tmp_path), "--order", "queue", "queue"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--order names queue and slice" in done.stderr


def _run(wall_s: float, per_min: float, stopped: bool) -> dict:
    return {"wall_s": wall_s, "variants_per_min": per_min, "stopped": stopped}


def test_compare_gives_the_second_arm_s_wall_over_the_first_s_and_a_bound_where_one_stopped() -> None:
    ended = fault_tail.compare({"queue": _run(100.0, 60.0, False), "slice": _run(250.0, 24.0, False)}, "queue",
                               "slice")
    assert ended == {"ratio_of": "slice over queue", "bound": None, "wall_ratio": 2.5}
    # slice stopped at 300 s: its whole run takes longer, so slice/queue is at least 3
    assert fault_tail.compare({"queue": _run(100.0, 60.0, False), "slice": _run(300.0, 10.0, True)}, "queue",
                              "slice")["bound"] == "≥"
    assert fault_tail.compare({"queue": _run(365.0, 17.1, True), "slice": _run(300.0, 10.0, False)}, "queue",
                              "slice") == {"ratio_of": "slice over queue", "bound": "≤", "wall_ratio": 0.822}
    assert fault_tail.compare({"queue": _run(365.0, 17.1, True), "slice": _run(300.0, 10.0, True)}, "queue",
                              "slice") == {"ratio_of": "slice over queue", "bound": None, "wall_ratio": None}
    floors = {"floor-5": _run(200.0, 12.0, False), "floor-2": _run(150.0, 16.0, False)}
    assert fault_tail.compare(floors, "floor-5", "floor-2")["wall_ratio"] == 0.75


def test_arms_are_the_supervisions_or_the_queue_at_each_floor_or_with_and_without_deciders() -> None:
    args = argparse.Namespace(order=["queue", "slice"], floors=None, deciders=False)
    assert fault_tail.arms(args) == [("queue", {"supervision": "queue"}), ("slice", {"supervision": "slice"})]
    args.floors = [5.0, 2.0]
    assert fault_tail.arms(args) == [("floor-5", {"supervision": "queue", "timeout_floor_s": 5.0}),
                                     ("floor-2", {"supervision": "queue", "timeout_floor_s": 2.0})]
    args.floors, args.deciders = None, True
    assert fault_tail.arms(args) == [("decided", {"supervision": "queue"}),
                                     ("cover-only", {"supervision": "queue", "deciders": False})]


def test_the_cover_only_arm_s_cover_has_no_deciders_and_the_same_inputs() -> None:
    from oracleaudit.scoring.oracle import covering

    cover = covering(["kernelbench", "sol-execbench"])
    keys = ["normal/s=42/official", "normal/s=200/official", "uniform/s=7/odd"]
    plain = fault_tail.cover_only(cover)
    assert not hasattr(plain, "deciders") and hasattr(cover, "deciders")
    assert plain("level1/1_ReLU", keys) == cover("level1/1_ReLU", keys)


def test_the_sample_leaves_out_the_skipped_solutions(faults) -> None:
    mutants = read_mutants(fault_tail.FULL_RUN)
    first = fault_tail.sample(mutants, faults, solutions=1, others=0)
    skipped = Path(first[0].source).stem
    again = fault_tail.sample(mutants, faults, solutions=1, others=0, skip=(skipped,))
    assert again and all(skipped not in m.source for m in again)


@pytest.mark.parametrize("floors", ["5", "5,5", "5,0", "5,x", "5,2,1"])
def test_run_refuses_floors_that_are_not_two_different_positive_numbers(tmp_path: Path, floors: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "run", "--work", str(tmp_path), "--floors", floors],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--floors takes" in done.stderr
