"""bench/input_cost.py on a real bundled problem: every pool entry's inputs made, written in the reference
cache's format and read back equal, and the slices a run plans for its Pending mutants."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oracleaudit.execution.plan import JOB_SIZE
from oracleaudit.mutant import read_mutants
from oracleaudit.pool import Pool

ROOT = Path(__file__).parents[2]
spec = importlib.util.spec_from_file_location("input_cost", ROOT / "bench" / "input_cost.py")
input_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(input_cost)
MUTANTS = ROOT / "bench" / "data" / "full_run"


def test_slices_are_the_plan_s_cut_of_each_problem_s_pending_mutants() -> None:
    mutants = read_mutants(MUTANTS)
    per_problem = input_cost.slices(mutants)
    assert len(per_problem) == 70
    swish = next(file for file in per_problem if file.endswith("10_Swish.py"))
    pending = sum(m.problem_file == swish and m.status == "Pending" for m in mutants)
    assert per_problem[swish] == -(-pending // JOB_SIZE) >= 1


def test_one_problem_s_inputs_are_made_written_and_read_back(tmp_path: Path) -> None:
    file = next(f for f in input_cost.slices(read_mutants(MUTANTS)) if f.endswith("10_Swish.py"))
    row = input_cost.cost(Path(file), Pool.load("default"), tmp_path)
    assert row["problem"] == "level1/10_Swish"
    assert row["entries"] == len(Pool.load("default").entries_for(Path(file))) > 50
    assert row["mib"] > 1 and row["make_s"] > 0 and row["write_s"] > 0 and row["read_s"] > 0
    assert not list(tmp_path.glob("*.bin"))  # each file removed once read back


def test_the_script_prints_and_writes_its_totals(tmp_path: Path) -> None:
    out = tmp_path / "input_cost.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "input_cost.py"), "--mutants", str(MUTANTS),
                           "--problems", "1", "--json", str(out)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert [r["problem"] for r in result["problems"]] == ["level1/10_Swish"]
    total = result["total"]
    assert total["make_s_in_slices"] == round(result["problems"][0]["make_s"] * result["problems"][0]["slices"], 1)
    assert "1 problems, 68 entries" in done.stdout


@pytest.mark.parametrize("args, message", [(["--mutants", "/nonexistent/mutants"], "no such file"),
                                           (["--mutants", str(MUTANTS), "--problems", "0"], "--problems must be ≥ 1")])
def test_bad_input_is_one_line_not_a_traceback(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "input_cost.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr
