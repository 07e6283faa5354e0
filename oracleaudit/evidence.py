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

import functools
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
    "fetch",
    "grid_key",
    "measure",
    "measure_many",
]

DEFAULT_GRID: tuple[float, ...] = tuple(float(f"{m}e{e}") for e in range(-7, -1) for m in (1, 2, 5)) + (0.1,)
MAX_HULL_POINTS = 256
ENGINES = ("auto", "fused", "torch")

# The hull's first filter bins r: SUB_BINS bins per binade. frexp's exponent e of a positive finite float64
# is in [-1073, 1024]; a bin code is SUB_BINS·e + (0 … SUB_BINS−1); bin 0 holds r = 0, code c is bin
# c − _CODE_LOW + 1. data/evidence_kernels.cu bins the same way.
SUB_BINS = 64
_CODE_LOW, _CODE_HIGH = -1073 * SUB_BINS, 1024 * SUB_BINS + SUB_BINS - 1
_N_BINS = _CODE_HIGH - _CODE_LOW + 2

_DTYPES = {str(t).removeprefix("torch."): t for t in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}


def grid_key(t: float) -> str:
    """The column-name spelling of a grid tolerance: `1e-04`, or repr(t) when one digit does not suffice."""
    short = f"{t:.0e}"
    return short if float(short) == t else repr(float(t))


def _margins(dtype: torch.dtype) -> tuple[float, float, float, float]:
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
        dtype = _DTYPES[self.compare_dtype]
        r = torch.tensor(self.hull_r, dtype=torch.float64).to(dtype)  # exact: the values came from dtype
        d = torch.tensor(self.hull_d, dtype=torch.float64).to(dtype)
        allowed = atol + (rtol * r).abs()  # the operations of torch.isclose, in its order
        return bool((torch.isfinite(d) & (d <= allowed)).all())

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
        u, s, _, _ = _margins(_DTYPES[self.compare_dtype])
        vr, vd = _chain(self.hull_r, self.hull_d)
        with np.errstate(over="ignore", invalid="ignore"):
            low = (1 - 8 * u) * (atol + rtol * vr) - 8 * s  # a lower bound of g(r) at the breakpoints
            high = (1 + self.hull_slack) * vd * (1 + 1e-12)
        return bool(np.all(low >= high))

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
                values[name] = _frozen(np.asarray(values[name], dtype=np.float64))
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


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


# ---- measuring ------------------------------------------------------------------------------------------


def measure(out: torch.Tensor, ref: torch.Tensor, *, expected_dtype: torch.dtype | None = None,
            tolerance_grid: Sequence[float] = DEFAULT_GRID, engine: str = "torch") -> ErrorEvidence:
    """The exact error evidence of `out` against `ref`. `expected_dtype` is the dtype `out` must have;
    by default ref's, except that any floating-point `out` may be measured against a float64 reference
    (the fp64 reference; pass the fp32 reference's dtype to check the output's dtype there too). `engine`:
    "torch" (default), "auto" (the fused kernels where they apply and are built, else torch) or "fused"
    (an error where they cannot be used)."""
    (evidence,), _ = measure_many([(out, ref, expected_dtype)], tolerance_grid=tolerance_grid, engine=engine)
    return evidence


