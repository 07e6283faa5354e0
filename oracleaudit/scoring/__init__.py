"""Scoring (stage 3): oracle protocols applied to an evidence store and its mutants — which witnessed mutants
each oracle kills, which escape, how often it rejects the original kernels — and the analyses built on it.

Reading
    `Audit.load(evidence, mutants)` reads the store once into `Observations` (flat numpy columns; the error
    hulls as flat point arrays with the row each point belongs to) and joins `mutants.jsonl`. Scored mutants
    are the compiled, non-equivalent ones (status Pending) that have rows in the store. The kill witness
    (`witness.py`) is derived when the audit is loaded.

Verdicts (`Audit.verdicts(oracle)`), exact and vectorised over the rows
    For each stage of the protocol, every row of a kernel (a mutant or the original) on an input the stage
    draws gets a state: pass, skip or fail. A non-Ok status fails or skips as the stage's status policy says;
    an Ok row is judged by the rule on the evidence against the protocol's reference (fp32_* or fp64_*):
    allclose replayed on the stored hull points with PyTorch's own operations in the comparison dtype (the
    verdict torch.allclose gives on the raw tensors), the fraction within tolerance from the grid counts,
    the metrics, all-zero, repeat and timeout flags. A trial is one (stage, input) of one kernel: it fails if
    any of its output rows fails. A kernel is rejected ("killed") if any trial fails. Inputs the stage names
    that a problem lacks, and inputs without a reference row (`missing_reference = "skip"`), are not drawn.

    Verdicts are exact except where the evidence cannot tell (counted as `inexact_verdicts`): an incomplete
    hull whose tolerance line passes within rounding of it (`ErrorEvidence.is_exact`), and the NaN rules that
    need to know whether the output (or the reference) holds any non-finite value where the counts leave it
    open (an Inf counted in `n_inf_mismatch` or next to a NaN of the other side); such a value is taken to be
    present.

Output folder (`write_outputs`, the `--out DIR` of `oracleaudit score`)
    kill_matrix.parquet   one row per scored mutant: mutant_id, problem, level, family, rule, witnessed,
                          witness_kind, witness_input, witness_error, then one boolean column per oracle
                          (killed); schema_version in the Parquet metadata
    scores.json           the per-oracle results (the `--json` output)
    escaped/<oracle>.jsonl  every witnessed mutant the oracle did not kill, with its witness and diff
    unwitnessed.jsonl     every scored mutant no input witnesses (possibly equivalent, possibly just hard),
                          with the oracles that reject it anyway
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import ErrorEvidence, grid_key
from oracleaudit.files import write_atomic, write_with
from oracleaudit.mutant import DIFFS_DIR, PENDING, read_mutants
from oracleaudit.scoring.oracle import MATH_MODES, Oracle, Rule, Stage
from oracleaudit.status import ORIGINAL, REFERENCE, Status
from oracleaudit.store import EvidenceStore
from oracleaudit.scoring.witness import Margin, required_tolerance, witness

__all__ = [
    "ESCAPED_DIR",
    "KILL_MATRIX_FILE",
    "KILL_MATRIX_SCHEMA_VERSION",
    "SCORES_FILE",
    "UNWITNESSED_FILE",
    "Audit",
    "Observations",
    "Verdicts",
    "read_kill_matrix",
    "score",
    "write_outputs",
]

KILL_MATRIX_FILE = "kill_matrix.parquet"
UNWITNESSED_FILE = "unwitnessed.jsonl"
SCORES_FILE = "scores.json"
ESCAPED_DIR = "escaped"
KILL_MATRIX_SCHEMA_VERSION = 1
SCHEMA_VERSION_KEY = b"oracleaudit.schema_version"

PASS, SKIP, FAIL = 0, 1, 2
PREFIXES = ("fp32_", "fp64_")
_COUNTS = ("n", "n_unequal", "n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal", "n_overflow")
_STATS = ("l2_diff", "cosine", "rmse", "rel_l1", "hull_slack")
_LEVEL = re.compile(r"^level(\d+)/")
_SEED = re.compile(r"/s=\d+")


# ---------------------------------------------------------------------------------------------------------
# Observations: the evidence store as flat columns


def _bool(column: pa.ChunkedArray, missing: bool) -> np.ndarray:
    return pc.fill_null(column, missing).to_numpy(zero_copy_only=False).astype(bool, copy=False)


def _int(column: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _float(column: pa.ChunkedArray) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)  # nulls become NaN


def _category(column: pa.ChunkedArray) -> pd.Categorical:
    encoded = pc.dictionary_encode(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return pd.Categorical.from_codes(codes, categories=pd.Index(encoded.dictionary.to_pylist(), dtype=object))


def store_schema_names() -> list[str]:
    from oracleaudit.store import OBSERVATION_SCHEMA

    return OBSERVATION_SCHEMA.names


CORE_COLUMNS = [
    "problem", "mutant_id", "input_id", "status", "distribution", "shape_variant", "output_index", "time_ms",
    "repeat_bitwise_equal", "ref_matmul_tf32", "ref_cudnn_tf32",
    *(p + name for p in PREFIXES for name in ("shape_match", "dtype_match", *_COUNTS, *_STATS, "out_dtype",
                                              "compare_dtype", "hull_complete", "all_zero_out", "hull_r", "hull_d")),
]
"""The store columns `Observations.read` reads at once; the grid counts and shapes are read when needed."""


class Observations:
    """The rows of an evidence store as a DataFrame of plain numpy columns (`frame`) plus, per evidence
    prefix, the error hull as flat arrays: `hull[prefix] = (r, d, owner)` with `owner` the row of each point
    (ascending). Nullable booleans become `{name}` (True only if stored True) and `{name}_false` (False
    only if stored False); missing counts become 0 and missing statistics NaN; `{prefix}present` says
    whether the row holds that evidence at all. The tolerance-grid counts stay in the Arrow table until a
    rule asks for one (`within`). Inferred rows (not observed: store.py) are left out when reading a store,
    so their (variant, input) counts as unobserved; `inferred` is how many there were."""

    def __init__(self, table: pa.Table, store: EvidenceStore | None = None, keep: pa.Array | None = None,
                 inferred: int = 0):
        self.num_rows = table.num_rows
        self._table = table
        self._store = store
        self._keep = keep  # the store's rows kept (observed), as a boolean mask; None: all
        self.inferred = inferred
        self._lazy: dict[str, Any] = {}
        data: dict[str, Any] = {}
        for name in ("problem", "mutant_id", "input_id", "status", "distribution", "shape_variant"):
            data[name] = _category(table.column(name))
        data["output_index"] = table.column("output_index").to_numpy(zero_copy_only=False).astype(np.int64)
        data["time_ms"] = _float(table.column("time_ms"))
        repeat = table.column("repeat_bitwise_equal")
        data["repeat_bitwise_equal"] = _bool(repeat, False)
        data["repeat_bitwise_equal_false"] = _bool(pc.invert(repeat), False)
        for name in ("ref_matmul_tf32", "ref_cudnn_tf32"):
            column = table.column(name)
            data[name] = _bool(column, False)
            data[f"{name}_known"] = _bool(pc.is_valid(column), False)
        self.hull: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.grid: tuple[float, ...] = ()
        for p in PREFIXES:
            shape = table.column(p + "shape_match")
            data[p + "present"] = _bool(pc.is_valid(shape), False)
            data[p + "comparable"] = _bool(shape, False) & _bool(table.column(p + "dtype_match"), False)
            for name in _COUNTS:
                data[p + name] = _int(table.column(p + name))
            for name in _STATS:
                data[p + name] = _float(table.column(p + name))
            data[p + "out_dtype"] = _category(table.column(p + "out_dtype"))
            data[p + "compare_dtype"] = _category(table.column(p + "compare_dtype"))
            data[p + "hull_complete"] = _bool(table.column(p + "hull_complete"), True)
            data[p + "all_zero_out"] = _bool(table.column(p + "all_zero_out"), False)
            if p == "fp32_":
                names = store_schema_names() if store is not None else table.column_names
                self.grid = tuple(sorted(float(n[len(p) + len("within_"):]) for n in names
                                         if n.startswith(p + "within_")))
            self.hull[p] = self._flat_hull(table, p)
        for p in PREFIXES:
            data[p + "hull_points"] = np.bincount(self.hull[p][2], minlength=self.num_rows).astype(np.int64)
        data["fp64_error"] = self._error(data, "fp64_")  # the witness needs it; fp32_error when asked
        codes = {name: np.asarray(data[name].codes, dtype=np.int64) for name in ("problem", "mutant_id", "input_id")}
        data["unit"] = _combine(codes["problem"], codes["mutant_id"])
        data["trial"] = _combine(codes["problem"], codes["input_id"])
        output_key = _combine(data["trial"], data["output_index"])
        for p in PREFIXES:
            data[p + "ref_nonfinite"] = _reference_nonfinite(data, p, output_key)
        self.frame = pd.DataFrame(data, copy=False)

    @staticmethod
    def _flat_hull(table: pa.Table, p: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r_col = table.column(p + "hull_r").combine_chunks()
        d_col = table.column(p + "hull_d").combine_chunks()
        if isinstance(r_col, pa.ChunkedArray):  # an empty table
            r_col = pa.array([], type=pa.list_(pa.float64()))
            d_col = r_col
        owner = pc.list_parent_indices(r_col).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        r = pc.list_flatten(r_col).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        d = pc.list_flatten(d_col).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        return r, d, owner

    @classmethod
    def read(cls, store: EvidenceStore | Path | str) -> "Observations":
        """The store's rows; the columns scoring always needs are read now, the others when asked for."""
        store = store if isinstance(store, EvidenceStore) else EvidenceStore(store)
        table = store.read_table(columns=[*CORE_COLUMNS, "inferred"])
        inferred = pc.fill_null(table.column("inferred"), False).combine_chunks()
        count = int(pc.sum(inferred).as_py() or 0)
        keep = pc.invert(inferred) if count else None
        table = table.drop_columns(["inferred"])
        return cls(table.filter(keep) if keep is not None else table, store, keep, count)

    def _error(self, data: Mapping[str, np.ndarray], p: str) -> np.ndarray:
        r, d, owner = self.hull[p]
        error = required_tolerance(r, d, owner, self.num_rows, np.asarray(data[p + "n_overflow"]))
        error[~np.asarray(data[p + "comparable"], dtype=bool)] = np.nan
        return error

    def error(self, prefix: str) -> np.ndarray:
        """E = max |out − ref| / (1 + |ref|) per row against the `prefix` reference (NaN where not comparable):
        the atol = rtol tolerance each output needs (see witness.py)."""
        column = prefix + "error"
        if column not in self.frame.columns:
            self.frame[column] = self._error(self.frame, prefix)
        return self.frame[column].to_numpy()

    def _column(self, name: str) -> pa.ChunkedArray | None:
        if name not in self._lazy:
            if name in self._table.column_names:
                self._lazy[name] = self._table.column(name)
            elif self._store is not None and name in store_schema_names():
                table = self._store.read_table(columns=[name])
                self._lazy[name] = (table.filter(self._keep) if self._keep is not None else table).column(name)
            else:
                return None
        return self._lazy[name]

    def ref_shape(self, row: int, prefix: str = "fp64_") -> tuple[int, ...] | None:
        """The reference's shape on one row (read when asked for; not a frame column)."""
        value = self._column(prefix + "ref_shape")[row].as_py()
        return tuple(value) if value is not None else None

    def within(self, prefix: str, t: float) -> np.ndarray | None:
        """The count of elements within atol = rtol = t per row (0 where missing); None if t is off the grid."""
        name = f"{prefix}within_{grid_key(float(t))}"
        key = "counts:" + name
        if key not in self._lazy:
            column = self._column(name)
            if column is None:
                return None
            self._lazy[key] = _int(column)
        return self._lazy[key]

    def evidence(self, row: int, prefix: str) -> ErrorEvidence:
        """The evidence of one row (for the rare rows judged one by one: incomplete hulls, see `_allclose`)."""
        f = self.frame
        r, d, owner = self.hull[prefix]
        lo, hi = np.searchsorted(owner, [row, row + 1])
        within = tuple(int(self.within(prefix, t)[row]) for t in self.grid)
        return ErrorEvidence(
            shape_match=True, dtype_match=True, out_shape=(), ref_shape=(),
            out_dtype=str(f.at[row, prefix + "out_dtype"]), ref_dtype="", compare_dtype=str(
                f.at[row, prefix + "compare_dtype"]),
            **{name: int(f.at[row, prefix + name]) for name in _COUNTS},
            hull_r=r[lo:hi], hull_d=d[lo:hi], hull_complete=bool(f.at[row, prefix + "hull_complete"]),
            hull_slack=float(f.at[row, prefix + "hull_slack"]), tolerance_grid=self.grid, n_within=within)


