"""Problems and solutions: discovery, pairing and module loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracleaudit.errors import OracleAuditError
from oracleaudit.problem import (
    Problem,
    bundled_root,
    discover_problems,
    int_constants,
    load_problem_module,
    pair_solutions,
)

PROBLEM_FILES = ["level1/23_Softmax.py", "level1/1_Square.py", "level2/1_Square.py", "level2/5_Gemm.py"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "problems"
    for rel in PROBLEM_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# problem\n")
    return root


def write(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# solution\n")
    return path


@pytest.mark.parametrize(
    ("solution", "expected"),
    [
        ("level1_23_Softmax.py", "level1/23_Softmax"),
        ("solutions/level1/23_Softmax.py", "level1/23_Softmax"),
        ("flat/23_Softmax.py", "level1/23_Softmax"),
        ("level2_1_Square.py", "level2/1_Square"),
        ("solutions/level2/1_Square.py", "level2/1_Square"),
        ("solutions/level2/level1_1_Square.py", "level1/1_Square"),
        ("flat/1_Square.py", None),
        ("level3_23_Softmax.py", None),
        ("solutions/level2/23_Softmax.py", None),
        ("flat/99_Missing.py", None),
    ],
)
def test_solution_pairs_with_the_problem_of_the_same_stem(
    root: Path, tmp_path: Path, solution: str, expected: str | None
) -> None:
    path = write(tmp_path / "sols" / solution)
    pairs, unpaired = pair_solutions([path], root)
    if expected is None:
        assert pairs == () and [u.path for u in unpaired] == [path]
    else:
        assert [(p.problem.label, p.solution) for p in pairs] == [(expected, path)] and unpaired == ()


def test_solution_with_level_prefix_pairs_with_problem(root: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "level1_23_Softmax.py")
    (pair,) = pair_solutions([path], root).pairs
    assert pair.problem == Problem(1, 23, "Softmax", root / "level1" / "23_Softmax.py")


def test_solution_stem_at_two_levels_is_unpaired_with_the_reason(root: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "1_Square.py")
    (unpaired,) = pair_solutions([path], root).unpaired
    assert "levels 1, 2" in unpaired.reason


def test_directories_are_searched_recursively_and_unpaired_files_are_reported(root: Path, tmp_path: Path) -> None:
    sols = tmp_path / "sols"
    good = [write(sols / "level1" / "23_Softmax.py"), write(sols / "deep" / "er" / "level2_5_Gemm.py")]
    stray = write(sols / "helpers.py")
    write(sols / "__pycache__" / "23_Softmax.py")
    pairs, unpaired = pair_solutions([sols], root)
    assert sorted(p.solution for p in pairs) == sorted(good)
    assert [u.path for u in unpaired] == [stray]


def test_pairs_are_sorted_by_level_and_id(root: Path, tmp_path: Path) -> None:
    paths = [write(tmp_path / name) for name in ("level2_5_Gemm.py", "level1_23_Softmax.py", "level1_1_Square.py")]
    pairs, _ = pair_solutions(paths, root)
    assert [p.problem.key for p in pairs] == [(1, 1), (1, 23), (2, 5)]


def test_a_missing_solution_path_is_an_error(root: Path, tmp_path: Path) -> None:
    with pytest.raises(OracleAuditError, match="no such solution"):
        pair_solutions([tmp_path / "nope.py"], root)


def test_problems_are_discovered_in_level_and_id_order_ignoring_other_files(root: Path) -> None:
    (root / "solutions" / "level1").mkdir(parents=True)
    (root / "solutions" / "level1" / "7_Extra.py").write_text("")
    (root / "level1" / "README.md").write_text("")
    (root / "level1" / "helper.py").write_text("")
    assert [p.label for p in discover_problems(root)] == [
        "level1/1_Square", "level1/23_Softmax", "level2/1_Square", "level2/5_Gemm"
    ]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda root: None, "not a directory"),
        (lambda root: (root / "level1").mkdir(parents=True), "no problem files"),
        (lambda root: [write(root / "level1" / n) for n in ("3_A.py", "3_B.py")], "id 3 is also used"),
    ],
)
def test_a_bad_problem_root_is_an_error_naming_it(tmp_path: Path, setup, message: str) -> None:
    root = tmp_path / "problems"
    setup(root)
    with pytest.raises(OracleAuditError, match=message):
        discover_problems(root)


def test_the_bundled_dataset_holds_the_softmax_exemplar() -> None:
    labels = [p.label for p in discover_problems(bundled_root())]
    assert "level1/23_Softmax" in labels


SOFTMAX = bundled_root() / "level1" / "23_Softmax.py"


def test_constant_overrides_change_the_shapes_of_get_inputs() -> None:
    module = load_problem_module(SOFTMAX, {"batch_size": 5, "dim": 7})
    assert module.get_inputs()[0].shape == (5, 7)


def test_overrides_do_not_leak_into_the_next_load() -> None:
    load_problem_module(SOFTMAX, {"batch_size": 5})
    assert load_problem_module(SOFTMAX).get_inputs()[0].shape == (64, 4096)


def test_int_constants_are_listed_in_definition_order() -> None:
    assert int_constants(load_problem_module(SOFTMAX)) == {"batch_size": 64, "dim": 4096}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"heads": 4}, "no module-level int constant 'heads'"), ({"dim": 4.5}, "must be an int, got 4.5"),
     ({"dim": True}, "must be an int, got True")],
)
def test_a_bad_override_is_an_error_naming_the_file(overrides: dict, message: str) -> None:
    with pytest.raises(OracleAuditError, match=message) as info:
        load_problem_module(SOFTMAX, overrides)
    assert "23_Softmax.py" in str(info.value)


def test_a_problem_that_fails_to_import_is_an_error_with_the_cause(tmp_path: Path) -> None:
    path = tmp_path / "level1" / "1_Broken.py"
    path.parent.mkdir()
    path.write_text("import torch\nraise ValueError('bad constant')\n")
    with pytest.raises(OracleAuditError, match=r"1_Broken.py: import failed: ValueError: bad constant"):
        load_problem_module(path)


def test_a_problem_file_path_gives_back_its_problem_and_another_path_is_refused(tmp_path: Path) -> None:
    from oracleaudit.problem import bundled_root, problem_at

    problem = problem_at(bundled_root() / "level1" / "23_Softmax.py")
    assert (problem.level, problem.id, problem.name) == (1, 23, "Softmax")
    stray = tmp_path / "a" / "b.py"
    stray.parent.mkdir()
    stray.write_text("")
    with pytest.raises(OracleAuditError):
        problem_at(stray)
