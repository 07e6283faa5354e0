"""Benchmark (GPU): what the hull of a comparison whose every element is a candidate costs the run, finished on
the GPU by `measure._front_hull_torch` as it is now (convex_chain's first passes on masks, the device waited for
about 4 times) against the version before (`previous_front_hull_torch` below, kept here as the baseline: one
compaction, so one wait, per pass, about 13 in all).

Such comparisons were 6,536 of 45,573 (14%) in a profiled call of shard 3 of the complete bundled run (8 workers,
an H100, 2026-12-06), and 150 of the workers' 563 profiled seconds (27%), 23 ms each: a mutant whose error grows
with |ref| (a scaled output) on a large output, against both references. The candidates here are such a case: an
fp32 output 1.1 times a normal fp64 reference of --elements elements, filtered as the kernels filter them.

Every --procs count starts that many processes (one CUDA context each, as the workers), and each loops for
--seconds after a barrier over one of two workloads, for each version:

    hull   the hull of the candidates, again and again: milliseconds per hull in a process, hulls per second
    mixed  a worker-shaped pair (--launches small kernels, a pinned copy in and a copy back, 3 ms of host work:
           timeslice_cost.py's `gapped`, whose rate scaled with the processes as the run's pairs did), and every
           --every-th pair two hulls (a pair's comparisons against both references): pairs per second

Both versions give the same hull to the bit (tests/shared/test_evidence.py compares the current one with the numpy
version; checked here too, once per process). The ratio current/previous of each rate is printed.

    PYTHONPATH=. python bench/hull_cost.py --json $OUT/hull_cost.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

VERSIONS = ("previous", "current")
WORKLOADS = ("hull", "mixed")


def previous_front_hull_torch(r, d, dtype):
    """`measure._front_hull_torch` before the passes ran on masks (the baseline)."""
    import numpy as np
    import torch

    from oracleaudit.evidence import convex_chain, margins
    from oracleaudit.execution.measure import (DEVICE_PASSES, DEVICE_PASSES_ABOVE, MAX_HULL_POINTS, _chain_hull,
                                               _complete_hull, _envelope_mask, _sorted_front)

    _, _, rel, absolute = margins(dtype)
    r, d, front = _sorted_front(r, d)  # unchanged
    fr, fd = torch.stack([r, d])[:, front]
    if len(fr) > DEVICE_PASSES_ABOVE:
        last_r, last_d = torch.stack([fr[-1], fd[-1]]).tolist()
        x, y = (fr / fr[-1], fd / fd[-1]) if last_r * last_d > 1e300 else (fr, fd)
        index = torch.arange(len(fr), device=fr.device)
        for _ in range(DEVICE_PASSES):
            if len(index) <= 64:
                break
            xi, yi = x[index], y[index]
            cross = (xi[1:-1] - xi[:-2]) * (yi[2:] - yi[:-2]) - (yi[1:-1] - yi[:-2]) * (xi[2:] - xi[:-2])
            drop = torch.zeros(len(index), dtype=torch.bool, device=fr.device)
            drop[1:-1] = cross >= 0
            left = index[~drop]
            if len(left) == len(index):
                break
            index = left
        fr, fd = fr[index], fd[index]
    vr, vd = convex_chain(*torch.stack([fr, fd]).cpu().numpy())
    chain = torch.from_numpy(np.stack([vr, vd])).to(r.device)
    kept = torch.stack([r, d])[:, _envelope_mask(r, d, chain[0], chain[1], rel, absolute)]
    if kept.shape[1] + len(vr) <= MAX_HULL_POINTS:
        kept = kept.cpu().numpy()
        return _complete_hull(kept[0], kept[1], vr, vd)
    return _chain_hull(vr, vd)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _loop(rank: int, elements: int, seconds: float, launches: int, every: int, barrier, results) -> None:
    """In a child: each (version, workload) for `seconds` after the barrier; (version, workload, count,
    seconds) to `results`."""
    import torch

    from oracleaudit.execution.measure import _bin_filter, _front_hull_torch

    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(rank)
    ref = torch.randn(elements, dtype=torch.float64, device=device, generator=generator)
    out = (ref.float() * 1.1).double()
    r, d = _bin_filter(ref.abs(), (out - ref).abs())
    hulls = {"previous": previous_front_hull_torch, "current": _front_hull_torch}
    a, b = (hull(r, d, torch.float32) for hull in hulls.values())
    if not (a[2:] == b[2:] and a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()):
        raise SystemExit("the two versions' hulls differ")
    small = torch.zeros(256, device=device)
    target = torch.empty(256 * 1024, device=device)
    pinned = torch.rand(256 * 1024).pin_memory()
    back = torch.zeros(256, device=device)

    def pair() -> None:
        target.copy_(pinned, non_blocking=True)
        for _ in range(launches):
            small.add_(1)
            _spin(20e-6)
        back.cpu()
        _spin(3e-3)

    for version in VERSIONS:
        hull = hulls[version]
        for workload in WORKLOADS:
            for _ in range(2):  # warm-up
                hull(r, d, torch.float32)
            torch.cuda.synchronize()
            barrier.wait()
            count, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                if workload == "hull":
                    hull(r, d, torch.float32)
                else:
                    pair()
                    if count % every == every - 1:
                        hull(r, d, torch.float32)
                        hull(r, d, torch.float32)
                count += 1
            results.put((version, workload, count, time.perf_counter() - started))


def measure(procs: int, elements: int, seconds: float, launches: int, every: int) -> dict[tuple[str, str], list]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(procs + 1), context.Queue()
    children = [context.Process(target=_loop, args=(rank, elements, seconds, launches, every, barrier, results))
                for rank in range(procs)]
    for child in children:
        child.start()
    out: dict[tuple[str, str], list] = {}
    for _ in range(len(VERSIONS) * len(WORKLOADS)):
        barrier.wait(timeout=600)
        for _ in range(procs):
            version, workload, count, spent = results.get(timeout=seconds + 600)
            out.setdefault((version, workload), []).append((count, spent))
    for child in children:
        child.join(timeout=60)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="1,8", help="process counts (default 1,8)")
    parser.add_argument("--elements", type=int, default=1 << 22, help="output elements (default 4,194,304)")
    parser.add_argument("--seconds", type=float, default=6.0, help="each version and workload's time (default 6)")
    parser.add_argument("--launches", type=int, default=60, help="small kernels of a mixed pair (default 60)")
    parser.add_argument("--every", type=int, default=7, help="two hulls after every N-th mixed pair (default 7)")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    import torch

    table: dict = {"gpu": torch.cuda.get_device_name(0), "elements": args.elements, "seconds": args.seconds,
                   "launches": args.launches, "every": args.every, "procs": {}}
    for procs in sorted({int(x) for x in args.procs.split(",")}):
        runs = measure(procs, args.elements, args.seconds, args.launches, args.every)
        row: dict = {}
        for (version, workload), counts in sorted(runs.items()):
            rate = sum(count / spent for count, spent in counts)
            each = sum(1000 * spent / count for count, spent in counts if count) / len(counts)
            row[f"{workload}_{version}_per_s"] = round(rate, 1)
            row[f"{workload}_{version}_ms_each"] = round(each, 2)
        for workload in WORKLOADS:
            before = row[f"{workload}_previous_per_s"]
            row[f"{workload}_current_over_previous"] = round(row[f"{workload}_current_per_s"] / before, 3) if before else None
        table["procs"][str(procs)] = row
        print(f"{procs} processes: " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    if args.json:
        args.json.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
