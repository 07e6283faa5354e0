"""Benchmark (CPU): which lossless ways of writing the packed layout's Parquet files (oracleaudit/packed.py,
packed_version 3) make them smallest. A measurement study: nothing here changes the format or the store.

For each file STORE/packed/<name>.parquet it reads the table and, for each column, re-writes that column
alone in memory (pyarrow.BufferOutputStream, one row group) under every representation below, and measures
the column chunk's compressed bytes from the Parquet metadata (data and dictionary pages with their headers):

    transform   id (as stored); for integer columns (and the items of list<int> columns) also: delta (each
                value minus the one before, wrapping int64; per list, the first from 0), delta+zz (the zigzag
                of that), zz (zigzag, where there are negatives), xor (bits XOR the value before; where
                values are wider than 32 bits), prefix (the running sum: undoes a stored delta, where no
                value is negative); T, T+delta+zz (lists that all have one length: the items transposed,
                item k of every row side by side); for float columns bits, bits+delta+zz, bits+xor (the
                float's bits as int64). Nulls are kept as nulls and skipped by the transforms.
    type        the type it has, or the narrowest integer type (int8 .. uint32) that holds every value
    encoding    PLAIN, BYTE_STREAM_SPLIT, DELTA_BINARY_PACKED, DICT (RLE_DICTIONARY, use_dictionary on)
                for numbers; DICT, PLAIN, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY for strings; PLAIN, RLE
                for booleans
    codec       every representation first with brotli 9 (a fast screen); the best --keep of them overall,
                the best two keeping the transform id (with and without the narrower type) and the one
                written now with brotli 11 and zstd 22; the best of those with brotli 10, zstd 19, gzip 9,
                lz4 and none too
    pages       one data page per column chunk (data_page_size 1 GiB, max_rows_per_page 2**30); packed.write
                passed data_page_size 1 GiB but not max_rows_per_page, whose default (20,000 rows a page
                in pyarrow 26) split a column of more rows into pages compressed apart; since this study
                it passes both (packed.one_page), so a store packed since then is already at "one page"

Every measured option is read back, inverted (transform and cast undone) and compared with the column read
from the store, floats by their bits (Table.equals would call NaN unequal to itself): an option that does
not give every value back is not counted. Then, per file, whole files are written with the best option of
each column (per-column compression, compression_level, use_dictionary, column_encoding), read back,
inverted and compared with the stored table (schema, metadata and values), for the ladder

    now            the files as they are
    one page       packed.write's options with max_rows_per_page 2**30
    settings       + each column's best codec, level, encoding and dictionary (values and types unchanged)
    types          + narrower integer types
    transforms     + value transforms (the best overall)
    no statistics  + write_statistics=False (no min/max in the footer and page headers)

(store_schema=False would drop the ARROW:schema copy of the schema too, but pyarrow then writes none of the
schema's metadata, packed_version included, so it is not an option: its bytes are reported per file.)

and, for the transforms step, with data pages of 1 MiB and of 20,000 rows to show what one page gives.
The first step re-writes each file with packed.write's options and reports whether that gives the same
bytes as the file (the baseline is understood).

    PYTHONPATH=. python bench/pack_options.py --store bench/results/full_run/shard1 [--json FILE]
        [--jobs N] [--keep K] [--files evidence,far]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oracleaudit.packed_arrays import unzig, zig

FILES = ("rows", "evidence", "values", "points", "linked", "mates", "loose", "far")
NARROW = (pa.int8(), pa.uint8(), pa.int16(), pa.uint16(), pa.int32(), pa.uint32())
BIG = 1 << 30
ITEM = "item"  # the name of list items in the tables packed.write writes (it reads back as "element")
PAGES = {"one": {"data_page_size": BIG, "max_rows_per_page": BIG},
         "now": {"data_page_size": BIG},
         "1MiB": {"data_page_size": 1 << 20, "max_rows_per_page": BIG}}
SCREEN = ("brotli", 9)
FINAL = (("brotli", 11), ("zstd", 22))
EXTRA = (("brotli", 10), ("zstd", 19), ("gzip", 9), ("lz4", None), ("none", None))


@dataclass(frozen=True)
class Option:
    transform: str  # "+"-joined steps, "id" for none
    type: str  # "orig" or the stored type's name
    encoding: str  # a Parquet encoding, or DICT
    codec: str = "brotli"
    level: int | None = 11

    def repr_key(self) -> tuple[str, str, str]:
        return self.transform, self.type, self.encoding

    def label(self) -> str:
        level = "" if self.level is None else f" {self.level}"
        return f"{self.transform}/{self.type}/{self.encoding}/{self.codec}{level}"


# ---- transforms -----------------------------------------------------------------------------------------


def _shift(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The value before each one in its segment (0 at a segment's start)."""
    before = np.empty_like(x)
    before[1:] = x[:-1]
    if len(x):
        before[0] = 0
    before[starts] = 0
    return before


