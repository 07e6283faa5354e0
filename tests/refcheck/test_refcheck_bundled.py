"""The bundled refcheck results (kill_matrix/refcheck.jsonl.gz, made on an H200): current for every bundled
problem and catalog oracle, printed without a device, and the labels `score` and `analyze` give the bundled
evidence's false alarms by default."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oracleaudit.cli import main
from oracleaudit.problem import bundled_root, discover_problems
from oracleaudit.refcheck import check_references
from oracleaudit.errors import OracleAuditError
from oracleaudit.refcheck.results import GZIPPED_FILE, append_records, bundled_results, read_records
from oracleaudit.scoring.oracle import Oracle, catalog, catalog_dir
from oracleaudit.shipped import shipped_dir

BUNDLED = bundled_results()


def test_the_bundled_results_are_current_for_every_bundled_problem_and_catalog_oracle(tmp_path: Path) -> None:
    # A record counts as done only for the problem file, oracle file and pool it was made with (their
    # sha256 and digest): a changed problem or oracle would have to be measured again, which needs a GPU.
    shutil.copy(BUNDLED, tmp_path / GZIPPED_FILE)
    problems = discover_problems(bundled_root())
    tallies: list[str] = []
    check_references(problems, [Oracle.load(name) for name in catalog()], tmp_path, device="cuda",
                     progress=lambda tally: tallies.append(tally))
    assert len(problems) == 70 and tallies == ["skipped"] * len(problems)
    assert (tmp_path / GZIPPED_FILE).read_bytes() == BUNDLED.read_bytes()  # nothing appended


def test_gzipped_results_are_read_only_and_a_problem_they_lack_is_one_line_that_says_so(tmp_path: Path) -> None:
    import gzip

    records = read_records(BUNDLED)
    assert BUNDLED.name == GZIPPED_FILE and len(records) == 70 * len(catalog())
    kept = [r for r in records if r["problem"] != "level1/1_ReLU"]
    (tmp_path / GZIPPED_FILE).write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in kept).encode()))
    with pytest.raises(OracleAuditError, match="1 of the problems are not recorded there, and gzipped results"):
        check_references(discover_problems(bundled_root()), [Oracle.load("kernelbench")], tmp_path, device="cuda")
    with pytest.raises(OracleAuditError, match="read-only; gunzip it"):
        append_records(tmp_path / GZIPPED_FILE, kept[:1])
    (tmp_path / "broken.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(OracleAuditError, match="broken.jsonl.gz: not a gzip file"):
        read_records(tmp_path / "broken.jsonl.gz")


def test_recorded_results_print_their_table_and_json_without_a_device(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    shutil.copy(BUNDLED, tmp_path / GZIPPED_FILE)
    oracles = [arg for name in catalog() for arg in ("--oracle", name)]
    assert main(["refcheck", "--out", str(tmp_path), *oracles]) == 0
    table = capsys.readouterr().out
    assert "kernelbench: 1 unrefereeable, 69 refereeable of 70 problems" in table
    # An exact comparison (tolerance 0: argmax's indices under kernelbench-x) has no margin to print.
    assert "refereeable (needs 0, own 0)" in table
    assert main(["refcheck", "--out", str(tmp_path), "--json", *oracles]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) >= {"problems", "unrefereeable", "fp64_incompatible", "refereeable"}
    assert [u["problem"] for u in result["unrefereeable"]["kernelbench"]] == ["level1/37_Conv1d"]
    assert result["unrefereeable"]["kernelbench"][0]["margin"] > 1
    assert result["fp64_incompatible"] == [] and result["failed"] == []


def test_score_labels_the_bundled_false_alarms_with_the_bundled_results(capsys: pytest.CaptureFixture) -> None:
    # kernelbench's two false alarms on the bundle: Conv1d's TF32 reference (unrefereeable) and
    # CrossEntropyLoss, whose reference is fine but breaks under the checker's float32 cast of the labels.
    assert main(["score", "--oracle", "kernelbench", "--json"]) == 0
    score = json.loads(capsys.readouterr().out)
    assert score["false_alarm_refcheck"] == {"level1/37_Conv1d": "unrefereeable",
                                             "level1/49_CrossEntropyLoss": "refereeable"}
    assert score["false_alarms_unrefereeable"] == 1
    assert main(["score", "--oracle", "kernelbench"]) == 0
    assert "1 of 2 false alarms are on problems whose fp32 reference is unrefereeable" in capsys.readouterr().out
    # Evidence of one's own is not labelled by the bundled problems' results unless asked (--refcheck).
    bundle = shipped_dir("kill_matrix")
    assert main(["score", "--oracle", "kernelbench", "--json", "--evidence", str(bundle / "evidence"),
                 "--mutants", str(bundle / "mutants")]) == 0
    assert "false_alarm_refcheck" not in json.loads(capsys.readouterr().out)
    assert main(["analyze", "unrefereeable", "--oracle", "kernelbench-x", "--json"]) == 0
    analysis = json.loads(capsys.readouterr().out)
    # Conv1d alone (GRUCell was listed too while shard 2's wrong fp64 references of it were bundled)
    assert {p["problem"]: p["refcheck"] for p in analysis["problems"]} == {"level1/37_Conv1d": "unrefereeable"}


def test_the_reports_refcheck_page_is_the_table_of_the_bundled_results(capsys: pytest.CaptureFixture,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # reports/README.md's command, from the repository root: the oracles in the order of their files' names.
    monkeypatch.chdir(BUNDLED.parent.parent)
    oracles = [arg for path in sorted(catalog_dir().glob("*.toml")) for arg in ("--oracle", path.stem)]
    assert main(["refcheck", "--out", "kill_matrix", "--format", "markdown", *oracles]) == 0
    page = Path("reports") / "refcheck.md"
    assert capsys.readouterr().out == page.read_text()