# ---------------------------------------------------------------------------------------------------------
# The audit: observations joined with mutants and the witness


def _level(problem: str) -> int | None:
    match = _LEVEL.match(problem)
    return int(match.group(1)) if match else None


@dataclass
class Audit:
    """An evidence store with its mutants: what every score and analysis reads."""

    obs: Observations
    mutants: pd.DataFrame          # one row per scored mutant: unit, problem, mutant_id, family, rule, level, ...
    witness: pd.DataFrame          # per scored mutant (same order): witnessed, kind, kinds, input_id, error, ...
    mutants_dir: Path | None = None
    margin: Margin = Margin()
    excluded: dict[str, int] = field(default_factory=dict)
    _cache: dict[Any, "Verdicts"] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, evidence: Path | str, mutants: Path | str, margin: Margin = Margin()) -> "Audit":
        """Read an evidence store and the `mutants.jsonl` of the mutants it ran."""
        evidence, mutants = Path(evidence), Path(mutants)
        obs = Observations.read(EvidenceStore(evidence))
        records = read_mutants(mutants)
        return cls.from_parts(obs, records, mutants if mutants.is_dir() else mutants.parent, margin,
                              where=f"{evidence}")

    @classmethod
    def from_parts(cls, obs: Observations, records: Sequence[Any], mutants_dir: Path | None = None,
                   margin: Margin = Margin(), where: str = "the evidence store") -> "Audit":
        if obs.num_rows == 0:
            raise OracleAuditError(f"{where}: the evidence store holds no observations")
        frame = obs.frame
        for pseudo in (REFERENCE, ORIGINAL):
            if not (frame["mutant_id"] == pseudo).any():
                raise OracleAuditError(f"{where}: the evidence store holds no {pseudo!r} rows (every problem needs "
                                       "its reference and original observations)")
        table = pd.DataFrame([{"problem": m.problem, "mutant_id": m.id, "family": m.family, "rule": m.rule,
                               "status": m.status, "source": m.source, "problem_file": m.problem_file}
                              for m in records])
        if table.empty:
            raise OracleAuditError("mutants.jsonl lists no mutants")
        excluded = {"not_pending": int((table["status"] != PENDING).sum())}
        table = table[table["status"] == PENDING]
        units = frame[["problem", "mutant_id", "unit"]].drop_duplicates("unit")
        units = units.astype({"problem": object, "mutant_id": object})
        joined = table.merge(units, on=["problem", "mutant_id"], how="left")
        excluded["not_run"] = int(joined["unit"].isna().sum())
        joined = joined[joined["unit"].notna()].astype({"unit": np.int64})
        # A clone that did not compile with torch's flags in the run stage is no valid mutant.
        unbuilt = set(frame.loc[frame["status"] == Status.BUILD_ERROR, "unit"])
        excluded["build_error"] = int(joined["unit"].isin(unbuilt).sum())
        joined = joined[~joined["unit"].isin(unbuilt)]
        stored = set(units.loc[~units["mutant_id"].isin([ORIGINAL, REFERENCE]), "mutant_id"])
        excluded["unknown_in_store"] = len(stored - set(joined["mutant_id"]))
        if joined.empty:
            raise OracleAuditError(f"{where}: none of the {len(table)} compiled mutants of mutants.jsonl has "
                                   "observations in the evidence store (is it the store of these mutants?)")
        joined["level"] = [_level(p) for p in joined["problem"]]
        joined = joined.sort_values("unit").reset_index(drop=True)
        keep = np.zeros(frame["unit"].max() + 1, dtype=bool)
        keep[joined["unit"].to_numpy()] = True
        scored = keep[frame["unit"].to_numpy()] | frame["mutant_id"].isin([ORIGINAL, REFERENCE]).to_numpy()
        wit = witness(frame if scored.all() else frame[scored], margin)
        wit = joined[["problem", "mutant_id"]].merge(
            wit.astype({"problem": object, "mutant_id": object}), on=["problem", "mutant_id"], how="left")
        wit["witnessed"] = wit["witnessed"].fillna(False).astype(bool)
        for name in ("kind", "kinds", "input_id"):
            column = wit[name].astype(object)
            wit[name] = column.where(column.notna(), None)
        return cls(obs, joined, wit, mutants_dir, margin, excluded)

    # ---- verdicts ---------------------------------------------------------------------------------------

    def verdicts(self, oracle: Oracle) -> "Verdicts":
        key = _oracle_key(oracle)
        if key not in self._cache:
            self._cache[key] = _verdicts(self, oracle)
        return self._cache[key]

    def score(self, oracle: Oracle, by: Sequence[str] = (), top: int = 10) -> dict[str, Any]:
        return _score(self, oracle, by, top)

    def diff(self, mutant_id: str) -> str | None:
        if self.mutants_dir is None:
            return None
        path = self.mutants_dir / DIFFS_DIR / f"{mutant_id}.diff"
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _oracle_key(oracle: Oracle) -> Any:
    return replace(oracle, name="", description="", source="")


