"""Benchmark (GPU): what the hull of a comparison whose every element is a candidate costs the run when finished
on the GPU, in four versions that give the same hull to the bit:

    compacting  `measure._front_hull_torch`: the front after two stable sorts (by d descending, then by r), then
                convex_chain's first passes on the device, each compacting the points left, so each waits for the
                device (about 13 waits a hull)
    masked      the passes on masks, waiting about 4 times (`masked_front_hull_torch` below: tried on 2026-12-06
                and not adopted, kept as the alternative measured)
    one-sort    the front after one stable sort, by r, its runs of equal r settled by a segmented maximum
                (`one_sort_front_hull_torch` below: measured on 2026-12-06 and not adopted, 0.89x alone and 1.0x
                at 8 processes on an H100)
    side-by-side  compacting, a pair's two hulls run at once in two threads as `measure.measure_many` runs
                them (`measure._side_by_side`), so that their waits for the device overlap

Such comparisons were 6,536 of 45,573 (14%) in a profiled call of shard 3 of the complete bundled run (8 workers,
an H100, 2026-12-06: bench/results/trace_rates_fresh3.json), and 150 of the workers' 563 profiled seconds (27%),
23 ms each: a mutant whose error grows with |ref| (a scaled output) on a large output, against both references.
The candidates here are such a case: an fp32 output 1.1 times a normal fp64 reference of --elements elements,
filtered as the kernels filter them.

Every --procs count starts that many processes (one CUDA context each, as the workers), and each loops for
--seconds after a barrier over one of two workloads, for each version:

    hull   the two hulls of a pair (its output against both references), again and again: milliseconds per
           hull in a process, hulls per second
    mixed  a worker-shaped pair (--launches small kernels, a pinned copy in and a copy back, 3 ms of host work:
           timeslice_cost.py's `gapped`, whose rate scaled with the processes as the run's pairs did), and every
           --every-th pair two hulls (a pair's comparisons against both references): pairs per second

The versions' hulls are checked equal to the bit once per process (the masked passes drop what the compacting
ones drop, pass for pass; one sort finds the two sorts' front in their order). The rate of each version over the
compacting one's is printed. Measured on an H100 (2026-12-06): the masked version is slower, 0.58x alone and
0.65x among worker-shaped pairs at 8 processes (hull_cost.json): its passes scan every point where the
compacting ones scan what is left (about half each pass), and that device time costs more than the waits it
saves. One-sort was no faster (0.89x alone, 1.00x at 8 processes, hull_cost_one_sort.json): the sorts are not
where the ~5.5 ms of GPU time a compacting hull takes goes. Side by side keeps the compacting hull's device work
and overlaps its waits (the default pair of versions): 0.99x of hulls and 0.97x of mixed pairs at 8 processes
(hull_cost_side_by_side.json), where the hulls alone keep the GPU busy and overlapping cannot gain.

    PYTHONPATH=. python bench/hull_cost.py --json $OUT/hull_cost.json   (--versions: others)

With --numpy (CPU, no GPU needed): the hull of the candidates a correctly rounded fp32 output leaves against its
fp64 reference (~1.1% of --elements, finished on the CPU in the run), by `measure._front_hull_numpy` as it is
(dominated points dropped by fine bins of r before the sort) and with that pre-filter off, the best of --repeat
timings of each, side by side (hull_cost_numpy.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from queue import Empty

from bench.timeslice_cost import _counts as process_counts  # the same argument: one parser

VERSIONS = ("compacting", "masked", "one-sort", "side-by-side")
MEASURED = ("compacting", "side-by-side")  # the default: a pair's hulls one after the other and at once
WORKLOADS = ("hull", "mixed")


def masked_front_hull_torch(r, d, dtype):
    """`measure._front_hull_torch` with convex_chain's device passes on masks (`_chain_candidates`) and the
    envelope's points fetched only for a complete hull (where there are too many, only their count)."""
    import numpy as np
    import torch

    from oracleaudit.evidence import convex_chain, margins
    from oracleaudit.execution.measure import (DEVICE_PASSES_ABOVE, MAX_HULL_POINTS, _chain_hull, _complete_hull,
                                               _envelope_mask, _sorted_front)

    _, _, rel, absolute = margins(dtype)
    r, d, front = _sorted_front(r, d)
    points = torch.stack([r, d])
    fr, fd = _chain_candidates(r, d, front) if len(r) > DEVICE_PASSES_ABOVE else points[:, front]
    vr, vd = convex_chain(*torch.stack([fr, fd]).cpu().numpy())
    chain = torch.from_numpy(np.stack([vr, vd])).to(r.device)
    keep = _envelope_mask(r, d, chain[0], chain[1], rel, absolute)
    if int(keep.sum()) + len(vr) > MAX_HULL_POINTS:
        return _chain_hull(vr, vd)
    kept = points[:, keep].cpu().numpy()
    return _complete_hull(kept[0], kept[1], vr, vd)