def _segmented(x: np.ndarray, starts: np.ndarray, ufunc: np.ufunc, inverse: Any) -> np.ndarray:
    """The running ufunc (add or xor) of x restarting at each segment start (wrapping)."""
    if not len(x):
        return x.copy()
    with np.errstate(over="ignore"):
        run = ufunc.accumulate(x)
        ids = np.cumsum(starts) - 1
        base = inverse(run, x)[starts]  # the running value before each segment's first
        return inverse(run, base[ids])


def _starts(valid: np.ndarray, lengths: np.ndarray | None) -> np.ndarray:
    """Per non-null value: whether it is the first non-null value of its list (or of the column)."""
    n = int(valid.sum())
    starts = np.zeros(n, dtype=bool)
    if lengths is None:
        starts[:1] = True
        return starts
    owner = np.repeat(np.arange(len(lengths)), lengths)[valid]
    starts[:1] = True
    starts[1:] = owner[1:] != owner[:-1]
    return starts


def _parts(column: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
    """The items of a column (the flattened items of a list column) and the lengths of its lists."""
    if pa.types.is_list(column.type):
        lengths = column.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return column.flatten(), lengths
    return column, None


def _rebuild(column: pa.Array, items: pa.Array, lengths: np.ndarray | None, name: str | None = None) -> pa.Array:
    """A list column like `column` holding these items (its list items named `name`, else as in `column`)."""
    if lengths is None:
        return items
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    field = column.type.value_field.with_type(items.type)
    if name is not None:
        field = field.with_name(name)
    return pa.ListArray.from_arrays(offsets, items, type=pa.list_(field), mask=column.is_null())


def _transposable(column: pa.Array) -> bool:
    if not pa.types.is_list(column.type):
        return False
    _, lengths = _parts(column)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    sizes = set(lengths[valid].tolist())
    return len(sizes) == 1 and sizes.pop() > 1


def _transpose(n_items: int, width: int, back: bool) -> np.ndarray:
    grid = np.arange(n_items).reshape(-1, width)
    return np.argsort(grid.T.reshape(-1)) if back else grid.T.reshape(-1)


def _int_view(items: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values of the non-null items, validity) of an integer or, as bits, float array."""
    valid = items.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_floating(items.type):
        filled = items.fill_null(0).to_numpy(zero_copy_only=False)
        values = filled.view(np.int64 if filled.dtype.itemsize == 8 else np.int32).astype(np.int64)
    else:
        values = items.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return values[valid], valid


def narrowest(values: np.ndarray) -> pa.DataType:
    lo, hi = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    for kind in NARROW:
        info = np.iinfo(kind.to_pandas_dtype())
        if info.min <= lo and hi <= info.max:
            return kind
    return pa.int64()


def forward(column: pa.Array, transform: str) -> tuple[np.ndarray | pa.Array, np.ndarray | None]:
    """The transformed column: (int64 values of the non-null items, validity of the items) for an integer
    transform, (the Arrow column, None) for id."""
    steps = transform.split("+")
    if steps == ["id"]:
        return column, None
    items, lengths = _parts(column)
    if "T" in steps:
        items = items.take(pa.array(_transpose(len(items), int(lengths.max()), back=False)))
        lengths = None  # segments: the whole column
    values, valid = _int_view(items)
    starts = _starts(valid, lengths)
    with np.errstate(over="ignore"):
        if "delta" in steps:
            values = values - _shift(values, starts)
        if "xor" in steps:
            values = values ^ _shift(values, starts)
        if "prefix" in steps:
            values = _segmented(values, starts, np.add, np.subtract)
        if "zz" in steps:
            values = zig(values)
    return values, valid


def stored_column(column: pa.Array, transform: str, kind: str) -> pa.Array:
    """The column as it would be stored: transformed, and cast to `kind` ("orig": its type, or int64 after
    an integer transform)."""
    values, valid = forward(column, transform)
    if valid is None:
        items, lengths = _parts(column)
        return _rebuild(column, items if kind == "orig" else items.cast(pa.type_for_alias(kind)), lengths, ITEM)
    target = pa.int64() if kind == "orig" else pa.type_for_alias(kind)
    full = np.zeros(len(valid), dtype=np.int64)
    full[valid] = values
    items = pa.array(full.astype(target.to_pandas_dtype()), mask=~valid)
    _, lengths = _parts(column)
    return _rebuild(column, items, lengths, ITEM)


def backward(stored: pa.Array, like: pa.Array, transform: str) -> pa.Array:
    """The column `like` back from its stored form."""
    steps = transform.split("+")
    items, lengths = _parts(stored)
    like_items, _ = _parts(like)
    if steps == ["id"]:
        return _rebuild(like, items.cast(like_items.type), lengths)
    valid = items.is_valid().to_numpy(zero_copy_only=False)
    values = items.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)[valid]
    starts = _starts(valid, None if "T" in steps else lengths)
    with np.errstate(over="ignore"):
        if "zz" in steps:
            values = unzig(values)
        if "prefix" in steps:
            values = values - _shift(values, starts)
        if "xor" in steps:
            values = _segmented(values, starts, np.bitwise_xor, np.bitwise_xor)
        if "delta" in steps:
            values = _segmented(values, starts, np.add, np.subtract)
    full = np.zeros(len(valid), dtype=np.int64)
    full[valid] = values
    kind = like_items.type
    if pa.types.is_floating(kind):
        width = kind.bit_width
        raw = full.astype(np.int64 if width == 64 else np.int32).view(np.float64 if width == 64 else np.float32)
        back = pa.array(raw, type=kind, mask=~valid)
    else:
        back = pa.array(full.astype(kind.to_pandas_dtype()), type=kind, mask=~valid)
    if "T" in steps:
        back = back.take(pa.array(_transpose(len(back), int(lengths.max()), back=True)))
    return _rebuild(like, back, lengths)


def _bitwise(column: pa.Array) -> pa.Array:
    """Floats as their bits (so that NaN equals NaN of the same bits), lists item by item."""
    items, lengths = _parts(column)
    if pa.types.is_floating(items.type):
        items = items.view(pa.int64() if items.type.bit_width == 64 else pa.int32())
        return _rebuild(column, items, lengths) if lengths is not None else items
    return column


def same(a: pa.Array, b: pa.Array) -> bool:
    """Equal types, nulls and values (floats by bits)."""
    if a.type != b.type or len(a) != len(b):
        return False
    if not a.is_null().equals(b.is_null()):
        return False
    return _bitwise(a).equals(_bitwise(b))


def same_table(a: pa.Table, b: pa.Table) -> bool:
    return (a.schema.equals(b.schema, check_metadata=True) and a.num_rows == b.num_rows
            and all(same(a.column(n).combine_chunks(), b.column(n).combine_chunks()) for n in a.column_names))


# ---- candidates -----------------------------------------------------------------------------------------


def leaf(field: pa.Field) -> str:
    return f"{field.name}.list.element" if pa.types.is_list(field.type) else field.name


def item_type(kind: pa.DataType) -> pa.DataType:
    return kind.value_type if pa.types.is_list(kind) else kind


def representations(column: pa.Array) -> list[tuple[str, str, str]]:
    """(transform, type, encoding) of every representation tried for a column."""
    kind = item_type(column.type)
    if pa.types.is_boolean(kind):
        return [("id", "orig", e) for e in ("PLAIN", "RLE")]
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        return [("id", "orig", e) for e in ("DICT", "PLAIN", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY")]
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return [("id", "orig", "PLAIN")]
    out = []
    if pa.types.is_floating(kind):
        out += [("id", "orig", e) for e in ("PLAIN", "BYTE_STREAM_SPLIT", "DICT")]
        transforms = ["bits", "bits+delta+zz", "bits+xor"]
    else:
        items, _ = _parts(column)
        raw, _ = _int_view(items)
        transforms = ["id", "delta", "delta+zz"]
        if len(raw) and raw.min() < 0:
            transforms.append("zz")
        if len(raw) and int(np.abs(raw).max(initial=0)) >= 1 << 32:
            transforms.append("xor")
        if len(raw) and raw.min() >= 0:
            transforms.append("prefix")
    if _transposable(column):
        base = "bits+" if pa.types.is_floating(kind) else ""
        transforms += [base + "T" if base else "T", base + "T+delta+zz"]
    for transform in transforms:
        if transform == "id":
            kinds = ["orig"]
            items, _ = _parts(column)
            raw, _ = _int_view(items)
            narrow = narrowest(raw)
            if narrow != kind and narrow.bit_width < kind.bit_width:
                kinds.append(str(narrow))
        else:
            values, _ = forward(column, transform)
            kinds = ["orig"]
            narrow = narrowest(values)
            if narrow != pa.int64():
                kinds.append(str(narrow))
        for k in kinds:
            out += [(transform, k, e) for e in ("PLAIN", "BYTE_STREAM_SPLIT", "DELTA_BINARY_PACKED", "DICT")]
    return out


def _stored_type(column: pa.Array, transform: str, kind: str) -> pa.DataType:
    if kind != "orig":
        return pa.type_for_alias(kind)
    return item_type(column.type) if transform == "id" else pa.int64()


def writer_kwargs(options: dict[str, Option], page: str) -> dict[str, Any]:
    """pq.write_table keyword arguments giving each column (by leaf path) its option."""
    compression = {path: o.codec for path, o in options.items()}
    levels = {path: o.level for path, o in options.items() if o.level is not None}
    kwargs: dict[str, Any] = {"compression": compression, "use_dictionary": [p for p, o in options.items() if o.encoding == "DICT"],
                              "column_encoding": {p: o.encoding for p, o in options.items() if o.encoding != "DICT"},
                              "dictionary_pagesize_limit": BIG, **PAGES[page]}
    if levels:
        kwargs["compression_level"] = levels
    return kwargs


def write(table: pa.Table, **kwargs: Any) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=max(1, table.num_rows), **kwargs)
    return sink.getvalue()


def chunk_sizes(buffer: pa.Buffer | str) -> dict[str, int]:
    source = pa.BufferReader(buffer) if isinstance(buffer, pa.Buffer) else buffer
    meta = pq.ParquetFile(source).metadata
    group = meta.row_group(0)
    return {group.column(i).path_in_schema: group.column(i).total_compressed_size for i in range(group.num_columns)}


# ---- workers --------------------------------------------------------------------------------------------


@lru_cache(maxsize=2)
def _table(path: str) -> pa.Table:
    return pq.read_table(path).combine_chunks()


def measure(path: str, name: str, option: Option, page: str = "one") -> dict[str, Any]:
    """Bytes of column `name` of the file at `path` written alone with `option`, and whether it reads back."""
    column = _table(path).column(name).combine_chunks()
    field = _table(path).schema.field(name)
    started = time.perf_counter()
    try:
        stored = stored_column(column, option.transform, option.type)
        table = pa.Table.from_arrays([stored], schema=pa.schema([pa.field(name, stored.type, nullable=field.nullable)]))
        buffer = write(table, **writer_kwargs({leaf(table.schema.field(name)): option}, page))
        back = pq.read_table(pa.BufferReader(buffer)).column(name).combine_chunks()
        ok = same(backward(back, column, option.transform), column)
        size = sum(chunk_sizes(buffer).values())
        return {"option": asdict(option), "bytes": size, "ok": ok, "seconds": time.perf_counter() - started}
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as err:
        return {"option": asdict(option), "bytes": None, "ok": False, "error": str(err)[:200], "field": field.name}


# ---- the study ------------------------------------------------------------------------------------------


def current_options(path: Path, table: pa.Table) -> dict[str, Option]:
    """Each column's option as the file has it (encoding from the metadata; brotli 11 per packed.py)."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    out = {}
    for field in table.schema:
        encodings = chunks[leaf(field)].encodings
        encoding = ("DICT" if "RLE_DICTIONARY" in encodings else
                    "BYTE_STREAM_SPLIT" if "BYTE_STREAM_SPLIT" in encodings else "PLAIN")
        out[field.name] = Option("id", "orig", encoding)
    return out


def as_written(table: pa.Table) -> pa.Table:
    """The table as packed.write has it: list items named "item" (kept in the file's ARROW:schema)."""
    columns = [table.column(n).combine_chunks() for n in table.column_names]
    columns = [_rebuild(c, *_parts(c), ITEM) for c in columns]
    return pa.Table.from_arrays(columns, schema=_like(table.schema, columns, table.schema.metadata))


def packed_write_kwargs(table: pa.Table, now: dict[str, Option]) -> dict[str, Any]:
    """packed.write's options as read off the file: brotli 11, dictionaries for strings, the encodings."""
    return {"compression": "brotli", "compression_level": 11,
            "use_dictionary": [f.name for f in table.schema if now[f.name].encoding == "DICT"],
            "column_encoding": {leaf(f): now[f.name].encoding for f in table.schema
                                if now[f.name].encoding != "DICT" and not pa.types.is_boolean(f.type)},
            "data_page_size": BIG}


def stored_table(table: pa.Table, options: dict[str, Option]) -> pa.Table:
    columns = [stored_column(table.column(n).combine_chunks(), options[n].transform, options[n].type)
               for n in table.column_names]
    return pa.Table.from_arrays(columns, schema=_like(table.schema, columns, table.schema.metadata))


def _like(schema: pa.Schema, columns: list[pa.Array], metadata: Any) -> pa.Schema:
    """A schema of these columns with the names and nullability of `schema`'s fields."""
    return pa.schema([pa.field(f.name, c.type, nullable=f.nullable) for f, c in zip(schema, columns)], metadata=metadata)


def restored_table(back: pa.Table, table: pa.Table, options: dict[str, Option]) -> pa.Table:
    columns = [backward(back.column(n).combine_chunks(), table.column(n).combine_chunks(), options[n].transform)
               for n in table.column_names]
    return pa.Table.from_arrays(columns, schema=_like(back.schema, columns, back.schema.metadata))


def write_file(table: pa.Table, options: dict[str, Option], page: str, statistics: bool = True) -> dict[str, Any]:
    """A whole file with these options: its bytes, column chunk bytes and whether it reads back exactly
    (values, types, nullability and the schema's metadata)."""
    stored = stored_table(table, options)
    kwargs = writer_kwargs({leaf(stored.schema.field(n)): o for n, o in options.items()}, page)
    if not statistics:
        kwargs["write_statistics"] = False
    buffer = write(stored, **kwargs)
    back = pq.read_table(pa.BufferReader(buffer))
    ok = same_table(restored_table(back, table, options), table)
    return {"bytes": buffer.size, "chunks": chunk_sizes(buffer), "ok": ok}


def _best(results: list[dict[str, Any]], keep: Any = lambda o: True) -> dict[str, Any] | None:
    fine = [r for r in results if r["ok"] and r["bytes"] is not None and keep(Option(**r["option"]))]
    return min(fine, key=lambda r: (r["bytes"], r["option"]["codec"] != "brotli")) if fine else None


def _plain_values(o: Option) -> bool:
    return o.transform == "id" and o.type == "orig"


def _no_transform(o: Option) -> bool:
    return o.transform == "id"


def study(store: Path, jobs: int, keep: int, files: list[str]) -> dict[str, Any]:
    folder = store / "packed"
    manifest = json.loads((store / "manifest.json").read_text())
    rows = manifest["files"]["rows"]["rows"]
    out: dict[str, Any] = {"store": str(store), "rows": rows, "pyarrow": pa.__version__, "files": {}}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        tables = {name: _table(str(folder / f"{name}.parquet")) for name in files}
        now = {name: current_options(folder / f"{name}.parquet", tables[name]) for name in files}
        # screen every representation with the fast codec, biggest columns first
        tasks = []
        for name in files:
            path = str(folder / f"{name}.parquet")
            sizes = chunk_sizes(path)
            for field in tables[name].schema:
                for rk in representations(tables[name].column(field.name).combine_chunks()):
                    tasks.append((sizes[leaf(field)], path, field.name, Option(*rk, *SCREEN)))
        tasks.sort(key=lambda t: -t[0])
        print(f"{store}: screening {len(tasks)} representations with {SCREEN[0]} {SCREEN[1]}", flush=True)
        screened: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for task, result in zip(tasks, pool.map(measure, *zip(*[t[1:] for t in tasks]), chunksize=1)):
            screened.setdefault((Path(task[1]).stem, task[2]), []).append(result)
        # the finalists at brotli 11 and zstd 22
        finals: list[tuple[int, str, str, Option]] = []
        for (name, column), results in screened.items():
            ranked = sorted((r for r in results if r["ok"]), key=lambda r: r["bytes"])
            picks = [r["option"] for r in ranked[:keep]]
            for rule in (_plain_values, _no_transform):
                picks += [r["option"] for r in ranked if rule(Option(**r["option"]))][:2]
            picks.append(asdict(now[name][column]))
            reprs = list(dict.fromkeys((p["transform"], p["type"], p["encoding"]) for p in picks))
            size = chunk_sizes(str(folder / f"{name}.parquet"))[leaf(tables[name].schema.field(column))]
            finals += [(size, name, column, Option(*rk, *codec)) for rk in reprs for codec in FINAL]
        finals.sort(key=lambda t: -t[0])
        print(f"{store}: {len(finals)} finalists", flush=True)
        measured: dict[tuple[str, str], list[dict[str, Any]]] = {}
        paths = [str(folder / f"{t[1]}.parquet") for t in finals]
        for task, result in zip(finals, pool.map(measure, paths, [t[2] for t in finals], [t[3] for t in finals], chunksize=1)):
            measured.setdefault((task[1], task[2]), []).append(result)
        # the other codecs on each column's best representation, and the current option per page setting
        extra = []
        for (name, column), results in measured.items():
            best = Option(**_best(results)["option"])
            extra += [(name, column, Option(*best.repr_key(), *codec), "one") for codec in EXTRA]
            extra.append((name, column, now[name][column], "now"))
        for task, result in zip(extra, pool.map(measure, [str(folder / f"{t[0]}.parquet") for t in extra],
                                                [t[1] for t in extra], [t[2] for t in extra], [t[3] for t in extra],
                                                chunksize=1)):
            if task[3] == "now":
                result["page"] = "now"
                screened[(task[0], task[1])].append(result)  # kept apart from the one-page results
            else:
                measured[(task[0], task[1])].append(result)

    for name in files:
        path = folder / f"{name}.parquet"
        table = tables[name]
        size_now = path.stat().st_size
        chunks_now = chunk_sizes(str(path))
        again = write(as_written(table), **packed_write_kwargs(table, now[name]))
        record: dict[str, Any] = {"bytes": size_now, "rows": table.num_rows, "rewritten_same_bytes": again.to_pybytes() == path.read_bytes(),
                                  "overhead": size_now - sum(chunks_now.values()),
                                  "arrow_schema_bytes": len((pq.ParquetFile(path).metadata.metadata or {}).get(b"ARROW:schema", b"")),
                                  "columns": {}, "ladder": {}}
        best = {}
        for rule_name, rule in (("settings", _plain_values), ("types", _no_transform), ("transforms", lambda o: True)):
            best[rule_name] = {c: Option(**_best(measured[(name, c)], rule)["option"]) for c in table.column_names}
        ladder = record["ladder"]
        ladder["now"] = {"bytes": size_now, "ok": True}
        one_page = write(as_written(table), **packed_write_kwargs(table, now[name]), max_rows_per_page=BIG)
        ladder["one page"] = {"bytes": one_page.size, "ok": same_table(pq.read_table(pa.BufferReader(one_page)), table)}
        for step in ("settings", "types", "transforms"):
            ladder[step] = write_file(table, best[step], "one")
        for page in ("1MiB", "now"):
            ladder[f"transforms, pages {page}"] = write_file(table, best["transforms"], page)
        ladder["no statistics"] = write_file(table, best["transforms"], "one", statistics=False)
        final_chunks = ladder["transforms"]["chunks"]
        for field in table.schema:
            key = (name, field.name)
            stored_type = _stored_type(table.column(field.name).combine_chunks(), best["transforms"][field.name].transform,
                                       best["transforms"][field.name].type)
            stored_leaf = leaf(pa.field(field.name, pa.list_(pa.field("element", stored_type)) if pa.types.is_list(field.type) else stored_type))
            current = [r for r in screened[key] if r.get("page") == "now"]
            record["columns"][field.name] = {
                "bytes": chunks_now[leaf(field)],
                "now_option": now[name][field.name].label(),
                "now_one_page": next((r["bytes"] for r in measured[key] if Option(**r["option"]) == now[name][field.name]), None),
                "now_rewritten": current[0]["bytes"] if current else None,
                "best": {step: {"option": best[step][field.name].label(),
                                "bytes": _best(measured[key], rule)["bytes"]}
                         for step, rule in (("settings", _plain_values), ("types", _no_transform), ("transforms", lambda o: True))},
                "in_file": final_chunks.get(stored_leaf),
                "screened": sorted(([Option(**r["option"]).label(), r["bytes"]] for r in screened[key] if r["ok"] and "page" not in r),
                                   key=lambda x: x[1]),
                "measured": sorted(([Option(**r["option"]).label(), r["bytes"]] for r in measured[key] if r["ok"]), key=lambda x: x[1]),
                "failed": [[Option(**r["option"]).label(), r.get("error", "not equal")] for r in (*screened[key], *measured[key]) if not r["ok"]],
            }
        out["files"][name] = record
    totals: dict[str, int] = {}
    for record in out["files"].values():
        for step, result in record["ladder"].items():
            totals[step] = totals.get(step, 0) + result["bytes"]
    out["totals"] = totals
    out["all_ok"] = all(r["ok"] for record in out["files"].values() for r in record["ladder"].values())
    return out


def report(out: dict[str, Any]) -> None:
    total = out["totals"]["now"]
    rows = out["rows"]
    print(f"\n{out['store']}: {rows} rows, pyarrow {out['pyarrow']}; every ladder file read back exactly: {out['all_ok']}")
    print(f"\n{'file':10} {'now':>10} " + " ".join(f"{s:>12}" for s in out["totals"] if s != "now") + "  same bytes when re-written")
    for name, record in out["files"].items():
        steps = record["ladder"]
        print(f"{name:10} {record['bytes']:>10} " + " ".join(f"{steps[s]['bytes']:>12}" for s in steps if s != "now")
              + f"  {record['rewritten_same_bytes']}")
    print(f"{'total':10} {total:>10} " + " ".join(f"{v:>12}" for s, v in out["totals"].items() if s != "now"))
    print(f"{'bytes/row':10} {total / rows:>10.1f} " + " ".join(f"{v / rows:>12.1f}" for s, v in out["totals"].items() if s != "now"))
    overhead = sum(r["overhead"] for r in out["files"].values())
    schema = sum(r["arrow_schema_bytes"] for r in out["files"].values())
    print(f"file overhead now (footers, magic): {overhead} bytes, of which the ARROW:schema copies {schema}")
    print(f"{'% of now':10} {100:>10.1f} " + " ".join(f"{100 * v / total:>12.1f}" for s, v in out["totals"].items() if s != "now"))
    lines = []
    for name, record in out["files"].items():
        for column, c in record["columns"].items():
            lines.append((c["bytes"] - (c["in_file"] or c["bytes"]), name, column, c))
    lines.sort(key=lambda x: -x[0])
    print("\nper column (gain: now → in the 'transforms' file; one page alone: the column as now, one page)")
    print(f"{'file.column':30} {'now':>9} {'one page':>9} {'best':>9} {'gain':>8} {'% total':>7}  best option (transform/type/encoding/codec)")
    for gain, name, column, c in lines:
        print(f"{name + '.' + column:30} {c['bytes']:>9} {c['now_one_page'] or 0:>9} {c['in_file'] or 0:>9} {gain:>8} "
              f"{100 * gain / total:>7.2f}  {c['best']['transforms']['option']}  (now {c['now_option']})")


def compact(out: dict[str, Any]) -> dict[str, Any]:
    """The figures --json keeps: per file its bytes and ladder (bytes, read back exactly), per column its bytes
    now, with one page, in the best file and the best option of each step, and how many options failed to
    give the values back; not every screened and measured option (some 9,600 lines a store)."""
    files = {}
    for name, record in out["files"].items():
        files[name] = {
            **{k: record[k] for k in ("bytes", "rows", "rewritten_same_bytes", "overhead", "arrow_schema_bytes")},
            "ladder": {step: {"bytes": r["bytes"], "ok": r["ok"]} for step, r in record["ladder"].items()},
            "columns": {column: {**{k: c[k] for k in ("bytes", "now_option", "now_one_page", "in_file", "best")},
                                 "options_measured": len(c["screened"]) + len(c["measured"]),
                                 "options_failed": len(c["failed"])}
                        for column, c in record["columns"].items()},
        }
    return {**{k: v for k, v in out.items() if k != "files"}, "files": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True, help="a packed evidence store (folder with packed/)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", type=int, default=3, help="representations kept from the screen per column")
    parser.add_argument("--files", default=",".join(FILES), help="comma-separated packed files to study")
    args = parser.parse_args()
    if not (args.store / "manifest.json").is_file() or not (args.store / "packed").is_dir():
        parser.error(f"{args.store}: not a packed evidence store (no manifest.json and packed/)")
    unknown = sorted(set(args.files.split(",")) - set(FILES))
    if unknown:
        parser.error(f"--files: no packed file named {', '.join(unknown)} (there are {', '.join(FILES)})")
    started = time.perf_counter()
    out = study(args.store, args.jobs, args.keep, args.files.split(","))
    out["seconds"] = round(time.perf_counter() - started, 1)
    report(out)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(compact(out), indent=1) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
