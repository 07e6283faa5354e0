"""The report as a document: a flat list of blocks (headings, text, tables, figures, code) built from the
contents (contents.py), which render.py writes as HTML and as Markdown. Cells and text are plain strings —
the renderers escape them — and every table states its numbers in full, so the page reads without its
figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

__all__ = ["Block", "Code", "Figure", "Heading", "Table", "Text", "document"]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Figure:
    name: str     # the PNG's file name (figures.py)
    caption: str


@dataclass(frozen=True)
class Code:
    text: str
    anchor: str


Block = Union[Heading, Text, Table, Figure, Code]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def _table(columns: list[str], rows: list[list[Any]]) -> Table:
    return Table(tuple(columns), tuple(tuple("" if v is None else str(v) for v in row) for row in rows))


def _overview(c: dict[str, Any]) -> list[Block]:
    names = [o["name"] for o in c["oracles"]]
    statuses = ", ".join(f"{n} {s}" for s, n in c["mutant_statuses"].items())
    excluded = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in c["excluded_mutants"].items() if v)
    rows = []
    for o in c["oracles"]:
        s = o["score"]
        rows.append([o["name"], s["reference"], f"{o['tolerance']:g}", s["witnessed"], s["killed"],
                     _pct(s["detection"]), s["escaped"], s["unobserved"], s["unwitnessed"],
                     s["unwitnessed_killed"], f"{s['false_alarms']} ({s['false_alarm_trials']}/{s['original_trials']})",
                     s["inexact_verdicts"]])
    return [
        Heading(1, "oracleaudit report", "top"),
        Text(f"Evidence: {c['evidence']}. Mutants listed: {statuses or 'none'}; scored (compiled, not equivalent, "
             f"observed): {c['scored_mutants']}" + (f"; left out: {excluded}" if excluded else "")
             + f". Problems: {len(c['problems'])}. Oracles: {', '.join(names)}."),
        Heading(2, "Oracles", "oracles"),
        Text("Detection is killed / (witnessed − unobserved): a witnessed mutant is one some input shows to be "
             "wrong against the fp64 reference; unobserved ones (rows missing after a crash or hang) count "
             "neither way. Unwitnessed mutants may be equivalent; 'rejected anyway' counts those the oracle "
             "rejects. False alarms: problems whose original kernel the oracle rejects (failed trials / trials). "
             "Equivalent and duplicate mutants (found by their machine code) are not scored."),
        _table(["oracle", "reference", "tolerance", "witnessed", "killed", "detection", "escaped", "unobserved",
                "unwitnessed", "rejected anyway", "false alarms", "inexact verdicts"], rows),
        Figure("detection.png", "Detection of witnessed mutants per oracle, with its false alarms"),
    ]


def _families(c: dict[str, Any]) -> list[Block]:
    rows = []
    for family in c["families"]:
        row = [family]
        for o in c["oracles"]:
            g = o["score"]["by_family"].get(family)
            row.append("" if not g else f"{_pct(g['detection'])} ({g['killed']}/{g['witnessed'] - g['unobserved']})")
        rows.append(row)
    return [Heading(2, "Detection by family", "families"),
            Text("Each cell: detection (killed / observed witnessed mutants of the family)."),
            _table(["family", *[o["name"] for o in c["oracles"]]], rows),
            Figure("families.png", "Detection by mutation family, one bar per oracle")]


def _tolerance(c: dict[str, Any]) -> list[Block]:
    first = c["oracles"][0]["tolerance_curve"]["tolerances"]
    rows = []
    for i, t in enumerate(first):
        rows.append([f"{t:g}", *[f"{_pct(o['tolerance_curve']['detection'][i])} / {o['tolerance_curve']['false_alarms'][i]}"
                                 for o in c["oracles"]]])
    return [Heading(2, "Tolerance curves", "tolerance"),
            Text("Each oracle with its tolerance replaced by atol = rtol = t (everything else as published). "
                 "Each cell: detection / problems whose original is rejected."),
            _table(["t", *[o["name"] for o in c["oracles"]]], rows),
            Figure("tolerance.png", "Detection and false alarms against the tolerance"),
            Figure("tolerance_by_family.png", "Tolerance curve of each mutation family (per-family numbers: --json)")]


def _blind_band(c: dict[str, Any]) -> list[Block]:
    rows = []
    for o in c["oracles"]:
        band = o["blind_band"]
        for b in band["by_size"]:
            rows.append([o["name"], b["reduction_size"], b["escaped"], _num(b["median_error"]), _num(b["max_error"]),
                         "" if band["spearman"] is None else f"{band['spearman']:.2f}"])
    unsized = sum(1 for o in c["oracles"] for e in o["blind_band"]["escaped"] if e["reduction_size"] is None)
    return [Heading(2, "Blind band", "blind-band"),
            Text("Escaped mutants' error on the oracle's own inputs against its reference, "
                 "E = max |out − ref| / (1 + |ref|), by the reduction size of their problem (the product of the "
                 "dimensions its output drops). Escapes below the tolerance line are the band the oracle cannot "
                 "see; escapes above it pass by another part of the protocol (a per-problem or per-stage "
                 "tolerance, a fraction-within rule, a skipped status). Reduction sizes are known for {c['sized_problems']} of {len(c['problems'])} problems"
                 + (f"; {unsized} escaped mutants have none" if unsized else "") + "."),
            _table(["oracle", "reduction size", "escaped", "median E", "max E", "Spearman (size, E)"], rows),
            Figure("blind_band.png", "Escaped mutants' error against reduction size, with the tolerance")]


def _ceiling(c: dict[str, Any]) -> list[Block]:
    families = sorted({f["family"] for o in c["oracles"] for f in o["ceiling"]["families"]})
    cells = {(o["name"], f["family"]): f for o in c["oracles"] for f in o["ceiling"]["families"]}
    rows = []
    for family in families:
        row = [family]
        for o in c["oracles"]:
            f = cells.get((o["name"], family))
            row.append("" if f is None else f"{_pct(f['rate'])} ({f['rejected']}/{f['trials']})")
        rows.append(row)
    totals = ["all", *[f"{o['ceiling']['rejected']}/{o['ceiling']['trials']}" for o in c["oracles"]]]
    return [Heading(2, "Aggressiveness ceiling", "ceiling"),
            Text("Each oracle's rule (its own tolerance) applied to the ORIGINAL kernels on every input family "
                 "of the pool: the share of trials it rejects. An input family on which a correct kernel fails "
                 "cannot be added to that oracle without false alarms."),
            _table(["input family", *[o["name"] for o in c["oracles"]]], [*rows, totals]),
            Figure("ceiling.png", "Original kernels rejected per input family")]


def _unrefereeable(c: dict[str, Any]) -> list[Block]:
    rows = [[o["name"], p["problem"], p["cause"], _num(p["max_error"]), f"{p['tolerance']:g}", len(p["inputs"])]
            for o in c["oracles"] for p in o["unrefereeable"]["problems"]]
    blocks: list[Block] = [Heading(2, "Unrefereeable problems", "unrefereeable"),
                           Text("Problems whose fp32 reference itself fails the oracle's rule against the fp64 "
                                "reference on the oracle's own inputs: no kernel can be judged fairly there.")]
    if rows:
        blocks.append(_table(["oracle", "problem", "cause", "max error (finite)", "tolerance", "inputs"], rows))
    else:
        blocks.append(Text("None for any reported oracle."))
    return blocks


def _attribution(c: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Patch attribution", "attribution"),
                           Text("The change in detection and false alarms from one oracle to the next, split "
                                "over the components in which they differ by exact Shapley values.")]
    if not c["attribution"]:
        return blocks + [Text("No pair of oracles to attribute (give --attribution BEFORE AFTER).")]
    for a in c["attribution"]:
        d, fa = a["detection"], a["false_alarms"]
        blocks.append(Text(f"{a['from']} → {a['to']}: detection {_pct(d['from'])} → {_pct(d['to'])} "
                           f"({100 * d['change']:+.2f} points), false alarms {fa['from']} → {fa['to']}."))
        blocks.append(_table(["component", "detection (points)", "false alarms"],
                             [[k, f"{100 * a['shapley'][k]:+.2f}", f"{a['false_alarm_shapley'][k]:+.2f}"]
                              for k in a["components"]]))
    return blocks


def _minimize(c: dict[str, Any]) -> list[Block]:
    m = c.get("minimize")
    if not m:
        return []
    rows = [[p["budget"], _pct(p.get("in_sample")), _pct(p.get("greedy")), _pct(p.get("heldout"))] for p in m["curve"]]
    return [Heading(2, "Minimized suite", "minimize"),
            Text(f"From minimize.json: base oracle {m.get('base')}, at most {m.get('budget')} inputs per problem, "
                 f"tolerance {m.get('tolerance')}; detection {_pct(m.get('in_sample_detection'))} in sample "
                 f"against {_pct(m.get('base_detection'))} for the base as published."),
            _table(["K", "in sample", "greedy", "held out"], rows),
            Figure("minimize.png", "Minimized suite: detection by inputs per problem")]


def _escaped(c: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Top escaped mutants", "escaped"),
                           Text("Per oracle, the witnessed mutants it lets through, the most wrong first (the "
                                "witness's error against fp64; status witnesses first). Their diffs follow.")]
    for o in c["oracles"]:
        top = o["score"]["escaped_top"]
        blocks.append(Heading(3, f"{o['name']}: {o['score']['escaped']} escaped", f"escaped-{o['name']}"))
        if top:
            blocks.append(_table(["mutant", "problem", "rule", "witness", "input", "error vs fp64"],
                                 [[e["mutant_id"], e["problem"], e["rule"], e["witness_kind"], e["witness_input"],
                                   _num(e["witness_error"])] for e in top]))
    blocks.append(Heading(3, "Diffs", "diffs"))
    for mutant_id, diff in c["diffs"].items():
        blocks.append(Text(f"Mutant {mutant_id}:"))
        blocks.append(Code(diff or f"(no diff file for {mutant_id})", f"diff-{mutant_id}"))
    return blocks


def _problems(c: dict[str, Any]) -> list[Block]:
    rows = []
    for p in c["problems"]:
        row = [p["problem"], p["mutants"], p["witnessed"], p["reduction_size"]]
        for o in c["oracles"]:
            cell = p["oracles"][o["name"]]
            marks = ("  FA" if cell["false_alarm"] else "") + ("  UR" if cell["unrefereeable"] else "")
            row.append(f"{cell['killed']}/{cell['observed']}{marks}")
        rows.append(row)
    return [Heading(2, "Per problem", "problems"),
            Text("Each oracle's cell: killed / observed witnessed mutants; FA: the original kernel is rejected "
                 "(a false alarm); UR: the problem is unrefereeable for that oracle."),
            _table(["problem", "mutants", "witnessed", "reduction size", *[o["name"] for o in c["oracles"]]], rows)]


def document(c: dict[str, Any]) -> list[Block]:
    """The report's blocks, in reading order."""
    return [*_overview(c), *_families(c), *_tolerance(c), *_blind_band(c), *_ceiling(c), *_unrefereeable(c),
            *_attribution(c), *_minimize(c), *_escaped(c), *_problems(c)]
