"""Analyses of an audit: the tolerance curve and the blind band, the aggressiveness ceiling of each input
family, unrefereeable problems, patch attribution between two oracles (exact Shapley values over their
differing components), and detection by scale. Each takes an `Audit` (audit.py) and returns plain data."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import DEFAULT_GRID
from oracleaudit.scoring.audit import SEED, Audit, group_rates, rate
from oracleaudit.scoring.oracle import InputSelector, Oracle, Stage
from oracleaudit.scoring.verdicts import FAIL, SKIP, judge_rows
from oracleaudit.status import ORIGINAL, REFERENCE, Status
from oracleaudit.tensors import leaves

__all__ = ["aggressiveness", "attribution", "blind_band", "input_family", "label_false_alarms", "label_unrefereeable",
           "problem_sizes", "reduction_size", "scale", "tolerance_curve", "unrefereeable"]


def _detection(audit: Audit, oracle: Oracle, mask: np.ndarray | None = None) -> tuple[int, int, float | None]:
    """(witnessed, killed, detection) over the witnessed mutants the oracle killed or observed on all its
    inputs (see scoring.audit.group_rates)."""
    v = audit.verdicts(oracle)
    witnessed = audit.witness["witnessed"].to_numpy() & (v.killed | v.complete)
    if mask is not None:
        witnessed = witnessed & mask
    killed = int((witnessed & v.killed).sum())
    w = int(witnessed.sum())
    return w, killed, rate(killed, w)


def tolerance_curve(audit: Audit, oracle: Oracle, tolerances: Sequence[float] = DEFAULT_GRID) -> dict[str, Any]:
    """Detection (overall and per family) and false alarms of the oracle with atol = rtol = t, for each t."""
    tolerances = [float(t) for t in tolerances]
    if not tolerances or any(not (t >= 0) for t in tolerances):
        raise OracleAuditError(f"tolerances must be numbers ≥ 0, got {tolerances!r}")
    families = sorted(audit.mutants["family"].astype(str).unique())
    fam = audit.mutants["family"].astype(str).to_numpy()
    curve = {"oracle": oracle.name, "tolerances": tolerances, "detection": [], "false_alarms": [],
             "by_family": {f: [] for f in families}}
    for t in tolerances:
        variant = oracle.with_tolerance(t)
        curve["detection"].append(_detection(audit, variant)[2])
        curve["false_alarms"].append(int(audit.verdicts(variant).original_rejected.sum()))
        for f in families:
            curve["by_family"][f].append(_detection(audit, variant, fam == f)[2])
    return curve


def reduction_size(input_shapes: Sequence[Sequence[int] | None], output_shape: Sequence[int]) -> tuple[int, str]:
    """(size, basis): the reduced-dimension size of a problem — the product of the dimensions of its largest
    input that its output does not keep (as a multiset) — or, where no dimension disappears, the ratio of
    input to output elements (at least 1)."""
    shapes = [tuple(int(x) for x in s) for s in input_shapes if s is not None and len(s)]
    out = [int(x) for x in output_shape]
    if shapes:
        largest = max(shapes, key=lambda s: (math.prod(s), len(s)))
        remaining = list(out)
        dropped = []
        for dim in largest:
            if dim in remaining:
                remaining.remove(dim)
            else:
                dropped.append(dim)
        if dropped and math.prod(dropped) > 1:
            return int(math.prod(dropped)), "reduced dimensions"
        total_in = sum(math.prod(s) for s in shapes)
        return max(1, round(total_in / max(1, math.prod(out)))), "input/output elements"
    return 1, "unknown"


def problem_sizes(audit: Audit) -> dict[str, tuple[int, str]]:
    """The reduction size of each problem whose file (`problem_file` in mutants.jsonl) can be read: its input
    shapes from `get_inputs()` on the meta device, its output shape from the evidence (official variant)."""
    from oracleaudit.problem import load_problem_module

    f = audit.obs.frame
    originals = f[(f["mutant_id"] == ORIGINAL).to_numpy() & (f["status"] == Status.OK).to_numpy()]
    sizes: dict[str, tuple[int, str]] = {}
    files = audit.mutants.drop_duplicates("problem").set_index("problem")["problem_file"]
    for problem, path in files.items():
        if not isinstance(path, str) or not Path(path).is_file():
            continue
        rows = originals[(originals["problem"] == problem).to_numpy()
                         & (originals["shape_variant"] == "official").to_numpy()]
        if rows.empty:
            continue
        out_shape = _out_shape(audit, int(rows.index[0]))
        try:
            module = load_problem_module(Path(path))
            with torch.random.fork_rng(devices=[]), torch.device("meta"):
                inputs = module.get_inputs()
        except Exception:  # a problem that cannot run on the meta device: no size
            continue
        shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in leaves(inputs)]
        sizes[problem] = reduction_size(shapes, out_shape)
    return sizes


def _out_shape(audit: Audit, row: int) -> tuple[int, ...]:
    return audit.obs.ref_shape(row) or ()


def blind_band(audit: Audit, oracle: Oracle, sizes: Mapping[str, tuple[int, str] | int] | None = None) -> dict[str, Any]:
    """The escaped mutants' errors against reduction size, with the oracle's tolerance line: per escaped
    mutant its reduction size, its error on the oracle's own inputs against the oracle's reference
    (E = max |out − ref| / (1 + |ref|), the largest atol = rtol it needs there), its witness error against
    fp64 and the oracle's tolerance; and per size bucket (powers of 4) the count and error range."""
    v = audit.verdicts(oracle)
    f = audit.obs.frame
    p = "fp64_" if oracle.reference.precision == "fp64" else "fp32_"
    judged = v.rows
    rows = judged["row"].to_numpy()
    ok = (f["status"].to_numpy(dtype=object)[rows] == Status.OK)
    err = pd.DataFrame({"kernel": f["kernel"].to_numpy()[rows][ok], "e": audit.obs.error(p)[rows][ok]})
    worst = err.groupby("kernel")["e"].max()
    if sizes is None:
        sizes = problem_sizes(audit)
    w = audit.witness
    mask = w["witnessed"].to_numpy() & ~v.killed & v.complete
    entries = []
    for i in np.flatnonzero(mask):
        m = audit.mutants.iloc[i]
        size = sizes.get(m["problem"]) if sizes else None
        size_value, basis = (size if isinstance(size, tuple) else (size, "given")) if size is not None else (None, None)
        tol = oracle.tolerance.lookup(m["problem"], "float32")
        e = worst.get(int(m["kernel"]))
        entries.append({"mutant_id": m["mutant_id"], "problem": m["problem"], "family": m["family"],
                        "rule": m["rule"], "reduction_size": size_value, "size_basis": basis,
                        "error": None if e is None or np.isnan(e) else float(e),
                        "witness_error": _none(w.iloc[i]["error"]), "witness_kind": w.iloc[i]["kind"],
                        "tolerance": tol.atol})
    buckets: dict[str, dict[str, Any]] = {}
    for e in entries:
        if e["reduction_size"] is None or e["error"] is None:
            continue
        k = int(math.floor(math.log(max(e["reduction_size"], 1), 4)))
        label = f"{4 ** k}-{4 ** (k + 1) - 1}"
        b = buckets.setdefault(label, {"low": 4 ** k, "errors": []})
        b["errors"].append(e["error"])
    summary = []
    for label, b in sorted(buckets.items(), key=lambda kv: kv[1]["low"]):
        errors = np.array(b["errors"])
        summary.append({"reduction_size": label, "escaped": len(errors), "median_error": float(np.median(errors)),
                        "max_error": float(errors.max())})
    correlation = None
    pairs = [(e["reduction_size"], e["error"]) for e in entries if e["reduction_size"] and e["error"] is not None]
    if len(pairs) >= 3 and len({s for s, _ in pairs}) > 1:
        from scipy.stats import spearmanr

        correlation = float(spearmanr([s for s, _ in pairs], [x for _, x in pairs]).statistic)
    return {"oracle": oracle.name, "tolerance": oracle.tolerance.lookup("", "float32").atol,
            "floor": audit.margin.floor, "escaped": entries, "by_size": summary, "spearman": correlation}


