"""Benchmark (GPU): what a worker restart after a crash is made of, from the workers' traced timeline.

In the complete bundled run each restart cost its slot 0.9-1.6 s of startup (the supervisor waiting for the
fresh worker's Built), although a worker's kill takes 71 ms and a CUDA context 0.16 s alone, 0.22 s beside a
spinning kernel (bench/results/kill_cost.json). Here the fault-tail sample (`fault_tail.py prepare`: solutions
with the most crashing and hanging mutants) runs with `ORACLEAUDIT_TRACE` on (execution/trace.py), once per arm,
each into a fresh store and stopped after --arm-s seconds, and every worker's life is cut into segments:

    fork       the supervisor's start of the process → the worker's entry (the fork server's fork, unpickling)
    cuda_init  entry → torch.cuda.set_device done (the driver's start)
    context    → the first tensor made and the memory queried: Ready (the CUDA context)
    waited     how long the supervisor waited, once it sent a job, for the worker to be Ready (the startup a
               spare started ahead did not hide); idle: how long a Ready spare waited for its job
    load       the job received → Built (the extension loaded)
    prepare    Built → the first pair started (problem module, pool, inputs, the reference model, references)
    kill       SIGKILL → the process reaped, for each worker the supervisor discarded

for the workers started by a restart (a slot's first worker is left out), as totals, means and medians, beside
each arm's run summary (restarts, startup, hung, wall). Arms are NAME:WORKERS:SPARES[:REAP] (workers per GPU,
spare workers kept started ahead: `execution.run(spares=)`). Every arm observes the same sample from an empty store for the same
seconds, so their pairs observed compare side by side; the last line prints each arm's over the first's.

    PYTHONPATH=. python bench/fault_tail.py prepare --work out/fault_tail
    PYTHONPATH=. python bench/restart_cost.py --work out/fault_tail --arms w8-s1:8:1,w8-s3:8:3 --arm-s 150 \\
        --json $OUT/restart_cost.json
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import sys
import time
from pathlib import Path

SEGMENTS = ("fork", "cuda_init", "context", "waited", "idle", "load", "prepare", "kill")


def _arm(text: str) -> tuple[str, int, int]:
    try:
        name, workers, spares = text.split(":")
        return name, int(workers), int(spares)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an arm is NAME:WORKERS:SPARES, got {text!r}") from None


def lives(events: list[dict]) -> dict[int, dict]:
    """Per worker process id: the times of its events (the first of each kind) and the supervisor thread
    that started it."""
    workers: dict[int, dict] = {}
    for event in events:
        child = event.get("child")
        if child is not None:  # the supervisor's view of a worker
            life = workers.setdefault(child, {})
            if event["event"] == "start":
                life.setdefault("slot", event["tid"])
            life.setdefault(f"sup_{event['event']}", event["t"])
        else:
            workers.setdefault(event["pid"], {}).setdefault(event["event"], event["t"])
    return workers


def segments(life: dict) -> dict[str, float]:
    """The seconds of each of SEGMENTS this worker's life has both ends of."""
    spans = {"fork": ("sup_start", "main"), "cuda_init": ("main", "init"), "context": ("init", "ready"),
             "load": ("job", "built"), "prepare": ("built", "pair"), "kill": ("sup_kill", "sup_reaped")}
    out = {name: life[b] - life[a] for name, (a, b) in spans.items() if a in life and b in life}
    if "sup_send" in life and "ready" in life:
        out["waited"] = max(0.0, life["ready"] - life["sup_send"])
        out["idle"] = max(0.0, life["sup_send"] - life["ready"])
    return out


def summarise(events: list[dict]) -> dict:
    """Totals, means and medians of each segment over the workers started after their slot's first."""
    workers = lives(events)
    first: dict[int, float] = {}
    for life in workers.values():
        if "slot" in life:
            first[life["slot"]] = min(first.get(life["slot"], life["sup_start"]), life["sup_start"])
    restarted = [life for life in workers.values() if "slot" in life and life["sup_start"] > first[life["slot"]]]
    used = [life for life in restarted if "sup_send" in life]
    out: dict = {"workers": len(workers), "restart_workers": len(restarted), "restart_workers_used": len(used)}
    for name in SEGMENTS:
        values = [s[name] for s in map(segments, used if name != "kill" else workers.values()) if name in s]
        if values:
            out[name] = {"n": len(values), "total_s": round(sum(values), 1),
                         "mean_s": round(statistics.fmean(values), 3), "median_s": round(statistics.median(values), 3)}
    return out