# ---------------------------------------------------------------------------------------------------------
# Verdicts


@dataclass
class Verdicts:
    """An oracle's verdicts on every kernel of an audit."""

    oracle: Oracle
    killed: np.ndarray             # per scored mutant (Audit.mutants order): rejected by the oracle
    drawn: np.ndarray              # per scored mutant: number of trials judged (not skipped)
    complete: np.ndarray           # per scored mutant: observed on every trial the oracle draws for its problem
    original_rejected: pd.Series   # per problem: the original fails some trial
    original_trials: int           # (stage, input) trials of originals judged
    original_trials_failed: int
    inexact: int
    mode_mismatch_rows: int
    rows: pd.DataFrame = field(repr=False)  # row, stage, state, inexact of every judged row


_NF_COUNTS = ("n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal")


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense codes 0..k-1 of the pairs (a, b) of non-negative integer codes."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64)
    pair = a.astype(np.int64) * (int(b.max()) + 1) + b.astype(np.int64)
    return pd.factorize(pair, sort=True)[0].astype(np.int64)


def _reference_nonfinite(data: Mapping[str, np.ndarray], p: str, output_key: np.ndarray) -> np.ndarray:
    """Per row, whether the reference behind its `p` evidence holds a non-finite value: 1 yes, 0 no, -1
    unknown. One reference serves every row of a (problem, input, output), so a row whose counts decide it
    (a NaN or equal Inf on the reference side; or no NaN/Inf on either side) decides it for all of them."""
    A, B, C, D, F = (data[p + n] for n in _NF_COUNTS)
    present = data[p + "comparable"]
    sure = present & ((B + C + F) > 0)
    never = present & (A == 0) & (D == 0) & ((B + C + F) == 0)
    groups = int(output_key.max()) + 1 if len(output_key) else 0
    sure_g = np.bincount(output_key[sure], minlength=groups) > 0
    never_g = np.bincount(output_key[never], minlength=groups) > 0
    return np.where(sure_g, 1, np.where(never_g, 0, -1)).astype(np.int8)[output_key]


