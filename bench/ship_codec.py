"""Benchmark (CPU): packing a store with the codec kept in the repository (packed.CODEC) and with the one a device
call ships with (packed.FAST_CODEC), side by side: seconds to pack (encoding the rows, then writing the files),
their bytes, the ratios, and whether both hold the store's rows (by key; that every value reads back to the bit is
tests/shared/test_packed.py's).

    PYTHONPATH=. python bench/ship_codec.py --store STORE [--json FILE]

bench/results/ship_codec.json is of shard 2 of the complete run (bench/results/full_run/shard2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from oracleaudit import packed
from oracleaudit.errors import OracleAuditError
from oracleaudit.store import EvidenceStore, pack_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    store = EvidenceStore(args.store).open()
    rows = store.read_table()
    figures = {"store": str(args.store), "rows": rows.num_rows, "cpus": len(os.sched_getaffinity(0))}
    with tempfile.TemporaryDirectory() as tmp:
        for label, codec in (("kept", packed.CODEC), ("shipped", packed.FAST_CODEC)):
            start = time.perf_counter()
            out = pack_rows(Path(tmp) / label, store.meta, rows, codec)
            seconds = time.perf_counter() - start
            size = sum(p.stat().st_size for p in (Path(tmp) / label / packed.PACKED_DIR).iterdir())
            same = out.num_rows == store.num_rows and out.done_keys() == store.done_keys()
            figures[label] = {"codec": list(codec), "pack_s": round(seconds, 2), "bytes": size, "same_keys": same}
    figures["time_ratio"] = round(figures["kept"]["pack_s"] / figures["shipped"]["pack_s"], 1)
    figures["bytes_ratio"] = round(figures["shipped"]["bytes"] / figures["kept"]["bytes"], 3)
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    try:
        main()
    except OracleAuditError as err:
        sys.exit(f"ship_codec.py: error: {err}")
