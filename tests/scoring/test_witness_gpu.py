"""The kill witness never convicts the original kernel: an identity mutant (a separate namespace clone of
the unchanged code) of a deterministic and of a non-deterministic (atomicAdd) solution, run on 100 seeds on
a real GPU, is witnessed on none of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oracleaudit import execution as runner
from oracleaudit.mutant import Mutant, mutant_id, write_mutants
from oracleaudit.problem import bundled_root
from oracleaudit.source import line_col, load_units

DATA = Path(__file__).parents[1] / "testdata" / "run_root"
# (problem root below the work folder, solution, problem label, text rewritten to itself)
SOLUTIONS = [
    ("run_root", "solutions/level1/1_ScaleShift.py", "level1/1_ScaleShift", "2.0f * x[i]"),
    ("oakb", "solutions/level1/19_L2Norm.py", "level1/19_L2Norm", "atomicAdd("),
]


def identity_mutant(root: Path, solution: str, label: str, text: str) -> tuple[Mutant, str]:
    unit = load_units(root / solution)[0]
    start = unit.file_text.index(text)
    end = start + len(text)
    source = f"{root.name}/{solution}"
    mutant = Mutant(
        id=mutant_id(label, source, "test.identity", start, end, text), problem=label,
        problem_file=f"{root.name}/{label}.py", source=source, source_sha256=unit.sha256, unit=0,
        rule="test.identity", family="test", start=start, end=end, start_line=line_col(unit.file_text, start)[0],
        start_col=line_col(unit.file_text, start)[1], end_line=line_col(unit.file_text, end)[0],
        end_col=line_col(unit.file_text, end)[1], original=text, replacement=text, scope="device", function=None)
    return mutant, unit.file_text


@pytest.mark.gpu
def test_an_identity_mutant_is_never_witnessed_over_100_seeds(tmp_path: Path, monkeypatch) -> None:
    from oracleaudit.scoring import Audit

    shutil.copytree(DATA, tmp_path / "run_root")
    shutil.copytree(bundled_root(), tmp_path / "oakb")
    mutants, texts = [], {}
    for folder, solution, label, text in SOLUTIONS:
        mutant, file_text = identity_mutant(tmp_path / folder, solution, label, text)
        mutants.append(mutant)
        texts[mutant.source] = file_text
    write_mutants(tmp_path / "mutants", mutants, texts)
    monkeypatch.chdir(tmp_path)
    result = runner.run(Path("mutants"), Path("evidence"), pool=str(tmp_path / "run_root" / "hundred_seeds.toml"),
                        gpus=1, show_progress=False)
    assert result.errors == []
    audit = Audit.load(tmp_path / "evidence", tmp_path / "mutants")
    verdicts = audit.witness.set_index("mutant_id")
    for mutant in mutants:
        row = verdicts.loc[mutant.id]
        assert not row["witnessed"], (mutant.problem, row["kind"], row["input_id"], row["error"])
