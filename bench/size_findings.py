"""Benchmark: does problem size change the findings? The same sample mutants of 13 bundled problems run at the
bundled sizes and at KernelBench's official sizes (each problem file scaled through its shape constants to the
sizes of KernelBench's problem of the same operator, `SCALED`), scored for `kernelbench` and
`kernelbench-verified` side by side.

    prepare  (CPU) WORK/problems: the scaled problem files; WORK/mutants-bundled and WORK/mutants-official: the
             bundled sample mutants of those problems (the first N by id of each solution, as `run
             --per-solution` picks them), the official ones pointing at the scaled files; each problem's input,
             output and parameter bytes and FLOPs at both sizes (meta device) and an estimate of the official
             run's wall time and GPU memory, from which N is chosen (16, or fewer to stay within --budget-s)
    run      (GPU) one size into WORK/evidence-<size> under POOL: only the inputs the two oracles draw, entries
             copied from the default pool (same keys); resumable: a second call continues the store
    compare  (CPU) both oracles at both sizes over the mutants observed at both sizes, witnessed and judged on
             the same POOL inputs at both sizes; a table per problem and in total, the mutants whose verdict
             changed, and a JSON file. Without WORK/evidence-bundled the bundled side is kill_matrix/ (made
             under the default pool, whose entries for these keys are POOL's), restricted to POOL's inputs.

The witness (scoring/witness.py) reads only POOL's inputs at both sizes: a mutant counts as wrong where the
inputs these oracles draw reveal it, so detection is the tolerance's share of what the oracle's own inputs
show. kill_matrix's figures witness on the whole default pool; on these 13 problems, in the 16-per-solution
bundle that came before the complete one, 22 of kernelbench's 24 escapes there were witnessed on no input these
oracles draw (mostly odd and small shapes, which they never draw
at any size); `bundled_full_default_pool` in the JSON gives those figures beside the comparison.

Run from the repository root (mutants and scaled files are named by paths relative to it), e.g. on the GPU
machine:
    PYTHONPATH=. python3 bench/size_findings.py prepare --work out/size_findings
    PYTHONPATH=. python3 bench/size_findings.py run --work out/size_findings --size official --stop-after 480
    PYTHONPATH=. python3 bench/size_findings.py run --work out/size_findings --size bundled --stop-after 480
    PYTHONPATH=. python3 bench/size_findings.py compare --work out/size_findings
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POOL = ROOT / "bench" / "data" / "size_findings" / "pool.toml"
OUT = ROOT / "bench" / "results" / "size_findings.json"
SIZES = ("bundled", "official")
ORACLES = ("kernelbench", "kernelbench-verified")
KERNELBENCH = "https://github.com/ScalingIntelligence/KernelBench"
KERNELBENCH_COMMIT = "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"  # the commit the issue cites (423217d)


@dataclass(frozen=True)
class Scaled:
    """A bundled problem at KernelBench's size: `source` is KernelBench/<source> at KERNELBENCH_COMMIT (the same
    operator), `constants` maps each of the bundled file's constants to (its value there, the expression of
    KernelBench's module-level constants it is), `reduction` names the constants whose product is the length of
    the longest sum behind one output element."""

    source: str
    constants: dict[str, tuple[int, str]]
    reduction: tuple[str, ...]


def _same(**values: int) -> dict[str, tuple[int, str]]:
    return {name: (value, name) for name, value in values.items()}


# Chosen where the sum behind an output grows with the size (matmuls, convolutions, a global pool, a loss, a
# group norm), with one control whose reduction does not (the depthwise convolution), and where an input stays
# ≤ 2**28 elements (1 GiB; an output ≤ 2 GiB) so that 8 workers share the GPU. Left out: the norms, softmaxes,
# reductions, cumsums and losses of level 1 other than KLDivLoss (≥ 4 GiB per input at KernelBench's size),
# CrossEntropyLoss (its reference fails under both oracles' float32 cast at any size), the batched matmul
# (2×), the matrix-vector product (8 GiB) and the level-3 MLP (2.5 GiB of weights, five copies per worker).
# Only sizes are taken: the operators stay the bundled files' (KLDivLoss's predictions are not scaled by
# torch.rand(()), Matmul_Min_Subtract's constant stays 0.25, the depthwise convolution keeps padding 1).
# tests/shared/test_bench_size_findings.py evaluates every expression in KernelBench's file at the commit.
SCALED: dict[str, Scaled] = {
    "level1/30_Square_matrix_multiplication": Scaled(
        "level1/1_Square_matrix_multiplication_.py", {"N": (4096, "N")}, ("N",)),          # N = 2048 * 2
    "level1/31_Matmul_rectangular": Scaled(
        "level1/2_Standard_matrix_multiplication_.py", _same(M=2048, K=8192, N=4096), ("K",)),
    "level1/34_Matmul_transposed_A": Scaled(
        "level1/16_Matmul_with_transposed_A.py", _same(M=2048, K=8192, N=4096), ("K",)),
    "level1/35_Matmul_transposed_B": Scaled(
        "level1/17_Matmul_with_transposed_B.py", _same(M=2048, K=8192, N=4096), ("K",)),
    "level1/37_Conv1d": Scaled(
        "level1/67_conv_standard_1D.py",
        _same(batch_size=32, in_channels=64, out_channels=128, kernel_size=3, length=131072),
        ("in_channels", "kernel_size")),
    "level1/39_Depthwise_conv2d": Scaled(
        "level1/82_conv_depthwise_2D_square_input_square_kernel.py",
        _same(batch_size=16, in_channels=64, kernel_size=3, height=512, width=512), ("kernel_size", "kernel_size")),
    "level1/51_KLDivLoss": Scaled(
        "level1/98_KLDivLoss.py", {"batch_size": (16384, "batch_size"), "input_size": (16384, "input_shape[0]")},
        ("batch_size", "input_size")),
    "level2/1_Gemm_Bias_ReLU": Scaled(
        "level2/76_Gemm_Add_ReLU.py", _same(batch_size=1024, in_features=8192, out_features=8192), ("in_features",)),
    "level2/2_Matmul_Scale_ResidualAdd": Scaled(
        "level2/40_Matmul_Scaling_ResidualAdd.py", _same(batch_size=16384, in_features=4096, out_features=4096),
        ("in_features",)),
    "level2/4_Conv2d_Bias_ReLU": Scaled(
        "level2/1_Conv2D_ReLU_BiasAdd.py",
        _same(batch_size=128, in_channels=64, out_channels=128, kernel_size=3, height=128, width=128),
        ("in_channels", "kernel_size", "kernel_size")),
    "level2/5_Conv2d_GELU_GlobalAvgPool": Scaled(
        "level2/67_Conv2d_GELU_GlobalAvgPool.py",
        _same(batch_size=128, in_channels=8, out_channels=64, kernel_size=3, height=256, width=256),
        ("height", "width")),
    "level2/11_Matmul_Min_Subtract": Scaled(
        "level2/68_Matmul_Min_Subtract.py", _same(batch_size=128, in_features=16384, out_features=16384),
        ("in_features",)),
    "level2/12_Gemm_GroupNorm_HardTanh": Scaled(
        "level2/30_Gemm_GroupNorm_Hardtanh.py",
        {**_same(batch_size=1024, in_features=8192, num_groups=16),
         "channels_per_group": (512, "out_features // num_groups")}, ("in_features",)),
}

# The estimate of a run's time (prepare). Measured figures say where they come from; the rest are assumptions,
# to be replaced by the GPU run's own figures (`run` records them in WORK/state.json).
PAIR_OVERHEAD_S = 8 * 236.7 / 29563  # a worker's time per pair at the bundled sizes (run_scale.json calls[0])
BUILD_CPU_S = 2247.4 / 70            # per solution, cold cache (kill_matrix/provenance.json, run session 1)
STARTUP_S = 80.2                     # workers' start (the same session's startup_s)
RNG_S = 1.04 / 2**27                 # torch.rand on the CPU per element (measured on the 2-core CPU machine)
KERNEL_FLOPS = 5e12                  # assumed: a hand-written tiled fp32 kernel on an H200
FP64_FLOPS = 1e12                    # assumed: the fp64 reference (cuDNN's fp64 convolutions are the slow case)
CPU_FLOPS = 1e11                     # the reference on 16 CPU cores (plan's shape validation): the 13 took 120 s on
                                     # the 2-core machine (2.0e12 FLOPs, 12 s of torch.rand); 16 cores taken as 5×
HBM = 2e12                           # assumed bytes/s on the GPU (half of the 4.3 TB/s copy in KINDS.md)
HOST = 1e10                          # assumed bytes/s between host and GPU (pageable copies)
GPU_BYTES = 143771 * 2**20           # one H200 (nvidia-smi, KINDS.md)
WORKER_OVERHEAD = 2 << 30            # oracleaudit/execution/admission.py
CACHED = 256 << 20                   # oracleaudit/execution/references.py MAX_CACHED_BYTES
GET_INPUTS_CALLS = 5 + 2 + 3 + 4     # per slice: the 5 trials, then draws 2, 3 and 4 after the last trial seed
TIMEOUT_FLOOR_S, TIMEOUT_FACTOR = 5.0, 10.0
SAMPLE = 16                          # mutants per solution in kill_matrix/


# ---- prepare -------------------------------------------------------------------------------------------------


def scale_problem(label: str, folder: Path) -> Path:
    """A copy of the bundled problem `label` under `folder` (same levelL/name.py) with SCALED's constants."""
    from oracleaudit.problem import bundled_root

    text = (bundled_root() / f"{label}.py").read_text()
    for name, (value, _) in SCALED[label].constants.items():
        text, count = re.subn(rf"^({name} = )\d+(\s*#.*)?$", rf"\g<1>{value}\g<2>", text, flags=re.MULTILINE)
        if count != 1:
            raise ValueError(f"{label}: no single line `{name} = <int>` to scale")
    path = folder / f"{label}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def sample_mutants(labels: list[str]) -> dict[str, list]:
    """Per problem, kill_matrix's Pending mutants of its solution, by id (`run --per-solution` order)."""
    from oracleaudit.mutant import PENDING, read_mutants
    from oracleaudit.shipped import shipped_dir

    mutants = [m for m in read_mutants(shipped_dir("kill_matrix") / "mutants") if m.status == PENDING]
    found = {label: sorted((m for m in mutants if m.problem == label), key=lambda m: m.id) for label in labels}
    empty = [label for label, mine in found.items() if not mine]
    if empty:
        raise ValueError(f"no mutants of {empty} in kill_matrix/mutants")
    return found


