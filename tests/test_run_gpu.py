"""The run stage on a real GPU: one build for all variants, crashes, hangs and OOM isolated per mutant,
resumption without loss or duplication, and the namespace-cloned original bitwise equal to a plain build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oracleaudit import runner
from oracleaudit.mutant import Mutant, mutant_id, write_mutants
from oracleaudit.source import line_col, load_units
from oracleaudit.store import EvidenceStore

DATA = Path(__file__).parent / "testdata" / "run_root"
SOLUTION = "solutions/level1/1_ScaleShift.py"
PROBLEM = "level1/1_ScaleShift.py"

# (name, original text, replacement, expected status of every observation)
EDITS = [
    ("wrong_constant", "2.0f * x[i]", "2.5f * x[i]", "Ok"),
    ("illegal_address", "y[i] = 2.0f", "y[i + 1000000000] = 2.0f", "RuntimeError"),
    ("hang", "if (i < n) {", "volatile const float* spin = x; while (spin[0] == spin[0]) { } if (i < n) {",
     "Timeout"),
    ("huge_allocation", "torch::empty_like(x)", "torch::empty({1LL << 42}, x.options())", "OOM"),
]


def make_mutants(root: Path) -> dict[str, Mutant]:
    path = root / SOLUTION
    unit = load_units(path)[0]
    made = {}
    for name, original, replacement, _ in EDITS:
        start = unit.file_text.index(original)
        end = start + len(original)
        made[name] = Mutant(
            id=mutant_id("level1/1_ScaleShift", SOLUTION, f"test.{name}", start, end, replacement),
            problem="level1/1_ScaleShift", problem_file=PROBLEM, source=SOLUTION, source_sha256=unit.sha256,
            unit=0, rule=f"test.{name}", family="test", start=start, end=end,
            start_line=line_col(unit.file_text, start)[0], start_col=line_col(unit.file_text, start)[1],
            end_line=line_col(unit.file_text, end)[0], end_col=line_col(unit.file_text, end)[1],
            original=original, replacement=replacement, scope="device", function=None)
    write_mutants(root / "mutants", list(made.values()), {SOLUTION: unit.file_text})
    return made


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    shutil.copytree(DATA, root, dirs_exist_ok=True)
    mutants = make_mutants(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        first = runner.run(Path("mutants"), Path("evidence"), pool=str(root / "tiny_pool.toml"), gpus=1,
                           timeout_factor=10.0, timeout_floor_s=15.0, show_progress=False)
        rows_after_first = EvidenceStore(root / "evidence").open().read()
        second = runner.run(Path("mutants"), Path("evidence"), pool=str(root / "tiny_pool.toml"), gpus=1,
                            show_progress=False)
    store = EvidenceStore(root / "evidence").open()
    return root, mutants, first, second, rows_after_first, store.read()


@pytest.mark.gpu
def test_each_fault_gets_its_own_status_and_the_run_goes_on(evidence) -> None:
    _, mutants, first, _, _, rows = evidence
    assert first.errors == []
    for name, _, _, status in EDITS:
        statuses = set(rows[rows.mutant_id == mutants[name].id].status)
        assert statuses == {status}, (name, statuses)
    original = rows[rows.mutant_id == "original"]
    assert set(original.status) == {"Ok"} and len(original) == 2
    assert (original.fp64_max_abs < 1e-5).all()
    wrong = rows[rows.mutant_id == mutants["wrong_constant"].id]
    assert (wrong.fp64_max_abs > 0.1).all() and not wrong.fp32_hull_r.isna().any()
    assert set(rows[rows.mutant_id == "reference"].status) == {"Ok"}


@pytest.mark.gpu
def test_running_again_records_nothing_twice_and_loses_nothing(evidence) -> None:
    _, _, first, second, rows_after_first, rows = evidence
    assert second.variants == 0 and second.skipped == len(EDITS) + 1
    assert len(rows) == len(rows_after_first)
    keys = rows[["problem", "mutant_id", "input_id", "output_index"]]
    assert not keys.duplicated().any()


@pytest.mark.gpu
def test_the_namespace_cloned_original_gives_bitwise_the_outputs_of_a_plain_build(evidence) -> None:
    import torch

    from oracleaudit import build
    from oracleaudit.problem import load_solution_module

    root, *_ = evidence
    solution = root / SOLUTION
    plan = build.plan_build(solution, [])
    built = build.build(plan, root / "evidence" / "builds" / "bitwise")
    cloned = build.load_variant(plan, built, plan.variants[0]).ModelNew().cuda()
    plain = load_solution_module(solution).ModelNew().cuda()
    for seed in range(5):
        torch.manual_seed(seed)
        x = torch.randn(100_003, device="cuda")
        assert torch.equal(cloned(x), plain(x))
