"""The GPU worker: a subprocess bound to one GPU that builds a solution's variants once, computes the fp32 and
fp64 references on every pool input, runs each variant, and sends back one observation row per (variant,
input, output tensor).

Protocol (a `multiprocessing` pipe; the worker is started with the spawn method so CUDA starts fresh):
  parent → worker: a `Job`
  worker → parent: ("built", seconds) · ("variant", key) before each variant · ("rows", key, rows) after it
                   · ("done", times) · ("fatal", key, message) just before exiting on a sticky CUDA error
                   · ("error", message, context_alive) when the job fails as a whole (then, if the CUDA
                   context is dead, the worker exits: it would fail every later job).
The parent (runner.py) turns a silent worker into a Timeout and a dead one into a RuntimeError for the
variant it was running, and starts a new worker for the rest. After each variant the worker checks that the
inputs and references it keeps are bitwise unchanged (a mutant's stray writes can reach them) and makes
them again if not.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ORIGINAL = "original"
REFERENCE = "reference"
WEIGHT_SEED = 42  # KernelBench: torch.manual_seed(42) before constructing Model and ModelNew


@dataclass(frozen=True)
class Job:
    """One solution's work: its variants (mutant records as dicts; the original is always run first) on
    the given pool entries."""

    solution: str
    problem_path: str
    mutants: tuple[dict, ...]
    pool: str
    entry_keys: tuple[tuple[str, int, str, str], ...]  # (key, seed, shape variant, distribution) per input
    build_dir: str
    device: str
    skip_variants: tuple[str, ...] = ()


def math_mode(device: str) -> dict[str, Any]:
    """The fp32 reference's math mode: TF32 flags as PyTorch has them (cuDNN TF32 is on by default)."""
    import torch

    return {"ref_matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "ref_cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "ref_matmul_precision": torch.get_float32_matmul_precision(), "ref_device": device}


def _tensors(value: Any) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _status_of(err: BaseException) -> str:
    import torch

    if isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in str(err).lower():
        return "OOM"
    return "RuntimeError"


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[0] if lines else type(err).__name__)[:400]


def _context_alive() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


