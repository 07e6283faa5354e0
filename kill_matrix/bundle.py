"""Make the bundled evidence (this folder) from an evidence store and the mutants folder of its run.

    python kill_matrix/bundle.py --evidence out/evidence --mutants out/mutants --record run-record.json

Writes, replacing what is here:
    evidence/            the store's rows, compacted to one Parquet part sorted by key (store.py contract),
                         less the rows of mutants that the mutants file does not list (counted in provenance)
    mutants/mutants.jsonl  the lines of the run's mutants.jsonl whose mutants have rows in the store
    mutants/diffs/       their diffs
    provenance.json      the record passed with --record (how the run was made), plus counts of what was
                         bundled and the sha256 of the full mutants.jsonl the run read
The same inputs give byte-identical files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent


def main() -> None:
    from oracleaudit.mutant import DIFFS_DIR, MUTANTS_FILE
    from oracleaudit.store import EvidenceStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path, required=True)
    parser.add_argument("--mutants", type=Path, required=True)
    parser.add_argument("--record", type=Path, required=True, help="JSON: how the evidence was produced")
    args = parser.parse_args()

    full = (args.mutants / MUTANTS_FILE).read_bytes()
    known = {json.loads(line)["id"] for line in full.decode().splitlines() if line.strip()}
    source = EvidenceStore(args.evidence).open()
    table = source.read_table()
    # Rows of mutants the mutants file does not list (made by an earlier catalog) could not be scored.
    listed = pc.is_in(table["mutant_id"], value_set=pa.array(sorted(known | {"original", "reference"})))
    evidence = HERE / "evidence"
    shutil.rmtree(evidence, ignore_errors=True)
    bundled = EvidenceStore(evidence).create(source.meta)
    bundled.append(table.filter(listed).to_pylist())
    bundled.compact()
    rows = bundled.read()
    unlisted = table.filter(pc.invert(listed))

    run_ids = set(rows["mutant_id"])
    mutants = HERE / "mutants"
    shutil.rmtree(mutants, ignore_errors=True)
    (mutants / DIFFS_DIR).mkdir(parents=True)
    kept = [line for line in full.decode().splitlines() if line.strip() and json.loads(line)["id"] in run_ids]
    (mutants / MUTANTS_FILE).write_text("".join(line + "\n" for line in kept))
    for line in kept:
        mutant_id = json.loads(line)["id"]
        shutil.copyfile(args.mutants / DIFFS_DIR / f"{mutant_id}.diff", mutants / DIFFS_DIR / f"{mutant_id}.diff")

    variants = rows[rows["mutant_id"] != "reference"].drop_duplicates(["problem", "mutant_id"])
    record = json.loads(args.record.read_text())
    record["bundled"] = {
        "mutants_jsonl_sha256_of_the_run": hashlib.sha256(full).hexdigest(),
        "rows": len(rows),
        "problems": int(rows["problem"].nunique()),
        "mutants": int((variants["mutant_id"] != "original").sum()),
        "originals": int((variants["mutant_id"] == "original").sum()),
        "observations_by_status": {k: int(v) for k, v in sorted(rows["status"].value_counts().items())},
        "left_out_rows_of_mutants_not_in_the_mutants_file": {
            "rows": unlisted.num_rows, "mutants": len(set(unlisted["mutant_id"].to_pylist()))},
    }
    (HERE / "provenance.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(json.dumps(record["bundled"], indent=2))


if __name__ == "__main__":
    import sys

    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError, ValueError) as err:
        sys.exit(f"bundle.py: error: {err}")
