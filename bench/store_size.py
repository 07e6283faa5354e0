"""Benchmark (CPU): the bytes of the bundled evidence, as `oracleaudit run` writes a store and packed
(oracleaudit/packed.py), by column group; the steps between them; and the size of the complete bundle
projected from samples of the bundle (the issue "Complete bundled evidence": the whole dataset, 6,765
mutants + 70 originals × 68 inputs plus the reference rows, in 40 MiB with mutants.jsonl.gz and provenance;
the bundle ships no diffs).

Steps, each lossless and each on top of the one before, written in memory:
    as written          the store's parts as the run stage writes them (zstd level 3, one part here)
    zstd 19 + split     zstd level 19, byte-stream-split numbers, dictionaries for strings only
    input order         rows sorted by (problem, input_id, output_index, mutant_id), the rows of one input
                        side by side (worse than key order: the following steps keep key order)
    distinct evidence   (from zstd 19 + split, in key order) each prefix's evidence columns stored once per
                        distinct value, rows naming it by id; this subsumes "the same evidence as the
                        original's row", counted apart
    packed v1           the packed layout's version 1: also hull points in a table of their own, hull_d as the
                        float32 output where the reference is float64, grid counts as neighbour differences,
                        rmse/max_abs/max_rel as the xor with their prediction. Its codec is gone: the numbers
                        are the ones this benchmark measured at commit d4ffe8e (PACKED_V1), not measured again
    packed v2           version 2 of the packed layout: also the fp32 evidence coded against its row's fp64 evidence (hull
                        points linked to the partner's, statistics and counts as the difference), hull_r as
                        indices into each (problem, input, output)'s distinct values, q as its step from r,
                        the grid counts of a row side by side, max_abs/max_rel predicted from the outputs.
                        Its codec is gone: 88.6 bytes a row as this benchmark measured it at commit 676f17a
                        (PACKED_V2), 132.7 on bench/results/full_run/shard1, not measured again
    packed, zstd 19     the packed layout (version 3, oracleaudit/packed.py) written with zstd level 19 as
                        version 1 was: also each column stored only where it has values (mates, loose, far:
                        no null masks; 3.5% of shard1's bytes, 4.4% with the steps below), unlinked fp32 r and
                        far q as the step from the point before in the hull (-0.7% each on shard1)
    packed              the packed layout as written: brotli level 11
The packed store is read back and compared with the rows (every value and dtype) before it is measured.

Projection: the packed size of the first m mutants of each problem (by id, as --per-solution picks them)
with every original and reference row, for m = 4, 8, 12, 16 (the bundle); bytes per added mutant row
between the last two give the rest of the dataset's mutant rows (469,540 rows), and 470,000 rows. That
weighs every problem alike (16 mutants each); the complete dataset weighs each by its mutants (up to 369),
and the problems with the most mutants have the longest hulls. So, with --run-mutants and --dense (a store
of some solutions with every mutant, e.g. bench/results/full_run/shard1), a second projection by problem:
each problem's rows packed alone, bytes a row from the dense store where it has the problem, else the
bundle's times the median dense/bundle ratio of the problems both have, weighted by the problem's rows in
the complete dataset (its Pending mutants + the original + the reference rows, times the bundle's rows a
variant), and scaled by what packing all problems together saves on the dense store.

    PYTHONPATH=. python bench/store_size.py [--evidence kill_matrix/evidence] [--mutants kill_matrix/mutants]
        [--run-mutants out/mutants] [--dense bench/results/full_run/shard1 [--dense ...shard2]]
        [--out bench/results/store_size.json]
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oracleaudit import packed
from oracleaudit.mutant import PENDING, gzipped, mutants_bytes, mutants_file, read_mutants
from oracleaudit.packed import PACKED_DIR, PREFIXES, evidence_column
from oracleaudit.store import KEY_COLUMNS, EvidenceStore, pack_rows

MiB = 2**20
ROW_GROUPS = ("keys and row", "time_ms", "evidence ids", "hull", "grid counts", "statistics", "other evidence",
              "file overhead")
# packed_version 1 on this bundle as this benchmark measured it (bench/results/store_size.json at d4ffe8e)
PACKED_V1 = {"bytes_per_row": 131.5, "by_group": {"keys and row": 0.4, "time_ms": 2.9, "evidence ids": 0.6, "hull": 79.2,
                                                  "grid counts": 18.4, "statistics": 27.9, "other evidence": 2.0,
                                                  "file overhead": 0.2}}
PACKED_V2 = 88.6  # packed_version 2 on this bundle (bench/results/store_size.json at 676f17a)
TARGET_ROWS = 470_000
STATISTICS = ("l2_diff", "l2_ref", "cosine", "max_abs", "max_rel", "rmse", "rel_l1", "hull_slack")
VISIT = ["problem", "input_id", "output_index", "mutant_id"]
# the complete dataset: (6,765 Pending mutants + 70 originals) × 68 pool inputs, and the 70 × 68 reference rows
FULL_MUTANTS, PROBLEMS, INPUTS = 6765, 70, 68
FULL_ROWS = (FULL_MUTANTS + 2 * PROBLEMS) * INPUTS


def group(column: str) -> str:
    """The column group of a stored column (of a part or of a packed file)."""
    name = column.split(".")[0]
    split = evidence_column(name)
    field = split[1] if split else name
    if name == "time_ms":
        return "time_ms"
    if name in ("fp32_evidence", "fp64_evidence", "partner", "group"):
        return "evidence ids"
    if field in ("hull_r", "hull_d", "hull_points", "r", "r_step", "r_diff", "link", "q", "q_step", "d_xor"):
        return "hull"
    if field.startswith("within"):
        return "grid counts"
    if field.removesuffix("_xor").removesuffix("_bits") in STATISTICS:
        return "statistics"
    if split or name in ("n", "n_unequal", "shape_match", "dtype_match", "out_shape", "ref_shape", "out_dtype",
                         "ref_dtype", "compare_dtype", "all_zero_out", "hull_complete") or name.startswith("n_"):
        return "other evidence"
    return "keys and row"


def by_group(files: list[bytes | Path]) -> Counter:
    """Bytes of Parquet files by column group (compressed column chunks; the rest is file overhead)."""
    groups: Counter = Counter()
    for file in files:
        handle = pq.ParquetFile(io.BytesIO(file) if isinstance(file, bytes) else file)
        size = len(file) if isinstance(file, bytes) else file.stat().st_size
        metadata = handle.metadata
        for g in range(metadata.num_row_groups):
            for c in range(metadata.num_columns):
                column = metadata.row_group(g).column(c)
                groups[group(column.path_in_schema)] += column.total_compressed_size
                size -= column.total_compressed_size
        groups["file overhead"] += size
    return groups


def write(table: pa.Table) -> bytes:
    """zstd 19, byte-stream-split numbers, dictionaries for strings."""
    numbers = [f.name for f in table.schema if pa.types.is_floating(f.type) or pa.types.is_integer(f.type)
               or (pa.types.is_list(f.type) and pa.types.is_floating(f.type.value_type))]
    strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", compression_level=19, use_byte_stream_split=numbers,
                   use_dictionary=strings, row_group_size=max(1, table.num_rows))
    return sink.getvalue()


def distinct(table: pa.Table) -> tuple[list[bytes], int]:
    """The rows (evidence replaced by ids) and each prefix's distinct evidence, written; and how many mutant
    rows hold exactly the evidence of the original's row of the same (problem, input, output)."""
    files, rows, same = [], table, 0
    key = ["problem", "input_id", "output_index"]
    for p in PREFIXES:
        names = [n for n in table.column_names if n.startswith(p)]
        block = table.select(names)
        signature = pd.Series([repr(v) for v in zip(*(block.column(n).to_pylist() for n in names))])
        frame = table.select(key + ["mutant_id"]).to_pandas().assign(sig=signature)
        original = frame[frame["mutant_id"] == "original"][[*key, "sig"]].rename(columns={"sig": "orig"})
        merged = frame.merge(original, on=key, how="left")
        same += int(((merged["sig"] == merged["orig"]) & ~merged["mutant_id"].isin(["original", "reference"])).sum())
        ids, first = pd.factorize(signature)[0], ~signature.duplicated().to_numpy()
        rows = rows.drop_columns(names).append_column(p + "evidence", pa.array(ids.astype(np.int32)))
        files.append(write(block.filter(pa.array(first))))
    return [write(rows), *files], same


