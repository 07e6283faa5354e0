"""Shared test setup: GPU tests are skipped where no CUDA device is present, nvcc tests where nvcc is not on
PATH; compile checks use a cache folder of their own per session; fixture trees are copied before use."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

TESTDATA = Path(__file__).parent / "testdata"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skips = {}
    if not torch.cuda.is_available():
        skips["gpu"] = pytest.mark.skip(reason="needs a CUDA device: torch.cuda.is_available() is False")
    if shutil.which("nvcc") is None:
        skips["nvcc"] = pytest.mark.skip(reason="needs nvcc on PATH: shutil.which('nvcc') is None")
    for item in items:
        for marker, skip in skips.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An empty nvcc result cache for this session ($ORACLEAUDIT_CACHE), so no test reads results that an
    earlier session or another process left in the user's cache."""
    cache = tmp_path_factory.mktemp("oracleaudit-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORACLEAUDIT_CACHE", str(cache))
        yield cache


@pytest.fixture
def problem_root(tmp_path: Path) -> Path:
    """A copy of tests/testdata/problem_root: four small problems and their CPU stand-in solutions."""
    root = tmp_path / "problem_root"
    shutil.copytree(TESTDATA / "problem_root", root)
    return root
