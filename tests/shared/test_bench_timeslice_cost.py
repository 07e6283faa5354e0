"""bench/timeslice_cost.py: its arguments and table on the CPU; the processes sharing a GPU on one (gpu)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from bench import timeslice_cost  # by its name: spawned processes import it again

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "bench" / "timeslice_cost.py"


def test_the_table_adds_the_processes_rates_and_compares_each_count_with_the_first() -> None:
    runs = {1: {"sync": [(1000, 2.0)], "busy": {"sync": 0.25}},
            4: {"sync": [(300, 2.0), (200, 2.0), (250, 2.5), (250, 2.0)], "busy": {"sync": 0.9}}}
    table = timeslice_cost.summarize(runs, ["sync"])
    assert table["sync"] == [
        {"procs": 1, "per_s": 500.0, "ms_each": 2.0, "busy": 0.25, "over_first": 1.0},
        {"procs": 4, "per_s": 475.0, "ms_each": 8.667, "busy": 0.9, "over_first": 0.95},
    ]


def test_counts_and_workloads_are_checked() -> None:
    assert timeslice_cost._counts("8,1,8,2") == [1, 2, 8]
    assert timeslice_cost._workloads("pair,sync,pair") == ["pair", "sync"]
    assert timeslice_cost._workloads("gapped,sync") == ["gapped", "sync"]
    for bad in ("0,2", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            timeslice_cost._counts(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="workloads are"):
        timeslice_cost._workloads("sync,nap")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_help_runs_and_bad_values_are_one_error_line() -> None:
    assert run("--help").returncode == 0
    done = run("--seconds", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr and "--seconds must be > 0" in done.stderr
    done = run("--gap-us", "-1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--gap-us and --host-us must be ≥ 0" in done.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the message of a machine without a GPU")
def test_without_a_gpu_it_says_so_in_one_line() -> None:
    done = run("--procs", "1", "--seconds", "0.1")
    assert done.returncode == 1 and done.stderr.strip() == (
        "timeslice_cost.py: error: needs a CUDA device (torch.cuda.is_available() is False)")


@pytest.mark.gpu
def test_two_processes_share_the_gpu_and_each_counts_its_round_trips() -> None:
    names = ["sync", "pair", "batch", "gapped"]
    runs = {n: timeslice_cost.measure(n, names, 0.5, 4, 16, batch=3, gap_us=5, host_us=100) for n in (1, 2)}
    assert [len(runs[n]["sync"]) for n in (1, 2)] == [1, 2]
    assert all(count > 10 and spent >= 0.5 for n in (1, 2) for name in names for count, spent in runs[n][name])
    assert all(count % 3 == 0 for count, _ in runs[1]["batch"])  # counted in pairs
    table = timeslice_cost.summarize(runs, ["sync", "pair"])
    assert [row["procs"] for row in table["pair"]] == [1, 2] and table["pair"][0]["over_first"] == 1.0