GATHER_AFTER_PASSES = 2  # after this many masked passes, the points still alive are gathered (one wait)


def _chain_candidates(r, d, front):
    """The points of the front (`front`: its mask over points sorted by r, d descending among equal r) that
    convex_chain's first DEVICE_PASSES passes leave, in the same float64 operations as
    `measure._inner_points_dropped`, waiting for the device once in the middle rather than once a pass."""
    import torch

    from oracleaudit.execution.measure import DEVICE_PASSES

    positions = torch.arange(len(r), device=r.device)
    last = torch.where(front, positions, -1).max().reshape(1)  # the front's last point: its largest r and d
    last_r, last_d = r.gather(0, last), d.gather(0, last)
    huge = last_r * last_d > 1e300  # convex_chain scales both axes then (its cross products would overflow)
    x, y = torch.where(huge, r / last_r, r), torch.where(huge, d / last_d, d)
    alive = _masked_passes(x, y, front, GATHER_AFTER_PASSES)
    index = alive.nonzero().squeeze(1)
    x, y, r, d = x[index], y[index], r[index], d[index]
    alive = _masked_passes(x, y, torch.ones_like(index, dtype=torch.bool), DEVICE_PASSES - GATHER_AFTER_PASSES)
    return r[alive], d[alive]


def _masked_passes(x, y, alive, passes: int):
    """`passes` of convex_chain's passes over the points where `alive` (in order of r), without waiting for the
    device: each drops every alive point but the first and the last whose cross product with its alive
    neighbours is >= 0, unless 64 points or fewer are alive. Returns the mask of the points left."""
    import torch

    from oracleaudit.execution.measure import running_max

    n = len(x)
    positions = torch.arange(n, device=x.device)
    for _ in range(passes):
        count = alive.sum()
        before = running_max(torch.where(alive, positions, -1))  # the last alive point at or before each point
        previous = torch.cat([before.new_full((1,), -1), before[:-1]])
        after = n - 1 - running_max(torch.where(alive, n - 1 - positions, -1).flip(0)).flip(0)  # n: none
        following = torch.cat([after[1:], after.new_full((1,), n)])
        inner = alive & (previous >= 0) & (following < n) & (count > 64)
        p, q = previous.clamp(min=0), following.clamp(max=n - 1)
        cross = (x - x[p]) * (y[q] - y[p]) - (y - y[p]) * (x[q] - x[p])
        alive = alive & ~(inner & (cross >= 0))
    return alive


def one_sort_front_hull_torch(r, d, dtype):
    """`measure._front_hull_torch` with its front found after one stable sort (by r) instead of two (by d
    descending, then by r): among points of equal r, the front can only hold the first of those with the
    group's largest d (the point the two sorts put first), and it does where that d exceeds every d of a smaller
    r. The same front in the same order, so the same chain; the envelope's points come in another order, which
    the complete hull sorts. (Run here by lending `_one_sort_front` to measure's hull for the call: one process,
    one thread.)"""
    from oracleaudit.execution import measure

    two_sorts = measure._sorted_front
    measure._sorted_front = _one_sort_front
    try:
        return measure._front_hull_torch(r, d, dtype)
    finally:
        measure._sorted_front = two_sorts


def _one_sort_front(r, d):
    """The points sorted by r (stable) and the mask of the front there, without a synchronisation."""
    import torch

    from oracleaudit.execution.measure import running_max

    order = torch.argsort(r, stable=True)
    r, d = r[order], d[order]
    n = len(r)
    positions = torch.arange(n, device=r.device)
    starts = torch.ones(n, dtype=torch.bool, device=r.device)
    starts[1:] = r[1:] != r[:-1]
    group = torch.cumsum(starts, 0) - 1  # runs of equal r, numbered in order
    largest = torch.zeros(n, dtype=d.dtype, device=d.device).scatter_reduce(0, group, d, "amax", include_self=False)
    top = d == largest[group]
    first = torch.full((n,), n, dtype=positions.dtype, device=r.device).scatter_reduce(
        0, group, torch.where(top, positions, n), "amin", include_self=False)
    before = torch.cat([largest.new_zeros(1), running_max(largest)[:-1]])  # d > 0: nothing is below 0
    front = (first[group] == positions) & (largest[group] > before[group])
    return r, d, front


