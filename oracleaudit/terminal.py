"""Terminal output: tables and summaries printed with rich (the human form of each command's result)."""

from __future__ import annotations

from typing import Any


def _console():
    from rich.console import Console

    return Console()


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.table import Table

    out = Table(title=title)
    for column in columns:
        out.add_column(column)
    for row in rows:
        out.add_row(*("" if v is None else str(v) for v in row))
    _console().print(out)


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
