"""The packed layout of an evidence store: the same rows as its Parquet parts in about a third of the bytes,
for a store that is shipped rather than appended to (the bundled kill_matrix/evidence). `EvidenceStore.pack`
writes it and `EvidenceStore.read_table` reads it back (store.py): the same rows, values (every bit) and
dtypes as the store it was packed from, in key order. This module is the codec between observation rows and
the packed tables; store.py owns the folder and its manifest.

Folder contract (`PACKED_VERSION` 3)

    EVIDENCE/
      manifest.json              schema_version (of the rows, as in store.py), layout "packed", packed_version,
                                 meta, files: {rows|evidence|values|points|linked|mates|loose|far: {file, rows,
                                 sha256}}
      packed/rows.parquet        one row per observation, in key order
      packed/evidence.parquet    one row per distinct evidence (of either prefix)
      packed/values.parquet      one row per group (below): the hull_r values of its hulls
      packed/points.parquet      one row per hull point of the evidence without a partner, in evidence order
      packed/linked.parquet      one row per hull point of the evidence with a partner, in evidence order
      packed/mates.parquet       one row per linked point (below) of linked.parquet, in its order
      packed/loose.parquet       one row per point of linked.parquet that is not linked, in its order
      packed/far.parquet         one row per point whose q is far from r (q_step 0), points.parquet's then
                                 loose.parquet's, in their order

Each file carries `oracleaudit.packed_version` and `oracleaudit.schema_version` in its Parquet metadata, and is
written with brotli level 11, one row group, one data page a column, dictionary-encoded strings, plain time_ms,
n, out_shape, ref_shape, l2_ref_bits and max_rel_xor, the other numbers byte-stream-split: the same bytes for
the same rows with the same pyarrow. Files and manifests of another packed_version are refused, versions 1 and
2 (131.5 and 88.6 bytes a row on the bundle; 86.4 in version 3, 84.7 since it is written one data page a
column) too: merge such a store into a plain one with the oracleaudit that wrote it, and pack that. Version 3
keeps version 2's transforms and stores each column only where it has values (no column that is null where
another is not: those masks were 3.5% of a full-density store) and codes the r and the far q of a point as the
step from the point before in its hull.

rows.parquet      every observation column that is not an evidence column (`fp32_*`, `fp64_*`), with its
                  type, plus `fp32_evidence` and `fp64_evidence` (int32): the evidence.parquet row holding
                  that prefix's evidence columns; null where all of them are null.
evidence.parquet  the fields of `evidence.arrow_fields` without a prefix, one row for each distinct evidence
                  (equal bits and nulls; both prefixes share the table), in order of first use when the rows
                  are visited prefix by prefix, fp64_ first, each in key order (problem, mutant_id, input_id,
                  output_index); and
    partner (int32)  for an evidence first used under fp32_ by a row with fp64_ evidence: that evidence (the
                     same output against the fp64 reference; partners have none), else null
    group (int32)    without a partner: the values.parquet row of its hull_r values, one per (problem,
                     input_id, output_index) of the rows that first use such evidence, in that order; else null
                  The fields are stored as they are, except
    hull_r, hull_d   `hull_points` (int64: the length of both lists; null where both are null) and the points
                     in points.parquet or linked.parquet
    within_<t>       `within` (list<int64>, one item per t, largest t first): n − within(largest t), then
                     within(next larger t) − within(t); a null operand counts as 0; an item is null where its
                     count is
    l2_diff, l2_ref, cosine, rel_l1
                     `<name>_bits` (int64): the value's bits (null where null)
    rmse, max_abs, max_rel
                     `<name>_xor` (int64): the value's bits XOR those of a prediction (0 where exact, null where
                     the value is null). Predictions: l2_diff / √(n − n_nan_out − n_nan_ref − n_nan_both
                     − n_inf_mismatch − n_inf_equal) (0 where that count is not positive), the largest e and
                     e / r (0 where r ≤ 0) over the hull's points (0 for none; NaN wins), e = |r − q| in float64
                  and with a partner, the int64 values of `<name>_bits`, hull_points, n_unequal, n_nan_out,
                  n_inf_mismatch and of the items of `within` are stored as the zigzag (0, −1, 1, −2, … as 0, 1,
                  2, 3, …) of themselves minus the partner's (wrapping; a null partner value counts as 0).
values.parquet    r (list<int64>): the distinct bits of the hull_r values of the group's points in points.parquet,
                  ascending as int64, each as the difference from the one before (the first from 0; wrapping).
points.parquet    per hull point (r, d) of an evidence without a partner:
    r_step (int32)   the index of r's bits in its group's list, minus that of the point before in the hull (the
                     first point: the index)
    q_step (int32)   q, the output value relative to the reference's sign (|out − ref| = | |ref| − out·sign(ref) |),
                     as float32: r − d rounded to float32 if D(r, q) gives d's bits back, else r + d rounded;
                     D(r, q) = |r − q| in float64 where compare_dtype is "float64", else |float32(r) − q| in
                     float32. 1 + the zigzag of q's bits minus those of r rounded to float32 (both as int32)
                     where that is within ±2**22, else 0: q is far, in far.parquet
    d_xor (int64)    d's bits XOR those of D(r, q)
linked.parquet    per hull point (r, d) of an evidence with a partner:
    link (int32)     1 + the zigzag of the place in the partner's hull of the point linked to minus this
                     point's place in its own hull (the point linked to is the encoder's choice: the
                     partner point whose q gives d back by this evidence's D, with the float32 bits of its r
                     nearest to those of r, the first of equals, where r is a float32 value and the two hulls
                     make at most 2**16 point pairs), 0 for none
    d_xor (int64)    as in points.parquet; where linked, q is the partner point's q
mates.parquet     per linked point: r_diff (int64), the zigzag of r's float32 bits minus those of the partner
                  point's r rounded to float32 (both as int32; r is that float32 value)
loose.parquet     per point of linked.parquet that is not linked:
    r_step (int64)   where r is a float32 value: the zigzag of its float32 bits minus those of the r of the point
                     before in the hull rounded to float32 (as int32, wrapping; the first point: from 0); else null
    r (float64)      r where r_step is null, else null
    q_step (int32)   as in points.parquet
far.parquet       q_step (int64): per point whose q_step is 0, the zigzag of q's float32 bits minus those of the q
                  of the point before in the hull (as int32, wrapping; the first point: from 0)
Every transform keeps every bit: a value is either stored or predicted with the difference stored. A store
whose hull_r and hull_d differ in length or nullness, or hold a null point, is refused (`encode`). What each
transform saves on the bundle: bench/store_size.py and bench/results/store_size.json.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from oracleaudit import packed_arrays as arrays, packed_hull
from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import arrow_fields

__all__ = ["CODEC", "FAST_CODEC", "FILES", "PACKED_DIR", "PACKED_VERSION", "PACKED_VERSION_KEY", "PREFIXES", "decode",
           "encode", "evidence_column", "load", "write"]

PACKED_VERSION = 3
PACKED_VERSION_KEY = b"oracleaudit.packed_version"
PACKED_DIR = "packed"
FILES = ("rows", "evidence", "values", "points", "linked", "mates", "loose", "far")
_HULL_FILES = FILES[2:]  # the files `packed_hull` codes the hulls in
PREFIXES = ("fp32_", "fp64_")
_PASSES = ("fp64_", "fp32_")  # evidence ids in order of first use, the fp64 prefix's first
_FIELDS = {f.name: f.type for f in arrow_fields("")}
_WITHIN = sorted((n for n in _FIELDS if n.startswith("within_")), key=lambda n: -float(n[len("within_"):]))
_PREDICTED = ("rmse", "max_abs", "max_rel")
_BITS = ("l2_diff", "l2_ref", "cosine", "rel_l1")
_NOT_FINITE = ("n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal")
_PARTNERED = (*(n + "_bits" for n in _BITS), "hull_points", "n_unequal", "n_nan_out", "n_inf_mismatch")
_PLAIN = ("time_ms", "n", "out_shape", "ref_shape", "l2_ref_bits", "max_rel_xor")  # the rest byte-stream-split
_GROUP = ("problem", "input_id", "output_index")
_VISIT = [("problem", "ascending"), ("mutant_id", "ascending"), ("input_id", "ascending"),
          ("output_index", "ascending")]  # the key's order (store.KEY_COLUMNS): 3% fewer bytes than by input first


def evidence_column(name: str) -> tuple[str, str] | None:
    """(prefix, field) of an evidence column name, else None."""
    for p in PREFIXES:
        if name.startswith(p) and name[len(p):] in _FIELDS:
            return p, name[len(p):]
    return None


# ---- array helpers --------------------------------------------------------------------------------------


def _predict(name: str, ev: Mapping[str, Any], r: np.ndarray | None, e: np.ndarray | None,
             offsets: np.ndarray | None) -> np.ndarray:
    """The prediction of rmse, max_abs or max_rel per evidence row (see the module docstring)."""
    if name == "rmse":
        finite = arrays.num(ev["n"], np.int64) - sum(arrays.num(ev[n], np.int64) for n in _NOT_FINITE)
        with np.errstate(all="ignore"):
            return np.where(finite > 0, arrays.num(ev["l2_diff"], np.float64) / np.sqrt(np.maximum(finite, 1)), 0.0)
    if name == "max_abs":
        return arrays.per_list(e, offsets)
    with np.errstate(all="ignore"):
        return arrays.per_list(np.where(r > 0, e / np.where(r > 0, r, 1.0), 0.0), offsets)


# ---- encoding -------------------------------------------------------------------------------------------


def _codes(column: pa.Array) -> np.ndarray:
    """Dense integer codes, equal exactly where the column's values (bits and nulls) are equal."""
    valid = arrays.num(column.is_valid(), np.int64)
    if pa.types.is_list(column.type):
        items = column.flatten()
        flat = (arrays.num(items, np.int64) if pa.types.is_integer(items.type)
                else arrays.bits(items.to_numpy(zero_copy_only=False).astype(np.float64)))
        null = arrays.num(items.is_null(), np.int64)
        data = np.stack([np.where(null > 0, 0, flat), null], axis=1).tobytes()
        ends = arrays.offsets(arrays.num(column.value_lengths(), np.int64)) * 16
        value = arrays.dense(np.array([data[a:b] for a, b in zip(ends[:-1], ends[1:])], dtype=object))
    elif pa.types.is_string(column.type):
        value = arrays.num(column.dictionary_encode().indices, np.int64)
    elif pa.types.is_floating(column.type):
        value = arrays.dense(np.where(valid > 0, arrays.bits(column.to_numpy(zero_copy_only=False)), 0))
    else:
        value = arrays.dense(arrays.num(column, np.int64))
    return value * 2 + valid


