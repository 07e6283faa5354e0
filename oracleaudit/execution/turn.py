"""The GPU turn: the workers sharing one GPU take turns at submitting a pair's GPU work, one at a time.

Why: every worker has a CUDA context of its own (one process each, so that a mutant's fatal fault ends only its
own worker), and the GPU time-slices between contexts that have work queued. A pair's work is ~60 small kernels
and copies launched from Python with the host's work in between, so with eight workers the GPU switched contexts
all the time: it read 78-84% busy while the pairs' own kernels and copies filled ~15% of it (`bench/
timeslice_cost.py`, `bench/pair_cost.py`). With a turn, the holder's queue is the only one with work, and the
others do their host work (the hull, rows, messages, the next input) meanwhile.

The turn is an exclusive `flock` on a file named by the GPU's UUID in the machine's temporary folder, so every
worker on the machine (of any run) shares it and the kernel releases it when its holder dies. A holder keeps it
for at most `LEASE_S`: a pair that takes longer (a slow or hung mutant) goes on without it, time-sliced with the
others as before, so a hang stalls the other workers for one lease, not for its deadline. `TURN_ENV=0` turns
the turns off (the benchmarks' side-by-side runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

__all__ = ["LEASE_S", "TURN_ENV", "GpuTurn", "turn_for"]

LEASE_S = 0.05  # the most a holder keeps the turn (a bundled pair's GPU work takes ~1 ms; hangs cost this each)
TURN_ENV = "ORACLEAUDIT_GPU_TURN"  # "0": no turns


class GpuTurn:
    """Turns on one GPU among the processes of this machine (see the module docstring). `take` blocks until
    this process has the turn; `release` gives it back (a no-op without it); a watcher thread gives it back
    `lease_s` after it was taken. Seconds waited and leases that ran out are counted."""

    def __init__(self, path: Path | None, lease_s: float = LEASE_S):
        self.path = path
        self.lease_s = lease_s
        self.waited_s = 0.0
        self.expired = 0
        self._fd = None if path is None else os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._state = threading.Condition()
        self._holding = False
        self._until = 0.0
        if self._fd is not None:
            threading.Thread(target=self._watch, name="gpu-turn-lease", daemon=True).start()

    @property
    def enabled(self) -> bool:
        return self._fd is not None

    def take(self) -> None:
        if self._fd is None:
            return
        started = time.perf_counter()
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        with self._state:
            self._holding = True
            self._until = time.monotonic() + self.lease_s
            self._state.notify()
        self.waited_s += time.perf_counter() - started

    def release(self) -> None:
        with self._state:
            self._give_back()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.take()
        try:
            yield
        finally:
            self.release()

    def _give_back(self) -> None:  # with self._state held
        if self._holding:
            self._holding = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _watch(self) -> None:
        with self._state:
            while True:
                if not self._holding:
                    self._state.wait()
                    continue
                left = self._until - time.monotonic()
                if left > 0:
                    self._state.wait(left)
                    continue
                self.expired += 1
                self._give_back()


_turns: dict[str, GpuTurn] = {}


def turn_for(device: str) -> GpuTurn:
    """This process's turn object for a CUDA `device` (made once per device); a disabled one for a device that
    is not CUDA, with `TURN_ENV=0`, or where the lock file cannot be opened (said on stderr)."""
    import torch

    if device not in _turns:
        path = None
        dev = torch.device(device)
        if dev.type == "cuda" and os.environ.get(TURN_ENV) != "0":
            index = dev.index if dev.index is not None else torch.cuda.current_device()
            name = getattr(torch.cuda.get_device_properties(index), "uuid", None) or f"index-{index}"
            path = Path(tempfile.gettempdir()) / f"oracleaudit-gpu-turn-{name}.lock"
        try:
            _turns[device] = GpuTurn(path)
        except OSError as err:
            print(f"oracleaudit worker: no GPU turns ({path}: {err.strerror})", file=sys.stderr)
            _turns[device] = GpuTurn(None)
    return _turns[device]
