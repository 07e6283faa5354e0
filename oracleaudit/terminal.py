"""Terminal output: the `--json` form of every command's result, its human form (tables and summaries, with
rich), and progress bars with counts and an ETA on stderr. Cells are text, never rich markup: code such as
`x[idx]` prints as written."""

from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence


def dumps_json(obj: Any) -> str:
    """`obj` as stable, sorted JSON: the same text for the same result."""
    return json.dumps(obj, indent=2, sort_keys=True)


def print_json(obj: Any) -> None:
    """Print `obj` as stable, sorted JSON on stdout (the --json output mode of every command)."""
    sys.stdout.write(dumps_json(obj) + "\n")


def _console():
    from rich.console import Console

    return Console()


TABLE_FORMATS = ("table", "csv", "markdown")
_table_format = ["table"]


def set_table_format(name: str) -> None:
    """How `table` and `plain_table` print from now on: `table` (aligned for the terminal), `csv`, or
    `markdown` (both never cut a cell, whatever the terminal's width). The CLI sets it from `--format`."""
    if name not in TABLE_FORMATS:
        raise ValueError(f"table format must be one of {', '.join(TABLE_FORMATS)}, got {name!r}")
    _table_format[0] = name


def _cells(rows: list[list[Any]]) -> list[list[str]]:
    return [["" if v is None else str(v) for v in row] for row in rows]


def _print_csv(title: str, columns: list[str], rows: list[list[str]]) -> None:
    import csv

    sys.stdout.write(f"# {title}\n")
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerows([[str(c) for c in columns], *rows])
    sys.stdout.write("\n")


def _markdown_cell(text: str) -> str:
    """Cell text with Markdown's syntax characters escaped, so `x[idx]` or `a*b|c` show as written."""
    return re.sub(r"([\\`*_\[\]<>|#~])", r"\\\1", text).replace("\n", " ")


def _print_markdown(title: str, columns: list[str], rows: list[list[str]]) -> None:
    lines = [f"**{_markdown_cell(title)}**", "",
             "| " + " | ".join(_markdown_cell(str(c)) for c in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_markdown_cell(v) for v in row) + " |" for row in rows]
    sys.stdout.write("\n".join(lines) + "\n\n")


def _print_other_format(title: str, columns: list[str], rows: list[list[Any]]) -> bool:
    """Print in the csv or markdown format when one is set; False in the `table` format."""
    if _table_format[0] == "csv":
        _print_csv(title, columns, _cells(rows))
    elif _table_format[0] == "markdown":
        _print_markdown(title, columns, _cells(rows))
    else:
        return False
    return True


def table(title: str, columns: list[str], rows: list[list[Any]], keep: Sequence[str] = ()) -> None:
    """A table of text cells (never rich markup). On a narrow terminal cells and headers wrap rather than
    being cut, so oracle names stay distinguishable; the columns named in `keep` (ids, file:line:col) are
    never wrapped at all."""
    if _print_other_format(title, columns, rows):
        return
    from rich.table import Table
    from rich.text import Text

    cells = _cells(rows)
    out = Table(title=Text(title))
    for index, column in enumerate(columns):
        if column in keep:
            width = max(len(str(column)), *(len(row[index]) for row in cells)) if cells else len(str(column))
            out.add_column(Text(str(column)), no_wrap=True, min_width=width)
        else:
            out.add_column(Text(str(column)), overflow="fold")
    for row in cells:
        out.add_row(*(Text(v) for v in row))
    _console().print(out)


