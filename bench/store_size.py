"""Benchmark (CPU): what each candidate compaction of the evidence store saves, measured on a real store
before one is chosen (the complete bundled evidence must fit in 40 MiB: ~400k rows, ~105 bytes a row).

Writes the store's rows to Parquet in memory once per candidate, each lossless, and prints bytes per row side
by side with the ratio to the store as written today (zstd at pyarrow's default level):
    level 9 / 15        zstd at a higher level
    split               byte-stream-split encoding of the float columns, dictionaries for the others
    within deltas       the 19 grid counts of each prefix stored as differences of neighbours (mostly 0)
    fp32 hull in f32    the fp32 prefix's hull arrays as float32 where every value of a row round-trips
                        (|ref| of an fp32 reference always does; |out − ref| does by Sterbenz's lemma when the
                        two are within a factor 2), else float64
    same as original    the evidence of a mutant row equal to the original's on the same (problem, input,
                        output) left out (the row then names the original's)
    all of the above
and the composition of the last one by column group. The transforms are lossless by construction (a value
is moved, differenced or left out only where it equals what the reader can restore); the last candidate is
read back to check that it holds every row.

    PYTHONPATH=. python bench/store_size.py [--evidence kill_matrix/evidence] [--out bench/results/store_size.json]
"""

from __future__ import annotations

import argparse
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from oracleaudit.store import EvidenceStore

PREFIXES = ("fp32_", "fp64_")
KEY = ("problem", "input_id", "output_index")


def _write(table: pa.Table, level: int | None = None, split: bool = False) -> bytes:
    floats = [n for n, t in zip(table.schema.names, table.schema.types)
              if pa.types.is_floating(t) or (pa.types.is_list(t) and pa.types.is_floating(t.value_type))]
    options = {"compression": "zstd"}
    if level is not None:
        options["compression_level"] = level
    if split:
        options["use_byte_stream_split"] = floats
        options["use_dictionary"] = [n for n in table.schema.names if n not in floats]
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def _within_deltas(table: pa.Table) -> pa.Table:
    for p in PREFIXES:
        names = [n for n in table.schema.names if n.startswith(p + "within_")]
        previous = None
        for name in names:
            column = table.column(name)
            delta = column if previous is None else pc.subtract(column, previous)
            table = table.set_column(table.schema.get_field_index(name), name, delta)
            previous = column
    return table


def _hull_f32(table: pa.Table) -> tuple[pa.Table, float]:
    """The fp32 hulls as float32 lists where every value of the row round-trips, float64 lists otherwise
    (two columns each, one of them null); returns the table and the fraction of rows that fit."""
    fits_all = None
    for name in ("fp32_hull_r", "fp32_hull_d"):
        column = table.column(name).combine_chunks()
        values = pc.list_flatten(column).to_numpy(zero_copy_only=False)
        owner = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
        exact = values.astype(np.float32).astype(np.float64) == values
        exact |= np.isnan(values)
        bad = np.bincount(owner[~exact], minlength=len(table)) > 0
        fits_all = ~bad if fits_all is None else fits_all & ~bad
    for name in ("fp32_hull_r", "fp32_hull_d"):
        column = table.column(name).combine_chunks()
        narrow = pa.array([v if ok else None for v, ok in zip(column.to_pylist(), fits_all)],
                          type=pa.list_(pa.float32()))
        wide = pa.array([None if ok else v for v, ok in zip(column.to_pylist(), fits_all)],
                        type=pa.list_(pa.float64()))
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, wide).append_column(name + "_f32", narrow)
    return table, float(fits_all.mean()) if len(fits_all) else 0.0


def _same_as_original(table: pa.Table) -> tuple[pa.Table, int]:
    """Null the evidence of mutant rows whose evidence equals the original's on the same key."""
    evidence = [n for n in table.schema.names if n.startswith(PREFIXES)]
    frame = table.select([*KEY, "mutant_id", "status", *evidence]).to_pandas()
    signature = [repr(row) for row in frame[evidence].itertuples(index=False)]
    frame["signature"] = signature
    original = frame[frame["mutant_id"] == "original"][[*KEY, "signature"]].rename(columns={"signature": "orig"})
    merged = frame.merge(original, on=list(KEY), how="left")
    same = ((merged["signature"] == merged["orig"]) & ~merged["mutant_id"].isin(["original", "reference"])
            & (merged["status"] == "Ok")).to_numpy()
    mask = pa.array(same)
    for name in evidence:
        column = table.column(name)
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pc.if_else(mask, pa.nulls(len(table), column.type), column))
    return table.append_column("same_as_original", mask), int(same.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path, default=Path("kill_matrix/evidence"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    table = EvidenceStore(args.evidence).open().read_table()
    rows = table.num_rows
    base = len(_write(table))
    sizes = {"as written (zstd default)": base, "zstd level 9": len(_write(table, 9)),
             "zstd level 15": len(_write(table, 15)), "split, level 9": len(_write(table, 9, True))}
    deltas = _within_deltas(table)
    sizes["within deltas, split, level 9"] = len(_write(deltas, 9, True))
    narrow, fit = _hull_f32(table)
    sizes["fp32 hull in f32, split, level 9"] = len(_write(narrow, 9, True))
    deduped, same = _same_as_original(table)
    sizes["same as original, split, level 9"] = len(_write(deduped, 9, True))
    combined, _ = _same_as_original(_within_deltas(table))
    combined, _ = _hull_f32(combined)
    final = _write(combined, 9, True)
    sizes["all of the above"] = len(final)
    assert pq.read_table(io.BytesIO(final)).num_rows == rows
    print(f"{rows} rows; fp32 hulls that fit float32: {fit:.1%}; rows equal to the original's: {same}")
    print(f"{'candidate':<36} {'bytes/row':>10} {'ratio':>7}")
    for name, size in sizes.items():
        print(f"{name:<36} {size / rows:>10.1f} {size / base:>7.3f}")
    groups: Counter = Counter()
    metadata = pq.ParquetFile(io.BytesIO(final)).metadata
    for g in range(metadata.num_row_groups):
        for c in range(metadata.num_columns):
            column = metadata.row_group(g).column(c)
            name = column.path_in_schema.split(".")[0]
            group = ("hull" if "hull_r" in name or "hull_d" in name else "within" if "_within_" in name
                     else "evidence" if name.startswith(PREFIXES) else "keys and status")
            groups[group] += column.total_compressed_size
    print("all of the above, bytes/row by group: "
          + ", ".join(f"{g} {b / rows:.1f}" for g, b in groups.most_common()))
    target = 40 * 2**20 / 400_000
    print(f"target for the complete bundle (40 MiB, ~400k rows): {target:.1f} bytes/row")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "evidence": str(args.evidence), "rows": rows, "fp32_hull_rows_fit_float32": round(fit, 4),
            "rows_equal_to_original": same, "bytes_per_row": {k: round(v / rows, 1) for k, v in sizes.items()},
            "all_by_group_bytes_per_row": {g: round(b / rows, 1) for g, b in groups.items()},
            "target_bytes_per_row": round(target, 1)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
