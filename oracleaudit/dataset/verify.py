"""Verification of solutions against an fp64 reference (`oracleaudit verify`), and the records that prove it.

For each (problem, solution) pair, `ModelNew` is built by importing the solution (which compiles its CUDA
code with `load_inline`), `Model` and `ModelNew` are constructed with `torch.manual_seed(42)` before each
constructor (the KernelBench convention), and every check (checks.py, with its pass rule) runs three
computations on the same inputs:

- the solution, `ModelNew` (fp32);
- PyTorch's own fp32 computation, `Model`, with TF32 off for matmul and cuDNN;
- the fp64 reference, `copy.deepcopy(Model).double()` on the inputs converted to float64 (float tensors
  only; integer tensors are passed unchanged).

A problem is verified iff its solution built and every check passed; the record (records.py) says so.
Solutions run in parallel, one fresh spawned worker process per problem (a CUDA fault cannot leak into the
next problem), each with its own TORCH_EXTENSIONS_DIR, MAX_JOBS=2, a log file and a time limit. This module
never imports tree-sitter or libclang (the GPU machine lacks them).
"""


from __future__ import annotations

import contextlib
import copy
import datetime
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
from typing import Any, Iterator, Mapping, Sequence

import torch

from oracleaudit import precompiled_header
from oracleaudit.dataset.checks import CRITERION, Check, Comparison, compare, make_inputs, plan_checks
from oracleaudit.dataset.records import RECORDS_FILE, SCHEMA_VERSION, merge_records, read_records
from oracleaudit.errors import OracleAuditError
from oracleaudit.files import file_sha256
from oracleaudit.kernelbench import WEIGHT_SEED
from oracleaudit.pool.shapes import ShapeVariant, shape_variants
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
from oracleaudit.tensors import copied_to
from oracleaudit.terminal import progress_bar

__all__ = ["Outcome", "VerifyReport", "default_jobs", "verify_pair", "verify_solutions"]

MAX_JOBS_PER_BUILD = 2
DEFAULT_TIMEOUT_S = 1800.0


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
    init_inputs = copied_to(list(module.get_init_inputs()), device)
    torch.manual_seed(WEIGHT_SEED)
    model = module.Model(*init_inputs).to(device)
    torch.manual_seed(WEIGHT_SEED)
    model_new = solution.ModelNew(*init_inputs).to(device)
    model64 = copy.deepcopy(model).double()
    return _Models(module, model, model_new, model64)


def _run_check(models: _Models, check: Check, device: str) -> Comparison:
    inputs = make_inputs(models.module, check)
    with torch.no_grad():
        out = models.model_new(*copied_to(inputs, device))
        _sync(device)
        fp32 = models.model(*copied_to(inputs, device))
        ref64 = models.model64(*copied_to(inputs, device, float64=True))
        _sync(device)
    return compare(out, ref64, fp32)


def _forward_ms(models: _Models, check: Check, device: str, repeats: int = 20) -> float:
    """The fastest of `repeats` timed forwards of ModelNew on the official inputs (CUDA events, after 3
    warm-ups). The minimum, because other problems share the GPU while verification runs in parallel."""
    inputs = copied_to(make_inputs(models.module, check), device)
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
    precompiled_header.guard()  # the solution's own load_inline would delete the header other builds use
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
        from rich.text import Text

        console = console or Console()
        table = Table(title=Text(f"verification records: {self.out}"))
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
            table.add_row(Text(o.problem.label), Text(verdict, style=styles[o.status]), worst, Text(notes))
        console.print(table)
        for u in self.unpaired:
            console.print(Text.assemble(("unpaired", "yellow"), f" {u.path}: {u.reason}"))
        if self.logs is not None:
            console.print(Text(f"logs: {self.logs}"))


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
