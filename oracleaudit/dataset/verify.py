"""Verification of solutions against an fp64 reference, and the verification records that prove it.

For each (problem, solution) pair, `ModelNew` is built by importing the solution (which compiles its CUDA
code with `load_inline`), `Model` and `ModelNew` are constructed with `torch.manual_seed(42)` before each
constructor (the KernelBench convention), and every check runs three computations on the same inputs:

- the solution, `ModelNew` (fp32);
- PyTorch's own fp32 computation, `Model`, with TF32 off for matmul and cuDNN;
- the fp64 reference, `copy.deepcopy(Model).double()` on the inputs converted to float64 (float tensors
  only; integer tensors are passed unchanged).

The checks: the official inputs (`get_inputs()`) under the 5 KernelBench trial seeds (drawn from seed 42);
standard normal, uniform(−1, 1) and large-magnitude (1e3 × standard normal) inputs, which replace the float
inputs only (same shapes and dtypes; integer inputs keep `get_inputs()`'s values); and the official inputs
on the "odd" and "small" shape variants (see `oracleaudit.shapes`).

Pass rule of one check, with atol = rtol = 1e-4 (KernelBench's fp32 tolerance). For an output t let

    excess(t) = max_i ( |t_i − ref64_i| − rtol · |ref64_i| )

(`torch.allclose(t, ref64, atol, rtol)` holds iff excess(t) ≤ atol). The check passes iff

1. the solution's outputs have the shapes of the reference's and the dtypes of PyTorch's fp32 outputs;
2. the solution has no NaN/Inf where ref64 is finite, except where PyTorch's fp32 output is not finite
   either (the exact result is outside fp32's range on that input, so no fp32 kernel can be blamed);
3. excess(out) ≤ max(atol, 4 · excess(torch_fp32)): within KernelBench's tolerance, or no worse than 4×
   PyTorch's own fp32 computation on that same input.

excess(out) is taken over the elements where ref64, PyTorch's fp32 output and the solution's output are all
finite, excess(torch_fp32) over those where ref64 and PyTorch's fp32 output are finite. `nonfinite` counts
the solution's rule-2 violations, `fp32_nonfinite` the elements where PyTorch's fp32 output is not finite
although ref64 is. A problem is verified iff its solution built and every check passed.

Records are one JSON line per problem in `verification.jsonl` (schema `SCHEMA_VERSION`), merged by problem,
sorted by (level, id) and written atomically after each problem. A record holds: schema_version; problem
{level, id, name}; problem_file and solution_file (relative to the problem root) and their sha256; gpu, torch,
cuda, date (UTC); criterion {atol, rtol, fp32_margin, fp32_reference_tf32}; checks, each {name, distribution,
seed, overrides, passed, max_abs_err, max_rel_err, excess, fp32_excess, nonfinite, fp32_nonfinite, error};
dropped_variants [{name, reason}]; forward_ms (fastest timed forward of ModelNew on the official inputs,
present when the official checks passed on a GPU); verified; error (the first line of a build/import/worker failure, else
null). Numbers that cannot be computed (no comparable element, a shape mismatch) are null, never a sentinel.

Solutions run in parallel, one fresh spawned worker process per problem (a CUDA fault cannot leak into the
next problem), each with its own TORCH_EXTENSIONS_DIR, MAX_JOBS=2, a log file and a time limit. This module
never imports tree-sitter or libclang (the GPU machine lacks them).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.tensors import leaves
from oracleaudit.files import file_sha256, write_atomic
from oracleaudit.terminal import progress_bar
from oracleaudit.kernelbench import WEIGHT_SEED, official_seeds
from oracleaudit.problem import (
    Pair,
    Problem,
    Unpaired,
    bundled_root,
    first_line,
    load_problem_module,
    load_solution_module,
    pair_solutions,
)
from oracleaudit.pool.shapes import ShapeVariant, ShapeVariants, shape_variants

__all__ = [
    "ATOL",
    "FP32_MARGIN",
    "RECORDS_FILE",
    "RTOL",
    "SCHEMA_VERSION",
    "Check",
    "Comparison",
    "Outcome",
    "VerifyReport",
    "compare",
    "default_jobs",
    "excess",
    "make_inputs",
    "merge_records",
    "plan_checks",
    "read_records",
    "verify_pair",
    "verify_solutions",
]

SCHEMA_VERSION = 1
RECORDS_FILE = "verification.jsonl"
ATOL = 1e-4
RTOL = 1e-4
FP32_MARGIN = 4.0
INPUT_SEED = 42
LARGE_SCALE = 1e3
MAX_JOBS_PER_BUILD = 2
DEFAULT_TIMEOUT_S = 1800.0
DISTRIBUTIONS = ("official", "normal", "uniform", "large")

CRITERION = {"atol": ATOL, "rtol": RTOL, "fp32_margin": FP32_MARGIN, "fp32_reference_tf32": False}


# ---------------------------------------------------------------------------------------------------------
# Checks and their inputs


@dataclass(frozen=True)
class Check:
    """One verification check: which input distribution, which seed, on which shape variant."""

    name: str
    distribution: str
    seed: int
    variant: ShapeVariant


def plan_checks(variants: ShapeVariants) -> list[Check]:
    """The checks a problem is verified with, in run order."""
    official = variants.variants[0]
    checks = [Check(f"official-{k}", "official", s, official) for k, s in enumerate(official_seeds())]
    checks += [Check(name, name, INPUT_SEED, official) for name in ("normal", "uniform", "large")]
    for name in ("odd", "small"):
        variant = variants.get(name)
        if variant is not None:
            checks.append(Check(f"{name}-shapes", "official", INPUT_SEED, variant))
    return checks


def make_inputs(module: Any, check: Check) -> list:
    """The check's inputs (CPU): `get_inputs()` under the check's seed, float tensors redrawn if asked."""
    if check.distribution not in DISTRIBUTIONS:
        raise OracleAuditError(f"unknown input distribution {check.distribution!r} in check {check.name}")
    torch.manual_seed(check.seed)
    inputs = list(module.get_inputs())
    if check.distribution == "official":
        return inputs
    generator = torch.Generator().manual_seed(check.seed)
    return [_redraw(value, check.distribution, generator) for value in inputs]


def _redraw(value: Any, distribution: str, generator: torch.Generator) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_redraw(v, distribution, generator) for v in value)
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value
    shape, dtype = value.shape, value.dtype
    if distribution == "normal":
        return torch.randn(shape, generator=generator, dtype=dtype)
    if distribution == "uniform":
        return torch.rand(shape, generator=generator, dtype=dtype) * 2 - 1
    return torch.randn(shape, generator=generator, dtype=dtype) * LARGE_SCALE


def _prepared(value: Any, device: str, float64: bool = False) -> Any:
    """A private copy of inputs on `device` (float tensors as float64 if asked)."""
    if isinstance(value, list):
        return [_prepared(v, device, float64) for v in value]
    if isinstance(value, tuple):
        return tuple(_prepared(v, device, float64) for v in value)
    if isinstance(value, torch.Tensor):
        dtype = torch.float64 if float64 and value.is_floating_point() else value.dtype
        return value.to(device=device, dtype=dtype, copy=True)
    return value


# ---------------------------------------------------------------------------------------------------------
# The pass rule


@dataclass(frozen=True)
class Comparison:
    """How a solution's output compares with the fp64 reference and with PyTorch's fp32 output."""

    passed: bool
    mismatch: str | None = None
    nonfinite: int = 0
    fp32_nonfinite: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    excess: float | None = None
    fp32_excess: float | None = None


def excess(t: torch.Tensor, ref64: torch.Tensor, rtol: float = RTOL) -> float | None:
    """max_i(|t_i − ref64_i| − rtol·|ref64_i|) over elements where both are finite (None if there are none)."""
    t, r = t.detach().to(torch.float64), ref64.detach().to(torch.float64)
    mask = torch.isfinite(t) & torch.isfinite(r)
    return _masked_max((t - r).abs() - rtol * r.abs(), mask)


def _masked_max(values: torch.Tensor, mask: torch.Tensor) -> float | None:
    if not bool(mask.any()):
        return None
    return float(torch.where(mask, values, torch.full_like(values, -torch.inf)).max().item())




def compare(
    out: Any,
    ref64: Any,
    fp32: Any,
    atol: float = ATOL,
    rtol: float = RTOL,
    margin: float = FP32_MARGIN,
) -> Comparison:
    """Apply the pass rule (module docstring) to outputs: a tensor or a (nested) tuple/list of tensors."""
    outs, refs, fp32s = leaves(out), leaves(ref64), leaves(fp32)
    if not (len(outs) == len(refs) == len(fp32s)):
        return Comparison(False, f"the solution returns {len(outs)} outputs, the reference {len(refs)}")
    parts = [_compare_one(i, o, r, f, atol, rtol, margin) for i, (o, r, f) in enumerate(zip(outs, refs, fp32s))]
    mismatch = next((p.mismatch for p in parts if p.mismatch), None)

    def worst(values: Iterable[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    return Comparison(
        passed=all(p.passed for p in parts),
        mismatch=mismatch,
        nonfinite=sum(p.nonfinite for p in parts),
        fp32_nonfinite=sum(p.fp32_nonfinite for p in parts),
        max_abs_err=worst(p.max_abs_err for p in parts),
        max_rel_err=worst(p.max_rel_err for p in parts),
        excess=worst(p.excess for p in parts),
        fp32_excess=worst(p.fp32_excess for p in parts),
    )


def _compare_one(
    index: int, out: Any, ref64: Any, fp32: Any, atol: float, rtol: float, margin: float
) -> Comparison:
    which = f"output {index}"
    if not isinstance(ref64, torch.Tensor) or not isinstance(fp32, torch.Tensor):
        return Comparison(False, f"the reference's {which} is not a tensor")
    if not isinstance(out, torch.Tensor):
        return Comparison(False, f"the solution's {which} is {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref64.shape):
        return Comparison(False, f"{which} has shape {tuple(out.shape)}, the reference {tuple(ref64.shape)}")
    if out.dtype != fp32.dtype:
        return Comparison(False, f"{which} has dtype {out.dtype}, the reference {fp32.dtype}")
    if tuple(fp32.shape) != tuple(ref64.shape):
        return Comparison(False, f"PyTorch's fp32 {which} has shape {tuple(fp32.shape)}, fp64 {tuple(ref64.shape)}")

    o = out.detach().to(device=ref64.device, dtype=torch.float64)
    r = ref64.detach().to(torch.float64)
    f = fp32.detach().to(device=ref64.device, dtype=torch.float64)
    ref_ok, fp32_ok, out_ok = torch.isfinite(r), torch.isfinite(f), torch.isfinite(o)
    judged = ref_ok & fp32_ok
    nonfinite = int((judged & ~out_ok).sum().item())
    fp32_nonfinite = int((ref_ok & ~fp32_ok).sum().item())
    scored = judged & out_ok

    diff = (o - r).abs()
    slack = rtol * r.abs()
    out_excess = _masked_max(diff - slack, scored)
    fp32_excess = _masked_max((f - r).abs() - slack, judged)
    max_abs = _masked_max(diff, scored)
    nonzero = scored & (r != 0)
    max_rel = _masked_max(diff / torch.where(nonzero, r.abs(), torch.ones_like(r)), nonzero)

    bound = atol if fp32_excess is None else max(atol, margin * fp32_excess)
    passed = nonfinite == 0 and (out_excess is None or out_excess <= bound)
    return Comparison(passed, None, nonfinite, fp32_nonfinite, max_abs, max_rel, out_excess, fp32_excess)


# ---------------------------------------------------------------------------------------------------------
# Verifying one pair (in the current process)


@contextlib.contextmanager
def _strict_fp32() -> Iterator[None]:
    """PyTorch's fp32 reference without TF32 (matmul and cuDNN); the previous flags are restored after."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _environment(device: str) -> dict[str, Any]:
    gpu = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else None
    return {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda}


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _portable(message: str, pair: Pair) -> str:
    """A message with the pair's file paths written relative to the problem root, as records store them."""
    for path in (pair.solution, pair.problem.path):
        relative = _relative(path, pair.problem.root)
        for spelling in sorted({str(path.resolve()), str(path)}, key=len, reverse=True):
            message = message.replace(spelling, relative)
    return message