def _nonfinite(f: pd.DataFrame, rows: np.ndarray, p: str) -> tuple[np.ndarray, ...]:
    """(out_nf, out_known, ref_nf, ref_known, both, both_known) on the given rows: whether the output / the
    reference holds a non-finite value, and whether the evidence decides it (an undecided value is taken to
    be True). Where the reference is known to be finite, every NaN/Inf count belongs to the output; the other
    reference's evidence of the same output decides the output's part too."""
    q = "fp64_" if p == "fp32_" else "fp32_"
    A, B, C, D, F = (f[p + n].to_numpy()[rows] for n in _NF_COUNTS)
    A2, B2, C2, D2, F2 = (f[q + n].to_numpy()[rows] for n in _NF_COUNTS)
    ref_p = f[p + "ref_nonfinite"].to_numpy()[rows]
    ref_q = f[q + "ref_nonfinite"].to_numpy()[rows]
    present2 = f[q + "comparable"].to_numpy()[rows]
    out_sure = ((A + C + F) > 0) | (present2 & ((A2 + C2 + F2) > 0)) \
        | ((ref_p == 0) & ((A + D) > 0)) | (present2 & (ref_q == 0) & ((A2 + D2) > 0))
    out_never = ((B == 0) & (D == 0) & ((A + C + F) == 0)) \
        | (present2 & (B2 == 0) & (D2 == 0) & ((A2 + C2 + F2) == 0)) \
        | ((ref_p == 0) & ((A + D) == 0)) | (present2 & (ref_q == 0) & ((A2 + D2) == 0))
    out_known = out_sure | out_never
    out_nf = out_sure | ~out_known
    finite_out = out_never & ~out_sure  # every mismatched Inf is then the reference's
    ref_sure = (ref_p == 1) | ((B + C + F) > 0) | (finite_out & (D > 0))
    ref_never = (ref_p == 0) | (finite_out & ((B + D) == 0))
    ref_known = ref_sure | ref_never
    ref_nf = ref_sure | ~ref_known
    both_sure = ((C + F) > 0) | ((A > 0) & (B > 0)) | (out_sure & ref_sure)
    both_never = (out_never & ~out_sure) | (ref_never & ~ref_sure)
    both_known = both_sure | both_never
    both = both_sure | ~both_known
    return out_nf, out_known, ref_nf, ref_known, both, both_known


