"""Benchmark (GPU): the run stage at scale, in resumable parts whose results gather in one state file.

    full     every Pending mutant of the bundled dataset (a full `oracleaudit mutate` output) with the default
             pool, into one store; `--stop-after S` ends a call early and the next call continues it (its wall
             time adds up); `--shard K/N` runs one of N balanced sets of whole solutions into a store of its
             own (a run longer than a session's device time: the stores merge with `oracleaudit merge`). Run the first call on a cold build cache. `--per-solution N` runs the bundled
             sample first (its smaller builds are then extra work: the sum of the calls' wall time is an upper
             bound of one uninterrupted run).
    memory   a worker's peak GPU memory with 10 and with 60 pool inputs of 4M elements each (the test
             solution of tests/testdata/run_root)
    real     problems at KernelBench's own sizes at --workers-per-gpu 8: a 3-D convolution with a 244M-element
             output (bench/data/real_size, with its own solution), and two bundled problems scaled through their
             shape constants to KernelBench's sizes (`OFFICIAL`): a fused 2-D convolution with a 134M-element
             input and a 2.5 GiB MLP, run with their bundled solutions and first mutants
    reobserve (CPU) a mutants folder of the Pending mutants that have an inferred row on an input of their
             problem's cover in a store: rows made before the run observed every variant on its cover (shard 1's
             first three calls), where an oracle could observe such a mutant on none of its inputs. Run them
             (`full --mutants` that folder) into a store of their own and name it first when merging the
             stores (`oracleaudit merge --into ALL REOBSERVED SHARD1 ...`): a key found in several stores is
             taken from the first, so their rows replace the old ones whole
    ship     a store and its state as a tar in pieces for a call's $OUT, the store packed (a third of the bytes of a
             compacted one; a run goes on from an unfinished one merged back into a plain store:
             `oracleaudit merge --into STORE STORE-packed`, as device_call.sh's restore does)
    report   bench/results/run_scale.json from the states (`--state` repeated: each shard's, the real-size run's):
             the full run's wall time, variants/min, phases, GPU-busy fraction and holes (pairs of the plan
             without a row), the memory ratio, the real-size run

Run from the repository root on the GPU machine, e.g.
    PYTHONPATH=. python bench/run_scale.py full --mutants out/mutants_full --store out/full --state out/scale.json
    PYTHONPATH=. python bench/run_scale.py report --state out/scale.json --out bench/results/run_scale.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "bench" / "data" / "real_size"
RUN_ROOT = ROOT / "tests" / "testdata" / "run_root"
# KernelBench's own shape constants (ScalingIntelligence/KernelBench @423217d: level2/1_Conv2D_ReLU_BiasAdd.py
# and level3/1_MLP.py) for the bundled problems of the same operators, by their constant names.
OFFICIAL = {
    "level2/4_Conv2d_Bias_ReLU": {"batch_size": 128, "in_channels": 64, "out_channels": 128, "height": 128,
                                  "width": 128},
    "level3/1_MLP": {"batch_size": 128, "input_size": 16384, "hidden1": 16384, "hidden2": 16384, "output_size": 8192},
}
REAL_MUTANTS = 8  # per solution, the first by id


def _state(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _save(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")


def _holes(mutants: Path, store: Path, pool: str) -> dict:
    """Pairs the plan has that the store lacks a row for, and the inferred rows it holds."""
    from oracleaudit import execution as runner
    from oracleaudit.mutant import read_mutants
    from oracleaudit.store import EvidenceStore

    opened = EvidenceStore(store).open()
    jobs, errors, recorded = runner.plan_jobs(read_mutants(mutants), pool, runner.build_root(), opened.done_keys())
    rows = opened.read(columns=["inferred", "mutant_id"])
    return {"holes": sum(job.pairs for job in jobs), "pairs_recorded": recorded, "plan_errors": errors,
            "rows": len(rows), "inferred_rows": int(rows["inferred"].fillna(False).astype(bool).sum())}


def shard(mutants_dir: Path, spec: str, work: Path) -> Path:
    """A mutants folder (under `work`) with the Pending mutants of shard K of N ("K/N", K from 1): whole
    solutions, dealt to the shards by greedy balancing of their Pending mutants (largest first, ties by
    path), so that N stores made one per shard — in separate sessions or machines — merge
    (`oracleaudit merge`) into the store of the whole run."""
    from oracleaudit.mutant import PENDING, read_mutants, write_mutants

    k, n = (int(x) for x in spec.split("/"))
    if not 1 <= k <= n:
        raise ValueError(f"--shard must be K/N with 1 ≤ K ≤ N, got {spec}")
    mutants = read_mutants(mutants_dir)
    by_source: dict[str, list] = {}
    for m in mutants:
        if m.status == PENDING:
            by_source.setdefault(m.source, []).append(m)
    loads = [0] * n
    chosen = []
    for source, group in sorted(by_source.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        target = min(range(n), key=lambda i: (loads[i], i))
        loads[target] += len(group) + 1  # the original runs too
        if target == k - 1:
            chosen += group
    write_mutants(work / "mutants", chosen, {m.source: (ROOT / m.source).read_text() for m in chosen})
    return work / "mutants"


def reobserve(args) -> None:
    """--out: the Pending mutants of --mutants with an inferred row in --store on an input of the cover the run
    stage now observes (`scoring.oracle.input_cover` of the catalog, over the problem's pool inputs)."""
    from oracleaudit.mutant import PENDING, read_mutants, write_mutants
    from oracleaudit.pool import Pool
    from oracleaudit.problem import problem_at
    from oracleaudit.scoring.oracle import covering
    from oracleaudit.store import EvidenceStore

    store = EvidenceStore(args.store).open()
    rows = store.read(columns=["problem", "mutant_id", "input_id", "inferred"])
    guessed = rows[rows["inferred"].fillna(False).astype(bool)]
    guessed = {key: set(group.input_id) for key, group in guessed.groupby(["problem", "mutant_id"])}
    pool, cover, covers = Pool.load(args.pool), covering(), {}
    chosen = []
    for mutant in read_mutants(args.mutants):
        if mutant.status != PENDING or mutant.problem_file is None:
            continue
        problem = problem_at(ROOT / mutant.problem_file)
        inputs = guessed.get((problem.label, mutant.id))
        if not inputs:
            continue
        if problem.label not in covers:
            covers[problem.label] = set(cover(problem.label, [e.key for e in pool.entries_for(problem)]))
        if inputs & covers[problem.label]:
            chosen.append(mutant)
    write_mutants(args.out, chosen, {m.source: (ROOT / m.source).read_text() for m in chosen})
    print(f"{len(chosen)} mutants of {len({m.source for m in chosen})} solutions with an inferred row on a cover "
          f"input in {args.store}: {args.out}")


def full(args) -> None:
    from oracleaudit import execution as runner
    from oracleaudit.scoring.oracle import covering

    state = _state(args.state)
    calls = state.setdefault("full", {"calls": []})["calls"]
    if args.shard:
        args.mutants = shard(args.mutants, args.shard, Path(tempfile.mkdtemp(prefix="oracleaudit-shard-")))
        state["full"]["shard"] = args.shard
    if args.reobserving:
        state["full"]["reobserves"] = True
    result = runner.run(args.mutants, args.store, pool="default", workers_per_gpu=args.workers_per_gpu,
                        stop_after_s=args.stop_after, per_solution=args.per_solution, show_progress=False,
                        cover=covering(), stall_watch=args.stall_watch)  # as `oracleaudit run` does
    summary = result.summary()
    summary["cold_cache"] = not calls and args.cold
    summary["per_solution"] = args.per_solution
    calls.append(summary)
    state["full"].update(_holes(args.mutants, args.store, "default"))
    state["gpu"] = _gpu()
    _save(args.state, state)
    print(json.dumps({k: summary[k] for k in ("variants_run", "pairs_run", "wall_s", "variants_per_min",
                                              "gpu_busy_fraction", "phases", "stopped", "errors", "restarts", "hangs",
                                              "crashes", "replays", "gpu_stalled_s")}, indent=1))
    print(f"holes left: {state['full']['holes']}, inferred rows: {state['full']['inferred_rows']}")


def memory(args) -> None:
    """The worker's peak GPU memory (max_memory_reserved) on 10 and on 60 inputs of the same problem."""
    from oracleaudit import execution as runner
    from oracleaudit.mutant import Mutant, mutant_id, write_mutants
    from oracleaudit.source import line_col, load_units

    state = _state(args.state)
    peaks = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(RUN_ROOT, work, dirs_exist_ok=True)
        problem = work / "level1" / "1_ScaleShift.py"
        problem.write_text(problem.read_text().replace("size = 4099", "size = 4_000_003"))
        solution = "solutions/level1/1_ScaleShift.py"
        unit = load_units(work / solution)[0]
        text, replacement = "2.0f * x[i]", "2.5f * x[i]"
        start = unit.file_text.index(text)
        line, col = line_col(unit.file_text, start)
        mutant = Mutant(id=mutant_id("level1/1_ScaleShift", solution, "bench.constant", start, start + len(text),
                                     replacement),
                        problem="level1/1_ScaleShift", problem_file="level1/1_ScaleShift.py", source=solution,
                        source_sha256=unit.sha256, unit=0, rule="bench.constant", family="bench", start=start,
                        end=start + len(text), start_line=line, start_col=col, end_line=line, end_col=col + len(text),
                        original=text, replacement=replacement, scope="device", function=None)
        write_mutants(work / "mutants", [mutant], {solution: unit.file_text})
        import os

        here = os.getcwd()
        os.chdir(work)
        try:
            for count in (10, 60):
                pool = work / f"pool{count}.toml"
                pool.write_text(f'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = {list(range(count))}\n')
                result = runner.run(Path("mutants"), Path(f"evidence{count}"), pool=str(pool), show_progress=False)
                peaks[count] = result.peak_bytes.get("level1/1_ScaleShift")
                print(f"{count} inputs: peak {peaks[count]} bytes, {result.pairs} pairs, errors {result.errors}")
        finally:
            os.chdir(here)
    state["memory"] = {"problem": "tests/testdata/run_root level1/1_ScaleShift with size 4,000,003",
                       "peak_bytes_10_inputs": peaks[10], "peak_bytes_60_inputs": peaks[60],
                       "ratio_60_vs_10": round(peaks[60] / peaks[10], 4) if peaks[10] and peaks[60] else None}
    state["gpu"] = _gpu()
    _save(args.state, state)
    print(json.dumps(state["memory"], indent=1))


def _real_size_inputs(work: Path) -> Path:
    """A mutants folder for the real-size run: the conv3d's own mutants, and the first bundled mutants of the
    problems in OFFICIAL with their problem files scaled (a copy under `work` with KernelBench's constants)."""
    import re

    from oracleaudit.mutant import read_mutants, write_mutants
    from oracleaudit.problem import bundled_root
    from oracleaudit.shipped import shipped_dir

    chosen = list(read_mutants(REAL / "mutants"))
    bundled = read_mutants(shipped_dir("kill_matrix") / "mutants")
    texts = {m.source: (ROOT / m.source).read_text() for m in chosen}
    for label, constants in OFFICIAL.items():
        text = (bundled_root() / f"{label}.py").read_text()
        for name, value in constants.items():
            text, count = re.subn(rf"^{name} = \d+$", f"{name} = {value}", text, flags=re.M)
            if count != 1:
                raise ValueError(f"{label}: no line `{name} = <int>` to scale")
        scaled = work / "problems" / f"{label}.py"
        scaled.parent.mkdir(parents=True, exist_ok=True)
        scaled.write_text(text)
        mine = sorted((m for m in bundled if m.problem == label), key=lambda m: m.id)[:REAL_MUTANTS]
        chosen += [replace(m, problem_file=str(scaled)) for m in mine]
        texts.update({m.source: (ROOT / m.source).read_text() for m in mine})
    write_mutants(work / "mutants", chosen, texts)
    return work / "mutants"


def real(args) -> None:
    from oracleaudit import execution as runner
    from oracleaudit.scoring.oracle import covering
    from oracleaudit.store import EvidenceStore

    state = _state(args.state)
    store = args.store.resolve()
    work = Path(tempfile.mkdtemp(prefix="oracleaudit-real-size-"))
    mutants = _real_size_inputs(work)
    pool = str(REAL / "pool.toml")
    result = runner.run(mutants, store, pool=pool, workers_per_gpu=args.workers_per_gpu, job_size=args.job_size,
                        show_progress=False, cover=covering())
    holes = _holes(mutants, store, pool)
    rows = EvidenceStore(store).open().read(columns=["problem", "mutant_id", "status", "inferred"])
    summary = result.summary()
    state["real_size"] = {
        "problems": sorted(rows["problem"].unique().tolist()),
        "variants": int(rows[rows.mutant_id != "reference"][["problem", "mutant_id"]].drop_duplicates().shape[0]),
        "oom": int((rows.status == "OOM").sum()), "failed_jobs": len(result.errors), "errors": result.errors,
        "wall_s": summary["wall_s"], "workers_per_gpu": args.workers_per_gpu, "job_size": args.job_size,
        "observations_by_status": summary["observations_by_status"], "phases": summary["phases"],
        "peak_gpu_bytes_by_problem": summary["peak_gpu_bytes_by_problem"], "exclusive_jobs": summary["exclusive_jobs"],
        "restarts": summary["restarts"], "hangs": summary["hangs"], "crashes": summary["crashes"],
        "holes": holes["holes"], "inferred_rows": holes["inferred_rows"]}
    state["gpu"] = _gpu()
    _save(args.state, state)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(state["real_size"], indent=1))


