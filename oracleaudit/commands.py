"""The subcommands: each one registers its arguments and calls one library function."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oracleaudit.terminal import percent as _pct

REGISTRY: list = []


def add_format_arg(parser: argparse.ArgumentParser) -> None:
    """`--format`: how the command's tables print (the CLI hands it to `terminal.set_table_format`)."""
    from oracleaudit.terminal import TABLE_FORMATS

    parser.add_argument("--format", choices=TABLE_FORMATS, default="table", dest="table_format",
                        help="tables aligned for the terminal (default; wrapped, never cut, when narrow), or as "
                             "csv or markdown")


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
    from oracleaudit.dataset.verify import verify_solutions
    from oracleaudit.files import check_output_dir, check_output_file
    from oracleaudit.terminal import print_json

    if args.out is not None:
        check_output_file(args.out)
    if args.logs is not None:
        check_output_dir(args.logs, "--logs")
    report = verify_solutions(args.paths, problems_root=args.problems, out=args.out, jobs=args.jobs,
                              force=args.force, timeout_s=args.timeout, logs_dir=args.logs)
    if args.json:
        print_json(report.as_json())
    else:
        report.print_summary()
    return 0 if report.all_verified else 1


@command
def register_refcheck(sub: argparse._SubParsersAction) -> None:
    from oracleaudit.refcheck.command import register  # the handler lives in its stage

    add_format_arg(register(sub))


@command
def register_mutate(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "mutate", help="inject compilable faults into CUDA solutions",
        description="Find mutation sites in KernelBench solutions (Python with load_inline CUDA, or .cu files), "
                    "compile-check every mutant with nvcc for sm_90 in batches, mark equivalent and duplicate "
                    "mutants by their machine code (TCE), and write mutants.jsonl plus one diff per mutant.")
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="solution files or directories (default: the bundled dataset)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="output folder (mutants.jsonl, diffs/); required unless --list or --rules")
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
    add_format_arg(parser)
    parser.set_defaults(handler=_run_mutate)


def _run_mutate(args: argparse.Namespace) -> int:
    from oracleaudit import mutation, terminal
    from oracleaudit.errors import OracleAuditError
    from oracleaudit.files import check_output_dir
    from oracleaudit.mutation.catalog import load_catalog
    from oracleaudit.terminal import print_json

    if args.jobs is not None and args.jobs < 1:
        raise OracleAuditError(f"--jobs must be ≥ 1, got {args.jobs}")
    if args.rules:
        families = load_catalog(args.catalog)
        rows = [{"family": f.name, "rule": r.name, "scope": r.scope, "description": r.description}
                for f in families for r in f.rules]
        print_json(rows) if args.json else terminal.table(
            "Mutation rules", ["family", "rule", "scope", "description"], [list(r.values()) for r in rows])
        return 0
    if not args.list and args.out is None:
        raise OracleAuditError("--out DIR is required (or use --list to print candidates)")
    if not args.list:
        check_output_dir(args.out)
    result = mutation.mutate(args.paths or None, None if args.list else args.out, problems=args.problems,
                             families=args.family, rule_names=args.rule,
                             compile_check=not (args.no_compile or args.list), jobs=args.jobs,
                             catalog=args.catalog, show_progress=not args.json)
    for line in result.errors:
        print(f"oracleaudit: {line}", file=sys.stderr)
    for line in result.unpaired:
        print(f"oracleaudit: warning: unpaired: {line}; its mutants get no problem (\"problem\": null), which "
              "`run` refuses", file=sys.stderr)
    if args.paths and args.problems is None and not args.list:
        count = f"{result.solutions} solution" + ("s" if result.solutions != 1 else "")
        print(f"oracleaudit: warning: no --problems ROOT: the mutants of {count} get no "
              "problem (\"problem\": null), which `run` refuses; pass --problems ROOT to pair them", file=sys.stderr)
    done = 1 if result.errors else 0  # some files were bad: partly done (README, "Exit codes")
    if args.list:
        rows = [{"id": m.id, "rule": m.rule, "family": m.family, "location": f"{m.source}:{m.start_line}:{m.start_col}",
                 "original": m.original, "replacement": m.replacement, "scope": m.scope} for m in result.mutants]
        if args.json:
            print_json({"solutions": result.solutions, "candidates": rows, "errors": result.errors})
        else:
            terminal.table(f"{len(rows)} candidate mutants", ["id", "rule", "location", "original", "replacement"],
                           [[r["id"], r["rule"], r["location"], r["original"], r["replacement"]] for r in rows],
                           keep=("id", "location"))
        return done
    summary = result.summary()
    summary["out"] = str(args.out)
    if args.json:
        print_json(summary)
    else:
        terminal.mutate_summary(summary)
    return done


