"""The run stage: mutants → jobs (one per solution) → builds → slices on GPU workers under supervision →
observation rows appended to the evidence store; resumable at (variant, input) granularity.

Planning (`plan_jobs`): a job is a solution's original and Pending mutants, each with the pool inputs it
still lacks rows for in the store, and the inputs whose reference rows are missing. Every (variant, input)
pair of the plan ends with a row: observed, or inferred and flagged (supervisor.py), so a finished run has
no holes; a job that fails as a whole is reported and its pairs are run again by the next run.

Scheduling (local backend): every job's extensions are built in a process pool, the jobs with the most
variants first; once a job is built it is cut into slices of at most `job_size` variants (`split_job`) that
any worker may take. `workers_per_gpu` supervisor threads per GPU each drive a worker process; before a slice
starts, its supervisor takes a memory lease on its GPU (admission.py), so a GPU runs only as many slices as
fit in its memory. Slices whose pairs ran out of memory while sharing the GPU come back as exclusive jobs,
run last, each with the GPU to itself.

Recording: rows are buffered and committed to the store every `FLUSH_S` seconds by a thread of the
`Recorder` (and at the end, or on Ctrl-C), one part per commit; a crash loses at most the last seconds'
rows, which the next run observes again.

Backends: `local` as above; `dask` submits each job to a Dask distributed cluster as a task needing one
`GPU` resource, and the client appends what comes back.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import Counter, defaultdict, deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import PENDING, Mutant, read_mutants
from oracleaudit.problem import problem_at
from oracleaudit.execution.protocol import Job
from oracleaudit.status import ORIGINAL, REFERENCE
from oracleaudit.execution.supervisor import MAX_CRASHES, ORIGINAL_TIMEOUT_S, Supervisor  # noqa: F401 (re-exported)
from oracleaudit.execution.worker import usable_cpus

JOB_SIZE = 48  # variants per slice; every slice loads the extension and runs the original once
FLUSH_S = 2.0  # seconds between commits of buffered rows
PHASES = ("startup", "build_load", "load", "references", "execution", "evidence", "hung")


@dataclass
class RunResult:
    solutions: int = 0
    variants: int = 0  # variants (originals and mutants) with rows recorded by this run
    pairs: int = 0  # (variant, input) pairs recorded by this run
    skipped: int = 0  # pairs already in the store
    by_status: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    inferred: int = 0  # rows recorded as inferred (not observed)
    errors: list[str] = field(default_factory=list)
    build_s: float = 0.0  # CPU seconds of the build processes
    build_wall_s: float = 0.0  # from the start to the last build's end
    seconds: Counter = field(default_factory=Counter)  # worker seconds by phase
    idle_s: float = 0.0  # slot seconds spent waiting for a built job or for GPU memory
    restarts: int = 0
    hangs: int = 0
    crashes: int = 0
    exclusive_jobs: int = 0
    peak_bytes: dict[str, int] = field(default_factory=dict)  # per problem: the largest worker peak reported
    gpu_busy_fraction: float | None = None
    execution_wall_s: float = 0.0  # from the first slice's start to the last slice's end
    wall_s: float = 0.0
    stopped: bool = False  # stopped by `stop_after_s` before the end (run again to continue)

    def summary(self) -> dict:
        minutes = self.wall_s / 60
        return {"solutions": self.solutions, "variants_run": self.variants, "pairs_run": self.pairs,
                "pairs_skipped": self.skipped, "observations_by_status": dict(sorted(self.by_status.items())),
                "inferred_rows": self.inferred, "errors": self.errors,
                "phases": {"build_cpu_s": round(self.build_s, 1), "build_wall_s": round(self.build_wall_s, 1),
                           **{f"{name}_s": round(self.seconds.get(name, 0.0), 1) for name in PHASES},
                           "idle_s": round(self.idle_s, 1)},
                "restarts": self.restarts, "hangs": self.hangs, "crashes": self.crashes,
                "exclusive_jobs": self.exclusive_jobs,
                "peak_gpu_bytes_by_problem": dict(sorted(self.peak_bytes.items())),
                "gpu_busy_fraction": None if self.gpu_busy_fraction is None else round(self.gpu_busy_fraction, 3),
                "execution_wall_s": round(self.execution_wall_s, 1), "wall_s": round(self.wall_s, 1),
                "stopped": self.stopped,
                "variants_per_min": round(self.variants / minutes, 1) if minutes > 0 else None}


def plan_jobs(mutants: list[Mutant], pool: str, build_root: Path, done: set[tuple[str, str, str]],
              per_solution: int | None = None) -> tuple[list[Job], list[str], int]:
    """One job per solution file: the original and the Pending mutants (or the first `per_solution` of them
    by id, a deterministic sample), each on the pool inputs without a row in `done` ((problem, mutant_id,
    input_id) triples). Returns the jobs, error lines, and how many pairs are already recorded."""
    from oracleaudit.pool import Pool, names_a_file
    from oracleaudit.files import file_sha256

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
        label = problem.label
        keys = tuple((e.key, e.seed, e.variant, e.distribution) for e in loaded.entries_for(problem))
        # Resolved once here: a worker would otherwise run the reference on the CPU again to validate them.
        shapes = tuple((v.name, v.overrides, v.input_shapes) for v in loaded.shape_plan(problem).variants)
        inputs = [key for key, *_ in keys]
        work = []
        for variant in [ORIGINAL, *(m.id for m in group)]:
            todo = tuple(key for key in inputs if (label, variant, key) not in done)
            recorded += len(inputs) - len(todo)
            if todo:
                work.append((variant, todo))
        references = tuple(key for key in inputs if (label, REFERENCE, key) not in done)
        if not work and not references:
            continue
        jobs.append(Job(solution=str(path.resolve()), problem_path=str(Path(problem_file).resolve()),
                        problem=label, mutants=tuple(asdict(m) for m in group), pool=pool_ref, entry_keys=keys,
                        build_dir=str(build_root), work=tuple(work), record_references=references, shapes=shapes))
    return jobs, errors, recorded


def split_job(job: Job, size: int) -> list[Job]:
    """Cut a job into slices of at most `size` of its mutants, as even as possible. Every slice keeps all
    mutants for the build plan (so every slice loads the same extensions); the first slice also has the
    original and the reference rows. A slice without the original runs it first unrecorded to time the
    mutants' deadlines."""
    if size < 1:
        raise ValueError(f"a job slice holds at least one variant, got {size}")
    mutants = [(v, inputs) for v, inputs in job.work if v != ORIGINAL]
    original = [(v, inputs) for v, inputs in job.work if v == ORIGINAL]
    if len(mutants) <= size:
        return [job]
    count = -(-len(mutants) // size)
    width = -(-len(mutants) // count)
    slices = []
    for start in range(0, len(mutants), width):
        part = mutants[start:start + width]
        if start == 0:
            slices.append(replace(job, work=tuple(original + part)))
        else:
            slices.append(replace(job, work=tuple(part), record_references=()))
    return slices


def variants_to_run(job: Job) -> int:
    """The variants of a job with pairs still to observe."""
    return len(job.work)


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


class Recorder:
    """Buffers rows and commits them to the store every `interval` seconds from a thread of its own, so that
    rows are committed within seconds of arriving even while every worker sits in a long pair (thread-safe);
    counts them. A context manager: leaving it commits what is left; a commit that failed in the thread is
    raised there (or by the next call)."""

    def __init__(self, store, result: RunResult, advance: Callable[[int], None], interval: float = FLUSH_S):
        self.store = store
        self.result = result
        self.advance = advance
        self.interval = interval
        self.lock = threading.Lock()
        self.buffer: list[dict] = []
        self.variants: set[tuple[str, str]] = set()
        self.failure: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._commit_periodically, daemon=True)

    def __enter__(self) -> "Recorder":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        self.flush()

    def __call__(self, variant: str, rows: list[dict]) -> None:
        with self.lock:
            self._raise()
            self.buffer.extend(rows)
            for row in rows:
                self.result.by_status[row["status"]] += 1
                self.result.inferred += bool(row.get("inferred"))
            if variant != REFERENCE and rows:
                self.result.pairs += 1
                self.variants.add((rows[0]["problem"], variant))
                self.result.variants = len(self.variants)
                self.advance(1)

    def flush(self) -> None:
        with self.lock:
            self._raise()
            if self.buffer:
                self.store.append(self.buffer)
                self.buffer = []

    def _raise(self) -> None:
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure

    def _commit_periodically(self) -> None:
        while not self.done.wait(self.interval):
            try:
                self.flush()
            except BaseException as err:  # kept for the recording thread, which stops the run
                with self.lock:
                    self.failure = err
                return


def run(mutants_dir: Path, out: Path, pool: str = "default", gpus: int | None = None, backend: str = "local",
        scheduler: str | None = None, timeout_factor: float = 10.0, timeout_floor_s: float = 30.0,
        per_solution: int | None = None, workers_per_gpu: int = 1, job_size: int = JOB_SIZE,
        evidence_engine: str = "auto", max_crashes: int = MAX_CRASHES, stop_after_s: float | None = None,
        show_progress: bool = True) -> RunResult:
    """Observe every Pending mutant (and each solution's original) on every input of the pool on the GPUs,
    appending the rows to the evidence store at `out`. Safe to interrupt and run again. With the local
    backend a job is shared out in slices of at most `job_size` variants, at most `workers_per_gpu` at a
    time per GPU (fewer when their memory would not fit). `max_crashes`: sticky crashes of one variant in a
    slice before its other inputs are inferred (0: no limit). `stop_after_s`: stop starting pairs after that
    many seconds, as Ctrl-C does (the pairs in flight are dropped), and return what was recorded."""
    from oracleaudit.execution.measure import ENGINES
    from oracleaudit.terminal import progress_bar
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
    if max_crashes < 0:
        raise OracleAuditError(f"--max-crashes must be ≥ 0, got {max_crashes}")
    if stop_after_s is not None and not stop_after_s > 0:
        raise OracleAuditError(f"--stop-after must be > 0 seconds, got {stop_after_s}")
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
    jobs, errors, recorded = plan_jobs(mutants, pool, build_root(), store.done_keys(), per_solution)
    jobs = [replace(job, evidence_engine=evidence_engine) for job in jobs]
    result = RunResult(solutions=len(jobs), errors=errors, skipped=recorded)
    if jobs:
        with progress_bar("observing (variant, input) pairs", total=sum(job.pairs for job in jobs),
                          enabled=show_progress) as advance:
            supervise = dict(timeout_factor=timeout_factor, timeout_floor_s=timeout_floor_s, max_crashes=max_crashes)
            with Recorder(store, result, advance) as recorder:
                if backend == "local":
                    Scheduler(jobs, _require_gpus(gpus), workers_per_gpu, job_size, recorder, result,
                              supervise).run(stop_after_s)
                else:
                    _run_dask(jobs, scheduler, recorder, result, supervise)
    result.wall_s = time.perf_counter() - started
    return result


# ---------------------------------------------------------------------------------------------------------
# Builds


def _prebuild(job: Job) -> tuple[float, bool, dict[str, str]]:
    """Build a job's extensions so its workers find them built (CPU work); returns the seconds spent,
    whether it built, and the mutants whose clones do not build. A failure is left to the worker, which
    meets it again and reports it."""
    from oracleaudit.execution import build as builds

    started = time.perf_counter()
    try:
        _, _, dropped = builds.build_isolating(Path(job.solution), [Mutant(**m) for m in job.mutants],
                                               Path(job.build_dir))
    except Exception:
        return time.perf_counter() - started, False, {}
    return time.perf_counter() - started, True, dropped


def _build_process_init() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's
    os.environ["MAX_JOBS"] = "2"  # load_inline compiles two files; the pool's processes use the cores


def prebuild_in_order(jobs: list[Job], ready: Callable[[Job, float, bool], None], stop: threading.Event,
                      processes: int | None = None) -> None:
    """Build every job in parallel processes, the jobs with the most variants first, and call
    `ready(job, seconds, built)` as each is done (with the mutants that do not build in `job.unbuildable`),
    so GPU workers start on the first built solution while the CPU cores build the rest. The pool is
    terminated when `stop` is set."""
    if not jobs:
        return
    order = sorted(range(len(jobs)), key=lambda i: -variants_to_run(jobs[i]))
    processes = processes or max(1, usable_cpus() // 2)
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(processes, len(jobs)), initializer=_build_process_init) as pool:
        waiting = {index: pool.apply_async(_prebuild, (jobs[index],)) for index in order}
        while waiting and not stop.is_set():
            for index in [i for i, r in waiting.items() if r.ready()]:
                try:
                    seconds, built, dropped = waiting.pop(index).get()
                except Exception:  # a crashed build process: the worker builds (and reports) it itself
                    seconds, built, dropped = 0.0, False, {}
                ready(replace(jobs[index], unbuildable=tuple(sorted(dropped.items()))), seconds, built)
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


# ---------------------------------------------------------------------------------------------------------
# The local scheduler


class WorkQueue:
    """Slices to run, fed as their builds finish; exclusive retries are handed out once no other slice is
    waiting. `take` returns None when everything is done."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.items: deque[Job] = deque()
        self.alone: deque[Job] = deque()
        self.feeding = True
        self.in_flight = 0

    def put(self, job: Job) -> None:
        with self.changed:
            (self.alone if job.exclusive else self.items).append(job)
            self.changed.notify_all()

    def fed(self) -> None:
        with self.changed:
            self.feeding = False
            self.changed.notify_all()

    def take(self, stop: threading.Event) -> Job | None:
        with self.changed:
            while not stop.is_set():
                if self.items:
                    self.in_flight += 1
                    return self.items.popleft()
                if self.alone:
                    self.in_flight += 1
                    return self.alone.popleft()
                if not self.feeding and not self.in_flight:
                    return None
                self.changed.wait(0.5)
            return None

    def finished(self, job: Job, retry: Job | None) -> None:
        with self.changed:
            self.in_flight -= 1
            if retry is not None:
                self.alone.append(retry)
            self.changed.notify_all()


class Utilization:
    """Samples each GPU's utilization (NVML) twice a second while slices run; `busy_fraction()` is the mean
    over the samples taken while at least one slice ran (None where NVML is not available)."""

    def __init__(self, gpus: int):
        self.samples: list[float] = []
        self.running = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.handles = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(gpus)]
        except Exception:
            self.nvml = None
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "Utilization":
        if self.handles:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()

    def slice(self, delta: int) -> None:
        with self.lock:
            self.running += delta

    def _sample(self) -> None:
        while not self.stop.wait(0.5):
            with self.lock:
                active = self.running > 0
            if active:
                try:
                    values = [self.nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self.handles]
                except Exception:
                    return
                self.samples.append(sum(values) / len(values) / 100)

    def busy_fraction(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


class Scheduler:
    """Builds, slices, memory admission and supervisors of a local run."""

    def __init__(self, jobs: list[Job], gpus: int, workers_per_gpu: int, job_size: int, recorder: Recorder,
                 result: RunResult, supervise: dict):
        import torch

        self.slots = gpus * workers_per_gpu
        self.jobs = [replace(job, cpu_threads=max(1, usable_cpus() // self.slots)) for job in jobs]
        self.gpus = gpus
        self.job_size = job_size
        self.recorder = recorder
        self.result = result
        self.supervise = supervise
        self.stop = threading.Event()
        self.work = WorkQueue()
        self.lock = threading.Lock()
        from oracleaudit.execution.admission import WORKER_OVERHEAD_BYTES, GpuMemory

        self.overhead = WORKER_OVERHEAD_BYTES
        self.memory = [GpuMemory(torch.cuda.get_device_properties(i).total_memory, workers_per_gpu)
                       for i in range(gpus)]
        self.estimates: dict[str, int] = {}  # problem → bytes a slice of it needs
        self.first_slice: float | None = None
        self.last_slice: float = 0.0

    def run(self, stop_after_s: float | None = None) -> None:
        from joblib import Parallel, delayed

        started = time.perf_counter()
        if stop_after_s is not None:
            timer = threading.Timer(stop_after_s, self._time_up)
            timer.daemon = True
            timer.start()
        feeder = threading.Thread(target=self._feed, args=(started,), daemon=True)
        feeder.start()
        supervisors = [Supervisor(slot % self.gpus, self.recorder, stop=self.stop, **self.supervise)
                       for slot in range(self.slots)]
        with Utilization(self.gpus) as utilization:
            driver = threading.Thread(target=lambda: Parallel(n_jobs=self.slots, prefer="threads")(
                delayed(self._drive)(s, utilization) for s in supervisors), daemon=True)
            driver.start()
            try:
                while driver.is_alive():
                    driver.join(0.5)
            except KeyboardInterrupt:
                # Stop: no new pair starts, the pairs in flight are dropped (never committed, so the next run
                # does them again), nothing is recorded for workers killed here.
                self.stop.set()
                for supervisor in supervisors:
                    supervisor.interrupt()
                driver.join(30)
                raise
        self.result.gpu_busy_fraction = utilization.busy_fraction()
        if self.first_slice is not None:
            self.result.execution_wall_s = self.last_slice - self.first_slice
        self.result.restarts = sum(s.restarts for s in supervisors)

    def _time_up(self) -> None:
        self.result.stopped = True
        self.stop.set()

    def _feed(self, started: float) -> None:
        def ready(job: Job, seconds: float, built: bool) -> None:
            # A job whose build failed goes to one worker whole: that worker meets the failure and reports it.
            with self.lock:
                self.result.build_s += seconds
                self.result.build_wall_s = time.perf_counter() - started
            for piece in split_job(job, self.job_size) if built else [job]:
                self.work.put(piece)

        queued: set[str] = set()
        try:
            prebuild_in_order(self.jobs, lambda j, s, b: (queued.add(j.solution), ready(j, s, b)), self.stop)
        except Exception:  # no process pool (e.g. out of memory): the workers build the rest themselves
            for job in self.jobs:
                if job.solution not in queued:
                    self.work.put(job)
        finally:
            self.work.fed()

    def _drive(self, supervisor: Supervisor, utilization: Utilization) -> None:
        memory = self.memory[supervisor.gpu]
        try:
            while not self.stop.is_set():
                waiting = time.perf_counter()
                job = self.work.take(self.stop)
                if job is None:
                    return
                need = self.estimates.get(job.problem)
                lease = memory.acquire(need, exclusive=job.exclusive, stop=self.stop.is_set)
                self._idle(time.perf_counter() - waiting)
                if lease is None:
                    self.work.finished(job, None)
                    return
                utilization.slice(+1)
                self._slice_started()
                try:
                    outcome = supervisor.run(job, shared=lambda: lease.shared,
                                             on_memory=lambda peak: self._measured(job.problem, lease, peak))
                finally:
                    utilization.slice(-1)
                    lease.release()
                    self._slice_ended()
                with self.lock:
                    self.result.errors += outcome.errors
                    self.result.seconds.update(outcome.seconds)
                    self.result.hangs += outcome.hangs
                    self.result.crashes += outcome.crashes
                    self.result.exclusive_jobs += job.exclusive
                    if outcome.peak_bytes:
                        self.result.peak_bytes[job.problem] = max(self.result.peak_bytes.get(job.problem, 0),
                                                                  outcome.peak_bytes)
                self.work.finished(job, outcome.alone)
        finally:
            supervisor.close()

    def _measured(self, problem: str, lease, peak: int) -> None:
        need = peak + self.overhead
        with self.lock:
            self.estimates[problem] = max(self.estimates.get(problem, 0), need)
        lease.grow(need)

    def _idle(self, seconds: float) -> None:
        with self.lock:
            self.result.idle_s += seconds

    def _slice_started(self) -> None:
        with self.lock:
            now = time.perf_counter()
            if self.first_slice is None:
                self.first_slice = now

    def _slice_ended(self) -> None:
        with self.lock:
            self.last_slice = time.perf_counter()


# ---------------------------------------------------------------------------------------------------------
# Dask


def _run_dask(jobs, scheduler, recorder: Recorder, result: RunResult, supervise: dict) -> None:
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise OracleAuditError("--backend dask needs the optional extra: pip install 'oracleaudit[dask]'") from None
    client = Client(scheduler)
    futures = [client.submit(_remote_job, job, supervise, resources={"GPU": 1}, pure=False) for job in jobs]
    for future in as_completed(futures):
        batches, errors, seconds = future.result()
        for key, rows in batches:
            recorder(key, rows)
        result.errors += errors
        result.seconds.update(seconds)


def _remote_job(job: Job, supervise: dict):
    """A job on a Dask worker: supervise a local GPU worker and return the rows (appended by the client).
    Paths in the job are as the client sees them: the workers need the same files (a shared file system).
    The GPU worker is a child process, which a daemonic Dask worker may not have. The Dask worker holds the
    GPU resource alone, so an out-of-memory error there is the variant's own."""
    if multiprocessing.current_process().daemon:
        raise OracleAuditError("this Dask worker is a daemonic process and cannot start the GPU worker: start "
                               "Dask workers with DASK_DISTRIBUTED__WORKER__DAEMON=False")
    batches: list[tuple[str, list[dict]]] = []
    supervisor = Supervisor(0, lambda key, rows: batches.append((key, rows)), **supervise)
    try:
        outcome = supervisor.run(replace(job, exclusive=True))
    finally:
        supervisor.close()
    return batches, outcome.errors, dict(outcome.seconds)
