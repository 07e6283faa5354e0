"""The pass rule of a verification check, on hand-built tensors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from oracleaudit.dataset.checks import Check, compare, excess, make_inputs
from oracleaudit.kernelbench import official_seeds
from oracleaudit.pool.shapes import ShapeVariant

REF = torch.tensor([1.0, -2.0, 100.0, 0.0], dtype=torch.float64)


def fp32_like(ref: torch.Tensor, error: float = 0.0) -> torch.Tensor:
    return (ref + error).to(torch.float32)


def test_excess_is_the_largest_error_beyond_the_relative_tolerance() -> None:
    out = torch.tensor([1.0, -2.0, 100.02, 0.0], dtype=torch.float64)
    assert excess(out, REF, rtol=1e-4) == pytest.approx(0.02 - 1e-2, abs=1e-9)


def test_an_exact_output_passes() -> None:
    result = compare(REF.float(), REF, fp32_like(REF))
    assert result.passed and result.max_abs_err == 0.0 and result.nonfinite == 0


def test_an_error_within_atol_passes() -> None:
    assert compare(fp32_like(REF, 5e-5), REF, fp32_like(REF)).passed


def test_an_error_beyond_atol_fails_when_pytorch_fp32_is_exact() -> None:
    result = compare(fp32_like(REF, 1e-3), REF, fp32_like(REF))
    assert not result.passed and result.excess == pytest.approx(1e-3, rel=1e-2)


def test_an_error_no_worse_than_four_times_pytorch_fp32_passes() -> None:
    ref = torch.zeros(3, dtype=torch.float64)
    assert compare(fp32_like(ref, 3e-3), ref, fp32_like(ref, 1e-3)).passed


def test_an_error_worse_than_four_times_pytorch_fp32_fails() -> None:
    ref = torch.zeros(3, dtype=torch.float64)
    result = compare(fp32_like(ref, 5e-3), ref, fp32_like(ref, 1e-3))
    assert not result.passed and result.fp32_excess == pytest.approx(1e-3, rel=1e-3)


def test_nan_where_the_reference_is_finite_fails() -> None:
    out = REF.float().clone()
    out[1] = math.nan
    result = compare(out, REF, fp32_like(REF))
    assert not result.passed and result.nonfinite == 1


def test_inf_where_pytorch_fp32_also_overflows_is_not_blamed() -> None:
    ref = torch.tensor([1e39, 1.0], dtype=torch.float64)
    fp32 = torch.tensor([math.inf, 1.0])
    result = compare(torch.tensor([math.inf, 1.0]), ref, fp32)
    assert result.passed and result.nonfinite == 0 and result.fp32_nonfinite == 1


def test_elements_where_the_reference_is_not_finite_are_not_judged() -> None:
    ref = torch.tensor([math.nan, 1.0], dtype=torch.float64)
    assert compare(torch.tensor([0.0, 1.0]), ref, torch.tensor([math.nan, 1.0])).passed


def test_a_shape_mismatch_fails_with_the_shapes() -> None:
    result = compare(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float64), torch.zeros(3, 2))
    assert not result.passed and result.mismatch == "output 0 has shape (2, 3), the reference (3, 2)"
    assert result.excess is None


def test_a_dtype_mismatch_fails() -> None:
    result = compare(REF.clone(), REF, fp32_like(REF))
    assert not result.passed and "dtype torch.float64" in result.mismatch


def test_a_different_number_of_outputs_fails() -> None:
    assert not compare((REF.float(),), (REF, REF), (REF.float(), REF.float())).passed


def test_tuple_outputs_pass_only_if_every_output_passes() -> None:
    good, bad = REF.float(), fp32_like(REF, 1.0)
    assert compare((good, good), (REF, REF), (good, good)).passed
    assert not compare((good, bad), (REF, REF), (good, good)).passed


def test_integer_outputs_compare_exactly() -> None:
    ref = torch.tensor([3, 1, 2])
    assert compare(ref.clone(), ref, ref.clone()).passed
    assert not compare(torch.tensor([3, 1, 0]), ref, ref.clone()).passed


def test_official_seeds_follow_kernelbench() -> None:
    torch.manual_seed(42)
    expected = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
    assert official_seeds() == expected


def test_redrawn_inputs_replace_float_tensors_only() -> None:
    module = SimpleNamespace(get_inputs=lambda: [torch.rand(4, 5), torch.tensor([7, 8, 9]), 3])
    official = make_inputs(module, Check("official-0", "official", 1, ShapeVariant("official")))
    large = make_inputs(module, Check("large", "large", 1, ShapeVariant("official")))
    assert large[0].shape == (4, 5) and large[0].abs().max() > 10
    assert torch.equal(large[1], official[1]) and large[2] == 3


def test_inputs_are_deterministic_for_a_seed() -> None:
    module = SimpleNamespace(get_inputs=lambda: [torch.rand(4, 5)])
    check = Check("uniform", "uniform", 42, ShapeVariant("official"))
    first, second = make_inputs(module, check), make_inputs(module, check)
    assert torch.equal(first[0], second[0]) and first[0].min() < 0