def gather(states: list[dict]) -> dict:
    """One state from several (a call's file each: the shards of the full run, a `reobserve` run, the real-size
    run, ...): the full run's calls of every shard in the order given, their holes and inferred rows summed, the
    code of each (labelled by what it ran), and whether it is complete — every shard K of its N present (or one
    unsharded run), each ended (its last call not stopped) with no hole, a reobserve run too (its calls count, it
    is no shard); gpu, memory and real_size from the first state that has them."""
    fulls = [s["full"] for s in states if s.get("full", {}).get("calls")]
    shards = [f.get("shard") for f in fulls if not f.get("reobserves")]
    if any(shards):
        parts = [tuple(int(x) for x in spec.split("/")) if spec else (0, 0) for spec in shards]
        covered = len({n for _, n in parts}) == 1 and sorted(k for k, _ in parts) == list(range(1, parts[0][1] + 1))
    else:
        covered = len(shards) == 1
    ended_all = all(ended({"full": f}) for f in fulls)
    first = {key: next((s[key] for s in states if s.get(key) is not None), None)
             for key in ("gpu", "memory", "real_size")}
    codes = [f"{_label(s)}: {s['code']}" for s in states if s.get("code")]
    return {**first, "code": "; ".join(codes) or None,
            "full": {"calls": [c for f in fulls for c in f["calls"]], "shards": shards,
                     "complete": bool(fulls) and covered and ended_all,
                     "holes": sum(f.get("holes") or 0 for f in fulls),
                     "inferred_rows": sum(f.get("inferred_rows") or 0 for f in fulls)}}