def same_hull(a: tuple, b: tuple) -> bool:
    """Whether two hulls (hull_r, hull_d, complete, slack) are the same to the bit."""
    return a[2:] == b[2:] and a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _loop(rank: int, versions: tuple[str, ...], elements: int, seconds: float, launches: int, every: int, barrier,
          results) -> None:
    """In a child: each (version, workload) for `seconds` after the barrier; (version, workload, count,
    seconds) to `results`. A failure (the versions' hulls differing, say) is sent as ("error",
    message) and breaks the barrier, so the parent stops at once."""
    try:
        _measured(rank, versions, elements, seconds, launches, every, barrier, results)
    except Exception as err:
        results.put(("error", f"process {rank}: {type(err).__name__}: {err}", 0, 0.0))
        barrier.abort()


def _measured(rank: int, versions: tuple[str, ...], elements: int, seconds: float, launches: int, every: int,
              barrier, results) -> None:
    import torch

    from oracleaudit.execution.measure import _bin_filter, _front_hull_torch, _side_by_side

    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(rank)
    ref = torch.randn(elements, dtype=torch.float64, device=device, generator=generator)
    out = (ref.float() * 1.1).double()
    r, d = _bin_filter(ref.abs(), (out - ref).abs())
    every_hull = {"compacting": _front_hull_torch, "masked": masked_front_hull_torch,
                  "one-sort": one_sort_front_hull_torch, "side-by-side": _front_hull_torch}

    def two_hulls(version: str) -> list:
        hull = every_hull[version]
        calls = [lambda: hull(r, d, torch.float32), lambda: hull(r, d, torch.float32)]
        return _side_by_side(calls) if version == "side-by-side" else [call() for call in calls]

    first, *others = (hull for version in versions for hull in two_hulls(version))
    if not all(same_hull(first, other) for other in others):
        raise ValueError("the versions' hulls differ")
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

    for version in versions:
        for workload in WORKLOADS:
            two_hulls(version)  # warm-up
            torch.cuda.synchronize()
            barrier.wait()
            count, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                if workload == "hull":
                    two_hulls(version)
                    count += 2
                    continue
                pair()
                if count % every == every - 1:
                    two_hulls(version)
                count += 1
            results.put((version, workload, count, time.perf_counter() - started))


def measure(procs: int, elements: int, seconds: float, launches: int, every: int,
            versions: tuple[str, ...] = MEASURED) -> dict[tuple[str, str], list]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(procs + 1), context.Queue()
    children = [context.Process(target=_loop, args=(rank, versions, elements, seconds, launches, every, barrier,
                                                     results))
                for rank in range(procs)]
    for child in children:
        child.start()
    out: dict[tuple[str, str], list] = {}
    errors: list[str] = []
    try:
        for _ in range(len(versions) * len(WORKLOADS)):
            barrier.wait(timeout=600)
            for _ in range(procs):
                version, workload, count, spent = results.get(timeout=seconds + 600)
                if version == "error":
                    errors.append(workload)
                    raise threading.BrokenBarrierError
                out.setdefault((version, workload), []).append((count, spent))
    except threading.BrokenBarrierError:
        for child in children:
            child.join(timeout=60)
        errors += [message for version, message, *_ in _drained(results) if version == "error"]
        sys.exit(f"hull_cost.py: error: {errors[0] if errors else 'a process stopped'}")
    for child in children:
        child.join(timeout=60)
    return out


def _drained(queue) -> list:
    items = []
    while True:
        try:
            items.append(queue.get(timeout=1))
        except Empty:
            return items


def summarize(runs: dict[tuple[str, str], list]) -> dict:
    """Per version and workload: the rate over all processes (hulls or pairs per second) and the milliseconds
    each took in a process (the mean over them); per workload, the rate of each other version over the
    compacting one's."""
    row: dict = {}
    for (version, workload), counts in sorted(runs.items()):
        rate = sum(count / spent for count, spent in counts)
        each = sum(1000 * spent / count for count, spent in counts if count) / len(counts)
        row[f"{workload}_{version}_per_s"] = round(rate, 1)
        row[f"{workload}_{version}_ms_each"] = round(each, 2)
    for workload in WORKLOADS:
        before = row.get(f"{workload}_compacting_per_s")
        for version in VERSIONS[1:]:  # those that ran
            now = row.get(f"{workload}_{version}_per_s")
            if before is not None and now is not None:
                row[f"{workload}_{version}_over_compacting"] = round(now / before, 3) if before else None
    return row


