"""Shared test setup: GPU tests are skipped where no CUDA device is present; fixture trees are copied before use."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

TESTDATA = Path(__file__).parent / "testdata"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device: torch.cuda.is_available() is False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def problem_root(tmp_path: Path) -> Path:
    """A copy of tests/testdata/problem_root: four small problems and their CPU stand-in solutions."""
    root = tmp_path / "problem_root"
    shutil.copytree(TESTDATA / "problem_root", root)
    return root
