"""Benchmark (CPU + nvcc): where the run stage's build time goes, for one variant and for many, with the
solution's own torch header and with the light one the run stage uses.

Plans the compile-once extension of one solution (`build.plan_build`) four times — only the original and
the original plus N mutants, each with <torch/extension.h> (`full_headers`) and with <torch/types.h> — and
compiles each one's CUDA translation unit with `nvcc -c --time` (torch's nvcc flags and include paths, as
`load_inline` compiles it) after one warm-up compile. Prints the time of every nvcc phase side by side and
the ratios: how much a namespace-cloned variant adds to a build, and how much of the fixed cost (cudafe++,
cicc and the host compiler each parse the torch headers) the light header saves. Needs nvcc and torch's
headers, no GPU.

With `--sizes N,...` it instead compiles the light-header unit of the original and its first N - 1 mutants for each
N (one extension of N variants, as the run stage's chunks are), one after the other, and prints each one's
wall seconds, the seconds each variant adds between sizes, and what splitting the largest N into chunks of the
others would cost in CPU seconds and save in the wall seconds of the longest chunk (`--json FILE` too).

    PYTHONPATH=. python bench/build_cost.py [--mutants bench/data/mutants_3x20] [--problem level2/1_Gemm_Bias_ReLU]
    PYTHONPATH=. python bench/build_cost.py --mutants bench/data/full_run --problem level2/6_Gemm_LayerNorm_GELU \
        --sizes 1,64,128,256 [--json FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oracleaudit.errors import OracleAuditError
from oracleaudit.execution.build import plan_build
from oracleaudit.mutant import read_mutants
from oracleaudit.mutation.compiler import ARCH, Toolchain


def _compile(toolchain: Toolchain, source: str, workdir: Path, tag: str) -> tuple[float, dict[str, float]]:
    """(wall seconds, seconds per nvcc phase) of compiling `source` to an object file."""
    unit, times = workdir / f"{tag}.cu", workdir / f"{tag}.csv"
    unit.write_text(source)
    flags = ["-c", f"-arch={ARCH}", "-w", "-Xcompiler", "-fPIC", *toolchain.torch_flags, *toolchain.host_flags]
    begin = time.perf_counter()
    subprocess.run([toolchain.nvcc, *flags, unit.name, "-o", f"{tag}.o", "--time", times.name], cwd=workdir,
                   check=True, capture_output=True)
    wall = time.perf_counter() - begin
    phases: dict[str, float] = {}
    with times.open() as f:
        for row in csv.reader(f):
            cells = [c.strip() for c in row]
            if len(cells) >= 2 and cells[-1] == "ms" and cells[1] != "nvcc (driver)":
                phases[cells[1]] = phases.get(cells[1], 0.0) + float(cells[-2]) / 1000
    return wall, phases


def _sizes(text: str) -> list[int]:
    try:
        return sorted({int(n) for n in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of whole numbers: {text!r}") from None


def by_size(toolchain: Toolchain, solution: Path, group: list, sizes: list[int], out: Path | None) -> None:
    """Compile one light-header extension of each size in `sizes` (variants, the original included)."""
    if sizes[0] < 1 or sizes[-1] > len(group) + 1:
        sys.exit(f"build_cost.py: error: --sizes must be within 1-{len(group) + 1} for {solution}")
    with tempfile.TemporaryDirectory() as tmp:
        _compile(toolchain, plan_build(solution, []).extensions[0].cuda_source, Path(tmp), "warmup")
        wall = {}
        for n in sizes:
            (extension,) = plan_build(solution, group[:n - 1], max_variants=n).extensions
            wall[n] = round(_compile(toolchain, extension.cuda_source, Path(tmp), f"n{n}")[0], 1)
            print(f"{n:>5} variants: {wall[n]:6.1f} s", flush=True)
    slopes = {f"{a}-{b}": round((wall[b] - wall[a]) / (b - a), 3) for a, b in zip(sizes, sizes[1:])}
    largest = sizes[-1]
    split = {}
    for n in sizes[:-1]:
        chunks = -(-largest // n)
        split[str(n)] = {"chunks": chunks, "cpu_s": round(chunks * wall[n], 1), "longest_s": wall[n],
                         "cpu_ratio": round(chunks * wall[n] / wall[largest], 2),
                         "longest_ratio": round(wall[n] / wall[largest], 2)}
    print(f"seconds per added variant: {slopes}")
    for n, figures in split.items():
        print(f"{largest} variants as {figures['chunks']} chunks of {n}: {figures['cpu_ratio']:.2f}x the CPU "
              f"seconds, the longest chunk {figures['longest_ratio']:.2f}x the wall of one extension")
    if out:
        out.write_text(json.dumps({"solution": str(solution), "nvcc": toolchain.version, "wall_s": wall,
                                   "s_per_variant": slopes, "split_largest": split}, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("bench/data/mutants_3x20"))
    parser.add_argument("--problem", default="level2/1_Gemm_Bias_ReLU")
    parser.add_argument("--sizes", type=_sizes,
                        help="variants per extension to compile, comma-separated (e.g. 1,64,128,256)")
    parser.add_argument("--json", type=Path, help="with --sizes: write the figures to this file")
    args = parser.parse_args()
    group = [m for m in read_mutants(args.mutants) if m.problem == args.problem and m.status == "Pending"]
    if not group:
        sys.exit(f"build_cost.py: error: {args.mutants}: no Pending mutants of {args.problem}")
    solution = Path(group[0].source)
    toolchain = Toolchain()
    if args.sizes:
        return by_size(toolchain, solution, group, args.sizes, args.json)
    full = frozenset({0})
    sources = {
        "extension.h, original": plan_build(solution, [], full_headers=full).extensions[0].cuda_source,
        f"extension.h, +{len(group)}": plan_build(solution, group, full_headers=full).extensions[0].cuda_source,
        "types.h, original": plan_build(solution, []).extensions[0].cuda_source,
        f"types.h, +{len(group)}": plan_build(solution, group).extensions[0].cuda_source,
    }
    with tempfile.TemporaryDirectory() as tmp:
        _compile(toolchain, sources["types.h, original"], Path(tmp), "warmup")  # warm the file-system caches
        results = {name: _compile(toolchain, text, Path(tmp), f"unit{i}")
                   for i, (name, text) in enumerate(sources.items())}
    names = list(results)
    print(f"{solution} ({toolchain.version}), one CUDA translation unit, seconds")
    print(f"{'phase':<24}" + "".join(f"{n:>24}" for n in names))
    for phase in results[names[0]][1]:
        print(f"{phase:<24}" + "".join(f"{results[n][1].get(phase, 0.0):>24.1f}" for n in names))
    print(f"{'wall':<24}" + "".join(f"{results[n][0]:>24.1f}" for n in names))
    for header, (one, many) in (("extension.h", names[:2]), ("types.h", names[2:])):
        one, many = results[one][0], results[many][0]
        print(f"{header}: {many / one:.2f}x the build time for {len(group) + 1} variants instead of 1 "
              f"({(many - one) / len(group):+.2f} s per added variant)")
    print(f"types.h / extension.h: {results[names[2]][0] / results[names[0]][0]:.2f}x for the original, "
          f"{results[names[3]][0] / results[names[1]][0]:.2f}x with the mutants")


if __name__ == "__main__":
    try:
        main()
    except (OracleAuditError, OSError, subprocess.CalledProcessError) as err:
        sys.exit(f"build_cost.py: error: {err}")
