"""The cast of every input to float32 that KernelBench and KernelBench-verified make before the reference
runs: found on the CPU from the problem file, and on a problem where it breaks the reference every kernel
fails (the correct one is a false alarm of the real checker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oracleaudit.errors import OracleAuditError
from oracleaudit.problem import bundled_root
from oracleaudit.scoring import Audit
from oracleaudit.scoring.casting import cast_failure, cast_failures
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.shipped import shipped_dir

LEVEL1 = bundled_root() / "level1"


def test_the_cross_entropy_reference_raises_with_its_labels_cast_and_float_only_problems_are_untouched() -> None:
    assert "dtype" in cast_failure(LEVEL1 / "49_CrossEntropyLoss.py", "float32")
    assert cast_failure(LEVEL1 / "23_Softmax.py", "float32") is None  # every input is float32 already
    assert cast_failure(LEVEL1 / "50_HingeLoss.py", "float32") is None  # its ±1 targets are floats


def test_a_problem_whose_integer_input_survives_the_cast_is_not_reported(tmp_path: Path) -> None:
    problem = tmp_path / "level1" / "1_Shift.py"
    problem.parent.mkdir()
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x, k):\n        return x + k\n\n\n"
                       "def get_inputs():\n    return [torch.rand(8), torch.randint(0, 3, (8,))]\n\n\n"
                       "def get_init_inputs():\n    return []\n")
    failures, unknown = cast_failures({"level1/1_Shift": str(problem), "level1/2_Gone": "nowhere/2_Gone.py"},
                                      "float32")
    assert failures == {} and unknown == ["level1/2_Gone"]


def test_kernelbench_fails_every_kernel_of_a_problem_whose_cast_reference_raises() -> None:
    """On the bundled evidence: CrossEntropyLoss's original is a false alarm of kernelbench (and verified),
    each of its mutants is caught; kernelbench-v0.1, which does not cast, passes the original."""
    audit = Audit.load(shipped_dir("kill_matrix") / "evidence", shipped_dir("kill_matrix") / "mutants")
    current, old = audit.score(Oracle.load("kernelbench")), audit.score(Oracle.load("kernelbench-v0.1"))
    assert "level1/49_CrossEntropyLoss" in current["false_alarm_problems"]
    assert set(current["reference_fails_cast"]) == {"level1/49_CrossEntropyLoss"}
    assert "level1/49_CrossEntropyLoss" not in old["false_alarm_problems"] and old["reference_fails_cast"] == {}
    v = audit.verdicts(Oracle.load("kernelbench"))
    on_problem = (audit.mutants["problem"] == "level1/49_CrossEntropyLoss").to_numpy()
    assert on_problem.any() and v.killed[on_problem].all()


def test_an_unknown_cast_dtype_fails_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('schema_version = 1\ndescription = "d"\n[reference]\ncast_inputs = "int8"\n'
                    '[tolerance]\nfloat32 = { atol = 1e-4, rtol = 1e-4 }\n[[stages]]\nname = "a"\ninputs = ["*"]\n')
    with pytest.raises(OracleAuditError, match=r"^oracle mine.toml: reference.cast_inputs must be \"float32\""):
        Oracle.load(path)


def test_a_probe_s_answer_is_kept_in_the_cache_and_an_unreadable_one_is_probed_again(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """The answer is read back for the same file content elsewhere without probing (the probe costs torch's
    dynamo import); a damaged cache file is not trusted."""
    from oracleaudit.scoring import casting

    monkeypatch.setenv("ORACLEAUDIT_CACHE", str(tmp_path / "cache"))
    text = (LEVEL1 / "49_CrossEntropyLoss.py").read_text() + "\n# a copy\n"
    copies = []
    for name in ("a", "b", "c"):
        copies.append(tmp_path / name / "49_CrossEntropyLoss.py")
        copies[-1].parent.mkdir()
        copies[-1].write_text(text)
    first = cast_failure(copies[0], "float32")
    assert "dtype" in first
    (kept,) = (tmp_path / "cache" / "casts").glob("*.json")
    probe = casting._probe

    def refused(*args):
        raise AssertionError("probed although the answer is kept")

    monkeypatch.setattr(casting, "_probe", refused)
    assert cast_failure(copies[1], "float32") == first
    kept.write_text("{not json")
    probed = []
    monkeypatch.setattr(casting, "_probe", lambda *args: probed.append(args) or probe(*args))
    assert cast_failure(copies[2], "float32") == first and len(probed) == 1
    assert json.loads(kept.read_text()) == {"failure": first}  # written again, whole
