"""bench/cast_probe_cost.py: the probe of every bundled problem with an empty cache folder and with the answers
kept there give the same answers (CrossEntropyLoss's cast reference raises), and the kept answers are read
without probing again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_probed_and_kept_answers_agree_and_the_kept_ones_are_faster(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cast_probe_cost.py"), "--json", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["problems"] == 70 and figures["same_answers"]
    assert list(figures["failures"]) == ["49_CrossEntropyLoss"]
    assert figures["kept_s"] < figures["probed_s"]
