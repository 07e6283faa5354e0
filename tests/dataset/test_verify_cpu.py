"""Verification end to end on the CPU, with PyTorch stand-ins for CUDA solutions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oracleaudit import cli
from oracleaudit.dataset.records import merge_records, read_records
from oracleaudit.dataset.verify import verify_pair, verify_solutions
from oracleaudit.errors import OracleAuditError
from oracleaudit.problem import pair_solutions

CHECK_NAMES = ["official-0", "official-1", "official-2", "official-3", "official-4", "normal", "uniform", "large",
               "odd-shapes", "small-shapes"]


def pair_for(problem_root: Path, solution: str):
    (pair,) = pair_solutions([problem_root / "solutions" / solution], problem_root).pairs
    return pair


def test_a_correct_solution_is_verified_on_every_check(problem_root: Path) -> None:
    record = verify_pair(pair_for(problem_root, "level1/1_Scale.py"), device="cpu")
    assert record["verified"] and record["error"] is None
    assert [c["name"] for c in record["checks"]] == CHECK_NAMES
    assert record["checks"][-1]["overrides"] == {"batch_size": 17, "dim": 19}
    assert record["problem_file"] == "level1/1_Scale.py"
    assert record["solution_file"] == "solutions/level1/1_Scale.py"


def test_a_solution_off_by_1e3_fails_every_check(problem_root: Path) -> None:
    record = verify_pair(pair_for(problem_root, "level1/2_GroupNormed.py"), device="cpu")
    assert not record["verified"]
    assert not any(c["passed"] for c in record["checks"])
    assert all(c["excess"] == pytest.approx(1e-3, rel=0.2) for c in record["checks"])


def test_a_solution_that_fails_to_build_gets_a_record_with_the_first_line_of_the_error(problem_root: Path) -> None:
    record = verify_pair(pair_for(problem_root, "level1_3_FixedView.py"), device="cpu")
    assert not record["verified"] and record["checks"] == []
    assert record["error"] == ("solutions/level1_3_FixedView.py: import failed: "
                               "RuntimeError: Error building extension 'oakb_level1_3_fixedview'")


def test_a_record_is_valid_json_with_the_schema_fields(problem_root: Path, tmp_path: Path) -> None:
    record = verify_pair(pair_for(problem_root, "level1/1_Scale.py"), device="cpu")
    merge_records(tmp_path / "v.jsonl", [record])
    (read,) = read_records(tmp_path / "v.jsonl").values()
    assert set(read) >= {"schema_version", "problem", "problem_sha256", "solution_sha256", "gpu", "torch", "cuda",
                         "date", "checks", "verified"}
    assert set(read["checks"][0]) >= {"name", "distribution", "seed", "overrides", "max_abs_err", "max_rel_err",
                                      "excess", "fp32_excess", "passed"}


def test_verify_runs_workers_and_records_every_problem(problem_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "verification.jsonl"
    report = verify_solutions(problems_root=problem_root, out=out, jobs=2, device="cpu", logs_dir=tmp_path / "logs",
                              progress=False)
    statuses = {o.problem.label: o.status for o in report.outcomes}
    assert statuses == {"level1/1_Scale": "verified", "level1/2_GroupNormed": "failed",
                        "level1/3_FixedView": "failed", "level1/4_AddOne": "failed"}
    records = read_records(out)
    assert sorted(records) == [(1, 1), (1, 2), (1, 3), (1, 4)]
    assert records[(1, 3)]["dropped_variants"] == [] and "Error building extension" in records[(1, 3)]["error"]
    assert records[(1, 4)]["error"].startswith("the worker exited with code 3")
    assert (tmp_path / "logs" / "level1_1_Scale.log").exists()
    assert not report.all_verified
    assert json.loads(json.dumps(report.as_json()))["results"][0]["status"] == "verified"


def test_an_unchanged_verified_problem_is_skipped_unless_forced(problem_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "verification.jsonl"
    solution = problem_root / "solutions" / "level1" / "1_Scale.py"
    merge_records(out, [verify_pair(pair_for(problem_root, "level1/1_Scale.py"), device="cpu")])
    report = verify_solutions([solution], problems_root=problem_root, out=out, device="cpu", progress=False)
    assert [o.status for o in report.outcomes] == ["skipped"]
    solution.write_text(solution.read_text() + "\n# edited\n")
    report = verify_solutions([solution], problems_root=problem_root, out=out, jobs=1, device="cpu", progress=False,
                              logs_dir=tmp_path / "logs")
    assert [o.status for o in report.outcomes] == ["verified"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"jobs": 0}, "--jobs must be ≥ 1, got 0"), ({"timeout_s": 0}, "--timeout must be > 0"),
     ({"paths": ["nope"]}, "nope: no such solution")],
)
def test_bad_verify_arguments_are_errors(problem_root: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(OracleAuditError, match=message):
        verify_solutions(problems_root=problem_root, device="cpu", progress=False, **kwargs)


def test_verify_with_no_pairing_solution_is_an_error(problem_root: Path, tmp_path: Path) -> None:
    stray = tmp_path / "99_Nothing.py"
    stray.write_text("")
    with pytest.raises(OracleAuditError, match="no solution pairs with a problem"):
        verify_solutions([stray], problems_root=problem_root, device="cpu", progress=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown where no GPU is present")
def test_verify_command_refuses_to_run_without_a_gpu(problem_root: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["verify", "--problems", str(problem_root)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_verify_never_imports_tree_sitter_or_libclang() -> None:
    code = (
        "import sys\n"
        "from oracleaudit import cli\n"
        "cli.build_parser()\n"
        "import oracleaudit.dataset.verify\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tree_sitter', 'tree_sitter_cuda', 'clang')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