def plain_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A table of aligned columns that is never truncated (for wide analyses)."""
    if _print_other_format(title, columns, rows):
        return
    widths = [max([len(str(c)), *(len(str(r[i])) for r in rows)]) for i, c in enumerate(columns)]
    print(title)
    for line in [columns, ["-" * w for w in widths], *rows]:
        print("  ".join(str(v).rjust(w) if i else str(v).ljust(w) for i, (v, w) in enumerate(zip(line, widths))))


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True,
                 tallies: Sequence[str] = ()) -> Iterator[Callable[..., None]]:
    """Yield `advance(n=1, tally=None)`; shows a bar with done/total, elapsed and remaining time on stderr
    while work runs, and a count per name of `tallies` (e.g. verified, failed) that `advance` names."""
    counts = {name: 0 for name in tallies}
    if not enabled or total <= 0:
        def silent(n: int = 1, tally: str | None = None) -> None:
            if tally is not None:
                counts[tally] += n
        yield silent
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    shown = [TextColumn(" ".join(f"{{task.fields[{name}]}} {name}" for name in tallies))] if tallies else []
    columns = (TextColumn("{task.description}", style="bold", markup=False), BarColumn(), MofNCompleteColumn(), *shown,
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=False) as progress:
        task = progress.add_task(description, total=total, **counts)

        def advance(n: int = 1, tally: str | None = None) -> None:
            if tally is not None:
                counts[tally] += n
            progress.update(task, advance=n, **counts)

        yield advance


def percent(value: float | None) -> str:
    """A rate as a percentage with one decimal; n/a for none."""
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _detection_cell(group: dict | None) -> str:
    if not group:
        return ""
    observed = group["witnessed"] - group.get("unobserved", 0)
    return f"{percent(group['detection'])} ({group['killed']}/{observed})"


def score_summary(results: list[dict], by: Sequence[str], diff_of: Callable[[str], str | None]) -> None:
    """The score command's human output: the oracles' table, detection by family (and each of `by`), notes
    on stderr, then each oracle's most wrong escaped mutants with the changed lines of their diffs."""
    table(f"Oracles ({results[0]['mutants']} mutants, {results[0]['problems']} problems)",
          ["oracle", "witnessed", "killed", "detection", "escaped", "unobserved", "false alarms"],
          [[r["oracle"], r["witnessed"], r["killed"], percent(r["detection"]), r["escaped"],
            r["unobserved"], r["false_alarms"]] for r in results], keep=("oracle",))
    if any(r["unobserved"] for r in results):
        print("unobserved: witnessed mutants not killed whose rows on some input of the oracle are missing or "
              "inferred (a crash or hang cut their run short); they count neither as caught nor as escaped",
              file=sys.stderr)
    for r in results:
        if r["inexact_verdicts"]:
            print(f"oracleaudit: {r['oracle']}: {r['inexact_verdicts']} verdicts cannot be proven from the "
                  "evidence (see oracles/README.md, \"Where the evidence approximates a checker\")",
                  file=sys.stderr)
    families = sorted({f for r in results for f in r["by_family"]})
    table("Detection by family", ["family", *[r["oracle"] for r in results]],
          [[f, *[_detection_cell(r["by_family"].get(f)) for r in results]] for f in families])
    for name in by:
        if name == "family":
            continue
        keys = sorted({k for r in results for k in r[f"by_{name}"]})
        table(f"Detection by {name}", [name, *[r["oracle"] for r in results]],
              [[k, *[_detection_cell(r[f"by_{name}"].get(k)) for r in results]] for k in keys])
    for r in results:
        if r.get("false_alarms_unrefereeable"):
            print(f"{r['oracle']}: {r['false_alarms_unrefereeable']} of {r['false_alarms']} false alarms are on "
                  "problems whose fp32 reference is unrefereeable (refcheck)")
        if r.get("warning"):
            print(f"oracleaudit: {r['oracle']}: {r['warning']}", file=sys.stderr)
        if r["escaped_top"]:
            print(f"\n{r['oracle']}: {r['escaped']} witnessed mutants escape; the {len(r['escaped_top'])} "
                  "most wrong:")
            for e in r["escaped_top"]:
                error = ("" if e["witness_error"] is None
                         else f"; largest error vs fp64 over its inputs {e['witness_error']:.3g}")
                print(f"  {e['mutant_id']}  {e['problem']}  {e['rule']}  (witness: {e['witness_kind']} on "
                      f"{e['witness_input']}{error})")
                diff = diff_of(e["mutant_id"])
                for line in (diff or "").splitlines()[2:12]:
                    if line.startswith(("+", "-")):
                        print(f"      {line}")


def mutate_summary(summary: dict) -> None:
    """The mutate stage's table: mutants per family and status, then totals and timings."""
    statuses = list(summary["by_status"])
    rows = [[family, *(counts.get(s, 0) for s in statuses), sum(counts.values())]
            for family, counts in summary["by_family"].items()]
    rows.append(["total", *(summary["by_status"][s] for s in statuses), summary["mutants"]])
    table(f"Mutants of {summary['solutions']} solutions", ["family", *statuses, "all"], rows)
    total = summary["mutants"] or 1
    share = {s: 100.0 * summary["by_status"][s] / total for s in statuses}
    console = _console()
    console.print(f"Equivalent {share['Equivalent']:.1f}% · Duplicate {share['Duplicate']:.1f}% · "
                  f"CompileError {share['CompileError']:.1f}% · Pending {share['Pending']:.1f}%")
    timing = f"wall {summary['wall_s']:.1f} s"
    if summary.get("compiled_mutants"):
        timing += (f" · compile {summary['compile_s']:.1f} s for {summary['compiled_mutants']} mutants "
                   f"({summary['per_mutant_compile_ms']:.0f} ms each, amortised)")
    console.print(timing)
    if summary.get("out"):
        console.print(f"written to {summary['out']}", markup=False)


def minimize_summary(r: dict, out: Any) -> None:
    """The minimize command's human output: the suites' detection, the K curve, each family held out, the
    dominator mutants, and where the suite was written (`out`, or None)."""
    table(f"Suites of at most {r['budget']} inputs per problem ({r['mutants']} witnessed mutants, "
          f"{len(r['problems'])} problems, tolerance {r['tolerance']})",
          ["suite", "detection", "false alarms"],
          [["integer program (in sample, scored)", percent(r["in_sample_detection"]), r["suite_false_alarms"]],
           ["greedy (in sample)", percent(r["greedy_detection"]), ""],
           *[[f"held out by {mode}", percent(v), ""] for mode, v in r["heldout_detection"].items()],
           [f"{r['base']} as published", percent(r["base_detection"]), ""]])
    table("Detection by K", ["K", "in sample", "greedy", "held out"],
          [[p["budget"], percent(p["in_sample"]), percent(p["greedy"]), percent(p["heldout"])] for p in r["curve"]])
    for mode, groups in r["heldout_groups"].items():
        if mode == "family":
            table("Each family held out", ["family", "caught", "escaped", "detection"],
                  [[g, t["caught"], t["escaped"], percent(t["detection"])] for g, t in groups.items()])
    sub = r["subsumption"]
    print(f"dominator mutants: {sub['dominators']} (minimal set {sub['minimal_set_size']} of {sub['catchable']} "
          f"catchable); dominator score: " + ", ".join(f"{k} {percent(v)}" for k, v in sub["dominator_score"].items()))
    if r.get("warning"):
        print(f"oracleaudit: {r['warning']}", file=sys.stderr)
    print(f"{r['runtime_s']:.1f} s" + (f"; written to {out} (suite.toml, minimize.json, suite.md)"
                                       if out is not None else "; --out DIR writes the suite"))
