"""bench/trace_rates.py on a written trace: the hung pairs' spinning, the pair rates beside them, the builds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench import trace_rates
from oracleaudit.execution.trace import read


def write(folder: Path, events: list[dict]) -> None:
    folder.mkdir()
    for event in events:
        with open(folder / f"{event['pid']}.jsonl", "a") as sink:
            sink.write(json.dumps(event) + "\n")


def test_a_hung_pair_spins_from_its_start_to_its_reaping_and_the_rates_are_split_by_it(tmp_path) -> None:
    events = [{"event": "run", "t": 100.0, "pid": 1}, {"event": "job_built", "t": 110.0, "pid": 1}]
    # worker 7: a pair every 0.1 s from 10 s to 20 s after the run; worker 8: pairs at 10 s, then one that hangs
    # from 12 s until the supervisor reaps it at 15 s
    events += [{"event": "pair", "t": 110.0 + k / 10, "pid": 7} for k in range(100)]
    events += [{"event": "pair", "t": 110.0, "pid": 8}, {"event": "pair", "t": 112.0, "pid": 8},
               {"event": "pair", "t": 113.0, "pid": 9, "replay": True},
               {"event": "timeout", "t": 114.5, "pid": 1, "child": 8},
               {"event": "reaped", "t": 115.0, "pid": 1, "child": 8}]
    write(tmp_path / "trace", events)
    timeline = read(tmp_path / "trace")
    assert trace_rates.spins(timeline) == [(112.0, 115.0)]
    figures = trace_rates.rates(timeline)
    assert figures["first_pair_s"] == 10.0 and figures["builds_done_s"] == [10.0]
    assert figures["pairs"] == 102 and figures["hung_pairs"] == 1 and figures["spinning_s"] == 3.0
    spinning = figures["pairs_per_s_by_spinning"]
    # 12-15 s: worker 7's 30 pairs and the hung one, which starts the spinning (the replay is not counted)
    assert spinning["1"] == {"seconds": 3.0, "pairs_per_s": round(31 / 3, 1)}
    # 10-12 s and 15-19 s (whole seconds up to the last pair at 19.9 s): 60 of worker 7's pairs, 1 of worker 8's
    assert spinning["0"] == {"seconds": 6.0, "pairs_per_s": round(61 / 6, 1)}
    # all 102 pairs at that rate
    assert figures["pairs_at_quiet_rate_s"] == round(102 / (61 / 6), 1) == 10.0


def test_a_folder_without_a_traced_run_or_a_missing_profile_is_one_error_line(tmp_path) -> None:
    root = Path(__file__).parents[2]
    write(tmp_path / "trace", [{"event": "run", "t": 1.0, "pid": 1}])  # a run that started no pair
    for args in (["--trace", str(tmp_path / "none")], ["--trace", str(tmp_path / "trace")]):
        done = subprocess.run([sys.executable, str(root / "bench" / "trace_rates.py"), *args], capture_output=True,
                              text=True, cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.stderr.strip().startswith("trace_rates.py: error:") and "no traced run" in done.stderr


def test_windows_count_pairs_and_replays_and_problems_get_their_jobs_pairs_and_seconds(tmp_path) -> None:
    events = [{"event": "run", "t": 100.0, "pid": 1},
              {"event": "job_built", "t": 104.0, "pid": 1, "problem": "level1/a"},
              {"event": "job_built", "t": 131.0, "pid": 1, "problem": "level1/b"}]
    # worker 7: a job of level1/a (the original, then mutant m1 twice, 0.5 s each), then a job of level1/b
    # (mutant m2, a replay of it, then its last pair, cut by the worker's exit one second later)
    events += [{"event": "job", "t": 105.0, "pid": 7},
               {"event": "pair", "t": 105.0, "pid": 7, "variant": "original"},
               {"event": "pair", "t": 105.5, "pid": 7, "variant": "m1"},
               {"event": "pair", "t": 106.0, "pid": 7, "variant": "m1"},
               {"event": "job", "t": 132.0, "pid": 7},
               {"event": "pair", "t": 132.0, "pid": 7, "variant": "m2", "replay": True},
               {"event": "pair", "t": 132.25, "pid": 7, "variant": "m2"},
               {"event": "exit", "t": 133.25, "pid": 7}]
    events += [{"event": "job", "t": 106.0, "pid": 8}, {"event": "pair", "t": 106.5, "pid": 8, "variant": "m1"},
               {"event": "exit", "t": 107.0, "pid": 8}]  # worker 8: one pair of level1/a, 0.5 s
    write(tmp_path / "trace", events)
    timeline = read(tmp_path / "trace")
    assert trace_rates.windows(timeline, 10.0) == [
        {"from_s": 0.0, "pairs_per_s": 0.4, "replays_per_s": 0.0, "workers": 2},
        {"from_s": 10.0, "pairs_per_s": 0.0, "replays_per_s": 0.0, "workers": 0},
        {"from_s": 20.0, "pairs_per_s": 0.0, "replays_per_s": 0.0, "workers": 0},
        {"from_s": 30.0, "pairs_per_s": 0.1, "replays_per_s": 0.1, "workers": 1}]
    table = trace_rates.by_problem(timeline, {"m1": "level1/a", "m2": "level1/b"})
    # level1/a: the original's 0.5 s, m1's 0.5 s, m1's second pair until the next job's mark (26 s), worker 8's 0.5 s
    assert table["level1/a"] == {"pairs": 4, "pair_s": 27.5, "ms_per_pair": 6875.0, "replays": 0, "replay_s": 0.0,
                                 "built_s": 4.0}
    assert table["level1/b"] == {"pairs": 1, "pair_s": 1.0, "ms_per_pair": 1000.0, "replays": 1, "replay_s": 0.2,
                                 "built_s": 31.0}
    assert list(table) == ["level1/a", "level1/b"]  # by pair seconds, most first


def test_a_mutants_folder_without_mutants_is_one_error_line(tmp_path) -> None:
    root = Path(__file__).parents[2]
    write(tmp_path / "trace", [{"event": "run", "t": 1.0, "pid": 1}, {"event": "pair", "t": 2.0, "pid": 7,
                                                                       "variant": "original"}])
    done = subprocess.run([sys.executable, str(root / "bench" / "trace_rates.py"), "--trace", str(tmp_path / "trace"),
                           "--mutants", str(tmp_path / "none")], capture_output=True, text=True, cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("trace_rates.py: error:") and "no such file" in done.stderr


def test_a_slot_s_seconds_split_by_what_its_workers_did_and_the_inputs_made_are_counted(tmp_path) -> None:
    # one slot (thread 5 of the run's process 1): worker 7 sent at 0 s, pairs at 1-3 s, crashes at 3.5 s; worker 8
    # sent at 4 s, pairs at 4.5-6 s, hangs, timed out; worker 9 sent at 9 s, pairs at 9.5-10 s, then nothing to run
    # until the other slot's last pair at 12 s
    events = [{"event": "run", "t": 0.0, "pid": 1, "tid": 1}]
    for child, sent, first, last, end in ((7, 0.0, 1.0, 3.0, "fatal"), (8, 4.0, 4.5, 6.0, "timeout"),
                                          (9, 9.0, 9.5, 10.0, None)):
        events += [{"event": "send", "t": sent, "pid": 1, "tid": 5, "child": child},
                   {"event": "pair", "t": first, "pid": child}, {"event": "pair", "t": last, "pid": child}]
        if end:
            events.append({"event": end, "t": last + 0.5, "pid": 1, "tid": 5, "child": child})
    events += [{"event": "send", "t": 11.0, "pid": 1, "tid": 6, "child": 10}, {"event": "pair", "t": 12.0, "pid": 10},
               {"event": "inputs", "t": 4.2, "pid": 8, "seconds": 0.25}, {"event": "inputs", "t": 9.2, "pid": 9,
                                                                           "seconds": 0.5}]
    write(tmp_path / "trace", events)
    timeline = read(tmp_path / "trace")
    assert trace_rates.slots(timeline) == {"slot_s": 13.0, "pairs_s": 4.0, "to_first_pair_s": 3.0,
                                           "after_crash_s": 1.0, "after_hang_s": 3.0, "other_s": 2.0}
    assert trace_rates.inputs_made(timeline) == {"count": 2, "seconds": 0.8}


def test_a_span_without_a_pair_started_anywhere_is_a_standstill_with_the_faults_before_it(tmp_path) -> None:
    events = [{"event": "run", "t": 100.0, "pid": 1}]
    # pairs every 0.5 s from 10 s to 20 s and from 25 s to 30 s; a crash at 18 s and a timeout at 19.5 s; a
    # deadline lengthened twice for the same pair
    events += [{"event": "pair", "t": 110.0 + k / 2, "pid": 7} for k in range(21)]
    events += [{"event": "pair", "t": 125.0 + k / 2, "pid": 7} for k in range(11)]
    events += [{"event": "fatal", "t": 118.0, "pid": 1, "child": 5}, {"event": "timeout", "t": 119.5, "pid": 1,
                                                                       "child": 6},
               {"event": "fatal", "t": 112.0, "pid": 1, "child": 4}]  # more than 5 s before: not counted
    events += [{"event": "stalled", "t": 121.0 + k, "pid": 1, "variant": "m", "input": "i"} for k in range(2)]
    # the GPU resumes with a crash 0.3 s before the next pair; the probe was late 3.5 s in the span, 0.5 s before it
    events += [{"event": "fatal", "t": 124.7, "pid": 1, "child": 8},
               {"event": "gpu_stall", "t": 124.0, "pid": 9, "began": 120.5, "seconds": 3.5},
               {"event": "gpu_stall", "t": 109.0, "pid": 9, "began": 108.5, "seconds": 0.5}]
    write(tmp_path / "trace", events)
    still = trace_rates.standstills(read(tmp_path / "trace"))
    assert still == {"spans": [{"from_s": 20.0, "seconds": 5.0, "crashes_before": 1, "timeouts_before": 1,
                                "ended_by": {"event": "fatal", "offset_s": -0.3}, "gpu_stall_s": 3.5}],
                     "seconds": 5.0, "ended_by_a_fault": 1, "deadlines_lengthened": 1}
