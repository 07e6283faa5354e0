"""The run stage: mutants → jobs (one per solution) → GPU workers under supervision (timeouts, crashes,
restarts) → observation rows appended to the evidence store; resumable at variant granularity.

Scheduling (local backend): every extension of every job is built in a process pool, the jobs with the most
variants first; once all of a job's extensions are built, the job is cut into slices of at most `job_size`
variants (`split_job`) which any worker may take, so a solution with hundreds of mutants is not run by one
worker while the others sit idle. Each slice loads the same cached extensions; only the first records the
references and the original, the others run the original once, unrecorded, to time their deadlines.

Supervision: each GPU has one worker subprocess (worker.py). The supervisor waits for the worker's messages
with a deadline: while building, `BUILD_TIMEOUT_S`; for the original, `ORIGINAL_TIMEOUT_S`; for a mutant,
`timeout_floor_s + timeout_factor × (the original's time over all inputs)`. A worker that misses a deadline
is killed and the variant is recorded as Timeout on every input; a worker that dies (illegal memory access
or another sticky CUDA error ends its CUDA context, so the worker exits on purpose) has its variant recorded
as RuntimeError. Either way a fresh worker takes the rest of the job; the extension build is cached in the
cache folder, so the restart does not recompile.

Backends: `local` runs `workers_per_gpu` supervisor threads per GPU (joblib, threads) over a shared queue
of jobs — several workers share one GPU when a job's host-side work (Python, input generation, evidence)
leaves the GPU idle, which is the case for most single-operator problems;
`dask` submits each job to a Dask distributed cluster as a task needing one `GPU` resource, and the client
appends what comes back.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import PENDING, Mutant, read_mutants
from oracleaudit.problem import problem_at
from oracleaudit.worker import ORIGINAL, REFERENCE, Job, usable_cpus

BUILD_TIMEOUT_S = 3600.0
ORIGINAL_TIMEOUT_S = 600.0
JOB_SIZE = 48  # variants per slice of a job; each slice pays once for the references and for timing the original


@dataclass
class RunResult:
    solutions: int = 0
    variants: int = 0
    skipped: int = 0
    by_status: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: list[str] = field(default_factory=list)
    build_s: float = 0.0
    exec_s: float = 0.0
    evidence_s: float = 0.0
    wall_s: float = 0.0

    def summary(self) -> dict:
        return {"solutions": self.solutions, "variants_run": self.variants, "variants_skipped": self.skipped,
                "observations_by_status": dict(sorted(self.by_status.items())), "errors": self.errors,
                "build_s": round(self.build_s, 1), "exec_s": round(self.exec_s, 1),
                "evidence_s": round(self.evidence_s, 1), "wall_s": round(self.wall_s, 1)}


def plan_jobs(mutants: list[Mutant], pool: str, build_root: Path, done: set[str],
              per_solution: int | None = None) -> tuple[list[Job], list[str], int]:
    """One job per solution file: the Pending mutants (the original runs with every job), or the first
    `per_solution` of them by id (a deterministic sample). Returns the jobs, error lines, and how many
    variants are already recorded."""
    from oracleaudit.pool import Pool, names_a_file
    from oracleaudit.problem import file_sha256

    by_source: dict[tuple[str, str | None], list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        if mutant.status == PENDING:
            by_source[(mutant.source, mutant.problem_file)].append(mutant)
    loaded = Pool.load(pool)
    # Jobs carry absolute paths: a Dask worker (or any process started elsewhere) has its own working folder.
    pool_ref = str(Path(pool).resolve()) if names_a_file(pool) else pool
    jobs, errors, recorded = [], [], 0
    for (source, problem_file), group in sorted(by_source.items(), key=lambda kv: kv[0][0]):
        if per_solution is not None:
            group = sorted(group, key=lambda m: m.id)[:per_solution]
        path = Path(source)
        if problem_file is None:
            errors.append(f"{source}: its mutants have no paired problem (run `oracleaudit mutate --problems ROOT`)")
            continue
        if not path.is_file():
            errors.append(f"{source}: no such file (run from the folder `oracleaudit mutate` ran in)")
            continue
        if file_sha256(path) != group[0].source_sha256:
            errors.append(f"{source}: changed since its mutants were made (sha256 differs); mutate again")
            continue
        problem = problem_at(problem_file)
        keys = tuple((e.key, e.seed, e.variant, e.distribution) for e in loaded.entries_for(problem))
        skip = tuple(k for k in [REFERENCE, ORIGINAL, *(m.id for m in group)] if f"{problem.label}::{k}" in done)
        recorded += len(set(skip) - {REFERENCE})
        if len(skip) == len(group) + 2:
            continue
        jobs.append(Job(solution=str(path.resolve()), problem_path=str(Path(problem_file).resolve()),
                        mutants=tuple(_as_dict(m) for m in group), pool=pool_ref, entry_keys=keys,
                        build_dir=str(build_root), device="cuda:0", skip_variants=skip))
    return jobs, errors, recorded


def split_job(job: Job, size: int) -> list[Job]:
    """Cut a job into slices of at most `size` of its variants still to run, as even as possible. A slice is
    the job with the other slices' mutants added to `skip_variants`: every slice plans (and loads) the same
    extensions. The first slice records the references and the original; the later ones skip them, which
    makes their workers run the original unrecorded to time the deadlines (as a resumed job does)."""
    if size < 1:
        raise ValueError(f"a job slice holds at least one variant, got {size}")
    skip = set(job.skip_variants)
    todo = [m["id"] for m in job.mutants if m["id"] not in skip]
    if len(todo) <= size:
        return [job]
    count = -(-len(todo) // size)
    width = -(-len(todo) // count)
    slices = []
    for start in range(0, len(todo), width):
        others = set(todo) - set(todo[start:start + width])
        if start:
            others |= {REFERENCE, ORIGINAL}
        slices.append(replace(job, skip_variants=tuple(sorted(skip | others))))
    return slices


def variants_to_run(job: Job) -> int:
    """The variants a job records: its mutants and the original, less those already recorded."""
    return len(job.mutants) + 1 - len(set(job.skip_variants) - {REFERENCE})


def build_root() -> Path:
    """Where extensions are built: the cache (`$ORACLEAUDIT_CACHE/builds`), shared by all runs on this
    machine; an extension's folder is named by the hash of its sources."""
    from oracleaudit.cache import cache_root

    return (cache_root() / "builds").resolve()


