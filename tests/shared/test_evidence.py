"""Exact error evidence: verdicts from the evidence equal torch.allclose on the raw tensors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import DEFAULT_GRID, MAX_HULL_POINTS, ErrorEvidence, arrow_fields, grid_key
from oracleaudit.execution.measure import measure, running_max

TOLERANCES = [0.0, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 5e-2, 0.1, 0.5, 1.0, 2.0, 1e3, math.inf]


def torch_verdict(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, equal_nan: bool) -> bool:
    """torch.allclose on the operands cast to their promoted dtype (as the evidence compares them)."""
    common = torch.promote_types(out.dtype, ref.dtype)
    return torch.allclose(out.to(common), ref.to(common), rtol=rtol, atol=atol, equal_nan=equal_nan)


@np.errstate(over="ignore")
def critical_tolerances(out: torch.Tensor, ref: torch.Tensor, rng: np.random.Generator) -> list[tuple[float, float]]:
    """(atol, rtol) pairs on the edge of the verdict: for a few rtol, atol = max(d − rtol·r) over the finite
    elements, and its neighbours one float32 / float64 step away in each direction."""
    common = torch.promote_types(out.dtype, ref.dtype)
    a, b = out.to(common).double().flatten(), ref.to(common).double().flatten()
    ok = torch.isfinite(a) & torch.isfinite(b)
    d, r = (a[ok] - b[ok]).abs(), b[ok].abs()
    pairs: list[tuple[float, float]] = []
    if d.numel() == 0:
        return pairs
    for rtol in [0.0, 1e-4, 1e-2, float(rng.uniform(0, 0.1)), float(np.float32(rng.uniform(0, 1)))]:
        atol = float((d - rtol * r).max())
        if not atol > 0:
            continue
        for x in (atol, float(np.nextafter(atol, 0)), float(np.nextafter(atol, math.inf)),
                  float(np.nextafter(np.float32(atol), np.float32(0))), float(np.float32(atol)),
                  float(np.nextafter(np.float32(atol), np.float32(math.inf))), atol * (1 - 1e-7), atol * (1 + 1e-7)):
            if x >= 0:
                pairs.append((x, rtol))
    # the pure-relative edge: rtol = max(d / r)
    pos = r > 0
    if bool(pos.any()):
        rtol = float((d[pos] / r[pos]).max())
        for x in (rtol, float(np.nextafter(rtol, 0)), float(np.nextafter(rtol, math.inf)),
                  float(np.nextafter(np.float32(rtol), np.float32(0))),
                  float(np.nextafter(np.float32(rtol), np.float32(math.inf)))):
            pairs.append((0.0, x))
    return pairs


def boundary_pair(ref: torch.Tensor, atol: float, rtol: float, rng: np.random.Generator) -> torch.Tensor:
    """An output whose every difference sits within a few ulps of atol + rtol·|ref| (in ref's dtype)."""
    allowed = atol + (rtol * ref).abs()
    sign = torch.from_numpy(rng.choice([-1.0, 1.0], size=ref.shape)).to(ref.dtype)
    out = ref + sign * allowed
    for _ in range(int(rng.integers(0, 3))):
        out = torch.nextafter(out, torch.full_like(out, float(rng.choice([-math.inf, math.inf]))))
    return out


def random_case(rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = [torch.float32, torch.float64][int(rng.integers(0, 2))]
    n = int(rng.choice([1, 2, 7, 64, 1000, 3001]))
    kind = rng.choice(["noise", "independent", "scaled", "boundary", "zero_ref", "zero_out", "tiny", "huge",
                       "ulps", "few_values"])
    ref = torch.from_numpy(rng.standard_normal(n)).to(dtype)
    if kind == "noise":
        out = ref + torch.from_numpy(rng.standard_normal(n) * 10.0 ** rng.uniform(-9, 0)).to(dtype)
    elif kind == "independent":
        out = torch.from_numpy(rng.standard_normal(n)).to(dtype)
    elif kind == "scaled":
        out = ref * float(rng.choice([1.0001, 0.999, 2.0, -1.0, 1 + 1e-6]))
    elif kind == "boundary":
        atol, rtol = float(rng.choice([0.0, 1e-5, 1e-4, 1e-2])), float(rng.choice([0.0, 1e-4, 1e-2, 1e-3]))
        out = boundary_pair(ref, atol, rtol, rng)
    elif kind == "zero_ref":
        ref = ref * torch.from_numpy(rng.random(n) < 0.5).to(dtype)
        out = ref + torch.from_numpy(rng.standard_normal(n) * 1e-4).to(dtype)
    elif kind == "zero_out":
        out = torch.zeros_like(ref)
    elif kind == "tiny":
        scale = 10.0 ** float(rng.uniform(-44, -36) if dtype == torch.float32 else rng.uniform(-320, -300))
        ref = ref * scale
        out = ref + torch.from_numpy(rng.standard_normal(n)).to(dtype) * scale
    elif kind == "huge":
        scale = 10.0 ** float(rng.uniform(30, 38) if dtype == torch.float32 else rng.uniform(290, 307))
        ref = ref * scale
        out = ref * (1 + torch.from_numpy(rng.standard_normal(n) * 1e-3).to(dtype))
    elif kind == "ulps":
        out = torch.nextafter(ref, torch.full_like(ref, math.inf))
    else:
        ref = torch.from_numpy(rng.integers(-3, 4, n).astype(np.float64)).to(dtype)
        out = ref + torch.from_numpy(rng.integers(-1, 2, n) * 0.5).to(dtype)
    out = out.clone()
    ref = ref.clone()
    if rng.random() < 0.3:  # NaN / Inf / overflow mixes
        for tensor in (out, ref):
            for value in (math.nan, math.inf, -math.inf):
                if rng.random() < 0.3:
                    tensor[torch.from_numpy(rng.random(n) < 0.05)] = value
        if rng.random() < 0.2 and n > 1:
            big = torch.finfo(dtype).max
            out[0], ref[0] = big, -big
    return out, ref


def assert_exact(out: torch.Tensor, ref: torch.Tensor, pairs: list[tuple[float, float]]) -> ErrorEvidence:
    evidence = measure(out, ref, expected_dtype=out.dtype)
    for atol, rtol in pairs:
        for equal_nan in (False, True):
            expected = torch_verdict(out, ref, atol, rtol, equal_nan)
            got = evidence.allclose(atol, rtol, equal_nan)
            if evidence.is_exact(atol, rtol, equal_nan):
                assert got == expected, (atol, rtol, equal_nan, evidence)
            else:
                assert not evidence.hull_complete
    return evidence


def test_allclose_from_the_evidence_equals_torch_allclose_on_random_tensors():
    rng = np.random.default_rng(20240601)
    for _ in range(300):
        out, ref = random_case(rng)
        grid = [(a, r) for a in TOLERANCES for r in TOLERANCES[::2]]
        grid += [(float(rng.uniform(0, 1e-3)), float(rng.uniform(0, 1e-2))) for _ in range(5)]
        evidence = assert_exact(out, ref, grid + critical_tolerances(out, ref, rng))
        # undecidable verdicts only where the tolerance line lies on the error line of an exactly
        # proportional error (d = |ref| for an all-zero or doubled output, 2|ref| for a negated one)
        assert all(r in (1.0, 2.0) for a, r in grid if not evidence.is_exact(a, r))


def test_the_verdict_is_exact_at_the_float_rounding_edge_of_the_tolerance():
    rng = np.random.default_rng(7)
    for dtype in (torch.float32, torch.float64):
        for atol, rtol in [(1e-4, 1e-4), (1e-2, 1e-2), (0.0, 1e-3), (1e-5, 0.0), (1e-3, 1e-5)]:
            for _ in range(10):
                ref = torch.from_numpy(rng.standard_normal(200) * 10.0 ** rng.uniform(-3, 3)).to(dtype)
                out = boundary_pair(ref, atol, rtol, rng)
                neighbours = [(atol, rtol), (float(np.nextafter(np.float32(atol), np.float32(1))), rtol),
                              (float(np.nextafter(np.float32(atol), np.float32(0))), rtol),
                              (atol, float(np.nextafter(np.float32(rtol), np.float32(1)))),
                              (atol, float(np.nextafter(np.float32(rtol), np.float32(0)))),
                              (float(np.nextafter(atol, 1)), float(np.nextafter(rtol, 0)))]
                evidence = measure(out, ref)
                assert evidence.hull_complete  # at most 200 points: all kept when needed
                for a, r in neighbours + critical_tolerances(out, ref, rng):
                    if a >= 0 and r >= 0:
                        assert evidence.allclose(a, r) == torch.allclose(out, ref, rtol=r, atol=a), (dtype, a, r)


def rounding_edge_cases(dtype: torch.dtype, count: int, seed: int):
    """Outputs where one element lies strictly below the straight line through two others (so it is not on
    the hull in real arithmetic), yet fails torch.allclose at a tolerance where those two pass, because
    atol + rtol·r rounds differently at the three points. ref < 0 < out keeps d = out − ref fine-grained."""
    rng = np.random.default_rng(seed)
    f = np.float32 if dtype == torch.float32 else np.float64
    found = 0
    while found < count:
        r = torch.tensor(np.sort(rng.uniform(0.5, 2, 3)), dtype=dtype)
        atol, rtol = float(f(rng.uniform(0, 1))), float(f(rng.uniform(1.5, 3)))
        d = atol + (rtol * r).abs()
        d[1] = torch.nextafter(d[1], torch.tensor(math.inf, dtype=dtype))
        ref, out = -r, d - r
        if not torch.equal((out - ref).abs(), d):
            continue
        rr, dd = [Fraction(float(x)) for x in r], [Fraction(float(x)) for x in d]
        if dd[1] >= dd[0] + (dd[2] - dd[0]) * (rr[1] - rr[0]) / (rr[2] - rr[0]):
            continue
        if torch.isclose(out, ref, rtol=rtol, atol=atol).tolist() != [True, False, True]:
            continue
        # filler well below the line, so the device-side filters have work to do
        fr = -torch.from_numpy(rng.uniform(0.5, 2, 2000)).to(dtype)
        fo = 0.5 * (atol + (rtol * fr).abs()) + fr
        found += 1
        yield torch.cat([fo, out, fo]), torch.cat([fr, ref, fr]), atol, rtol


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_point_below_the_hull_that_fails_by_rounding_is_kept(dtype):
    for out, ref, atol, rtol in rounding_edge_cases(dtype, 40, seed=41):
        evidence = measure(out, ref)
        assert evidence.hull_complete
        assert evidence.allclose(atol, rtol) is False and torch.allclose(out, ref, rtol=rtol, atol=atol) is False
        up = float(np.nextafter(atol, math.inf))
        assert evidence.allclose(up, rtol) == torch.allclose(out, ref, rtol=rtol, atol=up)


def test_nan_and_inf_rules_follow_torch_allclose():
    inf, nan = math.inf, math.nan
    cases = [
        ([nan, 1.0], [nan, 1.0]),  # both NaN: only with equal_nan
        ([nan, 1.0], [0.0, 1.0]),  # NaN in out only
        ([0.0, 1.0], [nan, 1.0]),  # NaN in ref only
        ([inf, 1.0], [inf, 1.0]),  # equal infinities pass
        ([inf, 1.0], [-inf, 1.0]),  # opposite infinities fail
        ([inf, 1.0], [1e30, 1.0]),  # Inf where ref is finite
        ([1e30, 1.0], [-inf, 1.0]),  # ref Inf where out is finite
        ([3e38, 1.0], [-3e38, 1.0]),  # finite, but the difference overflows
        ([nan, inf], [nan, inf]),
    ]
    for out_values, ref_values in cases:
        out, ref = torch.tensor(out_values), torch.tensor(ref_values)
        evidence = measure(out, ref)
        for atol in (0.0, 1e-4, inf):
            for rtol in (0.0, 1e-4, inf):
                for equal_nan in (False, True):
                    assert evidence.allclose(atol, rtol, equal_nan) == torch.allclose(
                        out, ref, rtol=rtol, atol=atol, equal_nan=equal_nan), (out_values, ref_values, atol, rtol)
    evidence = measure(torch.tensor([nan, nan, 0.0, inf, inf, -inf, 1.0, 3e38]),
                       torch.tensor([nan, 0.0, nan, inf, 1.0, inf, -inf, -3e38]))
    assert (evidence.n_nan_both, evidence.n_nan_out, evidence.n_nan_ref) == (1, 1, 1)
    assert (evidence.n_inf_equal, evidence.n_inf_mismatch, evidence.n_overflow) == (1, 3, 1)
    assert evidence.n == 8 and evidence.n_unequal == 7


def test_integer_and_bool_outputs_are_compared_as_torch_isclose_casts_them():
    rng = np.random.default_rng(3)
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool):
        for _ in range(20):
            if dtype == torch.bool:
                out, ref = (torch.from_numpy(rng.random(50) < 0.5) for _ in range(2))
            else:
                high = 250 if dtype == torch.uint8 else 2**40
                out = torch.from_numpy(rng.integers(0, high, 50)).to(dtype)
                ref = torch.where(torch.from_numpy(rng.random(50) < 0.5), out, out.flip(0))
            evidence = measure(out, ref)
            for atol in (0.0, 0.5, 1.0, 3.0, 1e6):
                for rtol in (0.0, 1e-7, 1e-3, 0.5):
                    assert evidence.allclose(atol, rtol) == torch.allclose(out, ref, rtol=rtol, atol=atol)
            for t in DEFAULT_GRID:
                assert evidence.within_count(t) == int(torch.isclose(out, ref, rtol=t, atol=t).sum())
    # integers that differ but round to the same float32: unequal, yet within any positive tolerance
    out, ref = torch.tensor([2**24 + 1]), torch.tensor([2**24])
    evidence = measure(out, ref)
    assert evidence.allclose(1e-9, 0.0) and not evidence.allclose(0.0, 0.0)
    assert torch.allclose(out, ref, rtol=0.0, atol=1e-9) and not torch.allclose(out, ref, rtol=0.0, atol=0.0)


def test_half_precision_outputs_replay_in_their_own_arithmetic():
    rng = np.random.default_rng(11)
    for dtype in (torch.float16, torch.bfloat16):
        for _ in range(30):
            ref = torch.from_numpy(rng.standard_normal(300)).to(dtype)
            out = (ref.float() * (1 + torch.from_numpy(rng.standard_normal(300) * 1e-2).float())).to(dtype)
            evidence = measure(out, ref)
            for atol in (0.0, 1e-3, 5e-3, 1e-2):
                for rtol in (0.0, 1e-3, 5e-3, 1e-2, 0.1):
                    if evidence.is_exact(atol, rtol):
                        assert evidence.allclose(atol, rtol) == torch.allclose(out, ref, rtol=rtol, atol=atol)
            for t in DEFAULT_GRID:
                assert evidence.within_count(t) == int(torch.isclose(out, ref, rtol=t, atol=t).sum())


def test_an_fp32_output_against_the_fp64_reference_is_compared_in_float64():
    rng = np.random.default_rng(5)
    ref64 = torch.from_numpy(rng.standard_normal(1000))
    out = (ref64 + 1e-6 * torch.from_numpy(rng.standard_normal(1000))).float()
    evidence = measure(out, ref64, expected_dtype=torch.float32)
    assert evidence.dtype_match and evidence.compare_dtype == "float64"
    for atol, rtol in [(a, r) for a in TOLERANCES for r in TOLERANCES] + critical_tolerances(out, ref64, rng):
        assert evidence.allclose(atol, rtol) == torch.allclose(out.double(), ref64, rtol=rtol, atol=atol)
    # against a float64 reference any float output is expected by default; expected_dtype checks it
    assert measure(out, ref64) == evidence
    assert not measure(out.half(), ref64, expected_dtype=torch.float32).dtype_match
    assert not measure(out, ref64.float().half()).dtype_match


def test_a_shape_mismatch_is_recorded_and_never_close():
    out, ref = torch.zeros(2, 3), torch.zeros(3, 2)
    evidence = measure(out, ref)
    assert not evidence.shape_match and evidence.dtype_match
    assert (evidence.out_shape, evidence.ref_shape) == ((2, 3), (3, 2))
    assert evidence.hull_r is None and evidence.n is None and evidence.l2_diff is None
    assert evidence.allclose(1.0, 1.0) is False
    assert evidence.fraction_within(1e-2) is None
    with pytest.raises(RuntimeError):
        torch.allclose(out, ref)  # torch raises; the evidence answers False


def test_a_dtype_mismatch_is_recorded_and_never_close():
    evidence = measure(torch.zeros(4, dtype=torch.float16), torch.zeros(4))
    assert evidence.shape_match and not evidence.dtype_match
    assert (evidence.out_dtype, evidence.ref_dtype) == ("float16", "float32")
    assert evidence.allclose(1.0, 1.0) is False and evidence.compare_dtype is None


def test_fraction_within_equals_the_direct_count_on_the_grid():
    rng = np.random.default_rng(17)
    for _ in range(60):
        out, ref = random_case(rng)
        evidence = measure(out, ref)
        for t in DEFAULT_GRID:
            direct = torch.isclose(out, ref, rtol=t, atol=t)
            assert evidence.within_count(t) == int(direct.sum())
            assert evidence.fraction_within(t) == int(direct.sum()) / out.numel()
    with pytest.raises(OracleAuditError, match="not on the evidence's tolerance grid"):
        evidence.fraction_within(3e-3)


def test_the_default_grid_runs_from_1e_7_to_0_1_with_three_points_per_decade():
    assert DEFAULT_GRID[0] == 1e-7 and DEFAULT_GRID[-1] == 0.1 and len(DEFAULT_GRID) == 19
    assert {1e-4, 1e-2, 5e-3, 1e-5, 1e-3} <= set(DEFAULT_GRID)
    assert [grid_key(t) for t in DEFAULT_GRID[:3]] == ["1e-07", "2e-07", "5e-07"]


def test_the_hull_stays_small_for_a_million_random_elements():
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(10**6, generator=generator)
    for out in (torch.randn(10**6, generator=generator), ref + 1e-4 * torch.randn(10**6, generator=generator),
                ref * (1 + 1e-3 * torch.rand(10**6, generator=generator))):
        evidence = measure(out, ref)
        assert evidence.hull_complete and 1 <= len(evidence.hull_r) <= 64
        for atol, rtol in [(1e-4, 1e-4), (1e-2, 1e-2), (0.1, 0.0), (0.0, 1e-3), (5.0, 0.0)]:
            assert evidence.allclose(atol, rtol) == torch.allclose(out, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", [1, 7, 1024, 1025, 5000, 1024 * 1024 + 3])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int64])
def test_running_max_is_cummax_exactly(n: int, dtype: torch.dtype) -> None:
    """The hull's running maximum scans rows side by side; it equals torch.cummax, a NaN carried on too."""
    generator = torch.Generator().manual_seed(n)
    x = (torch.randn(n, generator=generator, dtype=torch.float64) * 1e3).to(dtype)
    if dtype.is_floating_point and n > 2000:
        x[1500] = math.nan
    got, want = running_max(x), torch.cummax(x, 0).values
    assert got.dtype == dtype and got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())


def test_huge_float64_values_build_the_hull_without_overflow_and_stay_exact():
    """Products of coordinates near 1e160 overflow float64; the hull's turns are decided on scaled copies."""
    generator = torch.Generator().manual_seed(5)
    ref = torch.randn(5000, generator=generator, dtype=torch.float64).exp() * 1e160
    out = ref * (1 + 1e-6 * torch.randn(5000, generator=generator, dtype=torch.float64))
    out[::7] = ref[::7] * (1.5 + 0.01 * torch.rand(len(ref[::7]), generator=generator, dtype=torch.float64))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in numpy is a RuntimeWarning
        evidence = measure(out, ref)
    assert evidence.hull_complete and len(evidence.hull_r) >= 1
    for atol, rtol in [(0.0, 0.52), (0.0, 0.5), (1e150, 1e-6), (0.0, 1e-5)]:
        assert evidence.allclose(atol, rtol) == torch.allclose(out, ref, rtol=rtol, atol=atol)
    edge = float((out - ref).abs().div(ref.abs()).max())
    for rtol in (edge, float(np.nextafter(edge, 0)), float(np.nextafter(edge, 1))):
        assert evidence.allclose(0.0, rtol) == torch.allclose(out, ref, rtol=rtol, atol=0.0)


def test_an_all_zero_output_keeps_only_the_hull_and_stays_exact_off_the_hull():
    ref = torch.randn(100_000, generator=torch.Generator().manual_seed(1))
    out = torch.zeros_like(ref)
    evidence = measure(out, ref)
    assert not evidence.hull_complete and len(evidence.hull_r) <= MAX_HULL_POINTS
    assert evidence.all_zero_out and evidence.cosine is None
    near_one = [float(np.nextafter(np.float32(1), np.float32(k))) for k in (0, 2)] + [1 - 1e-7, 1 + 1e-7]
    pairs = [(a, r) for a in TOLERANCES for r in TOLERANCES + near_one]
    for atol, rtol in pairs + critical_tolerances(out, ref, np.random.default_rng(1)):
        if evidence.is_exact(atol, rtol):
            assert evidence.allclose(atol, rtol) == torch.allclose(out, ref, rtol=rtol, atol=atol)
    assert evidence.is_exact(1e-4, 1e-4) and evidence.is_exact(10.0, 0.0)
    assert not evidence.is_exact(0.0, 1.0)  # the tolerance line is the error line d = |ref| itself


def test_a_hull_with_too_many_vertices_is_thinned_with_a_bound():
    x = torch.rand(200_000, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    out = x + x.sqrt()  # d = sqrt(r): every point is a hull vertex
    evidence = measure(out, x)
    assert not evidence.hull_complete and len(evidence.hull_r) <= MAX_HULL_POINTS
    assert 0 < evidence.hull_slack < 1e-3
    pairs = [(a, r) for a in TOLERANCES for r in TOLERANCES]
    for atol, rtol in pairs + critical_tolerances(out, x, np.random.default_rng(2)):
        if evidence.is_exact(atol, rtol):
            assert evidence.allclose(atol, rtol) == torch.allclose(out, x, rtol=rtol, atol=atol)


def test_statistics_match_a_direct_float64_computation():
    rng = np.random.default_rng(23)
    ref = rng.standard_normal(1000)
    out = ref + rng.standard_normal(1000) * 1e-3
    evidence = measure(torch.from_numpy(out), torch.from_numpy(ref))
    diff = np.abs(out - ref)
    assert evidence.l2_diff == pytest.approx(np.linalg.norm(diff), rel=1e-12)
    assert evidence.l2_ref == pytest.approx(np.linalg.norm(ref), rel=1e-12)
    assert evidence.cosine == pytest.approx(out @ ref / np.linalg.norm(out) / np.linalg.norm(ref), rel=1e-12)
    assert evidence.max_abs == diff.max()
    assert evidence.max_rel == pytest.approx((diff / np.abs(ref)).max(), rel=1e-12)
    assert evidence.rmse == pytest.approx(np.sqrt(np.mean(diff**2)), rel=1e-12)
    assert evidence.rel_l1 == pytest.approx(diff.sum() / np.abs(ref).sum(), rel=1e-12)
    assert evidence.all_zero_out is False
    # statistics skip non-finite elements; undefined ones are None, never a sentinel
    evidence = measure(torch.tensor([0.0, math.nan]), torch.tensor([0.0, 1.0]))
    assert evidence.max_rel is None and evidence.rel_l1 is None and evidence.cosine is None
    assert evidence.l2_diff == 0.0 and evidence.n_nan_out == 1
    assert measure(torch.zeros(3), torch.tensor([0.0, 1.0, 0.0])).all_zero_out is True
    assert measure(torch.zeros(3), torch.zeros(3)).all_zero_out is False


def test_an_empty_output_is_close_and_fully_within():
    evidence = measure(torch.zeros(0, 4), torch.zeros(0, 4))
    assert evidence.n == 0 and evidence.allclose(0.0, 0.0) and evidence.fraction_within(1e-7) == 1.0
    assert evidence.l2_diff is None and len(evidence.hull_r) == 0


def test_rows_round_trip_through_to_row_and_from_row():
    rng = np.random.default_rng(29)
    for _ in range(20):
        out, ref = random_case(rng)
        evidence = measure(out, ref)
        row = evidence.to_row("fp32_")
        assert set(row) == {f.name for f in arrow_fields("fp32_")}
        assert ErrorEvidence.from_row(row, "fp32_") == evidence
    mismatch = measure(torch.zeros(2), torch.zeros(3))
    assert ErrorEvidence.from_row(mismatch.to_row("fp64_"), "fp64_") == mismatch
    assert ErrorEvidence.from_row({"fp64_shape_match": None}, "fp64_") is None


@pytest.mark.parametrize("atol, rtol, field", [(-1.0, 0.0, "atol"), (0.0, -1e-3, "rtol"), (math.nan, 0.0, "atol")])
def test_negative_or_nan_tolerances_are_refused_naming_the_field(atol, rtol, field):
    evidence = measure(torch.ones(3), torch.ones(3))
    with pytest.raises(OracleAuditError, match=f"{field} must be ≥ 0"):
        evidence.allclose(atol, rtol)


def test_a_bad_tolerance_grid_is_refused():
    with pytest.raises(OracleAuditError, match="tolerance_grid"):
        measure(torch.ones(3), torch.ones(3), tolerance_grid=[0.0, 1e-3])


def test_measuring_is_deterministic():
    rng = np.random.default_rng(31)
    out, ref = random_case(rng)
    assert measure(out, ref) == measure(out.clone(), ref.clone())


@pytest.mark.gpu
def test_evidence_on_cuda_equals_evidence_on_cpu():
    rng = np.random.default_rng(37)
    for _ in range(50):
        out, ref = random_case(rng)
        cpu = measure(out, ref)
        gpu = measure(out.cuda(), ref.cuda())
        assert gpu.hull_complete == cpu.hull_complete
        if cpu.hull_complete:
            assert np.array_equal(gpu.hull_r, cpu.hull_r) and np.array_equal(gpu.hull_d, cpu.hull_d)
        assert gpu.n_within == cpu.n_within
        for atol, rtol in [(a, r) for a in TOLERANCES for r in TOLERANCES[::3]]:
            if gpu.is_exact(atol, rtol):
                assert gpu.allclose(atol, rtol) == torch.allclose(out.cuda(), ref.cuda(), rtol=rtol, atol=atol)


def test_fetch_brings_tensors_of_every_dtype_back_in_their_own_shapes_of_bytes() -> None:
    from oracleaudit.execution.measure import fetch

    tensors = [torch.tensor([1.5, -2.0], dtype=torch.float64), torch.tensor([7, -(2**40)], dtype=torch.int64),
               torch.tensor(True), torch.arange(3, dtype=torch.uint8), torch.tensor([0.25], dtype=torch.float32)]
    host = fetch(tensors)
    assert [a.dtype for a in host] == [np.float64, np.int64, np.bool_, np.uint8, np.float32]
    for array, tensor in zip(host, tensors):
        assert np.array_equal(array, tensor.reshape(-1).numpy())
    assert fetch([]) == []


def test_measure_many_equals_measure_item_by_item_and_returns_the_extra_tensors() -> None:
    from oracleaudit.execution.measure import measure_many

    torch.manual_seed(3)
    ref = torch.randn(257)
    out = ref * (1 + 1e-3 * torch.randn(257))
    items = [(out, ref), (out, ref.double()), (out[:-1], ref), (out.double(), ref, torch.float32)]
    evidences, extra = measure_many(items, extra=[torch.tensor([5, 6]), torch.tensor(False)])
    expected = [measure(out, ref), measure(out, ref.double()), measure(out[:-1], ref),
                measure(out.double(), ref, expected_dtype=torch.float32)]
    assert evidences == expected
    assert not evidences[2].shape_match and not evidences[3].dtype_match
    assert extra[0].tolist() == [5, 6] and extra[1].tolist() == [False]


def test_side_by_side_runs_the_calls_at_once_and_returns_their_results_in_order() -> None:
    import threading

    from oracleaudit.execution.measure import SIDE_BY_SIDE, _side_by_side

    together = threading.Barrier(SIDE_BY_SIDE, timeout=10)  # broken unless SIDE_BY_SIDE calls run at once

    def call(value):
        together.wait()
        return value, threading.current_thread().name

    results = _side_by_side([lambda v=v: call(v) for v in range(SIDE_BY_SIDE)])
    assert [value for value, _ in results] == list(range(SIDE_BY_SIDE))
    assert results[0][1] == threading.current_thread().name  # the caller's thread runs the first
    assert len({name for _, name in results}) == SIDE_BY_SIDE
    assert _side_by_side([lambda: 5]) == [5] and _side_by_side([]) == []


def test_side_by_side_lets_every_call_end_before_it_raises_the_first_error() -> None:
    import threading

    from oracleaudit.execution.measure import _side_by_side

    ended = threading.Event()

    def slow():
        ended.wait(0.2)
        ended.set()
        return 1

    def failing():
        raise ValueError("the first call failed")

    with pytest.raises(ValueError, match="the first call failed"):
        _side_by_side([failing, slow])
    assert ended.is_set()


@pytest.mark.parametrize("case", ["rounding", "proportional", "ties", "collinear", "wide", "thinned", "rounded",
                                  "huge"])
@pytest.mark.parametrize("device_passes_above", [0, 4096])
def test_the_numpy_hull_of_cpu_candidates_equals_the_torch_hull_point_for_point(case, device_passes_above,
                                                                                monkeypatch):
    """Candidates on the CPU take the numpy version of the hull; it must give the torch version's result to
    the bit, on sets with equal r, equal points, collinear errors and more points than a hull keeps, with
    the chain's first passes made on the tensors' device (threshold 0) or on the host."""
    from oracleaudit.execution import measure
    from oracleaudit.execution.measure import MAX_HULL_POINTS, _front_hull_numpy, _front_hull_torch

    monkeypatch.setattr(measure, "DEVICE_PASSES_ABOVE", device_passes_above)
    gen = np.random.default_rng(7)
    n = 5000
    r = np.abs(gen.standard_normal(n))
    if case == "rounding":
        d = r * np.abs(gen.standard_normal(n)) * 1e-7
    elif case == "proportional":
        d = r * 0.01
    elif case == "ties":
        r = np.round(r, 1)
        d = np.round(np.abs(gen.standard_normal(n)), 2) + 1e-3
    elif case == "collinear":
        d = 1e-3 + r * 0.5
    elif case == "wide":
        r = 10.0 ** gen.uniform(-30, 30, n)
        d = r * 10.0 ** gen.uniform(-8, -1, n)
    elif case == "huge":  # the chain's turns decided on scaled copies (the largest r times its d overflows)
        r = r * 1e200
        d = r * 1e-50 * (1 + gen.uniform(0, 1e-3, n))  # a long front: the device passes run on it
    elif case == "thinned":  # a concave curve: every point a chain vertex, more than MAX_HULL_POINTS of them
        r = np.linspace(0.0, 1.0, 4 * MAX_HULL_POINTS + 1)
        d = np.sqrt(r) + 1e-3
    else:  # an fp32 output rounded from the fp64 reference: many candidates (pre-filtered), zeros, repeats
        ref = gen.standard_normal(200_000)
        ref[::97] = 0.0
        ref[1::89] = ref[3]
        ref_r = np.abs(ref)
        r = np.concatenate([ref_r, np.zeros(5)])
        d = np.concatenate([np.abs(ref.astype(np.float32).astype(np.float64) - ref), gen.uniform(1e-9, 2e-8, 5)])
        r, d = r[d > 0], d[d > 0]
        assert len(r) > measure.FINE_FILTER_ABOVE
    for dtype in (torch.float32, torch.float64):
        want = _front_hull_torch(torch.from_numpy(r), torch.from_numpy(d), dtype)
        got = _front_hull_numpy(r, d, dtype)
        assert got[2:] == want[2:]
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    assert case != "thinned" or not got[2]


@pytest.mark.parametrize("kept", [0, 1, 40, 41, 900])
def test_the_kept_points_come_back_in_order_with_their_count_in_one_transfer(kept) -> None:
    """measure._first_kept: the count of the mask and its first `room` columns, as boolean indexing gives them."""
    from oracleaudit.execution.measure import _first_kept

    gen = torch.Generator().manual_seed(kept)
    points = torch.randn(2, 1000, generator=gen, dtype=torch.float64)
    mask = torch.zeros(1000, dtype=torch.bool)
    mask[torch.randperm(1000, generator=gen)[:kept]] = True
    count, values = _first_kept(points, mask, 40)
    assert count == kept
    want = points[:, mask][:, :40].numpy()
    assert values[:, :min(kept, 40)].tobytes() == want.tobytes()
