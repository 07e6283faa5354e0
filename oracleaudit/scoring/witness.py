"""The kill witness: whether a mutant is demonstrably wrong on some input of the witness pool, independently of
any oracle under test. Derived from the stored raw facts every time the evidence is read; never stored.

A mutant is witnessed on an input (every input the evidence store holds, unless `inputs` restricts it) when,
on that same input:

  crash        it raises (RuntimeError, OOM) where the original ran without error;
  timeout      it hangs (Timeout) where the original ran;
  mismatch     its output's shape or dtype differs from the reference's (or it returns another number of
               outputs) where the original's matches;
  nonfinite    it disagrees with the fp64 reference about non-finite values (NaN or ±Inf where the reference
               is finite, a finite value where the reference is NaN or Inf, an Inf of the wrong sign) on an
               output where the original agrees with it everywhere;
  error        its error against the fp64 reference exceeds the original's own error on that output by the
               margin below;
  nondeterministic
               its two runs (kernel → reference → kernel) differ bitwise where the original's are bitwise
               equal on every input of the problem. Added to the usual kinds because a stale buffer
               (`torch::zeros` → `torch::empty`, a skipped accumulator reset) often gives a right first run
               and a wrong second one, and the evidence keeps the second run only as this flag. A mutant
               of a kernel whose two runs agree that starts to disagree has a race or reads stale memory.

The error and its margin (defined once, here)
    The error of an output is E = max_i |out_i − ref_i| / (1 + |ref_i|) against the fp64 reference: the
    smallest t for which torch.allclose(out, ref, atol=t, rtol=t) holds, i.e. the tolerance a
    KernelBench-style check would need. It is computed exactly (in float64) from the stored error hull,
    because the maximiser of d/(1 + r) is a vertex of the upper hull of the points (r_i, d_i); an overflowing
    difference makes it +inf.

    witnessed by error  ⇔  E_mutant > max(M · E_original, FLOOR)

    FLOOR = 2^-20 ≈ 9.5e-7 = 16 units of fp32 roundoff (u = 2^-24). It only matters where the original is
    (nearly) exact, E_original < FLOOR / M: element-wise fp32 arithmetic and CUDA's accurate math functions
    (≤ 2-4 ulp) stay well below it, so an exact original's mutant that reaches it is not a rounding variant.

    M = 64 (`FACTOR`) when the original's error on this output is a stable number: its two runs are bitwise
    equal (on every input of the problem) and the output has at least 16 elements (`SMALL_OUTPUT`), so E
    is a maximum over many elements.
    Correct fp32 kernels that differ only in association order (block sizes, tree shapes, chunked or
    permuted sums) differ in E by a factor that stays below ~42 over 100 seeds of row sums of 16–256 rows of
    17–4096 normal, uniform, lognormal, ×1e3 and mixed-range values (the worst case: cancelling ×1e3 sums,
    where E is set by a few rows); 64 leaves headroom and still witnesses every fault whose error is not
    within two orders of magnitude of fp32 rounding (half/bf16 accumulators lose ≥ 2^13 in precision).

    M = 4096 (`UNSTABLE_FACTOR`) otherwise: for outputs of fewer than 16 elements (a scalar loss, a few
    sums) E is one rounding draw, which can be near zero by luck, and for a non-deterministic original
    (atomics) it changes from run to run; reordered single sums differ by up to ~200× (tree orders) and
    ~3000× (sequential vs. pairwise) in the same experiment. Faults that change a value by more than
    ~4096 × its rounding error (any dropped, duplicated or mis-indexed term) are still witnessed.

Rows: every function reads a DataFrame with the store's row columns (`problem`, `mutant_id`, `input_id`,
`output_index`, `status`, `repeat_bitwise_equal`, `fp64_shape_match` and `fp64_dtype_match` or their
conjunction `fp64_comparable`, the `fp64_*` NaN/Inf counts and `fp64_n`) plus `fp64_error` (E, from
`required_tolerance`), one row per observation, as `scoring.Observations.frame` holds them. Rows of the
"reference" pseudo-mutant are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from oracleaudit.status import ORIGINAL, REFERENCE, Status

__all__ = [
    "FACTOR",
    "FLOOR",
    "KINDS",
    "SMALL_OUTPUT",
    "UNSTABLE_FACTOR",
    "Margin",
    "required_tolerance",
    "witness",
    "witness_rows",
]

FACTOR = 64.0
UNSTABLE_FACTOR = 4096.0
FLOOR = 2.0 ** -20
SMALL_OUTPUT = 16

KINDS = ("crash", "timeout", "mismatch", "nonfinite", "error", "nondeterministic")
"""Witness kinds, in the priority order used to name a mutant's primary witness."""

