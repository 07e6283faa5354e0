"""Admission of GPU workers by memory: how many slices may run on one GPU at once.

Each slice a worker takes holds a `Lease` on its GPU's `GpuMemory` for the memory it is expected to need
at its peak: the peak its problem's original reached (the worker reports it after its first pair), plus a
fixed overhead per worker process (CUDA context, libraries, the spare worker's context); a problem not yet
measured is given an equal share of the GPU. A slice starts only when its lease fits beside the others
(or the GPU is otherwise idle), so `--workers-per-gpu` is an upper bound, not a promise. A lease that turns
out too small grows (the GPU may be overcommitted until the others end); an out-of-memory error in a slice
whose lease was ever `shared` is run again with an exclusive lease, which waits until the GPU is free and
keeps every other slice out.
"""

from __future__ import annotations

import threading
from typing import Callable

WORKER_OVERHEAD_BYTES = 2 << 30  # a worker's CUDA context and libraries, and its spare's context
USABLE_FRACTION = 0.9  # of the GPU's memory, for the workers together


class Lease:
    """Memory reserved on one GPU for one slice."""

    def __init__(self, ledger: "GpuMemory", need: int, exclusive: bool):
        self.ledger = ledger
        self.need = need
        self.exclusive = exclusive
        self.shared = False  # another lease was held at some time while this one was

    def grow(self, need: int) -> None:
        """Reserve `need` bytes in all if that is more (without waiting: the GPU may be overcommitted)."""
        with self.ledger.changed:
            if need > self.need:
                self.need = need
                self.ledger.changed.notify_all()

    def release(self) -> None:
        self.ledger.release(self)


class GpuMemory:
    """The leases of one GPU (thread-safe)."""

    def __init__(self, total_bytes: int, slots: int):
        self.capacity = int(total_bytes * USABLE_FRACTION)
        self.default_need = max(self.capacity // max(slots, 1), WORKER_OVERHEAD_BYTES)
        self.changed = threading.Condition()
        self.active: list[Lease] = []
        self.exclusive_waiting = 0

    def in_use(self) -> int:
        return sum(lease.need for lease in self.active)

    def acquire(self, need: int | None = None, exclusive: bool = False,
                stop: Callable[[], bool] = lambda: False) -> Lease | None:
        """Wait until a lease of `need` bytes (default: an equal share) fits, then take it; None if `stop()`
        became true while waiting. An exclusive lease waits until no other lease is held, and while it waits
        no new lease is given."""
        need = self.default_need if need is None else max(int(need), WORKER_OVERHEAD_BYTES)
        lease = Lease(self, need, exclusive)
        with self.changed:
            if exclusive:
                self.exclusive_waiting += 1
            try:
                while not self._fits(lease):
                    if stop():
                        return None
                    self.changed.wait(0.5)
            finally:
                if exclusive:
                    self.exclusive_waiting -= 1
            if self.active:
                lease.shared = True
                for other in self.active:
                    other.shared = True
            self.active.append(lease)
            return lease

    def _fits(self, lease: Lease) -> bool:
        if any(other.exclusive for other in self.active):
            return False
        if lease.exclusive:
            return not self.active
        if self.exclusive_waiting:
            return False
        return not self.active or self.in_use() + lease.need <= self.capacity

    def release(self, lease: Lease) -> None:
        with self.changed:
            if lease in self.active:
                self.active.remove(lease)
            self.changed.notify_all()
