"""The run stage: mutants → jobs (one per solution) → builds → slices on GPU workers under supervision →
observation rows appended to the evidence store; resumable at (variant, input) granularity.

Planning (`plan_jobs`): a job is a solution's original and Pending mutants, each with the pool inputs it
still lacks rows for in the store, and the inputs whose reference rows are missing. Every (variant, input)
pair of the plan ends with a row: observed, or inferred and flagged (supervisor.py), so a finished run has
no holes; a job that fails as a whole is reported and its pairs are run again by the next run.

Scheduling (local backend): every job's extensions are built in a process pool, the jobs with the most variants
first; once a job is built, any worker may take a slice of it: at most `job_size` variants, fewer as the run nears
its end (`scheduler.WorkQueue`, `take_slice`), so that its last slices end together. `workers_per_gpu` supervisor
threads per GPU each drive a worker process; before a slice starts, its supervisor takes a memory lease on its GPU
(admission.py), so a GPU runs only as many slices as fit in its memory. Slices whose pairs ran out of memory while
sharing the GPU come back as exclusive jobs, run last, each with the GPU to itself.

Recording: rows are buffered and committed to the store every `FLUSH_S` seconds by a thread of the
`Recorder` (and at the end, or on Ctrl-C), one part per commit; a crash loses at most the last seconds'
rows, which the next run observes again.

Backends: `local` as above; `dask` submits each job to a Dask distributed cluster as a task needing one
`GPU` resource, and the client appends what comes back.
"""


from __future__ import annotations

import multiprocessing
import time
from dataclasses import replace
from pathlib import Path

from oracleaudit.errors import OracleAuditError
from oracleaudit.execution.plan import (JOB_SIZE, Cover, build_root, plan_jobs, split_job, take_slice,
                                        variants_to_run)
from oracleaudit.execution.protocol import Job
from oracleaudit.execution.recorder import Recorder, RunResult
from oracleaudit.execution.scheduler import Scheduler, WorkQueue, prebuild_in_order, require_gpus
from oracleaudit.execution.stalls import StallWatch
from oracleaudit.execution.supervisor import MAX_CRASHES, ORIGINAL_TIMEOUT_S, SPARES, TIMEOUT_FLOOR_S, Supervisor
from oracleaudit.files import file_sha256
from oracleaudit.mutant import MUTANTS_FILE, read_mutants

__all__ = ["JOB_SIZE", "MAX_CRASHES", "ORIGINAL_TIMEOUT_S", "TIMEOUT_FLOOR_S", "WORKERS_PER_GPU", "Recorder",
           "RunResult", "WorkQueue", "build_root", "open_store", "plan_jobs", "prebuild_in_order", "run", "split_job",
           "take_slice", "variants_to_run"]

# At most this many workers share a GPU by default (memory admission starts fewer where they would not fit):
# while one worker does host-side work (Python, the evidence's transfer) the others keep the GPU busy.
WORKERS_PER_GPU = 8
SUPERVISION = ("queue", "slice")  # run(supervision=...): see run


def open_store(out: Path, pool: str, mutants_file: Path):
    """The run's evidence store at `out`, created or resumed.

    Mutant ids hash the problem, file, rule, span and replacement, and every job checks its solution's
    sha256, so another mutants.jsonl of the same sources (e.g. mutate run again) may continue a store; the
    pool may not: a store resumes only under the same pool name and, where it records one, the same
    `pool_sha256` (`Pool.digest`: a pool file whose inputs changed, e.g. its derivation, would otherwise
    mix two kinds of rows under the same keys; stores made before the digest was recorded are held to the
    name). `mutants_sha256` records the mutants file of the run that created the store."""
    from oracleaudit.pool import Pool
    from oracleaudit.store import RUN_IDENTITY, EvidenceStore

    digest = Pool.load(pool).digest()
    store = EvidenceStore(out).open_or_create({"pool": pool, "pool_sha256": digest,
                                               "mutants_sha256": file_sha256(mutants_file)}, identity=RUN_IDENTITY)
    recorded = store.meta.get("pool_sha256")
    if recorded is not None and recorded != digest:
        raise OracleAuditError(f"{store.manifest_path}: made with other inputs of pool {pool!r} (pool_sha256 "
                               f"{recorded[:12]}, the pool now gives {digest[:12]}); continue it with that pool "
                               "file, or run into a new store")
    return store


