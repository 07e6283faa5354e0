"""bench/pack_options.py on a small packed store made from the bundle's rows: every option it reports reads
back exactly, and what --json keeps is compact; a folder that is no packed store is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc

from oracleaudit.store import EvidenceStore, pack_rows

ROOT = Path(__file__).resolve().parents[2]


def test_the_study_of_a_small_store_reads_every_option_back_and_keeps_the_figures_compact(tmp_path: Path) -> None:
    bundle = EvidenceStore(ROOT / "kill_matrix" / "evidence")
    rows = bundle.read_table()
    one = rows.filter(pc.equal(rows.column("problem"), rows.column("problem")[0])).slice(0, 300)
    store = tmp_path / "store"
    pack_rows(store, bundle.meta, one)
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pack_options.py"), "--store", str(store),
                           "--files", "rows,far", "--jobs", "2", "--keep", "1", "--json", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["all_ok"] and figures["rows"] == 300 and set(figures["files"]) == {"rows", "far"}
    sizes = {name: (store / "packed" / f"{name}.parquet").stat().st_size for name in ("rows", "far")}
    assert figures["totals"]["now"] == sum(sizes.values())
    for name, record in figures["files"].items():
        assert record["bytes"] == sizes[name] and record["rewritten_same_bytes"]
        for column in record["columns"].values():
            assert "screened" not in column and column["options_measured"] > 0
            assert column["best"]["transforms"]["bytes"] <= column["now_one_page"]


def test_a_folder_that_is_no_packed_store_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pack_options.py"), "--store", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
        f"pack_options.py: error: {tmp_path}: not a packed evidence store (no manifest.json and packed/)")
    assert "Traceback" not in done.stderr
