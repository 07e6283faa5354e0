"""Make a benchmark's mutants folder: the first N Pending mutants by id (the rule of `oracleaudit run
--per-solution N`) of the named solutions, from a full `oracleaudit mutate` output. With --exclude FILE the
mutants it names (a mutant id first on each line; `#` starts a comment) are passed over: a throughput sample
without the mutants that hung or crashed in the complete run (bench/data/faulty_mutants.tsv, written by
`bench/fault_tail.py faulty`) measures the pairs, not one hung variant's tail.

    python bench/sample_mutants.py --mutants out/mutants --per-solution 20 --out bench/data/mutants_3x20 \
        datasets/oakb/solutions/level1/1_ReLU.py datasets/oakb/solutions/level1/23_Softmax.py \
        datasets/oakb/solutions/level2/1_Gemm_Bias_ReLU.py
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def excluded_ids(path: Path) -> set[str]:
    """The mutant ids a file names: the first field of each line, after any `#` comment is removed."""
    return {line.split("#", 1)[0].split()[0] for line in path.read_text().splitlines()
            if line.split("#", 1)[0].strip()}


def main() -> None:
    from oracleaudit.mutant import PENDING, read_mutants, write_mutants

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, required=True, help="folder written by `oracleaudit mutate`")
    parser.add_argument("--per-solution", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--exclude", type=Path, metavar="FILE", help="mutant ids to pass over, one per line")
    parser.add_argument("solutions", nargs="+", help="solution files, as mutants.jsonl names them")
    args = parser.parse_args()

    everything = read_mutants(args.mutants)
    excluded = excluded_ids(args.exclude) if args.exclude else set()
    chosen = []
    for solution in args.solutions:
        pending = sorted((m for m in everything if m.source == solution and m.status == PENDING
                          and m.id not in excluded), key=lambda m: m.id)
        if not pending:
            sys.exit(f"sample_mutants.py: error: {solution}: no Pending mutants in {args.mutants}")
        chosen += pending[:args.per_solution]
    shutil.rmtree(args.out, ignore_errors=True)
    write_mutants(args.out, chosen, {s: Path(s).read_text() for s in args.solutions})
    print(f"{len(chosen)} mutants of {len(args.solutions)} solutions written to {args.out}")


if __name__ == "__main__":
    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError) as err:
        sys.exit(f"sample_mutants.py: error: {err}")
