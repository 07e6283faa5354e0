"""Supervision of the GPU worker processes of one slot: deadlines, crashes, restarts, and what is recorded
for pairs the worker could not observe.

A `Supervisor` drives one worker process at a time through jobs (protocol.py). Per (variant, input) pair the
worker says `Started`, then sends `Rows`; the supervisor records them and turns everything else into rows
of its own:
- a mutant's pair past its deadline (`timeout_floor_s + timeout_factor ×` the original's time on that input; the
  original's is `ORIGINAL_TIMEOUT_S`) has its worker killed, the pair recorded as Timeout and the variant's other
  inputs still to observe as *inferred* Timeout rows. A worker held up by the whole GPU is not the variant's hang:
  with a stall watch the deadline is later by the seconds the GPU stalled during the pair (`stalled()`: stalls.py;
  by at most the deadline's length plus the seconds another worker of the GPU was being killed meanwhile, and not
  for a variant that crashed or hung before: `_extended`); without one
  a pair past its deadline is waited for in place to `RETRY_DEADLINE_FACTOR` times it. (Killed at the first
  deadline and run again, a hang cost two kills, and while the driver tears a hung worker down (1.3-3.4 s,
  median) pairs start at 0.2-0.6 of the run's rate: bench/results/restart_cost.json);
- a pair whose worker dies (a sticky CUDA error ends the CUDA context, so the worker reports `Fatal` and
  exits; or the process just dies) is recorded as RuntimeError and the job continues in a fresh worker on
  the remaining pairs, so a crash on one input leaves no hole on the others. After more than `max_crashes`
  such crashes of one variant its remaining inputs are recorded as inferred RuntimeError rows;
- after a variant's crash or hang, its inputs whose every drawing oracle has seen it fail are inferred rows
  (no verdict can change: ledger.py);
- other inputs of the job's `cover` (one input of each oracle the run serves, at each shape) are never inferred:
  a variant past its crashes, or one that hung, is still observed on them, so that each oracle observes it
  at least once (a hung variant's cover input that misses its deadline is a Timeout at once, not waited for,
  and its deadline there has the floor `HUNG_TIMEOUT_FLOOR_S`: the cover inputs of the 20 hung variants of
  shards 3-5 of the complete run cost 17.6% of the slots' time at the full floor);
- a pair whose rows say OOM while another worker held memory on the same GPU (`shared()`) is not recorded: it
  is handed back in `SliceResult.alone`, to run again with the GPU to itself, where an OOM is the variant's own.
Inferred rows carry `inferred = True`; scoring treats them as unobserved. A warm-up job (`Job.warm`: inputs and
references into the cache while the builds run) records nothing; its failure is no error (its slices report it).

A variant may keep state across inputs in its process (a static output buffer returned again, a call count);
its row on an input is what it returns after its earlier inputs ran in the same process. When a worker dies
for another variant's fault (a crash, or a hang that had it killed), the fresh worker first runs each variant's
inputs recorded since its own last crash again, unrecorded (`Job.replay`), so that state does not depend on
which other variants shared the process. A variant's own crash gives it a fresh process, as it would alone;
a replay that crashes or hangs drops that variant's replay and the job goes on. A variant that crashed or
hung is deferred: its remaining inputs run in a job of its own, so that its next crashes (it usually crashes
again) cost no replay of the others, whose history grows with every input. Given `hand_off`, that job goes
back to the run's queue at once, with what the supervisor knew of the variant (`Job.faults`, the original's
times), for any slot to take; else (or when it is the slice's last variant) it runs here after the others'
(where they were a slice's tail: in shards 3-5 the slots were idle 20% of the time).

A fresh worker is forked from a server that has torch imported (`worker_context`) and still pays CUDA's start,
which the driver serialises with the teardown of dying workers' contexts (0.5-12 s each under load: a new
worker's `set_device` waited 8-17 s, median, restart_cost.json). So from a slot's first restart on it keeps
`SPARES` workers started ahead; three, or reaping killed workers off the slot's thread, gained nothing.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from oracleaudit.execution.ledger import Ledger, failure_row, untimed
from oracleaudit.execution.observation import first_line
from oracleaudit.execution.protocol import Built, Done, Failed, Fatal, Job, Memory, Ready, Rows, Started
from oracleaudit.execution.stalls import Teardowns
from oracleaudit.execution.trace import mark
from oracleaudit.status import ORIGINAL, REFERENCE, Status

BUILD_TIMEOUT_S = 3600.0
ORIGINAL_TIMEOUT_S = 600.0
# A mutant's deadline on an input is TIMEOUT_FLOOR_S + factor × the original's time on it. Hangs are loops
# that never end (1 mutant in 100 of the bundle), and each costs its slot the whole deadline: the floor only
# has to absorb the noise of a pair that takes milliseconds, also with other workers sharing the GPU.
TIMEOUT_FLOOR_S = 5.0
# The floor on the cover inputs of a variant that hung already (at most TIMEOUT_FLOOR_S): its kernel spins until
# then, slowing every other worker (kill_cost.json; pairs started 17% slower beside one: trace_rates_fresh3.json).
# The 45 variants that hung in the complete bundled run had 22 pairs that did not hang, of at most 0.59 ms each.
HUNG_TIMEOUT_FLOOR_S = 0.5
RETRY_DEADLINE_FACTOR = 2.0  # a pair past its deadline is waited for until this many times it
SPARES = 1  # workers kept started ahead, from a slot's first restart on
MAX_CRASHES = 3  # sticky crashes of one variant before its remaining inputs are inferred
POLL_S = 0.5  # how often a waiting supervisor looks at the stop event
REAP_S = 30.0  # how long a killed worker is waited for
WORKER_PRELOAD = ("torch", "torch.utils.cpp_extension", "numpy", "oracleaudit.execution.worker",
                  "oracleaudit.execution.build", "oracleaudit.execution.measure")


_CONTEXT_LOCK = threading.Lock()
_CONTEXT: list = []  # the start method's context, once chosen


def worker_context():
    """The multiprocessing context workers start from, chosen once per process.

    Where it works, workers are forked from a server process that has imported torch and the worker module
    but never touched CUDA: a fresh worker then costs a fork and a CUDA context instead of a Python start and
    a torch import, which is what a crash or a hang used to cost on top of the lost pair. A forked child can
    use CUDA only if nothing in the server initialised it, so a probe child first tries; where it cannot (or
    forkserver does not exist), workers are spawned, as a one-line note says."""
    with _CONTEXT_LOCK:
        if not _CONTEXT:
            _CONTEXT.append(_choose_context())
        return _CONTEXT[0]


def _probe(conn) -> None:
    """Say whether this process can use CUDA (True, or why not): forked from the workers' server, a probe."""
    try:
        import torch

        torch.zeros(1, device="cuda")
        conn.send(True)
    except Exception as err:
        conn.send(f"{type(err).__name__}: {first_line(err)}")