def footprint(path: Path) -> dict[str, Any]:
    """Bytes of the inputs, outputs and parameters, input shapes and FLOPs (matmuls and convolutions) of one
    reference call, found on the meta device (nothing allocated)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from oracleaudit.problem import load_problem_module
    from oracleaudit.tensors import tensors

    module = load_problem_module(path)
    with torch.device("meta"), torch.no_grad():
        model = module.Model(*module.get_init_inputs())
        inputs = list(module.get_inputs())
        with FlopCounterMode(display=False) as counter:
            outputs = tensors(model(*inputs))
    given = tensors(inputs)

    def size(items) -> int:
        return sum(t.numel() * t.element_size() for t in items)

    return {"input_shapes": [list(t.shape) for t in given], "input_bytes": size(given),
            "largest_input": max((t.numel() for t in given), default=0),
            "random_elements": sum(t.numel() for t in given if t.is_floating_point()),
            "output_bytes": size(outputs), "param_bytes": size(model.parameters()),
            "flops": int(counter.get_total_flops())}


def reduction(label: str, path: Path) -> int:
    from oracleaudit.problem import int_constants, load_problem_module

    return math.prod(int_constants(load_problem_module(path))[name] for name in SCALED[label].reduction)


def estimate(f: dict[str, Any], mutants: int, hangs: int, job_size: int) -> dict[str, Any]:
    """One problem's run at one size (the constants above): pairs, GPU seconds (the kernels of all workers
    share the GPU), worker seconds (pairs, inputs made on the CPU, references), the longest slice, the CPU
    seconds of the plan's shape validation (the reference on the CPU, once per `run` call), and the GPU memory
    of one worker (5 copies of the parameters, 4 of the inputs, 7 of the outputs, in fp32 bytes)."""
    inputs = 8
    slices = math.ceil(mutants / job_size)
    kernel = max(f["flops"] / KERNEL_FLOPS, (f["input_bytes"] + f["output_bytes"]) / HBM)
    pair_gpu = 3 * kernel + 8 * f["output_bytes"] / HBM
    pairs = (mutants + slices) * inputs
    cached = 3 * f["output_bytes"] <= CACHED
    references = inputs if cached else inputs * slices
    reference_s = f["flops"] / KERNEL_FLOPS + f["flops"] / FP64_FLOPS
    moved = inputs * (f["input_bytes"] + 3 * f["output_bytes"] * (1 if cached else 2)) / HOST
    per_slice_inputs = GET_INPUTS_CALLS * f["random_elements"] * RNG_S + moved
    hung = hangs * 3 * (TIMEOUT_FLOOR_S + TIMEOUT_FACTOR * kernel)  # a miss, then once more at twice the deadline
    worker = pairs * (PAIR_OVERHEAD_S + pair_gpu) + slices * per_slice_inputs + references * reference_s + hung
    memory = 5 * f["param_bytes"] + 4 * f["input_bytes"] + 7 * f["output_bytes"] + WORKER_OVERHEAD
    return {"pairs": pairs, "slices": slices, "gpu_s": round(pairs * pair_gpu + references * reference_s, 1),
            "worker_s": round(worker, 1), "longest_slice_s": round(worker / slices, 1),
            "plan_cpu_s": round(f["random_elements"] * RNG_S + f["flops"] / CPU_FLOPS, 1),
            "references_cached": cached, "worker_gpu_bytes": memory,
            "workers_that_fit": min(8, int(0.9 * GPU_BYTES // memory)),
            "host_bytes_per_input": f["input_bytes"] + 3 * f["output_bytes"],
            "reference_cache_bytes": inputs * 3 * f["output_bytes"] if cached else 0}


def total_estimate(per_problem: dict[str, dict], workers: int) -> dict[str, Any]:
    """The run's wall time: start, plan, cold builds on 16 cores, then the slowest of the GPU's share, the
    workers' share and the longest slice."""
    solutions = len(per_problem)
    gpu = sum(e["gpu_s"] for e in per_problem.values())
    work = sum(e["worker_s"] for e in per_problem.values())
    plan = sum(e["plan_cpu_s"] for e in per_problem.values())
    build = solutions * BUILD_CPU_S / 16
    execution = max(gpu, work / workers, max(e["longest_slice_s"] for e in per_problem.values()))
    return {"wall_s": round(STARTUP_S + plan + build + execution, 1), "startup_s": STARTUP_S,
            "plan_cpu_s": round(plan, 1), "build_wall_s": round(build, 1), "gpu_s": round(gpu, 1),
            "worker_s": round(work, 1), "execution_s": round(execution, 1),
            "peak_worker_gpu_bytes": max(e["worker_gpu_bytes"] for e in per_problem.values()),
            "reference_cache_bytes": sum(e["reference_cache_bytes"] for e in per_problem.values())}