def _label(state: dict) -> str:
    """What a state's calls ran, to name the code that made them: a shard, a reobserve run, the real-size run
    or the memory measurement."""
    full = state.get("full") or {}
    if full.get("reobserves"):
        return "reobserve"
    if full.get("calls"):
        return f"shard {full['shard']}" if full.get("shard") else "full run"
    return "real size" if state.get("real_size") else "memory"


def report(args) -> None:
    state = gather([_state(path) for path in args.state])
    calls = state["full"]["calls"]
    wall = sum(c["wall_s"] for c in calls)
    variants = sum(c["variants_run"] for c in calls)
    phases: dict[str, float] = {}
    for call in calls:
        for name, value in call["phases"].items():
            phases[name] = round(phases.get(name, 0.0) + value, 1)
    busy = [(c["gpu_busy_fraction"], c["execution_wall_s"]) for c in calls if c["gpu_busy_fraction"] is not None]
    weight = sum(w for _, w in busy)
    complete = state["full"]["complete"]
    full = state["full"]

    def total(key: str) -> int | None:  # None where a call of an older state lacks the figure
        return sum(c[key] for c in calls) if all(key in c for c in calls) else None

    events = {"inferred_rows": full.get("inferred_rows"),
              **{key: total(key) for key in ("restarts", "hangs", "crashes", "replays")}}
    out = {
        "gpu": state.get("gpu"),
        "code": state.get("code"),  # which oracleaudit made the calls, when the state says
        # The whole bundled dataset's figures exist only once it has run to the end; until then the calls made
        # so far are reported as a partial run (`partial`), with the pairs it has not reached.
        "bundled_full_wall_s": round(wall, 1) if complete else None,
        "bundled_full_complete": complete,
        "shards": full["shards"],  # the shard of each state gathered (None: an unsharded run)
        "holes": full.get("holes") if complete else None,
        "variants": variants if complete else None,
        "variants_per_min": round(variants / (wall / 60), 1) if complete and wall else None,
        "phases": phases if complete else None,
        "gpu_busy_fraction": round(sum(b * w for b, w in busy) / weight, 3) if complete and weight else None,
        "events": events if complete else None,  # worker restarts, hangs, crashes, replayed pairs, inferred rows
        "partial": None if complete or not calls else {
            "wall_s": round(wall, 1), "calls": len(calls), "cold_build_cache": calls[0].get("cold_cache", False),
            "variants": variants, "pairs": sum(c["pairs_run"] for c in calls),
            "variants_per_min": round(variants / (wall / 60), 1) if wall else None, "phases": phases,
            "gpu_busy_fraction": round(sum(b * w for b, w in busy) / weight, 3) if weight else None,
            "pairs_not_yet_run": full.get("holes"),  # in the shards gathered (a shard not started counts none)
            **events,
            "errors": [e for c in calls for e in c["errors"]]},
        "peak_gpu_mem_ratio_60_vs_10_inputs": (state.get("memory") or {}).get("ratio_60_vs_10"),
        "memory": state.get("memory"),
        "real_size": state.get("real_size"),
        "calls": calls,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: out[k] for k in ("bundled_full_wall_s", "variants", "variants_per_min", "gpu_busy_fraction",
                                          "holes", "partial", "peak_gpu_mem_ratio_60_vs_10_inputs")}, indent=1))


