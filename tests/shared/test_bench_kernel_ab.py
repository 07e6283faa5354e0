"""The CPU parts of bench/kernel_ab.py: its cases, what it compares between two versions of the evidence kernels,
that both versions it builds compile with nvcc, and its refusal without a GPU."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oracleaudit.execution.evidence_kernels import MAX_GRID, SUB_BINS, Raw

ROOT = Path(__file__).parents[2]
spec = importlib.util.spec_from_file_location("kernel_ab", ROOT / "bench" / "kernel_ab.py")
kernel_ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel_ab)


def raw(stats: list[float], candidates: tuple[list[float], list[float]] | None) -> Raw:
    pairs = None if candidates is None else tuple(torch.tensor(c, dtype=torch.float64) for c in candidates)
    return Raw([1, 0, 0, 0, 0, 0, 3, 4], [2, 4], stats, False, pairs)


def test_candidates_in_another_order_are_the_same_result_and_a_last_bit_of_a_statistic_is_not() -> None:
    first = raw([1.0, 2.0], ([1.0, 3.0, 2.0], [0.5, 0.25, 0.75]))
    shuffled = raw([1.0, 2.0], ([2.0, 1.0, 3.0], [0.75, 0.5, 0.25]))
    assert kernel_ab.result(first) == kernel_ab.result(shuffled)
    nudged = raw([1.0, float(torch.nextafter(torch.tensor(2.0, dtype=torch.float64),
                                              torch.tensor(3.0, dtype=torch.float64)))],
                 ([1.0, 3.0, 2.0], [0.5, 0.25, 0.75]))
    assert kernel_ab.result(first) != kernel_ab.result(nudged)
    assert kernel_ab.result(raw([1.0, 2.0], None)) != kernel_ab.result(first)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cases_are_an_fp32_output_and_its_reference_in_the_comparison_dtype(dtype: torch.dtype) -> None:
    out, ref = kernel_ab.case(10_000, "scaled", dtype, seed=1)
    assert out.dtype == ref.dtype == dtype and out.shape == ref.shape == (10_000,)
    assert torch.equal(out, out.float().to(dtype))  # an fp32 output, whatever the comparison dtype
    assert torch.allclose(out.double(), ref.double() * 1.001, rtol=1e-6)
    garbage, ref = kernel_ab.case(10_000, "garbage", dtype, seed=2)
    assert garbage.isnan().any() and garbage.isinf().any() and (garbage == 0).any() and (ref == 0).any()
    noisy, ref = kernel_ab.case(10_000, "noise", dtype, seed=0)
    assert ((noisy - ref).abs() <= 1e-5 * ref.abs()).all() and not torch.equal(noisy, ref)
    if dtype == torch.float32:  # against the fp32 reference, a share of the elements match exactly
        assert (noisy == ref).float().mean() > 0.2


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_kernels_of_this_tree_and_of_head_build_and_load(tmp_path: Path) -> None:
    head = subprocess.run(["git", "show", f"HEAD:{kernel_ab.SOURCE}"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    for name, text in (("old", head.stdout), ("new", (ROOT / kernel_ab.SOURCE).read_text())):
        library = kernel_ab.build(text, tmp_path, name, "sm_90")
        assert (int(library.lib.oa_max_grid()), int(library.lib.oa_sub_bins())) == (MAX_GRID, SUB_BINS)


def test_without_a_gpu_it_says_so_in_one_line_and_exits_2() -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_ab.py")], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 2
    assert done.stderr.strip() == "kernel_ab.py: needs a CUDA device"


@pytest.mark.parametrize("text, values", [("4096", [4096]), ("1,65536", [1, 65536])])
def test_sizes_are_comma_separated_counts(text: str, values: list[int]) -> None:
    assert kernel_ab.sizes(text) == values


@pytest.mark.parametrize("text", ["4k", "0,10", ""])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        kernel_ab.sizes(text)


def test_the_baseline_is_a_file_where_base_names_one_else_a_commit_else_nothing(tmp_path: Path) -> None:
    kept = tmp_path / "base.cu"
    kept.write_text("__global__ void k() {}\n")
    assert kernel_ab._base_source(str(kept)) == "__global__ void k() {}\n"
    assert kernel_ab._base_source(str(tmp_path / "absent.cu")) is None  # neither a file nor a commit
    head = subprocess.run(["git", "show", f"HEAD:{kernel_ab.SOURCE}"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:
        assert kernel_ab._base_source("HEAD") == head.stdout
