"""The fused evidence kernels: built by nvcc (CI has nvcc, no GPU), and on a GPU the same evidence as the
torch version: counts, grid counts and hulls bitwise, statistics up to the order of summation."""

from __future__ import annotations

import ctypes
import math
from dataclasses import fields

import numpy as np
import pytest
import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import ErrorEvidence
from oracleaudit.execution import evidence_kernels
from oracleaudit.execution.evidence_kernels import SUB_BINS
from oracleaudit.execution.measure import measure
from tests.shared.test_evidence import TOLERANCES, random_case

STATISTICS = ("l2_diff", "l2_ref", "cosine", "max_abs", "max_rel", "rmse", "rel_l1")


@pytest.mark.nvcc
def test_the_kernels_build_for_sm_90_and_the_library_loads_with_matching_constants():
    path = evidence_kernels.build("sm_90")
    assert path.is_file() and path.stat().st_size > 0
    assert evidence_kernels.build("sm_90") == path  # the second call finds it in the cache
    lib = ctypes.CDLL(str(path))
    assert lib.oa_max_grid() == evidence_kernels.MAX_GRID
    assert lib.oa_sub_bins() == SUB_BINS
    assert evidence_kernels.Library(path).workspace_words > 134_000  # the bins cover every float64 binade


def test_an_unknown_engine_is_refused():
    with pytest.raises(OracleAuditError, match="engine"):
        measure(torch.ones(3), torch.ones(3), engine="fast")


def test_the_fused_engine_is_refused_where_it_does_not_apply():
    with pytest.raises(OracleAuditError, match="fused evidence kernels"):
        measure(torch.ones(3), torch.ones(3), engine="fused")  # a CPU tensor


def assert_same_evidence(fused: ErrorEvidence, reference: ErrorEvidence) -> None:
    for f in fields(ErrorEvidence):
        a, b = getattr(fused, f.name), getattr(reference, f.name)
        if f.name in STATISTICS and a is not None and b is not None:
            assert a == pytest.approx(b, rel=1e-12, abs=1e-300, nan_ok=True), f.name
        elif isinstance(a, np.ndarray):
            assert np.array_equal(a, b), f.name
        else:
            assert a == b, f.name


