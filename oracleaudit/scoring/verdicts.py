"""An oracle's verdicts on every kernel of an audit, exact and vectorised over the rows.

For each stage of the protocol, every row of a kernel (a mutant or the original) on an input the stage draws
gets a state: pass, skip or fail. A non-Ok status fails or skips as the stage's status policy says; an Ok
row is judged by the rule on the evidence against the protocol's reference (fp32_* or fp64_*): allclose
replayed on the stored hull points with PyTorch's own operations in the comparison dtype
(`evidence.replay_fails`: the verdict torch.allclose gives on the raw tensors), the fraction within tolerance
from the grid counts, the metrics, all-zero, repeat and timeout flags. A trial is one (stage, input) of one
kernel: it fails if any of its output rows fails. A kernel is rejected ("killed") if any trial fails. A
kernel is `complete` for the oracle when it has a row on every trial the oracle draws for its problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import clears_rounding, replay_fails
from oracleaudit.scoring.observations import NF_COUNTS, Observations
from oracleaudit.scoring.oracle import MATH_MODES, Criterion, Oracle, Stage
from oracleaudit.status import ORIGINAL, REFERENCE, Status

__all__ = ["FAIL", "PASS", "SKIP", "Verdicts", "judge_rows", "verdicts"]

PASS, SKIP, FAIL = 0, 1, 2


@dataclass
class Verdicts:
    """An oracle's verdicts on every kernel of an audit."""

    oracle: Oracle
    killed: np.ndarray             # per scored mutant (Audit.mutants order): rejected by the oracle
    drawn: np.ndarray              # per scored mutant: number of trials judged (not skipped)
    complete: np.ndarray           # per scored mutant: observed on every trial the oracle draws for its problem
    original_rejected: pd.Series   # per problem: the original fails some trial
    original_trials: int           # (stage, input) trials of originals judged
    original_trials_failed: int
    inexact: int
    mode_mismatch_rows: int
    rows: pd.DataFrame = field(repr=False)  # row, stage, state, inexact of every judged row


def _nonfinite(f: pd.DataFrame, rows: np.ndarray, p: str) -> tuple[np.ndarray, ...]:
    """(out_nf, out_known, ref_nf, ref_known, both, both_known) on the given rows: whether the output / the
    reference holds a non-finite value, and whether the evidence decides it (an undecided value is taken to
    be True). Where the reference is known to be finite, every NaN/Inf count belongs to the output; the other
    reference's evidence of the same output decides the output's part too."""
    q = "fp64_" if p == "fp32_" else "fp32_"
    A, B, C, D, F = (f[p + n].to_numpy()[rows] for n in NF_COUNTS)
    A2, B2, C2, D2, F2 = (f[q + n].to_numpy()[rows] for n in NF_COUNTS)
    ref_p = f[p + "ref_nonfinite"].to_numpy()[rows]
    ref_q = f[q + "ref_nonfinite"].to_numpy()[rows]
    present2 = f[q + "comparable"].to_numpy()[rows]
    out_sure = ((A + C + F) > 0) | (present2 & ((A2 + C2 + F2) > 0)) \
        | ((ref_p == 0) & ((A + D) > 0)) | (present2 & (ref_q == 0) & ((A2 + D2) > 0))
    out_never = ((B == 0) & (D == 0) & ((A + C + F) == 0)) \
        | (present2 & (B2 == 0) & (D2 == 0) & ((A2 + C2 + F2) == 0)) \
        | ((ref_p == 0) & ((A + D) == 0)) | (present2 & (ref_q == 0) & ((A2 + D2) == 0))
    out_known = out_sure | out_never
    out_nf = out_sure | ~out_known
    finite_out = out_never & ~out_sure  # every mismatched Inf is then the reference's
    ref_sure = (ref_p == 1) | ((B + C + F) > 0) | (finite_out & (D > 0))
    ref_never = (ref_p == 0) | (finite_out & ((B + D) == 0))
    ref_known = ref_sure | ref_never
    ref_nf = ref_sure | ~ref_known
    both_sure = ((C + F) > 0) | ((A > 0) & (B > 0)) | (out_sure & ref_sure)
    both_never = (out_never & ~out_sure) | (ref_never & ~ref_sure)
    both_known = both_sure | both_never
    both = both_sure | ~both_known
    return out_nf, out_known, ref_nf, ref_known, both, both_known