_COLUMNS = ("problem", "mutant_id", "input_id", "output_index", "kernel", "trial", "status", "repeat_bitwise_equal",
            "repeat_bitwise_equal_false", "fp64_comparable", "fp64_shape_match", "fp64_dtype_match", "fp64_n",
            "fp64_n_nan_out", "fp64_n_nan_ref", "fp64_n_inf_mismatch", "fp64_error")

_STATUS_KIND = {Status.RUNTIME_ERROR: "crash", Status.OOM: "crash", Status.TIMEOUT: "timeout",
                Status.SHAPE_MISMATCH: "mismatch", Status.DTYPE_MISMATCH: "mismatch"}


@dataclass(frozen=True)
class Margin:
    """The error margin of the witness (see the module docstring for why these values)."""

    factor: float = FACTOR
    unstable_factor: float = UNSTABLE_FACTOR
    floor: float = FLOOR
    small_output: int = SMALL_OUTPUT

    def as_json(self) -> dict[str, float]:
        return {"factor": self.factor, "unstable_factor": self.unstable_factor, "floor": self.floor,
                "small_output": self.small_output}


def required_tolerance(hull_r: np.ndarray, hull_d: np.ndarray, owner: np.ndarray, rows: int,
                       overflow: np.ndarray | None = None) -> np.ndarray:
    """E = max d / (1 + r) per row, from flat hull points (`owner` = row index of each point, ascending):
    0 for a row without points (every element equal), +inf where `overflow` > 0 (a difference overflowed)."""
    out = np.zeros(rows, dtype=np.float64)
    if len(owner):
        q = hull_d / (1.0 + hull_r)
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        out[owner[starts]] = np.maximum.reduceat(q, starts)
    if overflow is not None:
        out[np.asarray(overflow) > 0] = np.inf
    return out


def _nonfinite_disagreement(frame: pd.DataFrame) -> np.ndarray:
    counts = [frame[f"fp64_{name}"].to_numpy(dtype=np.float64, na_value=0.0)
              for name in ("n_nan_out", "n_nan_ref", "n_inf_mismatch")]
    return (counts[0] + counts[1] + counts[2]) > 0