def _none(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def input_family(key: str) -> str:
    """An input's family: its pool key without the seed (`normal/x=1000/official`)."""
    return SEED.sub("", key)


def _everywhere(oracle: Oracle, tolerance: float | None) -> Oracle:
    """The protocol's rule on every input of the store, as one stage (for the originals' false alarms)."""
    base = oracle.with_tolerance(tolerance) if tolerance is not None else oracle
    stage = Stage("everywhere", (InputSelector(pattern="*"),), missing_reference="skip")
    return replace(base, stages=(stage,))


def aggressiveness(audit: Audit, oracle: Oracle, tolerance: float | None = None) -> dict[str, Any]:
    """The aggressiveness ceiling: for each input family of the store, how often the oracle's rule (at
    `tolerance`, default its own) rejects the ORIGINAL kernels — trials rejected, problems rejected."""
    probe = _everywhere(oracle, tolerance)
    f = audit.obs.frame
    originals = np.flatnonzero((f["mutant_id"] == ORIGINAL).to_numpy())
    judged = judge_rows(audit.obs, probe, originals)
    rows = judged["row"].to_numpy()
    trials = pd.DataFrame({"problem": f["problem"].to_numpy(dtype=object)[rows],
                           "input": f["input_id"].to_numpy(dtype=object)[rows],
                           "state": judged["state"].to_numpy()})
    trials = trials.groupby(["problem", "input"], sort=False)["state"].max().reset_index()
    trials = trials[trials["state"] != SKIP]
    trials["family"] = trials["input"].map(input_family)
    trials["rejected"] = trials["state"] == FAIL
    families = []
    for family, part in trials.groupby("family", sort=True):
        rejected = int(part["rejected"].sum())
        families.append({"family": family, "trials": len(part), "rejected": rejected,
                         "rate": round(rejected / len(part), 6),
                         "problems_rejected": sorted(part.loc[part["rejected"], "problem"].unique().tolist())})
    families.sort(key=lambda x: (-x["rate"], x["family"]))
    t = tolerance if tolerance is not None else oracle.tolerance.lookup("", "float32").atol
    return {"oracle": oracle.name, "tolerance": t, "families": families,
            "trials": int(len(trials)), "rejected": int(trials["rejected"].sum())}


def unrefereeable(audit: Audit, oracle: Oracle) -> dict[str, Any]:
    """Problems whose fp32 reference fails the oracle's own rule against the fp64 reference on the oracle's
    own inputs (the reference rows' fp64 evidence). `cause` says whether non-finite values (an fp32 overflow
    or a NaN reference, which no kernel can match) or the error over finite elements made it fail."""
    if oracle.reference.precision == "fp64":
        return {"oracle": oracle.name, "problems": [], "note": "the oracle's reference is the fp64 one"}
    f = audit.obs.frame
    refs = np.flatnonzero((f["mutant_id"] == REFERENCE).to_numpy() & (f["status"] == Status.OK).to_numpy())
    judged = judge_rows(audit.obs, oracle, refs, prefix="fp64_")
    failed = judged[judged["state"] == FAIL]
    problems = []
    if len(failed):
        rows = failed["row"].to_numpy()
        # NaN or Inf in the fp32 reference where fp64 has none (overflow), or NaN in both (NaN never passes)
        nonfinite = sum(f[c].to_numpy(dtype=np.float64, na_value=0.0)[rows]
                        for c in ("fp64_n_nan_out", "fp64_n_nan_ref", "fp64_n_nan_both", "fp64_n_inf_mismatch",
                                  "fp64_n_overflow"))
        scale = np.array([stage.tolerance_scale for stage in oracle.stages])[failed["stage"].to_numpy()]
        frame = pd.DataFrame({"problem": f["problem"].to_numpy(dtype=object)[rows],
                              "input": f["input_id"].to_numpy(dtype=object)[rows],
                              "error": f["fp64_error"].to_numpy()[rows], "nonfinite": nonfinite > 0,
                              "scale": scale})
        for problem, part in frame.groupby("problem", sort=True):
            tol = oracle.tolerance.lookup(problem, "float32")
            problems.append({"problem": problem, "inputs": sorted(part["input"].unique().tolist()),
                             "max_error": float(np.nanmax(part["error"])) if part["error"].notna().any() else None,
                             # the tolerance the failing trials were judged at (their stage's scale applied)
                             "tolerance": float(tol.atol * part["scale"].min()),
                             "cause": "non-finite values" if part["nonfinite"].any() else "error above tolerance"})
    drawn = judged.groupby(f["problem"].to_numpy(dtype=object)[judged["row"].to_numpy()]).size()
    return {"oracle": oracle.name, "problems": problems, "problems_checked": int(len(drawn))}


def label_false_alarms(result: dict[str, Any], refcheck: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A score result with each false-alarm problem labelled by a refcheck results file's verdict on the
    oracle's own fp32 reference (`refcheck`: that oracle's records by problem, read by the refcheck stage):
    `false_alarm_refcheck` {problem: verdict or None} and `false_alarms_unrefereeable`, the false alarms an
    unrefereeable reference explains (no correct kernel can be told from a wrong one there)."""
    labels = {p: (refcheck.get(p) or {}).get("verdict") for p in result["false_alarm_problems"]}
    result["false_alarm_refcheck"] = labels
    result["false_alarms_unrefereeable"] = sum(v == "unrefereeable" for v in labels.values())
    return result


def label_unrefereeable(result: dict[str, Any], refcheck: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """An `unrefereeable` result with each problem's refcheck verdict (`refcheck` as for `label_false_alarms`)
    and `refcheck_only`: the problems the refcheck file finds unrefereeable that the evidence does not show."""
    for p in result["problems"]:
        p["refcheck"] = (refcheck.get(p["problem"]) or {}).get("verdict")
    shown = {p["problem"] for p in result["problems"]}
    result["refcheck_only"] = sorted(p for p, r in refcheck.items() if r.get("verdict") == "unrefereeable"
                                     and p not in shown)
    return result


def attribution(audit: Audit, before: Oracle, after: Oracle) -> dict[str, Any]:
    """Patch attribution: the change in detection (and in false alarms) from `before` to `after`, split over
    the components in which they differ (inputs, tolerance, reference, rules) by exact Shapley values: the
    average, over all orderings of the components, of the change each one makes when it is switched."""
    components = before.differing_components(after)
    if not components:
        raise OracleAuditError(f"oracles {before.name} and {after.name} do not differ in any component")
    values: dict[frozenset, tuple[float, int]] = {}
    for size in range(len(components) + 1):
        for subset in itertools.combinations(components, size):
            hybrid = before.hybrid(after, subset)
            w, k, _ = _detection(audit, hybrid)
            values[frozenset(subset)] = (k / w if w else 0.0, int(audit.verdicts(hybrid).original_rejected.sum()))
    shapley = {c: 0.0 for c in components}
    shapley_fa = {c: 0.0 for c in components}
    orders = list(itertools.permutations(components))
    for order in orders:
        taken: frozenset = frozenset()
        for c in order:
            now = taken | {c}
            shapley[c] += values[now][0] - values[taken][0]
            shapley_fa[c] += values[now][1] - values[taken][1]
            taken = now
    start, end = values[frozenset()], values[frozenset(components)]
    r = lambda x: round(x, 9)  # noqa: E731  (the values are exact fractions; rounding only tidies the output)
    return {
        "from": before.name, "to": after.name, "components": components, "orderings": len(orders),
        "detection": {"from": r(start[0]), "to": r(end[0]), "change": r(end[0] - start[0])},
        "false_alarms": {"from": start[1], "to": end[1], "change": end[1] - start[1]},
        "shapley": {c: r(shapley[c] / len(orders)) for c in components},
        "false_alarm_shapley": {c: r(shapley_fa[c] / len(orders)) for c in components},
        "subsets": [{"components": [c for c in components if c in s], "detection": r(val[0]), "false_alarms": val[1]}
                    for s, val in sorted(values.items(), key=lambda kv: (len(kv[0]), [components.index(c) for c in kv[0]]))],
    }


def _size_bucket(n: float) -> str:
    if not n or np.isnan(n) or n < 1:
        return "unknown"
    k = int(math.floor(math.log10(n)))
    return f"1e{k}-1e{k + 1}"


def scale(audit: Audit, oracle: Oracle, sizes: Mapping[str, tuple[int, str] | int] | None = None) -> dict[str, Any]:
    """Detection by problem level and by size (output elements of the original on official shapes, in
    decades; and reduction size, where `sizes` gives it), to show whether blindness grows with scale."""
    f = audit.obs.frame
    v = audit.verdicts(oracle)
    frame = audit.mutants[["problem", "level"]].copy()
    frame["witnessed"] = audit.witness["witnessed"].to_numpy()
    frame["killed"] = v.killed
    frame["complete"] = v.complete
    frame["level"] = frame["level"].map(lambda x: "unknown" if x is None or pd.isna(x) else f"level{int(x)}")
    orig = f[(f["mutant_id"] == ORIGINAL).to_numpy() & (f["shape_variant"] == "official").to_numpy()
             & f["fp64_comparable"].to_numpy()]
    elements = orig.groupby("problem", observed=True)["fp64_n"].max()
    frame["output_size"] = frame["problem"].map(lambda p: _size_bucket(float(elements.get(p, np.nan))))
    result = {"oracle": oracle.name, "by_level": group_rates(frame, "level"), "by_output_size": group_rates(frame, "output_size")}
    if sizes:
        frame["reduction_size"] = frame["problem"].map(
            lambda p: _size_bucket(float(sizes[p][0] if isinstance(sizes.get(p), tuple) else sizes.get(p) or np.nan)))
        result["by_reduction_size"] = group_rates(frame, "reduction_size")
    return result
