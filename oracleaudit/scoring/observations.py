"""The evidence store read for scoring: `Observations` holds its rows as flat numpy columns (nullable booleans
split, counts and statistics as numbers) and the error hulls as flat point arrays with the row each point
belongs to. Inferred rows (store.py) are left out: their (variant, input) counts as unobserved."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from oracleaudit.evidence import grid_key
from oracleaudit.scoring.witness import required_tolerance
from oracleaudit.store import OBSERVATION_SCHEMA, EvidenceStore

__all__ = ["CORE_COLUMNS", "NF_COUNTS", "PREFIXES", "Observations", "combine", "reference_nonfinite"]


PREFIXES = ("fp32_", "fp64_")

_COUNTS = ("n", "n_unequal", "n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal", "n_overflow")

_STATS = ("l2_diff", "cosine", "rmse", "rel_l1", "hull_slack")


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


def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense codes 0..k-1 of the pairs (a, b) of non-negative integer codes."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64)
    pair = a.astype(np.int64) * (int(b.max()) + 1) + b.astype(np.int64)
    return pd.factorize(pair, sort=True)[0].astype(np.int64)


NF_COUNTS = ("n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal")


def reference_nonfinite(data: Mapping[str, np.ndarray], p: str, output_key: np.ndarray) -> np.ndarray:
    """Per row, whether the reference behind its `p` evidence holds a non-finite value: 1 yes, 0 no, -1
    unknown. One reference serves every row of a (problem, input, output), so a row whose counts decide it
    (a NaN or equal Inf on the reference side; or no NaN/Inf on either side) decides it for all of them."""
    A, B, C, D, F = (data[p + n] for n in NF_COUNTS)
    present = data[p + "comparable"]
    sure = present & ((B + C + F) > 0)
    never = present & (A == 0) & (D == 0) & ((B + C + F) == 0)
    groups = int(output_key.max()) + 1 if len(output_key) else 0
    sure_g = np.bincount(output_key[sure], minlength=groups) > 0
    never_g = np.bincount(output_key[never], minlength=groups) > 0
    return np.where(sure_g, 1, np.where(never_g, 0, -1)).astype(np.int8)[output_key]


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
                names = OBSERVATION_SCHEMA.names if store is not None else table.column_names
                self.grid = tuple(sorted(float(n[len(p) + len("within_"):]) for n in names
                                         if n.startswith(p + "within_")))
            self.hull[p] = self._flat_hull(table, p)
        for p in PREFIXES:
            data[p + "hull_points"] = np.bincount(self.hull[p][2], minlength=self.num_rows).astype(np.int64)
        data["fp64_error"] = self._error(data, "fp64_")  # the witness needs it; fp32_error when asked
        codes = {name: np.asarray(data[name].codes, dtype=np.int64) for name in ("problem", "mutant_id", "input_id")}
        data["kernel"] = combine(codes["problem"], codes["mutant_id"])
        data["trial"] = combine(codes["problem"], codes["input_id"])
        output_key = combine(data["trial"], data["output_index"])
        for p in PREFIXES:
            data[p + "ref_nonfinite"] = reference_nonfinite(data, p, output_key)
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
            elif self._store is not None and name in OBSERVATION_SCHEMA.names:
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