def _sha256(mutants_dir: Path) -> str:
    import hashlib

    from oracleaudit.mutant import MUTANTS_FILE

    path = mutants_dir / MUTANTS_FILE if mutants_dir.is_dir() else mutants_dir
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _as_dict(mutant: Mutant) -> dict:
    from dataclasses import asdict

    return asdict(mutant)


class Supervisor:
    """Drives one worker subprocess on one GPU through jobs, restarting it after a crash or a timeout."""

    def __init__(self, gpu: int, on_rows: Callable[[str, list[dict]], None], timeout_factor: float,
                 timeout_floor_s: float, log_dir: Path, stop: threading.Event | None = None):
        self.gpu = gpu
        self.stop = stop or threading.Event()
        self.on_rows = on_rows
        self.timeout_factor = timeout_factor
        self.timeout_floor_s = timeout_floor_s
        self.log_dir = log_dir
        self.process = None
        self.conn = None
        self.build_s = 0.0
        self.exec_s = 0.0
        self.evidence_s = 0.0

    def _start(self) -> None:
        from oracleaudit import worker

        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self.process = context.Process(target=worker.main, args=(child, f"cuda:{self.gpu}"), daemon=True)
        self.process.start()
        self.conn = parent

    def _stop(self, kill: bool) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.process = None

    def close(self) -> None:
        self._stop(kill=False)

    def interrupt(self) -> None:
        """From another thread: kill the worker now; the supervising thread sees it die and, with `stop` set,
        records nothing and returns."""
        process = self.process
        if process is not None:
            process.kill()

    def run(self, job: Job) -> list[str]:
        """Run a job to the end; returns error lines (a job-level failure such as a failed build)."""
        job = replace(job, device=f"cuda:{self.gpu}")
        entries = job.entry_keys
        skip = set(job.skip_variants)
        # The variants' deadlines scale with the original's time: when the original is already in the store
        # (a resumed run), the worker runs it once more to time it, and its rows are not recorded again.
        recorded = set(job.skip_variants)
        time_original = ORIGINAL in recorded
        original_s: float | None = None
        errors: list[str] = []
        retried = False
        while not self.stop.is_set():
            if self.process is None:
                self._start()
            skipping = skip - {ORIGINAL} if time_original else skip
            self.conn.send(replace(job, skip_variants=tuple(sorted(skipping))))
            deadline = time.monotonic() + BUILD_TIMEOUT_S
            current, variant_started = None, time.monotonic()
            restart = False
            while not restart:
                remaining = deadline - time.monotonic()
                if not self.conn.poll(max(0.0, remaining)):
                    self._record_failure(job, current, entries, "Timeout", "TimeoutError",
                                         f"no result within {deadline - variant_started:.0f} s", skip)
                    skip.add(current or ORIGINAL)
                    time_original = False
                    self._stop(kill=True)
                    restart = True
                    break
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    self._record_failure(job, current, entries, "RuntimeError", "WorkerDied",
                                         f"the worker process died (exit code {self.process.exitcode})", skip)
                    time_original = False
                    if current is None:
                        errors.append(f"{job.solution}: the worker died before running any variant")
                        self._stop(kill=True)
                        return errors
                    skip.add(current)
                    self._stop(kill=True)
                    restart = True
                    break
                kind = message[0]
                if kind == "built":
                    self.build_s += message[1]
                    deadline = time.monotonic() + ORIGINAL_TIMEOUT_S
                elif kind == "variant":
                    current, variant_started = message[1], time.monotonic()
                    limit = ORIGINAL_TIMEOUT_S if current == ORIGINAL or original_s is None else \
                        self.timeout_floor_s + self.timeout_factor * original_s
                    deadline = variant_started + limit
                elif kind == "rows":
                    key, rows = message[1], message[2]
                    if key == ORIGINAL:
                        original_s = time.monotonic() - variant_started
                        time_original = False
                    if key not in recorded:
                        self.on_rows(key, rows)
                    skip.add(key)
                    deadline = time.monotonic() + (BUILD_TIMEOUT_S if current is None else ORIGINAL_TIMEOUT_S)
                elif kind == "fatal":
                    skip.add(message[1])
                    time_original = False
                    self._stop(kill=True)
                    restart = True
                elif kind == "done":
                    self.exec_s += message[1]["exec_s"]
                    self.evidence_s += message[1]["evidence_s"]
                    return errors
                elif kind == "error":
                    if len(message) > 2 and not message[2]:  # the worker's CUDA context died: fresh worker
                        self._stop(kill=True)
                        if not retried:  # the job may have failed only because of that context: once more
                            retried = restart = True
                            continue
                    errors.append(f"{job.solution}: {message[1]}")
                    return errors
            if not restart:
                return errors
        return errors

    def _record_failure(self, job: Job, current: str | None, entries, status: str, error_class: str,
                        message: str, done: set[str]) -> None:
        # A worker killed because the run stops records nothing; nor does a variant already recorded (an
        # original run again only to time it, or a worker stalling after it sent a variant's rows).
        if current is None or self.stop.is_set() or current in done:
            return
        problem = problem_at(job.problem_path)
        rows = [{"mutant_id": current, "problem": problem.label, "input_id": key, "input_seed": seed,
                 "shape_variant": variant, "distribution": distribution, "output_index": 0, "status": status,
                 "error_class": error_class, "error_message": message}
                for key, seed, variant, distribution in entries]
        self.on_rows(current, rows)


