"""bench/cold_build.py's refusal of a problem it has no mutants of (its builds are real compiles: run by hand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_a_problem_without_pending_mutants_is_one_error_line_and_exit_2() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cold_build.py"), "--problem", "level9/none"],
                          capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("no Pending mutants of level9/none")
