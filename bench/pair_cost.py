"""Benchmark (GPU): what bounds the run stage, measured on one sample of mutants in two ways.

    workers  `oracleaudit run` of the sample into a fresh store for each --workers value (default 1,2,4,8 per
             GPU), its extensions built once beforehand (not timed): wall seconds, pairs per second, the
             GPU-busy fraction NVML reports and the worker-seconds by phase. Pairs per second that stop
             growing with more workers while the GPU reads busy mean the GPU's time is the bound. With
             --orders auto,variant each count runs under both pair orders (the worker's choice, input by input
             where that copies less, against variant by variant as before), and the ratio of their pairs per
             second is printed. An untimed run at the largest count comes first, so that every timed run finds
             the references in the reference cache and the evidence kernels compiled: measured without it, the
             first of two runs of the same sample was 20-25% slower than the second whatever its order.
             With --host-pairs 2048,65536 each count also runs with each bound on the hull candidates
             finished on the CPU (evidence_kernels.HOST_PAIRS_ENV; 2048: every second transfer's candidates
             finished on the GPU, as before), and the ratio of pairs per second to the first bound is printed.
             With --pinned 0,1 each count also runs with the worker's model templates on the host (input by
             input) and its host entries (variant by variant: each pair copies its input and references to the
             GPU) in pageable memory (0, as before) and in pinned memory (1: asynchronous copies;
             models.PINNED_ENV), and the ratio of pairs per second of 1 over 0 is printed; with --pinned variant,1
             the host entries of input-by-input runs stay pageable in the first (entries.pins: the policy
             before they were pinned too). With --spinners 0,1
             each count also runs beside that many processes whose kernels spin (a hung mutant's kernel until its
             deadline: kill_cost.py), and the ratio of pairs per second to the first count is printed. With
             --job-size N the sample's jobs are cut into slices of at most N variants (the run's JOB_SIZE by
             default): with fewer jobs than slots, as many workers as jobs at most have work, and more workers
             measure nothing. The figures so far are
             written to --json after each timed run (`"partial": true` until the end).
    kernels  one job per sampled solution, each in a child process with the GPU to itself, under
             torch.profiler (CUDA activity): per pair, the device microseconds and launches of its kernels
             and copies by kind (the fused evidence kernels, memory copies and sets, reductions such as the
             checksums, element-wise copies and casts, and the rest: the variant's and the reference's own
             kernels), the wall milliseconds per pair, the CUDA runtime calls per pair (the
             synchronisations among them: `syncs_per_pair`) and where the synchronisations come from
             (`sync_sites_per_pair`: torch's sync debug mode, each call by its innermost oracleaudit frame).
             The device time per pair times the pairs per second of the largest --workers run is the share of
             the GPU the pairs' own work fills. Each synchronisation waits out one time slice of any kernel
             spinning beside it (kill_cost.py: 2.4 ms), so the sites say what a hung mutant costs the others.

The sample: the first --per-solution Pending mutants by id (`run --per-solution`'s rule) of --solutions
solutions spread evenly over a full `oracleaudit mutate` output in path order, or of the --solution files named
(e.g. the problems with the largest outputs, where shard 1 of the bundled run spent 33 ms a pair in evidence),
less the mutants --exclude names: with bench/data/faulty_mutants.tsv, none that hung or crashed in the complete
run (one hung variant bounded both runs of pair_cost_pinned.json, idle slots around it half their slot time).
The kernels part runs after the workers part, so references come from the reference cache, as in a long run.
A job whose variant kills the CUDA context ends its child (it is reported as lost, with its exit code).

    PYTHONPATH=. python bench/pair_cost.py --mutants out/mutants_full --json $OUT/pair_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from oracleaudit.execution.plan import JOB_SIZE

SETTINGS = ("order", "host_pairs", "pinned", "spinners")  # what --orders, --host-pairs, --pinned, --spinners vary
ROOT = Path(__file__).resolve().parent.parent

# Kernel kinds by name (torch.profiler's names: the demangled kernel, or "Memcpy …"/"Memset …"), first match.
KINDS = (
    ("evidence", re.compile(r"\b(pass1|pass2|finish1|finish2)\b")),  # oracleaudit/data/evidence_kernels.cu
    ("memcpy/memset", re.compile(r"^(Memcpy|Memset)")),
    ("reductions", re.compile(r"reduce_kernel")),
    ("copies and casts", re.compile(r"copy|CatArrayBatched|fill|FillFunctor|elementwise_kernel")),
)
OTHER = "variant and reference"


def kind_of(name: str) -> str:
    return next((kind for kind, pattern in KINDS if pattern.search(name)), OTHER)


def summarize(records: list[dict]) -> dict:
    """The kernels part's figures from the children's records ({solution, pairs, wall_s, kernels: {name:
    [launches, device µs]}, runtime: {CUDA runtime call: count}}): per pair, device µs and launches by kind
    and in all, wall ms, the synchronisations with the device (runtime calls named …Synchronize: each one
    waits for the other workers' time slices on a shared GPU) and the most frequent runtime calls, and the
    kernels that took the most device time; where records name them (`sync_sites`: the innermost oracleaudit
    frame of each synchronising call torch's sync debug mode saw), the sites by synchronisations per pair."""
    pairs = sum(r["pairs"] for r in records)
    calls: dict[str, int] = {}
    for record in records:
        for name, count in record.get("runtime", {}).items():
            calls[name] = calls.get(name, 0) + count
    by_kind: dict[str, list[float]] = {kind: [0, 0.0] for kind, _ in KINDS}
    by_kind[OTHER] = [0, 0.0]
    by_name: dict[str, list[float]] = {}
    for record in records:
        for name, (launches, device_us) in record["kernels"].items():
            by_kind[kind_of(name)][0] += launches
            by_kind[kind_of(name)][1] += device_us
            total = by_name.setdefault(name, [0, 0.0])
            total[0] += launches
            total[1] += device_us
    if not pairs:
        return {"pairs": 0}
    device_us = sum(us for _, us in by_kind.values())
    top = sorted(by_name.items(), key=lambda item: (-item[1][1], item[0]))[:15]
    sites: dict[str, int] = {}
    for record in records:
        for site, count in record.get("sync_sites", {}).items():
            sites[site] = sites.get(site, 0) + count
    return {
        "pairs": pairs,
        "wall_ms_per_pair": round(1000 * sum(r["wall_s"] for r in records) / pairs, 3),
        "device_us_per_pair": round(device_us / pairs, 2),
        "launches_per_pair": round(sum(n for n, _ in by_kind.values()) / pairs, 2),
        "syncs_per_pair": round(sum(n for k, n in calls.items() if "Synchronize" in k) / pairs, 2) if calls else None,
        "runtime_calls_per_pair": {k: round(n / pairs, 2)
                                   for k, n in sorted(calls.items(), key=lambda item: (-item[1], item[0]))[:10]},
        "by_kind": {kind: {"device_us_per_pair": round(us / pairs, 2), "launches_per_pair": round(n / pairs, 2)}
                    for kind, (n, us) in by_kind.items()},
        "top_kernels": [{"name": name[:160], "kind": kind_of(name), "launches": int(n), "device_us": round(us, 1)}
                        for name, (n, us) in top],
        **({"sync_sites_per_pair": {site: round(n / pairs, 3) for site, n in
                                    sorted(sites.items(), key=lambda item: (-item[1], item[0]))[:20]}}
           if sites else {}),
    }


def _sample(mutants: Path, solutions: int, per_solution: int, out: Path, named: list[str] = (),
            exclude: Path | None = None) -> list[str]:
    from oracleaudit.mutant import PENDING, read_mutants

    sources = sorted({m.source for m in read_mutants(mutants) if m.status == PENDING})
    if not sources:
        raise SystemExit(f"pair_cost.py: error: {mutants}: no Pending mutants")
    unknown = [s for s in named if s not in sources]
    if unknown:
        raise SystemExit(f"pair_cost.py: error: {mutants}: no Pending mutants of {', '.join(unknown)}")
    step = max(1, len(sources) // solutions)
    chosen = list(named) or sources[::step][:solutions]
    subprocess.run([sys.executable, str(ROOT / "bench" / "sample_mutants.py"), "--mutants", str(mutants),
                    "--per-solution", str(per_solution), "--out", str(out),
                    *(["--exclude", str(exclude)] if exclude else []), *chosen], check=True)
    return chosen


def _workers(sample: Path, pool: str, counts: list[int], settings: list[dict], work: Path, job_size: int,
             partial: Callable[[list[dict]], None] = lambda done: None) -> list[dict]:
    """Each worker count under each setting, side by side in this one process, each into a fresh store, its
    jobs cut into slices of at most `job_size` variants (`partial` gets the entries so far after each). A
    setting names the pair order (the worker's `ORDER_ENV`: "auto" chooses input by input by bytes,
    "variant" is the order of before) and, where given, the most hull candidates finished on the CPU
    (`evidence_kernels.HOST_PAIRS_ENV`) and whether model templates on the host and host entries copied for
    every pair are pinned (`models.PINNED_ENV`), and how many processes spin a kernel beside the run (a hung
    mutant's kernel: kill_cost.py)."""
    import multiprocessing
    import os

    from bench import kill_cost
    from oracleaudit import execution as runner
    from oracleaudit.execution.evidence_kernels import HOST_PAIRS_ENV
    from oracleaudit.execution.models import PINNED_ENV
    from oracleaudit.execution.worker import ORDER_ENV

    names = {"order": ORDER_ENV, "host_pairs": HOST_PAIRS_ENV, "pinned": PINNED_ENV}
    spawn = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    runner.run(sample, work / "evidence-warm-up", pool=pool, workers_per_gpu=max(counts), show_progress=False,
               job_size=job_size)
    print(f"warm-up run (not timed): {time.perf_counter() - started:.1f} s", flush=True)
    results = []
    for count in counts:
        for setting in settings:
            label = "-".join(str(v) for v in setting.values())
            os.environ.update({names[k]: str(v) for k, v in setting.items() if k in names})
            spinning = [kill_cost.start(spawn, True) for _ in range(setting.get("spinners", 0))]
            started = time.perf_counter()
            try:
                result = runner.run(sample, work / f"evidence-w{count}-{label}", pool=pool, workers_per_gpu=count,
                                    show_progress=False, job_size=job_size)
            finally:
                for key in setting.keys() & names.keys():
                    os.environ.pop(names[key], None)
                for process in spinning:
                    process.kill()
                    process.join(60)
            wall = time.perf_counter() - started
            summary = result.summary()
            entry = {"workers_per_gpu": count, **setting, "wall_s": round(wall, 1), "pairs": summary["pairs_run"],
                     "pairs_per_s": round(summary["pairs_run"] / wall, 1),
                     "gpu_busy_fraction": summary["gpu_busy_fraction"],
                     "phases": summary["phases"], "errors": len(summary["errors"])}
            print(f"{count} workers, {setting}: {wall:6.1f} s, {entry['pairs_per_s']:7.1f} pairs/s, GPU busy "
                  f"{entry['gpu_busy_fraction']}, phases {summary['phases']}", flush=True)
            results.append(entry)
            partial(results)
    return results


def setting_ratios(workers: list[dict], key: str, value, base) -> dict[str, float]:
    """Pairs per second with `key` = `value` over `key` = `base`, by worker count, where both ran with the
    other settings alike (the label names those settings when they vary)."""
    def others(w: dict) -> tuple:
        return tuple((k, w[k]) for k in SETTINGS if k != key and k in w)

    rate = {(w["workers_per_gpu"], others(w), w.get(key)): w["pairs_per_s"] for w in workers}
    varied = len({other for _, other, _ in rate}) > 1
    ratios = {}
    for (count, other, v), pairs_per_s in rate.items():
        if v == value and rate.get((count, other, base)):
            label = " ".join([str(count), *(f"{k}={x}" for k, x in other)]) if varied else str(count)
            ratios[label] = round(pairs_per_s / rate[(count, other, base)], 2)
    return ratios


def order_ratios(workers: list[dict]) -> dict[str, float]:
    """Pairs per second of the "auto" order over the "variant" order, by worker count (where both ran)."""
    return setting_ratios(workers, "order", "auto", "variant")


def sync_site(frames: list) -> str:
    """Where a synchronisation comes from: the innermost frame in oracleaudit's package (a variant's or the
    reference's own synchronisations show as the worker line that runs the model), else the innermost frame."""
    ours = [f for f in frames if f"{os.sep}oracleaudit{os.sep}" in f.filename]
    where = (ours or frames)[-1]
    return f"{Path(where.filename).name}:{where.lineno} {where.name}"


def _profile_job(job, path: str) -> None:
    """In a child: run `job` under torch.profiler, counting its synchronising calls by site (torch's sync debug
    mode), and write its record to `path`."""
    import traceback
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile

    from oracleaudit.execution.worker import JobRun

    torch.cuda.set_device(torch.device(job.device))
    torch.zeros(1, device=job.device)
    sites: dict[str, int] = {}

    def seen(message, category, filename, lineno, file=None, line=None) -> None:
        if "synchroniz" in str(message):
            site = sync_site(traceback.extract_stack()[:-1])
            sites[site] = sites.get(site, 0) + 1

    warnings.showwarning = seen
    warnings.simplefilter("always")
    torch.cuda.set_sync_debug_mode("warn")
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        JobRun(job, lambda message: None).run()
        torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("default")
    events = prof.key_averages()
    kernels = {e.key: [e.count, e.self_device_time_total] for e in events if e.self_device_time_total > 0}
    runtime = {e.key: e.count for e in events if e.key.startswith("cuda") and not e.self_device_time_total}
    Path(path).write_text(json.dumps({"solution": job.solution, "pairs": job.pairs,
                                      "wall_s": time.perf_counter() - started, "kernels": kernels,
                                      "runtime": runtime, "sync_sites": sites}))


def _kernels(sample: Path, pool: str, work: Path) -> tuple[list[dict], list[str]]:
    import multiprocessing

    from oracleaudit import execution as runner
    from oracleaudit.mutant import read_mutants

    jobs, errors, _ = runner.plan_jobs(read_mutants(sample), pool, runner.build_root(), set())
    records, lost = [], [*errors]
    context = multiprocessing.get_context("spawn")
    for index, job in enumerate(jobs):
        path = work / f"kernels-{index}.json"
        child = context.Process(target=_profile_job, args=(job, str(path)))
        child.start()
        child.join()
        if child.exitcode == 0 and path.is_file():
            records.append(json.loads(path.read_text()))
            print(f"profiled {job.solution}: {job.pairs} pairs", flush=True)
        else:
            lost.append(f"{job.solution}: child ended with exit code {child.exitcode}")
            print(f"lost {lost[-1]}", flush=True)
    return records, lost


def _counts(text: str, what: str = "worker counts", low: int = 1) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of {what}: {text!r}") from None
    if not counts or any(c < low for c in counts):
        raise argparse.ArgumentTypeError(f"{what} must be ≥ {low}, got {text!r}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, required=True, help="folder written by `oracleaudit mutate`")
    parser.add_argument("--pool", default="default")
    parser.add_argument("--solutions", type=int, default=8, help="solutions in the sample (default 8)")
    parser.add_argument("--per-solution", type=int, default=4, help="mutants per solution (default 4)")
    parser.add_argument("--solution", action="append", default=[], metavar="PATH",
                        help="a solution file to sample, as the mutants file names it (repeatable; instead of "
                             "--solutions)")
    parser.add_argument("--workers", type=_counts, default=[1, 2, 4, 8], metavar="N,N,...",
                        help="--workers-per-gpu values to time (default 1,2,4,8)")
    parser.add_argument("--orders", default="auto", metavar="ORDER,...",
                        help="pair orders to time side by side: auto (the worker's choice), variant (variant by "
                             "variant, the order of before); default auto")
    parser.add_argument("--host-pairs", type=lambda text: _counts(text, "hull candidate bounds"), default=[],
                        metavar="N,N,...",
                        help="the most hull candidates finished on the CPU (evidence_kernels.HOST_PAIRS_ENV), "
                             "timed side by side (2048: none after the first transfer); default the package's")
    parser.add_argument("--pinned", default="", metavar="0,1,variant",
                        help="model templates on the host and host entries in pageable (0) or pinned (1) memory, "
                             "or host entries pinned variant by variant only (variant: the policy before), timed "
                             "side by side; default the package's (pinned)")
    parser.add_argument("--spinners", type=lambda text: _counts(text, "spinning kernel counts", low=0), default=[],
                        metavar="N,N,...", help="each run also beside each of these numbers of processes whose "
                        "kernel spins, as a hung mutant's does until its deadline (default none)")
    parser.add_argument("--job-size", type=int, default=JOB_SIZE, metavar="N",
                        help=f"variants per slice (default {JOB_SIZE}, the run's): fewer cut the sample into more "
                             "slices than slots, so that a count of workers is not bounded by the count of jobs")
    parser.add_argument("--exclude", type=Path, metavar="FILE",
                        help="mutant ids to leave out of the sample, one per line (bench/data/faulty_mutants.tsv: "
                             "those that hung or crashed in the complete run, whose tail a run's wall time measures)")
    parser.add_argument("--no-kernels", action="store_true", help="skip the kernels part (torch.profiler)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    args = parser.parse_args()
    if args.solutions < 1 or args.per_solution < 1 or args.job_size < 1:
        parser.error("--solutions, --per-solution and --job-size must be ≥ 1")
    orders = args.orders.split(",")
    if not orders or set(orders) - {"auto", "variant"}:
        parser.error(f"--orders takes auto and variant, got {args.orders!r}")
    pinned = args.pinned.split(",") if re.fullmatch(r"(0|1|variant)(,(0|1|variant))*", args.pinned) else []
    if args.pinned and not pinned:
        parser.error(f"--pinned takes 0, 1 and variant, got {args.pinned!r}")

    from bench.worker_cost import prebuild

    if args.exclude and not args.exclude.is_file():
        parser.error(f"--exclude {args.exclude}: no such file")
    excluded = str(args.exclude) if args.exclude else None

    work = Path(tempfile.mkdtemp(prefix="oracleaudit-pair-cost-"))
    try:
        sample = work / "mutants"
        chosen = _sample(args.mutants, args.solutions, args.per_solution, sample, args.solution, args.exclude)
        prebuild(sample, args.pool)
        settings = [{"order": order, **({"host_pairs": n} if n else {}), **({"pinned": pin} if pinned else {}),
                     **({"spinners": k} if args.spinners else {})}
                    for order in orders for n in (args.host_pairs or [None]) for pin in (pinned or [None])
                    for k in (args.spinners or [None])]
        def partial(done: list[dict]) -> None:  # a call cut off later keeps the counts timed so far
            if args.json:
                args.json.write_text(json.dumps({"solutions": chosen, "per_solution": args.per_solution,
                                                 "job_size": args.job_size, "exclude": excluded, "workers": done,
                                                 "partial": True},
                                                indent=1) + "\n")

        workers = _workers(sample, args.pool, args.workers, settings, work, args.job_size, partial)
        records, lost = ([], []) if args.no_kernels else _kernels(sample, args.pool, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kernels = summarize(records) if records else {}
    widest = workers[-1]
    if kernels.get("device_us_per_pair"):
        kernels["gpu_share_of_pairs_own_work"] = round(kernels["device_us_per_pair"] * 1e-6 * widest["pairs_per_s"], 3)
    result = {"solutions": chosen, "per_solution": args.per_solution, "job_size": args.job_size, "exclude": excluded,
              "workers": workers, "kernels": kernels, "lost": lost}
    ratios = order_ratios(workers)
    if ratios:
        result["auto_over_variant_order"] = ratios
        print(f"pairs/s of the auto order over the variant order, by workers per GPU: {ratios}")
    for n in args.host_pairs[1:]:
        ratios = setting_ratios(workers, "host_pairs", n, args.host_pairs[0])
        result[f"host_pairs_{n}_over_{args.host_pairs[0]}"] = ratios
        print(f"pairs/s with {n} hull candidates on the CPU over {args.host_pairs[0]}, by workers per GPU: {ratios}")
    for k in args.spinners[1:]:
        ratios = setting_ratios(workers, "spinners", k, args.spinners[0])
        result[f"spinners_{k}_over_{args.spinners[0]}"] = ratios
        print(f"pairs/s beside {k} spinning kernels over beside {args.spinners[0]}, by workers per GPU: {ratios}")
    if pinned[1:]:
        ratios = setting_ratios(workers, "pinned", pinned[1], pinned[0])
        result[f"pinned_{pinned[1]}_over_{pinned[0]}"] = ratios
        print(f"pairs/s with pinned={pinned[1]} over pinned={pinned[0]}, by workers per GPU: {ratios}")
    print(json.dumps(kernels, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