def hung_mutants(labels: list[str]) -> set[str]:
    """The mutants of these problems that timed out on a POOL input at the bundled size (kill_matrix)."""
    from oracleaudit.pool import Pool
    from oracleaudit.shipped import shipped_dir
    from oracleaudit.store import EvidenceStore

    rows = EvidenceStore(shipped_dir("kill_matrix") / "evidence").open().read(
        columns=["mutant_id", "status"], filters=[("problem", "in", labels), ("input_id", "in", Pool.load(POOL).keys())])
    return set(rows.loc[rows.status == "Timeout", "mutant_id"])


def prepare(args) -> dict[str, Any]:
    """Write the work folder (see the module docstring); return and save the state's `prepare` part."""
    from oracleaudit.mutant import write_mutants
    from oracleaudit.problem import bundled_root, int_constants, load_problem_module

    work: Path = args.work
    labels = list(args.problems or SCALED)
    scaled = {label: scale_problem(label, work / "problems") for label in labels}
    files = {label: {"bundled": bundled_root() / f"{label}.py", "official": scaled[label]} for label in labels}
    prints = {label: {size: footprint(path) for size, path in files[label].items()} for label in labels}
    sample, hung = sample_mutants(labels), hung_mutants(labels)

    def plan(size: str, n: int) -> dict[str, Any]:
        each = {label: estimate(prints[label][size], len(sample[label][:n]),
                                sum(m.id in hung for m in sample[label][:n]), args.job_size) for label in labels}
        return {"problems": each, "total": total_estimate(each, args.workers_per_gpu)}

    n = args.per_solution or next((n for n in range(SAMPLE, 0, -1)  # as many as the official run's budget fits
                                   if plan("official", n)["total"]["wall_s"] <= args.budget_s), 1)
    chosen = [m for label in labels for m in sample[label][:n]]
    texts = {m.source: (ROOT / m.source).read_text() for m in chosen}
    write_mutants(work / "mutants-bundled", chosen, texts)
    write_mutants(work / "mutants-official", [replace(m, problem_file=str(scaled[m.problem])) for m in chosen], texts)
    problems = {}
    for label in labels:
        spec = SCALED[label]
        bundled = int_constants(load_problem_module(files[label]["bundled"]))
        problems[label] = {
            "kernelbench_file": f"KernelBench/{spec.source}", "kernelbench_commit": KERNELBENCH_COMMIT,
            "constants": {name: {"bundled": bundled[name], "official": value, "kernelbench": expression}
                          for name, (value, expression) in spec.constants.items()},
            "reduction": {size: reduction(label, files[label][size]) for size in SIZES},
            "reduction_of": list(spec.reduction), "hung_at_bundled_size": sum(m.id in hung for m in sample[label][:n]),
            **{size: prints[label][size] for size in SIZES}}
    constants = ("PAIR_OVERHEAD_S", "BUILD_CPU_S", "STARTUP_S", "RNG_S", "KERNEL_FLOPS", "FP64_FLOPS", "CPU_FLOPS",
                 "HBM", "HOST")
    part = {"problems": problems, "per_solution": n, "mutants": len(chosen), "job_size": args.job_size,
            "workers_per_gpu": args.workers_per_gpu, "budget_s": args.budget_s, "pool": str(POOL.relative_to(ROOT)),
            "estimate": {size: plan(size, n) for size in SIZES},
            "estimate_constants": {name.lower(): globals()[name] for name in constants}}
    _save(work, {**_state(work), "prepare": part})
    _print_prepare(part)
    return part


