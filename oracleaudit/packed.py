"""The packed layout of an evidence store: the same rows as its Parquet parts in about half the bytes, for a
store that is shipped rather than appended to (the bundled kill_matrix/evidence). `EvidenceStore.pack`
writes it and `EvidenceStore.read_table` reads it back (store.py): the same rows, values (every bit) and
dtypes as the store it was packed from, in key order. This module is the codec between observation rows and
the three packed tables; store.py owns the folder and its manifest.

Folder contract (`PACKED_VERSION` 1)

    EVIDENCE/
      manifest.json              schema_version (of the rows, as in store.py), layout "packed",
                                 packed_version, meta, files: {rows|evidence|points: {file, rows, sha256}}
      packed/rows.parquet        one row per observation, in key order
      packed/evidence.parquet    one row per distinct evidence (of either prefix)
      packed/points.parquet      one row per hull point of the evidence rows, in their order

Each file carries `oracleaudit.packed_version` and `oracleaudit.schema_version` in its Parquet metadata, and
is written with zstd level 19, byte-stream-split numbers, dictionary-encoded strings and one row group:
byte-identical for the same rows with the same pyarrow.

rows.parquet      every observation column that is not an evidence column (`fp32_*`, `fp64_*`), with its
                  type, plus `fp32_evidence` and `fp64_evidence` (int32): the evidence.parquet row holding
                  that prefix's evidence columns; null where all of them are null.
evidence.parquet  the fields of `evidence.arrow_fields` without a prefix, one row for each distinct evidence
                  (equal bits and nulls; both prefixes share the table), in order of first use when the rows
                  are visited prefix by prefix, each in key order (problem, mutant_id, input_id, output_index).
                  Stored as they are, except
    hull_r, hull_d   `hull_points` (int32: the length of both lists; null where both are null) and the
                     points in points.parquet
    within_<t>       neighbour differences: n − within(largest t), then within(next larger t) − within(t);
                     a null operand counts as 0; null where the count is null
    rmse, max_abs, max_rel
                     `<name>_xor` (int64): the value's bits XOR those of a prediction (0 where exact, null
                     where the value is null). Predictions: l2_diff / √(n − n_nan_out − n_nan_ref − n_nan_both
                     − n_inf_mismatch − n_inf_equal) (0 where that count is not positive), max hull_d, and max
                     hull_d / hull_r over the points with hull_r > 0 (0 for none); a null operand counts as 0
points.parquet    r (float64: the hull_r value), q (float32) and d_xor (int64): hull_d is |r − q| computed in
                  float64 when compare_dtype is "float64" (q is then the float32 output value relative to the
                  reference's sign, since |out − ref| = | |ref| − out·sign(ref) |), else q itself; its bits
                  XOR d_xor.
Every transform keeps every bit: a value is either stored or predicted with the difference stored. A store
whose hull_r and hull_d differ in length or nullness, or hold a null point, is refused (`encode`).
bench/store_size.py measures what this saves on the bundle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import arrow_fields

__all__ = ["FILES", "PACKED_DIR", "PACKED_VERSION", "PACKED_VERSION_KEY", "PREFIXES", "decode", "encode",
           "evidence_column", "load", "write"]

PACKED_VERSION = 1
PACKED_VERSION_KEY = b"oracleaudit.packed_version"
PACKED_DIR = "packed"
FILES = ("rows", "evidence", "points")
PREFIXES = ("fp32_", "fp64_")
_FIELDS = {f.name: f.type for f in arrow_fields("")}
_WITHIN = sorted((n for n in _FIELDS if n.startswith("within_")), key=lambda n: -float(n[len("within_"):]))
_PREDICTED = ("rmse", "max_abs", "max_rel")
_NOT_FINITE = ("n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal")
_VISIT = [("problem", "ascending"), ("mutant_id", "ascending"), ("input_id", "ascending"),
          ("output_index", "ascending")]  # the key's order (store.KEY_COLUMNS): 3% fewer bytes than by input first


def evidence_column(name: str) -> tuple[str, str] | None:
    """(prefix, field) of an evidence column name, else None."""
    for p in PREFIXES:
        if name.startswith(p) and name[len(p):] in _FIELDS:
            return p, name[len(p):]
    return None


# ---- array helpers --------------------------------------------------------------------------------------


def _one(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _num(column: pa.Array | pa.ChunkedArray, dtype: Any) -> np.ndarray:
    """A numeric or boolean column as numpy, nulls as 0."""
    fill = False if pa.types.is_boolean(column.type) else 0
    return pc.fill_null(column, fill).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64).view(np.int64)


def _floats(bits: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=np.int64).view(np.float64)


def _dense(values: np.ndarray) -> np.ndarray:
    """Codes 0..k-1 in order of first appearance."""
    return pd.factorize(values)[0].astype(np.int64)


def _nullable(values: np.ndarray, like: pa.Array | pa.ChunkedArray) -> pa.Array:
    """values, null where `like` is null."""
    return pa.array(values, mask=_num(like.is_null(), bool))


def _offsets(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


def _per_list(values: np.ndarray, offsets: np.ndarray, empty: float) -> np.ndarray:
    """The maximum of each list's values; `empty` for an empty list."""
    out = np.full(len(offsets) - 1, empty, dtype=np.float64)
    starts = offsets[:-1]
    nonempty = offsets[1:] > starts
    if nonempty.any():
        out[nonempty] = np.maximum.reduceat(values, starts[nonempty])
    return out


