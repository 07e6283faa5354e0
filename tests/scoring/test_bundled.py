"""The bundled evidence in kill_matrix/: consistent with its own record, the default of `score` and
`analyze`, and scored by every catalog oracle."""

from __future__ import annotations

import json

import pytest

from oracleaudit.cli import main
from oracleaudit.mutant import DIFFS_DIR, read_mutants
from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle, catalog
from oracleaudit.shipped import shipped_dir
from oracleaudit.store import EvidenceStore

BUNDLE = shipped_dir("kill_matrix")


@pytest.fixture(scope="module")
def audit() -> Audit:
    return Audit.load(BUNDLE / "evidence", BUNDLE / "mutants")


def test_the_bundle_matches_its_provenance_record_and_every_run_mutant_has_a_record_and_a_diff() -> None:
    """No diffs/ is shipped: every run mutant's diff is made from its bundled source file."""
    store = EvidenceStore(BUNDLE / "evidence").open()
    assert store.orphans() == [] and store.packed
    rows = store.read()
    record = json.loads((BUNDLE / "provenance.json").read_text())["bundled"]
    assert record["rows"] == len(rows) and record["problems"] == rows["problem"].nunique()
    assert record["observations_by_status"] == {k: int(v) for k, v in rows["status"].value_counts().items()}
    mutants = {m.id for m in read_mutants(BUNDLE / "mutants")}
    run = set(rows["mutant_id"]) - {"original", "reference"}
    assert run == mutants and len(run) == record["mutants"]
    assert not (BUNDLE / "mutants" / DIFFS_DIR).exists()
    audit = Audit.load(BUNDLE / "evidence", BUNDLE / "mutants")
    assert all((audit.diff(m) or "").startswith("--- a/datasets/") for m in sorted(mutants))


def test_the_bundle_takes_at_most_40_mib_on_disk() -> None:
    """kill_matrix/ ships with the repository and travels with every device call (64 MiB in all)."""
    files = [path for path in BUNDLE.rglob("*") if path.is_file() and "__pycache__" not in path.parts]
    assert sum(path.stat().st_size for path in files) <= 40 << 20


def test_score_with_no_evidence_flag_audits_the_bundled_evidence(capsys) -> None:
    assert main(["score", "--oracle", "kernelbench", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["score", "--oracle", "kernelbench", "--evidence", str(BUNDLE / "evidence"), "--mutants",
                 str(BUNDLE / "mutants"), "--refcheck", str(BUNDLE / "refcheck.jsonl.gz"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == default
    assert default["oracle"] == "kernelbench"
    assert 0 < default["killed"] <= default["witnessed"]
    assert default["detection"] == pytest.approx(default["killed"] / default["witnessed"])
    assert sum(f["witnessed"] for f in default["by_family"].values()) == default["witnessed"]


@pytest.mark.parametrize("name", sorted(catalog()))
def test_every_catalog_oracle_scores_the_bundled_evidence_as_its_provenance_records(audit: Audit, name: str) -> None:
    """The scores kill_matrix/bundle.py recorded when it made the bundle (or --rescore after a deliberate
    change of scoring): a change in any verdict shows here."""
    recorded = json.loads((BUNDLE / "provenance.json").read_text())["scores"][name]
    score = audit.score(Oracle.load(name))
    assert {key: score[key] for key in recorded} == recorded
    assert score["killed"] + score["escaped"] + score["unobserved"] == score["witnessed"] > 0


def test_a_stricter_tolerance_never_detects_less_on_the_bundled_evidence(audit: Audit) -> None:
    loose, strict = audit.score(Oracle.load("kernelbench-v0.1")), audit.score(Oracle.load("kernelbench"))
    assert strict["killed"] >= loose["killed"]


@pytest.mark.parametrize("analysis, keys", [
    ("tolerance-curve", {"oracle", "tolerances", "detection", "false_alarms", "by_family"}),
    ("blind-band", {"oracle", "escaped", "by_size"}),
    ("ceiling", {"oracle"}),
    ("unrefereeable", {"oracle"}),
    ("scale", {"oracle", "by_level", "by_output_size"}),
])
def test_each_analysis_runs_on_the_bundled_evidence(capsys, analysis: str, keys: set) -> None:
    assert main(["analyze", analysis, "--oracle", "kernelbench", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert keys <= set(result) and result["oracle"] == "kernelbench"
    if analysis == "tolerance-curve":  # detection never falls as the tolerance tightens
        by_tolerance = sorted(zip(result["tolerances"], result["detection"]))
        assert all(a[1] >= b[1] for a, b in zip(by_tolerance, by_tolerance[1:]))
    if analysis == "blind-band":
        assert len(result["escaped"]) == json.loads((BUNDLE / "provenance.json").read_text())[
            "scores"]["kernelbench"]["escaped"]


def test_attribution_splits_the_whole_change_between_the_components(capsys) -> None:
    assert main(["analyze", "attribution", "--oracle", "kernelbench-v0.1", "--oracle", "kernelbench-verified",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    change = result["detection"]["change"]
    assert change == pytest.approx(result["detection"]["to"] - result["detection"]["from"], abs=1e-6)
