"""Exact error evidence of one output tensor against one reference: what any comparison rule needs to give
its verdict later without the tensors (`measure` → `ErrorEvidence`).

The comparison (`compare_dtype`)
    `torch.allclose` refuses operands of different dtypes. The evidence compares `out` and `ref` as if both
    had first been cast to `torch.promote_types(out.dtype, ref.dtype)` (so an fp32 output against the fp64
    reference is compared in float64 arithmetic, against the fp32 reference in float32 arithmetic), and then
    follows `torch.isclose` exactly: integer and bool operands are cast to the default float dtype (float32)
    before the difference is taken, element equality is tested on the uncast operands, and

        d_i = |out_i − ref_i|,   allowed_i = atol + |rtol · ref_i|,   close_i = (out_i == ref_i)
                                                  or (equal_nan and both NaN) or (isfinite(d_i) and d_i ≤ allowed_i)

    all in `compare_dtype` arithmetic (each operation rounded, as PyTorch rounds it). `compare_dtype` is that
    float dtype. A shape mismatch, or an output whose dtype is not the expected one (default: ref's dtype),
    is recorded and then no element-wise field is filled: `allclose` is False (torch.allclose would raise).
    Against a float64 reference any floating-point output dtype is expected unless `expected_dtype` says.

The hull (`hull_r`, `hull_d`)
    With r_i = |ref_i|, element i passes iff d_i ≤ g(r_i) where g(r) = fl(atol + fl(rtol · r)) is
    non-decreasing in r. So a point dominated by another (r_j ≤ r_i, d_j ≥ d_i) can only fail if that one
    fails, and a point below the segment between two points j, k by more than the rounding of g can only
    fail if j or k fails: |g(r) − (atol + rtol·r)| ≤ 2u·(atol + rtol·r) + s with u the unit roundoff and s
    the smallest subnormal of `compare_dtype`, so a point with d_i < H(r_i)·(1 − 16u) − 16s, H the chord,
    is redundant (the 16 covers 4u with room for double rounding and for computing H in float64). The
    evidence keeps the upper-left convex hull of the finite points (r_i, d_i) with d_i > 0 (the part that
    maximises d − rtol·r for rtol ≥ 0), plus every point not proven redundant that way. The verdict replayed
    on these points with PyTorch's own operations in `compare_dtype` is then that of `torch.allclose` for
    ANY atol ≥ 0, rtol ≥ 0 — not just in real arithmetic. This is typically a handful of points.

    When more than `MAX_HULL_POINTS` points would be needed (e.g. an all-zero output, where d_i = r_i for
    every element lies exactly on one line), only the hull vertices are kept and `hull_complete` is False:
    the verdict is still exact unless the tolerance line atol + rtol·r lies within a few ulps of the error
    hull (`ErrorEvidence.is_exact` says whether it does). When the hull itself has more than
    `MAX_HULL_POINTS` vertices (d a smooth concave function of r), a subset is kept, chosen to keep
    `hull_slack` small: the bound on how far (relative) any omitted point lies above the kept envelope.

Counts (over all elements; NaN and Inf in `compare_dtype` after the cast)
    n, n_unequal (out != ref, NaN != NaN), n_nan_out (NaN in out where ref is not), n_nan_ref, n_nan_both,
    n_inf_mismatch (out ±Inf where ref is finite, ref ±Inf where out is finite, or Infs of opposite sign),
    n_inf_equal, n_overflow (both finite but the difference overflows to Inf: always a failure),
    n_within at each tolerance t of `tolerance_grid` (elements with torch.isclose(out, ref, rtol=t, atol=t),
    equal_nan False; `DEFAULT_GRID` is 1e-7 … 1e-1 in 1-2-5 steps, which holds 1e-4, 1e-2, 5e-3, ...).

Statistics (float64, over the elements where out and ref are both finite; None where undefined, never a
sentinel): l2_diff = ‖out − ref‖₂, l2_ref = ‖ref‖₂, cosine (of the flattened tensors; None when a norm is
0), max_abs, max_rel (max |out − ref| / |ref| over |ref| > 0), rmse, rel_l1 (Σ|out − ref| / Σ|ref|), and
all_zero_out (over all elements: out is all zeros while ref has an element that is not 0).

Everything is computed on the tensors' device (ref is moved to out's device); the results are plain Python
numbers and float64 numpy arrays. With engine "auto" (or "fused", which requires them), float32/float64
comparisons on CUDA go through the fused kernels of `evidence_kernels`: the same counts, grid counts and
hull, statistics equal up to the order of summation. `measure`'s default is the torch version (any
device); `oracleaudit run` uses "auto".

`allclose` replays the hull on the CPU with the same PyTorch operations; for float32/float64 (and integer
outputs, compared in float32) these round the same way on CPU and CUDA. float16/bfloat16 outputs are
replayed in their own dtype on the CPU, which is how the CPU kernels round; the margin above covers double
rounding, but CUDA's kernels are not proven to round identically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import torch

from oracleaudit.errors import OracleAuditError

__all__ = [
    "DEFAULT_GRID",
    "MAX_HULL_POINTS",
    "ErrorEvidence",
    "arrow_fields",
    "clears_rounding",
    "convex_chain",
    "frozen",
    "grid_key",
    "margins",
    "replay_fails",
]

DEFAULT_GRID: tuple[float, ...] = tuple(float(f"{m}e{e}") for e in range(-7, -1) for m in (1, 2, 5)) + (0.1,)
MAX_HULL_POINTS = 256

DTYPES = {str(t).removeprefix("torch."): t for t in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}


def grid_key(t: float) -> str:
    """The column-name spelling of a grid tolerance: `1e-04`, or repr(t) when one digit does not suffice."""
    short = f"{t:.0e}"
    return short if float(short) == t else repr(float(t))


def margins(dtype: torch.dtype) -> tuple[float, float, float, float]:
    """(u, s, relative margin, absolute margin) of a comparison dtype: unit roundoff, smallest subnormal."""
    info = torch.finfo(dtype)
    u = info.eps / 2
    s = info.smallest_normal * info.eps  # the smallest subnormal
    return u, s, 16 * u, 16 * s


@dataclass(frozen=True, eq=False)
class ErrorEvidence:
    """The evidence of one output against one reference (see the module docstring for every field).
    Element-wise fields are None when shapes or dtypes do not match."""

    shape_match: bool
    dtype_match: bool
    out_shape: tuple[int, ...]
    ref_shape: tuple[int, ...]
    out_dtype: str
    ref_dtype: str
    compare_dtype: str | None = None
    n: int | None = None
    n_unequal: int | None = None
    n_nan_out: int | None = None
    n_nan_ref: int | None = None
    n_nan_both: int | None = None
    n_inf_mismatch: int | None = None
    n_inf_equal: int | None = None
    n_overflow: int | None = None
    hull_r: np.ndarray | None = None
    hull_d: np.ndarray | None = None
    hull_complete: bool | None = None
    hull_slack: float | None = None
    tolerance_grid: tuple[float, ...] = DEFAULT_GRID
    n_within: tuple[int, ...] | None = None
    l2_diff: float | None = None
    l2_ref: float | None = None
    cosine: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    rmse: float | None = None
    rel_l1: float | None = None
    all_zero_out: bool | None = None

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ErrorEvidence):
            return NotImplemented
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if a is None or b is None or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    @property
    def comparable(self) -> bool:
        """Shapes and dtypes match, so the element-wise fields are filled."""
        return self.shape_match and self.dtype_match

    # ---- verdicts -------------------------------------------------------------------------------------

    def _early_verdict(self, atol: float, rtol: float, equal_nan: bool) -> bool | None:
        """The verdict when it does not depend on the hull, else None."""
        if not (atol >= 0):
            raise OracleAuditError(f"atol must be ≥ 0, got {atol!r}")
        if not (rtol >= 0):
            raise OracleAuditError(f"rtol must be ≥ 0, got {rtol!r}")
        if not self.comparable:
            return False
        if self.n_nan_out or self.n_nan_ref or self.n_inf_mismatch or self.n_overflow:
            return False
        if self.n_nan_both and not equal_nan:
            return False
        if atol == 0 and rtol == 0:  # torch.isclose short-circuits to an equality test
            return self.n_unequal - self.n_nan_both == 0
        if len(self.hull_r) == 0:
            return True
        return None

    def _replay(self, atol: float, rtol: float) -> bool:
        return not replay_fails(self.hull_r, self.hull_d, self.compare_dtype, atol, rtol).any()

    def allclose(self, atol: float, rtol: float, equal_nan: bool = False) -> bool:
        """`torch.allclose(out, ref, rtol=rtol, atol=atol, equal_nan=equal_nan)`, from the evidence: exact
        (see `is_exact` when `hull_complete` is False). A shape or dtype mismatch gives False where
        torch.allclose would raise."""
        early = self._early_verdict(atol, rtol, equal_nan)
        return self._replay(atol, rtol) if early is None else early

    def is_exact(self, atol: float, rtol: float, equal_nan: bool = False) -> bool:
        """Whether `allclose(atol, rtol, equal_nan)` is provably torch.allclose's verdict: always when
        `hull_complete`; otherwise unless the tolerance line is within rounding of the error hull."""
        if self._early_verdict(atol, rtol, equal_nan) is not None or self.hull_complete:
            return True
        if not self._replay(atol, rtol):
            return True  # a stored, real point fails
        return clears_rounding(self.hull_r, self.hull_d, self.compare_dtype, self.hull_slack, atol, rtol)

    # ---- fraction-within rules ------------------------------------------------------------------------

    def within_count(self, t: float) -> int | None:
        """How many elements satisfy torch.isclose(out, ref, rtol=t, atol=t); t must be a grid value."""
        if not self.comparable:
            return None
        try:
            index = self.tolerance_grid.index(float(t))
        except ValueError:
            raise OracleAuditError(
                f"tolerance {t!r} is not on the evidence's tolerance grid {list(self.tolerance_grid)}") from None
        return self.n_within[index]

    def fraction_within(self, t: float) -> float | None:
        """The fraction of elements within tolerance t (atol = rtol = t, NaN never within); exact for the
        values of `tolerance_grid`; 1.0 for an empty output, None on a shape/dtype mismatch."""
        count = self.within_count(t)
        if count is None:
            return None
        return 1.0 if self.n == 0 else count / self.n

    # ---- flat storage ---------------------------------------------------------------------------------

    def to_row(self, prefix: str) -> dict[str, Any]:
        """Flat columns `{prefix}{field}`; the grid counts as `{prefix}within_{grid_key(t)}`."""
        row: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "tolerance_grid":
                continue
            if f.name == "n_within":
                for i, t in enumerate(self.tolerance_grid):
                    row[f"{prefix}within_{grid_key(t)}"] = None if value is None else int(value[i])
                continue
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, tuple):
                value = list(value)
            row[prefix + f.name] = value
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any], prefix: str) -> "ErrorEvidence | None":
        """The evidence stored by `to_row` (a dict or a pandas row); None when the row holds none."""
        if _missing(row.get(prefix + "shape_match")):
            return None
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in ("tolerance_grid", "n_within"):
                continue
            value = row.get(prefix + f.name)
            values[f.name] = None if _missing(value) else value
        within = sorted((float(k[len(prefix) + len("within_"):]), k) for k in row.keys()
                        if isinstance(k, str) and k.startswith(prefix + "within_"))
        grid = tuple(t for t, _ in within)
        counts = [row[k] for _, k in within]
        values["tolerance_grid"] = grid
        values["n_within"] = None if any(_missing(c) for c in counts) else tuple(int(c) for c in counts)
        for name in ("out_shape", "ref_shape"):
            values[name] = tuple(int(x) for x in values[name])
        for name in ("hull_r", "hull_d"):
            if values[name] is not None:
                values[name] = frozen(np.asarray(values[name], dtype=np.float64))
        for name in ("n", "n_unequal", "n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal",
                     "n_overflow"):
            if values[name] is not None:
                values[name] = int(values[name])
        for name in ("shape_match", "dtype_match", "hull_complete", "all_zero_out"):
            if values[name] is not None:
                values[name] = bool(values[name])
        for name in ("hull_slack", "l2_diff", "l2_ref", "cosine", "max_abs", "max_rel", "rmse", "rel_l1"):
            if values[name] is not None:
                values[name] = float(values[name])
        return cls(**values)


def arrow_fields(prefix: str, grid: Sequence[float] = DEFAULT_GRID) -> list[pa.Field]:
    """The Parquet columns of `ErrorEvidence.to_row(prefix)`, all nullable, in `to_row`'s order."""
    types = {
        "shape_match": pa.bool_(), "dtype_match": pa.bool_(), "out_shape": pa.list_(pa.int64()),
        "ref_shape": pa.list_(pa.int64()), "out_dtype": pa.string(), "ref_dtype": pa.string(),
        "compare_dtype": pa.string(), "hull_r": pa.list_(pa.float64()), "hull_d": pa.list_(pa.float64()),
        "hull_complete": pa.bool_(), "hull_slack": pa.float64(), "all_zero_out": pa.bool_(),
    }
    out = []
    for f in fields(ErrorEvidence):
        if f.name == "tolerance_grid":
            continue
        if f.name == "n_within":
            out.extend(pa.field(f"{prefix}within_{grid_key(t)}", pa.int64()) for t in grid)
        elif f.name in types:
            out.append(pa.field(prefix + f.name, types[f.name]))
        elif f.name.startswith("n"):
            out.append(pa.field(prefix + f.name, pa.int64()))
        else:
            out.append(pa.field(prefix + f.name, pa.float64()))
    return out


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        import pandas as pd
        return value is pd.NA or value is pd.NaT
    except ImportError:  # pragma: no cover
        return False


