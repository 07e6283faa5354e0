"""Minimization cost on the bundled evidence (or `--evidence`): the whole `minimize --budget 2` (every holdout
mode, the K = 1..5 curve, the dominator scores of the catalog) against the 1-minute target, with its problems
fitted in one process (the default) and in as many as CPUs (`--jobs`), and, side by side in the same run, one
in-sample pass over the problems by the integer program (with its greedy shortcut), by the integer program
solved every time, and by greedy.

    python bench/minimize_cost.py [--repeat 3] [--json FILE] [--evidence DIR --mutants DIR]

Printed: seconds of each, the ratios, and how often the shortcut spared the solver. Run it on the machine the
claim is about (the target is 2 cores); `os.sched_getaffinity` is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from unittest import mock

import numpy as np

from oracleaudit.minimization import minimize, selection, tolerances
from oracleaudit.minimization.kills import kill_relation
from oracleaudit.minimization.suite import choose
from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle, catalog
from oracleaudit.shipped import shipped_dir


def timed(fn, repeat: int) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="take the best of this many runs (default 3)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--evidence", type=Path, help="another store (default: the bundled evidence)")
    parser.add_argument("--mutants", type=Path, help="its mutants folder (with --evidence)")
    args = parser.parse_args()
    if (args.evidence is None) != (args.mutants is None):
        parser.error("--evidence and --mutants go together")

    bundle = shipped_dir("kill_matrix")
    load_s, audit = timed(lambda: Audit.load(args.evidence or bundle / "evidence", args.mutants or bundle / "mutants"),
                          1)
    base = Oracle.load("kernelbench")
    judges = [Oracle.load(name) for name in catalog()]
    cpus = len(os.sched_getaffinity(0))
    whole_s, made = timed(lambda: minimize(audit, base, budget=2, judges=judges), args.repeat)
    spread_s, spread = timed(lambda: minimize(audit, base, budget=2, judges=judges, jobs=cpus), args.repeat)
    stable = [{k: v for k, v in m.result.items() if k != "runtime_s"} for m in (made, spread)]

    relation = kill_relation(audit, base, tolerances("auto"))
    weights = [np.ones(len(k.mutants)) for k in relation]

    def one_pass(method: str) -> list:
        return [choose(k, w, 2, method) for k, w in zip(relation, weights)]

    solves = {"n": 0}
    real_solve = selection._solve

    def counting(*a, **kw):
        solves["n"] += 1
        return real_solve(*a, **kw)

    with mock.patch.object(selection, "_solve", counting):
        ilp_s, ilp = timed(lambda: one_pass("ilp"), args.repeat)
    shortcut_solves = solves["n"] // args.repeat
    real_upper = selection.upper_bound
    # Solved every time: an upper bound no suite reaches makes the shortcut never apply.
    with mock.patch.object(selection, "upper_bound", lambda *a, **kw: real_upper(*a, **kw) + 1e9):
        always_s, always = timed(lambda: one_pass("ilp"), args.repeat)
    greedy_s, _ = timed(lambda: one_pass("greedy"), args.repeat)
    same = all(a.hits(k).sum() == b.hits(k).sum() for k, a, b in zip(relation, ilp, always))

    figures = {
        "cpus": len(os.sched_getaffinity(0)), "machine": platform.processor() or platform.machine(),
        "evidence": str(args.evidence or "kill_matrix/evidence"), "mutants": len(audit.mutants), "repeat": args.repeat,
        "load_s": round(load_s, 2), "minimize_s": round(whole_s, 2), "target_s": 60.0,
        "minimize_in_cpus_processes_s": round(spread_s, 2), "processes_speedup": round(whole_s / spread_s, 2),
        "same_result_in_cpus_processes": stable[0] == stable[1],
        "in_sample_pass_s": {"ilp_with_shortcut": round(ilp_s, 3), "ilp_solved_every_time": round(always_s, 3),
                             "greedy": round(greedy_s, 3)},
        "solver_calls_with_shortcut": shortcut_solves, "problems": len(relation),
        "shortcut_speedup": round(always_s / ilp_s, 2), "ilp_over_greedy_time": round(ilp_s / greedy_s, 2),
        "same_catch_either_way": bool(same),
        "result": {k: made.result[k] for k in ("in_sample_detection", "greedy_detection", "heldout_detection")},
    }
    print(f"{figures['cpus']} CPUs; bundle loaded in {load_s:.2f} s")
    print(f"minimize --budget 2 (all holdouts, curve 1..5, {len(judges)} judges): {whole_s:.1f} s "
          f"(target < 60 s); in {cpus} processes (--jobs {cpus}) {spread_s:.1f} s (×{figures['processes_speedup']}; "
          f"same result: {figures['same_result_in_cpus_processes']})")
    print(f"one in-sample pass, {len(relation)} problems: integer program {ilp_s:.2f} s "
          f"({shortcut_solves} solver calls), solved every time {always_s:.2f} s "
          f"(shortcut ×{figures['shortcut_speedup']}), greedy {greedy_s:.2f} s "
          f"(integer program / greedy ×{figures['ilp_over_greedy_time']}); same catch: {same}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
