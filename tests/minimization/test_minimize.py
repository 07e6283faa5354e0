"""`minimize` on the bundled evidence (real Parquet, real mutants): the kill relation's monotone facts, the
suite's detection re-checked by scoring its exported oracle file, the integer program never behind greedy,
held-out validation by every mode, byte-identical files, and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from oracleaudit.cli import main
from oracleaudit.minimization import HOLDOUTS, minimize, tolerances
from oracleaudit.minimization.kills import kill_relation
from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.shipped import shipped_dir

BUNDLE = shipped_dir("kill_matrix")


@pytest.fixture(scope="module")
def audit() -> Audit:
    return Audit.load(BUNDLE / "evidence", BUNDLE / "mutants")


@pytest.fixture(scope="module")
def made(audit: Audit, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("minimized")
    m = minimize(audit, Oracle.load("kernelbench"), budget=2, curve=(1, 2, 3), judges=[Oracle.load("kernelbench")],
                 jobs=2)
    m.write(out)
    return m, out


def test_a_looser_tolerance_never_rejects_more_mutants_nor_raises_more_false_alarms(audit: Audit) -> None:
    relation = kill_relation(audit, Oracle.load("kernelbench"), tolerances("auto"))
    assert len(relation) == 70 and sum(len(k.mutants) for k in relation) == int(audit.witness["witnessed"].sum())
    for k in relation:
        assert (k.kills[1:] <= k.kills[:-1]).all()
        assert (np.diff(k.false_alarms, axis=0) <= 0).all()


def test_the_exported_suite_scores_what_the_selection_predicted_with_no_false_alarm(made, audit: Audit) -> None:
    m, out = made
    r = m.result
    suite = Oracle.load(out / "suite.toml")
    scored = audit.score(suite, top=0)
    assert scored["detection"] == r["in_sample_detection"] == r["selection_detection"]
    assert scored["false_alarms"] == 0 == r["suite_false_alarms"]
    assert r["in_sample_detection"] > r["base_detection"]
    assert "warning" not in r


def test_every_problem_gets_at_most_k_inputs_none_of_which_fails_the_original(made, audit: Audit) -> None:
    m, _ = made
    for p in m.result["problems"]:
        assert len(p["inputs"]) <= 2 and p["false_alarms"] == 0
        assert p["caught"] + p["escaped"] + p["unobserved"] == p["witnessed"]
        assert p["caught"] >= p["greedy_caught"] and p["caught"] <= p["catchable"]


def test_the_integer_program_is_never_behind_greedy_and_more_inputs_never_catch_less(made) -> None:
    curve = made[0].result["curve"]
    assert [p["budget"] for p in curve] == [1, 2, 3]
    assert all(p["in_sample"] >= p["greedy"] for p in curve)
    assert curve[0]["in_sample"] <= curve[1]["in_sample"] <= curve[2]["in_sample"]
    assert made[0].result["ilp_over_greedy"]["caught"] >= 0


def test_held_out_detection_is_reported_by_every_mode_and_by_family(made) -> None:
    r = made[0].result
    assert set(r["heldout_detection"]) == set(HOLDOUTS)
    assert all(0.5 < v <= r["in_sample_detection"] for v in r["heldout_detection"].values())
    families = r["heldout_groups"]["family"]
    assert {"arithmetic", "indexing", "loop"} <= set(families)
    assert sum(t["caught"] + t["escaped"] + t["unobserved"] for t in families.values()) == r["mutants"]


def test_dominators_are_fewer_than_the_catchable_mutants_and_scored_for_each_judge(made) -> None:
    s = made[0].result["subsumption"]
    assert 0 < s["minimal_set_size"] <= s["dominators"] < s["catchable"]
    assert 0 < s["dominator_score"]["kernelbench"] < 1


def test_the_maintainers_page_names_each_problem_and_the_suite_file(made) -> None:
    m, out = made
    page = (out / "suite.md").read_text()
    assert "level1/23_Softmax" in page and "`suite.toml`" in page and "| K | in sample | greedy | held out |" in page
    assert json.loads((out / "minimize.json").read_text())["budget"] == 2


@pytest.mark.slow
def test_the_same_evidence_gives_byte_identical_files_fitted_in_one_process_or_several(made, audit: Audit,
                                                                                       tmp_path: Path) -> None:
    minimize(audit, Oracle.load("kernelbench"), budget=2, curve=(1, 2, 3), judges=[Oracle.load("kernelbench")],
             jobs=1).write(tmp_path)  # `made` fitted its problems in two processes
    for name in ("suite.toml", "minimize.json", "suite.md"):
        assert (tmp_path / name).read_bytes() == (made[1] / name).read_bytes()


def test_the_command_prints_the_documented_json_keys(capsys, tmp_path: Path) -> None:
    code = main(["minimize", "--budget", "1", "--curve", "1", "--holdout", "family", "--judge", "kernelbench",
                 "--tolerance", "base", "--out", str(tmp_path), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"budget", "in_sample_detection", "heldout_detection", "greedy_detection", "problems", "curve",
            "subsumption", "runtime_s"} <= set(result)
    assert result["budget"] == 1 and list(result["heldout_detection"]) == ["family"]
    assert all(p["tolerance"] is None for p in result["problems"])
    assert main(["score", "--oracle", str(tmp_path / "suite.toml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["detection"] == result["in_sample_detection"]


@pytest.mark.parametrize("argv,message", [
    (["--budget", "0"], "--budget must be ≥ 1, got 0"),
    (["--tolerance", "tight"], "--tolerance must be auto, base or a number > 0, got 'tight'"),
    (["--max-false-alarms", "-1"], "--max-false-alarms must be ≥ 0, got -1"),
    (["--margin", "0.5"], "--margin must be a number ≥ 1, got 0.5"),
    (["--folds", "1"], "--folds must be ≥ 2, got 1"),
    (["--curve", "0"], "--curve must be ≥ 1, got 0"),
    (["--jobs", "0"], "--jobs must be ≥ 1, got 0"),
    (["--base", "nowhere.toml"], "oracle nowhere.toml: no such file"),
])
def test_bad_options_fail_on_one_line(capsys, argv: list[str], message: str) -> None:
    assert main(["minimize", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"oracleaudit: error: {message}"
