"""The report's contents: what scoring says about each oracle on one audit, gathered once as plain data (the
`--json` output of `oracleaudit report`, and what the figures, pages and mutation-testing-elements files are
drawn from). Every number comes from scoring's public functions; nothing here judges a mutant itself."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import Mutant
from oracleaudit.scoring import Audit, analysis, score
from oracleaudit.scoring.oracle import Oracle

__all__ = ["CONTENTS_SCHEMA_VERSION", "HISTORY", "collect", "default_pairs", "read_minimize", "steps"]

CONTENTS_SCHEMA_VERSION = 1

HISTORY = ("kernelbench-v0.1", "kernelbench", "kernelbench-verified")
"""KernelBench's checker as it changed: the default attribution pairs are its consecutive versions."""

STEPS_PER_ORACLE = 5  # score, tolerance curve, blind band, ceiling, unrefereeable

Advance = Callable[[], None]


def default_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Consecutive versions of KernelBench's checker among the reported oracles (before, after)."""
    present = [n for n in HISTORY if n in names]
    return list(itertools.pairwise(present))


def steps(oracles: int, pairs: int) -> int:
    """The progress steps `collect` reports: its work per oracle, the problem sizes and each attribution."""
    return oracles * STEPS_PER_ORACLE + 1 + pairs


def read_minimize(path: Path) -> dict[str, Any]:
    """The `minimize.json` that `oracleaudit minimize --out` writes, checked for what the report draws: its
    curve of detection by inputs per problem (K), in sample, greedy and held out."""
    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise OracleAuditError(f"{path}: cannot read ({err.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise OracleAuditError(f"{path}: not JSON ({err})") from None
    curve = result.get("curve") if isinstance(result, dict) else None
    if not isinstance(curve, list) or not curve:
        raise OracleAuditError(f"{path}: not a minimize.json (no 'curve' list; write one with "
                               "`oracleaudit minimize --out DIR`)")
    for i, point in enumerate(curve):
        if not isinstance(point, dict) or not isinstance(point.get("budget"), int) or any(
                not isinstance(point.get(k), (int, float, type(None))) for k in ("in_sample", "greedy", "heldout")):
            raise OracleAuditError(f"{path}: curve[{i}] must hold an integer budget and in_sample, greedy, heldout "
                                   "detections (numbers or null)")
    keep = ("base", "base_detection", "budget", "tolerance", "in_sample_detection", "greedy_detection",
            "heldout_detection", "suite_false_alarms", "mutants", "curve")
    return {k: result[k] for k in keep if k in result}


def _mutant_counts(records: Sequence[Mutant]) -> dict[str, int]:
    return dict(sorted(Counter(m.status for m in records).items()))


def _per_oracle(audit: Audit, oracle: Oracle, sizes: dict, top: int, advance: Advance) -> dict[str, Any]:
    result = score(audit, [oracle], by=("family", "problem"), top=top)[0]
    advance()
    curve = analysis.tolerance_curve(audit, oracle)
    advance()
    band = analysis.blind_band(audit, oracle, sizes)
    advance()
    ceiling = analysis.aggressiveness(audit, oracle)
    advance()
    unref = analysis.unrefereeable(audit, oracle)
    advance()
    return {"name": oracle.name, "description": oracle.description,
            "tolerance": oracle.tolerance.lookup("", "float32").atol, "score": result,
            "tolerance_curve": curve, "blind_band": band, "ceiling": ceiling, "unrefereeable": unref}


def _problem_rows(audit: Audit, per_oracle: list[dict[str, Any]], sizes: dict) -> list[dict[str, Any]]:
    """One row per problem: its mutants, witnessed mutants, reduction size and, per oracle, killed of
    observed witnessed mutants, whether its original is rejected and whether its reference is unrefereeable."""
    levels = audit.mutants.drop_duplicates("problem").set_index("problem")["level"]
    rows = []
    problems = sorted({p for o in per_oracle for p in o["score"]["by_problem"]})
    for problem in problems:
        first = per_oracle[0]["score"]["by_problem"].get(problem, {})
        size = sizes.get(problem)
        row = {"problem": problem, "level": None if levels.get(problem) is None else int(levels[problem]),
               "mutants": first.get("mutants", 0), "witnessed": first.get("witnessed", 0),
               "reduction_size": size[0] if size else None, "oracles": {}}
        for o in per_oracle:
            group = o["score"]["by_problem"].get(problem, {})
            row["oracles"][o["name"]] = {
                "killed": group.get("killed", 0),
                "observed": group.get("witnessed", 0) - group.get("unobserved", 0),
                "detection": group.get("detection"),
                "false_alarm": problem in o["score"]["false_alarm_problems"],
                "unrefereeable": any(p["problem"] == problem for p in o["unrefereeable"]["problems"])}
        rows.append(row)
    return rows


def collect(audit: Audit, oracles: Sequence[Oracle], records: Sequence[Mutant], *, evidence: str,
            pairs: Sequence[tuple[Oracle, Oracle]] = (), minimize: dict[str, Any] | None = None, top: int = 5,
            advance: Advance = lambda: None) -> dict[str, Any]:
    """The report's contents for `oracles` on `audit` (`records`: every line of its mutants.jsonl). Escaped
    mutants' diffs are kept once, in `diffs`, however many oracles let them escape."""
    if not oracles:
        raise OracleAuditError("the report needs at least one oracle")
    sizes = analysis.problem_sizes(audit)
    advance()
    per_oracle = [_per_oracle(audit, oracle, sizes, top, advance) for oracle in oracles]
    diffs: dict[str, str | None] = {}
    for o in per_oracle:
        for e in o["score"]["escaped_top"]:
            diffs[e["mutant_id"]] = e.pop("diff")
    attributions = []
    for before, after in pairs:
        attributions.append(analysis.attribution(audit, before, after))
        advance()
    return {
        "schema_version": CONTENTS_SCHEMA_VERSION,
        "evidence": evidence,
        "mutant_statuses": _mutant_counts(records),
        "scored_mutants": len(audit.mutants),
        "excluded_mutants": dict(audit.excluded),
        "problems": _problem_rows(audit, per_oracle, sizes),
        "sized_problems": len(sizes),
        "families": sorted(audit.mutants["family"].astype(str).unique().tolist()),
        "oracles": per_oracle,
        "attribution": attributions,
        "minimize": minimize,
        "diffs": dict(sorted(diffs.items())),
    }
