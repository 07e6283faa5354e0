"""What a run records: rows committed to the evidence store by the `Recorder`, and the `RunResult` counts
and seconds by phase that `oracleaudit run` prints."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable

from oracleaudit.status import REFERENCE

__all__ = ["FLUSH_S", "PHASES", "Recorder", "RunResult"]

FLUSH_S = 2.0  # seconds between commits of buffered rows
PHASES = ("startup", "build_load", "load", "references", "execution", "evidence", "replay", "hung", "other")


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
    idle_s: float = 0.0  # slot seconds spent waiting for a built job, for GPU memory or for the run's end
    restarts: int = 0
    hangs: int = 0
    crashes: int = 0
    replays: int = 0  # pairs run again, unrecorded, after a restart (supervisor.py)
    handed_off: int = 0  # variants queued as jobs of their own after a crash or a hang (supervisor.py)
    exclusive_jobs: int = 0
    peak_bytes: dict[str, int] = field(default_factory=dict)  # per problem: the largest worker peak reported
    gpu_busy_fraction: float | None = None
    gpu_stalled_s: float = 0.0  # seconds the GPUs stalled for every process (stalls.py), summed over the GPUs
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
                "restarts": self.restarts, "hangs": self.hangs, "crashes": self.crashes, "replays": self.replays,
                "handed_off": self.handed_off, "exclusive_jobs": self.exclusive_jobs,
                "peak_gpu_bytes_by_problem": dict(sorted(self.peak_bytes.items())),
                "gpu_busy_fraction": None if self.gpu_busy_fraction is None else round(self.gpu_busy_fraction, 3),
                "gpu_stalled_s": round(self.gpu_stalled_s, 1),
                "execution_wall_s": round(self.execution_wall_s, 1), "wall_s": round(self.wall_s, 1),
                "stopped": self.stopped,
                "variants_per_min": round(self.variants / minutes, 1) if minutes > 0 else None}


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