def _allclose(audit: Audit, rows: np.ndarray, p: str, atol: np.ndarray, rtol: np.ndarray,
              equal_nan: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch.allclose(out, ref, atol, rtol, equal_nan) for comparable rows, from the evidence (per-row
    tolerances): (verdict, exact)."""
    f = audit.obs.frame
    get = lambda name: f[p + name].to_numpy()[rows]  # noqa: E731
    result = np.zeros(len(rows), dtype=bool)
    exact = np.ones(len(rows), dtype=bool)
    decided = np.zeros(len(rows), dtype=bool)
    bad = (get("n_nan_out") + get("n_nan_ref") + get("n_inf_mismatch") + get("n_overflow")) > 0
    if not equal_nan:
        bad |= get("n_nan_both") > 0
    decided |= bad
    zero = ~decided & (atol == 0) & (rtol == 0)
    result[zero] = (get("n_unequal") - get("n_nan_both"))[zero] == 0
    decided |= zero
    empty = ~decided & (get("hull_points") == 0)
    result[empty] = True
    decided |= empty
    need = np.flatnonzero(~decided)
    if len(need):
        r, d, owner = audit.obs.hull[p]
        row_pos = np.full(audit.obs.num_rows, -1, dtype=np.int64)
        row_pos[rows[need]] = need
        take = row_pos[owner] >= 0
        pos = row_pos[owner[take]]
        pr, pd_ = r[take], d[take]
        fails = np.zeros(len(pos), dtype=bool)
        names = f[p + "compare_dtype"].cat.categories
        codes = f[p + "compare_dtype"].cat.codes.to_numpy()[rows][pos]
        combos = pd.DataFrame({"dtype": codes, "atol": atol[pos], "rtol": rtol[pos]})
        for (code, a, t), index in combos.groupby(["dtype", "atol", "rtol"], sort=False).indices.items():
            dtype = getattr(torch, str(names[code]))
            rt = torch.from_numpy(pr[index]).to(dtype)  # exact: the values came from dtype
            dt = torch.from_numpy(pd_[index]).to(dtype)
            allowed = float(a) + (float(t) * rt).abs()  # the operations of torch.isclose, in its order
            fails[index] = ~(torch.isfinite(dt) & (dt <= allowed)).numpy()
        failed_rows = np.bincount(pos[fails], minlength=len(rows)) > 0
        result[need] = ~failed_rows[need]
        incomplete = need[~get("hull_complete")[need] & result[need]]
        for i in incomplete:
            ev = audit.obs.evidence(int(rows[i]), p)
            exact[i] = ev.is_exact(float(atol[i]), float(rtol[i]), equal_nan)
    return result, exact


def _metric_ok(value: np.ndarray, l2_diff: np.ndarray, passes) -> np.ndarray:
    """A metric check: `passes(value)` where the metric is defined; where it is undefined (a zero norm), the
    output must equal the reference on its finite elements (l2_diff = 0, or no finite element at all)."""
    defined = ~np.isnan(value)
    with np.errstate(invalid="ignore"):
        ok = np.where(defined, passes(np.nan_to_num(value, nan=0.0)), False)
    identical = (l2_diff == 0) | np.isnan(l2_diff)
    return np.where(defined, ok, identical)


def _judge(audit: Audit, rows: np.ndarray, p: str, rule: Rule, atol: np.ndarray, rtol: np.ndarray,
           grid_t: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The rule's verdict on Ok rows: (fails, inexact). A rule that asks whether the output or the reference
    holds NaN/Inf is evaluated for every value the evidence leaves possible; where they disagree the verdict
    (taken with the undecided value present) is inexact."""
    f = audit.obs.frame
    get = lambda name: f[name].to_numpy()[rows]  # noqa: E731
    comparable = get(p + "comparable")
    inexact = np.zeros(len(rows), dtype=bool)
    compare = np.zeros(len(rows), dtype=bool)  # fails of the element-wise comparison
    index = np.flatnonzero(comparable)
    if rule.allclose:
        ok, exact = _allclose(audit, rows[index], p, atol[index], rtol[index], rule.nan == "equal_nan")
        compare[index[~ok]] = True
        inexact[index[~exact]] = True
    if rule.min_fraction_within is not None:
        n = get(p + "n")
        within = np.zeros(len(rows), dtype=np.float64)
        for t in np.unique(grid_t[comparable]):
            counts = audit.obs.within(p, float(t))
            if counts is None:
                raise OracleAuditError(f"{where}: min_fraction_within needs the tolerance {float(t):g} on the "
                                       f"evidence's tolerance grid ({', '.join(f'{g:g}' for g in audit.obs.grid)})")
            pick = comparable & (grid_t == t)
            within[pick] = counts[rows[pick]]
        fraction = np.where(n > 0, within / np.maximum(n, 1), 1.0)
        compare |= fraction < rule.min_fraction_within
    l2 = get(p + "l2_diff")
    if rule.min_cosine is not None:
        compare |= ~_metric_ok(get(p + "cosine"), l2, lambda v: v >= rule.min_cosine)
    if rule.max_rel_l1 is not None:
        compare |= ~_metric_ok(get(p + "rel_l1"), l2, lambda v: v <= rule.max_rel_l1)
    if rule.max_rmse is not None:
        compare |= ~_metric_ok(get(p + "rmse"), l2, lambda v: v <= rule.max_rmse)
    if rule.all_zero_fails:
        compare |= get(p + "all_zero_out")
    repeat = get("repeat_bitwise_equal_false") if rule.bitwise_repeat else np.zeros(len(rows), dtype=bool)

    def outcome(out_nf: np.ndarray, ref_nf: np.ndarray) -> np.ndarray:
        fails = compare.copy()
        if rule.nan == "nonfinite_in_both_passes":
            fails = np.where(out_nf, ~ref_nf, fails)  # both non-finite: pass; only the output: fail
        if rule.nonfinite_output_fails:
            fails |= out_nf
        return ~comparable | fails | repeat

    if rule.nan == "nonfinite_in_both_passes" or rule.nonfinite_output_fails:
        out_nf, out_known, ref_nf, ref_known, _, _ = _nonfinite(f, rows, p)
        fails = outcome(out_nf, ref_nf)
        for o, r in ((True, True), (True, False), (False, True), (False, False)):
            o_v = np.where(out_known, out_nf, o)
            r_v = np.where(ref_known, ref_nf, r)
            inexact |= comparable & (outcome(o_v, r_v) != fails)
    else:
        fails = outcome(np.zeros(len(rows), bool), np.zeros(len(rows), bool))
    return fails, inexact & comparable


def _tolerances(audit: Audit, oracle: Oracle, stage: Stage, rows: np.ndarray, p: str) -> tuple[np.ndarray, ...]:
    """(atol, rtol, grid t) per row: the protocol's tolerance for the row's problem and output dtype, scaled."""
    f = audit.obs.frame
    problems = f["problem"].cat.codes.to_numpy()[rows]
    dtypes = f[p + "out_dtype"].cat.codes.to_numpy()[rows]
    names_p = f["problem"].cat.categories
    names_d = f[p + "out_dtype"].cat.categories
    pair = problems.astype(np.int64) * (len(names_d) + 1) + (dtypes.astype(np.int64) + 1)
    uniq, inverse = np.unique(pair, return_inverse=True)
    pair_atol = np.zeros(len(uniq))
    pair_rtol = np.zeros(len(uniq))
    for k, code in enumerate(uniq):
        problem = names_p[code // (len(names_d) + 1)]
        d = code % (len(names_d) + 1) - 1
        tol = oracle.tolerance.lookup(problem, names_d[d] if d >= 0 else "float32").scaled(stage.tolerance_scale)
        pair_atol[k], pair_rtol[k] = tol.atol, tol.rtol
    atol, rtol = pair_atol[inverse], pair_rtol[inverse]
    return atol, rtol, atol.copy()


def _stage_inputs(audit: Audit, stage: Stage) -> np.ndarray:
    """Per row: the stage draws the row's input."""
    f = audit.obs.frame
    drawn = np.array([stage.draws(str(k)) for k in f["input_id"].cat.categories], dtype=bool)
    return drawn[f["input_id"].cat.codes.to_numpy()] if len(drawn) else np.zeros(len(f), dtype=bool)


def _has_reference(audit: Audit) -> np.ndarray:
    """Per row: its (problem, input) has a reference row with status Ok."""
    f = audit.obs.frame
    trial = f["trial"].to_numpy()
    is_ref = (f["mutant_id"] == REFERENCE).to_numpy() & (f["status"] == Status.OK).to_numpy()
    has = np.zeros(trial.max() + 1 if len(trial) else 0, dtype=bool)
    has[trial[is_ref]] = True
    return has[trial]


def judge_rows(audit: Audit, oracle: Oracle, rows: np.ndarray, prefix: str | None = None) -> pd.DataFrame:
    """The state (PASS, SKIP, FAIL) of each given row under each stage that draws its input: a frame with
    row, stage (index), state, inexact. `prefix` overrides the reference's evidence columns."""
    f = audit.obs.frame
    p = prefix or ("fp64_" if oracle.reference.precision == "fp64" else "fp32_")
    status = f["status"].to_numpy(dtype=object)
    has_ref = _has_reference(audit) if prefix is None else np.ones(len(f), dtype=bool)
    in_rows = np.zeros(len(f), dtype=bool)
    in_rows[rows] = True
    parts = []
    for s_index, stage in enumerate(oracle.stages):
        where = f"oracle {oracle.name}: stage {stage.name}"
        mask = in_rows & _stage_inputs(audit, stage)
        if not has_ref.all():
            if stage.missing_reference == "skip":
                mask &= has_ref
        sel = np.flatnonzero(mask)
        if not len(sel):
            continue
        state = np.full(len(sel), PASS, dtype=np.int8)
        inexact = np.zeros(len(sel), dtype=bool)
        fail_set, skip_set = oracle.stage_statuses(stage)
        st = status[sel]
        state[np.isin(st, list(skip_set))] = SKIP
        state[np.isin(st, list(fail_set))] = FAIL
        if stage.missing_reference == "fail":
            state[~has_ref[sel]] = FAIL
        ok = (st == Status.OK) & (state == PASS)
        if oracle.timeout_s is not None:
            slow = ok & (f["time_ms"].to_numpy()[sel] > oracle.timeout_s * 1000.0)
            state[slow] = FAIL
            ok &= ~slow
        ok_rows = sel[ok]
        if len(ok_rows):
            atol, rtol, grid_t = _tolerances(audit, oracle, stage, ok_rows, p)
            fails, inexact_ok = _judge(audit, ok_rows, p, oracle.stage_rule(stage), atol, rtol, grid_t, where)
            ok_index = np.flatnonzero(ok)
            state[ok_index[fails]] = FAIL
            inexact[ok_index] = inexact_ok
        parts.append(pd.DataFrame({"row": sel, "stage": s_index, "state": state, "inexact": inexact}))
    if not parts:
        return pd.DataFrame({"row": np.zeros(0, np.int64), "stage": np.zeros(0, np.int64),
                             "state": np.zeros(0, np.int8), "inexact": np.zeros(0, bool)})
    return pd.concat(parts, ignore_index=True)


def _verdicts(audit: Audit, oracle: Oracle) -> Verdicts:
    f = audit.obs.frame
    unit = f["unit"].to_numpy()
    kernel_units = np.concatenate([audit.mutants["unit"].to_numpy(),
                                   f.loc[(f["mutant_id"] == ORIGINAL).to_numpy(), "unit"].unique()])
    is_kernel = np.zeros(unit.max() + 1, dtype=bool)
    is_kernel[kernel_units] = True
    rows = np.flatnonzero(is_kernel[unit])
    judged = judge_rows(audit, oracle, rows)
    if judged.empty:
        inputs = "; ".join(f"{s.name}: {', '.join(i.describe() for i in s.inputs)}" for s in oracle.stages)
        raise OracleAuditError(f"oracle {oracle.name} draws no input of the evidence store (its inputs: {inputs})")
    r = judged["row"].to_numpy()
    state = judged["state"].to_numpy()
    n_units = unit.max() + 1
    u = unit[r]
    failed = np.bincount(u[state == FAIL], minlength=n_units) > 0
    # trials: (unit, stage, input); a trial is judged when none of its rows is skipped, or it fails
    trial_key = pd.DataFrame({"u": u, "stage": judged["stage"].to_numpy(), "input": f["input_id"].cat.codes.to_numpy()[r],
                              "state": state})
    trials = trial_key.groupby(["u", "stage", "input"], sort=False)["state"].max().reset_index()
    judged_trials = trials[trials["state"] != SKIP]
    drawn = np.bincount(judged_trials["u"].to_numpy(), minlength=n_units)
    present = np.bincount(trials["u"].to_numpy(), minlength=n_units)
    m_problem = f.groupby("unit", sort=True, observed=True)["problem"].first()
    problem_of_unit = np.full(n_units, -1, dtype=np.int64)
    problem_of_unit[m_problem.index.to_numpy()] = m_problem.cat.codes.to_numpy()
    expected = _expected_trials(audit, oracle)[problem_of_unit]

    m_units = audit.mutants["unit"].to_numpy()
    orig_rows = (f["mutant_id"] == ORIGINAL).to_numpy()
    orig_units = f.loc[orig_rows, ["unit", "problem"]].drop_duplicates("unit")
    original_rejected = pd.Series(failed[orig_units["unit"].to_numpy()],
                                  index=orig_units["problem"].astype(str).to_numpy(), name="rejected").sort_index()
    is_orig_unit = np.zeros(n_units, dtype=bool)
    is_orig_unit[orig_units["unit"].to_numpy()] = True
    orig_trials = judged_trials[is_orig_unit[judged_trials["u"].to_numpy()]]
    mode = MATH_MODES[oracle.reference.math_mode]
    mismatch = 0
    if oracle.reference.precision == "fp32":
        known = f["ref_matmul_tf32_known"].to_numpy()[r] & f["ref_cudnn_tf32_known"].to_numpy()[r]
        differs = (f["ref_matmul_tf32"].to_numpy()[r] != mode[0]) | (f["ref_cudnn_tf32"].to_numpy()[r] != mode[1])
        mismatch = int((known & differs).sum())
    return Verdicts(oracle=oracle, killed=failed[m_units], drawn=drawn[m_units],
                    complete=present[m_units] >= expected[m_units],
                    original_rejected=original_rejected, original_trials=len(orig_trials),
                    original_trials_failed=int((orig_trials["state"] == FAIL).sum()),
                    inexact=int(judged["inexact"].sum()), mode_mismatch_rows=mismatch, rows=judged)


def _expected_trials(audit: Audit, oracle: Oracle) -> np.ndarray:
    """Per problem code: the (stage, input) trials the oracle draws on that problem, over the inputs the
    store has reference rows for (the inputs the run planned; stages that skip inputs without an Ok
    reference count only the inputs with one)."""
    f = audit.obs.frame
    is_ref = (f["mutant_id"] == REFERENCE).to_numpy()
    problems = f["problem"].cat.codes.to_numpy()[is_ref]
    inputs = f["input_id"].cat.codes.to_numpy()[is_ref]
    ok = (f["status"] == Status.OK).to_numpy()[is_ref]
    pairs = pd.DataFrame({"problem": problems, "input": inputs, "ok": ok}).groupby(
        ["problem", "input"], sort=False)["ok"].max().reset_index()
    count = np.zeros(len(f["problem"].cat.categories), dtype=np.int64)
    names = f["input_id"].cat.categories
    for stage in oracle.stages:
        drawn = np.array([stage.draws(str(k)) for k in names], dtype=bool)
        take = drawn[pairs["input"].to_numpy()] if len(names) else np.zeros(len(pairs), dtype=bool)
        if stage.missing_reference == "skip":
            take &= pairs["ok"].to_numpy()
        count += np.bincount(pairs["problem"].to_numpy()[take], minlength=len(count))
    return count


# ---------------------------------------------------------------------------------------------------------
# Scores


def _rate(killed: int, witnessed: int) -> float | None:
    return round(killed / witnessed, 6) if witnessed else None


def _group(frame: pd.DataFrame, by: str) -> dict[str, dict[str, Any]]:
    """Counts per group. Detection is over the witnessed mutants the oracle observed on all its inputs or
    killed: a mutant it could not observe on some input is neither caught nor escaped."""
    out = {}
    for key, part in frame.groupby(by, sort=True, dropna=False):
        w = int(part["witnessed"].sum())
        k = int((part["witnessed"] & part["killed"]).sum())
        u = int((part["witnessed"] & ~part["killed"] & ~part["complete"]).sum())
        out[str(key)] = {"mutants": len(part), "witnessed": w, "killed": k, "unobserved": u,
                         "detection": _rate(k, w - u)}
    return out


def _score(audit: Audit, oracle: Oracle, by: Sequence[str], top: int) -> dict[str, Any]:
    v = audit.verdicts(oracle)
    frame = audit.mutants[["mutant_id", "problem", "family", "rule", "level"]].copy()
    frame["witnessed"] = audit.witness["witnessed"].to_numpy()
    frame["killed"] = v.killed
    frame["complete"] = v.complete
    frame["level"] = frame["level"].map(lambda x: "unknown" if x is None or pd.isna(x) else f"level{int(x)}")
    w = int(frame["witnessed"].sum())
    k = int((frame["witnessed"] & frame["killed"]).sum())
    unobserved = frame["witnessed"] & ~frame["killed"] & ~frame["complete"]
    u = int(unobserved.sum())
    clean = set(v.original_rejected.index[~v.original_rejected.to_numpy()])
    in_clean = frame["problem"].isin(clean)
    cw = int((frame["witnessed"] & in_clean & ~unobserved).sum())
    ck = int((frame["witnessed"] & frame["killed"] & in_clean).sum())
    escaped = _escaped(audit, v)
    result: dict[str, Any] = {
        "oracle": oracle.name,
        "description": oracle.description,
        "reference": f"{oracle.reference.precision} ({oracle.reference.math_mode})",
        "mutants": len(frame),
        "witnessed": w,
        "killed": k,
        "detection": _rate(k, w - u),
        "detection_lower_bound": _rate(k, w),
        "escaped": w - k - u,
        "unobserved": u,
        "unwitnessed": len(frame) - w,
        "unwitnessed_killed": int((~frame["witnessed"] & frame["killed"]).sum()),
        "false_alarms": int(v.original_rejected.sum()),
        "false_alarm_problems": list(v.original_rejected.index[v.original_rejected.to_numpy()]),
        "false_alarm_trials": v.original_trials_failed,
        "original_trials": v.original_trials,
        "problems": len(v.original_rejected),
        "clean_detection": _rate(ck, cw),
        "not_drawn": int((v.drawn == 0).sum()),
        "inexact_verdicts": v.inexact,
        "reference_mode_mismatch_rows": v.mode_mismatch_rows,
        "by_family": {key: {x: val[x] for x in ("witnessed", "killed", "unobserved", "detection")}
                      for key, val in _group(frame, "family").items()},
        "by_level": _group(frame, "level"),
        "escaped_top": [{**e, "diff": audit.diff(e["mutant_id"])} for e in escaped[:top]],
        "excluded_mutants": dict(audit.excluded),
        "witness_margin": audit.margin.as_json(),
    }
    for name in by:
        if name not in ("family", "rule", "problem", "level"):
            raise OracleAuditError(f"--by must be family, rule, problem or level, got {name!r}")
        result[f"by_{name}"] = _group(frame, name)
        if name == "family":
            result["by_family"] = {key: {x: val[x] for x in ("witnessed", "killed", "unobserved", "detection")}
                                   for key, val in result["by_family"].items()}
    if v.mode_mismatch_rows:
        result["warning"] = (f"{v.mode_mismatch_rows} observations come from an fp32 reference whose TF32 flags "
                             f"differ from this protocol's math mode ({oracle.reference.math_mode}): their "
                             "verdicts are those of the evidence's reference")
    return result


def _escaped(audit: Audit, v: Verdicts) -> list[dict[str, Any]]:
    """Witnessed mutants the oracle observed on all its inputs and did not kill, the most wrong first (by witness error, status witnesses
    first)."""
    w = audit.witness
    mask = w["witnessed"].to_numpy() & ~v.killed & v.complete
    if not mask.any():
        return []
    frame = audit.mutants.loc[mask, ["mutant_id", "problem", "family", "rule"]].copy()
    frame["witness_kind"] = w.loc[mask, "kind"].to_numpy()
    frame["witness_input"] = w.loc[mask, "input_id"].to_numpy()
    error = w.loc[mask, "error"].to_numpy(dtype=np.float64, na_value=np.nan)
    frame["witness_error"] = error
    frame["_sort"] = np.where(np.isnan(error), np.inf, error)
    frame = frame.sort_values(["_sort", "mutant_id"], ascending=[False, True]).drop(columns="_sort")
    records = frame.to_dict("records")
    for record in records:
        e = record["witness_error"]
        record["witness_error"] = None if e is None or (isinstance(e, float) and math.isnan(e)) else float(e)
    return records


def score(audit: Audit, oracles: Sequence[Oracle], by: Sequence[str] = (), top: int = 10) -> list[dict[str, Any]]:
    """The score of each oracle (see `Audit.score`)."""
    return [audit.score(oracle, by, top) for oracle in oracles]


# ---------------------------------------------------------------------------------------------------------
# Output folder


def _write_parquet(table: pa.Table, path: Path) -> None:
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def kill_matrix(audit: Audit, oracles: Sequence[Oracle]) -> pa.Table:
    """The kill matrix: one row per scored mutant, one boolean column per oracle."""
    w = audit.witness
    error = w["error"].to_numpy(dtype=np.float64, na_value=np.nan)
    columns: dict[str, Any] = {
        "mutant_id": pa.array(audit.mutants["mutant_id"].astype(str).tolist(), pa.string()),
        "problem": pa.array(audit.mutants["problem"].astype(str).tolist(), pa.string()),
        "level": pa.array([None if pd.isna(x) else int(x) for x in audit.mutants["level"]], pa.int32()),
        "family": pa.array(audit.mutants["family"].astype(str).tolist(), pa.string()),
        "rule": pa.array(audit.mutants["rule"].astype(str).tolist(), pa.string()),
        "witnessed": pa.array(w["witnessed"].to_numpy(dtype=bool)),
        "witness_kind": pa.array([k if isinstance(k, str) else None for k in w["kind"]], pa.string()),
        "witness_input": pa.array([k if isinstance(k, str) else None for k in w["input_id"]], pa.string()),
        "witness_error": pa.array(error, pa.float64(), mask=np.isnan(error)),
    }
    for oracle in oracles:
        if oracle.name in columns:
            raise OracleAuditError(f"oracle name {oracle.name!r} repeats or clashes with a kill-matrix column")
        columns[oracle.name] = pa.array(audit.verdicts(oracle).killed.astype(bool))
    table = pa.table(columns)
    return table.replace_schema_metadata({SCHEMA_VERSION_KEY: str(KILL_MATRIX_SCHEMA_VERSION).encode()})


def write_outputs(out: Path, audit: Audit, oracles: Sequence[Oracle], scores: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Write the output folder (see the module docstring); returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / KILL_MATRIX_FILE, out / SCORES_FILE]
    _write_parquet(kill_matrix(audit, oracles), written[0])
    write_atomic(written[1], json.dumps(list(scores), indent=2, sort_keys=True) + "\n")
    unwitnessed = []
    mask = ~audit.witness["witnessed"].to_numpy()
    killers = {o.name: audit.verdicts(o).killed for o in oracles}
    for i in np.flatnonzero(mask):
        m = audit.mutants.iloc[i]
        unwitnessed.append(json.dumps({"mutant_id": m["mutant_id"], "problem": m["problem"], "family": m["family"],
                                       "rule": m["rule"], "rejected_by": [n for n, k in killers.items() if k[i]]},
                                      sort_keys=True))
    written.append(out / UNWITNESSED_FILE)
    write_atomic(written[-1], "".join(line + "\n" for line in unwitnessed))
    for oracle in oracles:
        lines = []
        for record in _escaped(audit, audit.verdicts(oracle)):
            lines.append(json.dumps({**record, "diff": audit.diff(record["mutant_id"])}, sort_keys=True))
        path = out / ESCAPED_DIR / f"{oracle.name}.jsonl"
        write_atomic(path, "".join(line + "\n" for line in lines))
        written.append(path)
    return written


def read_kill_matrix(path: Path) -> pd.DataFrame:
    """A kill matrix written by `write_outputs`, its schema version checked."""
    table = pq.read_table(path)
    version = (table.schema.metadata or {}).get(SCHEMA_VERSION_KEY)
    if version != str(KILL_MATRIX_SCHEMA_VERSION).encode():
        raise OracleAuditError(f"{path}: schema_version must be {KILL_MATRIX_SCHEMA_VERSION}, got {version!r}")
    return table.to_pandas()
