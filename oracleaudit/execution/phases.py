"""Where a worker's time goes: seconds by phase (load, references, execution, evidence, replay, other),
handed to the supervisor pair by pair (protocol.py's Rows and Done; recorder.PHASES)."""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Iterator

__all__ = ["PROFILE_ENV", "PhaseClock", "profiled"]

PROFILE_ENV = "ORACLEAUDIT_PROFILE"  # a folder: each job of a worker writes its cProfile statistics there


class PhaseClock:
    """Seconds spent by phase since they were last handed out (`take`): the worker reports them with each
    pair's rows, so a worker that dies has reported all but its last pair's (before, only at a job's end: a
    crash or a stopped run lost the whole job's seconds)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.since = time.perf_counter()
        self.open = 0  # phases being timed now

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1
            self.seconds[phase] += time.perf_counter() - started

    @contextlib.contextmanager
    def instead(self, phase: str) -> Iterator[None]:
        """Count the block's whole time as `phase`, whatever phases it times inside."""
        before, started = dict(self.seconds), time.perf_counter()
        try:
            yield
        finally:
            self.seconds.clear()
            self.seconds.update(before)
            self.seconds[phase] += time.perf_counter() - started

    def take(self) -> dict[str, float]:
        """The seconds by phase since the last take, `other` the rest of the wall time (Python, messages),
        and count again from now; nothing while a phase is being timed (its time goes to the next take)."""
        if self.open:
            return {}
        now = time.perf_counter()
        taken = {name: value for name, value in self.seconds.items() if value}
        taken["other"] = max(0.0, now - self.since - sum(taken.values()))
        self.seconds.clear()
        self.since = now
        return taken


@contextlib.contextmanager
def profiled() -> Iterator[None]:
    """The block under cProfile, its statistics written to a file of its own in the folder `PROFILE_ENV` names
    (nothing where it is not set)."""
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        yield
        return
    import cProfile

    Path(folder).mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        profiler.dump_stats(Path(folder) / f"{os.getpid()}-{time.monotonic_ns()}.prof")