@command
def register_run(sub: argparse._SubParsersAction) -> None:
    from oracleaudit.execution import JOB_SIZE, WORKERS_PER_GPU  # light: torch is imported when it runs
    from oracleaudit.execution.supervisor import MAX_CRASHES, TIMEOUT_FLOOR_S

    parser = sub.add_parser(
        "run", help="run every mutant against the input pool on the GPU and record error evidence",
        description="Build each solution and all its mutants once (one extension, a namespace per variant), run "
                    "them on every input of the pool against fp32 and fp64 references, and append the exact "
                    "error evidence to an evidence store. Interrupt at any time; running again continues.")
    parser.add_argument("--mutants", type=Path, required=True, metavar="DIR", help="folder written by `mutate`")
    parser.add_argument("--out", type=Path, required=True, metavar="EVIDENCE", help="evidence store folder")
    parser.add_argument("--pool", default="default", metavar="NAME|FILE",
                        help="input pool: the name of a shipped pool (one per oracleaudit/data/pools/*.toml, e.g. "
                             "default, the default) or the path of a pool file (format: oracleaudit/pool/__init__.py)")
    parser.add_argument("--gpus", type=int, metavar="N", help="GPUs to use on this machine (default: all)")
    parser.add_argument("--backend", default="local", choices=("local", "dask"), help="local workers or Dask")
    parser.add_argument("--scheduler", metavar="ADDR", help="Dask scheduler address (with --backend dask)")
    parser.add_argument("--timeout-factor", type=float, default=10.0, metavar="F",
                        help="a mutant may take F × the original's time plus a floor (default: 10)")
    parser.add_argument("--timeout-floor", type=float, default=TIMEOUT_FLOOR_S, metavar="SECONDS",
                        help="the floor of a mutant's deadline (default: %(default)s s); a pair past its "
                             "deadline is waited for to twice it, then recorded as Timeout: a hang costs its "
                             "worker that long")
    parser.add_argument("--per-solution", type=int, metavar="N",
                        help="run only the first N Pending mutants of each solution by id (a deterministic sample)")
    parser.add_argument("--workers-per-gpu", type=int, default=WORKERS_PER_GPU, metavar="K",
                        help="at most K worker processes share each GPU, each on its own slice (default: "
                             "%(default)s; more keep the GPU busy while workers do host-side work; fewer run "
                             "where their measured memory would not fit)")
    parser.add_argument("--job-size", type=int, default=JOB_SIZE, metavar="N",
                        help="share a solution's variants among the workers in slices of at most N, fewer as the "
                             "run nears its end (default: %(default)s; each slice runs the original once)")
    parser.add_argument("--max-crashes", type=int, default=MAX_CRASHES, metavar="N",
                        help="a variant that crashes the CUDA context goes on in a fresh worker on its other "
                             "inputs; after N such crashes (default: %(default)s; 0: no limit) its remaining "
                             "inputs are recorded as inferred, which scoring treats as unobserved")
    parser.add_argument("--cover-oracle", action="append", metavar="NAME|FILE", dest="cover",
                        help="observe, even for a variant whose other inputs are inferred (after --max-crashes "
                             "crashes, or a hang), one input of each of these oracles at each shape it draws "
                             "(repeatable; default: every catalog oracle), so that each can judge it; after a "
                             "variant's crash or hang, its inputs whose every drawing oracle among these saw it "
                             "fail already are recorded as inferred (no verdict of theirs can change)")
    parser.add_argument("--no-cover", action="store_true",
                        help="infer every remaining input of such a variant (the fastest; some oracles may then "
                             "not observe it)")
    parser.add_argument("--stop-after", type=float, metavar="SECONDS",
                        help="stop after this long as Ctrl-C would (pairs in flight are dropped) and print the "
                             "summary; running again continues")
    parser.add_argument("--evidence-engine", choices=("torch", "auto", "fused"), default="auto",
                        help="how the evidence is computed: auto (default), the fused CUDA kernels, built "
                             "once with nvcc, where they apply and build, else PyTorch operations; torch: "
                             "PyTorch operations only; fused: the kernels or an error")
    parser.add_argument("--stall-watch", action=argparse.BooleanOptionalAction, default=True,
                        help="measure each GPU's stalls (a probe process times a tiny kernel every 50 ms) and add "
                             "those during a pair to its deadline, so that no pair held up by a GPU standing "
                             "still for every process is recorded as Timeout (on by default); with "
                             "--no-stall-watch a late pair is instead waited for to twice its deadline")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_format_arg(parser)
    parser.set_defaults(handler=_run_run)


