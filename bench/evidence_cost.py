"""Benchmark: what one `measure.measure` call costs with each engine, beside one `torch.allclose` on the
same tensors.

For fp32 outputs of several sizes and two kinds of error ("noise": an fp32 kernel's few ulps of relative
noise, plus a sprinkle of exact matches; "scaled": the output 1.001 × the reference, an error proportional
to |ref|, which makes every element a hull candidate) it times `measure(out, ref32)` and
`measure(out, ref64)` with the torch version and (on CUDA) the fused kernels, and
`torch.allclose(out, ref32)`, in the same process, and prints milliseconds per call and the ratios
torch / fused and measure / allclose. With `--profile` it also prints the functions where the torch version
spends its time (cProfile, by own time).

    PYTHONPATH=. python bench/evidence_cost.py [--device cuda] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import torch

from oracleaudit.execution.measure import measure

ERRORS = ("noise", "scaled")


def _case(n: int, device: str, error: str = "noise",
          seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    ref64 = torch.randn(n, generator=g, dtype=torch.float64)
    if error == "scaled":
        out = (ref64 * 1.001).float()
    else:
        noise = torch.randn(n, generator=g, dtype=torch.float64) * 3e-7
        noise[torch.rand(n, generator=g) < 0.3] = 0
        out = (ref64 * (1 + noise)).float()
    return out.to(device), ref64.float().to(device), ref64.to(device)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _per_call(fn, device: str, reps: int) -> float:
    _sync(device)
    begin = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync(device)
    return 1000 * (time.perf_counter() - begin) / reps


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be ≥ 1: {text!r}")
    return sizes


def _errors(text: str) -> list[str]:
    values = text.split(",")
    if any(v not in ERRORS for v in values):
        raise argparse.ArgumentTypeError(f"not a comma-separated list of {', '.join(ERRORS)}: {text!r}")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", type=_sizes, default="4096,262144,4194304",
                        help="comma-separated element counts")
    parser.add_argument("--errors", type=_errors, default="noise,scaled",
                        help=f"comma-separated kinds of error ({', '.join(ERRORS)})")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"device {args.device}, torch {torch.__version__}")
    engines = ["torch", "fused"] if args.device.startswith("cuda") else ["torch"]
    print("ms per call; measure against the fp32 / fp64 reference")
    print(f"{'error':>6} {'elements':>10} " + " ".join(f"{e + ' fp32':>11} {e + ' fp64':>11}" for e in engines)
          + f" {'allclose':>9} {'torch/fused':>12} {'fused/allclose':>15}")
    for error, n in ((e, n) for e in args.errors for n in args.sizes):
        out, r32, r64 = _case(n, args.device, error)
        times = []
        for engine in engines:
            for _ in range(2):  # warm up kernels and caches (and build the fused kernels)
                measure(out, r32, engine=engine), measure(out, r64, engine=engine)
            times.append(_per_call(lambda: measure(out, r32, engine=engine), args.device, args.reps))
            times.append(_per_call(lambda: measure(out, r64, engine=engine), args.device, args.reps))
        tac = _per_call(lambda: torch.allclose(out, r32), args.device, args.reps)
        line = f"{error:>6} {n:>10} " + " ".join(f"{t:>11.3f}" for t in times) + f" {tac:>9.3f}"
        if len(engines) == 2:
            line += f" {(times[0] + times[1]) / (times[2] + times[3]):>11.1f}x {(times[2] + times[3]) / 2 / tac:>14.1f}x"
        print(line, flush=True)
    if args.profile:
        out, r32, r64 = _case(262144, args.device)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.reps):
            measure(out, r32, engine="torch"), measure(out, r64, engine="torch")
        _sync(args.device)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
