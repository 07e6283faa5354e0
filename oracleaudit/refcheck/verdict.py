"""An oracle's verdict on a problem's own fp32 reference, judged against the fp64 truth by scoring's rule
(`scoring.verdicts.judge_rows` on the reference rows' fp64 evidence: the comparison `analyze unrefereeable`
makes on a run's evidence, without a run).

refereeable     the fp32 reference passes every trial the oracle draws, against fp64, at the oracle's own
                tolerance: a correct kernel as accurate as PyTorch's is not rejected for rounding.
unrefereeable   it fails some trial: the check cannot tell a correct kernel from a wrong one within the margin.

`needed_tolerance` is the smallest t with which the protocol (every allclose and fraction-within tolerance
set to atol = rtol = t, the stages' scales applied, as `Oracle.with_tolerance` makes it) passes the
reference on every trial: found by bisection on the judged verdict, to a relative 1e-6 (the verdict is
monotone in t); for a rule that counts elements within a tolerance, the smallest value of the evidence's
tolerance grid. None when no tolerance suffices (non-finite values no tolerance accepts, a metric threshold).
`margin` = needed_tolerance / the oracle's own tolerance for the problem (its float32 table, or its
largest of atol and rtol where they differ): above 1 by how many times the reference misses, below 1 the
share of the tolerance the reference's own rounding uses.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from oracleaudit.scoring.observations import Observations
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.scoring.verdicts import FAIL, judge_rows
from oracleaudit.store import OBSERVATION_SCHEMA

__all__ = ["REFEREEABLE", "UNREFEREEABLE", "judge_reference", "observations"]

REFEREEABLE, UNREFEREEABLE = "refereeable", "unrefereeable"
_PRECISION = 1e-6
_CEILING = 1e6  # tolerances above this are not searched: no tolerance suffices


def observations(rows: list[dict[str, Any]]) -> Observations:
    """The reference rows of one problem in one math mode, as scoring reads an evidence store."""
    return Observations(pa.Table.from_pylist(rows, schema=OBSERVATION_SCHEMA))


def _judged(obs: Observations, oracle: Oracle) -> tuple[np.ndarray, list[str]]:
    """The rows the oracle judges (every stage's draws) and the inputs (pool keys) it fails, sorted."""
    judged = judge_rows(obs, oracle, np.arange(obs.num_rows), prefix="fp64_")
    rows = judged.loc[judged["state"] == FAIL, "row"].to_numpy()
    failing = sorted(set(obs.frame["input_id"].to_numpy(dtype=object)[rows].tolist()))
    return np.unique(judged["row"].to_numpy()), failing


def _uses_grid(oracle: Oracle) -> bool:
    return oracle.rule.min_fraction_within is not None or any(
        dict(stage.rule).get("min_fraction_within") is not None for stage in oracle.stages)


def _passes(obs: Observations, oracle: Oracle, t: float) -> bool:
    return not _judged(obs, oracle.with_tolerance(t))[1]


def needed_tolerance(obs: Observations, oracle: Oracle) -> float | None:
    """The smallest uniform tolerance at which the protocol passes the reference (module docstring)."""
    if _uses_grid(oracle):
        return next((t for t in sorted(obs.grid) if _passes(obs, oracle, t)), None)
    if _passes(obs, oracle, 0.0):
        return 0.0
    error = np.nan_to_num(obs.error("fp64_"), nan=0.0, posinf=_CEILING)
    high = max(float(error.max(initial=0.0)), 1e-30)  # E = max d / (1 + r): the atol = rtol need of allclose
    while not _passes(obs, oracle, high):
        if high > _CEILING:
            return None
        high *= 4
    low = high / 4
    while _passes(obs, oracle, low) and low > 1e-30:
        high, low = low, low / 4
    while high / low > 1 + _PRECISION:  # low fails, high passes
        middle = math.sqrt(low * high)
        low, high = (low, middle) if _passes(obs, oracle, middle) else (middle, high)
    return high


def _own_tolerance(obs: Observations, oracle: Oracle, problem: str) -> float:
    dtypes = obs.frame["fp64_out_dtype"].dropna().astype(str)
    tol = oracle.tolerance.lookup(problem, dtypes.iloc[0] if len(dtypes) else "float32")
    return max(tol.atol, tol.rtol)


def judge_reference(rows: list[dict[str, Any]], oracle: Oracle, problem: str) -> dict[str, Any] | None:
    """The oracle's verdict on the problem's fp32 reference rows (one math mode): verdict, tolerance,
    needed_tolerance, margin, max_error (the largest E = max |ref32 − ref64| / (1 + |ref64|) of an output
    on the oracle's inputs), inputs (how many it draws) and failing_inputs. None when it draws none."""
    obs = observations(rows)
    judged, failing = _judged(obs, oracle)
    if not len(judged):
        return None
    own = _own_tolerance(obs, oracle, problem)
    needed = needed_tolerance(obs, oracle)
    error = obs.error("fp64_")[judged]
    finite = error[np.isfinite(error)]
    return {"verdict": UNREFEREEABLE if failing else REFEREEABLE, "tolerance": own, "needed_tolerance": needed,
            "margin": needed / own if needed is not None and own > 0 else None,
            "max_error": float(finite.max()) if len(finite) else None,
            "inputs": len(set(obs.frame["input_id"].to_numpy(dtype=object)[judged].tolist())),
            "failing_inputs": failing}
