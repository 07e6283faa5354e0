"""The local scheduler of a run: builds in a process pool, slices in a work queue, memory leases per GPU,
supervisors driving the workers, and the GPU's utilization sampled while slices run."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Callable

from oracleaudit.errors import OracleAuditError
from oracleaudit.execution.build import MAX_VARIANTS_PER_EXTENSION
from oracleaudit.execution.plan import JOB_SIZE, take_slice, variants_to_run, warm_jobs
from oracleaudit.execution.protocol import ORIGINAL, Job
from oracleaudit.execution.recorder import Recorder, RunResult
from oracleaudit.execution.stalls import StallWatch, Teardowns
from oracleaudit.execution.supervisor import Supervisor
from oracleaudit.execution.trace import mark
from oracleaudit.mutant import Mutant

__all__ = ["Scheduler", "Utilization", "WorkQueue", "prebuild_in_order", "require_gpus"]


def usable_cpus() -> int:
    """The CPUs this process may run on (a `taskset` or cgroup CPU set counts, unlike os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _prebuild(job: Job, name: str | None = None) -> tuple[float, bool, dict[str, str]]:
    """Build a job's extensions (or its extension `name` alone) so its workers find them built (CPU work);
    returns the seconds spent, whether it built, and the mutants whose clones do not build (a whole job's
    build only). A failure is left to the worker, which meets it again and reports it."""
    from oracleaudit.execution import build as builds

    started = time.perf_counter()
    mutants = [Mutant(**m) for m in job.mutants]
    try:
        if name is not None:
            builds.build_extension(Path(job.solution), mutants, Path(job.build_dir), name)
            return time.perf_counter() - started, True, {}
        _, _, dropped = builds.build_isolating(Path(job.solution), mutants, Path(job.build_dir))
    except Exception:
        return time.perf_counter() - started, False, {}
    return time.perf_counter() - started, True, dropped


def _extensions(job: Job) -> list[tuple[str, int]]:
    """A job's extensions as (name, variants); none where its build cannot even be planned."""
    from oracleaudit.execution import build as builds

    try:
        return builds.extensions_of(Path(job.solution), [Mutant(**m) for m in job.mutants], Path(job.build_dir))
    except Exception:
        return []


def _build_process_init() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's
    os.environ["MAX_JOBS"] = "2"  # load_inline compiles two files; the pool's processes use the cores


def _wait(results, stop: threading.Event) -> None:
    while not stop.is_set() and not all(r.ready() for r in results):
        time.sleep(0.05)


def prebuild_in_order(jobs: list[Job], ready: Callable[[Job, float, bool], None], stop: threading.Event,
                      processes: int | None = None, plan: Callable = _extensions, build: Callable = _prebuild,
                      ) -> None:
    """Build every job in parallel processes, each extension of a job with several (build.py) on its own, the
    extensions with the most variants first, and call `ready(job, seconds, built)` as each job is done (with
    the mutants that do not build in `job.unbuildable`), so GPU workers start on the first built solution
    while the CPU cores build the rest. A job one of whose extensions fails is built again whole, where the
    mutants whose clones do not build are found and dropped. The pool is terminated when `stop` is set.
    `plan(job)` and `build(job, name=None)`: `_extensions` and `_prebuild` (module functions: they run in
    spawned processes)."""
    if not jobs:
        return
    # Half the cores: with one build process per core the workers' host-side work starved (H200, cold cache:
    # 557 variants in 374 s against 775 in 331 s with half).
    processes = processes or max(1, usable_cpus() // 2)
    at_most = sum(1 + variants_to_run(job) // MAX_VARIANTS_PER_EXTENSION for job in jobs)  # tasks, about
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(processes, at_most), initializer=_build_process_init) as pool:
        planned = [pool.apply_async(plan, (job,)) for job in jobs]
        _wait(planned, stop)
        if stop.is_set():
            return
        tasks = []  # (variants, job index, extension name: None for the whole job)
        for index, result in enumerate(planned):
            try:
                extensions = result.get()
            except Exception:  # a crashed process: the job is built whole
                extensions = []
            if len(extensions) > 1:
                tasks += [(variants, index, name) for name, variants in extensions]
            else:
                tasks.append((variants_to_run(jobs[index]), index, None))
        left = {index: 0 for _, index, _ in tasks}
        for _, index, _ in tasks:
            left[index] += 1
        seconds, failed = dict.fromkeys(left, 0.0), set()
        waiting = {(index, name): pool.apply_async(build, (jobs[index], name))
                   for _, index, name in sorted(tasks, key=lambda task: (-task[0], task[1]))}
        while waiting and not stop.is_set():
            for index, name in [key for key, result in waiting.items() if result.ready()]:
                try:
                    took, built, dropped = waiting.pop((index, name)).get()
                except Exception:  # a crashed build process: the worker builds (and reports) it itself
                    took, built, dropped = 0.0, False, {}
                seconds[index] += took
                if name is None:
                    ready(replace(jobs[index], unbuildable=tuple(sorted(dropped.items()))), seconds[index], built)
                    continue
                left[index] -= 1
                if not built:
                    failed.add(index)
                if left[index] == 0 and index in failed:  # built again whole: its culprits are dropped there
                    waiting[(index, None)] = pool.apply_async(build, (jobs[index],))
                elif left[index] == 0:
                    ready(replace(jobs[index], unbuildable=()), seconds[index], True)
            time.sleep(0.05)


def require_gpus(gpus: int | None) -> int:
    import torch

    available = torch.cuda.device_count()
    if available == 0:
        raise OracleAuditError("no CUDA device: `oracleaudit run` needs a GPU (score needs none)")
    count = available if gpus is None else gpus
    if not 1 <= count <= available:
        raise OracleAuditError(f"--gpus must be between 1 and {available} on this machine, got {count}")
    return count


# A built job is cut as workers ask for work: a slice of at most `job_size` mutants, fewer once little is left
# (guided self-scheduling: the mutants still queued or building over SLICES_PER_SLOT times the slots, at least
# MIN_SLICE). Slices cut ahead of time ran 48 mutants each to the end: in a traced run of shard 3 the last ones
# ran alone for ~50 s, 1-4 of 8 workers busy (bench/results/trace_rates_fresh3_builds.json).
SLICES_PER_SLOT = 2
MIN_SLICE = 8


# Warm-up jobs (`Job.warm`) run on at most this fraction of the slots at once: the build processes, which
# warm-up waits for, need the cores (the workers make inputs on the CPU).
WARM_SLOTS = 0.5


class WorkQueue:
    """Slices to run, fed as their builds finish; exclusive retries are handed out once no other slice is
    waiting; a job put `first` (a variant a supervisor handed off) before the other slices. A job put
    `divisible` is cut as it is taken (`take_slice`, sized as above: `expect` the variants the run plans, and
    put each planned job `planned` once it is built or failed to build). Warm-up jobs (`put_warm`) are handed
    out only while nothing else waits, on at most `WARM_SLOTS` of the slots at once, until their job is put or
    the feeding ends. `take` returns None when everything is done."""

    def __init__(self, slots: int = 1, job_size: int = JOB_SIZE) -> None:
        self.changed = threading.Condition()
        self.items: deque[Job] = deque()
        self.divisible: deque[Job] = deque()
        self.alone: deque[Job] = deque()
        self.warm: deque[Job] = deque()
        self.warming = 0
        self.feeding = True
        self.in_flight = 0
        self.slots = slots
        self.job_size = job_size
        self.expected = 0  # variants of planned jobs not yet put

    def expect(self, variants: int) -> None:
        with self.changed:
            self.expected += variants

    def put(self, job: Job, first: bool = False, divisible: bool = False, planned: bool = False) -> None:
        with self.changed:
            if planned:
                self.expected = max(0, self.expected - variants_to_run(job))
            if planned:  # built (or not buildable): its slices make what its warm-up jobs would
                self.warm = deque(w for w in self.warm if w.solution != job.solution)
            waiting = self.alone if job.exclusive else self.divisible if divisible else self.items
            if first:
                waiting.appendleft(job)
            else:
                waiting.append(job)
            self.changed.notify_all()

    def put_warm(self, jobs: list[Job]) -> None:
        with self.changed:
            self.warm.extend(jobs)
            self.changed.notify_all()

    def fed(self) -> None:
        with self.changed:
            self.feeding = False
            self.expected = 0
            self.warm.clear()
            self.changed.notify_all()

    def slice_size(self) -> int:
        """The mutants of the next slice cut from the first divisible job (all of them where fewer than
        MIN_SLICE would be left and they fit in `job_size`)."""
        left = self.expected + sum(variants_to_run(job) for job in self.divisible)
        size = min(self.job_size, max(MIN_SLICE, -(-left // (SLICES_PER_SLOT * self.slots))))
        mutants = sum(variant != ORIGINAL for variant, _ in self.divisible[0].work)
        return mutants if mutants - size < MIN_SLICE and mutants <= self.job_size else size

    def take(self, stop: threading.Event) -> Job | None:
        with self.changed:
            while not stop.is_set():
                if self.items:
                    self.in_flight += 1
                    return self.items.popleft()
                if self.divisible:
                    self.in_flight += 1
                    piece, rest = take_slice(self.divisible[0], self.slice_size())
                    if rest is None:
                        self.divisible.popleft()
                    else:
                        self.divisible[0] = rest
                    return piece
                if self.alone:
                    self.in_flight += 1
                    return self.alone.popleft()
                if self.warm and self.warming < max(1, int(self.slots * WARM_SLOTS)):
                    self.in_flight += 1
                    self.warming += 1
                    return self.warm.popleft()
                if not self.feeding and not self.in_flight:
                    return None
                self.changed.wait(0.5)
            return None

    def finished(self, job: Job, retry: Job | None) -> None:
        with self.changed:
            self.in_flight -= 1
            self.warming -= job.warm
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
    """Builds, slices, memory admission and supervisors of a local run. `hand_off`: a variant that crashed or hung
    goes back to the front of the queue, for any slot (False: its slice runs it after the others). `watch(gpu)`
    makes each GPU's `StallWatch`, whose stalls lengthen the supervisors' deadlines (None, the default: none)."""

    def __init__(self, jobs: list[Job], gpus: int, workers_per_gpu: int, job_size: int, recorder: Recorder,
                 result: RunResult, supervise: dict, hand_off: bool = True,
                 watch: Callable[[int], StallWatch] | None = None):
        import torch

        self.slots = gpus * workers_per_gpu
        self.jobs = [replace(job, cpu_threads=max(1, usable_cpus() // self.slots)) for job in jobs]
        self.gpus = gpus
        self.recorder = recorder
        self.result = result
        self.supervise = supervise
        self.hand_off = hand_off
        self.watch = watch
        self.stop = threading.Event()
        self.work = WorkQueue(self.slots, job_size)
        self.lock = threading.Lock()
        from oracleaudit.execution.admission import WORKER_OVERHEAD_BYTES, GpuMemory

        self.overhead = WORKER_OVERHEAD_BYTES
        self.memory = [GpuMemory(torch.cuda.get_device_properties(i).total_memory, workers_per_gpu)
                       for i in range(gpus)]
        self.estimates: dict[str, int] = {}  # problem → bytes a slice of it needs
        self.first_slice: float | None = None
        self.last_slice: float = 0.0

    def run(self, stop_after_s: float | None = None) -> None:
        started = time.perf_counter()
        mark("run", jobs=len(self.jobs), slots=self.slots)
        if stop_after_s is not None:
            timer = threading.Timer(stop_after_s, self._time_up)
            timer.daemon = True
            timer.start()
        feeder = threading.Thread(target=self._feed, args=(started,), daemon=True)
        feeder.start()
        hand_off = (lambda job: self.work.put(job, first=True)) if self.hand_off else None
        watches = [self.watch(gpu).start() for gpu in range(self.gpus)] if self.watch is not None else []
        teardowns = [Teardowns() for _ in range(self.gpus)]
        supervisors = [Supervisor(slot % self.gpus, self.recorder, stop=self.stop, hand_off=hand_off,
                                  stalled=watches[slot % self.gpus].stalled if watches else None,
                                  teardowns=teardowns[slot % self.gpus], **self.supervise)
                       for slot in range(self.slots)]
        try:
            self._supervise(supervisors)
        finally:
            self.result.gpu_stalled_s = sum(watch.stalled() for watch in watches)
            for watch in watches:
                watch.close()

    def _supervise(self, supervisors: list[Supervisor]) -> None:
        from joblib import Parallel, delayed

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
            mark("job_built", problem=job.problem, seconds=round(seconds, 3), built=built)
            with self.lock:
                self.result.build_s += seconds
                self.result.build_wall_s = time.perf_counter() - started
            self.work.put(job, divisible=built, planned=True)

        queued: set[str] = set()
        self.work.expect(sum(variants_to_run(job) for job in self.jobs))
        self.work.put_warm(warm_jobs(sorted(self.jobs, key=lambda job: -variants_to_run(job))))
        try:
            prebuild_in_order(self.jobs, lambda j, s, b: (queued.add(j.solution), ready(j, s, b)), self.stop)
        except Exception:  # no process pool (e.g. out of memory): the workers build the rest themselves
            for job in self.jobs:
                if job.solution not in queued:
                    self.work.put(job, planned=True)
        finally:
            self.work.fed()

    def _drive(self, supervisor: Supervisor, utilization: Utilization) -> None:
        memory = self.memory[supervisor.gpu]
        try:
            while not self.stop.is_set():
                waiting = time.perf_counter()
                job = self.work.take(self.stop)
                if job is None:  # the slot waited for the last slices of the others: idle too
                    self._idle(time.perf_counter() - waiting)
                    return
                need = self.estimates.get(job.problem)
                lease = memory.acquire(need, exclusive=job.exclusive, stop=self.stop.is_set)
                self._idle(time.perf_counter() - waiting)
                if lease is None:
                    self.work.finished(job, None)
                    return
                slice_ = not job.warm  # a warm-up job is part of the build's wait, not of the execution
                utilization.slice(+slice_)
                if slice_:
                    self._slice_started()
                try:
                    outcome = supervisor.run(job, shared=lambda: lease.shared,
                                             on_memory=lambda peak: self._measured(job.problem, lease, peak))
                finally:
                    utilization.slice(-slice_)
                    lease.release()
                    if slice_:
                        self._slice_ended()
                with self.lock:
                    self.result.errors += outcome.errors
                    self.result.seconds.update(outcome.seconds)
                    self.result.hangs += outcome.hangs
                    self.result.crashes += outcome.crashes
                    self.result.replays += outcome.replays
                    self.result.handed_off += outcome.handed_off
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
