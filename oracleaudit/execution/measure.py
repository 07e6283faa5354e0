"""Measuring the error evidence of outputs against references on the GPU (`measure`, `measure_many`): the
counts, tolerance-grid counts, statistics and the error hull that `evidence.ErrorEvidence` records (its
docstring defines them). Two engines: PyTorch operations ("torch"), and the fused kernels of
`evidence_kernels` ("auto": where they apply and are built; "fused": those or an error), which do the
element-wise work in four kernels and one transfer.

The hull (`_hull`, `_front_hull`): the points are first cut to those beating every lower bin of r
(`SUB_BINS` bins per binade), then the Pareto front, its upper-left convex chain, and every point the chain
does not prove redundant within the rounding margins of `evidence.margins`. `measure_many` finishes the
comparisons whose hull waits for the device again side by side in threads (`_side_by_side`).
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Sequence

import numpy as np
import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import DEFAULT_GRID, MAX_HULL_POINTS, ErrorEvidence, convex_chain, frozen, margins
from oracleaudit.execution.evidence_kernels import SUB_BINS

__all__ = ["ENGINES", "fetch", "measure", "measure_many", "running_max"]

ENGINES = ("auto", "fused", "torch")

# The hull's first filter bins r: SUB_BINS bins per binade. frexp's exponent e of a positive finite float64
# is in [-1073, 1024]; a bin code is SUB_BINS·e + (0 … SUB_BINS−1); bin 0 holds r = 0, code c is bin
# c − _CODE_LOW + 1. data/evidence_kernels.cu bins the same way.
_CODE_LOW, _CODE_HIGH = -1073 * SUB_BINS, 1024 * SUB_BINS + SUB_BINS - 1
_N_BINS = _CODE_HIGH - _CODE_LOW + 2
DEVICE_PASSES_ABOVE = 4096  # fronts longer than this are thinned on their device before the host's chain
DEVICE_PASSES = 8  # at most this many of convex_chain's passes there (the first usually drops the most)


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
    on_device = []  # comparisons finished with more synchronisations: side by side (`_side_by_side`)
    for (index, run, a, b, header), values in zip(launched, host):
        call = functools.partial(_finished, run, values, a, b, header, grid)
        if run.needs_device(values):
            on_device.append((index, call))
        else:
            results[index] = call()
    for (index, _), evidence in zip(on_device, _side_by_side([call for _, call in on_device])):
        results[index] = evidence
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
        n_inf_equal=n_inf_equal, n_overflow=n_overflow, hull_r=frozen(hull_r), hull_d=frozen(hull_d),
        hull_complete=complete, hull_slack=slack, n_within=tuple(int(v) for v in values[8:8 + len(grid)]),
        all_zero_out=bool(values[-1]), **_statistics_values(values[8 + len(grid):-1], n_finite))


# Comparisons whose hull is finished on the device wait for it a dozen times each (`_front_hull_torch`), and on a
# GPU shared by several workers each wait lasts until the other workers' time slices are over: those of one call
# run side by side in threads (the waits release the GIL), so that a pair's comparisons against its two
# references wait together rather than one after the other. Each thread queues on the same stream the same
# operations the comparison makes alone: the results are the same to the bit.
SIDE_BY_SIDE = 4


@functools.cache
def _threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(SIDE_BY_SIDE - 1, thread_name_prefix="oracleaudit-measure")


os.register_at_fork(after_in_child=_threads.cache_clear)  # a forked child has none of its parent's threads


def _side_by_side(calls: list) -> list:
    """The calls' results in order, at most SIDE_BY_SIDE of them running at once (this thread runs the
    first). Every call ends before this returns; the first exception is then raised."""
    if len(calls) < 2:
        return [call() for call in calls]
    futures = [_threads().submit(call) for call in calls[1:]]
    try:
        first = calls[0]()
    finally:
        wait(futures)
    return [first, *(future.result() for future in futures)]


def _finished(run, values: np.ndarray, a: torch.Tensor, b: torch.Tensor, header: dict[str, Any],
              grid: tuple[float, ...]) -> ErrorEvidence:
    """The evidence of one launched comparison from its part of the transfer."""
    return _measure_fused(run.finish(values), a, b, header, grid)


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

RUNNING_MAX_WIDTH = 1024  # running_max scans rows of this many elements side by side


def running_max(x: torch.Tensor) -> torch.Tensor:
    """`torch.cummax(x, 0).values` of a 1-D tensor, exactly (a maximum rounds nothing), in a few launches:
    the running maxima of rows of RUNNING_MAX_WIDTH elements side by side, then of the rows' last values,
    combined. On CUDA, cummax of one long row runs its scan in one thread block (it also tracks indices): a
    hull's front of a million points took milliseconds there."""
    n = x.numel()
    if n <= RUNNING_MAX_WIDTH:
        return torch.cummax(x, 0).values
    rows = -(-n // RUNNING_MAX_WIDTH)
    lowest = float("-inf") if x.is_floating_point() else torch.iinfo(x.dtype).min
    padded = x.new_full((rows * RUNNING_MAX_WIDTH,), lowest)
    padded[:n] = x
    block = torch.cummax(padded.view(rows, RUNNING_MAX_WIDTH), 1).values
    before = running_max(block[:, -1].contiguous())[:-1]  # the maximum of every row before each row
    block[1:] = torch.maximum(block[1:], before[:, None])
    return block.reshape(-1)[:n]


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
    lower = torch.cat([bins.new_zeros(1), running_max(bins)[:-1]])
    kept = torch.stack([r, d])[:, d > lower[key]]
    return kept[0], kept[1]


def _front_hull(r: torch.Tensor, d: torch.Tensor, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """The hull from points that include every point of the Pareto front (in any order, on any device).
    Points on the CPU (the usual few candidates) take the numpy version: the same arithmetic without a
    PyTorch operation's overhead, several times faster on small sets."""
    if r.numel() == 0:
        empty = np.zeros(0, dtype=np.float64)
        return empty, empty.copy(), True, 0.0
    if r.device.type == "cpu":
        return _front_hull_numpy(r.numpy(), d.numpy(), dtype)
    return _front_hull_torch(r, d, dtype)


def _front_hull_torch(r: torch.Tensor, d: torch.Tensor, dtype: torch.dtype
                      ) -> tuple[np.ndarray, np.ndarray, bool, float]:
    _, _, rel, absolute = margins(dtype)
    r, d, front = _sorted_front(r, d)
    # 3. Its upper-left convex chain (on the CPU, after the first passes on the device where the front is long), then
    # 4. every point the chain does not prove redundant. Each wait for the device waits out other workers' slices too.
    fr, fd = torch.stack([r, d])[:, front]
    if len(fr) > DEVICE_PASSES_ABOVE:
        fr, fd = _inner_points_dropped(fr, fd)
    vr, vd = convex_chain(*torch.stack([fr, fd]).cpu().numpy())
    room = MAX_HULL_POINTS - len(vr)  # the most envelope points a complete hull has room for
    if room >= 0:
        chain = torch.from_numpy(np.stack([vr, vd])).to(r.device)
        count, kept = _first_kept(torch.stack([r, d]), _envelope_mask(r, d, chain[0], chain[1], rel, absolute), room)
        if count <= room:
            return _complete_hull(kept[0, :count], kept[1, :count], vr, vd)
    return _chain_hull(vr, vd)


def _first_kept(points: torch.Tensor, mask: torch.Tensor, room: int) -> tuple[int, np.ndarray]:
    """How many columns of `points` (2 × n) `mask` keeps and the first `room` of them, in order, in one transfer
    (boolean indexing would wait for the device once more, to size its result). Column `room` is never read."""
    slot = torch.where(mask, (torch.cumsum(mask, 0) - 1).clamp(max=room), room)
    gathered = points.new_zeros(2, room + 1).scatter_(1, slot.expand(2, -1), points)
    count, values = fetch([mask.sum().reshape(1), gathered])
    return int(count[0]), values.reshape(2, room + 1)


def _sorted_front(r: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """2. The points sorted by r (d descending among equal r) and the mask of their Pareto front there: the
    strict prefix maxima of d."""
    order = torch.argsort(d, descending=True, stable=True)
    r, d = r[order], d[order]
    order = torch.argsort(r, stable=True)
    r, d = r[order], d[order]
    best = running_max(d)
    front = torch.ones_like(d, dtype=torch.bool)
    front[1:] = d[1:] > best[:-1]
    return r, d, front


def _inner_points_dropped(r: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`evidence.convex_chain`'s vectorised passes on a front (sorted by r, d increasing) where it lies, in
    the same float64 operations (each rounded alike on every device), so that convex_chain then gets the
    points its own passes would have left: a proportional error makes a front of every element, which would
    otherwise cross to the host and be sorted there."""
    huge = r[-1] * d[-1] > 1e300  # convex_chain's scaling, decided on the device: the same float64 arithmetic
    x, y = torch.where(huge, r / r[-1], r), torch.where(huge, d / d[-1], d)
    index = torch.arange(len(r), device=r.device)
    for _ in range(DEVICE_PASSES):  # each pass waits for the device once; the host's chain goes on from here
        if len(index) <= 64:
            break
        xi, yi = x[index], y[index]
        cross = (xi[1:-1] - xi[:-2]) * (yi[2:] - yi[:-2]) - (yi[1:-1] - yi[:-2]) * (xi[2:] - xi[:-2])
        drop = torch.zeros(len(index), dtype=torch.bool, device=r.device)
        drop[1:-1] = cross >= 0
        left = index[~drop]
        if len(left) == len(index):
            break
        index = left
    return r[index], d[index]


# The numpy hull drops dominated points before it sorts, by bins of r finer than the kernels' (FINE_BINS per
# binade, at most MAX_FINE_BINS of them), where there are more than FINE_FILTER_ABOVE points.
FINE_BINS = 4096
MAX_FINE_BINS = 1 << 20
FINE_FILTER_ABOVE = 4096


def _front_numpy(r: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Pareto front of the points (float64 arrays) as `_front_hull_torch` finds it: sorted by r, each
    point's d above every d before it in the order (r, then d descending). Sorting was most of the hull's cost,
    so the points `_finely_dominated` finds are dropped first (of the 47,085 candidates of a rounded fp32
    output of 4M elements against the fp64 reference a few hundred are left: 8.8 ms without, 1.8 ms with,
    bench/hull_cost.py --numpy). Each has a point of smaller r and larger or equal d before it in that order,
    so the front and its order stay the same (the largest d before any point is a front point's, and those are
    kept)."""
    if len(r) > FINE_FILTER_ABOVE:
        dominated = _finely_dominated(r, d)
        if dominated is not None:
            r, d = r[~dominated], d[~dominated]
    order = np.lexsort((-d, r))  # by r, d descending among equal r (as the two stable argsorts)
    r, d = r[order], d[order]
    front = np.ones(len(d), dtype=bool)
    front[1:] = d[1:] > np.maximum.accumulate(d)[:-1]
    return r[front], d[front]


def _finely_dominated(r: np.ndarray, d: np.ndarray) -> np.ndarray | None:
    """True for each point whose d is at most the largest d of a lower bin of r (FINE_BINS bins per binade,
    ordered as r; r = 0 alone below them all), or None where r spans more than MAX_FINE_BINS bins."""
    mantissa, exponent = np.frexp(r)  # mantissa in [0.5, 1) for r > 0, exactly
    key = exponent.astype(np.int64) * FINE_BINS + (mantissa * (2 * FINE_BINS)).astype(np.int64)
    positive = r > 0
    lowest = int(key[positive].min()) if positive.any() else 0
    key = np.where(positive, key - lowest + 1, 0)
    size = int(key.max()) + 1
    if size > MAX_FINE_BINS:
        return None
    largest = np.zeros(size)
    np.maximum.at(largest, key, d)
    below = np.empty(size)
    below[0] = -np.inf
    np.maximum.accumulate(largest[:-1], out=below[1:])
    return d <= below[key]


def _front_hull_numpy(r: np.ndarray, d: np.ndarray, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """`_front_hull_torch` in numpy (float64 arrays): the same front, chain and envelope."""
    _, _, rel, absolute = margins(dtype)
    vr, vd = convex_chain(*_front_numpy(r, d))
    j = np.searchsorted(vr, r, side="right") - 1
    left = j < 0
    j = np.maximum(j, 0)
    k = np.minimum(j + 1, len(vr) - 1)
    rj, dj, rk, dk = vr[j], vd[j], vr[k], vd[k]
    inner = k > j
    span = np.where(inner, rk - rj, 1.0)
    chord = dj + (dk - dj) * ((r - rj) / span)
    keep = ~((~left & (d <= dj)) | (~left & inner & (d < chord * (1 - rel) - absolute)))
    if int(keep.sum()) + len(vr) <= MAX_HULL_POINTS:
        return _complete_hull(r[keep], d[keep], vr, vd)
    return _chain_hull(vr, vd)


def _complete_hull(kr: np.ndarray, kd: np.ndarray, vr: np.ndarray, vd: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """The complete hull: the points kept by the envelope and the chain's vertices, sorted by (r, d), each once."""
    points = np.unique(np.stack([np.concatenate([kr, vr]), np.concatenate([kd, vd])], axis=1), axis=0)
    return np.ascontiguousarray(points[:, 0]), np.ascontiguousarray(points[:, 1]), True, 0.0


def _chain_hull(vr: np.ndarray, vd: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """The incomplete hull when the envelope keeps too many points: the chain, simplified if it is too long."""
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
