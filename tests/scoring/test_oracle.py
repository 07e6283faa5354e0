"""Oracle protocols: the catalog loads and states the published facts; bad files fail on one line naming the
file and the field; selectors draw the intended pool inputs; hybrids swap whole components."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oracleaudit.errors import OracleAuditError
from oracleaudit.kernelbench import official_seeds
from oracleaudit.pool import Pool
from oracleaudit.scoring.oracle import COMPONENTS, Oracle, catalog, catalog_dir

CATALOG = ["autokernel", "autokernel-ops", "fp64-fuzz", "kernelbench", "kernelbench-v0", "kernelbench-v0.1",
           "kernelbench-verified", "kernelbench-verified-strict", "kernelbench-x", "robust-kbench", "sol-execbench"]
POOL_KEYS = Pool.load("default").keys()

GOOD = """
schema_version = 1
name = "good"
description = "a good protocol"
[tolerance]
float32 = { atol = 1e-4, rtol = 1e-4 }
[[stages]]
inputs = [{ distribution = "official", seeds = "kernelbench" }]
"""


def drawn(oracle: Oracle) -> dict[str, list[str]]:
    return {s.name: [k for k in POOL_KEYS if s.draws(k)] for s in oracle.stages}


def test_the_catalog_holds_one_protocol_per_published_checker() -> None:
    assert catalog() == CATALOG
    assert catalog_dir() == Path(__file__).resolve().parents[2] / "oracles"


@pytest.mark.parametrize("name", CATALOG)
def test_every_catalog_protocol_loads_with_a_one_line_description_and_draws_pool_inputs(name: str) -> None:
    oracle = Oracle.load(name)
    assert oracle.name == name and "\n" not in oracle.description and oracle.description
    assert all(keys for keys in drawn(oracle).values()), drawn(oracle)


def test_kernelbench_draws_the_five_official_trials_at_1e4_and_v01_at_1e2() -> None:
    kb, v01 = Oracle.load("kernelbench"), Oracle.load("kernelbench-v0.1")
    assert drawn(kb) == {"trials": [f"official/s={s}/official" for s in official_seeds()]}
    assert kb.tolerance.lookup("level1/1_X", "float32").atol == 1e-4
    assert kb.tolerance.lookup("level1/1_X", "float16").atol == 1e-2
    assert v01.tolerance.lookup("level1/1_X", "float32").rtol == 1e-2
    assert kb.rule.nan == "fails" and kb.timeout_s == 180 and "ShapeMismatch" in kb.fail_statuses
    assert kb.reference.math_mode == "default"


def test_verified_adds_four_hidden_scaled_configs_that_skip_a_missing_reference() -> None:
    verified = Oracle.load("kernelbench-verified")
    hidden = drawn(verified)["hidden"]
    last = official_seeds()[-1]
    assert hidden == [f"official/s={last}/official"] + [
        f"scaled/draw={k}/x={x}/s={last}/official" for k, x in ((2, "3"), (3, "0.01"), (4, "-1"))]
    assert verified.stages[1].missing_reference == "skip"
    assert verified.tolerance.lookup("p", "float32").atol == 1e-3


def test_autokernel_ops_relaxes_its_stability_stage_ten_times_and_lets_nonfinite_in_both_pass() -> None:
    ak = Oracle.load("autokernel-ops")
    stability = next(s for s in ak.stages if s.name == "numerical_stability")
    assert stability.tolerance_scale == 10
    assert ak.stage_rule(stability).nan == "nonfinite_in_both_passes"
    assert ak.stage_statuses(stability) == (("RuntimeError", "Timeout", "ShapeMismatch", "DtypeMismatch"), ("OOM",))
    assert ak.tolerance.lookup("level1/23_Softmax", "float32").atol == 1e-5
    assert ak.tolerance.lookup("level1/1_Square_matrix_multiplication_", "float32").atol == 1e-4
    determinism = next(s for s in ak.stages if s.name == "determinism")
    assert ak.stage_rule(determinism).bitwise_repeat and not ak.stage_rule(determinism).allclose


def test_sol_execbench_counts_elements_within_tolerance_and_fails_nonfinite_and_all_zero() -> None:
    sol = Oracle.load("sol-execbench")
    assert sol.rule.min_fraction_within == 0.99 and not sol.rule.allclose
    assert sol.rule.nonfinite_output_fails and sol.rule.all_zero_fails
    assert len(drawn(sol)["rounds"]) == 10


def test_robust_kbench_uses_a_tf32_off_reference_and_the_repeat_check() -> None:
    robust = Oracle.load("robust-kbench")
    assert robust.reference.math_mode == "no_tf32" and robust.rule.repeat_allclose
    assert drawn(robust)["batch-settings"] == [f"normal/math=no_tf32/weights=trial/s={seed}/batch" for seed in official_seeds()[:2]]


def test_fp64_fuzz_compares_against_the_fp64_reference() -> None:
    assert Oracle.load("fp64-fuzz").reference.precision == "fp64"


def test_a_user_protocol_is_loaded_from_its_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(GOOD.replace('name = "good"\n', ""))
    oracle = Oracle.load(str(path))
    assert oracle.name == "mine" and oracle.path == path


def test_an_unknown_catalog_name_lists_the_catalog() -> None:
    with pytest.raises(OracleAuditError, match="no catalog oracle named 'kernelbenchh'.*kernelbench-verified"):
        Oracle.load("kernelbenchh")


def test_a_missing_file_is_named() -> None:
    with pytest.raises(OracleAuditError, match=r"oracle nowhere/x\.toml: no such file"):
        Oracle.load("nowhere/x.toml")


def protocol_text(head: str = 'schema_version = 1\ndescription = "a good protocol"', top: str = "",
                  tolerance: str = "[tolerance]\nfloat32 = { atol = 1e-4, rtol = 1e-4 }", table: str = "",
                  stage: str = "") -> str:
    """A protocol file: top-level keys, then tables, then the stages (TOML needs keys before tables)."""
    stages = '[[stages]]\ninputs = [{ distribution = "official", seeds = "kernelbench" }]'
    return "\n".join(part for part in (head, top, table, tolerance, stages, stage) if part) + "\n"


BAD = [
    (dict(head="schema_version = 2\ndescription = 'x'"), "schema_version must be 1, got 2"),
    (dict(head="description = 'x'"), "schema_version is missing"),
    (dict(head='schema_version = 1\ndescription = "two\\nlines"'), "description must be a one-line string"),
    (dict(top='name = "has space"'), "name must be letters, digits"),
    (dict(top='combine = "any"'), "combine must be one of all, got 'any'"),
    (dict(top='colour = "red"'), "unknown field 'colour'"),
    (dict(tolerance="[tolerance]\nfloat32 = { atol = -1.0, rtol = 1e-4 }"),
     r"tolerance\.float32\.atol must be a number ≥ 0, got -1"),
    (dict(tolerance="[tolerance]\nfloat32 = { atol = 1e-4 }"), r"tolerance\.float32\.rtol is missing"),
    (dict(tolerance="[tolerance]\nfloat99 = { atol = 1e-4, rtol = 1e-4 }"), "tolerance: unknown dtype 'float99'"),
    (dict(tolerance="[tolerance]\nfloat16 = { atol = 1e-4, rtol = 1e-4 }"), "tolerance needs a float32"),
    (dict(tolerance=""), "tolerance is missing"),
    (dict(table='[rule]\nnan = "ignore"'), r"rule\.nan must be one of fails, equal_nan, nonfinite_in_both_passes"),
    (dict(table='[rule]\nallclose = "yes"'), r"rule\.allclose must be true or false"),
    (dict(table="[rule]\nmin_fraction_within = 1.5"), r"rule\.min_fraction_within must be a number ≥ 0 and ≤ 1"),
    (dict(table="[rule]\nallclose = false"), "the rule checks nothing"),
    (dict(table="[rule]\nbogus = 1"), r"rule: unknown field 'bogus'"),
    (dict(table='[reference]\nprecision = "fp16"'), r"reference\.precision must be one of fp32, fp64, got 'fp16'"),
    (dict(table='[reference]\nprecision = "fp64"\nmath_mode = "tf32"'), "does not fit precision 'fp64'"),
    (dict(table='[statuses]\nfail = ["Crash"]'), r"statuses\.fail: unknown status 'Crash'"),
    (dict(table='[statuses]\nfail = ["Timeout"]'),
     "RuntimeError, OOM, ShapeMismatch, DtypeMismatch must be listed in fail or skip"),
    (dict(table="[statuses]\ntimeout_s = 0"), r"statuses\.timeout_s must be a number > 0, got 0"),
    (dict(stage="[[stages]]\ninputs = []"), r"stages\[2\]\.inputs must be a non-empty list"),
    (dict(stage='[[stages]]\ninputs = [{ distribution = "gauss" }]'),
     r"stages\[2\]\.inputs\[1\]\.distribution: unknown distribution 'gauss'"),
    (dict(stage='[[stages]]\ninputs = [{ distribution = "normal", variants = ["tiny"] }]'), "unknown variant 'tiny'"),
    (dict(stage='[[stages]]\ninputs = [{ distribution = "normal", seeds = [-1] }]'),
     r"stages\[2\]\.inputs\[1\]\.seeds must be"),
    (dict(stage='[[stages]]\ninputs = [{ distribution = "normal", params = { mu = 1 } }]'), "has no parameter 'mu'"),
    (dict(stage='[[stages]]\ninputs = ["normal/s=0/official"]\ntolerance_scale = 0'),
     r"stages\[2\]\.tolerance_scale must be a number > 0"),
    (dict(stage='[[stages]]\ninputs = ["x"]\nmissing_reference = "raise"'),
     r"stages\[2\]\.missing_reference must be one of skip, fail"),
    (dict(stage='[[stages]]\nname = "stage1"\ninputs = ["x"]'), "stages repeat a name"),
    (dict(stage='[[stages]]\ninputs = ["x"]\nrule = { allclose = false }'), r"stages\[2\]\.rule: the rule checks nothing"),
    (dict(table="[tolerance.per_problem]\nproblems = ['x']"), "per_problem must be an array of tables"),
    (dict(stage='[[stages]]\ninputs = ["x"]\nproblems = "level1/*"'),
     r"stages\[2\]\.problems must be a list of problem-label patterns, got 'level1/\*'"),
    (dict(stage="[[stages]\n"), "not valid TOML"),
    (dict(table='[rule]\nrtol_scales = "kernel"'), r"rule\.rtol_scales must be one of reference, output, got 'kernel'"),
    (dict(table='[rule]\nrepeat_allclose = 1'), r"rule\.repeat_allclose must be true or false"),
    (dict(table='[rule]\nnonfinite_reference_fails = "no"'), r"rule\.nonfinite_reference_fails must be true or false"),
    (dict(table='[statuses]\ntimeout_s = 180\ntimeout_scope = "trial"'),
     r"statuses\.timeout_scope must be one of run, evaluation, got 'trial'"),
    (dict(stage='[[stages]]\ninputs = ["x"]\nnonfinite_reference = "fail"'),
     r"stages\[2\]\.nonfinite_reference must be one of judge, skip, got 'fail'"),
]


@pytest.mark.parametrize("parts,message", BAD)
def test_a_bad_protocol_fails_on_one_line_naming_the_file_and_the_field(tmp_path: Path, parts: dict,
                                                                        message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(protocol_text(**parts))
    with pytest.raises(OracleAuditError, match=message) as raised:
        Oracle.load(path)
    assert str(raised.value).startswith("oracle bad.toml: ") and "\n" not in str(raised.value).strip()


def test_the_good_protocol_of_the_bad_table_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.toml"
    path.write_text(protocol_text())
    assert Oracle.load(path).name == "good"


def test_fraction_within_needs_equal_atol_and_rtol() -> None:
    text = GOOD.replace("atol = 1e-4, rtol = 1e-4", "atol = 1e-4, rtol = 1e-3") + "[rule]\nmin_fraction_within = 0.9\n"
    with pytest.raises(OracleAuditError, match="atol 0.0001 ≠ rtol 0.001"):
        Oracle.from_text(text, source="x.toml")


def test_a_selector_without_scale_or_params_draws_only_the_plain_entries() -> None:
    oracle = Oracle.from_text(GOOD.replace('{ distribution = "official", seeds = "kernelbench" }',
                                           '{ distribution = "randn_seed42" }, { distribution = "mixed_range" }'))
    assert drawn(oracle)["stage1"] == ["randn_seed42/s=42/official", "mixed_range/s=42/official",
                                       "mixed_range/s=1/official"]


def test_string_inputs_are_exact_keys_or_glob_patterns() -> None:
    oracle = Oracle.from_text(GOOD.replace('{ distribution = "official", seeds = "kernelbench" }',
                                           '"zeros/s=42/small", "sorted/*/odd"'))
    assert set(drawn(oracle)["stage1"]) == {"zeros/s=42/small", "sorted/s=0/odd", "sorted/order=descending/s=1/odd"}


def test_a_stage_with_problems_runs_only_on_the_problems_its_patterns_match() -> None:
    oracle = Oracle.from_text(GOOD + 'problems = ["level1/23_*", "LEVEL2/[1]_Gemm"]\n')
    stage = oracle.stages[0]
    assert stage.applies("level1/23_Softmax") and stage.applies("level2/1_gemm")
    assert not stage.applies("level1/2_LeakyReLU") and not stage.applies("level2/11_Gemm")
    assert Oracle.from_text(GOOD).stages[0].applies("anything")


def test_hybrids_take_whole_components_and_differing_components_are_listed_in_order() -> None:
    v01, verified = Oracle.load("kernelbench-v0.1"), Oracle.load("kernelbench-verified")
    assert v01.differing_components(verified) == ["inputs", "tolerance", "reference"]  # verified casts inputs
    mixed = v01.hybrid(verified, ["inputs"])
    assert [s.name for s in mixed.stages] == ["trials", "hidden"] and mixed.tolerance == v01.tolerance
    assert v01.hybrid(verified, COMPONENTS).differing_components(verified) == []
    assert Oracle.load("kernelbench").differing_components(Oracle.load("robust-kbench")) == list(COMPONENTS)
    with pytest.raises(OracleAuditError, match="unknown protocol components"):
        v01.hybrid(verified, ["colour"])


def test_with_tolerance_sets_every_dtype_and_drops_per_problem_overrides() -> None:
    ak = Oracle.load("autokernel-ops").with_tolerance(1e-3)
    assert ak.tolerance.lookup("level1/23_Softmax", "float32").atol == 1e-3
    assert ak.tolerance.lookup("p", "bfloat16").rtol == 1e-3


def test_the_catalog_is_found_in_an_installed_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import oracleaudit.shipped as shipped

    package = tmp_path / "site" / "oracleaudit"
    shutil.copytree(catalog_dir(), package / "_shipped" / "oracles")
    monkeypatch.setattr(shipped, "_PACKAGE", package)
    assert catalog() == CATALOG


def test_each_checker_reads_the_inputs_its_checker_draws_in_the_default_pool() -> None:
    """KB-verified's hidden configs are the last trial's input and the next three calls scaled ×3, ×0.01,
    ×(−1); robust-kbench reads KernelBench's seeds with TF32 off; SOL-ExecBench ten consecutive draws after
    seed 200; kernelbench-v0 randn at KernelBench's seeds; KernelBench-X the official draw after seed 0."""
    last = official_seeds()[-1]
    assert drawn(Oracle.load("kernelbench-verified"))["hidden"] == [
        f"official/s={last}/official", f"scaled/draw=2/x=3/s={last}/official",
        f"scaled/draw=3/x=0.01/s={last}/official", f"scaled/draw=4/x=-1/s={last}/official"]
    assert drawn(Oracle.load("robust-kbench"))["trials"] == [
        f"normal/math=no_tf32/weights=trial/s={seed}/official" for seed in official_seeds()]
    assert drawn(Oracle.load("sol-execbench"))["rounds"] == ["normal/s=200/official"] + [
        f"normal/draw={k}/s=200/official" for k in range(2, 11)]
    assert drawn(Oracle.load("kernelbench-v0"))["trials"] == [f"normal/s={seed}/official" for seed in official_seeds()]
    assert drawn(Oracle.load("kernelbench-x"))["trials"] == ["official/s=0/official"]