def _print_prepare(part: dict[str, Any]) -> None:
    from oracleaudit.terminal import plain_table

    rows = []
    for label, p in part["problems"].items():
        e = part["estimate"]["official"]["problems"][label]
        both = {k: f"{p['bundled'][k] / 2**20:,.0f} → {p['official'][k] / 2**20:,.0f}" for k in ("input_bytes",
                                                                                             "output_bytes")}
        rows.append([label, p["kernelbench_file"].removeprefix("KernelBench/"),
                     f"{p['reduction']['bundled']:,} → {p['reduction']['official']:,}", both["input_bytes"],
                     both["output_bytes"], f"{p['official']['param_bytes'] / 2**20:,.0f}",
                     f"{e['worker_gpu_bytes'] / 2**30:.1f}", e["workers_that_fit"], f"{e['gpu_s']:.0f}",
                     f"{e['worker_s']:.0f}"])
    plain_table(f"{len(rows)} problems at the bundled → official size ({part['per_solution']} mutants per solution)",
                ["problem", "KernelBench file", "reduction", "inputs MiB", "outputs MiB", "params MiB",
                 "GiB/worker", "workers", "GPU s", "worker s"], rows)
    for size in SIZES:
        t = part["estimate"][size]["total"]
        print(f"estimate at the {size} size: {t['wall_s']:.0f} s wall (start {t['startup_s']:.0f}, plan on the CPU "
              f"{t['plan_cpu_s']:.0f}, cold builds {t['build_wall_s']:.0f}, execution {t['execution_s']:.0f}: GPU "
              f"{t['gpu_s']:.0f} s, workers {t['worker_s']:.0f} s); peak GPU memory of one worker "
              f"{t['peak_worker_gpu_bytes'] / 2**30:.1f} GiB; reference cache {t['reference_cache_bytes'] / 2**30:.1f} GiB")
    print(f"{part['mutants']} mutants ({part['per_solution']} per solution, budget {part['budget_s']:.0f} s at "
          f"--job-size {part['job_size']}); pool {part['pool']}")


