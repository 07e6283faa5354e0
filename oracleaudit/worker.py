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

Host-side costs. Several workers share one GPU, whose contexts are time-sliced, so the worker keeps the
GPU's share of each input small:
- A variant's ModelNew is constructed once per set of init args (KernelBench's way: the weight seed, then
  the constructor, on the CPU, then `.to(device)`) and kept as a template; every input gets a deep copy
  (made on the GPU) with the RNG states the constructor left, so the model is the one a fresh construction
  would give. A model that cannot be deep-copied is constructed afresh per input.
- `Job.evidence_engine` picks evidence.measure's engine. "auto" uses the fused kernels of
  `evidence_kernels` (four kernels and one transfer per measurement instead of ~150 kernels and ~6
  synchronisations: bench/evidence_cost.py).
- Workers sharing a machine share its cores: each caps torch's CPU threads at usable cores / workers.
- The check for stray writes transfers one checksum vector per variant.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import traceback
import types
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
    evidence_engine: str = "auto"  # evidence.measure's engine: auto, torch or fused
    cpu_threads: int = 0  # torch's CPU threads in the worker (0: torch's default, every core)


@dataclass
class Case:
    """One pool input of a job, prepared once: the problem module with the entry's shapes, the init args,
    the fp32 Model, the inputs, the fp32/fp64 reference outputs."""

    entry: Any
    module: Any
    init: list
    model: Any
    inputs: list
    ref32: list
    ref64: list


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
    if job.cpu_threads:  # workers sharing a machine share its cores: OpenMP teams of every core each thrash
        torch.set_num_threads(job.cpu_threads)
    mutants = [Mutant(**m) for m in job.mutants]
    started = time.perf_counter()
    plan, built, unbuildable = builds.build_isolating(Path(job.solution), mutants, Path(job.build_dir))
    send(("built", time.perf_counter() - started))

    problem = problem_at(job.problem_path)
    pool = Pool.load(job.pool)
    wanted = {key for key, *_ in job.entry_keys}
    entries = [e for e in pool.entries_for(problem) if e.key in wanted]
    mode = math_mode(torch.cuda.get_device_name(torch.device(device)))
    engine = job.evidence_engine
    cases = _cases(entries, problem, device)
    prints = _fingerprints(cases)
    rows = []
    for case in cases if REFERENCE not in job.skip_variants else ():
        for index, (r32, r64) in enumerate(zip(case.ref32, case.ref64)):
            rows.append(_row(REFERENCE, problem, case.entry, index, "Ok", None, None, None, None, mode,
                             None, measure(r32, r64, engine=engine)))
    if rows:
        send(("rows", REFERENCE, rows))

    for key, message in unbuildable.items():
        if key not in job.skip_variants:
            send(("variant", key))
            send(("rows", key, [_row(key, problem, case.entry, 0, "BuildError", "BuildError", message, None, None,
                                     mode, None, None) for case in cases]))
    variants = [v for v in plan.variants if v.key not in set(job.skip_variants)]
    exec_s = evidence_s = 0.0
    for variant in variants:
        send(("variant", variant.key))
        rows = []
        try:
            solution = builds.load_variant(plan, built, variant)
        except Exception as err:
            traceback.print_exc()
            for case in cases:
                rows.append(_row(variant.key, problem, case.entry, 0, _status_of(err), type(err).__name__,
                                 _first_line(err), None, None, mode, None, None))
            send(("rows", variant.key, rows))
            continue
        models = ModelTemplates(solution.ModelNew, device)
        for case in cases:
            executing = time.perf_counter()
            try:
                model_new = models.fresh(case)
                with torch.no_grad():
                    torch.cuda.synchronize()
                    begin = time.perf_counter()
                    first = [t.detach().clone() for t in _tensors(model_new(*case.inputs))]
                    torch.cuda.synchronize()
                    elapsed = 1000 * (time.perf_counter() - begin)
                    case.model(*case.inputs)  # kernel → reference → kernel: exposes reuse of stale buffers
                    second = [t.detach() for t in _tensors(model_new(*case.inputs))]
                    torch.cuda.synchronize()
                del model_new
            except Exception as err:
                traceback.print_exc()
                rows.append(_row(variant.key, problem, case.entry, 0, _status_of(err), type(err).__name__,
                                 _first_line(err), None, None, mode, None, None))
                if not _context_alive():
                    _exit_fatal(send, variant.key, rows, err)
                continue
            exec_s += time.perf_counter() - executing
            measuring = time.perf_counter()
            try:
                rows.extend(_observe(variant.key, problem, case, mode, elapsed, first, second, engine))
            except Exception as err:
                # With the CUDA context dead, a fault of the variant surfaced late (asynchronously): its
                # crash. With the context alive the failure is oracleaudit's own: the job fails loudly.
                if _context_alive():
                    raise
                traceback.print_exc()
                rows.append(_row(variant.key, problem, case.entry, 0, "RuntimeError", type(err).__name__,
                                 _first_line(err), None, None, mode, None, None))
                _exit_fatal(send, variant.key, rows, err)
            evidence_s += time.perf_counter() - measuring
        del models
        # Out-of-bounds writes of a mutant can land in the inputs or references kept for the next variants:
        # if any changed, make them again (deterministically) rather than judge the next variant on them.
        if not torch.equal(_fingerprints(cases), prints):
            print(f"oracleaudit worker: {variant.key} changed inputs or references; recomputing them",
                  file=sys.stderr)
            cases = _cases(entries, problem, device)
            prints = _fingerprints(cases)
        send(("rows", variant.key, rows))
    send(("done", {"exec_s": exec_s, "evidence_s": evidence_s}))


