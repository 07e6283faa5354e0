"""The input pool: distributions, seeds and shape variants defined as data, and the inputs they make."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from oracleaudit.dataset.checks import Check, make_inputs
from oracleaudit.errors import OracleAuditError
from oracleaudit.kernelbench import official_seeds
from oracleaudit.pool import (
    DISTRIBUTIONS,
    Pool,
    PoolEntry,
    constant,
    laplace,
    lognormal,
    mixed_range,
    near_max,
    near_ties,
    normal,
    official,
    pools_dir,
    ramp,
    shipped_pools,
    uniform,
    uniform_pm1,
    zeros,
)
from oracleaudit.pool.shapes import ShapeVariant
from oracleaudit.problem import bundled_root, load_problem_module

SOFTMAX = bundled_root() / "level1" / "23_Softmax.py"
CROSS_ENTROPY = bundled_root() / "level1" / "49_CrossEntropyLoss.py"
MATMUL = bundled_root() / "level1" / "30_Square_matrix_multiplication.py"
TRANSFORMER = bundled_root() / "level3" / "3_TransformerBlock.py"
TRIAL_SEEDS = [734796314, 576165995, 2197670066, 839703249, 2584932063]


@pytest.fixture(scope="module")
def default_pool() -> Pool:
    return Pool.load("default")


@pytest.fixture(scope="module")
def softmax_entries(default_pool: Pool) -> dict[str, PoolEntry]:
    return {entry.key: entry for entry in default_pool.entries_for(SOFTMAX)}


def write_pool(tmp_path: Path, body: str, name: str = "mine.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def inputs_of(entry: PoolEntry, problem: Path = SOFTMAX, device: str = "cpu") -> list:
    return entry.make_inputs(entry.load_problem(problem), device)


def assert_bitwise_equal(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and x.shape == y.shape
            assert torch.equal(x.view(-1).view(torch.uint8) if x.is_floating_point() else x,
                               y.view(-1).view(torch.uint8) if y.is_floating_point() else y)
        else:
            assert x == y


# ---------------------------------------------------------------------------------------------------------
# Determinism and KernelBench's own procedure


def test_every_default_entry_makes_bitwise_identical_inputs_twice(softmax_entries: dict[str, PoolEntry]) -> None:
    again = {entry.key: entry for entry in Pool.load("default").entries_for(SOFTMAX)}
    assert list(again) == list(softmax_entries)
    for key, entry in softmax_entries.items():
        assert_bitwise_equal(inputs_of(entry), inputs_of(again[key]))


def test_official_entries_are_kernelbench_trials_manual_seed_then_get_inputs(
    softmax_entries: dict[str, PoolEntry],
) -> None:
    assert official_seeds() == TRIAL_SEEDS
    for seed in TRIAL_SEEDS:
        entry = softmax_entries[f"official/s={seed}/official"]
        module = load_problem_module(SOFTMAX)
        torch.manual_seed(seed)
        expected = module.get_inputs()
        assert_bitwise_equal(entry.make_inputs(module), expected)


def test_make_inputs_leaves_the_global_rng_state_as_it_was(softmax_entries: dict[str, PoolEntry]) -> None:
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    inputs_of(softmax_entries["normal/draw=3/s=200/official"])
    assert torch.equal(torch.random.get_rng_state(), before)


def test_verification_checks_are_pool_entries(softmax_entries: dict[str, PoolEntry]) -> None:
    module = load_problem_module(SOFTMAX)
    same = {
        "normal": "randn_seed42/s=42/official",
        "uniform": "uniform_pm1/s=42/official",
        "large": "normal/x=1000/s=42/official",
    }
    for distribution, key in same.items():
        expected = make_inputs(module, Check(distribution, distribution, 42, ShapeVariant("official")))
        assert_bitwise_equal(inputs_of(softmax_entries[key]), expected)


def test_randn_seed42_is_torch_randn_after_manual_seed_42(softmax_entries: dict[str, PoolEntry]) -> None:
    torch.manual_seed(42)
    expected = torch.randn(64, 4096)
    assert_bitwise_equal(inputs_of(softmax_entries["randn_seed42/s=42/official"]), [expected])


def test_inputs_move_to_the_requested_device(softmax_entries: dict[str, PoolEntry]) -> None:
    (x,) = inputs_of(softmax_entries["laplace/s=0/official"], device="meta")
    assert x.device.type == "meta" and x.shape == (64, 4096)


# ---------------------------------------------------------------------------------------------------------
# Integer inputs


def test_integer_inputs_keep_their_range_and_values_under_every_distribution(tmp_path: Path) -> None:
    lines = ["schema_version = 1"]
    for name in DISTRIBUTIONS:
        extra = {"constant": "value = 0.5\n", "uniform": "low = -2.0\nhigh = 2.0\n",
                 "scaled": "scale = 3.0\n"}.get(name, "")
        seeds = "" if name == "randn_seed42" else "seeds = [7]\n"
        lines.append(f'[[entries]]\ndistribution = "{name}"\n{seeds}{extra}')
    pool = Pool.load(write_pool(tmp_path, "\n".join(lines)))
    entries = pool.entries_for(CROSS_ENTROPY)
    assert sorted({e.distribution for e in entries}) == sorted(DISTRIBUTIONS)
    for entry in entries:
        module = entry.load_problem(CROSS_ENTROPY)
        predictions, targets = entry.make_inputs(module)
        torch.manual_seed(entry.seed)
        official_predictions, official_targets = module.get_inputs()
        assert targets.dtype == torch.int64 and torch.equal(targets, official_targets), entry.key
        assert int(targets.min()) >= 0 and int(targets.max()) < module.num_classes
        assert predictions.dtype == torch.float32 and predictions.shape == official_predictions.shape
        if entry.distribution != "official":
            assert not torch.equal(predictions, official_predictions), entry.key


# ---------------------------------------------------------------------------------------------------------
# Shape variants


def test_shape_variants_change_the_shapes_through_the_module_constants(
    softmax_entries: dict[str, PoolEntry],
) -> None:
    expected = {
        "official": ((), (64, 4096)),
        "odd": ((("batch_size", 43), ("dim", 2861)), (43, 2861)),
        "small": ((("batch_size", 17), ("dim", 19)), (17, 19)),
        "batch": ((("batch_size", 33),), (33, 4096)),
    }
    for variant, (overrides, shape) in expected.items():
        entry = softmax_entries[f"official/s=42/{variant}" if variant != "official" else
                                f"official/s={TRIAL_SEEDS[0]}/official"]
        assert entry.overrides == overrides and entry.input_shapes == (shape,)
        module = entry.load_problem(SOFTMAX)
        assert (module.batch_size, module.dim) == (shape[0], shape[1])
        (x,) = entry.make_inputs(module)
        assert x.shape == shape


def test_odd_shapes_redraw_floats_and_keep_integers_valid(default_pool: Pool) -> None:
    entries = {e.key: e for e in default_pool.entries_for(CROSS_ENTROPY)}
    entry = entries["near_ties/s=0/odd"]
    assert dict(entry.overrides) == {"batch_size": 2861, "num_classes": 701}
    predictions, targets = inputs_of(entry, CROSS_ENTROPY)
    assert predictions.shape == (2861, 701) and targets.shape == (2861,)
    assert int(targets.max()) < 701


def test_make_inputs_refuses_a_module_loaded_without_the_entry_overrides(
    softmax_entries: dict[str, PoolEntry],
) -> None:
    needs = r"normal/s=0/odd: the problem module has batch_size=64, the entry needs 43"
    with pytest.raises(OracleAuditError, match=needs):
        softmax_entries["normal/s=0/odd"].make_inputs(load_problem_module(SOFTMAX))


def test_an_entry_not_resolved_for_a_problem_cannot_make_inputs(default_pool: Pool) -> None:
    with pytest.raises(OracleAuditError, match="not resolved for a problem"):
        default_pool.get("normal/s=0/odd").make_inputs(load_problem_module(SOFTMAX))


def test_max_elements_scales_shapes_down_through_constants_and_records_them(tmp_path: Path) -> None:
    pool = Pool.load(write_pool(tmp_path, (
        'schema_version = 1\nmax_elements = 50000\n'
        '[[entries]]\ndistribution = "normal"\nseeds = [0]\nvariants = ["official", "odd", "small"]\n'
    )))
    plan = pool.shape_plan(SOFTMAX)
    assert plan.max_elements == 50000 and plan.dropped == ()
    assert [(v.name, dict(v.overrides), v.input_shapes) for v in plan.shapes] == [
        ("official", {"dim": 512}, ((64, 512),)),
        ("odd", {"batch_size": 43, "dim": 359}, ((43, 359),)),
        ("small", {"batch_size": 17, "dim": 19}, ((17, 19),)),
    ]
    assert all(v.scaled_to_limit for v in plan.shapes)
    for entry in pool.entries_for(SOFTMAX):
        (x,) = inputs_of(entry)
        assert x.numel() <= 50000 and (tuple(x.shape),) == entry.input_shapes
    assert plan.as_json()["shapes"][0] == {
        "name": "official", "overrides": {"dim": 512}, "input_shapes": [[64, 512]], "scaled_to_limit": True,
    }


def test_entries_of_a_dropped_variant_are_left_out_with_the_reason(problem_root: Path, tmp_path: Path) -> None:
    fixed_view = problem_root / "level1" / "3_FixedView.py"
    pool = Pool.load(write_pool(tmp_path, (
        'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [0]\nvariants = ["official", "odd"]\n'
    )))
    assert [e.key for e in pool.entries_for(fixed_view)] == ["normal/s=0/official"]
    (dropped,) = pool.shape_plan(fixed_view).dropped
    assert dropped.name == "odd" and "RuntimeError" in dropped.reason


def test_a_pool_with_no_entry_for_a_problem_is_an_error(problem_root: Path, tmp_path: Path) -> None:
    pool = Pool.load(write_pool(tmp_path, (
        'schema_version = 1\n[[entries]]\ndistribution = "zeros"\nseeds = [0]\nvariants = ["small"]\n'
    )))
    with pytest.raises(OracleAuditError, match=r"pool mine: no entry applies to .*3_FixedView \(small: "):
        pool.entries_for(problem_root / "level1" / "3_FixedView.py")


# ---------------------------------------------------------------------------------------------------------
# Distributions


def template(shape: tuple[int, ...] = (37, 129), dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(0)).to(dtype)


def draw(dist, seed: int = 7, like: torch.Tensor | None = None) -> torch.Tensor:
    return dist.draw(template() if like is None else like, torch.Generator().manual_seed(seed))


def test_scaling_composes_like_a_strategy() -> None:
    assert torch.equal(draw(normal().scaled(1e3)), draw(normal()) * 1e3)
    assert torch.equal(draw(official().scaled(-1)), -template())
    assert torch.equal(draw(lognormal().scaled(3).scaled(0.5)), draw(lognormal()) * 3 * 0.5)
    assert torch.equal(draw(near_max()), draw(normal()) * 1e30)
    assert repr(normal().scaled(1e3)) == "normal().scaled(1000)"


def test_a_scaled_pool_entry_is_the_official_inputs_times_the_scale(softmax_entries: dict[str, PoolEntry]) -> None:
    (official_x,) = inputs_of(softmax_entries[f"official/s={TRIAL_SEEDS[0]}/official"])
    for scale in (1000.0,):  # the other scalings are later draws (test of draw below)
        entry = softmax_entries[f"scaled/x={scale:g}/s={TRIAL_SEEDS[0]}/official"]
        assert entry.scale == scale and entry.distribution == "scaled"
        (x,) = inputs_of(entry)
        assert torch.equal(x, official_x * scale)


def test_mixed_range_multiplies_each_value_by_high_or_low() -> None:
    base = draw(normal())
    mixed = draw(mixed_range())
    ratio = (mixed / base)[base != 0]
    assert torch.all(torch.isclose(ratio, torch.tensor(1e3)) | torch.isclose(ratio, torch.tensor(1e-3)))
    alternating = draw(normal().mixed(1e3, 1e-3, "alternating")).flatten()
    assert torch.equal(alternating[0::2], base.flatten()[0::2] * 1e3)
    assert torch.equal(alternating[1::2], base.flatten()[1::2] * torch.tensor(1e-3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_every_distribution_keeps_the_template_shape_and_dtype(dtype: torch.dtype) -> None:
    like = template((5, 3, 17), dtype)
    for dist in (official(), normal(), uniform_pm1(), uniform(2, 5), lognormal(), laplace(), zeros(),
                 constant(0.5), ramp(), near_ties(), near_max(), mixed_range(), normal().sorted()):
        x = draw(dist, like=like)
        assert x.shape == like.shape and x.dtype == dtype, dist


def test_distributions_draw_what_they_promise() -> None:
    assert torch.all(draw(zeros()) == 0)
    assert torch.all(draw(constant(0.5)) == 0.5)
    u = draw(uniform_pm1())
    assert -1 <= float(u.min()) and float(u.max()) < 1 and float(u.min()) < -0.9
    assert float(draw(lognormal()).min()) > 0
    assert float(draw(laplace()).abs().max()) > 4  # heavier tails than the normal's at this size
    s = draw(normal().sorted())
    assert torch.all(s.flatten()[1:] >= s.flatten()[:-1]) and torch.all(s[:, 1:] >= s[:, :-1])
    d = draw(normal().sorted(descending=True))
    assert torch.all(d.flatten()[1:] <= d.flatten()[:-1])
    r = draw(ramp())
    assert float(r.flatten()[0]) == -1 and float(r.flatten()[-1]) == 1
    t = draw(near_ties())
    assert 1.0 <= float(t.min()) and float(t.max()) <= 1.0001 + 2**-23 and len(torch.unique(t)) > 1
    assert float(draw(near_max()).abs().max()) > 1e30
    assert float(draw(near_max(), like=template(dtype=torch.float16)).abs().max()) > 6e4


def test_different_seeds_draw_different_values() -> None:
    assert not torch.equal(draw(normal(), seed=1), draw(normal(), seed=2))


# ---------------------------------------------------------------------------------------------------------
# Pool files


def test_a_shipped_pool_loads_by_name_or_by_path() -> None:
    assert "default" in shipped_pools()
    by_name = Pool.load("default")
    by_path = Pool.load(pools_dir() / "default.toml")
    assert by_name.name == "default" and by_name.keys() == by_path.keys()
    assert by_name.max_elements == 2**24


def test_keys_name_distribution_params_scale_seed_and_variant(tmp_path: Path) -> None:
    pool = Pool.load(write_pool(tmp_path, (
        'schema_version = 1\n'
        '[[entries]]\ndistribution = "constant"\nvalue = 0.5\nseeds = [1]\nvariants = ["official", "odd"]\n'
        '[[entries]]\ndistribution = "normal"\nseed = 7\nscales = [1e-6, 3]\n'
        '[[entries]]\ndistribution = "sorted"\norder = "ascending"\nseeds = [0]\n'
        '[[entries]]\ndistribution = "mixed_range"\npattern = "alternating"\nof = "laplace"\nseeds = [0]\n'
        '[[entries]]\ndistribution = "official"\nseeds = "kernelbench"\n'
    )))
    assert pool.keys() == [
        "constant/value=0.5/s=1/official",
        "constant/value=0.5/s=1/odd",
        "normal/x=1e-06/s=7/official",
        "normal/x=3/s=7/official",
        "sorted/s=0/official",
        "mixed_range/pattern=alternating/of=laplace/s=0/official",
    ] + [f"official/s={seed}/official" for seed in TRIAL_SEEDS]
    entry = pool.get("normal/x=3/s=7/official")
    assert (entry.distribution, entry.seed, entry.shape, entry.scale) == ("normal", 7, "official", 3.0)
    assert entry.index == 2 and not entry.resolved


BAD_POOLS = [
    ("no_version", '[[entries]]\ndistribution = "normal"\nseeds = [0]\n',
     "pool bad.toml: schema_version is missing (this version of oracleaudit reads 1)"),
    ("future_version", 'schema_version = 2\n[[entries]]\ndistribution = "normal"\nseeds = [0]\n',
     "pool bad.toml: schema_version must be 1, got 2"),
    ("not_toml", 'schema_version = 1\n[[entries]\n',
     "pool bad.toml: not valid TOML: "),
    ("no_entries", 'schema_version = 1\n',
     "pool bad.toml: no entries (add [[entries]] tables)"),
    ("unknown_top", 'schema_version = 1\nmax_element = 5\n[[entries]]\ndistribution = "normal"\nseeds = [0]\n',
     "pool bad.toml: unknown top-level field 'max_element'"),
    ("bad_limit", 'schema_version = 1\nmax_elements = 0\n[[entries]]\ndistribution = "normal"\nseeds = [0]\n',
     "pool bad.toml: max_elements must be an integer ≥ 1, got 0"),
    ("unknown_distribution",
     'schema_version = 1\n[[entries]]\ndistribution = "zeros"\nseeds = [0]\n'
     '[[entries]]\ndistribution = "normal"\nseeds = [1]\n[[entries]]\ndistribution = "gauss"\nseeds = [0]\n',
     "pool bad.toml: entry 3: unknown distribution 'gauss' (known: official, normal, "),
    ("no_distribution", 'schema_version = 1\n[[entries]]\nseeds = [0]\n',
     "pool bad.toml: entry 1: distribution is missing"),
    ("no_seeds", 'schema_version = 1\n[[entries]]\ndistribution = "normal"\n',
     'pool bad.toml: entry 1: seeds is missing (a list of integers, or "kernelbench")'),
    ("empty_seeds", 'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = []\n',
     "pool bad.toml: entry 1: seeds is empty"),
    ("negative_seed", 'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [-1]\n',
     "pool bad.toml: entry 1: seeds must be integers in [0, 2**64 - 1], got -1"),
    ("string_seeds", 'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = "all"\n',
     "pool bad.toml: entry 1: seeds must be a list of integers or \"kernelbench\", got 'all'"),
    ("repeated_seed", 'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [3, 3]\n',
     "pool bad.toml: entry 1: seeds repeat a value: [3, 3]"),
    ("randn42_other_seed", 'schema_version = 1\n[[entries]]\ndistribution = "randn_seed42"\nseeds = [7]\n',
     "pool bad.toml: entry 1: seeds: randn_seed42 always uses seed 42, got [7]"),
    ("unknown_field", 'schema_version = 1\n[[entries]]\ndistribution = "constant"\nvalu = 0.5\nseeds = [0]\n',
     "pool bad.toml: entry 1: unknown field 'valu' for distribution 'constant' (allowed: distribution, seeds,"),
    ("missing_param", 'schema_version = 1\n[[entries]]\ndistribution = "constant"\nseeds = [0]\n',
     "pool bad.toml: entry 1: distribution 'constant' needs value"),
    ("param_type", 'schema_version = 1\n[[entries]]\ndistribution = "constant"\nvalue = "half"\nseeds = [0]\n',
     "pool bad.toml: entry 1: value must be a finite number, got a string ('half')"),
    ("param_nan", 'schema_version = 1\n[[entries]]\ndistribution = "constant"\nvalue = nan\nseeds = [0]\n',
     "pool bad.toml: entry 1: value must be a finite number, got a number (nan)"),
    ("bad_choice", 'schema_version = 1\n[[entries]]\ndistribution = "sorted"\norder = "up"\nseeds = [0]\n',
     "pool bad.toml: entry 1: order must be one of ascending, descending, got 'up'"),
    ("bad_base", 'schema_version = 1\n[[entries]]\ndistribution = "near_max"\nof = "zeros"\nseeds = [0]\n',
     "pool bad.toml: entry 1: of must be one of official, normal, uniform_pm1, lognormal, laplace, got 'zeros'"),
    ("scaled_without_scale", 'schema_version = 1\n[[entries]]\ndistribution = "scaled"\nseeds = [0]\n',
     "pool bad.toml: entry 1: distribution 'scaled' needs scale or scales"),
    ("scaled_official", 'schema_version = 1\n[[entries]]\ndistribution = "official"\nseeds = [0]\nscale = 3\n',
     "pool bad.toml: entry 1: scale: to scale the official inputs use distribution 'scaled'"),
    ("scale_and_scales",
     'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [0]\nscale = 3\nscales = [2]\n',
     "pool bad.toml: entry 1: give scale or scales, not both"),
    ("infinite_scale", 'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [0]\nscale = inf\n',
     "pool bad.toml: entry 1: scale must be a finite number, got a number (inf)"),
    ("unknown_variant",
     'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [0]\nvariants = ["tiny"]\n',
     "pool bad.toml: entry 1: unknown variant 'tiny' (known: official, odd, small, batch)"),
    ("duplicate_key",
     'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [0, 1]\n'
     '[[entries]]\ndistribution = "normal"\nseeds = [1]\n',
     "pool bad.toml: entry 2: key 'normal/s=1/official' repeats one of entry 1"),
]


@pytest.mark.parametrize("body, message", [(b, m) for _, b, m in BAD_POOLS], ids=[i for i, _, _ in BAD_POOLS])
def test_a_bad_pool_file_gives_a_one_line_error_naming_the_file_and_field(
    tmp_path: Path, body: str, message: str
) -> None:
    with pytest.raises(OracleAuditError) as caught:
        Pool.load(write_pool(tmp_path, body, "bad.toml"))
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text


def test_an_unknown_pool_name_or_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OracleAuditError, match=r"no shipped pool named 'nope' \(shipped: default"):
        Pool.load("nope")
    with pytest.raises(OracleAuditError, match=r"pool .*missing.toml: no such file"):
        Pool.load(tmp_path / "missing.toml")


# ---------------------------------------------------------------------------------------------------------
# The default pool


ORACLE_NEEDS = {
    "kernelbench (5 trial seeds from 42)": [f"official/s={s}/official" for s in TRIAL_SEEDS],
    "kernelbench-verified hidden configs": [f"official/s={TRIAL_SEEDS[-1]}/official"] + [
        f"scaled/draw={k}/x={x}/s={TRIAL_SEEDS[-1]}/official" for k, x in ((2, "3"), (3, "0.01"), (4, "-1"))],
    "robust-kbench normal trials (TF32 off) and batch sizes": [
        f"normal/math=no_tf32/weights=trial/s={s}/official" for s in TRIAL_SEEDS]
    + [f"normal/math=no_tf32/weights=trial/s={s}/batch" for s in TRIAL_SEEDS[:2]] + ["official/s=42/batch"],
    "kernelbench-v0 randn trials": [f"normal/s={s}/official" for s in TRIAL_SEEDS],
    "kernelbench-x after seed 0": ["official/s=0/official"],
    "autokernel-ops randn seed 42, stability stage, odd sizes": [
        "randn_seed42/s=42/official", "near_max/s=42/official", "randn_seed42/x=1e-06/s=42/official",
        "mixed_range/s=42/official", "zeros/s=42/official", "constant/value=0.5/s=42/official",
        "randn_seed42/s=42/odd", "randn_seed42/s=42/small",
    ],
    "sol-execbench 10 consecutive rounds of randn after seed 200": ["normal/s=200/official"] + [
        f"normal/draw={k}/s=200/official" for k in range(2, 11)],
    "fp64-fuzz adversarial inputs": [
        "normal/x=1000/s=42/official", "lognormal/s=0/official", "laplace/s=0/official", "sorted/s=0/official",
        "sorted/order=descending/s=1/official", "ramp/s=0/official", "near_ties/s=0/official",
        "mixed_range/pattern=alternating/s=0/official", "near_ties/s=0/odd", "sorted/s=0/odd",
    ],
    "the other listed distributions": [
        "uniform_pm1/s=42/official", "scaled/x=1000/s=734796314/official", "official/s=42/odd",
        "official/s=42/small",
    ],
}


@pytest.mark.parametrize("oracle", list(ORACLE_NEEDS))
def test_the_default_pool_holds_the_inputs_each_catalog_oracle_needs(default_pool: Pool, oracle: str) -> None:
    missing = [key for key in ORACLE_NEEDS[oracle] if key not in default_pool.keys()]
    assert missing == []


def test_the_default_pool_uses_every_distribution_and_variant(default_pool: Pool) -> None:
    assert {e.distribution for e in default_pool} == set(DISTRIBUTIONS) - {"uniform"}
    assert default_pool.shapes == ("official", "odd", "small", "batch")


@pytest.mark.parametrize("problem", [SOFTMAX, CROSS_ENTROPY, MATMUL, TRANSFORMER], ids=lambda p: p.stem)
def test_the_default_pool_gives_a_problem_56_to_72_inputs(default_pool: Pool, problem: Path) -> None:
    entries = default_pool.entries_for(problem)
    assert 56 <= len(entries) <= 72
    assert len({e.key for e in entries}) == len(entries)


# ---------------------------------------------------------------------------------------------------------
# derive = "draws": distributions replace get_inputs()'s draws, so what it does with them still applies

KL_DIV = bundled_root() / "level1" / "51_KLDivLoss.py"
HINGE = bundled_root() / "level1" / "50_HingeLoss.py"
DRAWS_ENTRIES = """
schema_version = 1
derive = "{derive}"
[[entries]]
distribution = "normal"
seeds = [0]
scales = [1000.0]
[[entries]]
distribution = "lognormal"
seeds = [1]
[[entries]]
distribution = "scaled"
seeds = [734796314]
scales = [-1.0]
"""


def draws_pools() -> tuple[Pool, Pool]:
    return (Pool.from_text(DRAWS_ENTRIES.format(derive="draws")),
            Pool.from_text(DRAWS_ENTRIES.format(derive="outputs")))


def test_under_draws_kl_div_inputs_stay_probability_rows_under_any_drawn_distribution() -> None:
    draws, outputs = draws_pools()
    for entry, replaced in zip(draws.entries_for(KL_DIV), outputs.entries_for(KL_DIV)):
        if entry.dist.official_based:
            continue
        for x in inputs_of(entry, KL_DIV):
            assert (x >= 0).all() and torch.allclose(x.sum(-1), torch.ones(x.shape[0]))
        assert not any(torch.allclose(x.sum(-1), torch.ones(x.shape[0])) for x in inputs_of(replaced, KL_DIV)), \
            "replacing get_inputs()'s result loses the softmax"


def test_under_draws_hinge_targets_stay_plus_or_minus_one_and_predictions_are_drawn() -> None:
    draws, outputs = draws_pools()
    official = Pool.load("default").entries_for(HINGE)[0]
    _, official_targets = inputs_of(official, HINGE)
    entry = draws.entries_for(HINGE)[0]  # normal × 1000
    predictions, targets = inputs_of(entry, HINGE)
    assert set(targets.unique().tolist()) <= {-1.0, 1.0}
    assert predictions.abs().max() > 10, "the predictions are the distribution's draws"
    _, replaced_targets = inputs_of(outputs.entries_for(HINGE)[0], HINGE)
    assert not set(replaced_targets.unique().tolist()) <= {-1.0, 1.0}


def test_draws_and_outputs_give_bitwise_the_same_inputs_where_get_inputs_only_draws() -> None:
    draws, outputs = draws_pools()
    for problem in (SOFTMAX, CROSS_ENTROPY, MATMUL):
        for a, b in zip(draws.entries_for(problem), outputs.entries_for(problem)):
            assert_bitwise_equal(inputs_of(a, problem), inputs_of(b, problem))


def test_official_based_entries_are_scaled_after_get_inputs_under_both_derivations() -> None:
    draws, _ = draws_pools()
    (entry,) = [e for e in draws.entries_for(KL_DIV) if e.dist.official_based]
    official = [e for e in Pool.load("default").entries_for(KL_DIV) if e.key == "official/s=734796314/official"][0]
    assert_bitwise_equal(inputs_of(entry, KL_DIV), [-x for x in inputs_of(official, KL_DIV)])


def test_a_get_inputs_that_draws_otherwise_has_its_result_replaced(tmp_path: Path) -> None:
    problem = tmp_path / "level1" / "1_Ones.py"
    problem.parent.mkdir()
    problem.write_text("import torch\nimport torch.nn as nn\nn_rows = 64\n\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return x * 2\n\n\ndef get_inputs():\n"
                       "    return [torch.empty(n_rows).uniform_(0, 1) + 0.0 * torch.ones(n_rows)]\n\n\n"
                       "def get_init_inputs():\n    return []\n")
    draws, outputs = draws_pools()
    for a, b in zip(draws.entries_for(problem), outputs.entries_for(problem)):
        assert_bitwise_equal(inputs_of(a, problem), inputs_of(b, problem))


def test_draws_restore_torch_s_functions_also_when_get_inputs_raises(tmp_path: Path) -> None:
    import oracleaudit.pool as pools

    problem = tmp_path / "level1" / "1_Raises.py"
    problem.parent.mkdir()
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return x\n\n\ndef get_inputs():\n"
                       "    torch.rand(3)\n    raise ValueError('no inputs')\n\n\ndef get_init_inputs():\n    return []\n")
    before = {name: getattr(torch, name) for name in pools.DRAW_FUNCTIONS}
    entry = draws_pools()[0].entries[0]
    resolved = replace(entry, overrides=(), input_shapes=None)
    with pytest.raises(ValueError, match="no inputs"):
        resolved.make_inputs(load_problem_module(problem, {}))
    assert {name: getattr(torch, name) for name in pools.DRAW_FUNCTIONS} == before


def test_derive_must_be_draws_or_outputs() -> None:
    with pytest.raises(OracleAuditError, match="derive must be one of outputs, draws, got 'input'"):
        Pool.from_text(DRAWS_ENTRIES.format(derive="input"))


def _inputs_of(pool: Pool, key: str, problem: Path) -> list:
    entry = next(e for e in pool.entries_for(problem) if e.key == key)
    return entry.make_inputs(entry.load_problem(problem))


def test_an_entry_s_draw_is_that_call_of_get_inputs_after_its_seed_the_rng_continuing() -> None:
    """draw = 3 of the official inputs is the third get_inputs() after manual_seed (labels too); of a drawn
    distribution, the third draw of its generator; both keys name the draw."""
    pool = Pool.from_text('schema_version = 1\nderive = "draws"\n[[entries]]\ndistribution = "scaled"\nseeds = [5]\n'
                          'draw = 3\nscale = 2.0\n[[entries]]\ndistribution = "normal"\nseeds = [5]\ndraws = [1, 2]\n')
    assert pool.keys() == ["scaled/draw=3/x=2/s=5/official", "normal/s=5/official", "normal/draw=2/s=5/official"]
    module = load_problem_module(CROSS_ENTROPY)
    torch.manual_seed(5)
    expected = [module.get_inputs() for _ in range(3)][-1]
    third = _inputs_of(pool, "scaled/draw=3/x=2/s=5/official", CROSS_ENTROPY)
    assert torch.equal(third[0], expected[0] * 2.0) and torch.equal(third[1], expected[1])
    generator = torch.Generator().manual_seed(5)
    first, second = (torch.randn(expected[0].shape, generator=generator) for _ in range(2))
    assert torch.equal(_inputs_of(pool, "normal/s=5/official", CROSS_ENTROPY)[0], first)
    assert torch.equal(_inputs_of(pool, "normal/draw=2/s=5/official", CROSS_ENTROPY)[0], second)


def test_an_entry_s_math_mode_is_in_its_key_and_its_flags_hold_only_inside_math_flags() -> None:
    from oracleaudit.pool import math_flags, recorded_mode

    pool = Pool.from_text('schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [0]\nmath_mode = "no_tf32"\n')
    (entry,) = pool.entries
    assert entry.key == "normal/math=no_tf32/s=0/official" and entry.math_mode == "no_tf32"
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with math_flags("tf32"):
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    mode = recorded_mode("no_tf32", "cpu")
    assert (mode["ref_matmul_tf32"], mode["ref_cudnn_tf32"], mode["ref_device"]) == (False, False, "cpu")


def test_an_entry_with_trial_weights_builds_its_models_after_its_own_seed() -> None:
    pool = Pool.from_text('schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [7]\nweights = "trial"\n'
                          '[[entries]]\ndistribution = "normal"\nseeds = [7]\n')
    trial, fixed = pool.entries
    assert trial.key == "normal/weights=trial/s=7/official" and fixed.key == "normal/s=7/official"
    assert (trial.weight_seed, fixed.weight_seed) == (7, 42)
    assert trial.as_json()["weights"] == "trial" and "weights" not in fixed.as_json()


@pytest.mark.parametrize("fields, message", [
    ('weights = "random"', "weights must be one of fixed, trial"),
    ("draw = 0", "draw must be integers in [1, 1000]"),
    ("draws = [2, 2]", "draws repeat a value"),
    ("draw = 2\ndraws = [3]", "give draw or draws, not both"),
    ('math_mode = "fast"', "math_mode must be one of default, no_tf32, tf32"),
])
def test_a_bad_draw_or_math_mode_of_an_entry_names_the_entry(fields: str, message: str) -> None:
    with pytest.raises(OracleAuditError) as err:
        Pool.from_text(f'schema_version = 1\n[[entries]]\ndistribution = "normal"\nseeds = [0]\n{fields}\n',
                       source=Path("mine.toml"))
    assert str(err.value).startswith("pool mine.toml: entry 1: ") and message in str(err.value)
