"""bench/restart_cost.py: its arguments, and the cutting of a traced timeline into a restart's segments (CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import restart_cost

ROOT = Path(__file__).parents[2]


def event(name: str, t: float, pid: int, tid: int = 1, **fields) -> dict:
    return {"event": name, "t": t, "pid": pid, "tid": tid, **fields}


def timeline() -> list[dict]:
    """Slot 1 starts worker 10, which crashes; worker 11 (started at the fault) and 12 (started when 11 was
    taken) follow. Slot 2's only worker, 20, is its first. The supervisor is process 1."""
    events = [event("start", 0.0, 1, child=10), event("start", 0.0, 1, tid=2, child=20),
              event("send", 0.5, 1, child=10), event("kill", 3.0, 1, child=10), event("reaped", 3.1, 1, child=10),
              event("start", 3.1, 1, child=11),
              event("main", 3.2, 11), event("init", 3.5, 11), event("ready", 4.1, 11),
              event("send", 3.2, 1, child=11), event("start", 3.2, 1, child=12),
              event("job", 4.1, 11), event("built", 4.3, 11), event("pair", 5.0, 11), event("pair", 6.0, 11),
              event("main", 3.3, 12), event("init", 3.4, 12), event("ready", 3.6, 12),
              event("send", 7.0, 1, child=12), event("job", 7.0, 12), event("built", 7.1, 12)]
    return sorted(events, key=lambda e: e["t"])


def test_restart_workers_are_cut_into_segments_and_a_slot_s_first_worker_is_left_out() -> None:
    summary = restart_cost.summarise(timeline())
    assert summary["workers"] == 4 and summary["restart_workers"] == 2 and summary["restart_workers_used"] == 2
    assert summary["waited"]["total_s"] == pytest.approx(0.9)  # 11: sent at 3.2, Ready at 4.1; 12 was up
    assert summary["idle"]["total_s"] == pytest.approx(3.4)  # 12: Ready at 3.6, its job at 7.0
    assert summary["fork"]["n"] == 2 and summary["fork"]["mean_s"] == pytest.approx(0.1)
    assert summary["context"]["median_s"] == pytest.approx(0.4)  # 0.6 and 0.2
    assert summary["prepare"] == {"n": 1, "total_s": 0.7, "mean_s": 0.7, "median_s": 0.7}  # the first pair
    assert summary["kill"]["n"] == 1 and summary["kill"]["mean_s"] == pytest.approx(0.1)  # any worker's


def test_help_runs_and_a_bad_arm_is_one_error_line(tmp_path) -> None:
    script = [sys.executable, str(ROOT / "bench" / "restart_cost.py")]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    assert subprocess.run([*script, "--help"], capture_output=True, cwd=ROOT, env=env).returncode == 0
    done = subprocess.run([*script, "--work", str(tmp_path), "--arms", "w8:8"], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    assert done.returncode == 2 and "an arm is NAME:WORKERS:SPARES, got 'w8:8'" in done.stderr
    done = subprocess.run([*script, "--work", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 2 and "no mutants folder" in done.stderr and "Traceback" not in done.stderr


def test_hung_kills_are_the_timed_out_workers_and_the_pairs_started_meanwhile_are_counted() -> None:
    """Worker 30's pair timed out at 10 s and its teardown took until 14 s, while one pair started (0.25 a
    second); over the whole 20 s traced, 6 pairs started (0.3 a second). Worker 40, killed by the run's stop
    inside its pair, is no hang: the supervisor marked no timeout for it."""
    events = [event("start", 0.0, 1, child=30), event("start", 0.0, 1, tid=2, child=40),
              *(event("pair", t, 30) for t in (1.0, 2.0, 3.0)), event("pair", 12.0, 40),
              event("timeout", 10.0, 1, child=30), event("kill", 10.0, 1, child=30), event("reaped", 14.0, 1, child=30),
              event("pair", 15.0, 40), event("pair", 16.0, 40),
              event("kill", 19.0, 1, tid=2, child=40), event("reaped", 20.0, 1, tid=2, child=40)]
    events.sort(key=lambda e: e["t"])
    hung = restart_cost.stalls(events)
    assert hung == {"kills": 1, "reap_s": 4.0, "reap_median_s": 4.0, "windows_union_s": 4.0, "traced_s": 20.0,
                    "pairs_started_per_s": 0.3, "pairs_started_per_s_while_reaping": 0.25}
    unmarked = [e for e in events if e["event"] != "timeout"]  # an older trace: killed inside a pair, no Fatal
    assert restart_cost.stalls(unmarked)["kills"] == 2
    assert restart_cost.stalls(unmarked, until=18.0)["kills"] == 1  # the stop's kill left out
