"""Benchmark (GPU): `oracleaudit run` throughput with each evidence engine, on the same built mutants and
inputs, side by side in one run.

Several workers share one GPU; its contexts are time-sliced, so the ~150 small kernels and ~6
synchronisations of each torch-version measurement (two per output: against the fp32 and the fp64
reference) wait on every other worker. The fused kernels (`--evidence-engine auto`) do it in four kernels
and one transfer. This script builds the mutants' extensions once (not timed), then runs the same mutants
once per engine, each into a fresh evidence store with the same workers and slices, and prints variants per
second per engine, the ratio to the first engine, the worker-seconds spent executing and measuring, and
whether the verdict-bearing evidence (statuses, counts, hulls) of the runs agrees on every observation
they share.

Run from the repository root on the GPU machine:
    PYTHONPATH=. python bench/worker_cost.py --mutants bench/data/mutants_3x16_sizes --engines torch,auto
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

# Columns that decide every verdict: equal across engines unless a measurement differs.
VERDICT_COLUMNS = ("status", "fp32_n_unequal", "fp32_hull_r", "fp32_hull_d", "fp64_n_unequal", "fp64_hull_r",
                   "fp64_hull_d", "repeat_bitwise_equal")
KEY = ["problem", "mutant_id", "input_id", "output_index"]


def _engines(text: str) -> list[str]:
    from oracleaudit.execution.measure import ENGINES

    values = text.split(",")
    if any(v not in ENGINES for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"not a comma-separated list of distinct engines ({', '.join(ENGINES)}): "
                                         f"{text!r}")
    return values


def prebuild(mutants_dir: Path, pool: str) -> None:
    """Build every extension of the mutants' jobs, as `run` does before its workers need them."""
    from oracleaudit import execution as runner
    from oracleaudit.mutant import read_mutants

    jobs, errors, _ = runner.plan_jobs(read_mutants(mutants_dir), pool, runner.build_root(), set())
    if errors:
        raise SystemExit("worker_cost.py: error: " + "; ".join(errors))
    built: list[bool] = []
    started = time.perf_counter()
    runner.prebuild_in_order(jobs, lambda job, seconds, ok: built.append(ok), threading.Event())
    print(f"built the extensions of {sum(built)} of {len(jobs)} solutions in {time.perf_counter() - started:.0f} s "
          "(not timed below)", flush=True)


def observations(store: Path):
    from oracleaudit.store import EvidenceStore

    frame = EvidenceStore(store).open().read(columns=[*KEY, *VERDICT_COLUMNS])
    for column in ("fp32_hull_r", "fp32_hull_d", "fp64_hull_r", "fp64_hull_d"):
        frame[column] = frame[column].map(lambda v: None if v is None else tuple(v))
    return frame.set_index(KEY).sort_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, required=True, help="folder written by `oracleaudit mutate`")
    parser.add_argument("--pool", default="default")
    parser.add_argument("--engines", type=_engines, default="torch,auto", metavar="E,E,...",
                        help="--evidence-engine values to compare (the first is the baseline)")
    parser.add_argument("--workers-per-gpu", type=int, default=8)
    parser.add_argument("--job-size", type=int, default=6)
    parser.add_argument("--json", action="store_true", help="print one JSON summary line at the end")
    args = parser.parse_args()

    from oracleaudit import execution as runner
    from oracleaudit.execution.scheduler import usable_cpus
    from oracleaudit.mutant import PENDING, read_mutants

    n = sum(m.status == PENDING for m in read_mutants(args.mutants))
    print(f"{n} mutants; pool {args.pool}; {args.workers_per_gpu} workers per GPU, slices of {args.job_size}; "
          f"{usable_cpus()} cores", flush=True)
    prebuild(args.mutants, args.pool)
    work = Path(tempfile.mkdtemp(prefix="oracleaudit-bench-"))
    results = []
    try:
        for engine in args.engines:
            store = work / f"evidence-{engine}"
            started = time.perf_counter()
            result = runner.run(args.mutants, store, pool=args.pool, workers_per_gpu=args.workers_per_gpu,
                                job_size=args.job_size, evidence_engine=engine, show_progress=False)
            wall = time.perf_counter() - started
            summary = result.summary()
            results.append({"engine": engine, "wall_s": round(wall, 1),
                            "variants_per_s": round(result.variants / wall, 3),
                            "exec_s": summary["phases"]["execution_s"], "evidence_s": summary["phases"]["evidence_s"],
                            "by_status": summary["observations_by_status"],
                            "errors": len(result.errors)})
            print(f"engine {engine:>5}: {wall:6.1f} s  {result.variants / wall:6.2f} variants/s  "
                  f"worker-seconds: execution {summary['phases']['execution_s']:.1f} · evidence "
                  f"{summary['phases']['evidence_s']:.1f}  "
                  f"{summary['observations_by_status']}", flush=True)
        base = observations(work / f"evidence-{args.engines[0]}")
        for entry in results:
            frame = observations(work / f"evidence-{entry['engine']}")
            shared = base.index.intersection(frame.index)
            left, right = base.loc[shared], frame.loc[shared]
            ok = (left["status"] == "Ok") & (right["status"] == "Ok")  # a Timeout may fall either way
            differ = int((left[ok].map(repr) != right[ok].map(repr)).any(axis=1).sum())
            entry.update(shared_ok=int(ok.sum()), verdict_rows_differing=differ,
                         ratio=round(entry["variants_per_s"] / results[0]["variants_per_s"], 2))
            print(f"engine {entry['engine']:>5}: {entry['ratio']:.2f}x the first; "
                  f"{differ} of {int(ok.sum())} shared Ok observations differ in status, counts or hulls")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = max(results, key=lambda e: e["variants_per_s"])
    print(f"fastest: engine {best['engine']}", flush=True)
    if args.json:
        print(json.dumps({"results": results, "fastest": best["engine"]}))


if __name__ == "__main__":
    main()