@pytest.mark.parametrize("item, message", [
    ('{ distribution = "normal", draws = [0] }', "draws must be a non-empty list of integers ≥ 1"),
    ('{ distribution = "normal", draw = 2, draws = [2] }', "give draw or draws, not both"),
    ('{ distribution = "normal", math_mode = "fast" }', "math_mode must be one of default, no_tf32, tf32"),
    ('{ distribution = "normal", weights = "random" }', "weights must be one of fixed, trial"),
])
def test_a_bad_draw_or_math_mode_of_a_selector_fails_on_one_line(tmp_path: Path, item: str, message: str) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(f'schema_version = 1\ndescription = "d"\n[tolerance]\nfloat32 = {{ atol = 1e-4, rtol = 1e-4 }}\n'
                    f'[[stages]]\nname = "a"\ninputs = [{item}]\n')
    with pytest.raises(OracleAuditError, match="mine.toml") as err:
        Oracle.load(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_selector_of_trial_weights_matches_only_the_trial_weights_key() -> None:
    from oracleaudit.scoring.selector import InputSelector

    trial = InputSelector(distribution="normal", seeds=(7,), weights="trial")
    assert trial.matches("normal/weights=trial/s=7/official") and not trial.matches("normal/s=7/official")
    assert not InputSelector(distribution="normal", seeds=(7,)).matches("normal/weights=trial/s=7/official")


def test_the_input_cover_holds_one_input_of_each_catalog_oracle_and_shape_for_every_bundled_problem() -> None:
    from oracleaudit.pool.key import parse_input_key
    from oracleaudit.problem import bundled_root, problem_at
    from oracleaudit.scoring.oracle import input_cover

    oracles = [Oracle.load(name) for name in CATALOG]
    pool = Pool.load("default")
    for path in sorted(bundled_root().glob("level*/*.py")):
        problem = problem_at(path)
        keys = [e.key for e in pool.entries_for(problem)]
        cover = input_cover(problem.label, keys, oracles)
        assert list(cover) == [k for k in keys if k in cover], "in pool order"
        for oracle in oracles:
            draws = {k for k in keys if any(s.applies(problem.label) and s.draws(k) for s in oracle.stages)}
            for shape in {parse_input_key(k)["shape"] for k in draws}:
                assert {k for k in draws if parse_input_key(k)["shape"] == shape} & set(cover), \
                    (problem.label, oracle.name, shape)
        assert len(cover) <= 10, (problem.label, cover)
    label = "level1/19_L2Norm"
    keys = [e.key for e in pool.entries_for(problem_at(bundled_root() / f"{label}.py"))]
    assert input_cover(label, keys, oracles) == (
        "official/s=734796314/official", "normal/s=734796314/official",
        "normal/math=no_tf32/weights=trial/s=734796314/official", "normal/s=200/official", "official/s=0/official",
        "mixed_range/s=42/official", "randn_seed42/s=42/odd", "randn_seed42/s=42/small",
        "normal/math=no_tf32/weights=trial/s=734796314/batch", "uniform_pm1/s=0/odd")
    # kernelbench draws its five trials at the official shape only: one of them
    assert input_cover(label, keys, [Oracle.load("kernelbench")]) == ("official/s=734796314/official",)
    assert input_cover(label, keys, []) == ()
