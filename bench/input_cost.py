"""Benchmark (CPU): what making the pool inputs costs a run's workers, against reading the same tensors back
from raw bytes on disk, side by side per problem.

A worker makes each pool input it runs on the CPU (`PoolEntry.make_inputs`: the problem's get_inputs() drawn
`draw` times after the entry's seed, then the pool's transforms) and counts those seconds as "references"
(worker.py, `_host_entry`). It does so once in every slice it takes, and again in every fresh worker that
continues a job after a crash or a missed deadline, and for every crashed or hung variant handed back to the
queue as a job of its own. The alternative measured here is a cache of the made inputs in the reference
cache's format (`references.py`: raw bytes after a JSON header, read memory-mapped): each problem's inputs are
made, written once, then read back with every byte touched (a copy, as a transfer to the GPU would read them).
The file was just written, so the read is from the page cache: a lower bound of a read from disk.

Printed and written as JSON (--json): per problem, the pool entries, their inputs' MiB, and the seconds to
make, write and read them; the totals and make over read; and the slices the run plans for the problems'
Pending mutants (`plan.JOB_SIZE` variants each), the least number of times a run makes each input, so the
least making seconds a run spends (on one thread; a worker has `cpu_threads`, cores over slots, but draws a
tensor on one).

    PYTHONPATH=. python bench/input_cost.py --mutants bench/data/full_run --json bench/results/input_cost.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
from pathlib import Path


def cost(problem_file: Path, pool, root: Path) -> dict:
    """Make every pool entry's inputs of one problem, write them to the cache format, read them back."""
    import torch

    from oracleaudit.execution.references import ReferenceCache
    from oracleaudit.problem import problem_at
    from oracleaudit.tensors import tensors

    problem = problem_at(problem_file)
    cache = ReferenceCache(root)
    modules: dict[tuple, object] = {}
    made = write = read = 0.0
    nbytes = 0
    for index, entry in enumerate(pool.entries_for(problem)):
        key = tuple(entry.overrides or ())
        if key not in modules:  # the worker loads one module per shape group; not timed
            modules[key] = entry.load_problem(problem)
        started = time.perf_counter()
        inputs = tensors(entry.make_inputs(modules[key], "cpu"))
        made += time.perf_counter() - started
        nbytes += sum(t.numel() * t.element_size() for t in inputs)
        started = time.perf_counter()
        if not cache.save(f"{index}", inputs, []):
            raise SystemExit(f"{problem.label}: entry {entry.key}'s inputs are over the cache's size per file")
        write += time.perf_counter() - started
        started = time.perf_counter()
        back, _, _ = cache.load(f"{index}")
        copies = [t.clone() for t in back]
        read += time.perf_counter() - started
        if not all(torch.equal(a, b) for a, b in zip(inputs, copies)):
            raise SystemExit(f"{problem.label}: entry {entry.key} read back differs")
        cache.path(f"{index}").unlink()
    return {"problem": problem.label, "entries": index + 1, "mib": round(nbytes / 2**20, 1),
            "make_s": round(made, 3), "write_s": round(write, 3), "read_s": round(read, 3)}


def slices(mutants: list) -> dict[str, int]:
    """Per problem, the slices `plan.split_job` cuts its solution's Pending mutants into (the original rides
    in the first)."""
    from oracleaudit.execution.plan import JOB_SIZE
    from oracleaudit.mutant import PENDING

    pending = collections.Counter(m.problem_file for m in mutants if m.status == PENDING)
    return {file: -(-count // JOB_SIZE) for file, count in pending.items()}


def main() -> None:
    import torch

    from oracleaudit.mutant import read_mutants
    from oracleaudit.pool import Pool

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=Path, required=True, help="a mutants folder (its problems are measured)")
    parser.add_argument("--pool", default="default")
    parser.add_argument("--problems", type=int, help="only the first N problems by name")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    if args.problems is not None and args.problems < 1:
        parser.error(f"--problems must be ≥ 1, got {args.problems}")
    torch.set_num_threads(1)
    per_problem = slices(read_mutants(args.mutants))
    files = sorted(per_problem)[:args.problems]
    pool = Pool.load(args.pool)
    rows = []
    with tempfile.TemporaryDirectory(prefix="input-cost-") as tmp:
        for file in files:
            rows.append(cost(Path(file), pool, Path(tmp)) | {"slices": per_problem[file]})
            r = rows[-1]
            print(f"{r['problem']:45} {r['entries']:3} entries {r['mib']:8.1f} MiB  make {r['make_s']:7.2f} s  "
                  f"write {r['write_s']:6.2f} s  read {r['read_s']:6.2f} s  {r['slices']} slices", flush=True)
    total = {name: round(sum(r[name] for r in rows), 1) for name in ("entries", "mib", "make_s", "write_s", "read_s")}
    total["make_over_read"] = round(total["make_s"] / total["read_s"], 1) if total["read_s"] else None
    total["make_s_in_slices"] = round(sum(r["make_s"] * r["slices"] for r in rows), 1)
    total["read_s_in_slices"] = round(sum(r["read_s"] * r["slices"] for r in rows), 1)
    print(f"{len(rows)} problems, {total['entries']} entries, {total['mib']} MiB: make {total['make_s']} s, write "
          f"{total['write_s']} s, read {total['read_s']} s (make over read {total['make_over_read']}×); once in "
          f"each planned slice: make {total['make_s_in_slices']} s against read {total['read_s_in_slices']} s")
    if args.json:
        args.json.write_text(json.dumps({"pool": args.pool, "cpus": os.cpu_count(), "torch_threads": 1,
                                         "torch": torch.__version__, "problems": rows, "total": total},
                                        indent=1) + "\n")


if __name__ == "__main__":
    import sys

    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError, ValueError) as err:
        sys.exit(f"input_cost.py: error: {err}")