def frozen(array: np.ndarray) -> np.ndarray:
    """The array, read-only (evidence is immutable)."""
    array.setflags(write=False)
    return array


def replay_fails(r: np.ndarray, d: np.ndarray, compare_dtype: str, atol: float, rtol: float) -> np.ndarray:
    """Per hull point (r = |ref|, d = |out − ref| as stored, float64 holding `compare_dtype` values): whether
    it fails `torch.isclose` with (atol, rtol), computed with PyTorch's own operations in `compare_dtype`
    (exact: the values came from that dtype), in torch.isclose's order."""
    dtype = DTYPES[str(compare_dtype)]
    rt = torch.from_numpy(np.array(r, dtype=np.float64)).to(dtype)  # a copy: stored hulls are read-only
    dt = torch.from_numpy(np.array(d, dtype=np.float64)).to(dtype)
    allowed = float(atol) + (float(rtol) * rt).abs()
    return (~(torch.isfinite(dt) & (dt <= allowed))).numpy()


def clears_rounding(hull_r: np.ndarray, hull_d: np.ndarray, compare_dtype: str, hull_slack: float, atol: float,
                    rtol: float) -> bool:
    """Whether the tolerance line atol + rtol·r stays above an incomplete hull (points left out lie at most
    `hull_slack` above it) by more than the rounding of torch.isclose in `compare_dtype`: then no element left
    out can fail, and a verdict that no stored point fails is exact (`ErrorEvidence.is_exact`)."""
    u, s, _, _ = margins(DTYPES[str(compare_dtype)])
    vr, vd = convex_chain(hull_r, hull_d)
    with np.errstate(over="ignore", invalid="ignore"):
        low = (1 - 8 * u) * (atol + rtol * vr) - 8 * s  # a lower bound of g(r) at the breakpoints
        high = (1 + hull_slack) * vd * (1 + 1e-12)
    return bool(np.all(low >= high))