def _cover(args: argparse.Namespace):
    """The run's cover: one input of each --cover-oracle (default: each catalog oracle) at each shape;
    None with --no-cover."""
    from oracleaudit.errors import OracleAuditError
    from oracleaudit.scoring.oracle import covering

    if args.no_cover:
        if args.cover:
            raise OracleAuditError("--no-cover and --cover-oracle exclude each other")
        return None
    return covering(args.cover or ())


def _run_run(args: argparse.Namespace) -> int:
    from oracleaudit import execution as runner
    from oracleaudit import terminal
    from oracleaudit.files import check_output_dir
    from oracleaudit.terminal import print_json

    check_output_dir(args.out)
    result = runner.run(args.mutants, args.out, pool=args.pool, gpus=args.gpus, backend=args.backend,
                        scheduler=args.scheduler, timeout_factor=args.timeout_factor,
                        timeout_floor_s=args.timeout_floor, per_solution=args.per_solution, workers_per_gpu=args.workers_per_gpu,
                        job_size=args.job_size, evidence_engine=args.evidence_engine,
                        max_crashes=args.max_crashes, stop_after_s=args.stop_after, show_progress=not args.json,
                        cover=_cover(args), stall_watch=args.stall_watch)
    for line in result.errors:
        print(f"oracleaudit: {line}", file=sys.stderr)
    summary = result.summary()
    if args.json:
        print_json(summary)
    else:
        terminal.table("Observations", ["status", "count"], sorted(summary["observations_by_status"].items()))
        terminal.table("Seconds by phase", ["phase", "seconds"], sorted(summary["phases"].items()))
        busy = summary["gpu_busy_fraction"]
        print(f"{summary['variants_run']} variants on {summary['pairs_run']} (variant, input) pairs "
              f"({summary['inferred_rows']} rows inferred), {summary['pairs_skipped']} pairs already recorded; "
              f"wall {summary['wall_s']} s, {summary['variants_per_min']} variants/min, "
              f"GPU busy {'n/a' if busy is None else f'{busy:.0%}'}, stalled {summary['gpu_stalled_s']} s; "
              f"{summary['restarts']} worker restarts, "
              f"{summary['replays']} pairs replayed after them, {summary['handed_off']} faulty variants handed to "
              "another slot")
    return _exit_code(result.errors, bool(result.pairs or result.skipped))


