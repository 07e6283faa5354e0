"""The kill witness: correct kernels (the original itself, re-run or reordered) are never witnessed against
the original across 100 seeds; faults beyond the margin are; each witness kind needs the original to be
right where the mutant is wrong."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
import torch

from oracleaudit.execution.measure import measure
from oracleaudit.scoring import Observations
from oracleaudit.scoring.witness import (
    FACTOR,
    FLOOR,
    KINDS,
    SMALL_OUTPUT,
    UNSTABLE_FACTOR,
    Margin,
    required_tolerance,
    witness,
)
from oracleaudit.store import OBSERVATION_SCHEMA

SHAPES = [(64, 17), (16, 1000), (1, 4096)]
DISTRIBUTIONS = ["rand", "normal", "x1e3"]


def draw(seed: int, shape: tuple[int, int], dist: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g) if dist == "rand" else torch.randn(shape, generator=g)
    return x * 1e3 if dist == "x1e3" else x


def chunked(x: torch.Tensor, chunk: int, perm: torch.Tensor | None = None) -> torch.Tensor:
    """A block reduction of the last dimension in fp32: chunk sums, then the sum of the partials."""
    if perm is not None:
        x = x[..., perm]
    pad = torch.nn.functional.pad(x, (0, (-x.shape[-1]) % chunk))
    return pad.reshape(*x.shape[:-1], -1, chunk).sum(-1).sum(-1)


def row(mutant: str, input_id: str, out: torch.Tensor | None, ref64: torch.Tensor, *, status: str = "Ok",
        repeat: bool | None = True, problem: str = "p", index: int = 0) -> dict:
    r = {"problem": problem, "mutant_id": mutant, "input_id": input_id, "input_seed": 0, "shape_variant": "official",
         "distribution": "normal", "output_index": index, "status": status, "repeat_bitwise_equal": repeat}
    if out is not None:
        r.update(measure(out, ref64.float()).to_row("fp32_"))
        r.update(measure(out, ref64).to_row("fp64_"))
    return r


def witnessed(rows: list[dict], margin: Margin = Margin(), inputs=None) -> dict[str, str | None]:
    frame = Observations(pa.Table.from_pylist(rows, schema=OBSERVATION_SCHEMA)).frame
    result = witness(frame, margin, inputs)
    return dict(zip(result["mutant_id"], result["kind"]))


def test_the_original_is_never_witnessed_against_itself_or_a_reordering_across_100_seeds() -> None:
    rows = []
    for seed in range(100):  # each seed one of the 9 shape × distribution combinations, in turn
        shape, dist = SHAPES[seed % 3], DISTRIBUTIONS[(seed // 3) % 3]
        x = draw(seed, shape, dist)
        ref64 = x.double().sum(-1)
        key = f"{dist}/{shape[0]}x{shape[1]}/s={seed}/official"
        original = chunked(x, 256)
        # a single sum is taken to come from atomics: non-deterministic, each run a new order
        stable = shape[0] >= SMALL_OUTPUT
        rows.append(row("original", key, original, ref64, repeat=stable))
        rows.append(row("rerun", key, original.clone(), ref64, repeat=stable))
        if stable:
            rows.append(row("blocks_of_32", key, chunked(x, 32), ref64))
            rows.append(row("blocks_of_128", key, chunked(x, 128), ref64))
        else:
            perm = torch.randperm(shape[1], generator=torch.Generator().manual_seed(seed + 1))
            rows.append(row("atomic_order", key, chunked(x, 32, perm), ref64, repeat=False))
    kinds = witnessed(rows)
    assert kinds == {"rerun": None, "blocks_of_32": None, "blocks_of_128": None, "atomic_order": None}


FAULTS = {
    "drop_last_term": lambda x: chunked(x[..., :-1], 256),
    "half_accumulator": lambda x: x.half().cumsum(-1)[..., -1].float(),
    "relative_1e-3": lambda x: chunked(x, 256) * (1 + 1e-3),
    "bfloat16_inputs": lambda x: chunked(x.bfloat16().float(), 256),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_faults_far_beyond_fp32_rounding_are_witnessed_by_error(fault: str) -> None:
    x = draw(3, (64, 1000), "rand")
    ref64 = x.double().sum(-1)
    rows = [row("original", "k", chunked(x, 256), ref64), row(fault, "k", FAULTS[fault](x), ref64)]
    assert witnessed(rows) == {fault: "error"}


def margin_rows(e_orig: float, e_mut: float, n: int = 64, repeat: bool = True) -> list[dict]:
    """An original and a mutant whose required tolerance against fp64 is exactly e_orig and e_mut (one element
    off by (1 + r)·E at r = 0)."""
    ref64 = torch.zeros(n, dtype=torch.float64)
    out_orig = torch.zeros(n)
    out_orig[0] = e_orig
    out_mut = torch.zeros(n)
    out_mut[0] = e_mut
    return [row("original", "k", out_orig, ref64, repeat=repeat), row("m", "k", out_mut, ref64)]


def test_the_error_margin_is_a_factor_over_the_original_with_a_floor() -> None:
    e = 2.0 ** -24
    assert witnessed(margin_rows(e, FACTOR * e))["m"] is None  # exactly at the margin: not beyond it
    assert witnessed(margin_rows(e, 2 * FACTOR * e))["m"] == "error"
    assert witnessed(margin_rows(0.0, FLOOR))["m"] is None  # an exact original: the floor decides
    assert witnessed(margin_rows(0.0, 2 * FLOOR))["m"] == "error"


def test_small_or_non_deterministic_outputs_need_the_wider_factor() -> None:
    e = 2.0 ** -20
    assert witnessed(margin_rows(e, 100 * FACTOR * e / 100 * 2))["m"] == "error"
    assert witnessed(margin_rows(e, 2 * FACTOR * e, n=SMALL_OUTPUT - 1))["m"] is None
    assert witnessed(margin_rows(e, 2 * FACTOR * e, repeat=False))["m"] is None
    assert witnessed(margin_rows(e, 2 * UNSTABLE_FACTOR * e, repeat=False))["m"] == "error"


def test_the_margin_can_be_changed_in_one_place() -> None:
    e = 2.0 ** -24
    assert witnessed(margin_rows(e, 10 * e), Margin(factor=8.0, floor=0.0))["m"] == "error"
    assert Margin().as_json() == {"factor": 64.0, "unstable_factor": 4096.0, "floor": 2.0 ** -20,
                                  "small_output": 16}


def test_required_tolerance_is_the_smallest_kernelbench_style_tolerance_of_the_raw_tensors() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.choice([1, 10, 1000]))
        ref = torch.from_numpy(rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3))
        out = (ref * (1 + torch.from_numpy(rng.standard_normal(n)) * 10.0 ** rng.uniform(-8, -1))).float()
        frame = Observations(pa.Table.from_pylist([row("m", "k", out, ref)], schema=OBSERVATION_SCHEMA)).frame
        d, r = (out.double() - ref).abs(), ref.abs()
        assert frame["fp64_error"][0] == pytest.approx(float((d / (1 + r)).max()), rel=1e-12, abs=0)
    assert required_tolerance(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), 2).tolist() == [0.0, 0.0]
    assert required_tolerance(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), 1, np.array([1]))[0] == math.inf


def test_a_crash_timeout_or_shape_mismatch_witnesses_only_where_the_original_ran() -> None:
    ref64 = torch.ones(32, dtype=torch.float64)
    ok = torch.ones(32)
    rows = [row("original", "a", ok, ref64), row("original", "b", None, ref64, status="RuntimeError"),
            row("crash", "a", None, ref64, status="RuntimeError"), row("hang", "a", None, ref64, status="Timeout"),
            row("shape", "a", ok[:-1], ref64, status="ShapeMismatch"),
            row("crash_where_original_crashes", "b", None, ref64, status="RuntimeError")]
    assert witnessed(rows) == {"crash": "crash", "hang": "timeout", "shape": "mismatch",
                               "crash_where_original_crashes": None}


def test_nan_witnesses_only_where_the_original_agrees_with_fp64_about_nonfinite_values() -> None:
    ref64 = torch.linspace(1, 2, 32, dtype=torch.float64)
    good, bad = ref64.float(), ref64.float().clone()
    bad[3] = math.nan
    rows = [row("original", "a", good, ref64), row("original", "b", bad, ref64),
            row("nan", "a", bad, ref64), row("nan_like_the_original", "b", bad, ref64)]
    assert witnessed(rows) == {"nan": "nonfinite", "nan_like_the_original": None}


def test_a_repeat_that_differs_witnesses_only_where_the_originals_repeats_are_always_bitwise_equal() -> None:
    """Problem p's original repeats bitwise on both inputs; q's only on input a (an atomics kernel equal on
    one input by luck), so a mutant of q that differs on a is not convicted of non-determinism."""
    ref64 = torch.ones(32, dtype=torch.float64)
    ones = torch.ones(32)
    rows = [row("original", "a", ones, ref64, repeat=True), row("original", "b", ones, ref64, repeat=True),
            row("original", "a", ones, ref64, repeat=True, problem="q"),
            row("original", "b", ones, ref64, repeat=False, problem="q"),
            row("racy", "a", ones, ref64, repeat=False),
            row("racy_like_the_original", "a", ones, ref64, repeat=False, problem="q")]
    assert witnessed(rows) == {"racy": "nondeterministic", "racy_like_the_original": None}


def test_the_primary_kind_follows_the_documented_priority_and_all_kinds_are_listed() -> None:
    ref64 = torch.ones(32, dtype=torch.float64)
    rows = [row("original", "a", torch.ones(32), ref64), row("original", "b", torch.ones(32), ref64),
            row("m", "a", torch.full((32,), 2.0), ref64, repeat=False), row("m", "b", None, ref64, status="Timeout")]
    frame = Observations(pa.Table.from_pylist(rows, schema=OBSERVATION_SCHEMA)).frame
    result = witness(frame).set_index("mutant_id")
    assert result.loc["m", "kind"] == "timeout" and result.loc["m", "input_id"] == "b"
    assert result.loc["m", "kinds"] == "timeout,error,nondeterministic"
    assert result.loc["m", "witness_inputs"] == 2
    assert KINDS.index("timeout") < KINDS.index("error") < KINDS.index("nondeterministic")


def test_the_witness_pool_can_be_restricted_to_some_inputs() -> None:
    ref64 = torch.ones(32, dtype=torch.float64)
    rows = [row("original", "a", torch.ones(32), ref64), row("original", "b", torch.ones(32), ref64),
            row("m", "a", torch.ones(32), ref64), row("m", "b", None, ref64, status="RuntimeError")]
    assert witnessed(rows) == {"m": "crash"}
    assert witnessed(rows, inputs=["a"]) == {"m": None}