# ---- run -----------------------------------------------------------------------------------------------------


def pairs_left(mutants: list, done: set[tuple[str, str, str]]) -> int:
    """The (variant, input) pairs of these mutants, their originals and references under POOL that the store's
    keys (`done_keys`) lack (without planning: the plan would run every reference on the CPU again)."""
    from oracleaudit.pool import Pool

    keys = Pool.load(POOL).keys()
    wanted = {(m.problem, m.id, key) for m in mutants for key in keys}
    wanted |= {(m.problem, v, key) for m in mutants for v in ("original", "reference") for key in keys}
    return len(wanted - done)


def run(args) -> dict[str, Any]:
    """One size's run into WORK/evidence-<size>, resumed where a store exists; the call's summary is appended to
    the state, with the pairs the plan still lacks."""
    import torch

    from oracleaudit import execution as runner
    from oracleaudit.mutant import read_mutants
    from oracleaudit.store import EvidenceStore

    state = _state(args.work)
    if "prepare" not in state:
        raise ValueError(f"{args.work}: run `prepare --work {args.work}` first")
    mutants, store = args.work / f"mutants-{args.size}", args.work / f"evidence-{args.size}"
    result = runner.run(mutants, store, pool=str(POOL), workers_per_gpu=args.workers_per_gpu,
                        job_size=args.job_size or state["prepare"]["job_size"], stop_after_s=args.stop_after,
                        show_progress=False)
    summary = result.summary()
    done = EvidenceStore(store).open().done_keys()
    summary.update(gpu=torch.cuda.get_device_name(0), pairs_left=pairs_left(read_mutants(mutants), done),
                   pairs_recorded=len(done))
    state = _state(args.work)
    state.setdefault("runs", {}).setdefault(args.size, []).append(summary)
    _save(args.work, state)
    print(json.dumps({k: summary[k] for k in ("variants_run", "pairs_run", "pairs_left", "wall_s", "phases",
                                              "gpu_busy_fraction", "observations_by_status", "peak_gpu_bytes_by_problem",
                                              "stopped", "errors", "hangs", "crashes", "exclusive_jobs")}, indent=1))
    print("done: every pair observed" if not summary["pairs_left"] else
          f"{summary['pairs_left']} pairs left: run the same command again to continue")
    return summary


