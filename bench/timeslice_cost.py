"""Benchmark (GPU): what one synchronisation with the GPU costs when several processes share it, as the run's
workers do (one CUDA context each; the GPU time-slices between contexts).

Every --procs count starts that many processes (each its own CUDA context, forked from nothing: spawned) and,
for each workload in turn, all of them loop over it for --seconds at once, after a barrier; each counts its
iterations. A workload is one round trip of a worker's kind:

    sync      one small kernel, then a synchronisation (the evidence's one transfer of a pair, at its smallest)
    launches  --launches small kernels, then a synchronisation (a pair's kernels: ~60 launches, pair_cost_4x4.json)
    pageable  a --copy-kib copy from pageable host memory to the GPU (synchronous for the host)
    pinned    the same copy from pinned memory, queued (non_blocking), then a synchronisation
    pair      --launches kernels, the pinned copy and a 1 KiB copy back to the host: one pair's shape
    batch     --batch pairs' copies and kernels, then one copy back: pairs batched per synchronisation (counted
              in pairs, so that its rate compares with pair's: what batching a worker's pairs would gain)
    gapped    a pair as a worker makes one: the pinned copy, --launches kernels each followed by --gap-us of the
              host's work (Python between launches), the copy back, then --host-us of host work (the hull, rows).
              At 8 processes it ran 6.9x one process's rate (timeslice_cost.json): contexts switching around the
              gaps cost little. (Workers taking turns at the GPU, one process's work queued at a time, ran it at
              490/s against 1,476/s: the host's work between the launches was serialised. Removed after 0df02d5.)

Printed and written as JSON (--json) per workload and count: round trips per second over all processes, the
ratio to one process's, milliseconds per round trip in each process (per pair for batch), and the GPU-busy
fraction NVML reports while they ran. If round trips per second stop growing with the processes while the GPU
reads busy, the time-slicing between contexts is the bound, and a worker's pairs per second is that rate over
its synchronisations per pair (a pageable copy counts as one): fewer synchronisations per pair, not more
workers, would then raise the run's rate. With the GPU to itself a process runs a round trip in microseconds.

    PYTHONPATH=. python bench/timeslice_cost.py --json $OUT/timeslice_cost.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

WORKLOADS = ("sync", "launches", "pageable", "pinned", "pair", "batch", "gapped")


def _spin(seconds: float) -> None:
    """The host busy for `seconds` (a worker's Python between two launches, or after a pair)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _loop(rank: int, workloads: list[str], seconds: float, launches: int, copy_kib: int, batch: int, gap_us: float,
          host_us: float, barrier, results) -> None:
    """In a child: each workload for `seconds` after the barrier; its count (of pairs for batch, else of
    iterations) and seconds to `results`."""
    import torch

    device = torch.device("cuda")
    small = torch.zeros(256, device=device)
    elements = copy_kib * 256  # float32
    target = torch.empty(elements, device=device)
    pageable = torch.rand(elements)
    pinned = pageable.pin_memory()
    back = torch.zeros(256, device=device)

    def sync() -> None:
        small.add_(1)
        torch.cuda.synchronize()

    def many() -> None:
        for _ in range(launches):
            small.add_(1)
        torch.cuda.synchronize()

    def copy_pageable() -> None:
        target.copy_(pageable)

    def copy_pinned() -> None:
        target.copy_(pinned, non_blocking=True)
        torch.cuda.synchronize()

    def pair() -> None:
        target.copy_(pinned, non_blocking=True)
        for _ in range(launches):
            small.add_(1)
        back.cpu()

    def batched() -> None:
        for _ in range(batch):
            target.copy_(pinned, non_blocking=True)
            for _ in range(launches):
                small.add_(1)
        back.cpu()

    def gapped() -> None:
        target.copy_(pinned, non_blocking=True)
        for _ in range(launches):
            small.add_(1)
            _spin(gap_us * 1e-6)
        back.cpu()
        _spin(host_us * 1e-6)

    steps = {"sync": sync, "launches": many, "pageable": copy_pageable, "pinned": copy_pinned, "pair": pair,
             "batch": batched, "gapped": gapped}
    for name in workloads:
        for _ in range(20):  # warm-up: the kernels loaded, the allocator's blocks made
            steps[name]()
        torch.cuda.synchronize()
        barrier.wait()
        step, count, each = steps[name], 0, batch if name == "batch" else 1
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            step()
            count += each
        results.put((name, rank, count, time.perf_counter() - started))


