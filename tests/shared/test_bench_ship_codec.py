"""bench/ship_codec.py on a small packed store made from the bundle's rows: both codecs hold the store's rows,
the figures compare their seconds and bytes, and a folder that is no store is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc

from oracleaudit.store import EvidenceStore, pack_rows

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "ship_codec.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_both_codecs_hold_the_store_s_rows_and_the_figures_compare_them(tmp_path: Path) -> None:
    bundle = EvidenceStore(ROOT / "kill_matrix" / "evidence")
    rows = bundle.read_table()
    one = rows.filter(pc.equal(rows.column("problem"), rows.column("problem")[0])).slice(0, 400)
    pack_rows(tmp_path / "store", bundle.meta, one)
    out = tmp_path / "figures.json"
    done = _run("--store", str(tmp_path / "store"), "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["rows"] == 400 and figures["kept"]["same_keys"] and figures["shipped"]["same_keys"]
    assert figures["kept"]["codec"] == ["brotli", 11] and figures["shipped"]["codec"] == ["brotli", 7]
    assert figures["bytes_ratio"] == round(figures["shipped"]["bytes"] / figures["kept"]["bytes"], 3)


def test_a_folder_that_is_no_store_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _run("--store", str(tmp_path))
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0 and str(tmp_path) in done.stderr