# ---- compare -------------------------------------------------------------------------------------------------


def observations(evidence: Path, problems: list[str], keys: list[str]):
    """A store's rows of these problems on these inputs as scoring reads a store (inferred rows left out, their
    pairs unobserved), every column read at once."""
    import pyarrow.compute as pc

    from oracleaudit.scoring.observations import Observations
    from oracleaudit.store import EvidenceStore

    table = EvidenceStore(evidence).open().read_table(filters=[("problem", "in", problems), ("input_id", "in", keys)])
    inferred = pc.fill_null(table.column("inferred"), False)
    count = int(pc.sum(inferred).as_py() or 0)
    return Observations(table.filter(pc.invert(inferred)).drop_columns(["inferred"]), inferred=count)


def mutant_verdicts(audit, oracle):
    """Per scored mutant: its verdict (killed, escaped, unobserved, unwitnessed[, killed]) and its witness."""
    import numpy as np
    import pandas as pd

    v = audit.verdicts(oracle)
    witnessed = audit.witness["witnessed"].to_numpy()
    verdict = np.where(witnessed, np.where(v.killed, "killed", np.where(v.complete, "escaped", "unobserved")),
                       np.where(v.killed, "unwitnessed, killed", "unwitnessed"))
    error = audit.witness["error"].to_numpy(dtype=float)
    return pd.DataFrame({"mutant_id": audit.mutants["mutant_id"].to_numpy(), "problem": audit.mutants["problem"],
                         "rule": audit.mutants["rule"], "verdict": verdict, "witness": audit.witness["kind"],
                         "error": [None if math.isnan(e) else float(e) for e in error]})


def _originals(obs) -> dict[str, str]:
    """Per problem: on how many inputs the original ran without error, of those observed."""
    frame = obs.frame[obs.frame["mutant_id"] == "original"]
    out = {}
    for problem, rows in frame.groupby(frame["problem"].astype(str)):
        bad = set(rows.loc[rows["status"].astype(str) != "Ok", "input_id"].astype(str))
        inputs = set(rows["input_id"].astype(str))
        out[problem] = f"{len(inputs - bad)}/{len(inputs)}"
    return out


