"""Stalls of a whole GPU, measured so that no pair is timed out for one.

A faulting kernel can stop every process on the GPU for seconds. In a traced shard of the bundled run
(bench/results/trace_fresh3_warm.tgz) no pair started anywhere for 2-14 s eight times, and each standstill ended
within 0.6 s of a worker's `Fatal` or of the kill of a timed-out worker. In the longest nothing else moved either
(new workers' CUDA start, model construction); five healthy variants in flight passed twice their deadline and
were recorded as hung, their other inputs inferred Timeout (168 rows that earlier runs had observed Ok); it ended
0.2 s after the kill of a pair of a variant that had faulted before.

A `StallWatch` keeps a probe process on its GPU that runs a one-element kernel every `PERIOD_S` and waits for it:
the time a probe takes beyond `GRACE_S` is stalled time. A hung kernel beside it is no stall (time-slicing gives
the probe its turn within milliseconds); a frozen GPU or driver is. `stalled()` is the stalled seconds so far, a
probe late right now counting up to this moment; the supervisor adds what accrued during a pair to its deadline,
by at most the deadline's length and not for a variant that faulted before (supervisor.py): a stall the pair
causes itself would otherwise push its own deadline away for as long as it lasts. Should the probe process die,
its stalls so far still count and nothing more accrues, so no deadline then grows for want of a probe. In a traced
run (trace.py) each late probe is a `gpu_stall` event. `oracleaudit run` starts the watch unless told
`--no-stall-watch`: on shard 3 of the bundled run, traced with it on an H100 (bench/results/trace_rates_watch3.json),
no healthy variant timed out, the standstills fell from 47.7 to 28.7 s and the seconds with a hung kernel spinning
from 341 to 197.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from oracleaudit.execution.trace import mark

__all__ = ["GRACE_S", "PERIOD_S", "StallWatch", "Teardowns"]

PERIOD_S = 0.05  # between the end of one probe and the start of the next
GRACE_S = 0.25  # a probe taking longer than this is stalled for the rest (it takes milliseconds, spinners or not)


def cuda_beat(gpu: int) -> Callable[[], None]:
    """One probe on CUDA device `gpu`: a one-element kernel, waited for."""
    import torch

    device = torch.device(f"cuda:{gpu}")
    torch.cuda.set_device(device)
    x = torch.zeros(1, device=device)

    def beat() -> None:
        x.add_(1)
        torch.cuda.synchronize(device)

    return beat


def _probe(make_beat: Callable[[int], Callable[[], None]], gpu: int, last_done: Any, stalled: Any,
           stop: Any, parent: int) -> None:
    """The probe process: beat, add each beat's time past GRACE_S to `stalled`, record when it ended; until
    `stop` is set or the run's process (`parent`) is gone (a killed run does not leave it on the GPU)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's
    beat = make_beat(gpu)
    beat()  # the context and the kernel are made before the first measured beat
    last_done.value = time.monotonic()
    while not stop.wait(PERIOD_S) and os.getppid() == parent:
        started = time.monotonic()
        beat()
        ended = time.monotonic()
        if ended - started > GRACE_S:
            stalled.value += ended - started - GRACE_S
            mark("gpu_stall", gpu=gpu, began=started, seconds=round(ended - started, 4))  # traced runs only
        last_done.value = ended


class StallWatch:
    """The stalls of one GPU, from a probe process (`start`, `stalled`, `close`; a context manager).
    `make_beat(gpu)` gives the probe (default: `cuda_beat`); `context` the multiprocessing context (spawn)."""

    def __init__(self, gpu: int, make_beat: Callable[[int], Callable[[], None]] = cuda_beat,
                 context: Any = None):
        context = context or multiprocessing.get_context("spawn")
        self.last_done = context.Value("d", 0.0, lock=False)  # one writer; readers take a float
        self.total = context.Value("d", 0.0, lock=False)
        self.stop = context.Event()
        self.process = context.Process(target=_probe, daemon=True, name=f"oracleaudit-stall-watch-{gpu}",
                                       args=(make_beat, gpu, self.last_done, self.total, self.stop, os.getpid()))

    def start(self) -> "StallWatch":
        self.process.start()
        return self

    def stalled(self) -> float:
        """Seconds the GPU has stalled since the probe began (0 before its first beat)."""
        last = self.last_done.value  # before the total: a beat ending in between is counted twice, not missed
        total = self.total.value
        if last == 0.0 or not self.process.is_alive():
            return total
        return total + max(0.0, time.monotonic() - last - PERIOD_S - GRACE_S)

    def close(self) -> None:
        self.stop.set()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)

    def __enter__(self) -> "StallWatch":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class Teardowns:
    """The kills of one GPU's workers, each from the kill to its reap (`during()`), shared by that GPU's supervisors.
    While the driver tears a worker down the whole GPU can stand still: in a traced shard an 18.7 s standstill
    ended with the reap of a hung worker killed 11.9 s before, and a healthy pair beside it (a 0.03 ms kernel)
    missed its deadline lengthened by the stall's capped part (bench/results/trace_rates_reland3.json)."""

    KEEP_S = 900.0  # a kill ended longer ago than this is forgotten (no pair runs that long)

    def __init__(self):
        self.lock = threading.Lock()
        self.spans: list[list[float]] = []  # [killed, reaped]; reaped is inf while the kill is in flight

    @contextmanager
    def during(self) -> Iterator[None]:
        now = time.monotonic()
        span = [now, math.inf]
        with self.lock:
            self.spans = [old for old in self.spans if old[1] > now - self.KEEP_S] + [span]
        try:
            yield
        finally:
            span[1] = time.monotonic()

    def seconds_since(self, since: float) -> float:
        """The seconds since `since` during which at least one kill was in flight (overlapping kills once)."""
        now = time.monotonic()
        with self.lock:
            spans = sorted((max(start, since), min(end, now)) for start, end in self.spans if end > since)
        total, reach = 0.0, since
        for start, end in spans:
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total