def numpy_hull(elements: int, repeat: int) -> dict:
    """The numpy hull of a rounded output's candidates with and without the fine-bin pre-filter: the best of
    `repeat` timings of each, in milliseconds, and their ratio (the hulls are checked equal to the bit)."""
    import timeit

    import torch

    from oracleaudit.execution import measure

    ref = torch.randn(elements, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    d = (ref.float().double() - ref).abs()
    keep = d > 0
    r, d = measure._bin_filter(ref.abs()[keep], d[keep])
    r, d = r.numpy(), d.numpy()
    filtered = measure._front_hull_numpy(r, d, torch.float32)
    best = {"filtered": min(timeit.repeat(lambda: measure._front_hull_numpy(r, d, torch.float32), number=1,
                                          repeat=repeat))}
    above = measure.FINE_FILTER_ABOVE
    measure.FINE_FILTER_ABOVE = len(r)  # off
    try:
        unfiltered = measure._front_hull_numpy(r, d, torch.float32)
        best["unfiltered"] = min(timeit.repeat(lambda: measure._front_hull_numpy(r, d, torch.float32), number=1,
                                               repeat=repeat))
    finally:
        measure.FINE_FILTER_ABOVE = above
    if not same_hull(filtered, unfiltered):
        raise SystemExit("hull_cost.py: error: the pre-filter changed the hull")
    return {"elements": elements, "candidates": len(r), "repeat": repeat,
            "filtered_ms": round(1000 * best["filtered"], 2), "unfiltered_ms": round(1000 * best["unfiltered"], 2),
            "unfiltered_over_filtered": round(best["unfiltered"] / best["filtered"], 2)}


def _versions(text: str) -> list[str]:
    names = list(dict.fromkeys(text.split(",")))
    if names[0] != "compacting" or any(name not in VERSIONS for name in names) or len(names) < 2:
        raise argparse.ArgumentTypeError(f"versions are {', '.join(VERSIONS)}, compacting first and one more at "
                                         f"least; got {text!r}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=process_counts, default=[1, 8], metavar="N,N,...",
                        help="process counts (default 1,8)")
    parser.add_argument("--elements", type=int, default=1 << 22, help="output elements (default 4,194,304)")
    parser.add_argument("--seconds", type=float, default=6.0, help="each version and workload's time (default 6)")
    parser.add_argument("--launches", type=int, default=60, help="small kernels of a mixed pair (default 60)")
    parser.add_argument("--every", type=int, default=7, help="two hulls after every N-th mixed pair (default 7)")
    parser.add_argument("--versions", type=_versions, default=list(MEASURED), metavar="NAME,...",
                        help=f"of {', '.join(VERSIONS)}, compacting first (default {','.join(MEASURED)})")
    parser.add_argument("--numpy", action="store_true", help="the numpy hull with and without its pre-filter (CPU)")
    parser.add_argument("--repeat", type=int, default=7, help="--numpy: timings of each, the best kept (default 7)")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    if args.seconds <= 0 or args.elements < 2 or args.launches < 0 or args.every < 1 or args.repeat < 1:
        parser.error("--seconds must be > 0, --elements ≥ 2, --launches ≥ 0, --every and --repeat ≥ 1")
    if args.numpy:
        figures = numpy_hull(args.elements, args.repeat)
        print(", ".join(f"{k} {v}" for k, v in figures.items()))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
        return
    import torch

    if not torch.cuda.is_available():
        sys.exit("hull_cost.py: error: needs a CUDA device (torch.cuda.is_available() is False)")
    table: dict = {"gpu": torch.cuda.get_device_name(0), "elements": args.elements, "seconds": args.seconds,
                   "launches": args.launches, "every": args.every, "procs": {}}
    for procs in args.procs:
        row = summarize(measure(procs, args.elements, args.seconds, args.launches, args.every, tuple(args.versions)))
        table["procs"][str(procs)] = row
        print(f"{procs} processes: " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        if args.json:  # after each count: what was measured survives a call cut short
            args.json.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