def _d_from(r: np.ndarray, q: np.ndarray, wide: np.ndarray) -> np.ndarray:
    """hull_d's prediction from (r, q): |r − q| in float64 where `wide`, else q."""
    with np.errstate(all="ignore"):
        return np.where(wide, np.abs(r - q.astype(np.float64)), q.astype(np.float64))


def _predict(name: str, ev: Mapping[str, Any], r: np.ndarray | None, d: np.ndarray | None,
             offsets: np.ndarray | None) -> np.ndarray:
    """The prediction of rmse, max_abs or max_rel per evidence row (see the module docstring)."""
    if name == "rmse":
        finite = _num(ev["n"], np.int64) - sum(_num(ev[n], np.int64) for n in _NOT_FINITE)
        with np.errstate(all="ignore"):
            return np.where(finite > 0, _num(ev["l2_diff"], np.float64) / np.sqrt(np.maximum(finite, 1)), 0.0)
    if name == "max_abs":
        return _per_list(d, offsets, 0.0)
    with np.errstate(all="ignore"):
        return _per_list(np.where(r > 0, d / np.where(r > 0, r, 1.0), 0.0), offsets, 0.0)


# ---- encoding -------------------------------------------------------------------------------------------


def _codes(column: pa.Array) -> np.ndarray:
    """Dense integer codes, equal exactly where the column's values (bits and nulls) are equal."""
    valid = _num(column.is_valid(), np.int64)
    if pa.types.is_list(column.type):
        items = column.flatten()
        flat = (_num(items, np.int64) if pa.types.is_integer(items.type)
                else _bits(items.to_numpy(zero_copy_only=False).astype(np.float64)))
        null = _num(items.is_null(), np.int64)
        data = np.stack([np.where(null > 0, 0, flat), null], axis=1).tobytes()
        ends = _offsets(_num(column.value_lengths(), np.int64)) * 16
        value = _dense(np.array([data[a:b] for a, b in zip(ends[:-1], ends[1:])], dtype=object))
    elif pa.types.is_string(column.type):
        value = _num(column.dictionary_encode().indices, np.int64)
    elif pa.types.is_floating(column.type):
        value = _dense(np.where(valid > 0, _bits(column.to_numpy(zero_copy_only=False)), 0))
    else:
        value = _dense(_num(column, np.int64))
    return value * 2 + valid


def _distinct(table: pa.Table) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """The distinct evidence (first use first) and, per prefix, each row's evidence id (-1: all null)."""
    order = pc.sort_indices(table, sort_keys=_VISIT).to_numpy()
    schema = pa.schema([pa.field(name, kind) for name, kind in _FIELDS.items()])  # list items named as arrow_fields
    both = pa.concat_tables([table.select([p + n for n in _FIELDS]).rename_columns(list(_FIELDS)).cast(schema).take(order)
                             for p in PREFIXES]).combine_chunks()
    code = np.zeros(both.num_rows, dtype=np.int64)
    present = np.zeros(both.num_rows, dtype=bool)
    for name in _FIELDS:
        column = _one(both.column(name))
        present |= _num(column.is_valid(), bool)
        codes = _codes(column)
        code = _dense(code * (int(codes.max(initial=0)) + 1) + codes)  # both factors < 2·rows + 2: no overflow
    ids = np.full(both.num_rows, -1, dtype=np.int64)
    ids[present] = _dense(code[present])
    _, first = np.unique(ids[present], return_index=True)
    n = table.num_rows
    back = np.empty(n, dtype=np.int64)
    back[order] = np.arange(n)
    return (both.take(pa.array(np.flatnonzero(present)[first], type=pa.int64())),
            {p: ids[i * n:(i + 1) * n][back] for i, p in enumerate(PREFIXES)})


