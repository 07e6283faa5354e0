"""Terminal output: the `--json` form of every command's result, its human form (tables and summaries, with
rich), and progress bars with counts and an ETA on stderr. Cells are text, never rich markup: code such as
`x[idx]` prints as written."""

from __future__ import annotations

import json
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


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    out = Table(title=Text(title))
    for column in columns:
        out.add_column(Text(str(column)))
    for row in rows:
        out.add_row(*(Text("" if v is None else str(v)) for v in row))
    _console().print(out)


def plain_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A table of aligned columns that is never truncated (for wide analyses)."""
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(columns)]
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
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), *shown,
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=False) as progress:
        task = progress.add_task(description, total=total, **counts)

        def advance(n: int = 1, tally: str | None = None) -> None:
            if tally is not None:
                counts[tally] += n
            progress.update(task, advance=n, **counts)

        yield advance


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
        console.print(f"written to {summary['out']}")