def _side(score: dict[str, Any], problem: str | None = None) -> dict[str, Any]:
    if problem is None:
        keys = ("mutants", "witnessed", "killed", "detection", "escaped", "unobserved", "false_alarms",
                "false_alarm_problems")
        return {k: score[k] for k in keys}
    group = score["by_problem"].get(problem, {"mutants": 0, "witnessed": 0, "killed": 0, "unobserved": 0,
                                             "detection": None})
    return {**group, "escaped": group["witnessed"] - group["killed"] - group["unobserved"],
            "false_alarm": problem in score["false_alarm_problems"]}


def compare_sizes(evidence: dict[str, Path], mutants: dict[str, Path], problems: list[str]) -> dict[str, Any]:
    """Both oracles at both sizes (see the module docstring): totals, per problem, and the changed mutants."""
    from oracleaudit.mutant import read_mutants
    from oracleaudit.pool import Pool
    from oracleaudit.scoring import Audit
    from oracleaudit.scoring.oracle import Oracle

    keys = Pool.load(POOL).keys()
    obs = {size: observations(evidence[size], problems, keys) for size in SIZES}
    records = {size: [m for m in read_mutants(mutants[size]) if m.problem in problems] for size in SIZES}

    def audits(ids: set[str] | None) -> dict[str, Any]:
        return {size: Audit.from_parts(obs[size], [m for m in records[size] if ids is None or m.id in ids],
                                       mutants[size], where=str(evidence[size])) for size in SIZES}

    scored = {size: set(a.mutants["mutant_id"]) for size, a in audits(None).items()}
    both = scored["bundled"] & scored["official"]
    audit = audits(both)
    out: dict[str, Any] = {
        "inputs": keys, "mutants_compared": len(both),
        "left_out": {f"only_{size}": sorted(scored[size] - both) for size in SIZES},
        "originals_ok": {p: {size: _originals(obs[size]).get(p, "0/0") for size in SIZES} for p in problems},
        "oracles": {}}
    for name in ORACLES:
        oracle = Oracle.load(name)
        score = {size: audit[size].score(oracle, by=["problem"]) for size in SIZES}
        table = {size: mutant_verdicts(audit[size], oracle) for size in SIZES}
        joined = table["bundled"].merge(table["official"], on=["mutant_id", "problem", "rule"],
                                        suffixes=("_bundled", "_official"))
        changed = joined[joined["verdict_bundled"] != joined["verdict_official"]].sort_values(["problem", "mutant_id"])
        out["oracles"][name] = {
            "total": {size: _side(score[size]) for size in SIZES},
            "by_problem": {p: {size: _side(score[size], p) for size in SIZES} for p in problems},
            "changed": [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                        for row in changed.to_dict("records")]}
    return out


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "-"
    return f"{v:.0%}" if isinstance(v, float) else "-" if v is None else str(v)


def print_comparison(result: dict[str, Any]) -> None:
    from oracleaudit.terminal import plain_table

    metrics = ("mutants", "witnessed", "killed", "detection", "escaped", "unobserved")
    for name, part in result["oracles"].items():
        rows = []
        for problem, sides in [*part["by_problem"].items(), ("total", part["total"])]:
            b, o = sides["bundled"], sides["official"]
            red = result["problems"].get(problem, {}).get("reduction")
            alarm = "false_alarms" if problem == "total" else "false_alarm"
            ok = result["originals_ok"].get(problem)
            rows.append([problem, f"{red['bundled']:,} → {red['official']:,}" if red else "",
                         f"{ok['bundled']} | {ok['official']}" if ok else "",
                         *(f"{_text(b[k])} | {_text(o[k])}" for k in (*metrics, alarm))])
        plain_table(f"{name}: bundled | official size ({result['mutants_compared']} mutants observed at both sizes, "
                    f"judged on the same {len(result['inputs'])} inputs)",
                    ["problem", "reduction", "original ok", *metrics, "false alarm"], rows)
        print(f"{len(part['changed'])} mutants changed verdict between the sizes")
        for c in part["changed"]:
            print(f"  {c['problem']} {c['mutant_id']} {c['rule']}: {c['verdict_bundled']} → {c['verdict_official']}")
        print()