def measure_many(items: Sequence[tuple], *, tolerance_grid: Sequence[float] = DEFAULT_GRID, engine: str = "torch",
                 extra: Sequence[torch.Tensor] = ()) -> tuple[list[ErrorEvidence], list[np.ndarray]]:
    """`measure` of each item — (out, ref) or (out, ref, expected_dtype) — and the `extra` tensors (of the
    items' device) brought to the host: the fused kernels' results of every item and the extra tensors come
    back in ONE transfer, one synchronisation where `measure` one by one would make one per item. Items the
    fused kernels do not take are measured afterwards, one by one. Returns the evidences in item order and
    the extra tensors as numpy arrays."""
    if engine not in ENGINES:
        raise OracleAuditError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    grid = tuple(float(t) for t in tolerance_grid)
    if not grid or any(not (t > 0 and math.isfinite(t)) for t in grid) or len(set(grid)) != len(grid):
        raise OracleAuditError(f"tolerance_grid must be distinct finite values > 0, got {list(tolerance_grid)}")
    results: list[ErrorEvidence | None] = [None] * len(items)
    launched, later = [], []
    for index, (out, ref, *rest) in enumerate(items):
        header, a, b = _prepared(out, ref, rest[0] if rest else None, grid)
        if a is None:
            results[index] = ErrorEvidence(**header)
            continue
        kernels = _kernels(a, grid, engine)
        if kernels is None:
            later.append((index, a, b, header))
        else:
            launched.append((index, kernels.launch(a, b, grid), a, b, header))
    host = fetch([run.head_view() for _, run, *_ in launched] + list(extra))
    for (index, run, a, b, header), values in zip(launched, host):
        results[index] = _measure_fused(run.finish(values), a, b, header, grid)
    for index, a, b, header in later:
        with torch.no_grad():
            results[index] = _measure(a, b, header, grid)
    return results, host[len(launched):]


_NUMPY = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64,
          torch.int32: np.int32, torch.int16: np.int16, torch.uint8: np.uint8, torch.int8: np.int8,
          torch.bool: np.bool_}


def fetch(tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Tensors on the host in one transfer (their bytes concatenated on the first one's device, each padded to
    8 bytes), as flat numpy arrays of their dtypes."""
    chunks, spans, offset = [], [], 0
    for t in tensors:
        if t.dtype not in _NUMPY:
            raise OracleAuditError(f"fetch: no numpy dtype for {t.dtype}")
        flat = t.detach().contiguous().reshape(-1).view(torch.uint8).to(tensors[0].device)
        pad = (-flat.numel()) % 8
        chunks.append(flat)
        if pad:
            chunks.append(torch.zeros(pad, dtype=torch.uint8, device=flat.device))
        spans.append((offset, flat.numel(), t.dtype))
        offset += flat.numel() + pad
    if not chunks:
        return []
    host = torch.cat(chunks).cpu().numpy()
    return [host[start:start + size].view(_NUMPY[dtype]) for start, size, dtype in spans]


def _prepared(out: torch.Tensor, ref: torch.Tensor, expected_dtype: torch.dtype | None,
              grid: tuple[float, ...]) -> tuple[dict[str, Any], torch.Tensor | None, torch.Tensor | None]:
    """The evidence header, and the two operands flattened in the comparison dtype on out's device (None
    when shape or dtype do not match: the header is then the whole evidence)."""
    expected = ref.dtype if expected_dtype is None else expected_dtype
    if expected_dtype is None and ref.dtype == torch.float64 and out.dtype.is_floating_point:
        expected = out.dtype
    header = dict(
        shape_match=tuple(out.shape) == tuple(ref.shape),
        dtype_match=out.dtype == expected,
        out_shape=tuple(int(x) for x in out.shape),
        ref_shape=tuple(int(x) for x in ref.shape),
        out_dtype=str(out.dtype).removeprefix("torch."),
        ref_dtype=str(ref.dtype).removeprefix("torch."),
        tolerance_grid=grid,
    )
    if not (header["shape_match"] and header["dtype_match"]):
        return header, None, None
    common = torch.promote_types(out.dtype, ref.dtype)
    if common.is_complex:
        raise OracleAuditError(f"complex outputs are not supported (out {out.dtype}, ref {ref.dtype})")
    with torch.no_grad():
        a = out.detach().to(dtype=common).reshape(-1).contiguous()
        b = ref.detach().to(device=a.device, dtype=common).reshape(-1).contiguous()
    return header, a, b


def _kernels(a: torch.Tensor, grid: tuple[float, ...], engine: str):
    """The fused kernels' library for this comparison under `engine`, or None for the torch version."""
    if engine == "torch":
        return None
    from oracleaudit.execution import evidence_kernels

    kernels = evidence_kernels.library() if evidence_kernels.supports(a, grid) else None
    if kernels is None and engine == "fused":
        raise OracleAuditError(f"the fused evidence kernels do not apply to a {a.dtype} tensor on {a.device} "
                               f"with a grid of {len(grid)} values, or are not built")
    return kernels


