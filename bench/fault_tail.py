"""Benchmark (GPU): what the run gains when variants that crash or hang leave their slice, side by side in one call.

In the calls of shards 3-5 of the complete bundled run (bench/results/run_losses.json) the slots spent 20% of
their time idle, mostly waiting at the end of a shard for the last slices, which were running their faulty
variants one by one after the others; 17.6% went to the 20 hung variants (0.7% of the variants), whose cover
inputs each waited for the full 5 s deadline floor; and 8% to starting workers. `oracleaudit run` now hands a
variant that crashed or hung back to the front of the work queue as a job of its own, gives a hung variant's
cover inputs a shorter floor (2 s when fault_tail.json was measured, 0.5 s since) and keeps a spare worker started
ahead (`execution.run(supervision="queue")`); the
behaviour before is kept as `supervision="slice"`. With --floors it measures the deadline floor instead: the
5 s floor is most of nearly every pair's deadline (in the bundled evidence the original's kernel time on the
pair's input is under 50 ms for 99.9% of the mutants' pairs), and a hang costs its slot about three deadlines
(the miss, then the retry at twice it), so a lower floor shortens hangs and may turn slow pairs on a shared GPU
into Timeouts: both show side by side.

    prepare  (CPU) WORK/mutants: the solutions of bench/data/full_run with the most mutants that hung or
             crashed in the committed shards (an observed Timeout, or a sticky CUDA error: AcceleratorError or
             WorkerDied), each with every such mutant and its first --others other Pending mutants by id
    run      (GPU) builds the sample's extensions (not timed), then one run of each solution's original and
             first mutant for the reference cache (not timed, supervision "queue"), then each arm into a fresh
             store, in order: the two supervisions (--order, the faster first), or with --floors A,B the queue
             supervision at each deadline floor (`--timeout-floor`; a hung variant's cover inputs get the
             smaller of it and 2 s), or with --deciders the queue supervision with the run's deciders (after a
             crash or hang, inputs whose every drawing oracle saw the variant fail are not run: ledger.py)
             and without them. Per arm: wall seconds, variants/min, idle, hung and startup seconds,
             handed-off variants, saved to WORK/fault_tail.json as each run ends; then the second arm's wall time
             over the first's (slice over queue for the supervisions), and every pair whose status differs
             between the two stores (a deadline is the one thing that may change one: a lower floor turns a
             slow pair into a Timeout). With --budget-s a run still going then stops starting pairs: its wall
             time bounds its whole run's from below, and the ratio is a bound

    faulty   (CPU) every mutant that hung or crashed in the committed shards, one per line with its kind, to
             --out (bench/data/faulty_mutants.tsv): what a throughput sample leaves out (pair_cost.py --exclude),
             as the shards are not on the device (bench/device_tree.sh parks them)

    PYTHONPATH=. python bench/fault_tail.py prepare --work out/fault_tail
    PYTHONPATH=. python bench/fault_tail.py run --work out/fault_tail [--floors 5,2 | --deciders]
    PYTHONPATH=. python bench/fault_tail.py faulty --out bench/data/faulty_mutants.tsv
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FULL_RUN = ROOT / "bench" / "data" / "full_run"
SHARDS = ROOT / "bench" / "results" / "full_run"
STOP_MARGIN_S = 15.0  # of --budget-s, for the last pairs in flight and the store's commit
CRASHES = ("AcceleratorError", "WorkerDied")  # a sticky CUDA error ended the worker's context, or the worker died


def faulty_mutants(stores: list[Path]) -> dict[str, str]:
    """Mutant id → "hung" or "crashed", from the observed (not inferred) rows of the stores."""
    from oracleaudit.store import EvidenceStore

    faults: dict[str, str] = {}
    for store in stores:
        rows = EvidenceStore(store).open().read(columns=["mutant_id", "status", "error_class", "inferred"])
        observed = rows[rows["inferred"].ne(True) & ~rows["mutant_id"].isin(["original", "reference"])]
        for mutant in sorted(set(observed.loc[observed["status"] == "Timeout", "mutant_id"])):
            faults[mutant] = "hung"
        for mutant in sorted(set(observed.loc[observed["error_class"].isin(CRASHES), "mutant_id"])):
            faults.setdefault(mutant, "crashed")
    return faults


def sample(mutants: list, faults: dict[str, str], solutions: int, others: int, skip: tuple[str, ...] = ()) -> list:
    """The `solutions` solution files with the most faulty mutants (hung ones first, then crashed; ties by path),
    each with all its faulty mutants and its first `others` other Pending mutants by id; solution paths
    containing any of `skip` are left out."""
    from oracleaudit.mutant import PENDING

    by_source: dict[str, list] = {}
    for mutant in mutants:
        if mutant.status == PENDING:
            by_source.setdefault(mutant.source, []).append(mutant)

    def weight(source: str) -> tuple:
        kinds = [faults.get(m.id) for m in by_source[source]]
        return -kinds.count("hung"), -kinds.count("crashed"), source

    chosen = sorted((s for s in by_source if any(m.id in faults for m in by_source[s])
                     and not any(text in s for text in skip)), key=weight)[:solutions]
    picked = []
    for source in sorted(chosen):
        group = sorted(by_source[source], key=lambda m: m.id)
        picked += [m for m in group if m.id in faults] + [m for m in group if m.id not in faults][:others]
    return sorted(picked, key=lambda m: (m.source, m.id))


def shard_stores() -> list[Path]:
    """The committed shard stores of the complete run, in name order (none while bench/device_tree.sh parks them)."""
    return sorted(p for p in SHARDS.glob("shard*") if p.is_dir())


def prepare(args) -> dict:
    from oracleaudit.mutant import read_mutants, write_mutants

    stores = shard_stores()
    faults = faulty_mutants(stores)
    picked = sample(read_mutants(FULL_RUN), faults, args.solutions, args.others, tuple(args.skip))
    write_mutants(args.work / "mutants", picked, {m.source: (ROOT / m.source).read_text() for m in picked})
    kinds = [faults.get(m.id, "ok") for m in picked]
    part = {"stores": [str(p.relative_to(ROOT)) for p in stores], "solutions": len({m.source for m in picked}),
            "mutants": len(picked), "hung": kinds.count("hung"), "crashed": kinds.count("crashed")}
    print(f"{part['mutants']} mutants of {part['solutions']} solutions: {part['hung']} hung and {part['crashed']} "
          f"crashed in {', '.join(part['stores'])}")
    return part


def faulty(args) -> None:
    """Write the faulty mutants of the committed shards, sorted by id, with a header naming where they come from."""
    stores = shard_stores()
    if not stores:
        raise OSError(f"{SHARDS}: no shard stores (parked? `bash bench/device_tree.sh unpark`)")
    faults = faulty_mutants(stores)
    lines = [f"# mutants with an observed Timeout (hung) or a sticky CUDA error (crashed) in "
             f"{', '.join(str(p.relative_to(ROOT)) for p in stores)}: bench/fault_tail.py faulty",
             *(f"{mutant}\t{kind}" for mutant, kind in sorted(faults.items()))]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(faults)} faulty mutants ({sum(k == 'hung' for k in faults.values())} hung) written to {args.out}")


def statuses(store: Path) -> dict[tuple, str]:
    from oracleaudit.store import EvidenceStore

    rows = EvidenceStore(store).open().read(columns=["problem", "mutant_id", "input_id", "output_index", "status"])
    return {tuple(key): status for *key, status in rows.itertuples(index=False)}


def differences(a: dict[tuple, str], b: dict[tuple, str]) -> list[dict]:
    """The pairs whose statuses differ between two stores' rows (a key missing from one counts as None)."""
    return [{"key": list(key), "statuses": [a.get(key), b.get(key)]}
            for key in sorted(set(a) | set(b), key=str) if a.get(key) != b.get(key)]


