"""Benchmark (CPU): what each way of observing fewer pairs of faulty variants would save of a run, and what it
would cost the scores, measured on the bundled evidence.

A hung variant costs its slot a deadline and a kill for each input it is observed on after its first hang (the
inputs of the run's cover: one of each oracle at each shape), and every kill of a hung worker slows the other
workers while the driver tears it down; a crashing variant costs a worker restart for each input it crashes
on, and the driver serialises a new worker's CUDA start with those teardowns (bench/results/restart_cost.json).
The run observes a faulty variant on its cover so that every oracle observes it at least once. Each policy
below turns some of the bundled evidence's observed rows of faulty variants into inferred ones (what the run
would not have observed under it), following the order a worker runs a job's inputs in (`plan.input_runs`):

    now          the evidence as it is
    cover-first  after a variant's first crash its remaining cover inputs run before its other inputs: where it
                 then has crashed more than 3 times, its other inputs after the first crash are inferred (the
                 run's crash cap, reached on the cover; today it runs them in run order, crashing on some)
    hung-once    after a variant's first observed Timeout, its other inputs are inferred (cover included)
    crash-cap-K  after a variant's K+1-th observed crash (AcceleratorError or WorkerDied), its other inputs are
                 inferred (cover included; today the cap spares the cover)
    both         hung-once and crash-cap-3
    decided      after a variant's first crash or hang, an input is not run where every catalog oracle that draws
                 it has already seen the variant fail (a crash or Timeout row on an input it draws, in a stage
                 whose fail statuses hold that status): no oracle's verdict can change (the crash cap still
                 applies to the other inputs, as now). The run does this since it was measured here
                 (`execution.ledger`); the evidence was recorded before
    decided-first  decided, and after each crash or hang the variant runs first the inputs that would decide
                 the others soonest (`ledger.deciding_order`; then the rest in run order), as the run does now.
                 It may run inputs the evidence has no observation of (inferred there, after the crash cap or
                 a hang): each is counted as one more crash (it crashed more than 3 times already, or hung),
                 `unrecorded_pairs_run`, and stays unobserved in the scores
    hang-cap-K   decided-first, and after a variant's K-th observed hang its other inputs are inferred (cover
                 included): what capping hangs as crashes are capped would save beyond decided-first

For each: the observed rows it infers, the kills and restarts it saves (an inferred Timeout row is a kill; an
inferred crash row a restart) and an estimate of the slot-seconds (an inferred Timeout row's deadline, the
hung floor plus 10 × the original's time there, plus a restart's startup; an inferred crash row's startup:
--startup-s, the complete run's startup seconds per restart); and per catalog oracle the mutants it kills and
cannot observe on all its inputs (`score`'s unobserved: neither caught nor escaped) and its detection, beside
`now`'s.

    PYTHONPATH=. python bench/fault_policy.py --out bench/results/fault_policy.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "kill_matrix" / "evidence"
MUTANTS = ROOT / "kill_matrix" / "mutants"
CRASHES = ("AcceleratorError", "WorkerDied")
POLICIES = ("now", "cover-first", "hung-once", "crash-cap-1", "crash-cap-3", "both", "decided", "decided-first",
            "hang-cap-1", "hang-cap-2", "hang-cap-3")
MAX_CRASHES = 3  # the run's default (supervisor.MAX_CRASHES)


def run_order(problem_files: dict[str, str], pool_name: str, pool_order: bool = False) -> dict[str, dict[str, int]]:
    """Per problem, each input key's position in the order a worker runs them: the first entry of every group
    of one shape and weight seed, then the rest of each group (`plan.input_runs`); with `pool_order`, its
    position in the pool (a job's `entry_keys`)."""
    from oracleaudit.pool import Pool

    pool = Pool.load(pool_name)
    orders: dict[str, dict[str, int]] = {}
    for problem, path in problem_files.items():
        groups: dict[tuple, list[str]] = {}
        entries = pool.entries_for(ROOT / path)
        for entry in entries:
            groups.setdefault((entry.shape, entry.weight_seed), []).append(entry.key)
        ordered = [keys[0] for keys in groups.values()] + [k for keys in groups.values() for k in keys[1:]]
        orders[problem] = {key: index for index, key in enumerate([e.key for e in entries] if pool_order else ordered)}
    return orders


def inferred_by(policy: str, rows, order: dict[str, dict[str, int]], cover: dict[str, set[str]] | None = None,
                deciders: dict | None = None, pool_order: dict[str, dict[str, int]] | None = None) -> np.ndarray:
    """The store rows (a boolean mask over `rows`, the store's order) a policy infers beyond those inferred
    already: every row of a (variant, input) after the variant's cut-off pair in run order (for cover-first,
    every row of a non-cover input after its first crash, where its crashes on the cover pass the cap)."""
    mask = np.zeros(len(rows), dtype=bool)
    if policy == "now":
        return mask
    if policy == "cover-first":
        return _cover_first(rows, order, cover or {})
    if policy == "decided":
        return _decided(rows, order, deciders or {})
    if policy == "decided-first" or policy.startswith("hang-cap-"):
        return _decided_first(rows, order, deciders or {}, cover or {}, pool_order or order, _hang_cap(policy))[0]
    hung_once = policy in ("hung-once", "both")
    cap = {"crash-cap-1": 1, "crash-cap-3": 3, "both": 3}.get(policy)
    position = np.array([order[p].get(k, -1) for p, k in zip(rows["problem"], rows["input_id"])])
    observed = ~rows["inferred"].to_numpy()
    mutant = ~rows["mutant_id"].isin(["original", "reference"]).to_numpy()
    first_row = rows["output_index"].to_numpy() == 0
    timeout = (rows["status"] == "Timeout").to_numpy()
    crash = rows["error_class"].isin(CRASHES).to_numpy()
    keys = rows["problem"].astype(str) + "\0" + rows["mutant_id"].astype(str)
    cut: dict[str, int] = {}
    candidates = observed & mutant & first_row
    if hung_once:
        for key, pos in zip(keys[candidates & timeout], position[candidates & timeout]):
            cut[key] = min(cut.get(key, pos), pos)
    if cap is not None:
        crashes: dict[str, list[int]] = {}
        for key, pos in zip(keys[candidates & crash], position[candidates & crash]):
            crashes.setdefault(key, []).append(pos)
        for key, positions in crashes.items():
            if len(positions) > cap + 1:
                cut[key] = min(cut.get(key, 1 << 30), sorted(positions)[cap])
    limit = keys.map(cut).fillna(1 << 30).to_numpy()
    return observed & mutant & (position > limit)


def _cover_first(rows, order: dict[str, dict[str, int]], cover: dict[str, set[str]]) -> np.ndarray:
    position = np.array([order[p].get(k, -1) for p, k in zip(rows["problem"], rows["input_id"])])
    covered = np.array([k in cover.get(p, ()) for p, k in zip(rows["problem"], rows["input_id"])])
    observed = ~rows["inferred"].to_numpy()
    mutant = ~rows["mutant_id"].isin(["original", "reference"]).to_numpy()
    crash = rows["error_class"].isin(CRASHES).to_numpy() & (rows["output_index"].to_numpy() == 0) & observed
    keys = (rows["problem"].astype(str) + "\0" + rows["mutant_id"].astype(str)).to_numpy()
    first: dict[str, int] = {}
    for key, pos in zip(keys[crash & mutant], position[crash & mutant]):
        first[key] = min(first.get(key, pos), pos)
    after = position > np.array([first.get(key, 1 << 30) for key in keys])
    cover_crashes: dict[str, int] = {}
    for key in keys[crash & mutant & covered & after]:
        cover_crashes[key] = cover_crashes.get(key, 0) + 1
    capped = np.array([1 + cover_crashes.get(key, 0) > MAX_CRASHES for key in keys])
    return observed & mutant & after & ~covered & capped


def oracle_sets(problem: str, keys, oracles) -> dict[str, tuple[frozenset, dict[str, frozenset]]]:
    """Per input key: the oracles (catalog indices) that draw it on `problem`, and per fault status (RuntimeError,
    Timeout) those that fail a trial with it there: the run's own `scoring.oracle.input_deciders`."""
    from oracleaudit.scoring.oracle import input_deciders

    return {key: (frozenset(draws), {"RuntimeError": frozenset(crash), "Timeout": frozenset(hang)})
            for key, draws, crash, hang in input_deciders(problem, list(keys), oracles)}


def _decided(rows, order: dict[str, dict[str, int]], deciders: dict[str, dict]) -> np.ndarray:
    """Rows of inputs after a variant's first crash or hang whose every drawing oracle failed it already."""
    mask = np.zeros(len(rows), dtype=bool)
    first = (rows["output_index"].to_numpy() == 0) & ~rows["inferred"].to_numpy() \
        & ~rows["mutant_id"].isin(["original", "reference"]).to_numpy()
    crash = rows["error_class"].isin(CRASHES).to_numpy()
    timeout = (rows["status"] == "Timeout").to_numpy()
    frame = rows.loc[first & (crash | timeout), ["problem", "mutant_id"]]
    faulty = set(zip(frame["problem"], frame["mutant_id"]))
    position = np.array([order[p].get(k, -1) for p, k in zip(rows["problem"], rows["input_id"])])
    candidates = np.flatnonzero(first & np.array([(p, m) in faulty for p, m in zip(rows["problem"], rows["mutant_id"])]))
    by_variant: dict[tuple, list[int]] = {}
    for i in candidates:
        by_variant.setdefault((rows["problem"].iat[i], rows["mutant_id"].iat[i]), []).append(i)
    skipped_pairs = set()
    for (problem, mutant), indices in by_variant.items():
        sets = deciders[problem]
        dead: set[int] = set()
        faulted = False
        for i in sorted(indices, key=lambda i: position[i]):
            draws, fails = sets[rows["input_id"].iat[i]]
            if faulted and draws and draws <= dead:
                skipped_pairs.add((problem, mutant, rows["input_id"].iat[i]))
                continue
            if crash[i] or timeout[i]:
                faulted = True
                dead |= fails["Timeout" if timeout[i] else "RuntimeError"]
    if skipped_pairs:
        keys = list(zip(rows["problem"], rows["mutant_id"], rows["input_id"]))
        mask = np.array([k in skipped_pairs for k in keys]) & ~rows["inferred"].to_numpy()
    return mask


def _hang_cap(policy: str) -> int | None:
    """K of a policy hang-cap-K (None for any other)."""
    return int(policy.rsplit("-", 1)[1]) if policy.startswith("hang-cap-") else None


def _decided_first(rows, order: dict[str, dict[str, int]], deciders: dict[str, dict], cover: dict[str, set[str]],
                   pool_order: dict[str, dict[str, int]], hang_cap: int | None = None) -> tuple[np.ndarray, int]:
    """The observed rows the run would not observe with decided inputs left out and each crash or hang followed
    by the deciding order, simulated over each faulty variant's inputs as the supervisor goes through them (the
    crash cap and a hang infer the inputs outside the cover; ties in the deciding order go by pool order, as in
    a job's `entry_keys`); and how many pairs it would run that the evidence holds no observation of."""
    from oracleaudit.execution.ledger import deciding_order
    from oracleaudit.status import Status

    first = (rows["output_index"].to_numpy() == 0) & ~rows["mutant_id"].isin(["original", "reference"]).to_numpy()
    frame = rows.loc[first, ["problem", "mutant_id", "input_id", "status", "error_class", "inferred"]]
    fault = np.where(frame["status"] == "Timeout", Status.TIMEOUT,
                     np.where(frame["error_class"].isin(CRASHES), Status.RUNTIME_ERROR, ""))
    outcome = np.where(frame["inferred"].to_numpy(), None, fault)
    faulty = set(zip(frame["problem"][fault != ""], frame["mutant_id"][fault != ""]))
    by_variant: dict[tuple, dict[str, str | None]] = {}
    for problem, mutant, key, seen in zip(frame["problem"], frame["mutant_id"], frame["input_id"], outcome):
        if (problem, mutant) in faulty:
            by_variant.setdefault((problem, mutant), {})[key] = seen
    not_run: set[tuple] = set()
    unrecorded = 0
    for (problem, mutant), seen in by_variant.items():
        position, sets, covered = order[problem], deciders[problem], cover.get(problem, set())
        pending = sorted(seen, key=lambda key: position.get(key, 1 << 30))
        failed: set[int] = set()
        crashes, hangs = 0, 0
        while pending:
            key = pending.pop(0)
            status = seen[key]
            if status is None:  # inferred in the evidence: counted as one more crash
                unrecorded += 1
                status = Status.RUNTIME_ERROR
            if not status:
                continue
            failed |= sets[key][1][status]
            crashes += status == Status.RUNTIME_ERROR
            hangs += status == Status.TIMEOUT
            hung = hangs > 0
            left = [k for k in pending if not (sets[k][0] and sets[k][0] <= failed)]
            if hang_cap is not None and hangs >= hang_cap:
                left = []
            elif hung or crashes > MAX_CRASHES:
                left = [k for k in left if k in covered]
            not_run.update((problem, mutant, k) for k in pending if k not in left)
            head = deciding_order(left, sets, failed, Status.TIMEOUT if hung else Status.RUNTIME_ERROR, covered,
                                  pool_order[problem])
            pending = [*head, *sorted((k for k in left if k not in head), key=lambda k: position.get(k, 1 << 30))]
    keys = zip(rows["problem"], rows["mutant_id"], rows["input_id"])
    mask = np.array([k in not_run for k in keys]) & ~rows["inferred"].to_numpy()
    return mask, unrecorded


def scores(evidence: Path, mutants: Path, extra: np.ndarray | None, oracles) -> dict[str, dict]:
    """Per oracle: killed, unobserved, detection, with the rows of `extra` (a mask over the store's rows) left
    out as inferred."""
    from oracleaudit.mutant import read_mutants
    from oracleaudit.scoring import Audit
    from oracleaudit.scoring.observations import CORE_COLUMNS, Observations
    from oracleaudit.store import EvidenceStore

    store = EvidenceStore(evidence)
    table = store.read_table(columns=[*CORE_COLUMNS, "inferred"])
    inferred = pc.fill_null(table.column("inferred"), False).combine_chunks().to_numpy(zero_copy_only=False)
    if extra is not None:
        inferred = inferred | extra
    keep = ~inferred
    obs = Observations(table.drop_columns(["inferred"]).filter(keep), store, pc.invert(inferred) if inferred.any()
                       else None, int(inferred.sum()))
    audit = Audit.from_parts(obs, read_mutants(mutants), mutants)
    out = {}
    for oracle in oracles:
        s = audit.score(oracle, top=0)
        out[oracle.name] = {key: s[key] for key in ("killed", "unobserved", "escaped", "detection")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path, default=EVIDENCE)
    parser.add_argument("--mutants", type=Path, default=MUTANTS)
    parser.add_argument("--pool", default="default")
    parser.add_argument("--hung-floor-s", type=float, default=2.0,
                        help="a hung variant's cover floor, seconds (default 2: the run's when fault_policy.json was "
                             "made; 0.5 since 2026-12-06)")
    parser.add_argument("--startup-s", type=float, required=True, help="seconds of startup per worker restart")
    parser.add_argument("--policies", type=lambda t: t.split(","), default=list(POLICIES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    unknown = [p for p in args.policies if p not in POLICIES]
    if unknown:
        parser.error(f"unknown policies {unknown} (known: {', '.join(POLICIES)})")

    from oracleaudit.mutant import read_mutants
    from oracleaudit.scoring.oracle import Oracle, catalog, covering
    from oracleaudit.store import EvidenceStore

    started = time.perf_counter()
    records = read_mutants(args.mutants)
    order = run_order({m.problem: m.problem_file for m in records}, args.pool)
    pool_order = run_order({m.problem: m.problem_file for m in records}, args.pool, pool_order=True)
    rows = EvidenceStore(args.evidence).open().read(columns=["problem", "mutant_id", "input_id", "output_index",
                                                             "status", "error_class", "inferred", "time_ms"])
    rows["inferred"] = rows["inferred"].fillna(False).astype(bool)
    original_ms = rows[(rows["mutant_id"] == "original") & (rows["output_index"] == 0)].set_index(
        ["problem", "input_id"])["time_ms"]
    oracles = [Oracle.load(name) for name in catalog()]
    cover_of = covering()
    cover = {problem: set(cover_of(problem, sorted(keys, key=keys.get))) for problem, keys in order.items()}
    deciders = {problem: oracle_sets(problem, keys, oracles) for problem, keys in order.items()}
    result: dict = {"evidence": str(args.evidence.relative_to(ROOT)) if args.evidence.is_relative_to(ROOT)
                    else str(args.evidence), "rows": len(rows), "startup_s_per_restart": args.startup_s,
                    "hung_floor_s": args.hung_floor_s, "policies": {}}
    base = None
    for policy in args.policies:
        # decided-first and hang-cap-K: the mask and the count of pairs the evidence lacks, from one simulation
        if policy == "decided-first" or policy.startswith("hang-cap-"):
            extra, unrecorded = _decided_first(rows, order, deciders, cover, pool_order, _hang_cap(policy))
        else:
            extra, unrecorded = inferred_by(policy, rows, order, cover, deciders, pool_order), 0
        first = extra & (rows["output_index"].to_numpy() == 0)
        timeouts = first & (rows["status"] == "Timeout").to_numpy()
        crashes = first & rows["error_class"].isin(CRASHES).to_numpy()
        deadline_s = sum(args.hung_floor_s + 10 * original_ms.get((p, k), 0.0) / 1000.0
                         for p, k in zip(rows["problem"][timeouts], rows["input_id"][timeouts]))
        restarts = int(timeouts.sum() + crashes.sum()) - unrecorded
        part = {"pairs_inferred": int(first.sum()), "kills_saved": int(timeouts.sum()), "restarts_saved": restarts,
                "unrecorded_pairs_run": unrecorded, "slot_s_saved": round(deadline_s + restarts * args.startup_s, 1),
                "oracles": scores(args.evidence, args.mutants, extra if extra.any() else None, oracles)}
        if base is None:
            base = part["oracles"]
        part["detection_change_points"] = {
            name: round(100 * ((s["detection"] or 0) - (base[name]["detection"] or 0)), 2)
            for name, s in part["oracles"].items()}
        part["unobserved_added"] = {name: s["unobserved"] - base[name]["unobserved"] for name, s in part["oracles"].items()}
        result["policies"][policy] = part
        print(f"{policy}: {part['pairs_inferred']} pairs inferred, {part['kills_saved']} kills and "
              f"{part['restarts_saved']} restarts saved (~{part['slot_s_saved']} slot-s); detection change "
              f"{min(part['detection_change_points'].values()):+.2f} to {max(part['detection_change_points'].values()):+.2f} "
              f"points, unobserved +{min(part['unobserved_added'].values())} to +{max(part['unobserved_added'].values())}",
              flush=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError, ValueError) as err:
        sys.exit(f"fault_policy.py: error: {err}")