def measure(procs: int, workloads: list[str], seconds: float, launches: int, copy_kib: int,
            batch: int = 4, gap_us: float = 20.0, host_us: float = 3000.0) -> dict[str, list]:
    """Each workload run by `procs` processes at once: workload → [(count, seconds)] per process, and the GPU-busy
    fraction NVML read meanwhile (workload → fraction, under the key "busy")."""
    import multiprocessing

    from oracleaudit.execution.scheduler import Utilization

    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(procs + 1), context.Queue()
    children = [context.Process(target=_loop, args=(rank, workloads, seconds, launches, copy_kib, batch, gap_us,
                                                          host_us, barrier, results))
                for rank in range(procs)]
    for child in children:
        child.start()
    out: dict[str, list] = {name: [] for name in workloads}
    busy: dict[str, float | None] = {}
    for name in workloads:
        with Utilization(1) as utilization:
            barrier.wait(timeout=300)
            utilization.slice(+1)
            for _ in range(procs):
                workload, _, count, spent = results.get(timeout=seconds + 300)
                out[workload].append((count, spent))
            utilization.slice(-1)
        busy[name] = utilization.busy_fraction()
    for child in children:
        child.join(timeout=60)
    return {**out, "busy": busy}


def summarize(runs: dict[int, dict[str, list]], workloads: list[str]) -> dict[str, list[dict]]:
    """Per workload, per process count: round trips (pairs, for batch) per second over all processes, the ratio to
    the smallest count's, ms per round trip (pair) in a process (the mean over them) and the GPU-busy fraction."""
    table: dict[str, list[dict]] = {}
    for name in workloads:
        rows = []
        for procs in sorted(runs):
            counts = runs[procs][name]
            rate = sum(count / spent for count, spent in counts)
            busy = runs[procs]["busy"].get(name)
            rows.append({"procs": procs, "per_s": round(rate, 1),
                         "ms_each": round(sum(1000 * spent / count for count, spent in counts) / len(counts), 3),
                         "busy": None if busy is None else round(busy, 3)})
        base = rows[0]["per_s"]
        for row in rows:
            row["over_first"] = round(row["per_s"] / base, 2) if base else None
        table[name] = rows
    return table


def _counts(text: str) -> list[int]:
    try:
        counts = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of process counts: {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"process counts must be ≥ 1, got {text!r}")
    return counts


def _workloads(text: str) -> list[str]:
    names = text.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"workloads are {', '.join(WORKLOADS)}; got {text!r}")
    return list(dict.fromkeys(names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=_counts, default=[1, 2, 4, 8, 16], metavar="N,N,...",
                        help="processes sharing the GPU (default 1,2,4,8,16)")
    parser.add_argument("--workloads", type=_workloads, default=list(WORKLOADS), metavar="NAME,...",
                        help=f"of {', '.join(WORKLOADS)} (default all)")
    parser.add_argument("--seconds", type=float, default=3.0, help="each workload's time per count (default 3)")
    parser.add_argument("--launches", type=int, default=60, help="kernels per round trip of launches and pair")
    parser.add_argument("--copy-kib", type=int, default=1024, help="the copies' size (default 1024: the bundled "
                        "run's entries copied for every pair average 1.2 MiB)")
    parser.add_argument("--batch", type=int, default=4, help="pairs per synchronisation of batch (default 4)")
    parser.add_argument("--gap-us", type=float, default=20.0,
                        help="host microseconds after each kernel of gapped (default 20)")
    parser.add_argument("--host-us", type=float, default=3000.0,
                        help="host microseconds after each pair of gapped (default 3000)")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    if args.seconds <= 0 or args.launches < 1 or args.copy_kib < 1 or args.batch < 1:
        parser.error("--seconds must be > 0, --launches, --copy-kib and --batch ≥ 1")
    if args.gap_us < 0 or args.host_us < 0:
        parser.error("--gap-us and --host-us must be ≥ 0")
    import torch

    if not torch.cuda.is_available():
        sys.exit("timeslice_cost.py: error: needs a CUDA device (torch.cuda.is_available() is False)")
    runs = {}
    for procs in args.procs:
        runs[procs] = measure(procs, args.workloads, args.seconds, args.launches, args.copy_kib, args.batch,
                              args.gap_us, args.host_us)
        print(f"{procs} processes: " + ", ".join(
            f"{name} {sum(c / s for c, s in runs[procs][name]):.0f}/s" for name in args.workloads), flush=True)
    table = summarize(runs, args.workloads)
    for name, rows in table.items():
        print(f"{name:9s} " + "  ".join(f"{r['procs']}: {r['per_s']:.0f}/s ({r['over_first']}x, {r['ms_each']} ms, "
                                         f"busy {r['busy']})" for r in rows))
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "seconds": args.seconds,
                                         "launches": args.launches, "copy_kib": args.copy_kib, "batch": args.batch,
                                         "gap_us": args.gap_us, "host_us": args.host_us,
                                         "workloads": table},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
