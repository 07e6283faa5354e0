"""Benchmark (CPU + g++): the binding unit of the run stage's extensions with and without torch's precompiled
<torch/extension.h> (load_inline's `use_pch`, which `build.build` turns on through
`precompiled_header.usable`).

An extension is two translation units: the CUDA unit (nvcc; bench/build_cost.py) and the binding unit, which
g++ compiles from load_inline's `#include <torch/extension.h>`, the solution's declarations in each variant's
namespace and one pybind11 definition per variant and function. For the solutions with the most mutants it
plans the extension (`build.plan_build`) and compiles its binding unit through load_inline without and then
with the precompiled header (made once first, timed apart), in fresh build folders, side by side. The units
only declare the CUDA functions, so loading them fails on undefined symbols after the compile: that is
expected and ignored. Needs g++ and ninja, no GPU and no nvcc.

    PYTHONPATH=. python bench/binding_pch.py [--mutants DIR] [--solutions 3] [--out bench/results/binding_pch.json]

bench/results/binding_pch.json comes from a full `oracleaudit mutate` of the bundled dataset (--mutants of that
output; the bundle's kill_matrix/mutants holds 16 mutants a solution, so its units are smaller).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from oracleaudit import precompiled_header
from oracleaudit.execution.build import plan_build
from oracleaudit.mutant import read_mutants


def _compile(source: str, name: str, use_pch: bool) -> float:
    from torch.utils.cpp_extension import load_inline

    with tempfile.TemporaryDirectory() as directory:
        begin = time.perf_counter()
        try:
            load_inline(name=name, cpp_sources=source, functions=None, build_directory=directory, use_pch=use_pch)
        except (ImportError, OSError) as err:  # undefined symbols: the CUDA unit is not part of this build
            if "undefined symbol" not in str(err):
                raise
        return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("kill_matrix/mutants"))
    parser.add_argument("--solutions", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    os.environ.setdefault("MAX_JOBS", "1")
    by_solution: dict[str, list] = {}
    for mutant in read_mutants(args.mutants):
        if mutant.status == "Pending":
            by_solution.setdefault(mutant.source, []).append(mutant)
    if not by_solution:
        sys.exit(f"binding_pch.py: error: {args.mutants}: no Pending mutants")
    chosen = sorted(by_solution, key=lambda s: (-len(by_solution[s]), s))[:args.solutions]
    units = []
    for solution in chosen:
        extension = plan_build(Path(solution), by_solution[solution]).extensions[0]
        units.append((solution, len(extension.variants), extension.cpp_source, extension.name))
    if not precompiled_header.usable(None, None):
        sys.exit("binding_pch.py: error: torch's header cannot be precompiled here (no g++, or its folder is "
                 "read-only)")
    print(f"{'solution':<40} {'variants':>8} {'plain s':>8} {'header s':>9} {'pch s':>8} {'ratio':>6}")
    rows = []
    for solution, variants, source, name in units:
        precompiled_header.discard()  # else g++ would take the header for the plain build too
        plain = _compile(source, name + "_plain", use_pch=False)
        begin = time.perf_counter()
        precompiled_header.usable(None, None)
        header = time.perf_counter() - begin
        pch = _compile(source, name + "_pch", use_pch=True)
        rows.append({"solution": solution, "variants": variants, "plain_s": round(plain, 1),
                     "precompile_header_s": round(header, 1), "with_header_s": round(pch, 1),
                     "ratio": round(plain / pch, 2)})
        print(f"{Path(solution).name:<40} {variants:>8} {plain:>8.1f} {header:>9.1f} {pch:>8.1f} {plain / pch:>5.2f}x")
    ratio = statistics.median(r["ratio"] for r in rows)
    print(f"binding unit {ratio:.2f}x faster with the precompiled header (median of {len(rows)}); the header is "
          f"made once per machine and torch ({statistics.median(r['precompile_header_s'] for r in rows):.1f} s)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"mutants": str(args.mutants), "units": rows, "median_ratio": ratio},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