def _distinct(table: pa.Table) -> tuple[pa.Table, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The distinct evidence (first use first), per prefix each row's evidence id (-1: all null), and per
    evidence its first use: the row and the pass (0: fp64_, 1: fp32_)."""
    order = pc.sort_indices(table, sort_keys=_VISIT).to_numpy()
    schema = pa.schema([pa.field(name, kind) for name, kind in _FIELDS.items()])  # list items named as arrow_fields
    both = pa.concat_tables([table.select([p + n for n in _FIELDS]).rename_columns(list(_FIELDS)).cast(schema).take(order)
                             for p in _PASSES]).combine_chunks()
    present = np.zeros(both.num_rows, dtype=bool)
    for name in _FIELDS:
        present |= arrays.num(both.column(name).is_valid(), bool)
    code = arrays.combine([_codes(arrays.one(both.column(name))) for name in _FIELDS])
    ids = np.full(both.num_rows, -1, dtype=np.int64)
    ids[present] = arrays.dense(code[present])
    _, first = np.unique(ids[present], return_index=True)
    n = table.num_rows
    back = np.argsort(order)  # the inverse permutation
    at = np.flatnonzero(present)[first]
    return (both.take(pa.array(at, type=pa.int64())), {p: ids[i * n:(i + 1) * n][back] for i, p in enumerate(_PASSES)},
            order[at % max(n, 1)], at // max(n, 1))


def _encode_evidence(ev: pa.Table, partner: np.ndarray, group: np.ndarray) -> dict[str, pa.Table]:
    r, _, lengths, offsets = hull = packed_hull.flat_hull(ev)
    hulls, q = packed_hull.encode_hull(ev, hull, partner, group)
    stored = {f: arrays.one(ev.column(f)) for f in _FIELDS}
    columns: dict[str, pa.Array] = {}
    for name, column in stored.items():
        if name == "hull_r":
            columns["hull_points"] = arrays.nullable(lengths, column)
        elif name in _PREDICTED:
            prediction = _predict(name, stored, r, arrays.far(r, q), offsets)
            columns[name + "_xor"] = arrays.nullable(arrays.bits(arrays.num(column, np.float64)) ^ arrays.bits(prediction), column)
        elif name in _BITS:
            columns[name + "_bits"] = arrays.nullable(arrays.bits(arrays.num(column, np.float64)), column)
        elif name not in (*_WITHIN, "hull_d"):
            columns[name] = column
    has = partner >= 0
    counts = [stored[name] for name in _WITHIN]
    valid = np.stack([arrays.num(count.is_valid(), bool) for count in counts], 1)
    steps = np.stack([arrays.num(above, np.int64) - arrays.num(count, np.int64) for above, count in zip([stored["n"], *counts], counts)], 1)
    steps[~valid] = 0  # as read back
    steps[has] = arrays.zig(steps[has] - steps[partner[has]])
    columns["within"] = pa.ListArray.from_arrays(pa.array(np.arange(0, steps.size + 1, len(_WITHIN), dtype=np.int32)),
                                                 pa.array(steps.reshape(-1), mask=~valid.reshape(-1)))
    for name in _PARTNERED:
        values = arrays.num(columns[name], np.int64).copy()
        values[has] = arrays.zig(values[has] - values[partner[has]])
        columns[name] = arrays.nullable(values, columns[name])
    columns["partner"] = pa.array(partner, type=pa.int32(), mask=~has)
    columns["group"] = pa.array(group, type=pa.int32(), mask=has)
    return {"evidence": pa.table(columns), **hulls}


def encode(table: pa.Table) -> dict[str, pa.Table]:
    """The packed tables (`FILES`) of observation rows with unique keys (rows.parquet keeps the table's row
    order: sort it by key first)."""
    missing = [p + n for p in PREFIXES for n in _FIELDS if p + n not in table.column_names]
    if missing:
        raise OracleAuditError(f"cannot pack rows without every evidence column (missing {', '.join(missing[:3])})")
    evidence, ids, first_row, first_pass = _distinct(table)
    rows = table.drop_columns([p + n for p in PREFIXES for n in _FIELDS])
    for p in PREFIXES:
        rows = rows.append_column(p + "evidence", pa.array(ids[p], type=pa.int32(), mask=ids[p] < 0))
    partner = np.where(first_pass == 1, ids["fp64_"][first_row], -1)
    key = arrays.combine([_codes(arrays.one(table.column(name))) for name in _GROUP])[first_row]
    group = np.full(len(partner), -1, dtype=np.int64)
    group[partner < 0] = arrays.dense(key[partner < 0])
    tables = _encode_evidence(evidence, partner, group)
    return {"rows": rows.combine_chunks(), **{name: t.combine_chunks() for name, t in tables.items()}}


# ---- decoding -------------------------------------------------------------------------------------------


def _needs(fields: set[str]) -> tuple[list[str], bool]:
    """The stored columns of evidence.parquet that decoding these fields reads, and whether it reads the hulls."""
    evidence: set[str] = {"partner"}
    hull = False
    for name in fields:
        if name in _WITHIN:
            evidence |= {"n", "within"}
        elif name == "rmse":
            evidence |= {"rmse_xor", "l2_diff_bits", "n", *_NOT_FINITE}
        elif name in _BITS:
            evidence.add(name + "_bits")
        elif name in ("hull_r", "hull_d", "max_abs", "max_rel"):
            evidence |= {"hull_points", "group", "compare_dtype", *([name + "_xor"] if name in _PREDICTED else [])}
            hull = True
        else:
            evidence.add(name)
    return sorted(evidence), hull


def _decode_evidence(ev: pa.Table, hulls: Mapping[str, pa.Table] | None, fields: set[str]) -> dict[str, pa.Array]:
    stored = {name: arrays.one(ev.column(name)) for name in ev.column_names}
    partner = np.where(arrays.num(stored["partner"].is_valid(), bool), arrays.num(stored["partner"], np.int64), -1)
    has = partner >= 0
    for name in _PARTNERED:
        if name in stored:
            values = arrays.num(stored[name], np.int64).copy()
            values[has] = values[partner[has]] + arrays.unzig(values[has])
            stored[name] = arrays.nullable(values, stored[name])
    for name in _BITS:
        if name + "_bits" in stored:
            stored[name] = arrays.nullable(arrays.floats(arrays.num(stored[name + "_bits"], np.int64)), stored[name + "_bits"])
    out: dict[str, pa.Array] = {}
    if hulls is not None:
        lengths = arrays.num(stored["hull_points"], np.int64)
        group = arrays.num(stored["group"], np.int64)
        wide = arrays.num(pc.equal(stored["compare_dtype"], "float64"), bool)
        r, q, d = packed_hull.decode_hull(hulls, lengths, partner, group, wide)
        offsets = pa.array(arrays.offsets(lengths).astype(np.int32))
        for name, flat in (("hull_r", r), ("hull_d", d)):
            out[name] = pa.ListArray.from_arrays(offsets, pa.array(flat), mask=stored["hull_points"].is_null())
        for name in ("max_abs", "max_rel"):
            if name + "_xor" in stored:
                residual = stored[name + "_xor"]
                value = arrays.bits(_predict(name, stored, r, arrays.far(r, q), arrays.offsets(lengths))) ^ arrays.num(residual, np.int64)
                out[name] = arrays.nullable(arrays.floats(value), residual)
    if "rmse_xor" in stored:
        residual = stored["rmse_xor"]
        out["rmse"] = arrays.nullable(arrays.floats(arrays.bits(_predict("rmse", stored, None, None, None)) ^ arrays.num(residual, np.int64)),
                                residual)
    if "within" in stored:
        items = stored["within"].flatten()
        steps = arrays.num(items, np.int64).reshape(-1, len(_WITHIN)).copy()
        steps[has] = steps[partner[has]] + arrays.unzig(steps[has])
        valid = arrays.num(items.is_valid(), bool).reshape(-1, len(_WITHIN))
        above = arrays.num(stored["n"], np.int64)
        for k, name in enumerate(_WITHIN):
            value = above - steps[:, k]
            out[name] = pa.array(value, mask=~valid[:, k])
            above = np.where(valid[:, k], value, 0)
    return {name: (out[name] if name in out else stored[name]).cast(_FIELDS[name]) for name in fields}


def decode(tables: Mapping[str, pa.Table], schema: pa.Schema, columns: Sequence[str] | None = None) -> pa.Table:
    """The observation rows (the columns of `schema`, or `columns` of them) from packed tables holding at
    least the columns `load` reads for them."""
    wanted = list(schema.names if columns is None else columns)
    fields = {evidence_column(n)[1] for n in wanted if evidence_column(n)}
    hulls = {name: tables[name] for name in _HULL_FILES} if _needs(fields)[1] else None
    decoded = _decode_evidence(tables["evidence"], hulls, fields) if fields else {}
    rows = tables["rows"]
    out = []
    for name in wanted:
        split = evidence_column(name)
        out.append(rows.column(name) if split is None else pc.take(decoded[split[1]], rows.column(split[0] + "evidence")))
    return pa.Table.from_arrays(out, schema=pa.schema([schema.field(n) for n in wanted], metadata=schema.metadata))


# ---- files ----------------------------------------------------------------------------------------------


def _encodings(schema: pa.Schema) -> tuple[list[str], dict[str, str]]:
    """The dictionary-encoded columns (strings) and the encoding of each number column (by leaf path)."""
    dictionary = [f.name for f in schema if pa.types.is_string(f.type)]
    numbers = {}
    for f in schema:
        kind = f.type.value_type if pa.types.is_list(f.type) else f.type
        if pa.types.is_floating(kind) or pa.types.is_integer(kind):
            path = f"{f.name}.list.element" if pa.types.is_list(f.type) else f.name
            numbers[path] = "PLAIN" if f.name in _PLAIN else "BYTE_STREAM_SPLIT"
    return dictionary, numbers


CODEC = ("brotli", 11)  # the smallest files
# Close to it in bytes in a tenth of the time (bench/ship_codec.py, shard 2 of the complete run, 77,558 rows, 2
# cores: packed in 5.3 against 59.4 s, 5.99 against 5.65 MiB): for a store on its way somewhere else (a device
# call's results), not for one kept.
FAST_CODEC = ("brotli", 7)


def write(tables: Mapping[str, pa.Table], folder: Path, metadata: Mapping[bytes, bytes],
          codec: tuple[str, int] = CODEC) -> dict[str, Path]:
    """Write the packed tables into `folder` deterministically (the same tables and `codec`, the same bytes); their
    paths. Any codec reads back the same rows."""
    paths = {}
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        table = tables[name]
        strings, numbers = _encodings(table.schema)
        table = table.replace_schema_metadata({**metadata, PACKED_VERSION_KEY: str(PACKED_VERSION).encode()})
        paths[name] = folder / f"{name}.parquet"
        pq.write_table(table, paths[name], compression=codec[0], compression_level=codec[1], use_dictionary=strings,
                       column_encoding=numbers, row_group_size=max(1, table.num_rows), **one_page())
    return paths


@functools.cache
def one_page() -> dict[str, int]:
    """pyarrow's writer options for one data page per column chunk: a page is compressed on its own, and
    pyarrow (26) starts one every 20,000 rows unless told otherwise (`max_rows_per_page`, where this pyarrow
    has it), which cost 4.8% of a full-density store's bytes (bench/pack_options.py)."""
    options = {"data_page_size": 1 << 30, "max_rows_per_page": 1 << 30}
    try:
        pq.write_table(pa.table({"x": [0]}), pa.BufferOutputStream(), **options)
    except TypeError:
        del options["max_rows_per_page"]
    return options


def _read(path: Path, columns: Sequence[str] | None) -> pa.Table:
    try:
        handle = pq.ParquetFile(path)
        version = (handle.schema_arrow.metadata or {}).get(PACKED_VERSION_KEY)
        if version != str(PACKED_VERSION).encode():
            shown = version.decode(errors="replace") if version is not None else None
            raise OracleAuditError(f"{path}: packed_version {shown!r} is not the one this oracleaudit reads "
                                   f"({PACKED_VERSION})")
        return handle.read(columns=list(columns) if columns is not None else None)
    except (OSError, pa.ArrowException) as err:
        raise OracleAuditError(f"{path}: cannot be read ({err})") from None


def load(paths: Mapping[str, Path], schema: pa.Schema, columns: Sequence[str] | None = None) -> pa.Table:
    """The observation rows (see `decode`) of the packed files at `paths`, reading only what they need."""
    wanted = list(schema.names if columns is None else columns)
    fields = {evidence_column(n)[1] for n in wanted if evidence_column(n)}
    evidence, hull = _needs(fields)
    prefixes = sorted({evidence_column(n)[0] for n in wanted if evidence_column(n)})
    rows = [n for n in wanted if evidence_column(n) is None] + [p + "evidence" for p in prefixes]
    tables = {"rows": _read(paths["rows"], rows), "evidence": _read(paths["evidence"], evidence)}
    if hull:
        tables.update({name: _read(paths[name], None) for name in _HULL_FILES})
    return decode(tables, schema, wanted)
