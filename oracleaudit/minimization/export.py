"""A chosen suite as an oracle file that `oracleaudit score --oracle FILE` loads, and as a Markdown page for
the benchmark's maintainers.

The oracle file is the base oracle's file with its stages replaced by one stage per problem (`problems`
naming it, `inputs` its chosen pool keys) and, when the suite chose tolerances, one `tolerance.per_problem`
table per problem ahead of the base's own (atol = rtol = t for every dtype)."""

from __future__ import annotations

import tomllib
from typing import Any, Sequence

from oracleaudit.errors import OracleAuditError
from oracleaudit.scoring.oracle import Oracle

__all__ = ["suite_markdown", "suite_toml"]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_scalar(v)}" for k, v in value.items()) + " }"
    raise OracleAuditError(f"cannot write {type(value).__name__} to an oracle file")


def _toml(data: dict[str, Any]) -> str:
    """TOML for an oracle file's structure: top-level scalars, tables of scalars or inline tables, and arrays
    of tables (written as [[name]] blocks)."""
    lines, tables, arrays = [], [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            arrays.append((key, value))
        else:
            lines.append(f"{key} = {_scalar(value)}")
    for key, table in tables:
        nested = {k: v for k, v in table.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
        lines += ["", f"[{key}]", *(f"{k} = {_scalar(v)}" for k, v in table.items() if k not in nested)]
        for name, items in nested.items():
            for item in items:
                lines += ["", f"[[{key}.{name}]]", *(f"{k} = {_scalar(v)}" for k, v in item.items())]
    for key, items in arrays:
        for item in items:
            lines += ["", f"[[{key}]]", *(f"{k} = {_scalar(v)}" for k, v in item.items())]
    return "\n".join(lines) + "\n"


def _pattern(label: str) -> str:
    """A glob pattern that matches exactly this problem label."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in label)


def suite_toml(base: Oracle, name: str, description: str, picks: Sequence[tuple[str, list[str], float | None]]) -> str:
    """The oracle file of a suite: `picks` are (problem, chosen input keys, tolerance or None) per problem."""
    if base.path is None:
        raise OracleAuditError(f"oracle {base.name}: a suite is built from an oracle file, this one has none")
    data = tomllib.loads(base.path.read_text(encoding="utf-8"))
    data["name"], data["description"] = name, description
    data["source"] = f"oracleaudit minimize, on {base.name}'s comparison ({base.path.name})"
    tolerance = dict(data.get("tolerance", {}))
    ours = [{"problems": [_pattern(problem)], "default": {"atol": t, "rtol": t}}
            for problem, inputs, t in picks if inputs and t is not None]
    if ours:
        tolerance["per_problem"] = ours + list(tolerance.get("per_problem", []))
    data["tolerance"] = tolerance
    # A cast of the inputs that breaks a problem's reference (KernelBench's float32 labels) fails every kernel
    # whatever the inputs: a defect of the checker, not of its inputs. The suite calls the reference with the
    # problem's own dtypes, as the selection judged it.
    data["reference"] = {k: v for k, v in data.get("reference", {}).items() if k != "cast_inputs"}
    data["stages"] = [{"name": problem, "problems": [_pattern(problem)], "inputs": list(inputs)}
                      for problem, inputs, _ in picks if inputs]
    if not data["stages"]:
        raise OracleAuditError("no problem has an input that catches a witnessed mutant: nothing to export")
    ordered = {k: data[k] for k in ("schema_version", "name", "description", "source", "combine") if k in data}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    return _toml(ordered)


def suite_markdown(result: dict[str, Any]) -> str:
    """The maintainers' page: what to add, with which tolerance, and what to expect."""
    held = ", ".join(f"by {mode} {_pct(v)}" for mode, v in sorted(result["heldout_detection"].items()))
    allowance = result["max_false_alarms"]
    lines = [
        f"# An input suite of at most {result['budget']} inputs per problem",
        "",
        f"Chosen by `oracleaudit minimize` from the evidence of {result['mutants']} witnessed mutants of "
        f"{len(result['problems'])} problems, on {result['base']}'s comparison (tolerance: {result['tolerance']}; "
        f"false alarms allowed per problem over every seed of the chosen inputs: {allowance}).",
        "",
        f"- Expected detection of the witnessed mutants: **{_pct(result['in_sample_detection'])}** in sample "
        f"(a greedy choice: {_pct(result['greedy_detection'])}); on mutants held out of the choice: {held}.",
        f"- {result['base']} as published: {_pct(result['base_detection'])}. False alarms of the suite on the "
        f"original kernels: {result['suite_false_alarms']}.",
        f"- The suite as an oracle file: `{result['oracle_file']}` (`oracleaudit score --oracle "
        f"{result['oracle_file']}` scores it).",
        f"- Headroom: the original passes every chosen input at the tolerance divided by {result['margin']:g}."
        + (" With no headroom a tolerance fits the original's error on the GPU and libraries that made the "
           "evidence; for other machines choose again with `--margin 10`." if result["margin"] == 1 else ""),
        "",
        "| problem | add these inputs | tolerance (atol = rtol) | catches | of witnessed | pool inputs left out "
        "(false alarms) |",
        "|---|---|---|---|---|---|",
    ]
    for p in result["problems"]:
        inputs = "<br>".join(f"`{k}`" for k in p["inputs"]) or "none (no input passes the original)"
        tol = result["base"] if p["tolerance"] is None else f"{p['tolerance']:g}"
        lines.append(f"| {p['problem']} | {inputs} | {tol} | {p['caught']} | {p['witnessed']} | "
                     f"{p['inputs_with_false_alarms']} |")
    lines += ["", "Detection by the number of inputs per problem (in sample, greedy, held out by random folds):",
              "", "| K | in sample | greedy | held out |", "|---|---|---|---|"]
    for point in result["curve"]:
        lines.append(f"| {point['budget']} | {_pct(point['in_sample'])} | {_pct(point['greedy'])} | "
                     f"{_pct(point['heldout'])} |")
    family = result["heldout_groups"].get("family")
    if family:
        lines += ["", "Each family held out (the suite chosen without its mutants, measured on them):", "",
                  "| family | caught | escaped | detection |", "|---|---|---|---|"]
        for name, t in family.items():
            lines.append(f"| {name} | {t['caught']} | {t['escaped']} | {_pct(t['detection'])} |")
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"