def _allclose(obs: Observations, rows: np.ndarray, p: str, atol: np.ndarray, rtol: np.ndarray,
              equal_nan: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch.allclose(out, ref, atol, rtol, equal_nan) for comparable rows, from the evidence (per-row
    tolerances): (verdict, exact)."""
    f = obs.frame
    get = lambda name: f[p + name].to_numpy()[rows]  # noqa: E731
    result = np.zeros(len(rows), dtype=bool)
    exact = np.ones(len(rows), dtype=bool)
    decided = np.zeros(len(rows), dtype=bool)
    bad = (get("n_nan_out") + get("n_nan_ref") + get("n_inf_mismatch") + get("n_overflow")) > 0
    if not equal_nan:
        bad |= get("n_nan_both") > 0
    decided |= bad
    zero = ~decided & (atol == 0) & (rtol == 0)
    result[zero] = (get("n_unequal") - get("n_nan_both"))[zero] == 0
    decided |= zero
    empty = ~decided & (get("hull_points") == 0)
    result[empty] = True
    decided |= empty
    need = np.flatnonzero(~decided)
    if len(need):
        r, d, owner = obs.hull[p]
        row_pos = np.full(obs.num_rows, -1, dtype=np.int64)
        row_pos[rows[need]] = need
        take = row_pos[owner] >= 0
        pos = row_pos[owner[take]]
        pr, pd_ = r[take], d[take]
        fails = np.zeros(len(pos), dtype=bool)
        names = f[p + "compare_dtype"].cat.categories
        codes = f[p + "compare_dtype"].cat.codes.to_numpy()[rows][pos]
        combos = pd.DataFrame({"dtype": codes, "atol": atol[pos], "rtol": rtol[pos]})
        for (code, a, t), index in combos.groupby(["dtype", "atol", "rtol"], sort=False).indices.items():
            fails[index] = replay_fails(pr[index], pd_[index], str(names[code]), float(a), float(t))
        failed_rows = np.bincount(pos[fails], minlength=len(rows)) > 0
        result[need] = ~failed_rows[need]
        incomplete = need[~get("hull_complete")[need] & result[need]]
        if len(incomplete):
            exact[incomplete] = _exact_where_thinned(obs, rows[incomplete], p, atol[incomplete], rtol[incomplete])
    return result, exact


def _exact_where_thinned(obs: Observations, rows: np.ndarray, p: str, atol: np.ndarray,
                         rtol: np.ndarray) -> np.ndarray:
    """For rows whose stored hull points all pass but whose hull was thinned (points left out): whether the
    verdict is exact, i.e. the tolerance line clears the hull by more than rounding (ErrorEvidence.is_exact,
    less the checks `_allclose` has made), from the hull arrays and columns as they are, row by row."""
    f = obs.frame
    r, d, owner = obs.hull[p]
    starts, ends = np.searchsorted(owner, rows), np.searchsorted(owner, rows + 1)
    slack = f[p + "hull_slack"].to_numpy()[rows]
    dtypes = f[p + "compare_dtype"].cat.categories[f[p + "compare_dtype"].cat.codes.to_numpy()[rows]]
    return np.array([clears_rounding(r[lo:hi], d[lo:hi], dtype, float(s), float(a), float(t))
                     for lo, hi, dtype, s, a, t in zip(starts.tolist(), ends.tolist(), dtypes, slack, atol, rtol)],
                    dtype=bool)


def _metric_ok(value: np.ndarray, l2_diff: np.ndarray, passes) -> np.ndarray:
    """A metric check: `passes(value)` where the metric is defined; where it is undefined (a zero norm), the
    output must equal the reference on its finite elements (l2_diff = 0, or no finite element at all)."""
    defined = ~np.isnan(value)
    with np.errstate(invalid="ignore"):
        ok = np.where(defined, passes(np.nan_to_num(value, nan=0.0)), False)
    identical = (l2_diff == 0) | np.isnan(l2_diff)
    return np.where(defined, ok, identical)


SCALING_MARGIN = 1e-6  # relative: far above the rounding of torch.isclose's few float32 operations


def _allclose_scaled_by_output(obs: Observations, rows: np.ndarray, p: str, atol: np.ndarray, rtol: np.ndarray,
                               equal_nan: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch.allclose(ref, out, atol, rtol, equal_nan), rtol scaling |out|, from evidence that holds |ref|.

    For an element with error d and |ref| = r, |out| lies in [r − d, r + d], so d ≤ atol + rtol·|out| holds
    surely when d·(1 + rtol) ≤ atol + rtol·r and fails surely when d·(1 − rtol) > atol + rtol·r: both are
    allclose checks scaled by the reference, with tolerances divided by (1 ± rtol) and a margin for rounding.
    A row between the two takes the reference-scaled verdict and is marked inexact."""
    low = 1.0 - SCALING_MARGIN
    surely, exact_surely = _allclose(obs, rows, p, atol / (1 + rtol) * low, rtol / (1 + rtol) * low, equal_nan)
    by_ref, _ = _allclose(obs, rows, p, atol, rtol, equal_nan)
    bounded = rtol < 1  # above, no finite bound on |out| relative to d fails an element surely
    high = 1.0 + SCALING_MARGIN
    safe = np.where(bounded, 1 - rtol, 1.0)
    maybe, exact_maybe = _allclose(obs, rows, p, np.where(bounded, atol / safe * high, atol),
                                   np.where(bounded, rtol / safe * high, rtol), equal_nan)
    maybe |= ~bounded
    result = np.where(surely, True, np.where(maybe, by_ref, False))
    exact = np.where(surely, exact_surely, np.where(maybe, False, exact_maybe))
    return result, exact


def _judge(obs: Observations, rows: np.ndarray, p: str, rule: Criterion, atol: np.ndarray, rtol: np.ndarray,
           grid_t: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The rule's verdict on Ok rows: (fails, inexact). A rule that asks whether the output or the reference
    holds NaN/Inf is evaluated for every value the evidence leaves possible; where they disagree the verdict
    (taken with the undecided value present) is inexact."""
    f = obs.frame
    get = lambda name: f[name].to_numpy()[rows]  # noqa: E731
    comparable = get(p + "comparable")
    inexact = np.zeros(len(rows), dtype=bool)
    compare = np.zeros(len(rows), dtype=bool)  # fails of the element-wise comparison
    index = np.flatnonzero(comparable)
    if rule.allclose:
        allclose = _allclose if rule.rtol_scales == "reference" else _allclose_scaled_by_output
        ok, exact = allclose(obs, rows[index], p, atol[index], rtol[index], rule.nan == "equal_nan")
        compare[index[~ok]] = True
        inexact[index[~exact]] = True
    if rule.min_fraction_within is not None:
        n = get(p + "n")
        within = np.zeros(len(rows), dtype=np.float64)
        for t in np.unique(grid_t[comparable]):
            counts = obs.within(p, float(t))
            if counts is None:
                raise OracleAuditError(f"{where}: min_fraction_within needs the tolerance {float(t):g} on the "
                                       f"evidence's tolerance grid ({', '.join(f'{g:g}' for g in obs.grid)})")
            pick = comparable & (grid_t == t)
            within[pick] = counts[rows[pick]]
        fraction = np.where(n > 0, within / np.maximum(n, 1), 1.0)
        compare |= fraction < rule.min_fraction_within
    l2 = get(p + "l2_diff")
    if rule.min_cosine is not None:
        compare |= ~_metric_ok(get(p + "cosine"), l2, lambda v: v >= rule.min_cosine)
    if rule.max_rel_l1 is not None:
        compare |= ~_metric_ok(get(p + "rel_l1"), l2, lambda v: v <= rule.max_rel_l1)
    if rule.max_rmse is not None:
        compare |= ~_metric_ok(get(p + "rmse"), l2, lambda v: v <= rule.max_rmse)
    if rule.all_zero_fails:
        compare |= get(p + "all_zero_out")
    repeat = get("repeat_bitwise_equal_false") if rule.bitwise_repeat else np.zeros(len(rows), dtype=bool)

    def outcome(out_nf: np.ndarray, ref_nf: np.ndarray) -> np.ndarray:
        fails = compare.copy()
        if rule.nan == "nonfinite_in_both_passes":
            fails = np.where(out_nf, ~ref_nf, fails)  # both non-finite: pass; only the output: fail
        if rule.nonfinite_output_fails:
            fails |= out_nf
        if rule.nonfinite_reference_fails:
            fails |= ref_nf
        return ~comparable | fails | repeat

    if rule.nan == "nonfinite_in_both_passes" or rule.nonfinite_output_fails or rule.nonfinite_reference_fails:
        out_nf, out_known, ref_nf, ref_known, _, _ = _nonfinite(f, rows, p)
        fails = outcome(out_nf, ref_nf)
        for o, r in ((True, True), (True, False), (False, True), (False, False)):
            o_v = np.where(out_known, out_nf, o)
            r_v = np.where(ref_known, ref_nf, r)
            inexact |= comparable & (outcome(o_v, r_v) != fails)
    else:
        fails = outcome(np.zeros(len(rows), bool), np.zeros(len(rows), bool))
    if rule.repeat_allclose:
        # The second run is known only as bitwise equal to the first or not: equal, it gets the first's
        # verdict; different, a pass of the first says nothing sure of the second (taken to pass, inexact).
        inexact |= get("repeat_bitwise_equal_false") & ~fails
    return fails, inexact & comparable


def _tolerances(obs: Observations, oracle: Oracle, stage: Stage, rows: np.ndarray, p: str) -> tuple[np.ndarray, ...]:
    """(atol, rtol, grid t) per row: the protocol's tolerance for the row's problem and output dtype, scaled."""
    f = obs.frame
    problems = f["problem"].cat.codes.to_numpy()[rows]
    dtypes = f[p + "out_dtype"].cat.codes.to_numpy()[rows]
    names_p = f["problem"].cat.categories
    names_d = f[p + "out_dtype"].cat.categories
    pair = problems.astype(np.int64) * (len(names_d) + 1) + (dtypes.astype(np.int64) + 1)
    uniq, inverse = np.unique(pair, return_inverse=True)
    pair_atol = np.zeros(len(uniq))
    pair_rtol = np.zeros(len(uniq))
    for k, code in enumerate(uniq):
        problem = names_p[code // (len(names_d) + 1)]
        d = code % (len(names_d) + 1) - 1
        tol = oracle.tolerance.lookup(problem, names_d[d] if d >= 0 else "float32").scaled(stage.tolerance_scale)
        pair_atol[k], pair_rtol[k] = tol.atol, tol.rtol
    atol, rtol = pair_atol[inverse], pair_rtol[inverse]
    return atol, rtol, atol.copy()


def _stage_inputs(obs: Observations, stage: Stage) -> np.ndarray:
    """Per row: the stage runs on the row's problem and draws the row's input."""
    f = obs.frame
    drawn = np.array([stage.draws(str(k)) for k in f["input_id"].cat.categories], dtype=bool)
    applies = np.array([stage.applies(str(p)) for p in f["problem"].cat.categories], dtype=bool)
    if not len(drawn) or not len(applies):
        return np.zeros(len(f), dtype=bool)
    return drawn[f["input_id"].cat.codes.to_numpy()] & applies[f["problem"].cat.codes.to_numpy()]


def _has_reference(obs: Observations) -> np.ndarray:
    """Per row: its (problem, input) has a reference row with status Ok."""
    f = obs.frame
    trial = f["trial"].to_numpy()
    is_ref = (f["mutant_id"] == REFERENCE).to_numpy() & (f["status"] == Status.OK).to_numpy()
    has = np.zeros(trial.max() + 1 if len(trial) else 0, dtype=bool)
    has[trial[is_ref]] = True
    return has[trial]


def _finite_reference(obs: Observations, p: str) -> np.ndarray:
    """Per row: no output of its (problem, input) has a reference (the one behind the `p` evidence) known
    to hold NaN or Inf (`ref_nonfinite`; unknown counts as finite, so the trial is judged)."""
    f = obs.frame
    trial = f["trial"].to_numpy()
    if not len(trial):
        return np.ones(0, dtype=bool)
    nonfinite = f[p + "ref_nonfinite"].to_numpy() == 1
    bad = np.zeros(trial.max() + 1, dtype=bool)
    bad[trial[nonfinite]] = True
    return ~bad[trial]


def judge_rows(obs: Observations, oracle: Oracle, rows: np.ndarray, prefix: str | None = None,
               broken: frozenset[str] = frozenset()) -> pd.DataFrame:
    """The state (PASS, SKIP, FAIL) of each given row under each stage that draws its input: a frame with
    row, stage (index), state, inexact. `prefix` overrides the reference's evidence columns. On a problem in
    `broken` the checker's own reference raises (casting.py): every row it draws fails."""
    f = obs.frame
    p = prefix or ("fp64_" if oracle.reference.precision == "fp64" else "fp32_")
    status = f["status"].to_numpy(dtype=object)
    has_ref = _has_reference(obs) if prefix is None else np.ones(len(f), dtype=bool)
    in_rows = np.zeros(len(f), dtype=bool)
    in_rows[rows] = True
    parts = []
    for s_index, stage in enumerate(oracle.stages):
        where = f"oracle {oracle.name}: stage {stage.name}"
        mask = in_rows & _stage_inputs(obs, stage)
        if not has_ref.all():
            if stage.missing_reference == "skip":
                mask &= has_ref
        if stage.nonfinite_reference == "skip":
            mask &= _finite_reference(obs, p)
        sel = np.flatnonzero(mask)
        if not len(sel):
            continue
        state = np.full(len(sel), PASS, dtype=np.int8)
        inexact = np.zeros(len(sel), dtype=bool)
        fail_set, skip_set = oracle.stage_statuses(stage)
        st = status[sel]
        state[np.isin(st, list(skip_set))] = SKIP
        state[np.isin(st, list(fail_set))] = FAIL
        if stage.missing_reference == "fail":
            state[~has_ref[sel]] = FAIL
        ok = (st == Status.OK) & (state == PASS)
        if oracle.timeout_s is not None:
            slow = ok & (f["time_ms"].to_numpy()[sel] > oracle.timeout_s * 1000.0)
            state[slow] = FAIL
            ok &= ~slow
        ok_rows = sel[ok]
        if len(ok_rows):
            atol, rtol, grid_t = _tolerances(obs, oracle, stage, ok_rows, p)
            fails, inexact_ok = _judge(obs, ok_rows, p, oracle.stage_rule(stage), atol, rtol, grid_t, where)
            ok_index = np.flatnonzero(ok)
            state[ok_index[fails]] = FAIL
            inexact[ok_index] = inexact_ok
        parts.append(pd.DataFrame({"row": sel, "stage": s_index, "state": state, "inexact": inexact}))
    if not parts:
        return pd.DataFrame({"row": np.zeros(0, np.int64), "stage": np.zeros(0, np.int64),
                             "state": np.zeros(0, np.int8), "inexact": np.zeros(0, bool)})
    judged = pd.concat(parts, ignore_index=True)
    if broken:
        on_broken = f["problem"].astype(str).isin(broken).to_numpy()[judged["row"].to_numpy()]
        judged.loc[on_broken, "state"] = FAIL
        judged.loc[on_broken, "inexact"] = False
    if oracle.timeout_s is not None and oracle.timeout_scope == "evaluation":
        # The limit bounds the whole evaluation: the kernel's runs over every trial (their sum is a lower
        # bound of it: compilation and setup are not in the evidence); past it, no trial of the kernel passes.
        judged_rows = judged["row"].to_numpy()
        kernel = f["kernel"].to_numpy()[judged_rows]
        spent = np.nan_to_num(f["time_ms"].to_numpy(dtype=np.float64)[judged_rows])
        codes, inverse = np.unique(kernel, return_inverse=True)
        over = np.bincount(inverse, weights=spent, minlength=len(codes)) > oracle.timeout_s * 1000.0
        judged.loc[over[inverse], "state"] = FAIL
    return judged


def verdicts(obs: Observations, mutants: pd.DataFrame, oracle: Oracle,
             broken: frozenset[str] = frozenset()) -> Verdicts:
    """The oracle's verdicts on every kernel of the observations: the scored mutants (`mutants`, one row each
    with its `kernel` code, in order) and the originals; `broken`: see `judge_rows`."""
    f = obs.frame
    kernel = f["kernel"].to_numpy()
    kernel_codes = np.concatenate([mutants["kernel"].to_numpy(),
                                   f.loc[(f["mutant_id"] == ORIGINAL).to_numpy(), "kernel"].unique()])
    is_kernel = np.zeros(kernel.max() + 1, dtype=bool)
    is_kernel[kernel_codes] = True
    rows = np.flatnonzero(is_kernel[kernel])
    judged = judge_rows(obs, oracle, rows, broken=broken)
    if judged.empty:
        inputs = "; ".join(f"{s.name}: {', '.join(i.describe() for i in s.inputs)}" for s in oracle.stages)
        raise OracleAuditError(f"oracle {oracle.name} draws no input of the evidence store (its inputs: {inputs})")
    r = judged["row"].to_numpy()
    state = judged["state"].to_numpy()
    n_kernels = kernel.max() + 1
    u = kernel[r]
    failed = np.bincount(u[state == FAIL], minlength=n_kernels) > 0
    # trials: (kernel, stage, input); a trial is judged when none of its rows is skipped, or it fails
    trial_key = pd.DataFrame({"u": u, "stage": judged["stage"].to_numpy(), "input": f["input_id"].cat.codes.to_numpy()[r],
                              "state": state})
    trials = trial_key.groupby(["u", "stage", "input"], sort=False)["state"].max().reset_index()
    judged_trials = trials[trials["state"] != SKIP]
    drawn = np.bincount(judged_trials["u"].to_numpy(), minlength=n_kernels)
    present = np.bincount(trials["u"].to_numpy(), minlength=n_kernels)
    m_problem = f.groupby("kernel", sort=True, observed=True)["problem"].first()
    problem_of_unit = np.full(n_kernels, -1, dtype=np.int64)
    problem_of_unit[m_problem.index.to_numpy()] = m_problem.cat.codes.to_numpy()
    expected = _expected_trials(obs, oracle)[problem_of_unit]

    m_kernels = mutants["kernel"].to_numpy()
    orig_rows = (f["mutant_id"] == ORIGINAL).to_numpy()
    orig_kernels = f.loc[orig_rows, ["kernel", "problem"]].drop_duplicates("kernel")
    original_rejected = pd.Series(failed[orig_kernels["kernel"].to_numpy()],
                                  index=orig_kernels["problem"].astype(str).to_numpy(), name="rejected").sort_index()
    is_orig_kernel = np.zeros(n_kernels, dtype=bool)
    is_orig_kernel[orig_kernels["kernel"].to_numpy()] = True
    orig_trials = judged_trials[is_orig_kernel[judged_trials["u"].to_numpy()]]
    mode = MATH_MODES[oracle.reference.math_mode]
    mismatch = 0
    if oracle.reference.precision == "fp32":
        known = f["ref_matmul_tf32_known"].to_numpy()[r] & f["ref_cudnn_tf32_known"].to_numpy()[r]
        differs = (f["ref_matmul_tf32"].to_numpy()[r] != mode[0]) | (f["ref_cudnn_tf32"].to_numpy()[r] != mode[1])
        mismatch = int((known & differs).sum())
    return Verdicts(oracle=oracle, killed=failed[m_kernels], drawn=drawn[m_kernels],
                    complete=present[m_kernels] >= expected[m_kernels],
                    original_rejected=original_rejected, original_trials=len(orig_trials),
                    original_trials_failed=int((orig_trials["state"] == FAIL).sum()),
                    inexact=int(judged["inexact"].sum()), mode_mismatch_rows=mismatch, rows=judged)


def _expected_trials(obs: Observations, oracle: Oracle) -> np.ndarray:
    """Per problem code: the (stage, input) trials the oracle draws on that problem, over the inputs the
    store has reference rows for (the inputs the run planned; stages that skip inputs without an Ok
    reference count only the inputs with one)."""
    f = obs.frame
    is_ref = (f["mutant_id"] == REFERENCE).to_numpy()
    problems = f["problem"].cat.codes.to_numpy()[is_ref]
    inputs = f["input_id"].cat.codes.to_numpy()[is_ref]
    ok = (f["status"] == Status.OK).to_numpy()[is_ref]
    finite = _finite_reference(obs, "fp64_" if oracle.reference.precision == "fp64" else "fp32_")[is_ref]
    pairs = pd.DataFrame({"problem": problems, "input": inputs, "ok": ok, "finite": finite}).groupby(
        ["problem", "input"], sort=False).agg(ok=("ok", "max"), finite=("finite", "min")).reset_index()
    count = np.zeros(len(f["problem"].cat.categories), dtype=np.int64)
    names = f["input_id"].cat.categories
    problem_names = f["problem"].cat.categories
    for stage in oracle.stages:
        drawn = np.array([stage.draws(str(k)) for k in names], dtype=bool)
        applies = np.array([stage.applies(str(p)) for p in problem_names], dtype=bool)
        take = drawn[pairs["input"].to_numpy()] if len(names) else np.zeros(len(pairs), dtype=bool)
        take &= applies[pairs["problem"].to_numpy()] if len(problem_names) else False
        if stage.missing_reference == "skip":
            take &= pairs["ok"].to_numpy()
        if stage.nonfinite_reference == "skip":
            take &= pairs["finite"].to_numpy()
        count += np.bincount(pairs["problem"].to_numpy()[take], minlength=len(count))
    return count
