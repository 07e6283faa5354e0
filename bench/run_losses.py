"""Benchmark (CPU): where the run stage's slot time goes, from the states of device calls and the rows they
recorded. A slot is one worker of one GPU; its wall time is spent in the phases the run reports (the worker's
load, references, execution, evidence, replay and other seconds; startup and hung seconds from the supervisor;
idle seconds from the scheduler: a slot without a slice). The build pool's seconds (build_cpu_s, build_wall_s)
run beside the slots and are left out of the shares.

Printed and written as JSON (--out):
    phases      per phase: slot-seconds, share of all slot-seconds (calls' wall × --slots), ms per pair run;
                variants/min counts a variant in each call that ran some of its pairs, as run_scale.py does
    restarts    worker restarts, and startup seconds per restart (what a spare worker started ahead saves)
    replays     replayed pairs and replay seconds per restart (crash or missed deadline)
    hangs       pairs that missed a deadline, hung seconds per miss; from the rows: the variants with an
                observed Timeout, their observed and inferred Timeout rows, hung seconds per such variant,
                and their share of the variants against their share of slot time
    target      with --target WALL_S PAIRS: the slot-ms per pair a run of PAIRS pairs in WALL_S seconds on as
                many slots may spend, against what the calls spent, split into the pairs' own work (load,
                references, execution, evidence, other) and the losses around them (startup, replay, hung,
                idle, unaccounted): whether ending every loss would reach it, and by what factor the work per
                pair would still have to shrink (the issue's 25 minutes for the bundled run's pairs, say)
Only the calls given are counted: pass the states of calls made by one code (the `code` of each state says
which) to measure that code.

    PYTHONPATH=. python bench/run_losses.py --state bench/results/full_run/scale3.json \\
        --state bench/results/full_run/scale4.json --evidence bench/results/full_run/shard3 \\
        --evidence bench/results/full_run/shard4 --out bench/results/run_losses.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from oracleaudit.status import Status

# The phases of a slot's wall time (run_scale.py's call phases, "_s" dropped); the rest are the build pool's.
SLOT_PHASES = ("startup", "build_load", "load", "references", "execution", "evidence", "replay", "hung", "other",
               "idle")
# The pairs' own work; the other slot phases (and unaccounted slot time) are losses a better schedule could end.
WORK_PHASES = ("build_load", "load", "references", "execution", "evidence", "other")
ROW_COLUMNS = ["problem", "mutant_id", "input_id", "output_index", "status", "inferred"]


def calls_of(states: list[dict]) -> list[dict]:
    """Every call of the full runs in the states, in order (run_scale.gather's list, without its checks of
    whether each run ended)."""
    return [call for state in states for call in (state.get("full") or {}).get("calls", [])]


def timeouts(tables: list[pa.Table]) -> dict[str, int]:
    """From the rows (each row's first output): variants with an observed Timeout, and Timeout rows observed and
    inferred. Variants are (problem, mutant_id); a key found in several tables counts once."""
    hung: set[tuple[str, str]] = set()
    seen: set[tuple[str, str, str]] = set()
    observed = inferred = 0
    all_variants: set[tuple[str, str]] = set()
    for table in tables:
        table = table.filter(pc.equal(table["output_index"], 0))
        rows = table.select(["problem", "mutant_id", "input_id", "status", "inferred"]).to_pylist()
        for row in rows:
            key = (row["problem"], row["mutant_id"], row["input_id"])
            if key in seen:
                continue
            seen.add(key)
            variant = key[:2]
            all_variants.add(variant)
            if row["status"] != Status.TIMEOUT:
                continue
            if row["inferred"]:
                inferred += 1
            else:
                observed += 1
                hung.add(variant)
    variants = len({v for v in all_variants if v[1] != "reference"})
    return {"variants": variants, "hung_variants": len(hung), "observed_timeout_rows": observed,
            "inferred_timeout_rows": inferred}


def losses(states: list[dict], tables: list[pa.Table], slots: int) -> dict:
    calls = calls_of(states)
    if not calls:
        raise ValueError("the states hold no call of a full run")
    wall = sum(c["wall_s"] for c in calls)
    slot_s = wall * slots
    pairs = sum(c["pairs_run"] for c in calls)
    seconds = {name: sum(c["phases"].get(f"{name}_s", 0.0) for c in calls) for name in SLOT_PHASES}

    def total(key: str) -> int:
        return sum(c.get(key) or 0 for c in calls)

    restarts, hangs, crashes, replays = total("restarts"), total("hangs"), total("crashes"), total("replays")
    rows = timeouts(tables) if tables else None

    def per(value: float, count: int) -> float | None:
        return round(value / count, 3) if count else None

    out = {
        "calls": len(calls), "slots": slots, "wall_s": round(wall, 1), "slot_s": round(slot_s, 1), "pairs": pairs,
        "variants_run": total("variants_run"),
        "variants_per_min": round(total("variants_run") / wall * 60, 1) if wall else None,
        "phases": {name: {"s": round(value, 1), "share": round(value / slot_s, 4) if slot_s else None,
                          "ms_per_pair": round(value / pairs * 1000, 2) if pairs else None}
                   for name, value in sorted(seconds.items(), key=lambda item: -item[1])},
        "unaccounted_share": round(1 - sum(seconds.values()) / slot_s, 4) if slot_s else None,
        "restarts": {"count": restarts, "startup_s_per_restart": per(seconds["startup"], restarts)},
        "replays": {"pairs": replays, "crashes": crashes, "replay_s_per_restart": per(seconds["replay"], restarts)},
        "hangs": {"deadline_misses": hangs, "hung_s_per_miss": per(seconds["hung"], hangs)},
    }
    if rows is not None:
        hung_variants = rows["hung_variants"]
        out["hangs"].update(rows)
        out["hangs"]["hung_s_per_hung_variant"] = per(seconds["hung"], hung_variants)
        out["hangs"]["share_of_variants"] = round(hung_variants / rows["variants"], 4) if rows["variants"] else None
        out["hangs"]["share_of_slot_s"] = out["phases"]["hung"]["share"]
    return out


def target(result: dict, wall_s: float, pairs: int) -> dict:
    """`losses`' figures against a run of `pairs` pairs in `wall_s` seconds on the same slots: the slot-ms per
    pair it allows, the calls' slot-ms per pair (work and losses, unaccounted slot time among the losses),
    and how far the work alone is from the allowance."""
    if not (wall_s > 0 and pairs > 0):
        raise ValueError(f"--target needs a wall time and a pair count above 0, got {wall_s} and {pairs}")
    if not result["pairs"]:
        raise ValueError("the calls ran no pair: no slot time per pair to compare")
    allowed = wall_s * result["slots"] / pairs * 1000
    spent = result["slot_s"] / result["pairs"] * 1000
    work = sum(result["phases"][name]["s"] for name in WORK_PHASES) / result["pairs"] * 1000
    return {"wall_s": wall_s, "pairs": pairs, "allowed_ms_per_pair": round(allowed, 2),
            "spent_ms_per_pair": round(spent, 2), "work_ms_per_pair": round(work, 2),
            "losses_ms_per_pair": round(spent - work, 2), "spent_over_allowed": round(spent / allowed, 3),
            "reached_without_losses": work <= allowed, "work_over_allowed": round(work / allowed, 3)}


def _number(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, spec)


def _print(result: dict) -> None:
    rate = _number(result["variants_per_min"], ".1f")
    print(f"{result['calls']} calls, {result['wall_s']} s wall × {result['slots']} slots = {result['slot_s']} "
          f"slot-s; {result['pairs']} pairs, {result['variants_run']} variants ({rate}/min)")
    print(f"{'phase':12s} {'slot-s':>9s} {'share':>7s} {'ms/pair':>8s}")
    for name, value in result["phases"].items():
        print(f"{name:12s} {value['s']:9.1f} {_number(value['share'], '6.1f', 100)}% "
              f"{_number(value['ms_per_pair'], '8.2f')}")
    print(f"unaccounted {_number(result['unaccounted_share'], '.1f', 100)}%")
    r, h, replays = result["restarts"], result["hangs"], result["replays"]
    print(f"restarts {r['count']}: {_number(r['startup_s_per_restart'], '.3f')} s of startup each; replays "
          f"{replays['pairs']} pairs, {_number(replays['replay_s_per_restart'], '.3f')} s per restart")
    line = f"deadline misses {h['deadline_misses']}: {_number(h['hung_s_per_miss'], '.3f')} s hung each"
    if "hung_variants" in h:
        line += (f"; {h['hung_variants']} of {h['variants']} variants hung "
                 f"({_number(h['share_of_variants'], '.2f', 100)}%), {h['observed_timeout_rows']} observed Timeout "
                 f"rows and {h['inferred_timeout_rows']} inferred, "
                 f"{_number(h['hung_s_per_hung_variant'], '.3f')} slot-s each: "
                 f"{_number(h['share_of_slot_s'], '.1f', 100)}% of slot time")
    print(line)
    t = result.get("target")
    if t:
        print(f"target {t['pairs']} pairs in {t['wall_s']:g} s: {t['allowed_ms_per_pair']:.2f} slot-ms per pair "
              f"allowed, {t['spent_ms_per_pair']:.2f} spent ({t['spent_over_allowed']:.2f}×): work "
              f"{t['work_ms_per_pair']:.2f}, losses {t['losses_ms_per_pair']:.2f}; without any loss "
              + ("within it" if t["reached_without_losses"] else
                 f"still {t['work_over_allowed']:.2f}× over: the work per pair must shrink too"))


def main() -> None:
    from oracleaudit.store import EvidenceStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, action="append", required=True, help="a run_scale.py state (repeat)")
    parser.add_argument("--evidence", type=Path, action="append", default=[],
                        help="a store the calls wrote (repeat; plain or packed)")
    parser.add_argument("--slots", type=int, default=8, help="workers per GPU × GPUs of the calls (default 8)")
    parser.add_argument("--target", nargs=2, type=float, metavar=("WALL_S", "PAIRS"),
                        help="a run of PAIRS pairs in WALL_S seconds on these slots: what it allows per pair")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.slots < 1:
        parser.error(f"--slots must be >= 1, got {args.slots}")
    states = [json.loads(path.read_text()) for path in args.state]
    tables = [EvidenceStore(path).open().read_table(columns=ROW_COLUMNS) for path in args.evidence]
    result = losses(states, tables, args.slots)
    if args.target:
        result["target"] = target(result, args.target[0], int(args.target[1]))
    result["states"] = [str(path) for path in args.state]
    result["evidence"] = [str(path) for path in args.evidence]
    result["code"] = [state.get("code") for state in states]
    _print(result)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    from oracleaudit.errors import OracleAuditError

    try:
        main()
    except (OracleAuditError, OSError, ValueError, KeyError) as err:
        sys.exit(f"run_losses.py: error: {err}")
