"""bench/build_cost.py's --sizes: its list is read as whole numbers, and anything else is one usage line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from bench import build_cost

ROOT = Path(__file__).parents[2]


def test_sizes_are_read_sorted_and_without_repeats() -> None:
    assert build_cost._sizes("128,1,64,128") == [1, 64, 128]
    with pytest.raises(argparse.ArgumentTypeError, match="whole numbers"):
        build_cost._sizes("1,x")


def test_sizes_that_are_not_whole_numbers_are_one_line_of_usage_error_and_no_traceback() -> None:
    done = subprocess.run([sys.executable, "bench/build_cost.py", "--sizes", "1,x"], cwd=ROOT, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == ("build_cost.py: error: argument --sizes: not a comma-separated list of "
                                            "whole numbers: '1,x'")