def cases(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        out, ref = random_case(rng)
        yield out.cuda(), ref.cuda()
    # larger outputs: an fp32 kernel's noise against fp32 and fp64 references, and an error growing with |ref|
    # (every point on the Pareto front: more candidates than one transfer holds)
    g = torch.Generator().manual_seed(seed)
    ref64 = torch.randn(300_001, generator=g, dtype=torch.float64)
    out = (ref64 * (1 + 3e-7 * torch.randn(300_001, generator=g, dtype=torch.float64))).float()
    yield out.cuda(), ref64.float().cuda()
    yield out.cuda(), ref64.cuda()
    ref = torch.linspace(1, 2, 10_000, dtype=torch.float64)
    yield (ref + 1e-3 * ref ** 2).cuda(), ref.cuda()


@pytest.mark.gpu
def test_fused_evidence_equals_the_torch_version_on_the_gpu():
    for out, ref in cases(41, 120):
        fused = measure(out, ref, engine="fused")
        assert_same_evidence(fused, measure(out, ref, engine="torch"))
        common = torch.promote_types(out.dtype, ref.dtype)
        for atol, rtol in [(a, r) for a in TOLERANCES for r in TOLERANCES[::3]]:
            if fused.is_exact(atol, rtol):
                assert fused.allclose(atol, rtol) == torch.allclose(out.to(common), ref.to(common), rtol=rtol,
                                                                    atol=atol)


@pytest.mark.gpu
def test_fused_evidence_is_bitwise_deterministic():
    for out, ref in cases(43, 20):
        first, second = measure(out, ref, engine="fused"), measure(out.clone(), ref.clone(), engine="fused")
        assert first == second


@pytest.mark.gpu
def test_more_candidates_than_the_kernels_keep_fall_back_to_the_torch_filter(monkeypatch):
    ref = torch.linspace(1, 2, 5_000, dtype=torch.float64, device="cuda")
    out = ref + 1e-3 * ref ** 2  # d grows with r: every point beats every lower bin
    monkeypatch.setattr(evidence_kernels, "CAPACITY", 100)
    monkeypatch.setattr(evidence_kernels, "FIRST_PAIRS", 10)
    assert evidence_kernels.library().run(out, ref, (1e-3,)).candidates is None
    assert_same_evidence(measure(out, ref, engine="fused"), measure(out, ref, engine="torch"))


@pytest.mark.gpu
def test_candidates_up_to_the_host_bound_are_finished_on_the_cpu_and_more_on_the_gpu_alike(monkeypatch):
    ref = torch.linspace(1, 2, 5_000, dtype=torch.float64, device="cuda")
    out = ref + 1e-3 * ref ** 2  # d grows with r: every point beats every lower bin
    monkeypatch.setattr(evidence_kernels, "FIRST_PAIRS", 10)
    want = measure(out, ref, engine="torch")
    for bound, device in ((10_000, "cpu"), (100, "cuda")):
        monkeypatch.setenv(evidence_kernels.HOST_PAIRS_ENV, str(bound))
        raw = evidence_kernels.library().run(out, ref, (1e-3,))
        assert raw.candidates is not None and raw.candidates[0].device.type == device, bound
        assert_same_evidence(measure(out, ref, engine="fused"), want)


def test_a_larger_comparison_brings_more_candidates_back_in_its_one_transfer(monkeypatch):
    monkeypatch.delenv(evidence_kernels.HOST_PAIRS_ENV, raising=False)
    first = evidence_kernels.first_pairs
    assert first(1_000, 1_000) == 1_000  # every element fits
    assert first(100_000, 100_000) == evidence_kernels.FIRST_PAIRS
    assert first(4_194_304, evidence_kernels.CAPACITY) == 65_536  # 1 in 64: a rounded fp32 output's ~1.1%
    assert first(1 << 30, evidence_kernels.CAPACITY) == evidence_kernels.HOST_PAIRS  # never past the host bound
    monkeypatch.setenv(evidence_kernels.HOST_PAIRS_ENV, "4096")
    assert first(4_194_304, evidence_kernels.CAPACITY) == 4_096


def test_the_host_bound_comes_from_the_environment_and_is_never_below_the_first_transfer(monkeypatch):
    monkeypatch.delenv(evidence_kernels.HOST_PAIRS_ENV, raising=False)
    assert evidence_kernels.host_pairs() == evidence_kernels.HOST_PAIRS
    monkeypatch.setenv(evidence_kernels.HOST_PAIRS_ENV, "100000")
    assert evidence_kernels.host_pairs() == 100_000
    monkeypatch.setenv(evidence_kernels.HOST_PAIRS_ENV, "5")  # below FIRST_PAIRS: no second-transfer tier
    assert evidence_kernels.host_pairs() == evidence_kernels.FIRST_PAIRS
    monkeypatch.setenv(evidence_kernels.HOST_PAIRS_ENV, "many")
    with pytest.raises(OracleAuditError, match="ORACLEAUDIT_HOST_HULL_PAIRS must be an integer, got 'many'"):
        evidence_kernels.host_pairs()


@pytest.mark.gpu
def test_a_lone_error_where_the_reference_is_zero_is_a_hull_point():
    ref = torch.tensor([0.0, 1.0], dtype=torch.float64, device="cuda")
    out = torch.tensor([0.5, 1.0], dtype=torch.float64, device="cuda")
    fused = measure(out, ref, engine="fused")
    assert fused.hull_r.tolist() == [0.0] and fused.hull_d.tolist() == [0.5]
    assert_same_evidence(fused, measure(out, ref, engine="torch"))


@pytest.mark.gpu
def test_the_statistics_and_flags_of_non_finite_values_match():
    ref = torch.tensor([1.0, -2.0, math.inf, math.nan, 0.0, 3.4e38, 5.0], device="cuda")
    out = torch.tensor([1.0, -2.5, math.inf, 1.0, math.nan, -3.4e38, 0.0], device="cuda")
    assert_same_evidence(measure(out, ref, engine="fused"), measure(out, ref, engine="torch"))
    zeros = torch.zeros(1000, device="cuda")
    fused = measure(zeros, torch.ones(1000, device="cuda"), engine="fused")
    assert fused.all_zero_out and fused.cosine is None and fused.l2_diff == pytest.approx(math.sqrt(1000))


@pytest.mark.gpu
def test_comparisons_finished_on_the_gpu_run_side_by_side_and_give_what_each_gives_alone(monkeypatch):
    from oracleaudit.execution import measure as measuring

    g = torch.Generator(device="cuda").manual_seed(7)
    ref64 = torch.randn(400_000, dtype=torch.float64, device="cuda", generator=g)
    scaled = (ref64.float() * 1.1).float()  # an error growing with |ref|: every element a candidate
    rounded = ref64.float()  # few candidates: finished on the host with the transfer
    items = [(scaled, ref64.float()), (rounded, ref64), (scaled, ref64), (scaled * 3, ref64)]
    alone = [measure(out, ref, engine="fused") for out, ref in items]
    batches = []
    side_by_side = measuring._side_by_side
    monkeypatch.setattr(measuring, "_side_by_side", lambda calls: batches.append(len(calls)) or side_by_side(calls))
    together, _ = measuring.measure_many(items, engine="fused")
    assert batches == [3]  # the three all-candidate comparisons, the rounded one finished before them
    for got, want in zip(together, alone):
        assert got == want