def convex_chain(r: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The upper-left convex chain of points (float64 numpy): sorted by r, strictly increasing in r and d,
    concave; the points of the set that maximise d − ρ·r for some ρ ≥ 0."""
    order = np.lexsort((-d, r))
    r, d = r[order], d[order]
    if len(r) == 0:
        return r, d
    best = np.maximum.accumulate(d)
    keep = np.empty(len(d), dtype=bool)
    keep[0] = True
    keep[1:] = d[1:] > best[:-1]
    r, d = r[keep], d[keep]
    # The cross products below would overflow for huge coordinates (an fp64 reference of an exploding output);
    # scaling each axis by a positive factor keeps their signs, so the turns are then decided on scaled copies.
    x, y = (r / r[-1], d / d[-1]) if float(r[-1]) * float(d[-1]) > 1e300 else (r, d)  # Python floats: inf, no warning
    # Vectorised passes drop points below the chord of their neighbours (never a hull vertex) ...
    index = np.arange(len(r))
    while len(index) > 64:
        xi, yi = x[index], y[index]
        cross = (xi[1:-1] - xi[:-2]) * (yi[2:] - yi[:-2]) - (yi[1:-1] - yi[:-2]) * (xi[2:] - xi[:-2])
        drop = np.zeros(len(index), dtype=bool)
        drop[1:-1] = cross >= 0
        if not drop.any():
            break
        index = index[~drop]
    # ... then the monotone chain finishes the job.
    xs, ys = x[index].tolist(), y[index].tolist()  # only the survivors: a front may hold a million points
    hull: list[int] = []  # positions in index
    for i in range(len(xs)):
        while len(hull) >= 2 and ((xs[hull[-1]] - xs[hull[-2]]) * (ys[i] - ys[hull[-2]])
                                  - (ys[hull[-1]] - ys[hull[-2]]) * (xs[i] - xs[hull[-2]])) >= 0:
            hull.pop()
        hull.append(i)
    return r[index[hull]], d[index[hull]]
