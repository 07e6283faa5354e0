"""Benchmark (GPU): what a hung mutant costs beyond its deadline — the time to kill its worker, and the GPU time
its spinning kernel takes from the workers beside it.

A hung variant's kernel never ends; the supervisor kills its worker at the deadline (SIGKILL, then waits for the
process to be reaped: `supervisor.WorkerProcess.kill`) and counts the wait as hung time. In the complete bundled
run hung time was 7.5 s per missed deadline, where the deadlines themselves (a 5 s floor, twice it on the retry,
2 s on a hung variant's cover inputs) average less. (On the H200 the kill took 71 ms, spinning or not, and one
spinning kernel cut a bystander's synchronisations from 50,825/s to 420/s: bench/results/kill_cost.json.)
Measured here, each --repeat times:

    kill      seconds from SIGKILL to the process reaped, for a process with a CUDA context and nothing running
              (idle) and for one whose kernel spins (hung: torch.cuda._sleep of ~10 minutes, launched and
              running for --spin-s before the kill)
    context   seconds a fresh process takes to make its CUDA context (torch imported already, as in the workers'
              fork server), alone and beside 1 process whose kernel spins: what a restart after a crash waits
    bystander round trips per second of one process (one small kernel and a synchronisation: sync; --launches
              small kernels and a synchronisation: pair) alone, then beside 1 and 3 processes whose kernels spin:
              how much of the GPU a hung kernel takes from the others while its deadline runs

    PYTHONPATH=. python bench/kill_cost.py --json $OUT/kill_cost.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

SPIN_CYCLES = 10**12  # torch.cuda._sleep: ~8 minutes at the H200's ~1.98 GHz; a hang for any purpose here


def _child(spin: bool, ready, made=None) -> None:
    import torch

    started = time.perf_counter()
    torch.zeros(1, device="cuda")
    if made is not None:
        made.value = time.perf_counter() - started
    if spin:
        torch.cuda._sleep(SPIN_CYCLES)
    ready.set()
    time.sleep(3600)


def start(context, spin: bool, made=None):
    """A child with a CUDA context (its kernel spinning, if `spin`), once it is up; `made` (a shared double)
    gets the seconds its context took."""
    ready = context.Event()
    process = context.Process(target=_child, args=(spin, ready, made), daemon=True)
    process.start()
    if not ready.wait(120):
        raise RuntimeError("a child did not bring CUDA up within 120 s")
    return process


def kill_seconds(context, spin: bool, spin_s: float) -> float:
    """Seconds from SIGKILL to reaped, for one child (spinning for `spin_s` first, if `spin`)."""
    process = start(context, spin)
    time.sleep(spin_s if spin else 0.2)
    started = time.perf_counter()
    process.kill()
    process.join(60)
    if process.is_alive():
        raise RuntimeError("a killed child was not reaped within 60 s")
    return time.perf_counter() - started


def context_seconds(context, spinners: int) -> float:
    """Seconds one fresh process takes to make its CUDA context beside `spinners` spinning processes."""
    hung = [start(context, True) for _ in range(spinners)]
    made = context.Value("d", -1.0)
    try:
        process = start(context, False, made)
        process.kill()
        process.join(60)
    finally:
        for child in hung:
            child.kill()
            child.join(60)
    return made.value


def _bystander(launches: int, seconds: float, ready, go, results) -> None:
    import torch

    small = torch.zeros(256, device="cuda")

    def round_trip(n: int) -> None:
        for _ in range(n):
            small.add_(1)
        torch.cuda.synchronize()

    for _ in range(50):
        round_trip(launches)
    ready.set()
    go.wait()
    for name, n in (("sync", 1), ("pair", launches)):
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            round_trip(n)
            count += 1
        results.put((name, count / (time.perf_counter() - started)))


def bystander_rates(context, spinners: int, launches: int, seconds: float) -> dict[str, float]:
    """Round trips per second of one process (sync, pair) beside `spinners` processes whose kernels spin."""
    hung = [start(context, True) for _ in range(spinners)]
    ready, go, results = context.Event(), context.Event(), context.Queue()
    process = context.Process(target=_bystander, args=(launches, seconds, ready, go, results), daemon=True)
    process.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the bystander did not bring CUDA up within 120 s")
        go.set()
        rates = dict(results.get(timeout=2 * seconds + 120) for _ in range(2))
        process.join(60)
    finally:
        for child in hung + [process]:
            child.kill()
            child.join(60)
    return {name: round(rate, 1) for name, rate in rates.items()}


def summary(values: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(values), 3), "max_s": round(max(values), 3),
            "all_s": [round(v, 3) for v in values]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4, help="kills of each kind (default 4)")
    parser.add_argument("--spin-s", type=float, default=1.0, help="seconds a hung kernel runs before its kill")
    parser.add_argument("--launches", type=int, default=60, help="kernels per round trip of pair (default 60)")
    parser.add_argument("--seconds", type=float, default=3.0, help="each bystander measurement's time")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    if args.repeat < 1 or args.spin_s < 0 or args.launches < 1 or args.seconds <= 0:
        parser.error("--repeat and --launches must be ≥ 1, --spin-s ≥ 0 and --seconds > 0")
    import torch

    if not torch.cuda.is_available():
        sys.exit("kill_cost.py: error: needs a CUDA device (torch.cuda.is_available() is False)")
    context = multiprocessing.get_context("spawn")
    kills = {kind: summary([kill_seconds(context, kind == "hung", args.spin_s) for _ in range(args.repeat)])
             for kind in ("idle", "hung")}
    print(f"kill to reaped: idle {kills['idle']}, hung {kills['hung']}", flush=True)
    contexts = {str(n): summary([context_seconds(context, n) for _ in range(args.repeat)]) for n in (0, 1)}
    print(f"a CUDA context made alone: {contexts['0']}, beside 1 spinning kernel: {contexts['1']}", flush=True)
    rates = {}
    for spinners in (0, 1, 3):
        rates[str(spinners)] = bystander_rates(context, spinners, args.launches, args.seconds)
        print(f"bystander beside {spinners} spinning kernels: {rates[str(spinners)]}", flush=True)
    alone = rates["0"]
    slowdown = {n: {name: round(alone[name] / r[name], 1) if r.get(name) else None for name in alone}
                for n, r in rates.items() if n != "0"}
    print(f"bystander slowdown (alone over beside N spinning): {slowdown}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "repeat": args.repeat,
                                         "spin_s": args.spin_s, "launches": args.launches, "seconds": args.seconds,
                                         "kill": kills, "context_beside_spinners": contexts,
                                         "bystander_per_s": rates, "bystander_slowdown": slowdown},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