@command
def register_merge(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "merge", help="merge evidence stores of one run made on separate machines",
        description="Add to the evidence store INTO the observations of each STORE whose keys it lacks (INTO's "
                    "rows win, then the stores' in the order given). The stores must have been made with the "
                    "same input pool. INTO is created when missing. A store that cannot be read is reported "
                    "and skipped; the others are merged.")
    parser.add_argument("stores", type=Path, nargs="+", metavar="STORE", help="evidence store folders to add")
    parser.add_argument("--into", type=Path, required=True, metavar="INTO", help="the evidence store to add to")
    parser.add_argument("--compact", action="store_true",
                        help="rewrite INTO as one Parquet part sorted by key afterwards")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=_run_merge)


def _run_merge(args: argparse.Namespace) -> int:
    from oracleaudit.files import check_output_dir
    from oracleaudit.store import merge_stores
    from oracleaudit.terminal import print_json

    check_output_dir(args.into, "--into")
    summary = merge_stores(args.into, args.stores, compact=args.compact)
    for line in summary["errors"]:
        print(f"oracleaudit: error: {line}", file=sys.stderr)
    if args.json:
        print_json(summary)
    else:
        for store, rows in summary["added"].items():
            print(f"{store}: {rows} rows added")
        if summary["added"]:
            print(f"{summary['into']}: {summary['rows']} rows")
    return _exit_code(summary["errors"], bool(summary["added"]))


def _exit_code(errors: list, done_any: bool) -> int:
    """The rule of README.md, "Exit codes": 0 everything done, 1 partly done (some inputs reported bad, the
    rest processed), 2 nothing done."""
    return 0 if not errors else 1 if done_any else 2


# ---- scoring (stage 3) ---------------------------------------------------------------------------------


def _evidence_paths(args: argparse.Namespace) -> tuple[Path, Path]:
    """--evidence and --mutants; without --evidence, the bundled evidence (kill_matrix/evidence and
    kill_matrix/mutants, described in kill_matrix/README.md)."""
    from oracleaudit.errors import OracleAuditError
    from oracleaudit.shipped import shipped_dir

    if args.evidence is None:
        try:
            bundled = shipped_dir("kill_matrix")
        except FileNotFoundError:
            raise OracleAuditError("this installation has no bundled evidence (kill_matrix/); pass --evidence DIR "
                                   "--mutants DIR") from None
        return bundled / "evidence", args.mutants or bundled / "mutants"
    nested = args.evidence / "evidence"
    if not (args.evidence / "manifest.json").is_file() and (nested / "manifest.json").is_file():
        raise OracleAuditError(f"--evidence {args.evidence}: not an evidence store, but it holds one: "
                               f"--evidence {nested} --mutants {args.evidence / 'mutants'}")
    if args.mutants is None:
        raise OracleAuditError("--mutants DIR is required with --evidence (the folder with mutants.jsonl)")
    return args.evidence, args.mutants


def _refcheck_path(args: argparse.Namespace) -> Path | None:
    """--refcheck; without it, for the bundled evidence, the bundled results (where shipped)."""
    from oracleaudit.refcheck.results import bundled_results

    return args.refcheck if args.refcheck is not None or args.evidence is not None else bundled_results()


def _load_audit(args: argparse.Namespace):
    """The audit of --evidence and --mutants, its warnings (a mismatched mutants file, no diffs/) on stderr."""
    from oracleaudit.scoring import Audit

    evidence, mutants = _evidence_paths(args)
    audit = Audit.load(evidence, mutants)
    for warning in audit.warnings:
        print(f"oracleaudit: warning: {warning}", file=sys.stderr)
    return audit


def _oracles(names: list[str]) -> list:
    from oracleaudit.errors import OracleAuditError
    from oracleaudit.scoring.oracle import Oracle

    oracles = [Oracle.load(name) for name in names]
    seen = [o.name for o in oracles]
    if len(set(seen)) != len(seen):
        raise OracleAuditError(f"--oracle names an oracle twice: {', '.join(seen)}")
    return oracles


