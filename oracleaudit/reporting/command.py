"""`oracleaudit report`: its arguments, and the one call that reads the audit, gathers the contents, draws
the figures and writes the requested formats into the output folder (see the package docstring)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from oracleaudit.errors import OracleAuditError
from oracleaudit.files import check_output_dir

__all__ = ["FORMATS", "add_arguments", "make_report", "run"]

FORMATS = ("html", "md", "mte")
HTML_FILE, MARKDOWN_FILE, MTE_DIR = "report.html", "report.md", "mte"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The report's own arguments (the evidence arguments are the scoring commands')."""
    parser.add_argument("--oracle", action="append", metavar="NAME|FILE",
                        help="catalog name or protocol file (repeatable; default: the whole catalog)")
    parser.add_argument("--out", type=Path, default=Path("report"), metavar="DIR",
                        help="output folder (default: ./report): report.html, report.md + figures/, mte/<oracle>.json")
    parser.add_argument("--format", default=",".join(FORMATS), metavar="LIST",
                        help="comma-separated formats among html, md, mte (default: all three)")
    parser.add_argument("--minimize", type=Path, metavar="FILE",
                        help="a minimize.json (`oracleaudit minimize --out DIR`): adds the suite-size curve")
    parser.add_argument("--attribution", nargs=2, action="append", metavar=("BEFORE", "AFTER"),
                        help="attribute the change between two oracles (repeatable; default: consecutive "
                             "KernelBench versions among the reported oracles)")
    parser.add_argument("--top", type=int, default=5, metavar="N", help="escaped mutants per oracle (default 5)")


def _formats(text: str) -> list[str]:
    wanted = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in wanted if f not in FORMATS]
    if bad or not wanted:
        raise OracleAuditError(f"--format takes a comma-separated list of {', '.join(FORMATS)}, got {text!r}")
    return [f for f in FORMATS if f in wanted]


def _version() -> str:
    """oracleaudit's installed version (the mutation-testing report's framework version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("oracleaudit")
    except PackageNotFoundError:
        return "unknown"


def _write_bytes(path: Path, data: bytes) -> None:
    from oracleaudit.files import write_with

    write_with(path, lambda tmp: tmp.write_bytes(data))


def _write_figures(folder: Path, images: dict[str, bytes]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.png"):
        if stale.name not in images:
            stale.unlink()
    written = []
    for name, data in images.items():
        _write_bytes(folder / name, data)
        written.append(folder / name)
    return written


def make_report(evidence: Path, mutants: Path, *, oracle_names: list[str], out: Path, formats: list[str],
                evidence_label: str, minimize: Path | None = None, pairs: list[tuple[str, str]] | None = None,
                top: int = 5, show_progress: bool = True) -> dict[str, Any]:
    """Write the report of `oracle_names` on the evidence into `out`; returns the contents, the files written
    and the warnings."""
    from oracleaudit import terminal
    from oracleaudit.files import write_atomic
    from oracleaudit.mutant import read_mutants
    from oracleaudit.reporting import contents, figures, mte, render
    from oracleaudit.reporting.document import document
    from oracleaudit.scoring import Audit
    from oracleaudit.scoring.oracle import Oracle
    from oracleaudit.shipped import shipped_dir

    oracles = [Oracle.load(name) for name in oracle_names]
    if len({o.name for o in oracles}) != len(oracles):
        raise OracleAuditError(f"--oracle names an oracle twice: {', '.join(o.name for o in oracles)}")
    names = [o.name for o in oracles]
    pair_names = pairs if pairs is not None else contents.default_pairs(names)
    loaded = {o.name: o for o in oracles}
    oracle_pairs = [(loaded.get(a) or Oracle.load(a), loaded.get(b) or Oracle.load(b)) for a, b in pair_names]
    summary = contents.read_minimize(minimize) if minimize is not None else None
    audit = Audit.load(evidence, mutants)
    records = read_mutants(Path(mutants))
    total = contents.steps(len(oracles), len(oracle_pairs)) + 1 + ("mte" in formats) * len(oracles)
    written: list[Path] = []
    warnings: list[str] = []
    with terminal.progress_bar("report", total, enabled=show_progress) as advance:
        c = contents.collect(audit, oracles, records, evidence=evidence_label, pairs=oracle_pairs,
                             minimize=summary, top=top, advance=advance)
        out.mkdir(parents=True, exist_ok=True)
        if "html" in formats or "md" in formats:
            drawn = figures.figures(c)
            images = {name: png for name, (png, _) in drawn.items()}
            blocks = document(c)
            if "html" in formats:
                write_atomic(out / HTML_FILE, render.to_html(blocks, images))
                written.append(out / HTML_FILE)
            if "md" in formats:
                write_atomic(out / MARKDOWN_FILE, render.to_markdown(blocks))
                written += [out / MARKDOWN_FILE, *_write_figures(out / render.FIGURES_DIR, images)]
        advance()
        if "mte" in formats:
            roots = [Path.cwd()]
            try:
                roots.append(shipped_dir("datasets").parent)
            except FileNotFoundError:
                pass
            for oracle in oracles:
                report, notes = mte.mte_report(audit, oracle, records, roots, _version(),
                                               {"evidence": evidence_label})
                warnings += [n for n in notes if n not in warnings]
                path = out / MTE_DIR / f"{oracle.name}.json"
                write_atomic(path, json.dumps(report, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
                written.append(path)
                c["oracles"][names.index(oracle.name)]["mte_statuses"] = mte.summary(report)
                advance()
    return {"contents": c, "written": [str(p) for p in written], "warnings": warnings}


def run(args: argparse.Namespace, evidence: Path, mutants: Path) -> int:
    """The `oracleaudit report` handler: checks the arguments, makes the report, prints what it wrote."""
    from oracleaudit import terminal
    from oracleaudit.scoring.oracle import catalog

    if args.top < 0:
        raise OracleAuditError(f"--top must be ≥ 0, got {args.top}")
    formats = _formats(args.format)
    check_output_dir(args.out)  # before any scoring: an unwritable --out fails on one line
    label = "the bundled kill_matrix/" if args.evidence is None else str(args.evidence)
    start = time.perf_counter()
    result = make_report(evidence, mutants, oracle_names=args.oracle or catalog(), out=args.out, formats=formats,
                         evidence_label=label, minimize=args.minimize,
                         pairs=[tuple(p) for p in args.attribution] if args.attribution else None,
                         top=args.top, show_progress=not args.json)
    for line in result["warnings"]:
        print(f"oracleaudit: {line}", file=sys.stderr)
    if args.json:
        terminal.print_json(result)
        return 0
    c = result["contents"]
    terminal.table(f"Report of {len(c['oracles'])} oracles ({c['scored_mutants']} mutants, {len(c['problems'])} "
                   "problems)", ["oracle", "detection", "escaped", "false alarms"],
                   [[o["name"], "n/a" if o["score"]["detection"] is None else f"{100 * o['score']['detection']:.1f}%",
                     o["score"]["escaped"], o["score"]["false_alarms"]] for o in c["oracles"]])
    print(f"{time.perf_counter() - start:.1f} s; written to {args.out}: " + ", ".join(
        str(Path(p).relative_to(args.out)) for p in result["written"] if Path(p).parent == args.out)
        + (f", {sum(Path(p).suffix == '.png' for p in result['written'])} PNGs in figures/" if "md" in formats else "")
        + (f", {len(c['oracles'])} files in {MTE_DIR}/" if "mte" in formats else ""))
    return 0