class ModelTemplates:
    """Fresh ModelNew instances of one variant, as KernelBench makes them (the weight seed, then the
    constructor), made once per set of init args and deep-copied per input.

    A copy equals a fresh construction: the same parameter and buffer values, the same Python state, and
    the CPU and CUDA RNG states the constructor left behind are restored with it. Extension modules the
    model refers to are shared, not copied. A model that cannot be deep-copied is constructed per input."""

    def __init__(self, model_class, device: str):
        self.model_class = model_class
        self.device = device
        self.templates: dict[Any, tuple | None] = {}

    def fresh(self, case: Case):
        import torch

        key = tuple(case.entry.overrides or ())
        template = self.templates.get(key)
        if template is not None:
            model, rng = template
            copied = copy.deepcopy(model, _shared_modules(model))
            self._set_rng(rng)
            return copied
        torch.manual_seed(WEIGHT_SEED)
        model = self.model_class(*case.init).to(self.device).eval()
        if key not in self.templates:
            rng = self._rng()
            try:
                self.templates[key] = (copy.deepcopy(model, _shared_modules(model)), rng)
            except Exception:  # e.g. an attribute pybind11 cannot copy: construct per input instead
                self.templates[key] = None
        return model

    def _rng(self) -> tuple:
        import torch

        cuda = torch.device(self.device).type == "cuda"
        return torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if cuda else None

    def _set_rng(self, rng: tuple) -> None:
        import torch

        torch.set_rng_state(rng[0])
        if rng[1] is not None:
            torch.cuda.set_rng_state(rng[1], self.device)


def _shared_modules(model) -> dict[int, Any]:
    """A deepcopy memo that keeps Python modules (compiled extensions) the model's objects refer to."""
    memo = {}
    for sub in model.modules():
        for value in vars(sub).values():
            if isinstance(value, types.ModuleType):
                memo[id(value)] = value
    return memo


def _exit_fatal(send, key: str, rows: list[dict], err: Exception) -> None:
    """The CUDA context is dead: send the variant's rows, say why, and end this process (the supervisor
    starts a fresh worker for the rest of the job)."""
    send(("rows", key, rows))
    send(("fatal", key, f"{type(err).__name__}: {_first_line(err)}"))
    os._exit(3)


def _cases(entries, problem, device: str) -> list[Case]:
    """One Case per pool entry, the Model built after the same seed as KernelBench builds both models with."""
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
        cases.append(Case(entry, module, init, model, inputs, ref32, ref64))
    return cases


def _fingerprints(cases: list[Case]):
    """Position-weighted checksums of every byte of the cases' inputs, init tensors and references, as one
    CPU tensor (one transfer)."""
    import torch

    on_gpu, on_host = [], []
    for case in cases:
        for t in [*case.inputs, *case.init, *case.ref32, *case.ref64]:
            if isinstance(t, torch.Tensor) and t.numel():
                b = _bits(t.detach()).to(torch.int64)
                weights = torch.arange(b.numel(), device=b.device, dtype=torch.int64) % 65521 + 1
                (on_gpu if b.is_cuda else on_host).append((b * weights).sum())
    parts = ([torch.stack(on_gpu).cpu()] if on_gpu else []) + ([torch.stack(on_host)] if on_host else [])
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)


def _observe(key, problem, case: Case, mode, elapsed, first, second, engine: str) -> list[dict]:
    """The rows of one variant on one input: status, bitwise repeat, evidence against both references."""
    import torch

    from oracleaudit.evidence import measure

    entry = case.entry
    if len(first) != len(case.ref32):
        return [_row(key, problem, entry, 0, "ShapeMismatch", None, f"{len(first)} outputs, reference has "
                     f"{len(case.ref32)}", elapsed, None, mode, None, None)]
    rows = []
    for index, (out, again, r32, r64) in enumerate(zip(first, second, case.ref32, case.ref64)):
        status = "Ok"
        if out.shape != r32.shape:
            status = "ShapeMismatch"
        elif out.dtype != r32.dtype:
            status = "DtypeMismatch"
        same = out.shape == again.shape and out.dtype == again.dtype and bool(torch.equal(_bits(out), _bits(again)))
        rows.append(_row(key, problem, entry, index, status, None, None, elapsed, same, mode,
                         measure(out, r32, engine=engine), measure(out, r64, engine=engine)))
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