def run(mutants_dir: Path, out: Path, pool: str = "default", gpus: int | None = None, backend: str = "local",
        scheduler: str | None = None, timeout_factor: float = 10.0, timeout_floor_s: float = TIMEOUT_FLOOR_S,
        per_solution: int | None = None, workers_per_gpu: int = WORKERS_PER_GPU, job_size: int = JOB_SIZE,
        evidence_engine: str = "auto", max_crashes: int = MAX_CRASHES, stop_after_s: float | None = None,
        show_progress: bool = True, cover: Cover | None = None, supervision: str = "queue",
        spares: int = SPARES, stall_watch: bool = True) -> RunResult:
    """Observe every Pending mutant (and each solution's original) on every input of the pool on the GPUs,
    appending the rows to the evidence store at `out`. Safe to interrupt and run again. With the local
    backend a job is shared out in slices of at most `job_size` variants, at most `workers_per_gpu` at a
    time per GPU (fewer when their memory would not fit). `max_crashes`: sticky crashes of one variant in a
    slice before its other inputs are inferred (0: no limit). `cover(problem, input keys)`: the inputs observed
    even for a variant whose other inputs are inferred (`oracleaudit run`: one input of each catalog oracle at
    each shape, `scoring.oracle.input_cover`). `stop_after_s`: stop starting pairs after that many seconds, as
    Ctrl-C does (the pairs in flight are dropped), and return what was recorded. `supervision` "queue": a
    variant that crashed or hung goes back to the front of the queue for any slot, a hung variant's cover
    inputs have the shorter deadline floor of supervisor.py and `spares` workers are kept started ahead;
    "slice", as before those: its slice runs it after the others, at the full floor, each restart's worker made
    at its fault (kept to measure them: bench/fault_tail.py). `stall_watch` (local backend): each GPU's stalls,
    measured by a probe process, lengthen the deadlines of the pairs they hold up (stalls.py); without it a
    late pair is waited for to twice its deadline."""
    from oracleaudit.execution.measure import ENGINES
    from oracleaudit.store import EvidenceStore
    from oracleaudit.terminal import progress_bar

    started = time.perf_counter()
    if per_solution is not None and per_solution < 1:
        raise OracleAuditError(f"--per-solution must be ≥ 1, got {per_solution}")
    if timeout_factor <= 0:
        raise OracleAuditError(f"--timeout-factor must be > 0, got {timeout_factor}")
    if timeout_floor_s <= 0:
        raise OracleAuditError(f"--timeout-floor must be > 0, got {timeout_floor_s}")
    if workers_per_gpu < 1:
        raise OracleAuditError(f"--workers-per-gpu must be ≥ 1, got {workers_per_gpu}")
    if job_size < 1:
        raise OracleAuditError(f"--job-size must be ≥ 1, got {job_size}")
    if spares < 0:
        raise OracleAuditError(f"spares must be ≥ 0, got {spares}")
    if max_crashes < 0:
        raise OracleAuditError(f"--max-crashes must be ≥ 0, got {max_crashes}")
    if stop_after_s is not None and not stop_after_s > 0:
        raise OracleAuditError(f"--stop-after must be > 0 seconds, got {stop_after_s}")
    if evidence_engine not in ENGINES:
        raise OracleAuditError(f"--evidence-engine must be one of {', '.join(ENGINES)}, got {evidence_engine!r}")
    if supervision not in SUPERVISION:
        raise OracleAuditError(f"supervision must be one of {', '.join(SUPERVISION)}, got {supervision!r}")
    if backend not in ("local", "dask"):
        raise OracleAuditError(f"--backend must be local or dask, got {backend!r}")
    if backend == "dask" and not scheduler:
        raise OracleAuditError("--backend dask needs --scheduler ADDR")
    if backend == "local":
        require_gpus(gpus)
    mutants = read_mutants(mutants_dir)
    with EvidenceStore(out).writing():  # one writer; what a killed run left half-written is removed
        store = open_store(out, pool, mutants_dir / MUTANTS_FILE if mutants_dir.is_dir() else mutants_dir)
        jobs, errors, recorded = plan_jobs(mutants, pool, build_root(), store.done_keys(), per_solution, cover)
        jobs = [replace(job, evidence_engine=evidence_engine) for job in jobs]
        result = RunResult(solutions=len(jobs), errors=errors, skipped=recorded)
        if jobs:
            with progress_bar("observing (variant, input) pairs", total=sum(job.pairs for job in jobs),
                              enabled=show_progress) as advance:
                supervise = dict(timeout_factor=timeout_factor, timeout_floor_s=timeout_floor_s, max_crashes=max_crashes)
                if supervision == "slice":
                    supervise.update(hung_floor_s=timeout_floor_s, spares=0)
                else:
                    supervise.update(spares=spares)
                with Recorder(store, result, advance) as recorder:
                    if backend == "local":
                        Scheduler(jobs, require_gpus(gpus), workers_per_gpu, job_size, recorder, result,
                                  supervise, hand_off=supervision == "queue",
                                  watch=StallWatch if stall_watch else None).run(stop_after_s)
                    else:
                        _run_dask(jobs, scheduler, recorder, result, supervise)
    result.wall_s = time.perf_counter() - started
    return result


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