def _evidence(header: dict[str, Any], dtype: torch.dtype, n: int, values: list[float], grid: tuple[float, ...],
              hull: tuple[np.ndarray, np.ndarray, bool, float]) -> ErrorEvidence:
    """The evidence from its raw values: the eight counts, the grid counts, `_statistics`'s eight values
    and the all-zero flag (as in `_measure`), and the hull."""
    n_unequal, n_nan_out, n_nan_ref, n_nan_both, n_inf_mismatch, n_inf_equal, n_overflow, n_finite = (
        int(v) for v in values[:8])
    hull_r, hull_d, complete, slack = hull
    return ErrorEvidence(
        **header, compare_dtype=str(dtype).removeprefix("torch."), n=n, n_unequal=n_unequal,
        n_nan_out=n_nan_out, n_nan_ref=n_nan_ref, n_nan_both=n_nan_both, n_inf_mismatch=n_inf_mismatch,
        n_inf_equal=n_inf_equal, n_overflow=n_overflow, hull_r=_frozen(hull_r), hull_d=_frozen(hull_d),
        hull_complete=complete, hull_slack=slack, n_within=tuple(int(v) for v in values[8:8 + len(grid)]),
        all_zero_out=bool(values[-1]), **_statistics_values(values[8 + len(grid):-1], n_finite))


def _measure_fused(raw, a: torch.Tensor, b: torch.Tensor, header: dict[str, Any],
                   grid: tuple[float, ...]) -> ErrorEvidence:
    """The evidence from the fused kernels' results (`evidence_kernels.Raw`) of comparing a and b."""
    if raw.candidates is not None:
        hull = _front_hull(*raw.candidates, a.dtype)
    else:  # more candidates than the kernels keep: the torch version's filter on the device
        with torch.no_grad():
            d = (a - b).abs()
            rest = torch.isfinite(a) & torch.isfinite(b) & (a != b) & torch.isfinite(d) & (d > 0)
            rd = torch.stack([b.abs(), d]).to(torch.float64)[:, rest]
            hull = _hull(rd[0], rd[1], a.dtype)
    values = [*raw.counts, *raw.within, *raw.stats, float(raw.all_zero_out)]
    return _evidence(header, a.dtype, a.numel(), values, grid, hull)


def _measure(a: torch.Tensor, b: torch.Tensor, header: dict[str, Any], grid: tuple[float, ...]) -> ErrorEvidence:
    # The torch version. Host synchronisations are kept few: the counts, grid counts and statistics come back
    # in one transfer, and masked elements are zeroed (torch.where) rather than gathered, which would
    # synchronise per gather. (Its cost is the ~150 small kernels it launches: bench/evidence_cost.py.)
    eq = a == b
    if a.is_floating_point():
        af, bf = a, b
    else:  # torch.isclose casts integer and bool operands to the default float dtype first
        af, bf = a.to(torch.get_default_dtype()), b.to(torch.get_default_dtype())
    dtype = af.dtype
    d = (af - bf).abs()
    r = bf.abs()
    nan_a, nan_b = torch.isnan(af), torch.isnan(bf)
    fin = torch.isfinite(af) & torch.isfinite(bf)
    d_fin = torch.isfinite(d)
    rest = fin & ~eq & d_fin  # unequal, both finite, a finite difference: decided by the tolerance
    flags = torch.stack([
        ~eq,
        nan_a & ~nan_b,
        nan_b & ~nan_a,
        nan_a & nan_b,
        ~eq & ~fin & ~nan_a & ~nan_b,  # an Inf on either side, no NaN, not equal
        eq & torch.isinf(af),
        fin & ~d_fin,
        fin,
    ])
    counts = flags.sum(1)
    within = _within_counts(a, b, a.numel() - counts[0], rest, r, d, grid)
    stats = _statistics(a.to(torch.float64), b.to(torch.float64), fin)
    all_zero = (a == 0).all() & (b != 0).any()
    values = torch.cat([counts.to(torch.float64), within.to(torch.float64), stats, all_zero.to(torch.float64)[None]])
    values = values.tolist()  # every count is below 2**53, so exact in float64
    rd = torch.stack([r, d]).to(torch.float64)[:, rest & (d > 0)]
    return _evidence(header, dtype, a.numel(), values, grid, _hull(rd[0], rd[1], dtype))