def run_job(job: Job, send) -> None:
    """Do one job in this process, reporting through `send(message)`."""
    import torch

    from oracleaudit import build as builds
    from oracleaudit.evidence import measure
    from oracleaudit.mutant import Mutant
    from oracleaudit.pool import Pool
    from oracleaudit.problem import problem_at

    device = job.device
    torch.cuda.set_device(torch.device(device))
    mutants = [Mutant(**m) for m in job.mutants]
    started = time.perf_counter()
    plan, built, unbuildable = builds.build_isolating(Path(job.solution), mutants, Path(job.build_dir))
    send(("built", time.perf_counter() - started))

    problem = problem_at(job.problem_path)
    pool = Pool.load(job.pool)
    wanted = {key for key, *_ in job.entry_keys}
    entries = [e for e in pool.entries_for(problem) if e.key in wanted]
    mode = math_mode(torch.cuda.get_device_name(torch.device(device)))
    cases = _cases(entries, problem, device)
    prints = [_fingerprint(case) for case in cases]
    rows = []
    for entry, _, _, _, _, ref32, ref64 in cases if REFERENCE not in job.skip_variants else ():
        for index, (r32, r64) in enumerate(zip(ref32, ref64)):
            rows.append(_row(REFERENCE, problem, entry, index, "Ok", None, None, None, None, mode,
                             None, measure(r32, r64)))
    if rows:
        send(("rows", REFERENCE, rows))

    for key, message in unbuildable.items():
        if key not in job.skip_variants:
            send(("variant", key))
            send(("rows", key, [_row(key, problem, entry, 0, "BuildError", "BuildError", message, None, None, mode,
                                     None, None) for entry, *_ in cases]))
    variants = [v for v in plan.variants if v.key not in set(job.skip_variants)]
    exec_s = evidence_s = 0.0
    for variant in variants:
        send(("variant", variant.key))
        rows = []
        try:
            solution = builds.load_variant(plan, built, variant)
        except Exception as err:
            traceback.print_exc()
            for entry, *_ in cases:
                rows.append(_row(variant.key, problem, entry, 0, _status_of(err), type(err).__name__,
                                 _first_line(err), None, None, mode, None, None))
            send(("rows", variant.key, rows))
            continue
        for entry, module, init, model, inputs, ref32, ref64 in cases:
            executing = time.perf_counter()
            try:
                torch.manual_seed(WEIGHT_SEED)
                model_new = solution.ModelNew(*init).to(device).eval()
                with torch.no_grad():
                    torch.cuda.synchronize()
                    begin = time.perf_counter()
                    first = [t.detach().clone() for t in _tensors(model_new(*inputs))]
                    torch.cuda.synchronize()
                    elapsed = 1000 * (time.perf_counter() - begin)
                    model(*inputs)  # kernel → reference → kernel: exposes reuse of stale buffers
                    second = [t.detach() for t in _tensors(model_new(*inputs))]
                    torch.cuda.synchronize()
            except Exception as err:
                traceback.print_exc()
                rows.append(_row(variant.key, problem, entry, 0, _status_of(err), type(err).__name__,
                                 _first_line(err), None, None, mode, None, None))
                if not _context_alive():
                    _exit_fatal(send, variant.key, rows, err)
                continue
            exec_s += time.perf_counter() - executing
            measuring = time.perf_counter()
            try:
                rows.extend(_observe(variant.key, problem, entry, mode, elapsed, first, second, ref32, ref64))
            except Exception as err:
                # With the CUDA context dead, a fault of the variant surfaced late (asynchronously): its
                # crash. With the context alive the failure is oracleaudit's own: the job fails loudly.
                if _context_alive():
                    raise
                traceback.print_exc()
                rows.append(_row(variant.key, problem, entry, 0, "RuntimeError", type(err).__name__,
                                 _first_line(err), None, None, mode, None, None))
                _exit_fatal(send, variant.key, rows, err)
            evidence_s += time.perf_counter() - measuring
        # Out-of-bounds writes of a mutant can land in the inputs or references kept for the next variants:
        # if any changed, make them again (deterministically) rather than judge the next variant on them.
        if any(not torch.equal(_fingerprint(case), before) for case, before in zip(cases, prints)):
            print(f"oracleaudit worker: {variant.key} changed inputs or references; recomputing them",
                  file=sys.stderr)
            cases = _cases(entries, problem, device)
            prints = [_fingerprint(case) for case in cases]
        send(("rows", variant.key, rows))
    send(("done", {"exec_s": exec_s, "evidence_s": evidence_s}))


def _exit_fatal(send, key: str, rows: list[dict], err: Exception) -> None:
    """The CUDA context is dead: send the variant's rows, say why, and end this process (the supervisor
    starts a fresh worker for the rest of the job)."""
    send(("rows", key, rows))
    send(("fatal", key, f"{type(err).__name__}: {_first_line(err)}"))
    os._exit(3)


def _cases(entries, problem, device: str) -> list[tuple]:
    """Per pool entry: (entry, problem module, init args, fp32 Model, inputs, fp32 outputs, fp64 outputs),
    the Model built after the same seed as KernelBench builds both models with."""
    import torch

    cases = []
    for entry in entries:
        module = entry.load_problem(problem)
        inputs = entry.make_inputs(module, device)
        torch.manual_seed(WEIGHT_SEED)
        init = entry_init(module, device)
        torch.manual_seed(WEIGHT_SEED)
        model = module.Model(*init).to(device).eval()
        model64 = copy.deepcopy(model).double()
        with torch.no_grad():
            ref32 = [t.detach() for t in _tensors(model(*inputs))]
            ref64 = [t.detach() for t in _tensors(model64(*[_double(x) for x in inputs]))]
        torch.cuda.synchronize()
        cases.append((entry, module, init, model, inputs, ref32, ref64))
    return cases


