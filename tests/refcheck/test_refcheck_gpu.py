"""`oracleaudit refcheck` on a GPU (about 40 s): a bundled convolution's reference under KernelBench's
checker with PyTorch's defaults (cuDNN TF32 on) and with TF32 off, and the synthetic problems of
tests/testdata/refcheck on CUDA."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oracleaudit.cli import main
from oracleaudit.problem import bundled_root
from oracleaudit.scoring.oracle import catalog_dir

pytestmark = pytest.mark.gpu

TESTDATA = Path(__file__).parents[1] / "testdata" / "refcheck"


def refcheck(capsys: pytest.CaptureFixture, *args: str) -> dict:
    assert main(["refcheck", "--device", "cuda", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_convolution_is_unrefereeable_with_tf32_and_refereeable_without(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    text = (catalog_dir() / "kernelbench.toml").read_text()
    no_tf32 = tmp_path / "kernelbench-no-tf32.toml"
    no_tf32.write_text(text.replace('math_mode = "default"', 'math_mode = "no_tf32"'))
    result = refcheck(capsys, str(bundled_root() / "level1" / "37_Conv1d.py"), "--out", str(tmp_path / "out"),
                      "--oracle", "kernelbench", "--oracle", str(no_tf32))
    (tf32,) = result["unrefereeable"]["kernelbench"]
    assert tf32["problem"] == "level1/37_Conv1d" and tf32["margin"] > 1
    assert result["refereeable"]["kernelbench-no-tf32"] == ["level1/37_Conv1d"]
    records = [json.loads(line) for line in (tmp_path / "out" / "refcheck.jsonl").read_text().splitlines()]
    assert {r["oracle"]: r["tf32"] for r in records} == {"kernelbench": [False, True],
                                                         "kernelbench-no-tf32": [False, False]}


def test_synthetic_problems_on_cuda(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "problems"
    shutil.copytree(TESTDATA, root)
    result = refcheck(capsys, "--problems", str(root), "--out", str(tmp_path / "out"))
    assert [u["problem"] for u in result["unrefereeable"]["kernelbench"]] == ["level1/1_CancellingSum"]
    assert result["refereeable"]["kernelbench"] == ["level1/3_ScaleShift"]
    assert [p["problem"] for p in result["fp64_incompatible"]] == ["level1/2_Float32Weight"]
    assert [p["problem"] for p in result["failed"]] == ["level1/4_Segfault"]
