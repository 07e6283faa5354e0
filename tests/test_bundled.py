"""The bundled evidence in kill_matrix/: consistent with its own record, the default of `score` and
`analyze`, and scored by every catalog oracle."""

from __future__ import annotations

import json

import pytest

from oracleaudit.cli import main
from oracleaudit.mutant import DIFFS_DIR, read_mutants
from oracleaudit.scoring.oracle import Oracle, catalog
from oracleaudit.scoring import Audit
from oracleaudit.shipped import shipped_dir
from oracleaudit.store import EvidenceStore

BUNDLE = shipped_dir("kill_matrix")


@pytest.fixture(scope="module")
def audit() -> Audit:
    return Audit.load(BUNDLE / "evidence", BUNDLE / "mutants")


def test_the_bundle_matches_its_provenance_record_and_every_run_mutant_has_a_record_and_a_diff() -> None:
    store = EvidenceStore(BUNDLE / "evidence").open()
    assert store.orphans() == [] and len(store.parts) == 1
    rows = store.read()
    record = json.loads((BUNDLE / "provenance.json").read_text())["bundled"]
    assert record["rows"] == len(rows) and record["problems"] == rows["problem"].nunique()
    assert record["observations_by_status"] == {k: int(v) for k, v in rows["status"].value_counts().items()}
    mutants = {m.id for m in read_mutants(BUNDLE / "mutants")}
    run = set(rows["mutant_id"]) - {"original", "reference"}
    assert run == mutants and len(run) == record["mutants"]
    assert {p.stem for p in (BUNDLE / "mutants" / DIFFS_DIR).glob("*.diff")} == mutants


def test_score_with_no_evidence_flag_audits_the_bundled_evidence(capsys) -> None:
    assert main(["score", "--oracle", "kernelbench", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["score", "--oracle", "kernelbench", "--evidence", str(BUNDLE / "evidence"), "--mutants",
                 str(BUNDLE / "mutants"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == default
    assert default["oracle"] == "kernelbench"
    assert 0 < default["killed"] <= default["witnessed"]
    assert default["detection"] == pytest.approx(default["killed"] / default["witnessed"])
    assert sum(f["witnessed"] for f in default["by_family"].values()) == default["witnessed"]


@pytest.mark.parametrize("name", sorted(catalog()))
def test_every_catalog_oracle_scores_the_bundled_evidence(audit: Audit, name: str) -> None:
    score = audit.score(Oracle.load(name))
    assert score["witnessed"] > 0 and 0 <= score["killed"] <= score["witnessed"]
    assert 0 <= score["false_alarms"]


def test_a_stricter_tolerance_never_detects_less_on_the_bundled_evidence(audit: Audit) -> None:
    loose, strict = audit.score(Oracle.load("kernelbench-v0.1")), audit.score(Oracle.load("kernelbench"))
    assert strict["killed"] >= loose["killed"]


@pytest.mark.parametrize("analysis", ["tolerance-curve", "blind-band", "ceiling", "unrefereeable", "scale"])
def test_each_analysis_runs_on_the_bundled_evidence(capsys, analysis: str) -> None:
    assert main(["analyze", analysis, "--oracle", "kernelbench", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_attribution_runs_on_the_bundled_evidence(capsys) -> None:
    assert main(["analyze", "attribution", "--oracle", "kernelbench-v0.1", "--oracle", "kernelbench-verified",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
