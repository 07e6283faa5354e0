"""Benchmark reader (CPU): what a traced run's timeline says about its rate: when each job's build was done and the
first pair started, when a hung variant's kernel spun (from the pair's start in its worker to the worker's reaping
after the supervisor's timeout) and how many pairs started per second with none, one or more of them spinning; with
--profile, the workers' merged cProfile statistics (ORACLEAUDIT_PROFILE, merged by pstats) as the functions with the
most cumulative seconds. "pairs_at_quiet_rate_s": the seconds the run's pairs would take at the rate it reached with
no hung kernel spinning (the span from first to last pair less these: what the spinning cost, the mix of problems
aside; the quiet seconds include the wait for the first builds and the run's tail, so where those weigh more than the
spinning, as in trace_rates_pinned3.json, the figure exceeds the span and bounds nothing).

A run is traced with ORACLEAUDIT_TRACE=DIR (execution/trace.py); the device call that made the figures of
bench/results/trace_rates_fresh3.json:

    export ORACLEAUDIT_TRACE=/tmp/trace ORACLEAUDIT_PROFILE=/tmp/prof
    FRESH=1 LIMIT=330 bash bench/device_call.sh full 3/6 --cold
    python3 -c "import pstats, glob; pstats.Stats(*glob.glob('/tmp/prof/*.prof')).dump_stats('$OUT/workers.prof')"
    tar -czf $OUT/trace.tgz -C /tmp trace

then, here: PYTHONPATH=. python bench/trace_rates.py --trace trace --profile workers.prof --json FILE
(`TRACE=1 FRESH=1 bash bench/device_call.sh full 3/6 --cold` traces a run and brings back $OUT/trace.tgz.)

Also printed: the pairs and replays started per second in windows of --window seconds (where the run slowed) and
the workers that started them (where few slots had work: the real-size run of scale_real_2026_12_07.json),
and with --mutants (the run's mutants folder) each problem's pairs, replays and worker-seconds (a pair's
seconds run from its mark to its worker's next mark; the original's pairs count with the problem of their
job) beside when its build was done. That view of shard 3 (trace_rates_fresh3_builds.json) showed its largest
job, built in turn as two extensions, ready 170 s into the run and running alone at its end.

Also: where the slots' seconds went ("slots": from each slot's first send to the last pair, split into its
workers' spans from first to last pair, from a send to the worker's first pair, from a worker's last pair to
the next send after a crash or a hang, and the rest, a slot with nothing to run), and the inputs the workers
made ("inputs_made": count and seconds; the reference cache keeps them since 2026-12-06). And the run's
standstills ("standstills": every span of at least STANDSTILL_S after the first pair in which no worker started a
pair, with the faults just before it: in the traced shard of trace_rates_fresh3_warm.json six of 4-14 s, each after
a cluster of crashes and kills; execution/stalls.py now keeps them out of the pairs' deadlines) and the deadlines a
supervisor lengthened for one ("stalled": the `stalled` marks).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from pathlib import Path

from oracleaudit.errors import OracleAuditError
from oracleaudit.execution.trace import read
from oracleaudit.mutant import read_mutants


def spins(events: list[dict]) -> list[tuple[float, float]]:
    """(start, end) of each pair that timed out: from its worker's last `pair` mark to the worker's reaping."""
    last_pair: dict[int, float] = {}
    reaped: dict[int, float] = {}
    timeouts: list[tuple[int, float]] = []
    for event in events:
        if event["event"] == "pair":
            last_pair[event["pid"]] = event["t"]
        elif event["event"] == "timeout" and event.get("child") is not None:
            timeouts.append((event["child"], event["t"]))
        elif event["event"] == "reaped":
            reaped[event["child"]] = event["t"]
    return sorted((last_pair[child], reaped.get(child, at)) for child, at in timeouts if child in last_pair)


def rates(events: list[dict], step: float = 1.0) -> dict:
    """The timeline's figures (seconds from the run's start)."""
    start = min(e["t"] for e in events if e["event"] == "run")
    pairs = sorted(e["t"] - start for e in events if e["event"] == "pair" and not e.get("replay"))
    spun = [(a - start, b - start) for a, b in spins(events)]
    bins: dict[int, list[int]] = {}
    t = pairs[0]
    while t + step <= pairs[-1]:
        spinning = sum(a <= t < b for a, b in spun)
        started = bisect.bisect_left(pairs, t + step) - bisect.bisect_left(pairs, t)  # pairs in [t, t + step)
        bins.setdefault(min(spinning, 2), []).append(started)
        t += step
    quiet = bins.get(0, [])  # pairs started in each step with nothing spinning
    return {
        "builds_done_s": sorted(round(e["t"] - start, 1) for e in events if e["event"] == "job_built"),
        "first_pair_s": round(pairs[0], 1),
        "last_pair_s": round(pairs[-1], 1),
        "pairs": len(pairs),
        "hung_pairs": len(spun),
        "spinning_s": round(sum(b - a for a, b in spun), 1),
        "pairs_per_s_by_spinning": {("2+" if k == 2 else str(k)): {"seconds": len(v) * step,
                                                                  "pairs_per_s": round(sum(v) / (len(v) * step), 1)}
                                    for k, v in sorted(bins.items())},
        "pairs_at_quiet_rate_s": round(len(pairs) * len(quiet) * step / sum(quiet), 1) if sum(quiet) else None,
    }


def slots(events: list[dict]) -> dict:
    """Each slot's seconds from its first send to the run's last pair, by what its worker was doing."""
    run_pid = next(e["pid"] for e in events if e["event"] == "run")
    end = max(e["t"] for e in events if e["event"] == "pair")
    pairs: dict[int, list[float]] = {}
    for e in events:
        if e["event"] == "pair":
            pairs.setdefault(e["pid"], []).append(e["t"])
    ends = {e["child"]: e["event"] for e in events if e["pid"] == run_pid and e["event"] in ("fatal", "timeout")}
    sends: dict[int, list[dict]] = {}
    for e in events:
        if e["pid"] == run_pid and e["event"] == "send":
            sends.setdefault(e["tid"], []).append(e)
    split = {"pairs_s": 0.0, "to_first_pair_s": 0.0, "after_crash_s": 0.0, "after_hang_s": 0.0}
    total = 0.0
    for slot in sends.values():
        total += end - slot[0]["t"]
        for send, after in zip(slot, [*slot[1:], None]):
            until = after["t"] if after else end
            mine = [t for t in pairs.get(send["child"], ()) if send["t"] <= t and (t < until or not after)]
            if not mine:
                continue
            split["to_first_pair_s"] += mine[0] - send["t"]
            split["pairs_s"] += mine[-1] - mine[0]
            why = {"fatal": "after_crash_s", "timeout": "after_hang_s"}.get(ends.get(send["child"]))
            if after and why:
                split[why] += until - mine[-1]
    split["other_s"] = total - sum(split.values())
    return {"slot_s": round(total, 1), **{k: round(v, 1) for k, v in split.items()}}


def inputs_made(events: list[dict]) -> dict:
    """How many pool inputs the workers made (not read from the reference cache) and their seconds."""
    made = [e.get("seconds", 0.0) for e in events if e["event"] == "inputs"]
    return {"count": len(made), "seconds": round(sum(made), 1)}


STANDSTILL_S = 2.0
ENDED_BY_S = 1.0  # a fault this near a standstill's end is what it ended with


def standstills(events: list[dict], least: float = STANDSTILL_S) -> dict:
    """Spans of at least `least` seconds between pair starts (seconds from the run's start), with the crashes
    and kills of the 5 s before each, the fault nearest its end (a worker's `fatal` or a `timeout`, within
    ENDED_BY_S: what the GPU resumed with; its offset from the end in seconds) and the seconds the stall watch's
    probe was late within it (`gpu_stall` events); and the deadlines lengthened for the GPU's stalls."""
    start = min(e["t"] for e in events if e["event"] == "run")
    starts = sorted(e["t"] for e in events if e["event"] == "pair")
    faults = [(e["t"], e["event"]) for e in events if e["event"] in ("fatal", "timeout")]
    probes = [(e["began"], e["began"] + e["seconds"]) for e in events if e["event"] == "gpu_stall"]
    spans = []
    for before, after in zip(starts, starts[1:]):
        if after - before >= least:
            near = [what for t, what in faults if before - 5.0 <= t <= before]
            ending = min(((abs(t - after), t, what) for t, what in faults if abs(t - after) <= ENDED_BY_S),
                         default=None)
            late = sum(max(0.0, min(b, after) - max(a, before)) for a, b in probes)
            spans.append({"from_s": round(before - start, 1), "seconds": round(after - before, 1),
                          "crashes_before": near.count("fatal"), "timeouts_before": near.count("timeout"),
                          "ended_by": ending and {"event": ending[2], "offset_s": round(ending[1] - after, 2)},
                          "gpu_stall_s": round(late, 1)})
    lengthened = {(e.get("variant"), e.get("input")) for e in events if e["event"] == "stalled"}
    ended = sum(1 for s in spans if s["ended_by"])
    return {"spans": spans, "seconds": round(sum(s["seconds"] for s in spans), 1), "ended_by_a_fault": ended,
            "deadlines_lengthened": len(lengthened)}


def windows(events: list[dict], width: float) -> list[dict]:
    """Pairs and replays started per second in consecutive windows of `width` seconds from the run's start, and
    how many workers started one there ("workers": a run's tail shows as few workers)."""
    start = min(e["t"] for e in events if e["event"] == "run")
    counts: dict[int, list[int]] = {}
    workers: dict[int, set[int]] = {}
    for event in events:
        if event["event"] == "pair":
            k = int((event["t"] - start) // width)
            counts.setdefault(k, [0, 0])[bool(event.get("replay"))] += 1
            workers.setdefault(k, set()).add(event["pid"])
    return [{"from_s": round(k * width, 1), "pairs_per_s": round(counts.get(k, [0, 0])[0] / width, 1),
             "replays_per_s": round(counts.get(k, [0, 0])[1] / width, 1), "workers": len(workers.get(k, ()))}
            for k in range(max(counts) + 1 if counts else 0)]


def by_problem(events: list[dict], problem_of: dict[str, str]) -> dict[str, dict]:
    """Per problem: pairs, replays, the worker-seconds of each (a pair's mark to its worker's next mark) and
    the seconds after the run's start its job's build was done. A worker runs one job at a time (between its
    `job` marks), all of one problem: the original's pairs count with the problem of their job's mutants."""
    start = min(e["t"] for e in events if e["event"] == "run")
    table: dict[str, dict] = {}
    by_worker: dict[int, list[dict]] = {}
    for event in events:
        by_worker.setdefault(event["pid"], []).append(event)
    for marks in by_worker.values():
        marks.sort(key=lambda e: e["t"])
        jobs: list[list[tuple[dict, float]]] = [[]]
        for mark, after in zip(marks, [*marks[1:], None]):
            if mark["event"] == "job":
                jobs.append([])
            elif mark["event"] == "pair":
                jobs[-1].append((mark, (after["t"] - mark["t"]) if after else 0.0))
        for pairs in filter(None, jobs):
            problem = next((problem_of[m["variant"]] for m, _ in pairs if m["variant"] in problem_of), "unknown")
            row = table.setdefault(problem, {"pairs": 0, "pair_s": 0.0, "replays": 0, "replay_s": 0.0})
            for mark, seconds in pairs:
                kind = "replay" if mark.get("replay") else "pair"
                row[f"{kind}s"] += 1
                row[f"{kind}_s"] += seconds
    built = {e["problem"]: round(e["t"] - start, 1) for e in events if e["event"] == "job_built" and "problem" in e}
    return {problem: {"pairs": row["pairs"], "pair_s": round(row["pair_s"], 1),
                      "ms_per_pair": round(1000 * row["pair_s"] / row["pairs"], 1) if row["pairs"] else None,
                      "replays": row["replays"], "replay_s": round(row["replay_s"], 1),
                      "built_s": built.get(problem)}
            for problem, row in sorted(table.items(), key=lambda item: -item[1]["pair_s"])}


def profile_top(path: Path, count: int) -> dict:
    """The `count` functions with the most cumulative seconds, and the total."""
    import pstats

    stats = pstats.Stats(str(path))
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][3])[:count]
    return {"total_s": round(stats.total_tt, 1),
            "by_cumulative_s": [{"function": f"{Path(file).name}:{line}({name})", "calls": calls,
                                 "own_s": round(own, 1), "cumulative_s": round(cumulative, 1)}
                                for (file, line, name), (_, calls, own, cumulative, _) in rows]}


