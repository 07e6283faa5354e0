"""The `oracleaudit refcheck` subcommand: its arguments, the call, and the human table (commands.py
registers it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "refcheck", help="whether each problem's own fp32 reference passes each oracle against fp64",
        description="For each KernelBench problem and each oracle, run the problem's reference Model as the oracle "
                    "runs it (its pool inputs and seeds, its TF32 math mode, fp32) and in fp64 on the same inputs, "
                    "and judge the fp32 reference against the fp64 one with the oracle's own rule: refereeable, "
                    "unrefereeable (with the margin and the tolerance it would need) or fp64-incompatible. One "
                    "process per problem; results are appended to DIR/refcheck.jsonl and a second run skips them.")
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="problem files levelL/{id}_{Name}.py, or problem roots (default: the bundled problems)")
    parser.add_argument("--problems", type=Path, metavar="ROOT",
                        help="a problem root with levelL/{id}_{Name}.py files (e.g. a KernelBench checkout's "
                             "KernelBench/ folder)")
    parser.add_argument("--oracle", action="append", metavar="NAME|FILE",
                        help="catalog name or protocol file; repeatable (default: kernelbench)")
    parser.add_argument("--out", type=Path, default=Path("out/refcheck"), metavar="DIR",
                        help="folder of refcheck.jsonl (default: out/refcheck)")
    parser.add_argument("--pool", default="default", metavar="NAME|FILE",
                        help="input pool the oracles' inputs come from (default: default)")
    parser.add_argument("--device", default="cuda", metavar="cuda|cpu",
                        help="where the references run (default: cuda; on the CPU TF32 modes do not apply)")
    parser.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                        help="limit per problem (default: 1800)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="problems checked at once, each in its own process sharing the device (default: 1; "
                             "more is faster on small problems, but problems that need the GPU's memory alone may "
                             "then fail out of memory)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from oracleaudit.errors import OracleAuditError
    from oracleaudit.refcheck import check_references, find_problems, summary
    from oracleaudit.scoring.oracle import Oracle
    from oracleaudit.terminal import plain_table, print_json, progress_bar

    oracles = [Oracle.load(name) for name in (args.oracle or ["kernelbench"])]
    problems, errors = find_problems(args.paths, args.problems)
    for error in errors:
        print(f"oracleaudit: error: {error}", file=sys.stderr)
    if not problems:
        raise OracleAuditError("no problem to check")
    tallies = ("refereeable", "unrefereeable", "fp64_incompatible", "failed", "skipped")
    with progress_bar("refcheck", len(problems), enabled=not args.json, tallies=tallies) as advance:
        path = check_references(problems, oracles, args.out, device=args.device, pool=args.pool,
                                timeout_s=args.timeout, jobs=args.jobs, progress=advance)
    result = summary(path, problems, oracles, args.device)
    if args.json:
        print_json(result)
        return 0
    names = result["oracles"]
    rows = []
    for p in result["problems"]:
        cells = []
        for name in names:
            r = p["oracles"].get(name)
            if r is None:
                cells.append("")
            elif r["reason"] is not None:
                cells.append(f"{r['verdict']}: {r['reason']}")
            elif r["needed_tolerance"] is None:
                cells.append(f"{r['verdict']} (no tolerance suffices)")
            elif r["margin"] is None:  # an exact comparison (tolerance 0): no ratio to it
                cells.append(f"{r['verdict']} (needs {r['needed_tolerance']:.3g}, own {r['tolerance']:g})")
            else:
                cells.append(f"{r['verdict']} ×{r['margin']:.3g} (needs {r['needed_tolerance']:.3g})")
        rows.append([p["problem"], *cells, f"{p['seconds']:.1f}"])
    plain_table(f"Can each oracle referee the problem's own fp32 reference against fp64? ({args.device}; ×margin = "
                "needed / own tolerance)", ["problem", *names, "seconds"], rows)
    for name in names:
        print(f"{name}: {len(result['unrefereeable'][name])} unrefereeable, {len(result['refereeable'][name])} "
              f"refereeable of {len(result['problems'])} problems")
    print(f"fp64-incompatible: {len(result['fp64_incompatible'])}, failed: {len(result['failed'])}; "
          f"records in {path}")
    return 0
