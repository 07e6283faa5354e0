"""Fixtures of the shared tests: a small real evidence store with its mutants, and CUDA whose code looks like
rich markup."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable, Sequence

import pytest

from oracleaudit.mutant import DIFFS_DIR, MUTANTS_FILE, Mutant, mutants_bytes, mutants_file
from oracleaudit.scoring.audit import source_text
from oracleaudit.shipped import shipped_dir
from oracleaudit.store import EvidenceStore

BUNDLE = shipped_dir("kill_matrix")
PROBLEMS = ("level1/19_ReLU", "level1/23_Softmax")


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real evidence store (`evidence/`) and mutants folder (`mutants/`): the bundled evidence of two
    problems (every row of their references, originals and mutants), with those mutants' lines and diffs."""
    root = tmp_path_factory.mktemp("small")
    bundled = EvidenceStore(BUNDLE / "evidence").open()
    table = bundled.read_table(filters=[("problem", "in", list(PROBLEMS))])
    EvidenceStore(root / "evidence").create(bundled.meta).append(table.to_pylist())
    write_bundled_mutants(root / "mutants", PROBLEMS)
    return root


def write_bundled_mutants(folder: Path, problems: Sequence[str]) -> None:
    """A mutants folder (`mutants.jsonl`, `diffs/`) of the bundled mutants of these problems."""
    bundled = mutants_file(BUNDLE / "mutants")
    lines = [line for line in mutants_bytes(bundled).decode().splitlines() if json.loads(line)["problem"] in problems]
    (folder / DIFFS_DIR).mkdir(parents=True)
    (folder / MUTANTS_FILE).write_text("".join(line + "\n" for line in lines))
    for line in lines:  # the bundle ships no diffs: made from the bundled sources, as `mutate` writes them
        mutant = Mutant.from_json(line, str(bundled))
        (folder / DIFFS_DIR / f"{mutant.id}.diff").write_text(mutant.diff(source_text(mutant)))


@pytest.fixture(scope="session")
def bundled_mutants() -> Callable[[Path, Sequence[str]], None]:
    """`write_bundled_mutants`, for tests that build their own slice of the bundled evidence."""
    return write_bundled_mutants


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`k.cu` in a fresh working folder: valid CUDA whose code holds text rich reads as markup (`[/*out*/i]`)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text("__global__ void k(const float* x, float* y, int n) {\n"
                                   "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                   "    if (i < n) y[/*out*/i] = x[i] * 2.0f;\n}\n")
    return tmp_path / "k.cu"