def _add_evidence_args(parser: argparse.ArgumentParser, table_format: bool = True) -> None:
    parser.add_argument("--evidence", type=Path, metavar="DIR",
                        help="evidence store written by `oracleaudit run` (default: the bundled kill_matrix/)")
    parser.add_argument("--mutants", type=Path, metavar="DIR", help="folder with the mutants.jsonl of that run")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    if table_format:
        add_format_arg(parser)


@command
def register_score(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "score", help="score oracle protocols against recorded evidence (CPU only)",
        description="Apply oracle protocols to an evidence store: detection of witnessed mutants overall and by "
                    "family, escaped mutants with their diffs, false alarms on the original kernels, and the kill "
                    "matrix (with --out). A mutant is witnessed when some input shows it wrong independently of any "
                    "oracle: it crashes, hangs, returns another shape or dtype, NaN/Inf where the original does not, "
                    "differs between two runs, or errs against fp64 far beyond the original "
                    "(oracleaudit/scoring/witness.py); detection = killed / witnessed.")
    parser.add_argument("--oracle", action="append", required=True, metavar="NAME|FILE",
                        help="catalog name (see `oracleaudit oracles`) or protocol file; repeatable")
    _add_evidence_args(parser)
    parser.add_argument("--by", action="append", choices=("family", "rule", "problem", "level"), default=[],
                        help="also break detection down by this (repeatable)")
    parser.add_argument("--fail-under", type=float, metavar="X",
                        help="exit 1 when an oracle's detection is below X (0–1)")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="escaped mutants to show (default 10)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write kill_matrix.parquet, scores.json and escaped/<oracle>.jsonl here")
    parser.add_argument("--refcheck", type=Path, metavar="FILE",
                        help="label false alarms by a refcheck.jsonl's (or .jsonl.gz's) verdicts (default: the "
                             "bundled one, with the bundled evidence)")
    parser.set_defaults(handler=_run_score)


def _run_score(args: argparse.Namespace) -> int:
    from oracleaudit import scoring, terminal
    from oracleaudit.errors import OracleAuditError
    from oracleaudit.files import check_output_dir
    from oracleaudit.terminal import print_json

    if args.fail_under is not None and not 0 <= args.fail_under <= 1:
        raise OracleAuditError(f"--fail-under must be between 0 and 1, got {args.fail_under}")
    if args.top < 0:
        raise OracleAuditError(f"--top must be ≥ 0, got {args.top}")
    if args.out is not None:
        check_output_dir(args.out)
    oracles = _oracles(args.oracle)
    audit = _load_audit(args)
    results = scoring.score(audit, oracles, by=args.by, top=args.top)
    refcheck = _refcheck_path(args)
    if refcheck is not None:
        from oracleaudit.refcheck import read_verdicts
        from oracleaudit.scoring.analysis import label_false_alarms

        verdicts = read_verdicts(refcheck)
        results = [label_false_alarms(r, verdicts.get(r["oracle"], {})) for r in results]
    if args.out is not None:
        scoring.write_outputs(args.out, audit, oracles, results)
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
    else:
        terminal.score_summary(results, args.by, audit.diff)
        if args.out is not None:
            print(f"\nwritten to {args.out}")
    if args.fail_under is not None:
        low = [r["oracle"] for r in results if r["detection"] is None or r["detection"] < args.fail_under]
        if low:
            print(f"oracleaudit: detection below {args.fail_under}: {', '.join(low)}", file=sys.stderr)
            return 1
    return 0


@command
def register_report(sub: argparse._SubParsersAction) -> None:
    from oracleaudit.reporting.command import add_arguments, run  # light: matplotlib loads when it runs

    parser = sub.add_parser(
        "report", help="write an HTML/Markdown report with figures and mutation-testing-elements JSON (CPU only)",
        description="Score oracles on the evidence and write report.html (self-contained), report.md with "
                    "figures/*.png, and mte/<oracle>.json (mutation-testing-elements, schemaVersion 2).")
    _add_evidence_args(parser, table_format=False)  # its --format names the report's files
    add_arguments(parser)
    parser.set_defaults(handler=lambda args: run(args, *_evidence_paths(args)))


