"""Benchmark (CPU): the verdicts of every catalog oracle on an evidence store, where rows with a thinned error
hull (more hull vertices than are stored) are told exact or inexact by the hull arrays directly
(`verdicts._exact_where_thinned`) against, side by side in the same run, one ErrorEvidence made per row from the
observation frame and asked `is_exact` (how it was done before: 72k such rows made `minimize` on shards 1 and 2
of the complete bundled run spend 107 of its 185 profiled seconds there).

    PYTHONPATH=. python bench/verdict_cost.py [--evidence DIR --mutants DIR] [--json FILE]

Default: the bundled evidence (kill_matrix/). bench/results/verdict_cost.json is of shards 1 and 2 of the complete
run merged (`oracleaudit merge --into out/all` the stores as bench/results/full_run/README.md says) with their
mutants, bench/data/full_run. Prints, per way, the seconds of all catalog oracles' verdicts
(each computed afresh), the rows told one by one, the ratio, and whether both ways gave the same verdicts (killed,
inexact rows), which they must.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

import oracleaudit.scoring.verdicts as verdict_module
from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import ErrorEvidence
from oracleaudit.scoring import Audit
from oracleaudit.scoring.observations import Observations
from oracleaudit.scoring.oracle import Oracle, catalog
from oracleaudit.shipped import shipped_dir

_COUNTS = ("n", "n_unequal", "n_nan_out", "n_nan_ref", "n_nan_both", "n_inf_mismatch", "n_inf_equal", "n_overflow")


def per_row(obs: Observations, rows: np.ndarray, p: str, atol: np.ndarray, rtol: np.ndarray) -> np.ndarray:
    """The same answers as `_exact_where_thinned`, one ErrorEvidence per row read cell by cell from the frame."""
    f = obs.frame
    r, d, owner = obs.hull[p]
    out = np.zeros(len(rows), dtype=bool)
    for i, row in enumerate(rows.tolist()):
        lo, hi = np.searchsorted(owner, [row, row + 1])
        evidence = ErrorEvidence(
            shape_match=True, dtype_match=True, out_shape=(), ref_shape=(), out_dtype=str(f.at[row, p + "out_dtype"]),
            ref_dtype="", compare_dtype=str(f.at[row, p + "compare_dtype"]),
            **{name: int(f.at[row, p + name]) for name in _COUNTS}, hull_r=r[lo:hi], hull_d=d[lo:hi],
            hull_complete=bool(f.at[row, p + "hull_complete"]), hull_slack=float(f.at[row, p + "hull_slack"]),
            tolerance_grid=obs.grid, n_within=tuple(int(obs.within(p, t)[row]) for t in obs.grid))
        out[i] = evidence.is_exact(float(atol[i]), float(rtol[i]))
    return out


def run(audit: Audit, oracles: list[Oracle], exact_rows) -> tuple[float, int, list]:
    """(seconds, rows told one by one, the verdicts) of every oracle, with `exact_rows` telling thinned rows."""
    told = [0]

    def counting(obs, rows, p, atol, rtol):
        told[0] += len(rows)
        return exact_rows(obs, rows, p, atol, rtol)

    results = []
    with mock.patch.object(verdict_module, "_exact_where_thinned", counting):
        start = time.perf_counter()
        for oracle in oracles:
            broken = frozenset(audit.cast_failures(oracle)[0])
            results.append(verdict_module.verdicts(audit.obs, audit.mutants, oracle, broken))
        seconds = time.perf_counter() - start
    return seconds, told[0], results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path)
    parser.add_argument("--mutants", type=Path)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if (args.evidence is None) != (args.mutants is None):
        sys.exit("verdict_cost.py: error: --evidence and --mutants go together")
    bundle = shipped_dir("kill_matrix")
    audit = Audit.load(args.evidence or bundle / "evidence", args.mutants or bundle / "mutants")
    oracles = [Oracle.load(path) for path in catalog()]
    for oracle in oracles:  # cast probes and lazy columns once, outside the timings
        audit.cast_failures(oracle)
    run(audit, oracles[:1], verdict_module._exact_where_thinned)  # warm-up: the frame's lazy columns
    fast_s, told, fast = run(audit, oracles, verdict_module._exact_where_thinned)
    slow_s, _, slow = run(audit, oracles, per_row)
    same = all(np.array_equal(a.killed, b.killed) and a.inexact == b.inexact
               and a.rows["inexact"].equals(b.rows["inexact"]) for a, b in zip(fast, slow))
    figures = {"evidence": str(args.evidence or "kill_matrix/evidence"), "rows": audit.obs.num_rows,
               "oracles": len(oracles), "thinned_rows_told": told, "hull_arrays_s": round(fast_s, 2),
               "per_row_evidence_s": round(slow_s, 2), "speedup": round(slow_s / fast_s, 2), "same_verdicts": same,
               "cpus": len(os.sched_getaffinity(0))}
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    if not same:
        sys.exit("verdict_cost.py: the two ways gave different verdicts")


if __name__ == "__main__":
    try:
        main()
    except OracleAuditError as err:
        sys.exit(f"verdict_cost.py: error: {err}")