def witness_rows(frame: pd.DataFrame, margin: Margin = Margin()) -> pd.DataFrame:
    """One row per (mutant observation row, kind) that witnesses it: row (its position in `frame`), problem,
    mutant_id, input_id, output_index, kind, error (E of the mutant, NaN for status witnesses), baseline (E
    of the original)."""
    positions = np.flatnonzero((frame["mutant_id"] != REFERENCE).to_numpy())
    frame = frame.iloc[positions]
    is_orig = (frame["mutant_id"] == ORIGINAL).to_numpy()
    orig = frame[is_orig]
    mut = frame[~is_orig]
    if mut.empty or orig.empty:
        return pd.DataFrame({c: [] for c in ("row", "problem", "mutant_id", "input_id", "output_index", "kind",
                                             "error", "baseline")})
    status = mut["status"].to_numpy(dtype=object)
    trial_all, output_all = _keys(frame)
    trial_o, trial_m = trial_all[is_orig], trial_all[~is_orig]
    output_o, output_m = output_all[is_orig], output_all[~is_orig]

    # The original's status on each (problem, input): a baseline only where all its rows there are Ok.
    orig_ok = orig["status"].to_numpy(dtype=object) == Status.OK
    trials = int(trial_all.max()) + 1
    has_orig = np.bincount(trial_o, minlength=trials) > 0
    orig_bad = np.bincount(trial_o[~orig_ok], minlength=trials) > 0
    orig_trial_ok = (has_orig & ~orig_bad)[trial_m]

    kinds = np.full(len(status), None, dtype=object)
    for name, kind in _STATUS_KIND.items():
        kinds[status == name] = kind
    by_status = pd.notna(kinds) & orig_trial_ok

    # Ok rows against the original's same output on the same input.
    where = np.full(int(output_all.max()) + 1, -1, dtype=np.int64)
    where[output_o[::-1]] = np.arange(len(output_o))[::-1]  # the first original row of each output
    pos = where[output_m]
    found = pos >= 0
    take = np.maximum(pos, 0)

    def orig_col(values: np.ndarray, missing):
        return np.where(found, values[take], missing)

    m_ok = (status == Status.OK) & _comparable(mut)
    o_ok_rows = orig_ok & _comparable(orig)
    o_ok = orig_col(o_ok_rows, False).astype(bool)
    both = m_ok & o_ok & orig_trial_ok

    nf_mut = _nonfinite_disagreement(mut)
    nf_orig = orig_col(_nonfinite_disagreement(orig), False).astype(bool)
    by_nonfinite = both & nf_mut & ~nf_orig

    e_mut = mut["fp64_error"].to_numpy(dtype=np.float64, na_value=np.nan)
    e_orig = orig_col(orig["fp64_error"].to_numpy(dtype=np.float64, na_value=np.nan), np.nan)
    # The original counts as deterministic only if its two runs were bitwise equal on every Ok output of every
    # input of the problem: an atomics kernel is often bitwise repeatable on one input by luck.
    o_equal = _is_true(orig, "repeat_bitwise_equal") | ~o_ok_rows
    o_problem = orig["problem"].to_numpy(dtype=object)
    unstable = set(o_problem[~o_equal])
    deterministic = ~np.isin(mut["problem"].to_numpy(dtype=object), list(unstable))
    o_repeat = orig_col(_is_true(orig, "repeat_bitwise_equal"), False).astype(bool) & deterministic
    o_n = orig_col(orig["fp64_n"].to_numpy(dtype=np.float64, na_value=0.0), 0.0)
    factor = np.where(o_repeat & (o_n >= margin.small_output), margin.factor, margin.unstable_factor)
    with np.errstate(invalid="ignore", over="ignore"):
        threshold = np.maximum(factor * e_orig, margin.floor)
        by_error = both & ~nf_mut & ~nf_orig & (e_mut > threshold)
    by_repeat = both & _is_false(mut, "repeat_bitwise_equal") & o_repeat

    parts = []
    for mask, kind in ((by_status, kinds), (by_nonfinite, "nonfinite"), (by_error, "error"),
                       (by_repeat, "nondeterministic")):
        hit = np.flatnonzero(mask)
        parts.append(pd.DataFrame({
            "row": positions[~is_orig][hit],
            "problem": mut["problem"].to_numpy(dtype=object)[hit],
            "mutant_id": mut["mutant_id"].to_numpy(dtype=object)[hit],
            "input_id": mut["input_id"].to_numpy(dtype=object)[hit],
            "output_index": mut["output_index"].to_numpy()[hit],
            "kind": kind[hit] if isinstance(kind, np.ndarray) else kind,
            "error": np.nan if kind is kinds else e_mut[hit], "baseline": e_orig[hit]}))
    return pd.concat(parts, ignore_index=True)