def _choose_context():
    import sys

    spawn = multiprocessing.get_context("spawn")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return spawn
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    answer = "no answer within 120 s"
    try:
        parent, child = context.Pipe()
        saved = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # the server starts now: device queries by NVML
        try:
            probe = context.Process(target=_probe, args=(child,), daemon=True)
            probe.start()
        finally:
            if saved is None:
                os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
            else:
                os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved
        child.close()
        if parent.poll(120):
            answer = parent.recv()
        probe.join(30)
    except Exception as err:  # no fork server on this system
        answer = f"{type(err).__name__}: {err}"
    if answer is True:
        return context
    print(f"oracleaudit: workers are spawned, not forked (a forked worker could not use CUDA: {answer})",
          file=sys.stderr)
    return spawn


class WorkerProcess:
    """A worker subprocess (worker.main) and the parent's end of its pipe."""

    def __init__(self, gpu: int):
        from oracleaudit.execution import worker

        context = worker_context()
        self.conn, child = context.Pipe()
        # The environment and folder as they are now: a fork server keeps those it started with.
        self.process = context.Process(target=worker.main, args=(child, f"cuda:{gpu}", dict(os.environ),
                                                                 os.getcwd()), daemon=True)
        self.process.start()
        child.close()
        mark("start", child=self.process.pid)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def send(self, message: Any) -> None:
        self.conn.send(message)

    def poll(self, timeout: float) -> bool:
        return self.conn.poll(timeout)

    def recv(self) -> Any:
        return self.conn.recv()

    @property
    def exitcode(self) -> int | None:
        return self.process.exitcode

    def kill(self) -> None:
        mark("kill", child=self.process.pid)
        self.process.kill()
        self.process.join(timeout=REAP_S)
        mark("reaped", child=self.process.pid)

    def close(self) -> None:
        """Ask the worker to exit; kill it if it does not within `REAP_S`."""
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=REAP_S)
        if self.process.is_alive():
            self.kill()


