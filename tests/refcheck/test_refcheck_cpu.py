"""`oracleaudit refcheck` end to end on the CPU, on KernelBench-style problems written for it
(tests/testdata/refcheck): a long cancelling fp32 sum (unrefereeable), a float32-only matmul in forward
(fp64-incompatible), an element-wise op (refereeable) and a forward that segfaults (its process dies; the
others are still checked). Also: resuming, the needed tolerance as a real threshold, the results file's
reader, and the `--refcheck` link of `score` and `analyze unrefereeable`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oracleaudit.cli import main
from oracleaudit.errors import OracleAuditError
from oracleaudit.refcheck.results import RESULTS_FILE, append_records, read_records
from oracleaudit.scoring.oracle import catalog_dir

TESTDATA = Path(__file__).parents[1] / "testdata" / "refcheck"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    copy = tmp_path / "problems"
    shutil.copytree(TESTDATA, copy)
    return copy


def refcheck(capsys: pytest.CaptureFixture, *args: str) -> dict:
    assert main(["refcheck", "--device", "cpu", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def without_seconds(result: dict) -> list[dict]:
    """The per-problem results less their wall time (the one field that changes from run to run)."""
    return [{k: v for k, v in p.items() if k != "seconds"} for p in result["problems"]]


def test_verdicts_isolation_and_resume(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    result = refcheck(capsys, "--problems", str(root), "--out", str(out))
    assert [p["problem"] for p in result["problems"]] == [
        "level1/1_CancellingSum", "level1/2_Float32Weight", "level1/3_ScaleShift", "level1/4_Segfault"]
    (bad,) = result["unrefereeable"]["kernelbench"]
    assert bad["problem"] == "level1/1_CancellingSum" and bad["tolerance"] == 1e-4
    assert bad["needed_tolerance"] > 1e-4 and bad["margin"] == pytest.approx(bad["needed_tolerance"] / 1e-4)
    assert result["refereeable"]["kernelbench"] == ["level1/3_ScaleShift"]
    (incompatible,) = result["fp64_incompatible"]
    assert incompatible["problem"] == "level1/2_Float32Weight" and "dtype" in incompatible["reason"]
    assert result["failed"] == [{"problem": "level1/4_Segfault", "reason": "its process died of SIGSEGV"}]
    good = result["problems"][2]["oracles"]["kernelbench"]
    assert 0 < good["margin"] < 1 and good["failing_inputs"] == []

    records = read_records(out / RESULTS_FILE)
    assert len(records) == 4 and {r["schema_version"] for r in records} == {1}
    assert {r["problem"]: r["inputs"] for r in records}["level1/1_CancellingSum"] == 5  # KernelBench's 5 trials

    again = refcheck(capsys, "--problems", str(root), "--out", str(out))  # only the failed problem runs again
    records = read_records(out / RESULTS_FILE)
    assert len(records) == 5 and records[-1]["problem"] == "level1/4_Segfault"
    assert without_seconds(again) == without_seconds(result)


def test_problems_checked_at_once_give_the_records_of_one_at_a_time_in_the_same_order(
        root: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    one = refcheck(capsys, "--problems", str(root), "--out", str(tmp_path / "one"))
    four = refcheck(capsys, "--problems", str(root), "--out", str(tmp_path / "four"), "--jobs", "4")
    assert without_seconds(four) == without_seconds(one)
    order = [[r["problem"] for r in read_records(tmp_path / name / RESULTS_FILE)] for name in ("one", "four")]
    assert order[0] == order[1] == sorted(order[0])


def test_needed_tolerance_is_the_threshold(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    problem = str(root / "level1" / "1_CancellingSum.py")
    first = refcheck(capsys, problem, "--out", str(tmp_path / "a"))
    needed = first["unrefereeable"]["kernelbench"][0]["needed_tolerance"]
    text = (catalog_dir() / "kernelbench.toml").read_text()
    files = []
    for name, factor in (("above", 1.0001), ("below", 0.9999)):
        t = needed * factor
        files.append(tmp_path / f"{name}.toml")
        files[-1].write_text(text.replace("float32 = { atol = 1e-4, rtol = 1e-4 }",
                                          f"float32 = {{ atol = {t!r}, rtol = {t!r} }}"))
    result = refcheck(capsys, problem, "--out", str(tmp_path / "b"), "--oracle", str(files[0]),
                      "--oracle", str(files[1]))
    assert result["refereeable"] == {"above": ["level1/1_CancellingSum"], "below": []}
    assert [u["problem"] for u in result["unrefereeable"]["below"]] == ["level1/1_CancellingSum"]


def test_a_path_that_is_no_problem_is_one_line_and_the_rest_runs(root: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    stray = tmp_path / "notes.py"
    stray.write_text("x = 1\n")
    assert main(["refcheck", "--device", "cpu", "--json", str(stray), str(root / "level1" / "3_ScaleShift.py"),
                 "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["refereeable"]["kernelbench"] == ["level1/3_ScaleShift"]
    errors = [line for line in captured.err.splitlines() if "error" in line]
    assert len(errors) == 1 and str(stray) in errors[0] and "Traceback" not in captured.err


def test_results_file_ignores_a_cut_last_line_and_appends_after_it(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    record = {"problem": "level1/3_ScaleShift", "oracle": "kernelbench", "device": "cpu", "verdict": "refereeable"}
    append_records(path, [record])
    with open(path, "a") as handle:
        handle.write('{"schema_version": 1, "problem": "level1/')  # a run killed while writing
    assert len(read_records(path)) == 1
    append_records(path, [{**record, "verdict": "unrefereeable"}])
    assert [r["verdict"] for r in read_records(path)] == ["refereeable", "unrefereeable"]
    path.write_text('{"schema_version": 1, "problem": "p", "oracle": "o", "verdict": "maybe"}\n')
    with pytest.raises(OracleAuditError, match=f"{RESULTS_FILE}:1: a refcheck record needs"):
        read_records(path)


def test_score_and_analyze_label_false_alarms_of_unrefereeable_references(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    # On the bundled evidence level1/37_Conv1d is a false alarm of kernelbench and kernelbench-x: its cuDNN
    # TF32 reference misses fp64 (as refcheck finds on a GPU; written here as its record would be).
    # kernelbench's other one, CrossEntropyLoss (its float32 cast of the labels), has no refcheck record.
    path = tmp_path / RESULTS_FILE
    append_records(path, [{"problem": "level1/37_Conv1d", "oracle": name, "device": "cuda", "verdict": "unrefereeable",
                           "margin": 4.8, "needed_tolerance": 4.8e-4} for name in ("kernelbench", "kernelbench-x")]
                   + [{"problem": "level1/38_Conv2d", "oracle": "kernelbench-x", "device": "cuda",
                       "verdict": "unrefereeable", "margin": 2.0, "needed_tolerance": 2e-5}])
    assert main(["score", "--oracle", "kernelbench", "--refcheck", str(path), "--json"]) == 0
    score = json.loads(capsys.readouterr().out)
    assert score["false_alarm_refcheck"] == {"level1/37_Conv1d": "unrefereeable", "level1/49_CrossEntropyLoss": None}
    assert score["false_alarms_unrefereeable"] == 1 and score["false_alarms"] == 2
    assert main(["analyze", "unrefereeable", "--oracle", "kernelbench-x", "--refcheck", str(path), "--json"]) == 0
    analysis = json.loads(capsys.readouterr().out)
    assert {p["problem"]: p["refcheck"] for p in analysis["problems"]} == {"level1/37_Conv1d": "unrefereeable"}
    assert analysis["refcheck_only"] == ["level1/38_Conv2d"]
    assert main(["analyze", "ceiling", "--oracle", "kernelbench", "--refcheck", str(path)]) == 2
