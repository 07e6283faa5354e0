"""bench/run_losses.py: the shares of slot time by phase from call states, and the hung variants from a real
evidence store's rows."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from oracleaudit.store import EvidenceStore
from tests.shared.test_store import META, all_rows

SCRIPT = Path(__file__).parents[2] / "bench" / "run_losses.py"
spec = importlib.util.spec_from_file_location("run_losses", SCRIPT)
run_losses = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_losses)


def call(wall: float, **phases: float) -> dict:
    return {"wall_s": wall, "pairs_run": 1000, "variants_run": 20, "restarts": 4, "hangs": 3, "crashes": 2,
            "replays": 50, "phases": {f"{name}_s": value for name, value in phases.items()}}


def rows_of(statuses: dict[tuple[str, str], tuple[str, bool]]) -> pa.Table:
    """First-output rows of problem P: (mutant, input) → (status, inferred)."""
    return pa.Table.from_pylist([{"problem": "P", "mutant_id": m, "input_id": k, "output_index": 0, "status": s,
                                  "inferred": i} for (m, k), (s, i) in statuses.items()])


def test_shares_are_of_the_calls_wall_times_the_slots_and_the_build_pool_is_left_out() -> None:
    states = [{"full": {"calls": [call(100.0, evidence=200.0, idle=100.0, startup=40.0, build_cpu=900.0)]}},
              {"full": {"calls": [call(50.0, evidence=100.0, hung=60.0, replay=20.0)]}}]
    result = run_losses.losses(states, [], slots=4)
    assert result["slot_s"] == 600.0 and result["pairs"] == 2000 and result["variants_per_min"] == 16.0
    assert result["phases"]["evidence"] == {"s": 300.0, "share": 0.5, "ms_per_pair": 150.0}
    assert list(result["phases"])[:2] == ["evidence", "idle"]  # largest first
    assert "build_cpu" not in result["phases"]
    assert result["unaccounted_share"] == round(1 - 520 / 600, 4)
    assert result["restarts"] == {"count": 8, "startup_s_per_restart": 5.0}
    assert result["replays"] == {"pairs": 100, "crashes": 4, "replay_s_per_restart": 2.5}
    assert result["hangs"] == {"deadline_misses": 6, "hung_s_per_miss": 10.0}


def test_hung_variants_come_from_observed_timeouts_and_a_key_in_two_stores_counts_once() -> None:
    first = rows_of({("m1", "a"): ("Timeout", False), ("m1", "b"): ("Timeout", True), ("m1", "c"): ("Timeout", False),
                     ("m2", "a"): ("Ok", False), ("m3", "a"): ("Timeout", True), ("original", "a"): ("Ok", False),
                     ("reference", "a"): ("Ok", False)})
    again = rows_of({("m1", "a"): ("Ok", False), ("m4", "a"): ("Timeout", False)})  # m1/a here is not counted
    states = [{"full": {"calls": [call(10.0, hung=40.0)]}}]
    result = run_losses.losses(states, [first, again], slots=1)
    hangs = result["hangs"]
    assert hangs["hung_variants"] == 2 and hangs["variants"] == 5  # m1 and m4 hung; the original, m1-m4
    assert hangs["observed_timeout_rows"] == 3 and hangs["inferred_timeout_rows"] == 2
    assert hangs["hung_s_per_hung_variant"] == 20.0 and hangs["share_of_variants"] == 0.4


def test_the_script_reads_a_real_store_and_writes_its_json(tmp_path: Path) -> None:
    store = EvidenceStore(tmp_path / "evidence").create(META)
    store.append(all_rows())
    state = tmp_path / "scale.json"
    state.write_text(json.dumps({"full": {"calls": [call(30.0, evidence=120.0, idle=60.0)]}, "code": "abc"}))
    out = tmp_path / "losses.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--state", str(state), "--evidence", str(store.path),
                           "--out", str(out)], capture_output=True, text=True,
                          cwd=SCRIPT.parents[1], env={"PYTHONPATH": str(SCRIPT.parents[1]), "PATH": ""})
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["code"] == ["abc"] and result["phases"]["evidence"]["share"] == 0.5
    assert result["hangs"]["variants"] == len({(r["problem"], r["mutant_id"]) for r in all_rows()
                                                if r["mutant_id"] != "reference"})
    assert "evidence" in done.stdout and "slot-s" in done.stdout


def test_states_without_a_full_run_are_one_line_and_exit_non_zero(tmp_path: Path) -> None:
    state = tmp_path / "scale.json"
    state.write_text(json.dumps({"memory": {"ratio_60_vs_10": 1.0}}))
    done = subprocess.run([sys.executable, str(SCRIPT), "--state", str(state)], capture_output=True, text=True,
                          cwd=SCRIPT.parents[1], env={"PYTHONPATH": str(SCRIPT.parents[1]), "PATH": ""})
    assert done.returncode == 1
    assert done.stderr.strip() == "run_losses.py: error: the states hold no call of a full run"


def test_no_pair_and_no_slot_print_dashes_and_a_bad_slot_count_is_one_line(tmp_path: Path, capsys) -> None:
    empty = {"wall_s": 0.0, "pairs_run": 0, "variants_run": 0, "phases": {}}
    run_losses._print(run_losses.losses([{"full": {"calls": [empty]}}], [], slots=8))
    lines = capsys.readouterr().out.splitlines()
    assert next(line.split() for line in lines if line.startswith("evidence")) == ["evidence", "0.0", "-%", "-"]
    assert "None" not in "\n".join(lines) and "(-/min)" in lines[0]
    state = tmp_path / "scale.json"
    state.write_text(json.dumps({"full": {"calls": [call(1.0)]}}))
    done = subprocess.run([sys.executable, str(SCRIPT), "--state", str(state), "--slots", "0"], capture_output=True,
                          text=True, cwd=SCRIPT.parents[1], env={"PYTHONPATH": str(SCRIPT.parents[1]), "PATH": ""})
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].endswith("--slots must be >= 1, got 0")


@pytest.mark.parametrize("slots", [1, 8])
def test_no_slot_time_is_lost_or_made_up(slots: int) -> None:
    phases = {name: 10.0 for name in run_losses.SLOT_PHASES}
    result = run_losses.losses([{"full": {"calls": [call(100.0, **phases)]}}], [], slots=slots)
    assert sum(p["s"] for p in result["phases"].values()) == 100.0
    assert result["unaccounted_share"] == round(1 - 100 / (100 * slots), 4)


def test_target_splits_the_slot_time_per_pair_into_work_and_losses() -> None:
    # 2 slots × 100 s = 200 slot-s for 1000 pairs: 200 slot-ms a pair, of which 120 work and 80 losses
    states = [{"full": {"calls": [call(100.0, evidence=80.0, references=30.0, load=10.0, idle=50.0, hung=20.0)]}}]
    result = run_losses.losses(states, [], slots=2)
    near = run_losses.target(result, wall_s=65.0, pairs=1000)  # allows 130 slot-ms a pair
    assert near == {"wall_s": 65.0, "pairs": 1000, "allowed_ms_per_pair": 130.0, "spent_ms_per_pair": 200.0,
                    "work_ms_per_pair": 120.0, "losses_ms_per_pair": 80.0, "spent_over_allowed": 1.538,
                    "reached_without_losses": True, "work_over_allowed": 0.923}
    far = run_losses.target(result, wall_s=30.0, pairs=1000)  # 60 slot-ms a pair: half the work alone
    assert not far["reached_without_losses"] and far["work_over_allowed"] == 2.0
    with pytest.raises(ValueError, match="above 0"):
        run_losses.target(result, wall_s=0.0, pairs=1000)


def test_the_script_prints_the_target_line(tmp_path: Path) -> None:
    state = tmp_path / "scale.json"
    state.write_text(json.dumps({"full": {"calls": [call(100.0, evidence=150.0, idle=50.0)]}}))
    done = subprocess.run([sys.executable, str(SCRIPT), "--state", str(state), "--slots", "2", "--target", "50",
                           "1000", "--out", str(tmp_path / "losses.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "100.00 slot-ms per pair allowed, 200.00 spent (2.00×): work 150.00, losses 50.00; without any loss " \
           "still 1.50× over" in done.stdout
    assert json.loads((tmp_path / "losses.json").read_text())["target"]["work_over_allowed"] == 1.5
