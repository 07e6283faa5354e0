"""Benchmark (CPU): how many pairs a run replays after crashes, estimated from a store's rows for several
orders of the pool inputs, so that an order can be chosen without GPU time.

Input by input, a variant's first sticky crash at position q of its slice's input order ends a process in
which every other variant still running in the slice has run q inputs (q + 1 for those before it in the
variant order: the original, then mutant ids sorted); the fresh worker replays them, unrecorded, for each
of them with inputs left (supervisor.py, `Job.replay`). The crashed variant is deferred, its remaining
inputs run alone after the others', so its later crashes replay nothing and it is no longer among the
others. The original is in the first slice only (later slices run it unrecorded, for timing, and never
replay it). A row is a sticky crash when its message is one of the CUDA errors that end a context (STICKY)
or says the worker died: the store marks them no other way, so this is an estimate. Pairs are every
observed (variant, input) of the store.

Orders (the worker runs an input's variants one after the other, each group of inputs with one set of
models; a group is the inputs of one shape variant and weight seed):
    groups       each group whole, groups in pool order of their first input (the worker's order before)
    small-first  each group whole, the smallest group first
    worker       the first input of every group, then the rest of each group (`plan.input_runs`, the
                 worker's order now)

    PYTHONPATH=. python bench/replay_cost.py --store bench/results/full_run/shard1 [--pool default]
        [--job-size 48] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracleaudit.errors import OracleAuditError  # noqa: E402
from oracleaudit.execution.plan import JOB_SIZE, input_runs  # noqa: E402
from oracleaudit.pool import Pool  # noqa: E402
from oracleaudit.status import ORIGINAL, REFERENCE  # noqa: E402
from oracleaudit.store import EvidenceStore  # noqa: E402

STICKY = re.compile(r"illegal memory access|illegal instruction|misaligned address|unspecified launch failure|"
                    r"invalid program counter|hardware stack error|CUBLAS_STATUS_INTERNAL_ERROR|"
                    r"CUDNN_STATUS_INTERNAL_ERROR|the worker process died")


def orders(pool: Pool) -> dict[str, list[str]]:
    """The pool's keys in each order. A group's shape variant stands for its overrides, which the worker
    resolves per problem (two shapes that resolve alike for a problem are one group there)."""
    entries = [SimpleNamespace(key=e.key, overrides=(e.shape,), weight_seed=e.weight_seed) for e in pool.entries]
    groups: dict[tuple, list[str]] = {}
    for entry in entries:
        groups.setdefault((entry.overrides, entry.weight_seed), []).append(entry.key)
    ordered = list(groups.values())
    return {"groups": [k for g in ordered for k in g],
            "small-first": [k for g in sorted(ordered, key=len) for k in g],
            "worker": [e.key for run in input_runs(entries, pool.keys()) for e in run]}


def first_crashes(rows) -> dict[tuple[str, str], set[str]]:
    """(problem, variant) → the inputs of its sticky crashes."""
    sticky = rows[(rows.status == "RuntimeError") & ~rows.inferred.fillna(False).astype(bool)
                  & rows.error_message.fillna("").str.contains(STICKY)]
    return {key: set(group.input_id) for key, group in sticky.groupby(["problem", "mutant_id"])}


def replays(rows, order: list[str], job_size: int) -> tuple[int, list[int]]:
    """The pairs replayed under `order`, and the position of every first crash."""
    crashes = first_crashes(rows)
    total, positions = 0, []
    for problem, frame in rows.groupby("problem"):
        present = set(frame.input_id)
        position = {key: i for i, key in enumerate(k for k in order if k in present)}
        mutants = sorted(set(frame.mutant_id) - {ORIGINAL})
        for start in range(0, len(mutants), job_size):
            variants = ([ORIGINAL] if start == 0 and ORIGINAL in set(frame.mutant_id) else []) \
                + mutants[start:start + job_size]
            firsts = sorted((min(position[k] for k in crashes[(problem, v)]), variants.index(v), v)
                            for v in variants if (problem, v) in crashes)
            live = set(variants)
            for q, index, variant in firsts:
                live.discard(variant)
                ran = [q + (variants.index(other) < index) for other in live]
                total += sum(n for n in ran if n < len(position))  # a variant with no inputs left replays nothing
                positions.append(q)
    return total, positions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, type=Path, help="an evidence store (plain or packed)")
    parser.add_argument("--pool", default="default")
    parser.add_argument("--job-size", type=int, default=JOB_SIZE, help="variants per slice (run's --job-size)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.job_size < 1:
        sys.exit(f"replay_cost.py: error: --job-size must be ≥ 1, got {args.job_size}")
    try:
        pool = Pool.load(args.pool)
        rows = EvidenceStore(args.store).open().read(
            columns=["problem", "mutant_id", "input_id", "output_index", "status", "error_message", "inferred"])
    except OracleAuditError as err:
        sys.exit(f"replay_cost.py: error: {err}")
    rows = rows[(rows.output_index == 0) & (rows.mutant_id != REFERENCE)]
    pairs = int((~rows.inferred.fillna(False).astype(bool)).sum())
    result = {"store": str(args.store), "pairs": pairs, "first_crashes": len(first_crashes(rows)),
              "job_size": args.job_size, "orders": {}}
    print(f"{pairs} pairs observed, {result['first_crashes']} variants with a sticky crash")
    for name, order in orders(pool).items():
        total, positions = replays(rows, order, args.job_size)
        result["orders"][name] = {"replayed_pairs": total, "per_pair": round(total / pairs, 3) if pairs else None,
                                  "first_crash_positions": sorted(positions)}
        print(f"{name:12s} {total:>8} pairs replayed ({total / max(pairs, 1):.2f} a pair); first crashes at "
              f"inputs {sorted(positions)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
