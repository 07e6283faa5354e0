"""bench/hull_cost.py: its arguments and table on the CPU; both hull versions side by side on a GPU (gpu)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import hull_cost
from oracleaudit.execution.measure import FINE_FILTER_ABOVE

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "bench" / "hull_cost.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_table_adds_the_processes_rates_and_compares_the_versions() -> None:
    runs = {("compacting", "hull"): [(10, 2.0), (20, 2.0)], ("masked", "hull"): [(30, 2.0), (30, 3.0)],
            ("compacting", "mixed"): [(100, 2.0)], ("masked", "mixed"): [(150, 2.0)],
            ("one-sort", "hull"): [(45, 3.0)]}
    row = hull_cost.summarize(runs)
    assert row["hull_one-sort_over_compacting"] == 1.0 and "mixed_one-sort_over_compacting" not in row
    assert row["hull_compacting_per_s"] == 15.0 and row["hull_masked_per_s"] == 25.0
    assert row["hull_compacting_ms_each"] == 150.0 and row["hull_masked_ms_each"] == 83.33
    assert row["hull_masked_over_compacting"] == round(25 / 15, 3) and row["mixed_masked_over_compacting"] == 1.5


def test_one_sort_finds_the_front_of_the_two_sorts_and_the_same_hull() -> None:
    """Runs of equal r (rounded values, repeats, zeros) are where one sort could differ from two."""
    import torch

    from oracleaudit.execution import measure

    generator = torch.Generator().manual_seed(9)
    r = torch.rand(30_000, dtype=torch.float64, generator=generator).mul(100).round().div(100)
    r[::11] = 0.0
    d = torch.rand(30_000, dtype=torch.float64, generator=generator).mul(1000).round().add(1).mul(r + 1e-3)
    r, d = torch.cat([r, r[:500]]), torch.cat([d, d[:500]])  # repeated points too
    two_r, two_d, two = measure._sorted_front(r, d)
    one_r, one_d, one = hull_cost._one_sort_front(r, d)
    assert torch.equal(two_r[two], one_r[one]) and torch.equal(two_d[two], one_d[one])
    assert int(one.sum()) < len(torch.unique(r))  # not every run of equal r is on the front
    for dtype in (torch.float32, torch.float64):
        want, got = measure._front_hull_torch(r, d, dtype), hull_cost.one_sort_front_hull_torch(r, d, dtype)
        assert hull_cost.same_hull(got, want)


@pytest.mark.parametrize("huge", [False, True])
def test_the_masked_passes_give_the_compacting_passes_hull_to_the_bit(huge: bool, monkeypatch) -> None:
    """On the CPU (the same tensor operations as on a GPU): a scaled output, its every element a candidate, of
    normal values and of huge ones (r * d past 1e300: convex_chain's passes scale both axes first)."""
    import torch

    from oracleaudit.execution import measure

    monkeypatch.setattr(measure, "DEVICE_PASSES_ABOVE", 0)
    ref = torch.randn(50_000, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) * (1e155 if huge else 1)
    out = (ref.float() * 1.1).double() if not huge else ref * 1.1
    r, d = measure._bin_filter(ref.abs(), (out - ref).abs())
    assert len(r) > 10_000
    for dtype in (torch.float32, torch.float64):
        want = measure._front_hull_torch(r, d, dtype)
        got = hull_cost.masked_front_hull_torch(r, d, dtype)
        assert hull_cost.same_hull(got, want)


def test_help_runs_and_bad_values_are_one_error_line() -> None:
    assert run("--help").returncode == 0
    for bad in (("--seconds", "0"), ("--every", "0"), ("--procs", "0,1"), ("--versions", "masked"),
                ("--versions", "compacting"), ("--versions", "compacting,fast")):
        done = run(*bad)
        assert done.returncode == 2 and "Traceback" not in done.stderr and "error:" in done.stderr


def test_the_numpy_part_times_the_hull_with_and_without_its_pre_filter_on_the_cpu(tmp_path) -> None:
    out = tmp_path / "numpy.json"
    done = run("--numpy", "--elements", "600000", "--repeat", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]  # a pre-filter that changed the hull is an error
    figures = json.loads(out.read_text())
    assert figures["candidates"] > FINE_FILTER_ABOVE  # the pre-filter runs
    assert figures["filtered_ms"] > 0 and figures["unfiltered_ms"] > 0 and figures["unfiltered_over_filtered"] > 0


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the message of a machine without a GPU")
def test_without_a_gpu_it_says_so_in_one_line() -> None:
    done = run("--procs", "1", "--seconds", "0.1")
    assert done.returncode == 1 and done.stderr.strip() == (
        "hull_cost.py: error: needs a CUDA device (torch.cuda.is_available() is False)")


@pytest.mark.gpu
def test_both_versions_give_one_hull_and_are_timed_side_by_side(tmp_path) -> None:
    out = tmp_path / "hull_cost.json"
    done = run("--procs", "2", "--elements", "65536", "--seconds", "0.3", "--every", "2", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]  # a process whose two hulls differ exits with its error
    row = json.loads(out.read_text())["procs"]["2"]
    assert all(row[f"{w}_{v}_per_s"] > 0 for w in hull_cost.WORKLOADS for v in hull_cost.MEASURED)
    assert {f"{w}_{v}_over_compacting" for w in hull_cost.WORKLOADS for v in hull_cost.MEASURED[1:]} <= set(row)