def full_pool_scores(problems: list[str], mutants: Path) -> dict[str, Any]:
    """kill_matrix's scores of these problems and mutants with the witness over the whole default pool."""
    from oracleaudit.mutant import read_mutants
    from oracleaudit.pool import Pool
    from oracleaudit.scoring import Audit
    from oracleaudit.scoring.oracle import Oracle
    from oracleaudit.shipped import shipped_dir

    obs = observations(shipped_dir("kill_matrix") / "evidence", problems, Pool.load("default").keys())
    audit = Audit.from_parts(obs, [m for m in read_mutants(mutants) if m.problem in problems], mutants)
    return {name: _side(audit.score(Oracle.load(name))) for name in ORACLES}


def compare(args) -> dict[str, Any]:
    from oracleaudit.shipped import shipped_dir

    state = _state(args.work)
    if "prepare" not in state:
        raise ValueError(f"{args.work}: run `prepare --work {args.work}` first")
    ran = args.work / "evidence-bundled"
    bundled = args.bundled_evidence or (ran if ran.is_dir() else shipped_dir("kill_matrix") / "evidence")
    official = args.official_evidence or args.work / "evidence-official"
    problems = list(state["prepare"]["problems"])
    result = compare_sizes({"bundled": bundled, "official": official},
                           {size: args.work / f"mutants-{size}" for size in SIZES}, problems)
    shipped = Path(bundled).resolve() == (shipped_dir("kill_matrix") / "evidence").resolve()
    made = {"bundled": "kill_matrix/ (the default pool: these keys are its entries)" if shipped else "a run",
            "official": "a run"}
    result = {
        "question": "Does problem size change the findings? The same mutants at the bundled sizes and at "
                    "KernelBench's official sizes (problem files scaled through their shape constants).",
        "counted": "a mutant counts where it is observed at both sizes (scored at both: run and built); witness "
                   "and verdicts at both sizes read only the pool's inputs (those the two oracles draw)",
        "kernelbench": {"repository": KERNELBENCH, "commit": KERNELBENCH_COMMIT},
        "pool": state["prepare"]["pool"], "per_solution": state["prepare"]["per_solution"],
        "evidence": {size: {"path": str(path), "made_by": made[size]}
                     for size, path in (("bundled", bundled), ("official", official))},
        "problems": {p: {k: v[k] for k in ("kernelbench_file", "kernelbench_commit", "constants", "reduction",
                                            "reduction_of")} for p, v in state["prepare"]["problems"].items()},
        **result,
        "bundled_full_default_pool": full_pool_scores(problems, args.work / "mutants-bundled"),
        "runs": state.get("runs", {})}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print_comparison(result)
    print(f"wrote {args.out}")
    return result


# ---- state and command line ----------------------------------------------------------------------------------


def _state(work: Path) -> dict:
    return json.loads((work / "state.json").read_text()) if (work / "state.json").is_file() else {}


def _save(work: Path, state: dict) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "state.json").write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--problems", nargs="+", choices=sorted(SCALED), help="a subset of SCALED (default: all)")
    p.add_argument("--per-solution", type=int, help=f"default: as many of {SAMPLE} as fit in --budget-s")
    p.add_argument("--budget-s", type=float, default=480.0, help="the official run's estimated wall time to fit")
    p.add_argument("--job-size", type=int, default=8, help="variants per slice in the runs")
    p.add_argument("--workers-per-gpu", type=int, default=8)
    p.set_defaults(run=prepare)
    p = sub.add_parser("run")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--size", choices=SIZES, required=True)
    p.add_argument("--stop-after", type=float, help="stop starting pairs after S seconds (run again to continue)")
    p.add_argument("--workers-per-gpu", type=int, default=8)
    p.add_argument("--job-size", type=int, help="variants per slice (default: prepare's)")
    p.set_defaults(run=run)
    p = sub.add_parser("compare")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--bundled-evidence", type=Path, help="default: WORK/evidence-bundled, else kill_matrix/evidence")
    p.add_argument("--official-evidence", type=Path, help="default: WORK/evidence-official")
    p.set_defaults(run=compare)
    return parser


def main() -> None:
    args = parser().parse_args()
    started = time.perf_counter()
    args.run(args)
    print(f"size_findings.py {args.part}: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    try:
        main()
    except Exception as err:  # noqa: BLE001 (one line for a bad argument or file; the traceback is above)
        import traceback

        traceback.print_exc()
        sys.exit(f"size_findings.py: error: {type(err).__name__}: {err}")