@dataclass
class SliceResult:
    errors: list[str] = field(default_factory=list)
    alone: Job | None = None  # pairs to run again with the GPU to itself
    pairs: int = 0  # pairs recorded (observed or inferred)
    seconds: Counter = field(default_factory=Counter)  # seconds by phase: the worker's, startup, hung
    peak_bytes: int = 0
    hangs: int = 0  # pairs that missed their deadline
    crashes: int = 0  # pairs whose worker died (a sticky CUDA error or otherwise)
    replays: int = 0  # pairs a fresh worker ran again, unrecorded (Job.replay)
    handed_off: int = 0  # variants handed to the run's queue after a crash or a hang


class Supervisor:
    """Drives one worker process on one GPU through jobs, restarting it after a crash or a timeout.

    `start(gpu)` makes a worker (default: a `WorkerProcess`); `on_rows(variant, rows)` records rows;
    `on_ready(total_bytes)` learns the GPU's memory from a worker's `Ready`; `hand_off(job)` queues the job of a
    variant that crashed or hung for any slot (None: it runs in this slice, after the others). `spares`: workers
    kept started ahead from the first restart on (0: each made at its fault). `stalled()`: the seconds the GPU
    has stalled so far (`stalls.StallWatch.stalled`; none: a pair past its first deadline is waited for to twice
    it); `teardowns` the kills of the GPU's workers (`stalls.Teardowns`, shared by its slots). `hung_floor_s` (at
    most `timeout_floor_s`) and `spares` are there to measure their gains (bench/fault_tail.py, restart_cost.py)."""

    def __init__(self, gpu: int, on_rows: Callable[[str, list[dict]], None], timeout_factor: float = 10.0,
                 timeout_floor_s: float = TIMEOUT_FLOOR_S, stop: threading.Event | None = None,
                 max_crashes: int = MAX_CRASHES, start: Callable[[int], Any] = WorkerProcess,
                 on_ready: Callable[[int], None] | None = None, hand_off: Callable[[Job], None] | None = None,
                 hung_floor_s: float = HUNG_TIMEOUT_FLOOR_S, spares: int = SPARES,
                 stalled: Callable[[], float] | None = None, teardowns: Teardowns | None = None):
        self.gpu = gpu
        self.on_rows = on_rows
        self.timeout_factor = timeout_factor
        self.timeout_floor_s = timeout_floor_s
        self.stop = stop or threading.Event()
        self.max_crashes = max_crashes
        self.start = start
        self.on_ready = on_ready
        self.hand_off = hand_off
        self.hung_floor_s = min(hung_floor_s, timeout_floor_s)
        self.spares_ahead = spares
        self.stalled = stalled or (lambda: 0.0)
        self.waits = stalled is None  # no stall watch: a pair past its first deadline is waited for to twice it
        self.teardowns = teardowns or Teardowns()
        self.worker = None
        self.spares: list = []  # workers started ahead, the oldest first
        self.restarts = 0

    # ---- workers ---------------------------------------------------------------------------------------

    def _worker(self):
        if self.worker is None:
            if self.spares:
                self.worker = self.spares.pop(0)
                self._top_up(self.spares_ahead)  # the next restarts' workers, up meanwhile
            else:
                self.worker = self.start(self.gpu)
        return self.worker

    def _top_up(self, count: int) -> None:
        while len(self.spares) < count and not self.stop.is_set():
            self.spares.append(self.start(self.gpu))

    def _discard(self) -> None:
        """Kill the current worker and have a spare started for the next one (`spares` of them)."""
        if self.worker is not None:
            with self.teardowns.during():
                self.worker.kill()
            self.worker = None
        if self.stop.is_set():
            return
        self.restarts += 1
        self._top_up(max(1, self.spares_ahead))

    def close(self) -> None:
        for worker in (self.worker, *self.spares):
            if worker is not None:
                worker.close()
        self.worker = None
        self.spares = []

    def interrupt(self) -> None:
        """From another thread: kill the worker now; the supervising thread sees it die and, with `stop` set,
        records nothing and returns."""
        worker = self.worker
        if worker is not None:
            worker.kill()

    # ---- one job ---------------------------------------------------------------------------------------

    def run(self, job: Job, shared: Callable[[], bool] = lambda: False,
            on_memory: Callable[[int], None] | None = None) -> SliceResult:
        """Observe every pair of `job` (recording rows through `on_rows`), restarting workers as needed.
        `shared()` says whether another worker held memory on this GPU since the job began."""
        job = replace(job, device=f"cuda:{self.gpu}")
        if job.warm:
            return self._warm(job)
        state = Ledger(job)
        result = SliceResult()
        retried = False
        while state.remaining() and not self.stop.is_set():
            worker = self._worker()
            sent = state.next_job()
            mark("send", child=getattr(worker, "pid", None), variants=len(sent.work), faults=len(sent.faults))
            worker.send(sent)
            ended = self._drive(worker, state, result, shared, on_memory)
            if ended == "done":
                break
            if ended in ("next", "restart"):
                self._hand_off(state, result)
            if ended == "next":  # deferred variants are left: the same worker takes them
                continue
            if ended == "retry" and not retried:  # the job may have failed only because of a dead context
                retried = True
                continue
            if ended in ("failed", "retry"):
                if state.error is not None:
                    result.errors.append(state.error)
                break
            # "restart": a fresh worker continues with what is left
        if state.alone:
            result.alone = replace(job, work=tuple((v, tuple(i)) for v, i in state.alone.items()),
                                   record_references=(), time_original=untimed(job, state.alone, {}),
                                   exclusive=True)
        return result

    def _warm(self, job: Job) -> SliceResult:
        """Drive a warm-up job (`Job.warm`). Its seconds count; a failure is no one's outcome (its slices report
        it); a worker that died, failed with a dead context or outlived `ORIGINAL_TIMEOUT_S` is replaced."""
        result = SliceResult()
        worker = self._worker()
        sent = time.monotonic()
        mark("send", child=getattr(worker, "pid", None), variants=0, faults=0)
        worker.send(job)
        while not self.stop.is_set() and (remaining := sent + ORIGINAL_TIMEOUT_S - time.monotonic()) > 0:
            if not worker.poll(min(POLL_S, remaining)):
                continue
            try:
                message = worker.recv()
            except (EOFError, OSError):
                break
            if isinstance(message, Ready) and self.on_ready is not None:
                self.on_ready(message.total_bytes)
            elif isinstance(message, Built):
                result.seconds["startup"] += max(0.0, time.monotonic() - sent - message.seconds)
            elif isinstance(message, Done):
                result.seconds.update(message.seconds)
                return result
            elif isinstance(message, Failed):
                if message.context_alive:
                    return result
                break
        self._discard()
        return result

    def _hand_off(self, state: Ledger, result: SliceResult) -> None:
        """Queue each deferred variant as a job of its own, unless it is the last variant left here."""
        if self.hand_off is None or self.stop.is_set():
            return
        for variant in sorted(state.deferred):
            if variant in state.work and len(state.work) > 1:
                self.hand_off(state.split_off(variant))
                result.handed_off += 1

    def _drive(self, worker, state: Ledger, result: SliceResult, shared, on_memory) -> str:
        """Handle one worker's messages until the job ends ("done"; "failed"; "retry": failed, but worth one
        more try in a fresh worker) or the worker has to be replaced ("restart")."""
        job = state.job
        sent = time.monotonic()
        deadline = sent + BUILD_TIMEOUT_S
        state.current, state.replaying = None, False
        while True:
            if self.stop.is_set():
                self._discard()
                return "failed"
            remaining = deadline - time.monotonic()
            if remaining <= 0 and state.current is not None:
                extended = self._extended(state)  # the GPU stalled for everyone meanwhile: no part of the pair's time
                if extended > time.monotonic():
                    deadline = extended
                    continue
            if remaining <= 0 and self._wait_longer(state, result):
                deadline = state.started + self._limit(state, *state.current)
                continue
            if remaining <= 0:
                return self._timed_out(state, result, deadline)
            if not worker.poll(min(POLL_S, remaining)):
                continue
            try:
                message = worker.recv()
            except (EOFError, OSError):
                return self._died(state, result, worker.exitcode)
            now = time.monotonic()
            if isinstance(message, Ready):
                if self.on_ready is not None:
                    self.on_ready(message.total_bytes)
            elif isinstance(message, Built):
                mark("built", child=getattr(worker, "pid", None))
                result.seconds["build_load"] += message.seconds
                result.seconds["startup"] += max(0.0, now - sent - message.seconds)  # process, torch, CUDA
                deadline = now + ORIGINAL_TIMEOUT_S
            elif isinstance(message, Started):
                state.current, state.started = (message.variant, message.input), now
                state.stalled_at = self.stalled()
                state.replaying = message.replay
                result.replays += message.replay
                deadline = now + self._limit(state, message.variant, message.input)
            elif isinstance(message, Rows):
                result.seconds.update(message.seconds)  # reported pair by pair: a crash loses only its pair's
                self._rows(state, result, message, now, shared)
                if message.variant != REFERENCE:  # reference rows may come while a pair runs
                    state.current = None
                    deadline = now + ORIGINAL_TIMEOUT_S
            elif isinstance(message, Memory):
                result.peak_bytes = max(result.peak_bytes, message.peak_bytes)
                if on_memory is not None:
                    on_memory(message.peak_bytes)
            elif isinstance(message, Fatal):
                mark("fatal", child=getattr(worker, "pid", None))
                if state.replaying:
                    self._discard()
                    return self._replay_failed(state)
                state.defer(message.variant)
                state.crashes[message.variant] += 1
                result.crashes += 1
                self._decided(state, result, message.variant, message.input, Status.RUNTIME_ERROR)
                self._cap_crashes(state, result, message.variant, message.input)
                self._discard()
                return "restart"
            elif isinstance(message, Failed):
                return self._failed(state, result, message, shared)
            elif isinstance(message, Done):
                result.seconds.update(message.seconds)  # a Counter: a slice's jobs add up
                result.peak_bytes = max(result.peak_bytes, message.peak_bytes)
                left = sum(len(i) for v, i in state.work.items() if v in state.sent)
                if left:
                    result.errors.append(f"{job.solution}: the worker finished with {left} (variant, input) pairs "
                                         "not observed")
                    return "done"
                return "next" if state.work else "done"

    def _limit(self, state: Ledger, variant: str, key: str) -> float:
        if variant == ORIGINAL or not state.original_s:
            return ORIGINAL_TIMEOUT_S
        original = state.original_s.get(key, max(state.original_s.values()))
        floor = self.hung_floor_s if variant in state.hung else self.timeout_floor_s
        limit = floor + self.timeout_factor * original
        return limit * RETRY_DEADLINE_FACTOR if (variant, key) in state.missed else limit

    def _rows(self, state: Ledger, result: SliceResult, message: Rows, now: float, shared) -> None:
        variant, key = message.variant, message.input
        if variant == ORIGINAL and state.current == (ORIGINAL, key):
            state.original_s[key] = now - state.started
        if variant == REFERENCE:
            if key in state.references:
                state.references.discard(key)
                self.on_rows(REFERENCE, list(message.rows))
            return
        if not state.owed(variant, key):
            return  # the original run only to time it, or a pair already recorded
        state.take(variant, key)
        if any(r.get("status") == Status.OOM for r in message.rows) and not state.job.exclusive and shared():
            state.alone.setdefault(variant, []).append(key)
            return
        self.on_rows(variant, list(message.rows))
        state.history.setdefault(variant, []).append(key)
        result.pairs += 1

    def _replay_failed(self, state: Ledger) -> str:
        """A replay (a pair recorded before, run again) crashed or hung: the variant goes on without it (the
        worker is discarded already)."""
        state.forget(state.current[0])
        return "restart"

    def _record_inferred(self, state: Ledger, result: SliceResult, variant: str, status: str, error_class: str,
                         message: str) -> None:
        """Record the variant's inputs still to observe as inferred rows (not observed), except those of the
        job's cover: they stay to observe."""
        inputs = state.work.pop(variant, [])
        kept = [key for key in inputs if key in state.job.cover]
        if kept:
            state.work[variant] = kept
        for key in (key for key in inputs if key not in state.job.cover):
            self.on_rows(variant, [failure_row(state.job, variant, key, status, error_class, message, inferred=True)])
            result.pairs += 1

    def _decided(self, state: Ledger, result: SliceResult, variant: str, key: str, status: str) -> None:
        """After the variant's crash or hang on `key`: its inputs whose every drawing oracle has seen it fail
        are recorded as inferred rows (ledger.py)."""
        what = "hung" if status == Status.TIMEOUT else "crashed"
        for other in state.fail(variant, key, status):
            self.on_rows(variant, [failure_row(state.job, variant, other, status, "NotRun",
                                               f"not run: every oracle that draws this input saw the variant fail "
                                               f"already (it {what} on {key})", inferred=True)])
            result.pairs += 1

    def _cap_crashes(self, state: Ledger, result: SliceResult, variant: str, key: str) -> None:
        if self.max_crashes and state.crashes[variant] > self.max_crashes:
            self._record_inferred(state, result, variant, Status.RUNTIME_ERROR, "NotRun",
                                  f"not run: the variant crashed the CUDA context on {state.crashes[variant]} "
                                  f"inputs (last {key}); more than --max-crashes {self.max_crashes}")

    def _extended(self, state: Ledger) -> float:
        """The running pair's deadline, later by the seconds the whole GPU stalled since it started (stalls.py): by
        at most its length plus the seconds another worker of the GPU was being killed meanwhile (at most `REAP_S`;
        a teardown stood the GPU still for 11.9 s), not at all for a variant that crashed or hung before, whose
        kernel can stop the GPU until it is killed (a 13.8 s standstill ended 0.2 s after such a kill)."""
        variant, key = state.current
        limit = self._limit(state, variant, key)
        if state.faulted(variant):
            return state.started + limit
        others = min(REAP_S, self.teardowns.seconds_since(state.started))
        late = min(limit + others, self.stalled() - state.stalled_at)
        if late > 0:
            mark("stalled", variant=variant, input=key, seconds=round(late, 3))
        return state.started + limit + max(0.0, late)

    def _wait_longer(self, state: Ledger, result: SliceResult) -> bool:
        """Whether the pair running now, past its deadline, is waited for in place (to `RETRY_DEADLINE_FACTOR`
        times it): without a stall watch, a mutant's pair past its first deadline, not a replay, its variant not
        hung already."""
        variant, key = state.current or (ORIGINAL, "")
        if not self.waits or state.replaying or variant == ORIGINAL or not state.owed(variant, key) \
                or variant in state.hung or (variant, key) in state.missed:
            return False
        state.missed.add((variant, key))
        result.hangs += 1
        mark("wait", variant=variant, input=key)
        return True

    def _timed_out(self, state: Ledger, result: SliceResult, deadline: float) -> str:
        job = state.job
        current = state.current
        mark("timeout", child=getattr(self.worker, "pid", None), pair=current)
        self._discard()
        if current is None:
            state.error = f"{job.solution}: the worker gave no sign of progress outside any variant; killed"
            return "failed"
        variant, key = current
        result.seconds["hung"] += time.monotonic() - state.started
        if state.replaying:
            return self._replay_failed(state)
        result.hangs += 1
        waited = f"no result within {self._limit(state, variant, key):.0f} s"
        if not state.owed(variant, key):
            if variant == ORIGINAL:
                state.error = f"{job.solution}: the original timed out on {key} ({waited})"
                return "failed"
            return "restart"
        if variant in state.hung:
            waited += ", after it hung on another input"
        elif (variant, key) in state.missed:
            waited += ", waited for after missing the first deadline"
        state.take(variant, key)
        state.hung.add(variant)
        state.defer(variant)  # its own hang ended its process: a fresh state from here, as after a crash
        self.on_rows(variant, [failure_row(job, variant, key, Status.TIMEOUT, "TimeoutError", waited)])
        result.pairs += 1
        self._decided(state, result, variant, key, Status.TIMEOUT)
        self._record_inferred(state, result, variant, Status.TIMEOUT, "TimeoutError",
                              f"not run: the variant hung on {key} ({waited})")
        return "restart"

    def _died(self, state: Ledger, result: SliceResult, exitcode: int | None) -> str:
        job = state.job
        current = state.current
        self._discard()
        if self.stop.is_set():
            return "failed"
        if current is None:
            state.error = f"{job.solution}: the worker died (exit code {exitcode}) outside any variant"
            return "retry"
        if state.replaying:
            return self._replay_failed(state)
        variant, key = current
        result.crashes += 1
        if not state.owed(variant, key):
            if variant == ORIGINAL:
                state.error = f"{job.solution}: the worker died running the original on {key}"
                return "failed"
            return "restart"
        state.crashes[variant] += 1
        state.defer(variant)
        state.take(variant, key)
        self.on_rows(variant, [failure_row(job, variant, key, Status.RUNTIME_ERROR, "WorkerDied",
                                           f"the worker process died (exit code {exitcode})")])
        result.pairs += 1
        self._decided(state, result, variant, key, Status.RUNTIME_ERROR)
        self._cap_crashes(state, result, variant, key)
        return "restart"

    def _failed(self, state: Ledger, result: SliceResult, message: Failed, shared) -> str:
        job = state.job
        if not message.context_alive:
            self._discard()
        if message.out_of_memory and not job.exclusive and shared():
            for variant, inputs in state.work.items():  # everything left, with the GPU to itself
                state.alone.setdefault(variant, []).extend(inputs)
            state.work.clear()
            state.references.clear()
            return "failed"
        state.error = f"{job.solution}: {message.message}"
        return "retry" if not message.context_alive else "failed"