# ---- minimization (stage 4) ----------------------------------------------------------------------------


@command
def register_minimize(sub: argparse._SubParsersAction) -> None:
    from oracleaudit.minimization.command import add_arguments, run  # the handler lives in its stage

    parser = sub.add_parser(
        "minimize", help="choose at most K inputs per problem that catch the most mutants (CPU only)",
        description="Per problem, choose at most K pool inputs and a tolerance that reject the most witnessed "
                    "mutants with no more false alarms on the original than allowed: exactly (an integer "
                    "program, HiGHS) and greedily (reported beside it). Validated on held-out mutants (random "
                    "folds, leave-one-family-out, leave-one-rule-out), with the in-sample and held-out curve for "
                    "K = 1..5 and the dominator mutants. With --out: suite.toml (an oracle file `score --oracle` "
                    "loads), minimize.json and suite.md (a page for the benchmark's maintainers).")
    _add_evidence_args(parser)
    add_arguments(parser)
    parser.set_defaults(handler=lambda args: run(args, _load_audit, _oracles))


@command
def register_oracles(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("oracles", help="list the oracle catalog",
                            description="List the shipped oracle protocols (oracles/*.toml), one line each.")
    parser.add_argument("--json", action="store_true", help="print the catalog as JSON")
    parser.set_defaults(handler=_run_oracles)


def _run_oracles(args: argparse.Namespace) -> int:
    from oracleaudit.scoring.oracle import Oracle, catalog
    from oracleaudit.terminal import print_json

    oracles = [Oracle.load(name) for name in catalog()]
    if args.json:
        print_json([o.as_json() for o in oracles])
    else:
        width = max(len(o.name) for o in oracles)
        for o in oracles:
            print(f"{o.name:<{width}}  {o.description}")
    return 0


ANALYSES = ("tolerance-curve", "blind-band", "ceiling", "unrefereeable", "attribution", "scale")


@command
def register_analyze(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "analyze", help="analyses of oracles on recorded evidence (tolerance curve, blind band, ...)",
        description="tolerance-curve: detection vs tolerance per family; blind-band: escaped mutants' error vs "
                    "reduction size against the tolerance; ceiling: false-alarm rate of the originals per input "
                    "family; unrefereeable: problems whose fp32 reference fails the oracle against fp64; "
                    "attribution: Shapley split of the detection change between two oracles (--oracle twice); "
                    "scale: detection by level and size.")
    parser.add_argument("analysis", choices=ANALYSES)
    parser.add_argument("--oracle", action="append", required=True, metavar="NAME|FILE",
                        help="catalog name or protocol file (attribution: give two, before then after)")
    _add_evidence_args(parser)
    parser.add_argument("--tolerance", type=float, metavar="T", action="append",
                        help="tolerance-curve: the tolerances (repeatable; default the evidence grid); "
                             "ceiling: the tolerance (default the oracle's own)")
    parser.add_argument("--refcheck", type=Path, metavar="FILE",
                        help="unrefereeable: add a refcheck.jsonl's (or .jsonl.gz's) verdicts (default: the "
                             "bundled one, with the bundled evidence)")
    parser.set_defaults(handler=_run_analyze)


def _run_analyze(args: argparse.Namespace) -> int:
    from oracleaudit import terminal
    from oracleaudit.errors import OracleAuditError
    from oracleaudit.scoring import analysis
    from oracleaudit.terminal import print_json

    oracles = _oracles(args.oracle)
    wanted = 2 if args.analysis == "attribution" else 1
    if len(oracles) != wanted:
        raise OracleAuditError(f"{args.analysis} needs {'two --oracle flags (before, after)' if wanted == 2 else 'one --oracle'}, "
                               f"got {len(oracles)}")
    if args.tolerance:
        if args.analysis not in ("tolerance-curve", "ceiling"):
            raise OracleAuditError(f"--tolerance applies to tolerance-curve and ceiling, not {args.analysis}")
        bad = [t for t in args.tolerance if not 0 <= t < float("inf")]
        if bad:
            raise OracleAuditError(f"--tolerance must be a finite number ≥ 0, got {bad[0]:g}")
    if args.refcheck is not None and args.analysis != "unrefereeable":
        raise OracleAuditError(f"--refcheck applies to unrefereeable, not {args.analysis}")
    audit = _load_audit(args)
    oracle = oracles[0]
    if args.analysis == "tolerance-curve":
        result = analysis.tolerance_curve(audit, oracle, *([args.tolerance] if args.tolerance else []))
        if not args.json:
            families = list(result["by_family"])
            rows = [[f"{t:g}", _pct(d), str(fa), *[_pct(result["by_family"][f][i]) for f in families]]
                    for i, (t, d, fa) in enumerate(zip(result["tolerances"], result["detection"],
                                                       result["false_alarms"]))]
            terminal.plain_table(f"{oracle.name}: detection of witnessed mutants vs tolerance (atol = rtol)",
                         ["tolerance", "all", "false alarms", *families], rows)
            return 0
        table = None
    elif args.analysis == "blind-band":
        result = analysis.blind_band(audit, oracle)
        table = ("Escaped mutants by reduction size", ["reduction size", "escaped", "median error", "max error"],
                 [[b["reduction_size"], b["escaped"], f"{b['median_error']:.3g}", f"{b['max_error']:.3g}"]
                  for b in result["by_size"]])
    elif args.analysis == "ceiling":
        if args.tolerance and len(args.tolerance) > 1:
            raise OracleAuditError("ceiling takes one --tolerance")
        result = analysis.aggressiveness(audit, oracle, args.tolerance[0] if args.tolerance else None)
        table = (f"Original kernels rejected per input family (tolerance {result['tolerance']:g})",
                 ["input family", "trials", "rejected", "rate"],
                 [[f["family"], f["trials"], f["rejected"], _pct(f["rate"])] for f in result["families"]])
    elif args.analysis == "unrefereeable":
        result = analysis.unrefereeable(audit, oracle)
        refcheck = _refcheck_path(args)
        if refcheck is not None:
            from oracleaudit.refcheck import read_verdicts
            result = analysis.label_unrefereeable(result, read_verdicts(refcheck).get(oracle.name, {}))
        table = ("Problems whose fp32 reference fails the oracle against fp64",
                 ["problem", "cause", "max error (finite)", "tolerance", "inputs", "refcheck"],
                 [[p["problem"], p["cause"], f"{p['max_error']:.3g}" if p["max_error"] is not None else "",
                   f"{p['tolerance']:g}", len(p["inputs"]), p.get("refcheck")] for p in result["problems"]])
    elif args.analysis == "attribution":
        result = analysis.attribution(audit, oracles[0], oracles[1])
        table = (f"Detection change {oracles[0].name} → {oracles[1].name}: {result['detection']['change']:+.4f} "
                 f"(Shapley values over {result['orderings']} orderings)", ["component", "detection", "false alarms"],
                 [[c, f"{result['shapley'][c]:+.4f}", f"{result['false_alarm_shapley'][c]:+.2f}"]
                  for c in result["components"]])
    else:
        result = analysis.scale(audit, oracle)
        table = ("Detection by level and output size", ["group", "witnessed", "killed", "detection"],
                 [[k, g["witnessed"], g["killed"], _pct(g["detection"])]
                  for part in ("by_level", "by_output_size") for k, g in result[part].items()])
    if args.json:
        print_json(result)
    else:
        terminal.table(*table)
    return 0