def _new_record(pair: Pair, environment: Mapping[str, Any]) -> dict[str, Any]:
    problem = pair.problem
    return {
        "schema_version": SCHEMA_VERSION,
        "problem": {"level": problem.level, "id": problem.id, "name": problem.name},
        "problem_file": problem.relpath,
        "solution_file": _relative(pair.solution, problem.root),
        "problem_sha256": file_sha256(problem.path),
        "solution_sha256": file_sha256(pair.solution),
        "gpu": environment.get("gpu"),
        "torch": environment.get("torch"),
        "cuda": environment.get("cuda"),
        "date": _utc_now(),
        "criterion": dict(CRITERION),
        "checks": [],
        "dropped_variants": [],
        "verified": False,
        "error": None,
    }


def _check_record(check: Check, comparison: Comparison | None, error: str | None) -> dict[str, Any]:
    c = comparison or Comparison(False)
    return {
        "name": check.name,
        "distribution": check.distribution,
        "seed": check.seed,
        "overrides": check.variant.as_dict(),
        "passed": bool(c.passed and error is None),
        "max_abs_err": c.max_abs_err,
        "max_rel_err": c.max_rel_err,
        "excess": c.excess,
        "fp32_excess": c.fp32_excess,
        "nonfinite": c.nonfinite,
        "fp32_nonfinite": c.fp32_nonfinite,
        "error": error if error is not None else c.mismatch,
    }