def run(mutants_dir: Path, out: Path, pool: str = "default", gpus: int | None = None, backend: str = "local",
        scheduler: str | None = None, timeout_factor: float = 10.0, timeout_floor_s: float = 30.0,
        per_solution: int | None = None, workers_per_gpu: int = 1, job_size: int = JOB_SIZE,
        evidence_engine: str = "auto", show_progress: bool = True) -> RunResult:
    """Run every Pending mutant (and each solution's original) through the pool on the GPUs; append the
    observations to the evidence store at `out`. Safe to interrupt and run again. With the local backend a
    job is shared out in slices of at most `job_size` variants. `evidence_engine`: evidence.measure's
    engine (torch: PyTorch operations; auto: the fused kernels where they apply)."""
    from oracleaudit.evidence import ENGINES
    from oracleaudit.progress import progress_bar
    from oracleaudit.store import RUN_IDENTITY, EvidenceStore

    started = time.perf_counter()
    if per_solution is not None and per_solution < 1:
        raise OracleAuditError(f"--per-solution must be ≥ 1, got {per_solution}")
    if timeout_factor <= 0:
        raise OracleAuditError(f"--timeout-factor must be > 0, got {timeout_factor}")
    if workers_per_gpu < 1:
        raise OracleAuditError(f"--workers-per-gpu must be ≥ 1, got {workers_per_gpu}")
    if job_size < 1:
        raise OracleAuditError(f"--job-size must be ≥ 1, got {job_size}")
    if evidence_engine not in ENGINES:
        raise OracleAuditError(f"--evidence-engine must be one of {', '.join(ENGINES)}, got {evidence_engine!r}")
    if backend not in ("local", "dask"):
        raise OracleAuditError(f"--backend must be local or dask, got {backend!r}")
    if backend == "dask" and not scheduler:
        raise OracleAuditError("--backend dask needs --scheduler ADDR")
    if backend == "local":
        _require_gpus(gpus)
    mutants = read_mutants(mutants_dir)
    # Mutant ids hash the problem, file, rule, span and replacement, and every job checks its solution's
    # sha256, so another mutants.jsonl of the same sources (e.g. mutate run again) may continue a store; the
    # pool may not. `mutants_sha256` records the mutants file of the run that created the store.
    store = EvidenceStore(out).open_or_create({"pool": pool, "mutants_sha256": _sha256(mutants_dir)},
                                              identity=RUN_IDENTITY)
    # A variant's rows are appended in one part, so any committed row means the whole variant is recorded.
    done = {f"{problem}::{mutant}" for problem, mutant, _ in store.done_keys()}
    jobs, errors, recorded = plan_jobs(mutants, pool, build_root(), done, per_solution)
    jobs = [replace(job, evidence_engine=evidence_engine) for job in jobs]
    result = RunResult(solutions=len(jobs), errors=errors, skipped=recorded)
    if not jobs:
        result.wall_s = time.perf_counter() - started
        return result
    lock = threading.Lock()
    total = sum(variants_to_run(job) for job in jobs)

    with progress_bar("running variants", total=total, enabled=show_progress) as advance:
        def on_rows(key: str, rows: list[dict]) -> None:
            with lock:
                store.append(rows)
                for row in rows:
                    result.by_status[row["status"]] += 1
                if key != REFERENCE:
                    result.variants += 1
                    advance(1)

        if backend == "local":
            _run_local(jobs, gpus, workers_per_gpu, job_size, on_rows, timeout_factor, timeout_floor_s, out,
                       result)
        else:
            _run_dask(jobs, scheduler, on_rows, timeout_factor, timeout_floor_s, out, result)
    result.wall_s = time.perf_counter() - started
    return result


