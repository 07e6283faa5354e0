"""Benchmark (CPU): `score`'s probe of which references raise with their inputs cast to float32
(scoring/casting.py), over every bundled problem, in a fresh process with an empty cache folder and again in a
fresh process with the answers kept there, side by side: seconds of each (the probe's first tensor under torch's
device context imports torch._dynamo), the ratio, and whether both gave the same answers.

    PYTHONPATH=. python bench/cast_probe_cost.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import json, time
import torch
from oracleaudit.problem import bundled_root
from oracleaudit.scoring.casting import cast_failures
files = {p.stem: str(p) for p in sorted(bundled_root().glob("level*/*.py"))}
start = time.perf_counter()
failures, unknown = cast_failures(files, "float32")
print(json.dumps({"seconds": time.perf_counter() - start, "problems": len(files), "failures": failures}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory() as cache:
        for label in ("probed", "kept"):
            done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                                  env={**os.environ, "ORACLEAUDIT_CACHE": cache, "PYTHONPATH": str(ROOT)})
            if done.returncode:
                sys.exit(f"cast_probe_cost.py: error: the probe failed: {done.stderr.strip().splitlines()[-1]}")
            runs[label] = json.loads(done.stdout)
    figures = {"problems": runs["probed"]["problems"], "probed_s": round(runs["probed"]["seconds"], 2),
               "kept_s": round(runs["kept"]["seconds"], 3),
               "speedup": round(runs["probed"]["seconds"] / runs["kept"]["seconds"], 1),
               "same_answers": runs["probed"]["failures"] == runs["kept"]["failures"],
               "failures": runs["kept"]["failures"], "cpus": len(os.sched_getaffinity(0))}
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
