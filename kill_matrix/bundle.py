"""Make the bundled evidence (this folder) from an evidence store and the mutants folder of its run.

    python kill_matrix/bundle.py --evidence out/evidence --mutants out/mutants --record run-record.json
    python kill_matrix/bundle.py --rescore     # only the scores in provenance.json, after scoring changed

Writes, replacing what is here:
    evidence/            the store's rows as a packed store (contract in oracleaudit/packed.py: about a third
                         of the bytes of a store's parts, read as the same rows), less the rows of mutants that the
                         mutants file does not list (counted in provenance)
    mutants/mutants.jsonl.gz  the lines of the run's mutants.jsonl whose mutants have rows in the store,
                         gzip-compressed (every reader of a mutants folder takes it; a sixteenth of the bytes)
                         (no diffs/: score makes each diff from the bundled source file and the record,
                         byte for byte what mutate writes; a diff file per mutant took 4 KiB on disk each)
    provenance.json      the record passed with --record (how the run was made), plus counts of what was
                         bundled, the sha256 of the full mutants.jsonl the run read, and `scores`: what each
                         catalog oracle scores on the bundle (tests/scoring/test_bundled.py holds score to them)
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


SCORE_KEYS = ("witnessed", "killed", "escaped", "unobserved", "false_alarms", "detection")


def bundled_scores() -> dict[str, dict]:
    """What each catalog oracle scores on the bundled evidence (the keys of SCORE_KEYS)."""
    from oracleaudit.scoring import Audit
    from oracleaudit.scoring.oracle import Oracle, catalog

    audit = Audit.load(HERE / "evidence", HERE / "mutants")
    return {name: {key: audit.score(Oracle.load(name))[key] for key in SCORE_KEYS} for name in sorted(catalog())}


def main() -> None:
    from oracleaudit.mutant import MUTANTS_GZ, gzipped, mutants_bytes, mutants_file
    from oracleaudit.store import EvidenceStore, pack_rows

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path)
    parser.add_argument("--mutants", type=Path)
    parser.add_argument("--record", type=Path, help="JSON: how the evidence was produced")
    parser.add_argument("--rescore", action="store_true", help="only recompute provenance.json's scores")
    args = parser.parse_args()
    if args.rescore:
        record = json.loads((HERE / "provenance.json").read_text())
        record["scores"] = bundled_scores()
        (HERE / "provenance.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        print(json.dumps(record["scores"], indent=2))
        return
    if args.evidence is None or args.mutants is None or args.record is None:
        parser.error("--evidence, --mutants and --record are needed (or --rescore alone)")

    full = mutants_bytes(mutants_file(args.mutants))
    known = {json.loads(line)["id"] for line in full.decode().splitlines() if line.strip()}
    source = EvidenceStore(args.evidence).open()
    table = source.read_table()
    # Rows of mutants the mutants file does not list (made by an earlier catalog) could not be scored.
    listed = pc.is_in(table["mutant_id"], value_set=pa.array(sorted(known | {"original", "reference"})))
    evidence = HERE / "evidence"
    shutil.rmtree(evidence, ignore_errors=True)
    rows = pack_rows(evidence, source.meta, table.filter(listed)).read()
    unlisted = table.filter(pc.invert(listed))

    run_ids = set(rows["mutant_id"])
    mutants = HERE / "mutants"
    shutil.rmtree(mutants, ignore_errors=True)
    mutants.mkdir(parents=True)
    kept = [line for line in full.decode().splitlines() if line.strip() and json.loads(line)["id"] in run_ids]
    (mutants / MUTANTS_GZ).write_bytes(gzipped("".join(line + "\n" for line in kept)))

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
    record["scores"] = bundled_scores()
    (HERE / "provenance.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(json.dumps(record["bundled"], indent=2))


if __name__ == "__main__":
    import sys

    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError, ValueError) as err:
        sys.exit(f"bundle.py: error: {err}")
