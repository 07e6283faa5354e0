"""Benchmark (CPU + nvcc + g++): a solution's extension built on a machine without torch's precompiled header, as
on every fresh GPU machine: waiting for the header first (the policy before) against parsing <torch/extension.h>
in the binding unit while the header is made beside the build (`precompiled_header.usable(..., wait=False)`, what
`build.build` does now).

An extension is two units that ninja compiles side by side, after load_inline has made the header where the
build uses it: the CUDA unit (nvcc) and the binding unit (g++). This runs them as the run stage's build would, for
the solution's original and its first --count Pending mutants (`build.plan_build`): per policy (alternating,
--rounds times) it deletes the shared header, then either makes it and compiles both units (the binding with
it), or asks `usable` without waiting (which starts the header's maker) and compiles both units meanwhile (the
binding without it); the seconds until both units are compiled are the build's. "beside" also says when the
header made beside was ready. The binding unit is built through load_inline, whose loading fails on the CUDA
functions it only declares: expected, ignored (as bench/binding_pch.py). Needs nvcc, g++ and ninja, no GPU.

    PYTHONPATH=. python bench/cold_build.py [--mutants kill_matrix/mutants] [--problem level2/1_Gemm_Bias_ReLU]
        [--count 16] [--rounds 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from oracleaudit import precompiled_header
from oracleaudit.execution.build import plan_build
from oracleaudit.mutant import PENDING, read_mutants
from oracleaudit.mutation.compiler import ARCH, Toolchain
from oracleaudit.shipped import shipped_dir

FLAGS = precompiled_header._flags_text(None, None)  # the bundled solutions pass no host flags


def _cuda_unit(toolchain: Toolchain, source: str, folder: Path) -> None:
    (folder / "cuda.cu").write_text(source)
    flags = ["-c", f"-arch={ARCH}", "-w", "-Xcompiler", "-fPIC", *toolchain.torch_flags, *toolchain.host_flags]
    subprocess.run([toolchain.nvcc, *flags, "cuda.cu", "-o", "cuda.o"], cwd=folder, check=True, capture_output=True)


def _binding_unit(source: str, name: str, folder: Path, use_pch: bool) -> None:
    from torch.utils.cpp_extension import load_inline

    try:
        load_inline(name=name, cpp_sources=source, functions=None, build_directory=str(folder), use_pch=use_pch)
    except (ImportError, OSError) as err:  # undefined symbols: the CUDA unit is not part of this build
        if "undefined symbol" not in str(err):
            raise


def cold_build(toolchain: Toolchain, extension, policy: str, round_: int) -> dict:
    """One build of `extension` with no shared header at its start, under `policy` ("waiting" or "beside")."""
    precompiled_header.discard()
    precompiled_header._started.clear()
    with tempfile.TemporaryDirectory(prefix="oracleaudit-cold-build-") as tmp:
        begun = time.perf_counter()
        use_pch = bool(precompiled_header.usable(None, None, wait=policy == "waiting"))
        header_s = time.perf_counter() - begun if policy == "waiting" else None
        failure: list[BaseException] = []

        def cuda() -> None:
            try:
                _cuda_unit(toolchain, extension.cuda_source, Path(tmp))
            except BaseException as err:  # noqa: BLE001 - raised again below, in the caller's thread
                failure.append(err)

        nvcc = threading.Thread(target=cuda)
        nvcc.start()
        _binding_unit(extension.cpp_source, f"oa_cold_{policy}_{round_}", Path(tmp), use_pch)
        nvcc.join()
        if failure:
            raise failure[0]
        built = time.perf_counter() - begun
    ready = None
    if policy == "beside":
        while ready is None and time.perf_counter() - begun < 900:
            if precompiled_header._ready(precompiled_header._folder(), FLAGS):
                ready = time.perf_counter() - begun
            time.sleep(0.5)
    return {"policy": policy, "built_s": round(built, 1), "binding_used_header": use_pch,
            "header_made_first_s": header_s and round(header_s, 1), "header_ready_s": ready and round(ready, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=shipped_dir("kill_matrix") / "mutants")
    parser.add_argument("--problem", default="level2/1_Gemm_Bias_ReLU")
    parser.add_argument("--count", type=int, default=16, help="mutants built with the original (default 16)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    chosen = sorted((m for m in read_mutants(args.mutants) if m.problem == args.problem and m.status == PENDING),
                    key=lambda m: m.id)[:args.count]
    if not chosen:
        print(f"cold_build.py: {args.mutants}: no Pending mutants of {args.problem}", file=sys.stderr)
        return 2
    if precompiled_header.usable(None, None) is not True:
        print("cold_build.py: torch's header cannot be precompiled here (no g++, or its folder is read-only)",
              file=sys.stderr)
        return 2
    extension = plan_build(Path(chosen[0].source), chosen).extensions[0]
    toolchain = Toolchain()
    runs = []
    for round_ in range(args.rounds):
        for policy in ("waiting", "beside"):
            runs.append(cold_build(toolchain, extension, policy, round_))
            print(json.dumps(runs[-1]), flush=True)
    waiting = min(r["built_s"] for r in runs if r["policy"] == "waiting")
    beside = min(r["built_s"] for r in runs if r["policy"] == "beside")
    summary = {"solution": chosen[0].source, "variants": len(extension.variants), "runs": runs,
               "waiting_over_beside": round(waiting / beside, 3)}
    print(f"built from no header: waiting for it {waiting} s, made beside {beside} s: {waiting / beside:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