def stalls(events: list[dict], until: float | None = None) -> dict:
    """What killing a worker whose pair hung does to the others: the seconds from SIGKILL to reaped, those
    windows' union, and the rate at which pairs started in the run as a whole against inside those windows. A
    hung worker is one the supervisor timed out (its `timeout` mark); in traces without such marks, one killed
    inside a pair without a Fatal first, before `until` seconds after the first event (the run's stop kills
    workers inside their pairs too)."""
    workers = lives(events)
    marked = any(e["event"] == "timeout" for e in events)
    cut = float("inf") if until is None else events[0]["t"] + until

    def hung(life: dict) -> bool:
        if marked:
            return "sup_timeout" in life
        return "sup_fatal" not in life and "pair" in life and life["sup_kill"] < cut

    windows = sorted((life["sup_kill"], life["sup_reaped"]) for life in workers.values()
                     if "sup_kill" in life and "sup_reaped" in life and hung(life))
    starts = sorted(e["t"] for e in events if e["event"] == "pair")
    if not windows:
        return {"kills": 0}
    inside = sum(bisect.bisect(starts, b) - bisect.bisect(starts, a) for a, b in windows)
    total = sum(b - a for a, b in windows)
    union, end = 0.0, float("-inf")
    for a, b in windows:
        union += max(0.0, b - max(a, end))
        end = max(end, b)
    span = events[-1]["t"] - events[0]["t"]
    return {"kills": len(windows), "reap_s": round(total, 1),
            "reap_median_s": round(statistics.median(b - a for a, b in windows), 2),
            "windows_union_s": round(union, 1), "traced_s": round(span, 1),
            "pairs_started_per_s": round(len(starts) / span, 2) if span else None,
            "pairs_started_per_s_while_reaping": round(inside / total, 2) if total else None}


def run(args) -> dict:
    from bench.worker_cost import prebuild
    from oracleaudit import execution as runner
    from oracleaudit.execution.trace import TRACE_ENV, read
    from oracleaudit.scoring.oracle import covering

    sample_dir = args.work / "mutants"
    prebuild(sample_dir, "default")
    started = time.perf_counter()
    runner.run(sample_dir, args.work / "evidence-warm-up", workers_per_gpu=8, show_progress=False, cover=covering(),
               per_solution=1)  # the reference cache, which every arm then reads
    print(f"warm-up run (not timed): {time.perf_counter() - started:.1f} s", flush=True)
    part: dict = {"arm_s": args.arm_s, "arms": {}}
    for name, workers, spares in args.arms:
        trace = args.work / f"trace-{name}"
        trace.mkdir(parents=True, exist_ok=True)
        os.environ[TRACE_ENV] = str(trace)
        try:
            result = runner.run(sample_dir, args.work / f"evidence-{name}", workers_per_gpu=workers, spares=spares,
                                show_progress=False, cover=covering(), stop_after_s=args.arm_s)
        finally:
            os.environ.pop(TRACE_ENV, None)
        summary = result.summary()
        arm = {key: summary[key] for key in ("pairs_run", "wall_s", "restarts", "crashes", "hangs", "replays",
                                             "errors", "stopped")}
        events = read(trace)
        arm.update(workers_per_gpu=workers, spares=spares, phases=summary["phases"], trace=summarise(events),
                   hung_kills=stalls(events))
        part["arms"][name] = arm
        waited = arm["trace"].get("waited", {})
        print(f"{name}: {arm['pairs_run']} pairs in {arm['wall_s']:.1f} s, {arm['restarts']} restarts, startup "
              f"{arm['phases']['startup_s']} s; waited for workers {waited.get('total_s')} s "
              f"(median {waited.get('median_s')} s)", flush=True)
        args.save(part)
    runs = list(part["arms"].items())
    if len(runs) > 1 and runs[0][1]["pairs_run"]:
        base = runs[0][1]["pairs_run"]
        part["pairs_over_first"] = {name: round(arm["pairs_run"] / base, 3) for name, arm in runs[1:]}
        print("pairs observed over the first arm's: " + ", ".join(f"{n} {r}×" for n, r in part["pairs_over_first"].items()))
        args.save(part)
    return part


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="a folder prepared by fault_tail.py prepare")
    parser.add_argument("--traces", type=Path, nargs="+", metavar="DIR", help="instead of running (CPU): "
                        "summarise these trace folders (a call's restart_traces.tgz, unpacked)")
    parser.add_argument("--until-s", type=float, help="with --traces of runs before the timeout marks: hung kills "
                        "only this long after the first event (the arm's seconds less a margin: its stop's kills)")
    parser.add_argument("--arms", type=lambda t: [_arm(a) for a in t.split(",")], default=[("w8-s3", 8, 3, "thread")])
    parser.add_argument("--arm-s", type=float, default=150.0, help="each arm stops starting pairs after this")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.traces:
        from oracleaudit.execution.trace import read

        part = {}
        for folder in args.traces:
            if not folder.is_dir():
                parser.error(f"{folder}: no such trace folder")
            events = read(folder)
            part[folder.name] = {"trace": summarise(events), "hung_kills": stalls(events, args.until_s)}
        print(json.dumps(part, indent=1, sort_keys=True))
        return
    if args.work is None or not (args.work / "mutants").exists():
        parser.error(f"{args.work}: no mutants folder (run fault_tail.py prepare first)")

    def save(part: dict) -> None:
        if args.json:
            args.json.write_text(json.dumps(part, indent=1, sort_keys=True) + "\n")

    args.save = save
    run(args)


if __name__ == "__main__":
    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError, ValueError) as err:
        sys.exit(f"restart_cost.py: error: {err}")