def witness(frame: pd.DataFrame, margin: Margin = Margin(), inputs: Sequence[str] | None = None) -> pd.DataFrame:
    """Per mutant (problem, mutant_id) of the frame, in order of first appearance: witnessed, kind (the
    highest-priority kind, see `KINDS`), kinds (all, comma-separated), input_id (an input of that kind, the
    first in key order), error (the largest E of the mutant over the witness pool's Ok outputs),
    witness_inputs (how many inputs witness it). Mutants never witnessed have witnessed False and kind None.
    `inputs`: the witness pool (default: every input of the frame)."""
    frame = frame[[c for c in _COLUMNS if c in frame.columns]]
    if inputs is not None:
        frame = frame[frame["input_id"].isin(list(inputs)).to_numpy()]
    kernel = _kernels(frame)
    is_mut = ~frame["mutant_id"].isin([ORIGINAL, REFERENCE]).to_numpy()
    mut_rows = np.flatnonzero(is_mut)
    codes, first = np.unique(kernel[mut_rows], return_index=True)
    order = np.argsort(first, kind="stable")
    codes, first = codes[order], mut_rows[first[order]]
    position = np.full(int(kernel.max()) + 1 if len(kernel) else 0, -1, dtype=np.int64)
    position[codes] = np.arange(len(codes))
    n = len(codes)
    result = pd.DataFrame({"problem": frame["problem"].to_numpy(dtype=object)[first],
                           "mutant_id": frame["mutant_id"].to_numpy(dtype=object)[first]})
    ok = is_mut & (frame["status"].to_numpy(dtype=object) == Status.OK)
    error = np.full(n, np.nan)
    errors = frame["fp64_error"].to_numpy(dtype=np.float64, na_value=np.nan)
    ok_pos, ok_err = position[kernel[ok]], errors[ok]
    valid = ~np.isnan(ok_err)
    np.fmax.at(error, ok_pos[valid], ok_err[valid])
    witnessed = np.zeros(n, dtype=bool)
    kind = np.full(n, None, dtype=object)
    kinds = np.full(n, None, dtype=object)
    input_id = np.full(n, None, dtype=object)
    count = np.zeros(n, dtype=np.int64)
    hits = witness_rows(frame, margin)
    if not hits.empty:
        hits = hits.assign(_pos=position[kernel[hits["row"].to_numpy()]],
                           _rank=hits["kind"].map({k: i for i, k in enumerate(KINDS)}).to_numpy())
        hits = hits.sort_values(["_pos", "_rank", "input_id", "output_index"], kind="stable")
        best = hits.drop_duplicates("_pos")
        at = best["_pos"].to_numpy()
        witnessed[at] = True
        kind[at] = best["kind"].to_numpy(dtype=object)
        input_id[at] = best["input_id"].to_numpy(dtype=object)
        for k in KINDS:
            has = np.zeros(n, dtype=bool)
            has[hits.loc[(hits["kind"] == k).to_numpy(), "_pos"].to_numpy()] = True
            kinds[has] = np.where(pd.isna(kinds[has]), k, kinds[has].astype(str) + "," + k)
        pairs = hits[["_pos", "input_id"]].drop_duplicates()
        count = np.bincount(pairs["_pos"].to_numpy(), minlength=n).astype(np.int64)
    result["witnessed"] = witnessed
    for name, values in (("kind", kind), ("kinds", kinds), ("input_id", input_id)):
        result[name] = pd.Series(values, dtype=object)  # None where not witnessed
    result["witness_inputs"] = count
    result["error"] = error
    return result


def _kernels(frame: pd.DataFrame) -> np.ndarray:
    """Dense codes of (problem, mutant_id) per row: the frame's `kernel` column where it has one."""
    if "kernel" in frame.columns:
        return frame["kernel"].to_numpy(dtype=np.int64)
    return pd.MultiIndex.from_arrays([frame["problem"], frame["mutant_id"]]).factorize()[0].astype(np.int64)


def _keys(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Dense codes of (problem, input_id) and of (problem, input_id, output_index) per row: the frame's
    `trial` column where it has one (`scoring.Observations`), else computed."""
    if "trial" in frame.columns:
        trial = frame["trial"].to_numpy(dtype=np.int64)
    else:
        trial = pd.MultiIndex.from_arrays([frame["problem"], frame["input_id"]]).factorize()[0].astype(np.int64)
    index = frame["output_index"].to_numpy(dtype=np.int64)
    pair = trial * (int(index.max()) + 1 if len(index) else 1) + index
    return trial, pd.factorize(pair)[0].astype(np.int64)


def _is_true(frame: pd.DataFrame, name: str) -> np.ndarray:
    """True where the (possibly missing) boolean column is True."""
    series = frame[name]
    if series.dtype == bool:
        return series.to_numpy()
    return series.astype("boolean").fillna(False).to_numpy(dtype=bool)


def _is_false(frame: pd.DataFrame, name: str) -> np.ndarray:
    """True where the (possibly missing) boolean column is False: a `{name}_false` column when the frame
    has one (`scoring.Observations`), else the column itself."""
    if f"{name}_false" in frame.columns:
        return frame[f"{name}_false"].to_numpy(dtype=bool)
    return (~frame[name].astype("boolean")).fillna(False).to_numpy(dtype=bool)


def _comparable(frame: pd.DataFrame) -> np.ndarray:
    """The row's fp64 evidence exists and its shapes and dtypes match."""
    if "fp64_comparable" in frame.columns:
        return frame["fp64_comparable"].to_numpy(dtype=bool)
    return _is_true(frame, "fp64_shape_match") & _is_true(frame, "fp64_dtype_match")