@dataclass
class _Models:
    module: Any
    model: torch.nn.Module
    model_new: torch.nn.Module
    model64: torch.nn.Module


def _build_models(problem: Problem, solution: Any, variant: ShapeVariant, device: str) -> _Models:
    module = load_problem_module(problem, variant.as_dict())
    torch.manual_seed(WEIGHT_SEED)
    init_inputs = _prepared(list(module.get_init_inputs()), device)
    torch.manual_seed(WEIGHT_SEED)
    model = module.Model(*init_inputs).to(device)
    torch.manual_seed(WEIGHT_SEED)
    model_new = solution.ModelNew(*init_inputs).to(device)
    model64 = copy.deepcopy(model).double()
    return _Models(module, model, model_new, model64)


def _run_check(models: _Models, check: Check, device: str) -> Comparison:
    inputs = make_inputs(models.module, check)
    with torch.no_grad():
        out = models.model_new(*_prepared(inputs, device))
        _sync(device)
        fp32 = models.model(*_prepared(inputs, device))
        ref64 = models.model64(*_prepared(inputs, device, float64=True))
        _sync(device)
    return compare(out, ref64, fp32)


def _forward_ms(models: _Models, check: Check, device: str, repeats: int = 20) -> float:
    """The fastest of `repeats` timed forwards of ModelNew on the official inputs (CUDA events, after 3
    warm-ups). The minimum, because other problems share the GPU while verification runs in parallel."""
    inputs = _prepared(make_inputs(models.module, check), device)
    times = []
    with torch.no_grad():
        for i in range(repeats + 3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            models.model_new(*inputs)
            end.record()
            end.synchronize()
            if i >= 3:
                times.append(start.elapsed_time(end))
    return round(min(times), 4)


def _ensure_device_alive(device: str, after: str) -> None:
    """Raise if the CUDA context is unusable (a sticky fault such as an illegal address): stop the problem."""
    try:
        _sync(device)
    except Exception as err:
        raise RuntimeError(f"the CUDA context is lost after {after}: {first_line(err)}") from err


def verify_pair(pair: Pair, device: str = "cuda") -> dict[str, Any]:
    """Verify one solution in this process and return its verification record.

    A solution that fails to build or raises does not raise here: its record has verified=false and the
    error's first line (the traceback goes to stderr).
    """
    record = _new_record(pair, _environment(device))
    try:
        with _strict_fp32():
            _verify_into(record, pair, device)
    except Exception as err:
        traceback.print_exc()
        record["error"] = _portable(first_line(err), pair)
    record["verified"] = bool(
        record["error"] is None and record["checks"] and all(c["passed"] for c in record["checks"])
    )
    return record


def _verify_into(record: dict[str, Any], pair: Pair, device: str) -> None:
    solution = load_solution_module(pair.solution)
    variants = shape_variants(pair.problem, device)
    record["dropped_variants"] = [{"name": d.name, "reason": d.reason} for d in variants.dropped]
    checks = plan_checks(variants)
    for variant in variants.variants:
        variant_checks = [c for c in checks if c.variant == variant]
        try:
            models = _build_models(pair.problem, solution, variant, device)
        except Exception as err:
            traceback.print_exc()
            message = f"model construction failed: {first_line(err)}"
            record["checks"] += [_check_record(c, None, message) for c in variant_checks]
            _ensure_device_alive(device, f"building the models of the {variant.name} shapes")
            continue
        for check in variant_checks:
            try:
                record["checks"].append(_check_record(check, _run_check(models, check, device), None))
            except Exception as err:
                traceback.print_exc()
                record["checks"].append(_check_record(check, None, first_line(err)))
                _ensure_device_alive(device, f"check {check.name}")
        if variant is variants.variants[0] and device.startswith("cuda") and record["checks"] and \
                all(c["passed"] for c in record["checks"]):
            record["forward_ms"] = _forward_ms(models, variant_checks[0], device)
        del models
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------------------
# The records file


def _record_key(record: Any, where: str) -> tuple[int, int]:
    if not isinstance(record, dict):
        raise OracleAuditError(f"{where}: a verification record must be a JSON object")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise OracleAuditError(f"{where}: schema_version is {version!r}, this oracleaudit reads {SCHEMA_VERSION}")
    problem = record.get("problem")
    level = problem.get("level") if isinstance(problem, dict) else None
    ident = problem.get("id") if isinstance(problem, dict) else None
    if not isinstance(level, int) or not isinstance(ident, int):
        raise OracleAuditError(f"{where}: the record has no problem level and id")
    return (level, ident)


def read_records(path: Path) -> dict[tuple[int, int], dict[str, Any]]:
    """The verification records of a file by (level, id); a missing file has none.

    Every line must be a JSON object with the current schema_version.
    """
    path = Path(path)
    if not path.exists():
        return {}
    records: dict[tuple[int, int], dict[str, Any]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise OracleAuditError(f"{path}:{lineno}: not a JSON line ({err.msg})") from None
        records[_record_key(record, f"{path}:{lineno}")] = record
    return records


def merge_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Merge records into a records file: each replaces its problem's old record; sorted; written atomically."""
    path = Path(path)
    merged = read_records(path)
    for record in records:
        merged[_record_key(record, f"record for {path}")] = record
    lines = [json.dumps(merged[key], sort_keys=True, allow_nan=False) + "\n" for key in sorted(merged)]
    write_atomic(path, "".join(lines), sync=True)


# ---------------------------------------------------------------------------------------------------------
# Running many pairs in worker processes


@dataclass(frozen=True)
class Outcome:
    """What happened to one pair in a verify run: verified, failed, or skipped (already verified)."""

    problem: Problem
    solution: Path
    status: str
    worst_excess: float | None = None
    failed_checks: tuple[str, ...] = ()
    checks: int = 0
    error: str | None = None
    log: Path | None = None

    @classmethod
    def from_record(cls, pair: Pair, record: Mapping[str, Any], status: str | None = None,
                    log: Path | None = None) -> Outcome:
        excesses = [c["excess"] for c in record.get("checks", []) if c.get("excess") is not None]
        return cls(
            problem=pair.problem,
            solution=pair.solution,
            status=status or ("verified" if record.get("verified") else "failed"),
            worst_excess=max(excesses) if excesses else None,
            failed_checks=tuple(c["name"] for c in record.get("checks", []) if not c.get("passed")),
            checks=len(record.get("checks", [])),
            error=record.get("error"),
            log=log,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem.label,
            "solution": self.solution.as_posix(),
            "status": self.status,
            "worst_excess": self.worst_excess,
            "failed_checks": list(self.failed_checks),
            "checks": self.checks,
            "error": self.error,
            "log": self.log.as_posix() if self.log else None,
        }


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of a verify run: one Outcome per pair, the unpaired solutions, where records went."""

    outcomes: tuple[Outcome, ...]
    unpaired: tuple[Unpaired, ...]
    out: Path
    logs: Path | None = None

    @property
    def all_verified(self) -> bool:
        return all(o.status in ("verified", "skipped") for o in self.outcomes)

    def as_json(self) -> dict[str, Any]:
        return {
            "out": self.out.as_posix(),
            "logs": self.logs.as_posix() if self.logs else None,
            "results": [o.as_json() for o in self.outcomes],
            "unpaired": [{"path": u.path.as_posix(), "reason": u.reason} for u in self.unpaired],
        }

    def print_summary(self, console: Any = None) -> None:
        """A table (problem, verified, worst excess, what failed), then the unpaired solutions."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        table = Table(title=f"verification records: {self.out}")
        table.add_column("problem")
        table.add_column("verified")
        table.add_column("worst excess", justify="right")
        table.add_column("failed checks / error")
        styles = {"verified": "green", "skipped": "green", "failed": "red"}
        for o in self.outcomes:
            verdict = {"verified": "yes", "skipped": "yes (unchanged)", "failed": "NO"}[o.status]
            worst = "-" if o.worst_excess is None else f"{o.worst_excess:.3g}"
            notes = o.error or ", ".join(o.failed_checks)
            if not o.error and o.failed_checks and len(o.failed_checks) == o.checks:
                notes = f"all {o.checks} checks failed"
            if o.status == "failed" and o.log:
                notes = f"{notes} (log: {o.log})"
            table.add_row(o.problem.label, f"[{styles[o.status]}]{verdict}[/]", worst, notes)
        console.print(table)
        for u in self.unpaired:
            console.print(f"[yellow]unpaired[/] {u.path}: {u.reason}")
        if self.logs is not None:
            console.print(f"logs: {self.logs}")


def default_jobs() -> int:
    """The default number of worker processes: min(16, CPU count)."""
    return max(1, min(16, os.cpu_count() or 1))


@dataclass(frozen=True)
class _Task:
    pair: Pair
    device: str
    env: dict[str, str]
    log: Path
    threads: int


@dataclass
class _Running:
    task: _Task
    process: Any
    conn: Any
    deadline: float
    gpu: str | None = None


def _worker_main(task: _Task, conn: Any) -> None:
    """Entry point of a spawned worker: verify one pair with output going to its log, send the record back."""
    os.environ.update(task.env)
    log = open(task.log, "w", encoding="utf-8")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
        torch.set_num_threads(task.threads)
        record = verify_pair(task.pair, task.device)
    except Exception as err:
        traceback.print_exc()
        record = _new_record(task.pair, {"torch": torch.__version__, "cuda": torch.version.cuda})
        record["error"] = first_line(err)
    sys.stdout.flush()
    sys.stderr.flush()
    conn.send(record)
    conn.close()


def _visible_gpus(device: str) -> list[str]:
    if not device.startswith("cuda"):
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        return [v.strip() for v in visible.split(",") if v.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


def _run_workers(
    tasks: Sequence[_Task], jobs: int, timeout_s: float, environment: Mapping[str, Any]
) -> Iterator[tuple[_Task, dict[str, Any]]]:
    """Run each task in its own spawned process, at most `jobs` at a time; yield records as they arrive."""
    context = multiprocessing.get_context("spawn")
    gpus = _visible_gpus(tasks[0].device) if tasks else []
    pending = deque(tasks)
    running: list[_Running] = []

    def start(task: _Task) -> _Running:
        env = dict(task.env)
        gpu = None
        if gpus:
            load = {g: sum(1 for r in running if r.gpu == g) for g in gpus}
            gpu = min(gpus, key=lambda g: (load[g], gpus.index(g)))
            env["CUDA_VISIBLE_DEVICES"] = gpu
        task = _Task(task.pair, task.device, env, task.log, task.threads)
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_worker_main, args=(task, sender))
        process.start()
        sender.close()
        return _Running(task, process, receiver, time.monotonic() + timeout_s, gpu)

    def failure(task: _Task, message: str) -> dict[str, Any]:
        record = _new_record(task.pair, environment)
        record["error"] = message
        return record

    try:
        while pending or running:
            while pending and len(running) < jobs:
                running.append(start(pending.popleft()))
            waitables = [r.conn for r in running] + [r.process.sentinel for r in running]
            multiprocessing.connection.wait(waitables, timeout=1.0)
            now = time.monotonic()
            for r in list(running):
                record = None
                if r.conn.poll():
                    try:
                        record = r.conn.recv()
                    except (EOFError, OSError):
                        r.process.join(timeout=10)
                        record = failure(r.task, f"the worker exited with code {r.process.exitcode} "
                                                 "before reporting")
                elif not r.process.is_alive():
                    record = failure(r.task, f"the worker exited with code {r.process.exitcode} before reporting")
                elif now > r.deadline:
                    r.process.kill()
                    record = failure(r.task, f"timed out after {timeout_s:g} s")
                if record is None:
                    continue
                r.process.join(timeout=60)
                if r.process.is_alive():
                    r.process.kill()
                    r.process.join()
                r.conn.close()
                running.remove(r)
                yield r.task, record
    finally:
        for r in running:
            r.process.kill()
        for r in running:
            r.process.join()
            r.conn.close()


def _require_device(device: str) -> None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise OracleAuditError("verify needs a CUDA GPU, and torch.cuda.is_available() is False here")


def _is_current(record: Mapping[str, Any] | None, pair: Pair) -> bool:
    return bool(
        record
        and record.get("verified") is True
        and record.get("criterion") == CRITERION
        and record.get("problem_sha256") == file_sha256(pair.problem.path)
        and record.get("solution_sha256") == file_sha256(pair.solution)
    )


def verify_solutions(
    paths: Sequence[Path | str] = (),
    *,
    problems_root: Path | str | None = None,
    out: Path | str | None = None,
    jobs: int | None = None,
    force: bool = False,
    timeout_s: float | None = None,
    device: str = "cuda",
    logs_dir: Path | str | None = None,
    progress: bool = True,
) -> VerifyReport:
    """Verify solutions against their problems and merge a record per problem into the records file.

    `paths` are solution files or directories (default: the root's `solutions/` folder); `problems_root`
    defaults to the bundled dataset and `out` to `verification.jsonl` in it. A problem whose record is
    verified with the same file hashes and criterion is skipped unless `force`. Each pair runs in a fresh
    worker process with its own TORCH_EXTENSIONS_DIR in a temporary folder removed afterwards; its output
    goes to `{logs_dir}/level{L}_{id}_{Name}.log` (default: a new temporary folder, kept).
    """
    root = Path(problems_root) if problems_root is not None else bundled_root()
    out_path = Path(out) if out is not None else root / RECORDS_FILE
    jobs = default_jobs() if jobs is None else jobs
    timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    if jobs < 1:
        raise OracleAuditError(f"--jobs must be ≥ 1, got {jobs}")
    if timeout_s <= 0:
        raise OracleAuditError(f"--timeout must be > 0 seconds, got {timeout_s:g}")
    if not paths:
        if not (root / "solutions").is_dir():
            raise OracleAuditError(f"{root / 'solutions'}: no solutions folder; name solution files or folders")
        paths = [root / "solutions"]

    pairs, unpaired = pair_solutions([Path(p) for p in paths], root)
    if not pairs:
        raise OracleAuditError(
            f"no solution pairs with a problem under {root} ({len(unpaired)} solution file(s) unpaired)"
        )
    by_problem: dict[tuple[int, int], list[Pair]] = {}
    for pair in pairs:
        by_problem.setdefault(pair.problem.key, []).append(pair)
    for same in by_problem.values():
        if len(same) > 1:
            names = ", ".join(str(p.solution) for p in same)
            raise OracleAuditError(f"{same[0].problem.path}: several solutions pair with it ({names})")

    _require_device(device)
    existing = read_records(out_path)
    skipped = {p: Outcome.from_record(p, existing[p.problem.key], "skipped")
               for p in pairs if not force and _is_current(existing.get(p.problem.key), p)}
    todo = [p for p in pairs if p not in skipped]

    done: dict[Pair, Outcome] = dict(skipped)
    if not todo:
        return VerifyReport(tuple(done[p] for p in pairs), tuple(unpaired), out_path, None)

    logs = Path(logs_dir) if logs_dir is not None else Path(tempfile.mkdtemp(prefix="oracleaudit-verify-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    builds = Path(tempfile.mkdtemp(prefix="oracleaudit-verify-builds-"))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    tasks = []
    for pair in todo:
        name = f"level{pair.problem.level}_{pair.problem.stem}"
        (builds / name).mkdir()
        env = {"TORCH_EXTENSIONS_DIR": str(builds / name), "MAX_JOBS": str(MAX_JOBS_PER_BUILD)}
        tasks.append(_Task(pair, device, env, logs / f"{name}.log", threads))
    try:
        environment = _environment(device)
        with progress_bar("verifying", len(tasks), progress, tallies=("verified", "failed")) as advance:
            for task, record in _run_workers(tasks, jobs, timeout_s, environment):
                merge_records(out_path, [record])
                done[task.pair] = Outcome.from_record(task.pair, record, log=task.log)
                advance(1, "verified" if done[task.pair].status == "verified" else "failed")
    finally:
        shutil.rmtree(builds, ignore_errors=True)
    outcomes = tuple(done[p] for p in pairs if p in done)
    return VerifyReport(outcomes, tuple(unpaired), out_path, logs)
