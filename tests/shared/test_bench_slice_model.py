"""bench/slice_model.py on a written trace and on made-up costs: each slice's seconds and overhead from the trace,
and the four ways of slicing and building replayed through the run's own work queue."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import slice_model
from oracleaudit.execution.trace import read
from tests.shared.test_bench_trace_rates import write

ROOT = Path(__file__).parents[2]


def test_a_slice_runs_from_its_send_to_its_worker_s_last_mark_and_a_worker_may_run_several(tmp_path) -> None:
    events = [{"event": "run", "t": 100.0, "pid": 1, "tid": 1},
              {"event": "job_built", "t": 110.0, "pid": 1, "tid": 1, "problem": "level1/a"},
              {"event": "job_built", "t": 120.0, "pid": 1, "tid": 1, "problem": "level1/b"},
              # worker 7: a slice of level1/a sent at 110 s (the original, then m1 and m2), then one of level1/b
              {"event": "send", "t": 110.0, "pid": 1, "tid": 2, "child": 7},
              {"event": "pair", "t": 111.0, "pid": 7, "tid": 7, "variant": "original"},
              {"event": "pair", "t": 112.0, "pid": 7, "tid": 7, "variant": "m1"},
              {"event": "pair", "t": 114.0, "pid": 7, "tid": 7, "variant": "m2"},
              {"event": "group", "t": 116.0, "pid": 7, "tid": 7},
              {"event": "send", "t": 130.0, "pid": 1, "tid": 2, "child": 7},
              {"event": "pair", "t": 131.0, "pid": 7, "tid": 7, "variant": "m3"},
              # the same slice goes on after m3 hung: worker 7 reaped at 136 s, worker 8 sent the rest
              {"event": "reaped", "t": 136.0, "pid": 1, "tid": 2, "child": 7},
              {"event": "send", "t": 136.5, "pid": 1, "tid": 2, "child": 8},
              {"event": "pair", "t": 138.0, "pid": 8, "tid": 8, "variant": "m4"},
              {"event": "group", "t": 139.0, "pid": 8, "tid": 8}]
    write(tmp_path / "trace", events)
    figures = slice_model.costs(read(tmp_path / "trace"), {"m1": "level1/a", "m2": "level1/a", "m3": "level1/b",
                                                           "m4": "level1/b"}, job_size=48)
    a, b = figures["problems"]["level1/a"], figures["problems"]["level1/b"]
    # level1/a: one slice of 6 s (send to the worker's last mark), 2 s of it before m1's pair
    assert a == {"mutants": 2, "built_s": 10.0, "slices": 1, "worker_s": 6.0, "slice_overhead_s": 2.0,
                 "s_per_mutant": 2.0, "extensions": 1}
    # level1/b: 6 s to the reaping and 2.5 s in the fresh worker; overheads 1 s and 1.5 s; one cut slice's taken off
    assert b == {"mutants": 2, "built_s": 20.0, "slices": 2, "worker_s": 8.5, "slice_overhead_s": 1.25,
                 "s_per_mutant": 3.625, "extensions": 1}
    assert figures["traced_first_pair_s"] == 11.0 and figures["traced_last_pair_s"] == 38.0


def test_two_extensions_built_at_once_and_slices_that_shrink_end_a_run_sooner() -> None:
    late = {"level2/big": {"mutants": 300, "built_s": 100.0, "slice_overhead_s": 1.0, "s_per_mutant": 2.0,
                           "extensions": 2},
            "level1/small": {"mutants": 200, "built_s": 10.0, "slice_overhead_s": 1.0, "s_per_mutant": 2.0,
                             "extensions": 1}}
    ways = {way: slice_model.simulate(late, 4, 48, way) for way in slice_model.WAYS}
    assert ways["ahead/at-once"]["makespan_s"] < ways["ahead/in-turn"]["makespan_s"]  # the big job built at 50 s
    # cut as taken, the small job's slices keep every slot busy until after 100 s: no later, here no sooner
    assert ways["guided/at-once"]["makespan_s"] <= ways["guided/in-turn"]["makespan_s"]
    work = sum(p["mutants"] * p["s_per_mutant"] for p in late.values())
    assert all(way["makespan_s"] >= 10.0 + work / 4 for way in ways.values())  # never below the work over the slots
    assert all(0 < way["slot_busy_fraction"] <= 1 for way in ways.values())
    # one job of 200 mutants on 4 slots: 5 slices of 40 cut ahead leave one running alone (80 s) at the end
    one = {"level1/one": {"mutants": 200, "built_s": 0.0, "slice_overhead_s": 1.0, "s_per_mutant": 2.0,
                          "extensions": 1}}
    assert slice_model.simulate(one, 4, 48, "ahead/in-turn")["makespan_s"] == 162.0
    assert slice_model.simulate(one, 4, 48, "guided/in-turn")["makespan_s"] < 120.0


def test_without_a_traced_run_it_says_so_in_one_line(tmp_path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "slice_model.py"), "--trace", str(tmp_path / "none"),
                           "--mutants", str(ROOT / "bench" / "data" / "full_run")], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("slice_model.py: error:") and "no traced run" in done.stderr