CHUNK_BYTES = 15 << 20  # the pieces a shipped tar is cut into (a call brings back files of at most 16 MiB)


def ended(state: dict) -> bool:
    """Whether the full run of this state (one shard's, or an unsharded one) has ended with every pair recorded."""
    full = state.get("full") or {}
    return bool(full.get("calls")) and not full["calls"][-1]["stopped"] and full.get("holes") == 0


def ship(args) -> None:
    """The store and its state as a tar cut into pieces of CHUNK_BYTES in --out (NAME.tar.aa, .ab, ...), the
    store packed as the folder STORE-packed: read-only, and a third of the bytes of the store compacted (shard 1
    of the bundled run: 9.2 against 25 MB). Packed with packed.FAST_CODEC: with the smallest codec, shipping shard 2
    took 50-56 s of each call's end on the H200; this one packs it 11× faster for 6% more bytes (bench/ship_codec.py;
    what the repository keeps is packed again with the smallest: kill_matrix/bundle.py). A run that has not ended
    goes on from it merged into a plain store (`oracleaudit merge --into STORE STORE-packed`: the same rows).
    Members are named by the paths as given (relative ones unpack where they were)."""
    import io
    import tarfile

    from oracleaudit.packed import FAST_CODEC
    from oracleaudit.store import EvidenceStore

    store = EvidenceStore(args.store).open()
    folder = args.store.with_name(args.store.name + "-packed")
    shutil.rmtree(folder, ignore_errors=True)
    store.pack(folder, codec=FAST_CODEC)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=str(folder))
        tar.add(args.state, arcname=str(args.state))
    data = buffer.getvalue()
    args.out.mkdir(parents=True, exist_ok=True)
    for index, start in enumerate(range(0, len(data), CHUNK_BYTES)):
        suffix = chr(ord("a") + index // 26) + chr(ord("a") + index % 26)
        (args.out / f"{args.name}.tar.{suffix}").write_bytes(data[start:start + CHUNK_BYTES])
    print(f"shipped {folder} ({'ended' if ended(_state(args.state)) else 'to go on with'}, "
          f"{len(data) / 2**20:.1f} MiB) as {args.out}/{args.name}.tar.*")


def _gpu() -> str:
    import torch

    return torch.cuda.get_device_name(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    p = sub.add_parser("full")
    p.add_argument("--mutants", type=Path, required=True)
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--stop-after", type=float)
    p.add_argument("--workers-per-gpu", type=int, default=8)
    p.add_argument("--cold", action="store_true", help="record that this first call starts on an empty build cache")
    p.add_argument("--stall-watch", action=argparse.BooleanOptionalAction, default=True,
                   help="as `oracleaudit run --stall-watch` (on by default)")
    p.add_argument("--per-solution", type=int, help="only the first N mutants of each solution (the bundled sample) "
                   "in this call; a later call without it goes on with the rest (its builds are the full units)")
    p.add_argument("--shard", metavar="K/N", help="only shard K of N of the solutions (see `shard`), into its own "
                   "store: the shards' stores merge into the whole run's")
    p.add_argument("--reobserving", action="store_true", help="--mutants is a `reobserve` folder: the state's calls "
                   "count towards the whole run, but it is no shard")
    p.set_defaults(run=full)
    p = sub.add_parser("memory")
    p.add_argument("--state", type=Path, required=True)
    p.set_defaults(run=memory)
    p = sub.add_parser("real")
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--workers-per-gpu", type=int, default=8)
    p.add_argument("--job-size", type=int, default=2)
    p.set_defaults(run=real)
    p = sub.add_parser("reobserve")
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--mutants", type=Path, required=True, help="the mutants folder the store's run read")
    p.add_argument("--pool", default="default")
    p.add_argument("--out", type=Path, required=True, help="the mutants folder to write")
    p.set_defaults(run=reobserve)
    p = sub.add_parser("ship")
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--name", required=True, help="the tar's name in --out")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=ship)
    p = sub.add_parser("report")
    p.add_argument("--state", type=Path, action="append", required=True,
                   help="a state file (repeatable: the shards' states and the real-size run's gather into one report)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "run_scale.json")
    p.set_defaults(run=report)
    args = parser.parse_args()
    started = time.perf_counter()
    args.run(args)
    print(f"run_scale.py {args.part}: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except OracleAuditError as err:  # a bad argument or file: one line
        sys.exit(f"run_scale.py: error: {err}")
    except Exception as err:  # anything else: the traceback above the line
        import traceback

        traceback.print_exc()
        sys.exit(f"run_scale.py: error: {type(err).__name__}: {err}")