def _fingerprint(case: tuple):
    """A position-weighted checksum of every byte of a case's inputs, init tensors and reference outputs."""
    import torch

    _, _, init, _, inputs, ref32, ref64 = case
    sums = []
    for t in [*inputs, *init, *ref32, *ref64]:
        if isinstance(t, torch.Tensor) and t.numel():
            b = _bits(t.detach()).to(torch.int64)
            weights = torch.arange(b.numel(), device=b.device, dtype=torch.int64) % 65521 + 1
            sums.append((b * weights).sum())
    return torch.stack(sums).cpu() if sums else torch.zeros(0, dtype=torch.int64)


def _observe(key, problem, entry, mode, elapsed, first, second, ref32, ref64) -> list[dict]:
    """The rows of one variant on one input: status, bitwise repeat, evidence against both references."""
    import torch

    from oracleaudit.evidence import measure

    if len(first) != len(ref32):
        return [_row(key, problem, entry, 0, "ShapeMismatch", None, f"{len(first)} outputs, reference has "
                     f"{len(ref32)}", elapsed, None, mode, None, None)]
    rows = []
    for index, (out, again, r32, r64) in enumerate(zip(first, second, ref32, ref64)):
        status = "Ok"
        if out.shape != r32.shape:
            status = "ShapeMismatch"
        elif out.dtype != r32.dtype:
            status = "DtypeMismatch"
        same = out.shape == again.shape and out.dtype == again.dtype and bool(torch.equal(_bits(out), _bits(again)))
        rows.append(_row(key, problem, entry, index, status, None, None, elapsed, same, mode, measure(out, r32),
                         measure(out, r64)))
    return rows


def _bits(t):
    """The tensor's bytes (so NaNs with equal bits compare equal and -0.0 differs from 0.0)."""
    import torch

    return t.contiguous().reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


def entry_init(module: Any, device: str) -> list:
    init = list(module.get_init_inputs())
    return [x.to(device) if hasattr(x, "to") else x for x in init]


def _double(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.double()
    return x


def _row(mutant_id, problem, entry, index, status, error_class, error_message, time_ms, repeat_equal, mode,
         ev32, ev64) -> dict:
    """One observation row (store.OBSERVATION_SCHEMA). `ev32`/`ev64` are the ErrorEvidence against the
    fp32/fp64 reference; on "reference" rows `ev64` is the fp32 reference's own evidence against fp64."""
    row = {"mutant_id": mutant_id, "problem": problem.label, "input_id": entry.key, "input_seed": entry.seed,
           "shape_variant": entry.variant, "distribution": entry.distribution, "output_index": index,
           "status": status, "error_class": error_class, "error_message": error_message, "time_ms": time_ms,
           "repeat_bitwise_equal": repeat_equal, **mode}
    if ev32 is not None:
        row.update(ev32.to_row("fp32_"))
    if ev64 is not None:
        row.update(ev64.to_row("fp64_"))
    return row


def usable_cpus() -> int:
    """The CPUs this process may run on (a `taskset` or cgroup CPU set counts, unlike os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def main(conn, gpu: str) -> None:
    """Worker process entry point: take jobs from the pipe until None arrives. Ctrl-C is the parent's to
    handle: a worker dying of it would be recorded as the current mutant's crash."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("MAX_JOBS", str(max(1, usable_cpus() // 2)))
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            run_job(job, conn.send)
        except Exception as err:
            traceback.print_exc()
            alive = _context_alive()
            conn.send(("error", f"{type(err).__name__}: {_first_line(err)}", alive))
            if not alive:  # a dead CUDA context fails every later job: let the supervisor start a fresh worker
                os._exit(3)
