"""Benchmark: the evidence kernels of this tree against those of an earlier commit, side by side in one process.

Both versions of oracleaudit/data/evidence_kernels.cu are built with the package's nvcc flags into a temporary
folder and loaded as two `evidence_kernels.Library` objects. For each case (fp32 and fp64 comparisons of
several sizes; errors: "noise", an fp32 kernel's few ulps with exact matches sprinkled in; "scaled", an
error proportional to |ref| that makes every element a hull candidate; "garbage", an unrelated output with
NaN, inf and zeros in it) both libraries run on the same tensors: their results (counts, grid counts,
statistics and the sorted candidates) must be equal to the bit, else the case is reported as a mismatch and
the exit status is 1. Then each is timed, alternating, as a worker calls it (the four kernels and the one
transfer of the head), and the milliseconds per call and the ratio old / new are printed.

    PYTHONPATH=. python bench/kernel_ab.py [--base HEAD|FILE] [--sizes 4096,1048576,4194304] [--json FILE]

--base names a commit, or a file holding the baseline's source (a machine whose copy of the tree has no git
history: `git show COMMIT:oracleaudit/data/evidence_kernels.cu > out/base.cu` where it has, carry out/base.cu).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.evidence_cost import _case as evidence_case
from bench.evidence_cost import _sizes as sizes  # the same argument: one parser
from oracleaudit.evidence import DEFAULT_GRID
from oracleaudit.execution import evidence_kernels

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "oracleaudit/data/evidence_kernels.cu"
ERRORS = ("noise", "scaled", "garbage")


def build(source_text: str, folder: Path, name: str, arch: str) -> evidence_kernels.Library:
    """The kernels of `source_text` built for `arch` into `folder` with the package's nvcc flags, loaded."""
    source = folder / f"{name}.cu"
    source.write_text(source_text)
    target = folder / f"lib{name}.so"
    flags = evidence_kernels._nvcc_flags(arch)
    subprocess.run(["nvcc", *flags, "-o", str(target), str(source)], check=True, capture_output=True)
    return evidence_kernels.Library(target)


def case(n: int, error: str, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An fp32 output and its reference (float32 or float64) on the CPU, as measure compares them (both in
    `dtype`): "noise" and "scaled" as bench/evidence_cost.py makes them, "garbage" here."""
    if error != "garbage":
        out, ref32, ref64 = evidence_case(n, "cpu", error, seed)
        return out.to(dtype), ref32 if dtype == torch.float32 else ref64
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(n, generator=g, dtype=torch.float64)
    out = torch.randn(n, generator=g, dtype=torch.float64) * 10
    pick = torch.rand(n, generator=g)
    out[pick < 0.01] = float("nan")
    out[(pick >= 0.01) & (pick < 0.02)] = float("inf")
    out[(pick >= 0.02) & (pick < 0.05)] = 0
    ref[(pick >= 0.05) & (pick < 0.07)] = 0
    out = out.float()
    ref = ref.float() if dtype == torch.float32 else ref
    return out.to(dtype), ref


def result(raw: evidence_kernels.Raw) -> tuple:
    """What two versions of the kernels must agree on, to the bit: the candidates in (r, d) order, since the
    kernels compact them in any order."""
    candidates = None
    if raw.candidates is not None:
        r, d = (c.cpu().numpy() for c in raw.candidates)
        order = np.lexsort((d, r))
        candidates = (r[order].tobytes(), d[order].tobytes())
    return (raw.counts, raw.within, np.array(raw.stats, dtype=np.float64).tobytes(), raw.all_zero_out, candidates)


def _per_call_ms(library: evidence_kernels.Library, a: torch.Tensor, b: torch.Tensor, reps: int) -> float:
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(reps):
        launched = library.launch(a, b, DEFAULT_GRID)
        launched.head_view().cpu()
    return 1000 * (time.perf_counter() - begin) / reps


def _base_source(base: str) -> str | None:
    """The baseline kernels' source: the file BASE names, else SOURCE at commit BASE; None where neither is."""
    if Path(base).is_file():
        return Path(base).read_text()
    shown = subprocess.run(["git", "show", f"{base}:{SOURCE}"], cwd=ROOT, capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD",
                        help="the commit whose kernels are the baseline (default HEAD), or a file with their source")
    parser.add_argument("--sizes", type=sizes, default=sizes("4096,65536,1048576,4194304"))
    parser.add_argument("--reps", type=int, default=30, help="calls a timing (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timings of each library (default 3)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("kernel_ab.py: needs a CUDA device", file=sys.stderr)
        return 2
    base_source = _base_source(args.base)
    if base_source is None:
        print(f"kernel_ab.py: --base {args.base}: no {SOURCE} there (neither a file nor a commit git shows)",
              file=sys.stderr)
        return 2
    cases, mismatches = [], []
    with tempfile.TemporaryDirectory() as tmp:
        arch = evidence_kernels._arch()
        old = build(base_source, Path(tmp), "old", arch)
        new = build((ROOT / SOURCE).read_text(), Path(tmp), "new", arch)
        for dtype in (torch.float32, torch.float64):
            for n in args.sizes:
                for seed, error in enumerate(ERRORS):
                    a, b = (t.cuda() for t in case(n, error, dtype, seed))
                    label = f"{str(dtype).removeprefix('torch.')} n={n} {error}"
                    if result(old.run(a, b, DEFAULT_GRID)) != result(new.run(a, b, DEFAULT_GRID)):
                        mismatches.append(label)
                    times = {"old": [], "new": []}
                    _per_call_ms(old, a, b, 3)  # warm-up
                    _per_call_ms(new, a, b, 3)
                    for _ in range(args.rounds):
                        times["old"].append(_per_call_ms(old, a, b, args.reps))
                        times["new"].append(_per_call_ms(new, a, b, args.reps))
                    o, w = min(times["old"]), min(times["new"])
                    cases.append({"case": label, "old_ms": round(o, 4), "new_ms": round(w, 4),
                                  "old_over_new": round(o / w, 3)})
                    print(f"{label:32s} old {o:8.4f} ms  new {w:8.4f} ms  {o / w:6.3f}x", flush=True)
    summary = {"gpu": torch.cuda.get_device_name(), "base": args.base, "cases": cases, "mismatches": mismatches,
               "geometric_mean_old_over_new": round(float(np.exp(np.mean([np.log(c["old_over_new"])
                                                                          for c in cases]))), 3)}
    print(f"mismatches: {mismatches or 'none'}; geometric mean old/new {summary['geometric_mean_old_over_new']}x")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
