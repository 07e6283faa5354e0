"""The verification checks of a (problem, solution) pair and their pass rule.

The checks: the official inputs (`get_inputs()`) under the 5 KernelBench trial seeds (drawn from seed 42);
standard normal, uniform(−1, 1) and large-magnitude (1e3 × standard normal) inputs, which replace the float
inputs only (same shapes and dtypes; integer inputs keep `get_inputs()`'s values); and the official inputs
on the "odd" and "small" shape variants (see `oracleaudit.pool.shapes`).

Pass rule of one check, with atol = rtol = 1e-4 (KernelBench's fp32 tolerance). For an output t let

    excess(t) = max_i ( |t_i − ref64_i| − rtol · |ref64_i| )

(`torch.allclose(t, ref64, atol, rtol)` holds iff excess(t) ≤ atol). The check passes iff

1. the solution's outputs have the shapes of the reference's and the dtypes of PyTorch's fp32 outputs;
2. the solution has no NaN/Inf where ref64 is finite, except where PyTorch's fp32 output is not finite
   either (the exact result is outside fp32's range on that input, so no fp32 kernel can be blamed);
3. excess(out) ≤ max(atol, 4 · excess(torch_fp32)): within KernelBench's tolerance, or no worse than 4×
   PyTorch's own fp32 computation on that same input.

excess(out) is taken over the elements where ref64, PyTorch's fp32 output and the solution's output are all
finite, excess(torch_fp32) over those where ref64 and PyTorch's fp32 output are finite. `nonfinite` counts
the solution's rule-2 violations, `fp32_nonfinite` the elements where PyTorch's fp32 output is not finite
although ref64 is. A problem is verified iff its solution built and every check passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.kernelbench import official_seeds
from oracleaudit.pool.shapes import ShapeVariant, ShapeVariants
from oracleaudit.tensors import leaves

__all__ = ["ATOL", "CRITERION", "DISTRIBUTIONS", "FP32_MARGIN", "RTOL", "Check", "Comparison", "compare", "excess",
           "make_inputs", "plan_checks"]

ATOL = 1e-4
RTOL = 1e-4
FP32_MARGIN = 4.0
INPUT_SEED = 42
LARGE_SCALE = 1e3
DISTRIBUTIONS = ("official", "normal", "uniform", "large")

CRITERION = {"atol": ATOL, "rtol": RTOL, "fp32_margin": FP32_MARGIN, "fp32_reference_tf32": False}


# Checks and their inputs


@dataclass(frozen=True)
class Check:
    """One verification check: which input distribution, which seed, on which shape variant."""

    name: str
    distribution: str
    seed: int
    variant: ShapeVariant


def plan_checks(variants: ShapeVariants) -> list[Check]:
    """The checks a problem is verified with, in run order."""
    official = variants.variants[0]
    checks = [Check(f"official-{k}", "official", s, official) for k, s in enumerate(official_seeds())]
    checks += [Check(name, name, INPUT_SEED, official) for name in ("normal", "uniform", "large")]
    for name in ("odd", "small"):
        variant = variants.get(name)
        if variant is not None:
            checks.append(Check(f"{name}-shapes", "official", INPUT_SEED, variant))
    return checks


def make_inputs(module: Any, check: Check) -> list:
    """The check's inputs (CPU): `get_inputs()` under the check's seed, float tensors redrawn if asked."""
    if check.distribution not in DISTRIBUTIONS:
        raise OracleAuditError(f"unknown input distribution {check.distribution!r} in check {check.name}")
    torch.manual_seed(check.seed)
    inputs = list(module.get_inputs())
    if check.distribution == "official":
        return inputs
    generator = torch.Generator().manual_seed(check.seed)
    return [_redraw(value, check.distribution, generator) for value in inputs]


def _redraw(value: Any, distribution: str, generator: torch.Generator) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_redraw(v, distribution, generator) for v in value)
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value
    shape, dtype = value.shape, value.dtype
    if distribution == "normal":
        return torch.randn(shape, generator=generator, dtype=dtype)
    if distribution == "uniform":
        return torch.rand(shape, generator=generator, dtype=dtype) * 2 - 1
    return torch.randn(shape, generator=generator, dtype=dtype) * LARGE_SCALE


# The pass rule


@dataclass(frozen=True)
class Comparison:
    """How a solution's output compares with the fp64 reference and with PyTorch's fp32 output."""

    passed: bool
    mismatch: str | None = None
    nonfinite: int = 0
    fp32_nonfinite: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    excess: float | None = None
    fp32_excess: float | None = None


def excess(t: torch.Tensor, ref64: torch.Tensor, rtol: float = RTOL) -> float | None:
    """max_i(|t_i − ref64_i| − rtol·|ref64_i|) over elements where both are finite (None if there are none)."""
    t, r = t.detach().to(torch.float64), ref64.detach().to(torch.float64)
    mask = torch.isfinite(t) & torch.isfinite(r)
    return _masked_max((t - r).abs() - rtol * r.abs(), mask)


def _masked_max(values: torch.Tensor, mask: torch.Tensor) -> float | None:
    if not bool(mask.any()):
        return None
    return float(torch.where(mask, values, torch.full_like(values, -torch.inf)).max().item())


def compare(
    out: Any,
    ref64: Any,
    fp32: Any,
    atol: float = ATOL,
    rtol: float = RTOL,
    margin: float = FP32_MARGIN,
) -> Comparison:
    """Apply the pass rule (module docstring) to outputs: a tensor or a (nested) tuple/list of tensors."""
    outs, refs, fp32s = leaves(out), leaves(ref64), leaves(fp32)
    if not (len(outs) == len(refs) == len(fp32s)):
        return Comparison(False, f"the solution returns {len(outs)} outputs, the reference {len(refs)}")
    parts = [_compare_one(i, o, r, f, atol, rtol, margin) for i, (o, r, f) in enumerate(zip(outs, refs, fp32s))]
    mismatch = next((p.mismatch for p in parts if p.mismatch), None)

    def worst(values: Iterable[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    return Comparison(
        passed=all(p.passed for p in parts),
        mismatch=mismatch,
        nonfinite=sum(p.nonfinite for p in parts),
        fp32_nonfinite=sum(p.fp32_nonfinite for p in parts),
        max_abs_err=worst(p.max_abs_err for p in parts),
        max_rel_err=worst(p.max_rel_err for p in parts),
        excess=worst(p.excess for p in parts),
        fp32_excess=worst(p.fp32_excess for p in parts),
    )


def _compare_one(
    index: int, out: Any, ref64: Any, fp32: Any, atol: float, rtol: float, margin: float
) -> Comparison:
    which = f"output {index}"
    if not isinstance(ref64, torch.Tensor) or not isinstance(fp32, torch.Tensor):
        return Comparison(False, f"the reference's {which} is not a tensor")
    if not isinstance(out, torch.Tensor):
        return Comparison(False, f"the solution's {which} is {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref64.shape):
        return Comparison(False, f"{which} has shape {tuple(out.shape)}, the reference {tuple(ref64.shape)}")
    if out.dtype != fp32.dtype:
        return Comparison(False, f"{which} has dtype {out.dtype}, the reference {fp32.dtype}")
    if tuple(fp32.shape) != tuple(ref64.shape):
        return Comparison(False, f"PyTorch's fp32 {which} has shape {tuple(fp32.shape)}, fp64 {tuple(ref64.shape)}")

    o = out.detach().to(device=ref64.device, dtype=torch.float64)
    r = ref64.detach().to(torch.float64)
    f = fp32.detach().to(device=ref64.device, dtype=torch.float64)
    ref_ok, fp32_ok, out_ok = torch.isfinite(r), torch.isfinite(f), torch.isfinite(o)
    judged = ref_ok & fp32_ok
    nonfinite = int((judged & ~out_ok).sum().item())
    fp32_nonfinite = int((ref_ok & ~fp32_ok).sum().item())
    scored = judged & out_ok

    diff = (o - r).abs()
    slack = rtol * r.abs()
    out_excess = _masked_max(diff - slack, scored)
    fp32_excess = _masked_max((f - r).abs() - slack, judged)
    max_abs = _masked_max(diff, scored)
    nonzero = scored & (r != 0)
    max_rel = _masked_max(diff / torch.where(nonzero, r.abs(), torch.ones_like(r)), nonzero)

    bound = atol if fp32_excess is None else max(atol, margin * fp32_excess)
    passed = nonfinite == 0 and (out_excess is None or out_excess <= bound)
    return Comparison(passed, None, nonfinite, fp32_nonfinite, max_abs, max_rel, out_excess, fp32_excess)