def _prebuild_one(job: Job, extension: int) -> tuple[float, bool]:
    """Compile one extension of a job so the GPU worker finds it built (CPU work); returns the seconds spent
    and whether it built. A failure is left to the worker, which meets it again, drops the mutants whose
    clones do not build (build_isolating) and reports it."""
    from oracleaudit import build as builds
    from oracleaudit.mutant import Mutant

    started = time.perf_counter()
    try:
        plan = builds.plan_build(Path(job.solution), [Mutant(**m) for m in job.mutants])
        builds.build(replace(plan, extensions=[plan.extensions[extension]]), Path(job.build_dir))
    except Exception:
        return time.perf_counter() - started, False
    return time.perf_counter() - started, True


def _extension_count(job: Job) -> int | None:
    """How many extensions a job's build plan has (None if it cannot be planned: the worker reports why)."""
    from oracleaudit import build as builds
    from oracleaudit.mutant import Mutant

    try:
        return len(builds.plan_build(Path(job.solution), [Mutant(**m) for m in job.mutants]).extensions)
    except Exception:
        return None


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def prebuild_in_order(jobs: list[Job], ready: Callable[[Job, float, bool], None], stop: threading.Event,
                      processes: int | None = None) -> None:
    """Build every extension of every job in parallel processes, the jobs with the most variants first, and
    call `ready(job, seconds, built)` once all of a job's extensions are done (`built`: all of them built),
    so GPU workers start on the first built solution while the CPU cores build the rest (builds are
    CPU-bound, runs mostly GPU-bound). One solution's extensions build side by side; a job that cannot be
    planned is handed over at once, not built. The build processes ignore Ctrl-C; the pool is terminated
    when `stop` is set."""
    order = sorted(range(len(jobs)), key=lambda i: -variants_to_run(jobs[i]))
    tasks = []
    for index in order:
        count = _extension_count(jobs[index])
        if count is None:  # nothing to build: the worker meets the same failure and reports it
            ready(jobs[index], 0.0, False)
        else:
            tasks += [(index, number) for number in range(count)]
    if not tasks:
        return
    left: dict[int, int] = defaultdict(int)
    for index, _ in tasks:
        left[index] += 1
    spent: dict[int, float] = defaultdict(float)
    failed: set[int] = set()
    processes = processes or max(1, usable_cpus() // 2)
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(processes, len(tasks)), initializer=_ignore_sigint) as pool:
        waiting = {task: pool.apply_async(_prebuild_one, (jobs[task[0]], task[1])) for task in tasks}
        while waiting and not stop.is_set():
            for task in [t for t, result in waiting.items() if result.ready()]:
                index = task[0]
                try:
                    seconds, built = waiting.pop(task).get()
                except Exception:  # a crashed build process: the worker builds (and reports) it itself
                    seconds, built = 0.0, False
                spent[index] += seconds
                left[index] -= 1
                if not built:
                    failed.add(index)
                if not left[index]:
                    ready(jobs[index], spent[index], index not in failed)
            time.sleep(0.2)


