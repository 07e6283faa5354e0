"""`oracleaudit minimize`: its own arguments and the call (commands.py registers it with the evidence
arguments of the scoring commands, and passes how the audit and oracles are loaded)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any, Callable

from oracleaudit.errors import OracleAuditError
from oracleaudit.files import check_output_dir

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The minimization's own arguments."""
    parser.add_argument("--base", default="kernelbench", metavar="NAME|FILE",
                        help="the oracle whose comparison (reference, rule, statuses) the suite keeps "
                             "(default: kernelbench)")
    parser.add_argument("--budget", type=int, default=2, metavar="K", help="inputs per problem (default 2)")
    parser.add_argument("--tolerance", default="auto", metavar="auto|base|VALUE",
                        help="auto: per problem, the tightest value of the evidence's grid that catches the most; "
                             "base: the base oracle's; VALUE: atol = rtol = VALUE (default auto)")
    parser.add_argument("--max-false-alarms", type=int, default=0, metavar="N",
                        help="false alarms allowed per problem, over every seed of the chosen inputs' groups "
                             "(default 0)")
    parser.add_argument("--margin", type=float, default=1.0, metavar="M",
                        help="the original must pass at the tolerance divided by M (≥ 1; default 1): headroom for "
                             "the original's error on other GPUs and libraries")
    parser.add_argument("--holdout", action="append", choices=("random", "family", "rule"), metavar="MODE",
                        help="held-out validation: random, family, rule (repeatable; default all three)")
    parser.add_argument("--folds", type=int, default=5, metavar="F", help="random folds (default 5)")
    parser.add_argument("--weight", default="uniform", choices=("uniform", "family"),
                        help="mutant weights: uniform, or family (every family weighs the same)")
    parser.add_argument("--cost", default="none", choices=("none", "runtime"),
                        help="runtime: among the best suites, the one of least recorded runtime, with no input "
                             "that adds no catch (default none: fewest inputs, topped up to K)")
    parser.add_argument("--curve", type=int, default=5, metavar="N", help="the curve's largest K (default 5)")
    parser.add_argument("--judge", action="append", metavar="NAME|FILE",
                        help="oracles whose dominator score is reported (repeatable; default the catalog)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="processes fitting problems side by side (default 1; the result is the same for any N; "
                             "worth it with many cores and much evidence)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write suite.toml, minimize.json and suite.md here")


def run(args: argparse.Namespace, load_audit: Callable[[argparse.Namespace], Any],
        load_oracles: Callable[[list[str]], list]) -> int:
    """Validate the arguments, load the audit (`load_audit(args)`: the CLI's evidence arguments) and the judges
    (`load_oracles(names)`), minimize, write and print."""
    from oracleaudit import minimization, terminal  # loaded when the command runs, not when the CLI starts
    from oracleaudit.scoring.oracle import Oracle, catalog
    from oracleaudit.terminal import print_json

    if args.curve < 1:
        raise OracleAuditError(f"--curve must be ≥ 1, got {args.curve}")
    if args.out is not None:
        check_output_dir(args.out)
    base = Oracle.load(args.base)
    judges = load_oracles(args.judge or catalog())
    audit = load_audit(args)
    with contextlib.ExitStack() as stack:
        bar: dict = {}

        def progress(done: int, total: int) -> None:
            if "advance" not in bar:
                bar["advance"] = stack.enter_context(terminal.progress_bar("fitting suites (problem passes)", total,
                                                                           enabled=not args.json))
                bar["done"] = 0
            bar["advance"](done - bar["done"])
            bar["done"] = done

        made = minimization.minimize(
            audit, base, budget=args.budget, tolerance=args.tolerance, max_false_alarms=args.max_false_alarms,
            margin=args.margin, holdouts=args.holdout or minimization.HOLDOUTS, folds_count=args.folds,
            weight=args.weight, cost=args.cost, curve=range(1, args.curve + 1), judges=judges, progress=progress,
            jobs=args.jobs)
    r = made.result
    if args.out is not None:
        made.write(args.out)
    if args.json:
        print_json(r)
        return 0
    terminal.minimize_summary(r, args.out)
    return 0