def _hull(ev: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(r, d, lengths, offsets) of the hulls, refusing what the layout cannot keep."""
    r_col, d_col = _one(ev.column("hull_r")), _one(ev.column("hull_d"))
    lengths = _num(r_col.value_lengths(), np.int64)
    if (not r_col.is_valid().equals(d_col.is_valid()) or not np.array_equal(lengths, _num(d_col.value_lengths(), np.int64))
            or r_col.flatten().null_count or d_col.flatten().null_count):
        raise OracleAuditError("cannot pack evidence whose hull_r and hull_d differ in length or nullness, or hold "
                               "a null point")
    flat = [c.flatten().to_numpy(zero_copy_only=False).astype(np.float64) for c in (r_col, d_col)]
    return flat[0], flat[1], lengths, _offsets(lengths)


def _encode_evidence(ev: pa.Table) -> tuple[pa.Table, pa.Table]:
    r, d, lengths, offsets = _hull(ev)
    wide = np.repeat(_num(pc.equal(ev.column("compare_dtype"), "float64"), bool), lengths)
    with np.errstate(all="ignore"):
        low, high = (r - d).astype(np.float32), (r + d).astype(np.float32)
        q = np.where(wide, np.where(np.abs(r - low.astype(np.float64)) == d, low, high), d.astype(np.float32))
    points = pa.table({"r": r, "q": q, "d_xor": _bits(d) ^ _bits(_d_from(r, q, wide))})
    stored = {f: _one(ev.column(f)) for f in _FIELDS}
    columns: dict[str, pa.Array] = {}
    for name, column in stored.items():
        if name == "hull_r":
            columns["hull_points"] = _nullable(lengths.astype(np.int32), column)
        elif name == "hull_d":
            continue
        elif name in _PREDICTED:
            columns[name + "_xor"] = _nullable(_bits(_num(column, np.float64)) ^ _bits(_predict(name, stored, r, d, offsets)),
                                               column)
        elif name in _WITHIN:
            index = _WITHIN.index(name)
            above = stored["n" if index == 0 else _WITHIN[index - 1]]
            columns[name] = _nullable(_num(above, np.int64) - _num(column, np.int64), column)
        else:
            columns[name] = column
    return pa.table(columns), points


def encode(table: pa.Table) -> dict[str, pa.Table]:
    """The packed tables {rows, evidence, points} of observation rows with unique keys (rows.parquet keeps
    the table's row order: sort it by key first)."""
    missing = [p + n for p in PREFIXES for n in _FIELDS if p + n not in table.column_names]
    if missing:
        raise OracleAuditError(f"cannot pack rows without every evidence column (missing {', '.join(missing[:3])})")
    evidence, ids = _distinct(table)
    rows = table.drop_columns([p + n for p in PREFIXES for n in _FIELDS])
    for p in PREFIXES:
        rows = rows.append_column(p + "evidence", pa.array(ids[p], type=pa.int32(), mask=ids[p] < 0))
    evidence, points = _encode_evidence(evidence)
    return {"rows": rows.combine_chunks(), "evidence": evidence.combine_chunks(), "points": points}


# ---- decoding -------------------------------------------------------------------------------------------


def _needs(fields: set[str]) -> tuple[list[str], list[str]]:
    """The stored columns of evidence.parquet and points.parquet that decoding these fields reads."""
    evidence: set[str] = set()
    points: set[str] = set()
    for name in fields:
        if name in _WITHIN:
            evidence |= {"n", *_WITHIN[:_WITHIN.index(name) + 1]}
        elif name == "rmse":
            evidence |= {"rmse_xor", "l2_diff", "n", *_NOT_FINITE}
        elif name in ("hull_r", "hull_d", "max_abs", "max_rel"):
            evidence.add("hull_points")
            points.add("r")
            if name != "hull_r":
                evidence |= {"compare_dtype", *([name + "_xor"] if name in _PREDICTED else [])}
                points |= {"q", "d_xor"}
        else:
            evidence.add(name)
    return sorted(evidence), sorted(points)


def _decode_evidence(ev: pa.Table, points: pa.Table, fields: set[str]) -> dict[str, pa.Array]:
    stored = {name: _one(ev.column(name)) for name in ev.column_names}
    out: dict[str, pa.Array] = {}
    if "hull_points" in stored:
        lengths = _num(stored["hull_points"], np.int64)
        offsets = pa.array(_offsets(lengths).astype(np.int32))
        r = _num(points.column("r"), np.float64)
        out["hull_r"] = pa.ListArray.from_arrays(offsets, pa.array(r), mask=stored["hull_points"].is_null())
        if "q" in points.column_names:
            wide = np.repeat(_num(pc.equal(stored["compare_dtype"], "float64"), bool), lengths)
            d = _floats(_bits(_d_from(r, _num(points.column("q"), np.float32), wide)) ^ _num(points.column("d_xor"), np.int64))
            out["hull_d"] = pa.ListArray.from_arrays(offsets, pa.array(d), mask=stored["hull_points"].is_null())
            for name in ("max_abs", "max_rel"):
                if name + "_xor" in stored:
                    residual = stored[name + "_xor"]
                    value = _bits(_predict(name, stored, r, d, _offsets(lengths))) ^ _num(residual, np.int64)
                    out[name] = _nullable(_floats(value), residual)
    if "rmse_xor" in stored:
        residual = stored["rmse_xor"]
        out["rmse"] = _nullable(_floats(_bits(_predict("rmse", stored, None, None, None)) ^ _num(residual, np.int64)),
                                residual)
    above = _num(stored["n"], np.int64) if "n" in stored else None
    for name in _WITHIN:
        if name not in stored:
            break
        value = above - _num(stored[name], np.int64)
        out[name] = _nullable(value, stored[name])
        above = np.where(_num(stored[name].is_valid(), bool), value, 0)
    return {name: (out[name] if name in out else stored[name]).cast(_FIELDS[name]) for name in fields}


def decode(tables: Mapping[str, pa.Table], schema: pa.Schema, columns: Sequence[str] | None = None) -> pa.Table:
    """The observation rows (the columns of `schema`, or `columns` of them) from packed tables holding at
    least the columns `load` reads for them."""
    wanted = list(schema.names if columns is None else columns)
    fields = {evidence_column(n)[1] for n in wanted if evidence_column(n)}
    decoded = _decode_evidence(tables["evidence"], tables["points"], fields) if fields else {}
    rows = tables["rows"]
    out = []
    for name in wanted:
        split = evidence_column(name)
        out.append(rows.column(name) if split is None else pc.take(decoded[split[1]], rows.column(split[0] + "evidence")))
    return pa.Table.from_arrays(out, schema=pa.schema([schema.field(n) for n in wanted], metadata=schema.metadata))


# ---- files ----------------------------------------------------------------------------------------------


def write(tables: Mapping[str, pa.Table], folder: Path, metadata: Mapping[bytes, bytes]) -> dict[str, Path]:
    """Write the packed tables into `folder` (deterministically); returns their paths."""
    paths = {}
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        table = tables[name]
        numbers = [f.name for f in table.schema if not (pa.types.is_string(f.type) or pa.types.is_boolean(f.type))
                   and not (pa.types.is_list(f.type) and pa.types.is_integer(f.type.value_type))]
        strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
        table = table.replace_schema_metadata({**metadata, PACKED_VERSION_KEY: str(PACKED_VERSION).encode()})
        paths[name] = folder / f"{name}.parquet"
        pq.write_table(table, paths[name], compression="zstd", compression_level=19, use_dictionary=strings,
                       use_byte_stream_split=numbers, row_group_size=max(1, table.num_rows))
    return paths


def _read(path: Path, columns: Sequence[str] | None) -> pa.Table:
    try:
        handle = pq.ParquetFile(path)
        version = (handle.schema_arrow.metadata or {}).get(PACKED_VERSION_KEY)
        if version != str(PACKED_VERSION).encode():
            shown = version.decode(errors="replace") if version is not None else None
            raise OracleAuditError(f"{path}: packed_version must be {PACKED_VERSION}, got {shown!r}")
        return handle.read(columns=list(columns) if columns is not None else None)
    except (OSError, pa.ArrowException) as err:
        raise OracleAuditError(f"{path}: cannot be read ({err})") from None


def load(paths: Mapping[str, Path], schema: pa.Schema, columns: Sequence[str] | None = None) -> pa.Table:
    """The observation rows (see `decode`) of the packed files at `paths`, reading only what they need."""
    wanted = list(schema.names if columns is None else columns)
    fields = {evidence_column(n)[1] for n in wanted if evidence_column(n)}
    evidence, points = _needs(fields)
    prefixes = sorted({evidence_column(n)[0] for n in wanted if evidence_column(n)})
    rows = [n for n in wanted if evidence_column(n) is None] + [p + "evidence" for p in prefixes]
    tables = {"rows": _read(paths["rows"], rows), "evidence": _read(paths["evidence"], evidence),
              "points": _read(paths["points"], points)}
    return decode(tables, schema, wanted)