def _require_gpus(gpus: int | None) -> int:
    import torch

    available = torch.cuda.device_count()
    if available == 0:
        raise OracleAuditError("no CUDA device: `oracleaudit run` needs a GPU (score needs none)")
    count = available if gpus is None else gpus
    if not 1 <= count <= available:
        raise OracleAuditError(f"--gpus must be between 1 and {available} on this machine, got {count}")
    return count


def _run_local(jobs, gpus, workers_per_gpu, job_size, on_rows, timeout_factor, timeout_floor_s, out,
               result) -> None:
    from joblib import Parallel, delayed

    count = _require_gpus(gpus)
    slots = count * workers_per_gpu
    jobs = [replace(job, cpu_threads=max(1, usable_cpus() // slots)) for job in jobs]
    work: queue.Queue = queue.Queue()
    stop = threading.Event()
    queued: set[int] = set()

    def ready(job: Job, seconds: float, built: bool) -> None:
        # A job whose build failed goes to one worker whole: that worker finds and drops the clones that do
        # not build (build_isolating); slices building it side by side would wait on one another's failure.
        result.build_s += seconds
        queued.add(id(job))
        for piece in split_job(job, job_size) if built else [job]:
            work.put(piece)

    def feed() -> None:
        try:
            prebuild_in_order(jobs, ready, stop)
        except Exception:  # no process pool (e.g. out of memory): the workers build the rest themselves
            for job in jobs:
                if id(job) not in queued:
                    work.put(job)
        finally:
            for _ in range(slots):
                work.put(None)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    supervisors = [Supervisor(slot % count, on_rows, timeout_factor, timeout_floor_s, out / "logs", stop)
                   for slot in range(slots)]

    def drive(supervisor: Supervisor) -> list[str]:
        errors = []
        try:
            while not stop.is_set() and (job := work.get()) is not None:
                errors += supervisor.run(job)
            return errors
        finally:
            supervisor.close()

    outcome: list = []
    driver = threading.Thread(target=lambda: outcome.extend(
        Parallel(n_jobs=slots, prefer="threads")(delayed(drive)(s) for s in supervisors)), daemon=True)
    driver.start()
    try:
        while driver.is_alive():
            driver.join(0.5)
    except KeyboardInterrupt:
        # Stop: no new variant starts, the variant in flight is dropped (it was never committed, so the
        # next run does it again), nothing is recorded for workers killed here.
        stop.set()
        for supervisor in supervisors:
            supervisor.interrupt()
        for _ in range(slots):
            work.put(None)
        driver.join(30)
        raise
    for errors in outcome:
        result.errors += errors
    for supervisor in supervisors:
        result.build_s += supervisor.build_s
        result.exec_s += supervisor.exec_s
        result.evidence_s += supervisor.evidence_s


def _run_dask(jobs, scheduler, on_rows, timeout_factor, timeout_floor_s, out, result) -> None:
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise OracleAuditError("--backend dask needs the optional extra: pip install 'oracleaudit[dask]'") from None
    client = Client(scheduler)
    futures = [client.submit(_remote_job, job, timeout_factor, timeout_floor_s, str((out / "logs").resolve()),
                             resources={"GPU": 1}, pure=False) for job in jobs]
    for future in as_completed(futures):
        batches, errors, times = future.result()
        for key, rows in batches:
            on_rows(key, rows)
        result.errors += errors
        result.build_s += times[0]
        result.exec_s += times[1]
        result.evidence_s += times[2]


def _remote_job(job: Job, timeout_factor: float, timeout_floor_s: float, log_dir: str):
    """A job on a Dask worker: supervise a local GPU worker and return the rows (appended by the client).
    Paths in the job are as the client sees them: the workers need the same files (a shared file system).
    The GPU worker is a child process, which a daemonic Dask worker may not have."""
    if multiprocessing.current_process().daemon:
        raise OracleAuditError("this Dask worker is a daemonic process and cannot start the GPU worker: start "
                               "Dask workers with DASK_DISTRIBUTED__WORKER__DAEMON=False")
    batches: list[tuple[str, list[dict]]] = []
    supervisor = Supervisor(0, lambda key, rows: batches.append((key, rows)), timeout_factor, timeout_floor_s,
                            Path(log_dir))
    try:
        errors = supervisor.run(job)
    finally:
        supervisor.close()
    return batches, errors, (supervisor.build_s, supervisor.exec_s, supervisor.evidence_s)