def packed_files(table: pa.Table, folder: Path, meta: dict) -> list[Path]:
    """The files of `table` packed at `folder` (read back and compared first)."""
    store = pack_rows(folder, meta, table)
    back = store.read_table()
    expected = table.sort_by([(n, "ascending") for n in KEY_COLUMNS])
    assert back.schema.equals(expected.schema)
    pd.testing.assert_frame_equal(back.to_pandas(), expected.to_pandas(), check_exact=True)
    return sorted((folder / PACKED_DIR).iterdir())


def first_mutants(table: pa.Table, m: int) -> pa.Table:
    """The rows of originals, references and the first m mutants (by id) of each problem."""
    frame = table.select(["problem", "mutant_id"]).to_pandas()
    mutants = frame[~frame["mutant_id"].isin(["original", "reference"])].drop_duplicates()
    chosen = mutants.sort_values(["problem", "mutant_id"]).groupby("problem").head(m)
    keep = frame["mutant_id"].isin(["original", "reference"]) | frame.set_index(["problem", "mutant_id"]).index.isin(
        pd.MultiIndex.from_frame(chosen))
    return table.filter(pa.array(np.asarray(keep)))


def mutants_folder(folder: Path, run_mutants: Path | None) -> dict:
    """Bytes of the mutants folder as kill_matrix/bundle.py writes it (mutants.jsonl.gz alone: score makes the
    diffs from the bundled sources): the bundle's, and the complete dataset's (the lines of the run's Pending
    mutants, gzipped as the bundle ships them, when --run-mutants is given, else the bundle's bytes per mutant
    times 6,765); `blocks_4k` counts the file in whole 4 KiB blocks, as `du` does on most file systems."""
    def sizes(data: bytes, count: int) -> dict:
        return {"mutants": count, "bytes": len(data), "blocks_4k": -(-len(data) // 4096) * 4096}

    path = mutants_file(folder)
    own = sizes(path.read_bytes(), len(mutants_bytes(path).splitlines()))
    if run_mutants is None:
        scale = FULL_MUTANTS / own["mutants"]
        full = {"mutants": FULL_MUTANTS, "bytes": round(own["bytes"] * scale), "blocks_4k": round(own["blocks_4k"] * scale),
                "how": "the bundle's bytes per mutant × 6,765"}
    else:
        pending = {m.id for m in read_mutants(run_mutants) if m.status == PENDING}
        lines = [line for line in mutants_bytes(mutants_file(run_mutants)).decode().splitlines()
                 if line.strip() and json.loads(line)["id"] in pending]
        full = {**sizes(gzipped("".join(line + "\n" for line in lines)), len(lines)),
                "how": f"{run_mutants}: its Pending mutants' lines, gzipped"}
    return {"bundle": own, "complete": full}


def packed_bytes(table: pa.Table, folder: Path, meta: dict) -> int:
    return sum(path.stat().st_size for path in packed_files(table, folder, meta))


def by_problem(table: pa.Table, folder: Path, meta: dict) -> dict[str, tuple[int, int]]:
    """(rows, packed bytes) of each problem's rows packed alone."""
    import pyarrow.compute as pc

    column = table.column("problem")
    return {problem: (part.num_rows, packed_bytes(part, folder / str(index), meta))
            for index, problem in enumerate(sorted(set(column.to_pylist())))
            for part in [table.filter(pc.equal(column, problem))]}


def weighted_projection(table: pa.Table, meta: dict, dense: list[Path], run_mutants: Path, folder: Path) -> dict:
    """The complete dataset's packed evidence projected problem by problem (see the module's docstring); the
    `dense` stores (e.g. the complete run's shards: other solutions each) read as one."""
    stores = [EvidenceStore(d).open() for d in dense]
    dense_table = pa.concat_tables([store.read_table() for store in stores])
    bundle, full = by_problem(table, folder / "bundle", meta), by_problem(dense_table, folder / "dense", meta)
    ratio = float(np.median([(full[p][1] / full[p][0]) / (bundle[p][1] / bundle[p][0]) for p in full]))
    together = packed_bytes(dense_table, folder / "together", stores[0].meta) / sum(b for _, b in full.values())
    pending = Counter(m.problem for m in read_mutants(run_mutants) if m.status == PENDING)
    variants = table.select(["problem", "mutant_id"]).to_pandas().groupby("problem").mutant_id.nunique()
    rows = total = 0.0
    for problem, (count, size) in bundle.items():
        complete = count / variants[problem] * (pending[problem] + 2)
        rate = full[problem][1] / full[problem][0] if problem in full else ratio * size / count
        rows += complete
        total += complete * rate * together
    return {"dense": [str(d) for d in dense], "dense_problems": len(full), "dense_over_bundle_median": round(ratio, 3),
            "together_over_alone": round(together, 3), "rows": round(rows), "evidence_mib": round(total / MiB, 1),
            "evidence_bytes_per_row": round(total / rows, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path, default=Path("kill_matrix/evidence"))
    parser.add_argument("--mutants", type=Path, default=Path("kill_matrix/mutants"))
    parser.add_argument("--run-mutants", type=Path, help="the run's mutants folder (all its mutants)")
    parser.add_argument("--dense", type=Path, action="append", help="a store of some solutions with every mutant "
                        "(the projection by problem; needs --run-mutants; repeatable: stores of other solutions each)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    store = EvidenceStore(args.evidence).open()
    table = store.read_table()
    rows = table.num_rows
    with tempfile.TemporaryDirectory() as tmp:
        if store.packed:  # measure the parts as the run stage would write them
            plain = EvidenceStore(Path(tmp) / "plain").create(store.meta)
            plain.append(table.to_pylist())
            plain.compact()
            store = plain
        before = by_group(store.parts)
        visit = table.sort_by([(n, "ascending") for n in VISIT])
        ordered = table.sort_by([(n, "ascending") for n in KEY_COLUMNS])
        distinct_files, same = distinct(ordered)
        after = by_group(packed_files(table, Path(tmp) / "packed", store.meta))
        zstd = packed.write(packed.encode(ordered), Path(tmp) / "zstd", {}, codec=("zstd", 19))
        steps = {"as written": sum(before.values()), "zstd 19 + split": len(write(table)),
                 "input order": len(write(visit)), "distinct evidence": sum(map(len, distinct_files)),
                 "packed v1": PACKED_V1["bytes_per_row"] * rows, "packed v2": PACKED_V2 * rows, "packed, zstd 19": sum(by_group(list(zstd.values())).values()),
                 "packed": sum(after.values())}
        samples = {}
        for m in (4, 8, 12, 16):
            part = first_mutants(table, m)
            size = sum(p.stat().st_size for p in packed_files(part, Path(tmp) / f"m{m}", store.meta))
            samples[m] = {"rows": part.num_rows, "bytes": size}
        weighted = (weighted_projection(table, store.meta, args.dense, args.run_mutants, Path(tmp) / "weighted")
                    if args.dense and args.run_mutants else None)
    print(f"{rows} rows; mutant rows with the evidence of the original's row: {same} (both prefixes counted)")
    print(f"{'step':<22} {'bytes/row':>10} {'ratio':>7}")
    for name, size in steps.items():
        print(f"{name:<22} {size / rows:>10.1f} {size / steps['as written']:>7.3f}")
    print(f"\n{'column group':<16} {'as written':>11} {'packed v1':>10} {'packed':>8}   (bytes/row)")
    for name in ROW_GROUPS:
        print(f"{name:<16} {before[name] / rows:>11.1f} {PACKED_V1['by_group'][name]:>10.1f} {after[name] / rows:>8.1f}")
    print(f"{'total':<16} {sum(before.values()) / rows:>11.1f} {PACKED_V1['bytes_per_row']:>10.1f} "
          f"{sum(after.values()) / rows:>8.1f}")
    print(f"\n{'first m mutants':<16} {'rows':>7} {'MiB':>7} {'bytes/row':>10} {'per added row':>14}")
    previous = None
    for m, s in samples.items():
        added = "" if previous is None else f"{(s['bytes'] - previous['bytes']) / (s['rows'] - previous['rows']):>14.1f}"
        print(f"{m:<16} {s['rows']:>7} {s['bytes'] / MiB:>7.2f} {s['bytes'] / s['rows']:>10.1f} {added}")
        previous = s
    (a, sa), (b, sb) = list(samples.items())[-2:]
    marginal = (sb["bytes"] - sa["bytes"]) / (sb["rows"] - sa["rows"])
    evidence = sb["bytes"] + (FULL_ROWS - sb["rows"]) * marginal
    at_target = {"marginal": sb["bytes"] + (TARGET_ROWS - sb["rows"]) * marginal,
                 "average": TARGET_ROWS * sb["bytes"] / sb["rows"]}
    folder = mutants_folder(args.mutants, args.run_mutants)
    provenance = (args.evidence.parent / "provenance.json").stat().st_size if (args.evidence.parent / "provenance.json").is_file() else 0
    total = evidence + folder["complete"]["bytes"] + provenance
    print(f"\ncomplete dataset: {FULL_ROWS} rows; packed evidence ≈ {evidence / MiB:.1f} MiB ({evidence / FULL_ROWS:.1f} "
          f"bytes/row: m={b} plus {marginal:.1f} bytes per further row, the m={a}→{b} rate)")
    print(f"{TARGET_ROWS} rows: packed evidence ≈ {at_target['marginal'] / MiB:.1f} MiB at that rate, "
          f"{at_target['average'] / MiB:.1f} MiB at the bundle's {sb['bytes'] / sb['rows']:.1f} bytes/row")
    print(f"mutants folder of the complete dataset ({folder['complete']['how']}): {folder['complete']['bytes'] / MiB:.1f} "
          f"MiB ({folder['complete']['blocks_4k'] / MiB:.1f} MiB in 4 KiB blocks)")
    print(f"complete bundle ≈ {total / MiB:.1f} MiB (target 40 MiB: the evidence may take "
          f"{(40 * MiB - folder['complete']['bytes'] - provenance) / FULL_ROWS:.1f} bytes/row)")
    if weighted:
        sources = ", ".join(weighted["dense"])
        print(f"by problem, weighted by their mutants ({weighted['dense_problems']} problems from {sources}, "
              f"the rest at {weighted['dense_over_bundle_median']}× the bundle's rate): packed evidence ≈ "
              f"{weighted['evidence_mib']} MiB for {weighted['rows']} rows ({weighted['evidence_bytes_per_row']} "
              f"bytes/row); complete bundle ≈ "
              f"{(weighted['evidence_mib'] * MiB + folder['complete']['bytes'] + provenance) / MiB:.1f} MiB")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "evidence": str(args.evidence), "rows": rows, "mutant_rows_with_the_originals_evidence": same,
            "bytes_per_row": {k: round(v / rows, 1) for k, v in steps.items()},
            "by_group_bytes_per_row": {g: {"as written": round(before[g] / rows, 1), "packed v1": PACKED_V1["by_group"][g],
                                           "packed": round(after[g] / rows, 1)} for g in ROW_GROUPS},
            "samples": {str(m): s for m, s in samples.items()},
            "complete": {"rows": FULL_ROWS, "evidence_mib": round(evidence / MiB, 1),
                         "evidence_bytes_per_row": round(evidence / FULL_ROWS, 1),
                         f"evidence_mib_at_{TARGET_ROWS}_rows": {k: round(v / MiB, 1) for k, v in at_target.items()},
                         "mutants_folder": folder["complete"],
                         "bundle_mib": round(total / MiB, 1)},
            "complete_by_problem": None if weighted is None else {
                **weighted, "bundle_mib": round((weighted["evidence_mib"] * MiB + folder["complete"]["bytes"]
                                                 + provenance) / MiB, 1)}}, indent=1) + "\n")


if __name__ == "__main__":
    main()