def run(args) -> dict:
    from bench.worker_cost import prebuild
    from oracleaudit import execution as runner
    from oracleaudit.scoring.oracle import covering

    begun = time.perf_counter()
    sample_dir = args.work / "mutants"
    prebuild(sample_dir, "default")
    started = time.perf_counter()
    # the first mutant of each solution: enough to fill the reference cache, which both timed runs then read
    runner.run(sample_dir, args.work / "evidence-warm-up", workers_per_gpu=args.workers_per_gpu, show_progress=False,
               cover=covering(), per_solution=1)
    print(f"build and warm-up run (not timed): {time.perf_counter() - begun:.1f} s, the warm-up "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    planned = arms(args)
    part = {"arms": [name for name, _ in planned], "workers_per_gpu": args.workers_per_gpu,
            "budget_s": args.budget_s, "runs": {}}
    for name, settings in planned:
        settings = dict(settings)
        cover = covering() if settings.pop("deciders", True) else cover_only(covering())
        left = None if args.budget_s is None else args.budget_s - (time.perf_counter() - begun) - STOP_MARGIN_S
        if left is not None and left <= 0:
            print(f"{name}: not run, the budget is spent", flush=True)
            break
        result = runner.run(sample_dir, args.work / f"evidence-{name}", workers_per_gpu=args.workers_per_gpu,
                            show_progress=False, cover=cover, stop_after_s=left, **settings)
        summary = result.summary()
        phases = summary["phases"]
        part["runs"][name] = {key: summary[key] for key in (
            "variants_run", "pairs_run", "wall_s", "execution_wall_s", "variants_per_min", "gpu_busy_fraction",
            "restarts", "hangs", "crashes", "replays", "handed_off", "inferred_rows", "errors", "stopped")}
        part["runs"][name]["phases"] = phases
        part["runs"][name]["settings"] = dict(planned)[name]
        print(f"{name}: {summary['wall_s']:.1f} s{' (stopped at the budget)' if summary['stopped'] else ''}, "
              f"{summary['pairs_run']} pairs, {summary['variants_per_min']} variants/min, idle {phases['idle_s']} s, "
              f"hung {phases['hung_s']} s, startup {phases['startup_s']} s, {summary['handed_off']} handed off, "
              f"{summary['restarts']} restarts, {summary['inferred_rows']} rows inferred", flush=True)
        args.save(part)  # a later run cut off by the call's end loses only itself
    runs = part["runs"]
    if len(runs) < 2:
        return part
    base, other = tuple(runs) if args.floors or args.deciders else ("queue", "slice")
    part.update(compare(runs, base, other))
    changed = differences(statuses(args.work / f"evidence-{base}"), statuses(args.work / f"evidence-{other}"))
    part.update(pairs_with_another_status=len(changed), changed=changed[:50])
    stopped = [name for name, r in runs.items() if r["stopped"]]
    ratio, bound = part["wall_ratio"], part["bound"]
    cut = f" ({', '.join(stopped)} stopped at the budget: pairs missing from it count as another status)" \
        if stopped else ""
    print(("no ratio, neither run ended" if ratio is None
           else f"{part['ratio_of']}: {bound + ' ' if bound else ''}{ratio}× the wall time") +
          f"; {len(changed)} pairs with another status{cut}", flush=True)
    return part


def cover_only(cover):
    """The run's cover without its deciders: every input of the cover observed after a fault, as before them."""
    return lambda problem, keys: cover(problem, keys)


def arms(args) -> list[tuple[str, dict]]:
    """The runs to compare, in order, each a name and its `execution.run` settings: the two supervisions
    (--order), or with --floors the queue supervision at each deadline floor, or with --deciders the queue
    supervision with the cover's deciders and without them."""
    if args.deciders:
        return [("decided", {"supervision": "queue"}), ("cover-only", {"supervision": "queue", "deciders": False})]
    if args.floors:
        return [(f"floor-{floor:g}", {"supervision": "queue", "timeout_floor_s": floor}) for floor in args.floors]
    return [(supervision, {"supervision": supervision}) for supervision in args.order]


def compare(runs: dict[str, dict], base: str, other: str) -> dict:
    """Run `other`'s wall time over run `base`'s. A run stopped at the budget observed only part of the sample:
    its wall time is a lower bound of its whole run's, so the ratio is a bound ("≥" when `other` stopped,
    "≤" when `base` did; no ratio when both did)."""
    stopped = {name for name in (base, other) if runs[name]["stopped"]}
    ratio = round(runs[other]["wall_s"] / runs[base]["wall_s"], 3)
    if len(stopped) == 2:
        ratio = None
    bound = {frozenset(): None, frozenset({other}): "≥", frozenset({base}): "≤"}.get(frozenset(stopped))
    return {"ratio_of": f"{other} over {base}", "bound": bound, "wall_ratio": ratio}


def _floors(text: str) -> list[float]:
    try:
        floors = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--floors takes two numbers of seconds, got {text!r}") from None
    if len(floors) != 2 or len(set(floors)) != 2 or min(floors) <= 0:
        raise argparse.ArgumentTypeError(f"--floors takes two different floors above 0 s, got {text!r}")
    return floors


def main() -> None:
    from oracleaudit.execution import SUPERVISION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--solutions", type=int, default=1, help="solutions in the sample (default 1: three "
                   "solutions' queue run alone took over 365 s of a call, bench/results/fault_tail.json)")
    p.add_argument("--others", type=int, default=16, help="Pending mutants per solution besides the faulty ones")
    p.add_argument("--skip", action="append", default=[], metavar="TEXT",
                   help="leave out solutions whose path contains TEXT (repeatable)")
    p.set_defaults(run=prepare)
    p = sub.add_parser("run")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--workers-per-gpu", type=int, default=8)
    p.add_argument("--order", nargs=2, choices=SUPERVISION, default=["queue", "slice"])
    p.add_argument("--floors", type=_floors, metavar="A,B", help="instead of the supervisions, the queue "
                   "supervision at two deadline floors in seconds, the ratio B's over A's (5,2: the default floor "
                   "against 2 s)")
    p.add_argument("--deciders", action="store_true", help="instead of the supervisions, the queue supervision "
                   "with the deciders of the run's cover (after a fault, inputs whose every drawing oracle saw the "
                   "variant fail are not run) and without them, the ratio without over with")
    p.add_argument("--budget-s", type=float, help="seconds from the start by which every run has stopped starting "
                   "pairs; a run stopped there bounds the ratio (its wall time is a lower bound of its whole run's)")
    p.set_defaults(run=run)
    p = sub.add_parser("faulty")
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.part == "faulty":
        faulty(args)
        return
    if args.part == "run" and sorted(args.order) != sorted(SUPERVISION):
        parser.error("--order names queue and slice, once each")
    if args.part == "run" and args.floors and args.deciders:
        parser.error("--floors and --deciders exclude each other")
    args.work.mkdir(parents=True, exist_ok=True)
    out = args.work / "fault_tail.json"
    state = json.loads(out.read_text()) if out.exists() else {}

    def save(part: dict) -> None:
        state[args.part] = part
        out.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")

    args.save = save
    save(args.run(args))


if __name__ == "__main__":
    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError, ValueError) as err:
        sys.exit(f"fault_tail.py: error: {err}")