@functools.cache
def _grid_tensor(grid: tuple[float, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The grid as a tensor on the device (made once per grid, dtype and device)."""
    return torch.tensor(grid, dtype=dtype, device=device)


def _within_counts(a: torch.Tensor, b: torch.Tensor, n_eq: torch.Tensor, rest: torch.Tensor, r: torch.Tensor,
                   d: torch.Tensor, grid: tuple[float, ...]) -> torch.Tensor:
    """For each grid value t, the count of torch.isclose(a, b, rtol=t, atol=t) (an int64 tensor).

    Fast path (float32/float64 comparisons, grids with steps ≥ ×1.5 above 1e-30): equal elements (`n_eq`)
    pass every t, non-finite differences none; an element of `rest` (unequal, finite difference) passes t
    iff d ≤ t + |t·r| evaluated as torch.isclose does, and passing is monotone in t. Its first passing grid
    index is within one of k = the first index with t ≥ d / (1 + r) (the real-arithmetic answer;
    neighbouring grid values differ by far more than rounding), so two exact evaluations per element (at
    grid[k-1] and grid[k], cast to the comparison dtype as isclose casts its scalars) decide it."""
    ratios = [hi / lo for lo, hi in zip(grid, grid[1:])]
    fast = (d.dtype in (torch.float32, torch.float64) and min(grid) >= 1e-30 and list(grid) == sorted(grid)
            and all(q >= 1.5 for q in ratios))
    if not fast:
        return torch.stack([torch.isclose(a, b, rtol=t, atol=t).sum() for t in grid])
    size = len(grid)
    est = d.to(torch.float64) / (1 + r.to(torch.float64))
    k = torch.searchsorted(_grid_tensor(grid, torch.float64, d.device), est)  # grid[k] >= est
    ts = _grid_tensor(grid, d.dtype, d.device)  # the scalar t as isclose casts it
    below = ts[(k - 1).clamp(min=0, max=size - 1)]
    at = ts[k.clamp(max=size - 1)]
    ok_below = (k >= 1) & (d <= below + (below * r).abs())
    ok_at = (k < size) & (d <= at + (at * r).abs())
    first = torch.where(ok_below, k - 1, torch.where(ok_at, k, k + 1)).clamp(max=size)
    first = torch.where(rest, first, size + 1)  # elements outside `rest` are counted apart
    passing = torch.bincount(first, minlength=size + 2)[:size].cumsum(0)
    return n_eq + passing


def _scaled_norm(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, ‖x/scale‖₂) with scale = max|x| (1 where x is all zero), safe from overflow."""
    scale = x.abs().max()
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return scale, torch.linalg.vector_norm(x / scale)


def _statistics(a: torch.Tensor, b: torch.Tensor, fin: torch.Tensor) -> torch.Tensor:
    """The statistics' raw values over the elements where `fin` (float64 operands; the rest count as 0,
    which adds nothing to a sum, a norm, a dot product or a maximum of absolute values):
    [‖diff‖, ‖b‖, cosine, max|diff|, max rel (−1: no |b| > 0), Σ|b|, Σ|diff|, ‖a‖]."""
    if a.numel() == 0:
        return a.new_zeros(8)
    a = torch.where(fin, a, 0)
    b = torch.where(fin, b, 0)
    diff = (a - b).abs()
    rb = b.abs()
    sd, nd = _scaled_norm(diff)
    sb, nb = _scaled_norm(b)
    sa, na = _scaled_norm(a)
    dot = ((a / sa) * (b / sb)).sum()
    rel = torch.where(rb > 0, diff / rb, -1.0).max()
    return torch.stack([sd * nd, sb * nb, dot / (na * nb), diff.max(), rel, rb.sum(), diff.sum(), na])


def _statistics_values(values: list[float], n_finite: int) -> dict[str, float | None]:
    """The statistics fields from `_statistics`'s values; all None without a finite pair."""
    keys = ("l2_diff", "l2_ref", "cosine", "max_abs", "max_rel", "rmse", "rel_l1")
    if n_finite == 0:
        return dict.fromkeys(keys)
    l2_diff, l2_ref, cosine, max_abs, max_rel, sum_ref, sum_diff, norm_a = values
    return {
        "l2_diff": l2_diff,
        "l2_ref": l2_ref,
        "cosine": cosine if (norm_a > 0 and l2_ref > 0) else None,
        "max_abs": max_abs,
        "max_rel": None if max_rel < 0 else max_rel,
        "rmse": l2_diff / math.sqrt(n_finite),
        "rel_l1": sum_diff / sum_ref if sum_ref > 0 else None,
    }


# ---- the hull -------------------------------------------------------------------------------------------


def _chain(r: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    xs, ys = x.tolist(), y.tolist()
    hull: list[int] = []
    for i in index.tolist():
        while len(hull) >= 2 and ((xs[hull[-1]] - xs[hull[-2]]) * (ys[i] - ys[hull[-2]])
                                  - (ys[hull[-1]] - ys[hull[-2]]) * (xs[i] - xs[hull[-2]])) >= 0:
            hull.pop()
        hull.append(i)
    return r[hull], d[hull]


def _envelope_mask(r: torch.Tensor, d: torch.Tensor, vr: torch.Tensor, vd: torch.Tensor, rel: float,
                   absolute: float) -> torch.Tensor:
    """True for the points not proven redundant by the chain (vr, vd): left of it, above it, or within the
    margin below it (and not dominated by a chain vertex)."""
    j = torch.searchsorted(vr, r, right=True) - 1
    left = j < 0
    j = j.clamp(min=0)
    k = (j + 1).clamp(max=len(vr) - 1)
    rj, dj, rk, dk = vr[j], vd[j], vr[k], vd[k]
    dominated = ~left & (d <= dj)
    inner = k > j
    span = torch.where(inner, rk - rj, torch.ones_like(rk))
    chord = dj + (dk - dj) * ((r - rj) / span)
    below = ~left & inner & (d < chord * (1 - rel) - absolute)
    return ~(dominated | below)


def _hull(r: torch.Tensor, d: torch.Tensor, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """(hull_r, hull_d, hull_complete, hull_slack) of the finite points with d > 0 (float64 tensors)."""
    if r.numel() == 0:
        return _front_hull(r, d, dtype)
    return _front_hull(*_bin_filter(r, d), dtype)


def _bin_filter(r: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The points whose d exceeds the largest d of every lower bin of r (a point that does not is dominated
    by that bin's maximum: a larger-or-equal d at a smaller r). Bins: see SUB_BINS; the bins cover every
    positive finite float64, so they need no synchronisation to size."""
    mantissa, exponent = torch.frexp(r)
    sub = (mantissa * (2 * SUB_BINS)).to(torch.int64).clamp(SUB_BINS, 2 * SUB_BINS - 1) - SUB_BINS
    code = exponent.to(torch.int64) * SUB_BINS + sub
    key = torch.where(r > 0, code - _CODE_LOW + 1, torch.zeros_like(code))
    bins = torch.zeros(_N_BINS, dtype=d.dtype, device=d.device)
    bins.scatter_reduce_(0, key, d, reduce="amax", include_self=False)
    lower = torch.cat([bins.new_zeros(1), torch.cummax(bins, 0).values[:-1]])
    kept = torch.stack([r, d])[:, d > lower[key]]
    return kept[0], kept[1]


def _front_hull(r: torch.Tensor, d: torch.Tensor, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """The hull from points that include every point of the Pareto front (in any order, on any device)."""
    empty = np.zeros(0, dtype=np.float64)
    if r.numel() == 0:
        return empty, empty.copy(), True, 0.0
    _, _, rel, absolute = _margins(dtype)
    # 2. The Pareto front: sort by r (d descending among equal r), keep the strict prefix maxima of d.
    order = torch.argsort(d, descending=True, stable=True)
    r, d = r[order], d[order]
    order = torch.argsort(r, stable=True)
    r, d = r[order], d[order]
    best = torch.cummax(d, 0).values
    front = torch.ones_like(d, dtype=torch.bool)
    front[1:] = d[1:] > best[:-1]
    # 3. Its upper-left convex chain (on the CPU), then 4. every point the chain does not prove redundant.
    vr, vd = _chain(*torch.stack([r, d])[:, front].cpu().numpy())
    chain = torch.from_numpy(np.stack([vr, vd])).to(r.device)
    keep = _envelope_mask(r, d, chain[0], chain[1], rel, absolute)
    if int(keep.sum()) + len(vr) <= MAX_HULL_POINTS:
        kept = torch.stack([r, d])[:, keep].cpu().numpy()
        pr = np.concatenate([kept[0], vr])
        pd_ = np.concatenate([kept[1], vd])
        points = np.unique(np.stack([pr, pd_], axis=1), axis=0)  # sorted by (r, d), duplicates once
        return np.ascontiguousarray(points[:, 0]), np.ascontiguousarray(points[:, 1]), True, 0.0
    if len(vr) <= MAX_HULL_POINTS:
        return vr, vd, False, 0.0
    picked = _simplify(vr, vd, MAX_HULL_POINTS)
    kr, kd = vr[picked], vd[picked]
    j = np.searchsorted(kr, vr, side="right") - 1
    k = np.minimum(j + 1, len(kr) - 1)
    span = np.where(k > j, kr[k] - kr[j], 1.0)
    chord = np.where(k > j, kd[j] + (kd[k] - kd[j]) * ((vr - kr[j]) / span), kd[j])
    slack = float(np.max((vd - chord) / chord))
    return kr, kd, False, max(slack, 0.0) * (1 + 1e-9) + 1e-15


def _chord_gap(vr: np.ndarray, vd: np.ndarray, i: int, k: int) -> float:
    """How far (relative) the chain's vertices strictly between i and k rise above the chord i–k."""
    if k - i < 2:
        return 0.0
    rj, dj = vr[i + 1:k], vd[i + 1:k]
    chord = vd[i] + (vd[k] - vd[i]) * ((rj - vr[i]) / (vr[k] - vr[i]))
    return float(np.max((dj - chord) / chord))


def _simplify(vr: np.ndarray, vd: np.ndarray, limit: int) -> np.ndarray:
    """Indices of at most `limit` vertices of a concave chain, both ends included, chosen to keep the largest
    relative rise of an omitted vertex above the kept chords small (bisection on that rise; for a fixed
    start the rise only grows with the chord's end, so each pass greedily takes the longest chords)."""
    n = len(vr)

    def greedy(delta: float) -> list[int] | None:
        kept, i = [0], 0
        while i < n - 1:
            good, step = i + 1, 1
            while good + step <= n - 1 and _chord_gap(vr, vd, i, good + step) <= delta:
                good += step
                step *= 2
            bad = min(good + step, n)
            while bad - good > 1:
                mid = (good + bad) // 2
                if _chord_gap(vr, vd, i, mid) <= delta:
                    good = mid
                else:
                    bad = mid
            kept.append(good)
            i = good
            if len(kept) > limit:
                return None
        return kept

    lo, hi = math.log(1e-16), math.log(max(_chord_gap(vr, vd, 0, n - 1), 1e-16) * 2)
    best = greedy(math.exp(hi)) or [0, n - 1]
    for _ in range(24):
        mid = (lo + hi) / 2
        attempt = greedy(math.exp(mid))
        if attempt is None:
            lo = mid
        else:
            best, hi = attempt, mid
    return np.array(best, dtype=np.int64)
