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
    cover-early  the first input of every group, then each group's inputs of the problem's cover (one input of
                 each catalog oracle at each shape: `scoring.oracle.input_cover`), then the rest of each group:
                 a candidate, so that a variant that keeps crashing spends its crashes on the cover

Crashes as well: a variant with more than --max-crashes sticky crashes observed had its other inputs inferred
after them, except the cover inputs, each observed at the cost of a fresh worker. For each such variant the
crashes under an order are counted as if it crashed on every input it crashed on or had inferred (what it did
on those is unknown): its inputs in that order, each a crash where it would crash, only the cover's after the
limit. Each is a restart: a fresh worker and its startup.

What it leaves out: the replays after a missed deadline or a hang (the killed worker's slice replays like
after a crash). On shard 2 of the bundled run they are most of them: its three calls replayed 31,349 pairs,
against 3,658 estimated here from its crashes. On shards 1 and 2 the cover-early order changes the crashes
past the limit by 0 and -4 (429, 612), and the replays by -27% and +17%: it was not taken.

    PYTHONPATH=. python bench/replay_cost.py --store bench/results/full_run/shard1 [--pool default]
        [--job-size 48] [--max-crashes 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Sequence, Union

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracleaudit.errors import OracleAuditError  # noqa: E402
from oracleaudit.execution.plan import JOB_SIZE, input_runs  # noqa: E402
from oracleaudit.execution.supervisor import MAX_CRASHES  # noqa: E402
from oracleaudit.pool import Pool  # noqa: E402
from oracleaudit.scoring.oracle import covering  # noqa: E402
from oracleaudit.status import ORIGINAL, REFERENCE  # noqa: E402
from oracleaudit.store import EvidenceStore  # noqa: E402

Cover = Callable[[str, Sequence[str]], Sequence[str]]
Order = Union[list[str], Callable[[str, set[str]], list[str]]]
STICKY = re.compile(r"illegal memory access|illegal instruction|misaligned address|unspecified launch failure|"
                    r"invalid program counter|hardware stack error|CUBLAS_STATUS_INTERNAL_ERROR|"
                    r"CUDNN_STATUS_INTERNAL_ERROR|the worker process died")


def orders(pool: Pool, cover: Cover | None = None) -> dict[str, Order]:
    """Each order: the pool's keys, or a function of (problem, its input keys) giving them in order (the
    cover-early order, with `cover(problem, keys)` the problem's cover: the catalog's when None). A group's
    shape variant stands for its overrides, which the worker resolves per problem (two shapes that resolve
    alike for a problem are one group there)."""
    cover = cover or covering()
    entries = [SimpleNamespace(key=e.key, overrides=(e.shape,), weight_seed=e.weight_seed) for e in pool.entries]
    groups: dict[tuple, list[str]] = {}
    for entry in entries:
        groups.setdefault((entry.overrides, entry.weight_seed), []).append(entry.key)
    ordered = list(groups.values())

    def cover_early(problem: str, present: set[str]) -> list[str]:
        early = set(cover(problem, [k for k in pool.keys() if k in present]))
        rests = [[k for k in g[1:] if k in present] for g in ordered]
        return ([g[0] for g in ordered] + [k for rest in rests for k in rest if k in early]
                + [k for rest in rests for k in rest if k not in early])

    return {"groups": [k for g in ordered for k in g],
            "small-first": [k for g in sorted(ordered, key=len) for k in g],
            "worker": [e.key for run in input_runs(entries, pool.keys()) for e in run],
            "cover-early": cover_early}


def in_order(order: Order, problem: str, present: set[str]) -> list[str]:
    """The `present` input keys of `problem` in `order`."""
    keys = order(problem, present) if callable(order) else order
    return [k for k in keys if k in present]


def first_crashes(rows) -> dict[tuple[str, str], set[str]]:
    """(problem, variant) → the inputs of its sticky crashes."""
    sticky = rows[(rows.status == "RuntimeError") & ~rows.inferred.fillna(False).astype(bool)
                  & rows.error_message.fillna("").str.contains(STICKY)]
    return {key: set(group.input_id) for key, group in sticky.groupby(["problem", "mutant_id"])}


def replays(rows, order: Order, job_size: int) -> tuple[int, list[int]]:
    """The pairs replayed under `order`, and the position of every first crash."""
    crashes = first_crashes(rows)
    total, positions = 0, []
    for problem, frame in rows.groupby("problem"):
        present = set(frame.input_id)
        position = {key: i for i, key in enumerate(in_order(order, problem, present))}
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


def crashes(rows, order: Order, cover: Cover, pool_keys: list[str], max_crashes: int) -> int:
    """The crashes (each a fresh worker) of the variants past `max_crashes` under `order`, as if each crashed
    on every input it crashed on or had inferred (see the module's docstring)."""
    guessed = rows[rows.inferred.fillna(False).astype(bool) & (rows.status == "RuntimeError")]
    guessed = {key: set(group.input_id) for key, group in guessed.groupby(["problem", "mutant_id"])}
    total = 0
    for (problem, variant), crashed in first_crashes(rows).items():
        if len(crashed) <= max_crashes:
            continue
        would = crashed | guessed.get((problem, variant), set())
        present = set(rows[(rows.problem == problem) & (rows.mutant_id == variant)].input_id)
        covered = set(cover(problem, [k for k in pool_keys if k in present]))
        count = 0
        for key in in_order(order, problem, present):
            if count <= max_crashes or key in covered:
                count += key in would
        total += count
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, type=Path, help="an evidence store (plain or packed)")
    parser.add_argument("--pool", default="default")
    parser.add_argument("--job-size", type=int, default=JOB_SIZE, help="variants per slice (run's --job-size)")
    parser.add_argument("--max-crashes", type=int, default=MAX_CRASHES,
                        help=f"run's --max-crashes (default {MAX_CRASHES})")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.job_size < 1:
        sys.exit(f"replay_cost.py: error: --job-size must be ≥ 1, got {args.job_size}")
    if args.max_crashes < 1:
        sys.exit(f"replay_cost.py: error: --max-crashes must be ≥ 1, got {args.max_crashes}")
    try:
        pool = Pool.load(args.pool)
        rows = EvidenceStore(args.store).open().read(
            columns=["problem", "mutant_id", "input_id", "output_index", "status", "error_message", "inferred"])
    except OracleAuditError as err:
        sys.exit(f"replay_cost.py: error: {err}")
    rows = rows[(rows.output_index == 0) & (rows.mutant_id != REFERENCE)]
    pairs = int((~rows.inferred.fillna(False).astype(bool)).sum())
    result = {"store": str(args.store), "pairs": pairs, "first_crashes": len(first_crashes(rows)),
              "job_size": args.job_size, "max_crashes": args.max_crashes, "orders": {}}
    print(f"{pairs} pairs observed, {result['first_crashes']} variants with a sticky crash")
    cover = covering()
    for name, order in orders(pool, cover).items():
        total, positions = replays(rows, order, args.job_size)
        restarts = crashes(rows, order, cover, pool.keys(), args.max_crashes)
        result["orders"][name] = {"replayed_pairs": total, "per_pair": round(total / pairs, 3) if pairs else None,
                                  "crashes_past_the_limit": restarts, "first_crash_positions": sorted(positions)}
        print(f"{name:12s} {total:>8} pairs replayed ({total / max(pairs, 1):.2f} a pair), {restarts} crashes of "
              f"the variants past --max-crashes; first crashes at inputs {sorted(positions)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
