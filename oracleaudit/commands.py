"""The subcommands: each one registers its arguments and calls one library function."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REGISTRY: list = []


def command(register):
    """Add a subcommand registration function to the CLI."""
    REGISTRY.append(register)
    return register


@command
def register_verify(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "verify",
        help="verify solutions on the GPU against an fp64 reference and record the result",
        description="Verify solutions (load_inline builds, on a GPU) against an fp64 reference and merge one "
        "record per problem into verification.jsonl.",
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="solution files or folders (default: the problem root's solutions/ folder)")
    parser.add_argument("--problems", type=Path, metavar="ROOT",
                        help="problem root with levelL/{id}_{Name}.py files (default: the bundled dataset)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="records file (default: ROOT/verification.jsonl)")
    parser.add_argument("--jobs", type=int, metavar="N", help="parallel worker processes (default: min(16, CPUs))")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="per-problem limit in seconds, build included (default: 1800)")
    parser.add_argument("--logs", type=Path, metavar="DIR",
                        help="folder for one build/run log per problem (default: a new temporary folder)")
    parser.add_argument("--force", action="store_true", help="re-verify problems already verified unchanged")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=run_verify)


def run_verify(args: argparse.Namespace) -> int:
    from oracleaudit.cli import print_json
    from oracleaudit.verify import verify_solutions

    report = verify_solutions(args.paths, problems_root=args.problems, out=args.out, jobs=args.jobs,
                              force=args.force, timeout_s=args.timeout, logs_dir=args.logs)
    if args.json:
        print_json(report.as_json())
    else:
        report.print_summary()
    return 0 if report.all_verified else 1


@command
def register_mutate(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "mutate", help="inject compilable faults into CUDA solutions",
        description="Find mutation sites in KernelBench solutions (Python with load_inline CUDA, or .cu files), "
                    "compile-check every mutant with nvcc for sm_90 in batches, mark equivalent and duplicate "
                    "mutants by their machine code (TCE), and write mutants.jsonl plus one diff per mutant.")
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="solution files or directories (default: the bundled dataset)")
    parser.add_argument("--out", type=Path, help="output folder (mutants.jsonl, diffs/)")
    parser.add_argument("--problems", type=Path, metavar="ROOT",
                        help="KernelBench problem root (level1/, level2/, ...) to pair solutions with")
    parser.add_argument("--family", action="append", metavar="F", help="only rules of this family (repeatable)")
    parser.add_argument("--rule", action="append", metavar="R", help="only this rule (repeatable)")
    parser.add_argument("--catalog", type=Path, metavar="DIR", help="rule catalog folder (default: the shipped mutators/)")
    parser.add_argument("--no-compile", action="store_true", help="skip the nvcc compile check and TCE")
    parser.add_argument("--list", action="store_true", help="print candidate mutants without compiling")
    parser.add_argument("--rules", action="store_true", help="print the rule catalog and exit")
    parser.add_argument("--jobs", type=int, metavar="N", help="parallel nvcc processes (default: all cores)")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.set_defaults(handler=_run_mutate)


def _run_mutate(args: argparse.Namespace) -> int:
    from oracleaudit import mutation
    from oracleaudit.catalog import load_catalog
    from oracleaudit.cli import print_json
    from oracleaudit.errors import OracleAuditError
    from oracleaudit import report_text

    if args.jobs is not None and args.jobs < 1:
        raise OracleAuditError(f"--jobs must be ≥ 1, got {args.jobs}")
    if args.rules:
        families = load_catalog(args.catalog)
        rows = [{"family": f.name, "rule": r.name, "scope": r.scope, "description": r.description}
                for f in families for r in f.rules]
        print_json(rows) if args.json else report_text.table(
            "Mutation rules", ["family", "rule", "scope", "description"], [list(r.values()) for r in rows])
        return 0
    if not args.list and args.out is None:
        raise OracleAuditError("--out DIR is required (or use --list to print candidates)")
    result = mutation.mutate(args.paths or None, None if args.list else args.out, problems=args.problems,
                             families=args.family, rule_names=args.rule,
                             compile_check=not (args.no_compile or args.list), jobs=args.jobs,
                             catalog=args.catalog, show_progress=not args.json)
    for line in result.errors + [f"unpaired: {u}" for u in result.unpaired]:
        print(f"oracleaudit: {line}", file=sys.stderr)
    if args.list:
        rows = [{"id": m.id, "rule": m.rule, "family": m.family, "location": f"{m.source}:{m.start_line}:{m.start_col}",
                 "original": m.original, "replacement": m.replacement, "scope": m.scope} for m in result.mutants]
        if args.json:
            print_json({"solutions": result.solutions, "candidates": rows, "errors": result.errors})
        else:
            report_text.table(f"{len(rows)} candidate mutants", ["id", "rule", "location", "original", "replacement"],
                              [[r["id"], r["rule"], r["location"], r["original"], r["replacement"]] for r in rows])
        return 0
    summary = result.summary()
    summary["out"] = str(args.out)
    if args.json:
        print_json(summary)
    else:
        report_text.mutate_summary(summary)
    return 0


@command
def register_run(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run", help="run every mutant against the input pool on the GPU and record error evidence",
        description="Build each solution and all its mutants once (one extension, a namespace per variant), run "
                    "them on every input of the pool against fp32 and fp64 references, and append the exact "
                    "error evidence to an evidence store. Interrupt at any time; running again continues.")
    parser.add_argument("--mutants", type=Path, required=True, metavar="DIR", help="folder written by `mutate`")
    parser.add_argument("--out", type=Path, required=True, metavar="EVIDENCE", help="evidence store folder")
    parser.add_argument("--pool", default="default", metavar="NAME|FILE", help="input pool (default: default)")
    parser.add_argument("--gpus", type=int, metavar="N", help="GPUs to use on this machine (default: all)")
    parser.add_argument("--backend", default="local", choices=("local", "dask"), help="local workers or Dask")
    parser.add_argument("--scheduler", metavar="ADDR", help="Dask scheduler address (with --backend dask)")
    parser.add_argument("--timeout-factor", type=float, default=10.0, metavar="F",
                        help="a mutant may take F × the original's time plus a floor (default: 10)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=_run_run)


def _run_run(args: argparse.Namespace) -> int:
    from oracleaudit import report_text, runner
    from oracleaudit.cli import print_json

    result = runner.run(args.mutants, args.out, pool=args.pool, gpus=args.gpus, backend=args.backend,
                        scheduler=args.scheduler, timeout_factor=args.timeout_factor, show_progress=not args.json)
    for line in result.errors:
        print(f"oracleaudit: {line}", file=sys.stderr)
    summary = result.summary()
    if args.json:
        print_json(summary)
    else:
        report_text.table("Observations", ["status", "count"], sorted(summary["observations_by_status"].items()))
        print(f"{summary['variants_run']} variants run, {summary['variants_skipped']} already recorded; "
              f"build {summary['build_s']} s, wall {summary['wall_s']} s")
    return 0 if result.variants or result.skipped or not result.errors else 1
