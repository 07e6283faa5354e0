"""Benchmark model (CPU): what the run's slicing and build order predict for a traced run's makespan, side by side.
A prediction from the trace's own costs, not a measurement: the GPU run is what decides.

From a traced run (ORACLEAUDIT_TRACE; `TRACE=1 bash bench/device_call.sh full K/N` brings one back) and its mutants
folder, each problem's job gets:
- its mutants (the distinct ones the trace saw) and the seconds its build was done;
- a slice's overhead: the mean seconds from a supervisor's `send` of a slice to the worker's first mutant pair
  (the worker's start where it is fresh, loading, the original's pairs, references);
- a mutant's cost: the rest of its slices' worker-seconds (each from its send to the worker's last mark, or to its
  reaping: pairs, replays, hung pairs, crashes and restarts alike), over its mutants.

Then the run is replayed on `--slots` simulated slots through the run's own `scheduler.WorkQueue`, four ways:

    ahead/in-turn   slices of --job-size cut when a job is built (`plan.split_job`, the run before 81fd1b2), and a
                    job of two extensions built in turn (as the run builds them)
    ahead/at-once   the same slices, each job's extensions built at once: its build time over its extensions
                    (an assumption: the extensions of a job take about the same time, and cost no more together)
    guided/in-turn  slices cut as slots take them, smaller near the end (`WorkQueue` as it is): the run now
    guided/at-once  both (extensions at once were tried in 8642851 and taken back before a GPU ran them:
                    the model gives them little beside guided slices)

Each way's makespan and the busy fraction of the slots are printed, with the ratio to ahead/in-turn and the traced
run's own figures beside them (first and last pair). Where ahead/in-turn is far from the traced run, the model
misses what the trace does not show (a slot's waits between slices, a change of rate as the jobs mix), and its
ratios say less.

    PYTHONPATH=. python bench/slice_model.py --trace trace --mutants bench/data/full_run [--json FILE]

On shard 3's traced run (bench/results/trace_fresh3_builds.tgz, extracted) ahead/in-turn ends at 422.6 s against
the traced 439.3 s, and the other ways at 0.97-0.98 of it (slice_model.json): the run's work, not its order, bounds
it.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import json
import sys
import threading
from pathlib import Path

from bench.trace_rates import problems_of, traced_run
from oracleaudit.execution.build import MAX_VARIANTS_PER_EXTENSION
from oracleaudit.execution.plan import JOB_SIZE, split_job, variants_to_run
from oracleaudit.execution.protocol import ORIGINAL, Job
from oracleaudit.execution.scheduler import WorkQueue

WAYS = ("ahead/in-turn", "ahead/at-once", "guided/in-turn", "guided/at-once")


def costs(events: list[dict], problem_of: dict[str, str], job_size: int) -> dict:
    """Per problem: mutants, built_s, a slice's overhead and seconds per mutant, from a trace. A worker may run
    several slices in turn (a supervisor's `send` each): a slice's seconds run from its send to the worker's last
    mark before the next send (or to its reaping, if it was killed): its loads, pairs, replays, a hung pair and a
    crash alike. The seconds from a send to its first mutant pair are a slice's overhead; what is left once the
    overhead of the slices of `job_size` the run cut is taken off (a fresh worker's after a crash stays in) is
    shared out over the problem's mutants."""
    start = min(e["t"] for e in events if e["event"] == "run")
    sends: dict[int, list[float]] = {}
    reaped: dict[int, float] = {}
    marks: dict[int, list[dict]] = {}
    for event in events:
        if event["event"] == "send":
            sends.setdefault(event["child"], []).append(event["t"])
        elif event["event"] == "reaped":
            reaped[event["child"]] = event["t"]
        elif event["pid"] == event.get("tid", event["pid"]):  # a worker's own marks (not a supervisor thread's)
            marks.setdefault(event["pid"], []).append(event)
    mutants: dict[str, set[str]] = {}
    spent: dict[str, list[float]] = {}
    overheads: dict[str, list[float]] = {}
    for worker, times in sends.items():
        times.sort()
        slices: list[dict] = [{"last": t, "first_mutant": None, "problem": None} for t in times]
        for mark in marks.get(worker, ()):
            index = bisect.bisect_right(times, mark["t"]) - 1
            if index < 0:
                continue  # the worker's start, before its first slice
            piece = slices[index]
            piece["last"] = max(piece["last"], mark["t"])
            problem = problem_of.get(mark.get("variant", "")) if mark["event"] == "pair" else None
            if problem is not None:
                piece["problem"] = problem
                mutants.setdefault(problem, set()).add(mark["variant"])
                if piece["first_mutant"] is None:
                    piece["first_mutant"] = mark["t"]
        if worker in reaped:
            slices[-1]["last"] = max(slices[-1]["last"], reaped[worker])
        for at, piece in zip(times, slices):
            if piece["problem"] is not None:  # a slice that ran no mutant's pair (a crash at once) is left out
                spent.setdefault(piece["problem"], []).append(piece["last"] - at)
                overheads.setdefault(piece["problem"], []).append(piece["first_mutant"] - at)
    built = {e["problem"]: e["t"] - start for e in events if e["event"] == "job_built" and "problem" in e}
    model = {}
    for problem, seconds in sorted(spent.items()):
        count = len(mutants[problem])
        overhead = sum(overheads[problem]) / len(overheads[problem])
        model[problem] = {"mutants": count, "built_s": round(built.get(problem, 0.0), 1),
                          "slices": len(seconds), "worker_s": round(sum(seconds), 1),
                          "slice_overhead_s": round(overhead, 2),
                          "s_per_mutant": round(max(0.0, sum(seconds) - overhead * -(-count // job_size)) / count, 3),
                          "extensions": -(-(count + 1) // MAX_VARIANTS_PER_EXTENSION)}
    pairs = [e["t"] - start for e in events if e["event"] == "pair"]
    return {"problems": model, "traced_first_pair_s": round(min(pairs), 1), "traced_last_pair_s": round(max(pairs), 1),
            "traced_worker_s": round(sum(row["worker_s"] for row in model.values()), 1)}


def simulate(problems: dict[str, dict], slots: int, job_size: int, way: str) -> dict:
    """Makespan and slot-busy fraction of one way (see WAYS) on `slots` simulated slots."""
    guided, at_once = way.startswith("guided"), way.endswith("at-once")
    jobs = {}
    for problem, cost in problems.items():
        work = ((ORIGINAL, ("x",)),) + tuple((f"{problem}#{i}", ("x",)) for i in range(cost["mutants"]))
        jobs[problem] = Job(solution=problem, problem_path=problem, problem=problem, mutants=(), pool="model",
                            entry_keys=(), build_dir="model", work=work)
    built = sorted((cost["built_s"] / (cost["extensions"] if at_once else 1), problem)
                   for problem, cost in problems.items())
    queue = WorkQueue(slots, job_size)
    queue.expect(sum(variants_to_run(job) for job in jobs.values()))
    stop = threading.Event()
    free = [(0.0, slot) for slot in range(slots)]  # (time the slot is free, slot)
    heapq.heapify(free)
    busy = end = 0.0
    pending = list(built)
    while free:
        now, slot = heapq.heappop(free)
        while pending and pending[0][0] <= now:  # every build done by now is queued
            _, problem = pending.pop(0)
            if guided:
                queue.put(jobs[problem], divisible=True, planned=True)
            else:
                for piece in split_job(jobs[problem], job_size):
                    queue.put(piece, planned=True)
        if not pending:
            queue.fed()
        if not (queue.items or queue.divisible):
            if pending:  # idle until the next build is done
                heapq.heappush(free, (pending[0][0], slot))
            continue
        piece = queue.take(stop)
        cost = problems[piece.problem]
        took = cost["slice_overhead_s"] + cost["s_per_mutant"] * sum(v != ORIGINAL for v, _ in piece.work)
        queue.finished(piece, None)
        busy += took
        end = max(end, now + took)
        heapq.heappush(free, (now + took, slot))
    return {"makespan_s": round(end, 1), "slot_busy_fraction": round(busy / (slots * end), 3) if end else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, required=True, help="the ORACLEAUDIT_TRACE folder of a run")
    parser.add_argument("--mutants", type=Path, required=True, help="the run's mutants folder")
    parser.add_argument("--slots", type=int, default=8, help="workers of the run (default 8)")
    parser.add_argument("--job-size", type=int, default=JOB_SIZE, help=f"largest slice (default {JOB_SIZE})")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    if args.slots < 1 or args.job_size < 1:
        parser.error("--slots and --job-size must be ≥ 1")
    events = traced_run(args.trace, "slice_model.py")
    figures = costs(events, problems_of(args.mutants, "slice_model.py"), args.job_size)
    if not figures["problems"]:
        sys.exit(f"slice_model.py: error: {args.trace}: no pair of a mutant of {args.mutants} with a build mark")
    ways = {way: simulate(figures["problems"], args.slots, args.job_size, way) for way in WAYS}
    before = ways[WAYS[0]]["makespan_s"]
    for way in WAYS:
        ways[way]["over_ahead_in_turn"] = round(ways[way]["makespan_s"] / before, 3) if before else None
    figures.update(slots=args.slots, job_size=args.job_size, ways=ways)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
