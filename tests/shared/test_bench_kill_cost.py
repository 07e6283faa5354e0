"""bench/kill_cost.py: its arguments on the CPU; a kill and a bystander beside a spinning kernel on a GPU (gpu)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from bench import kill_cost  # by its name: spawned processes import it again

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "bench" / "kill_cost.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_help_runs_and_bad_values_are_one_error_line() -> None:
    assert run("--help").returncode == 0
    done = run("--repeat", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--repeat and --launches must be ≥ 1" in done.stderr


def test_the_summary_keeps_every_value() -> None:
    assert kill_cost.summary([0.5, 0.1, 0.3]) == {"median_s": 0.3, "max_s": 0.5, "all_s": [0.5, 0.1, 0.3]}


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the message of a machine without a GPU")
def test_without_a_gpu_it_says_so_in_one_line() -> None:
    done = run("--repeat", "1")
    assert done.returncode == 1 and done.stderr.strip() == (
        "kill_cost.py: error: needs a CUDA device (torch.cuda.is_available() is False)")


@pytest.mark.gpu
def test_a_spinning_worker_is_killed_and_a_bystander_still_runs_beside_it() -> None:
    context = multiprocessing.get_context("spawn")
    assert 0 < kill_cost.kill_seconds(context, True, 0.2) < 60
    assert 0 < kill_cost.context_seconds(context, 1) < 60
    rates = kill_cost.bystander_rates(context, 1, 4, 0.5)
    assert set(rates) == {"sync", "pair"} and all(rate > 0 for rate in rates.values())