def traced_run(folder: Path, script: str) -> list[dict]:
    """The events of the traced run in `folder`; where it holds none with pairs, `script` exits with one line."""
    events = read(folder) if folder.is_dir() else []
    if not any(e["event"] == "run" for e in events) or not any(e["event"] == "pair" for e in events):
        sys.exit(f"{script}: error: {folder}: no traced run with pairs (a folder of ORACLEAUDIT_TRACE files)")
    return events


def problems_of(folder: Path, script: str) -> dict[str, str]:
    """Mutant id → problem of the mutants folder; where it cannot be read, `script` exits with one line."""
    try:
        return {m.id: m.problem for m in read_mutants(folder)}
    except OracleAuditError as err:
        sys.exit(f"{script}: error: {err}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, required=True, help="the ORACLEAUDIT_TRACE folder of a run")
    parser.add_argument("--profile", type=Path, help="the workers' merged cProfile statistics")
    parser.add_argument("--top", type=int, default=40, help="functions listed from the profile (default 40)")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of each window of rates (default 20)")
    parser.add_argument("--mutants", type=Path, help="the run's mutants folder: figures per problem")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    if args.window <= 0:
        parser.error("--window must be > 0")
    events = traced_run(args.trace, "trace_rates.py")
    if args.profile and not args.profile.is_file():
        sys.exit(f"trace_rates.py: error: {args.profile}: no such profile file")
    figures = rates(events)
    figures["windows"] = windows(events, args.window)
    figures["slots"] = slots(events)
    figures["inputs_made"] = inputs_made(events)
    figures["standstills"] = standstills(events)
    if args.mutants:
        figures["by_problem"] = by_problem(events, problems_of(args.mutants, "trace_rates.py"))
    if args.profile:
        figures["profile"] = profile_top(args.profile, args.top)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
