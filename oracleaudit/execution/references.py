"""The reference outputs of a problem on one pool input: the fp32 Model's (in the pool entry's math mode) and
its float64 copy's, computed once and cached on disk so that every slice, worker and later
run of the same problem and pool input reuses them.

Cache layout: `$ORACLEAUDIT_CACHE/references/<key>.pt` (torch.save of {"format", "ref32", "ref64"}, CPU
tensors), written under a temporary name and renamed into place, read memory-mapped. The key hashes
everything the references depend on: the problem file's bytes, the pool entry (key, distribution, shape
overrides and input shapes), the fp32 math mode, the GPU model, the torch and CUDA versions and `FORMAT`.
References larger than `MAX_CACHED_BYTES` are not written (each slice recomputes them: a 3-D convolution
at KernelBench's size has 1 GiB of fp32 and 2 GiB of fp64 output per input, which would fill a disk), nor
any that would leave less than `MIN_FREE_BYTES` free on the cache's disk (the bundled dataset's references
under the default pool are ~40 GB). A lock file per key makes concurrent workers compute a reference once.

Writing is the slow part (torch.save of ~10 MB took 0.13 s on the GPU machine, a third of a cold run's worker
time when it blocked the worker), so `compute_once` hands the file to a writer thread and goes on with the
references in memory; the key's lock passes to the writer, so another worker wanting the key waits for the
file rather than computing it again. A failed write is only a missed cache entry, never the job's failure.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import shutil
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from oracleaudit.cache import cache_root
from oracleaudit.files import write_with
from oracleaudit.tensors import tensor_bytes

REFERENCES_DIR = "references"
FORMAT = 1
MAX_CACHED_BYTES = 256 << 20
MIN_FREE_BYTES = 8 << 30  # never fill the cache's disk past this (builds and stores need it)

_writer: ThreadPoolExecutor | None = None
_pending: list[Future] = []


def _background() -> ThreadPoolExecutor:
    """This process's one writer thread (writes go one at a time: they share a disk)."""
    global _writer
    if _writer is None:
        _writer = ThreadPoolExecutor(1, thread_name_prefix="oracleaudit-reference-writer")
        atexit.register(flush)
    return _writer


def flush() -> None:
    """Wait until every reference handed to the writer thread is on disk (or failed)."""
    while _pending:
        _pending.pop().result()


def reference_key(problem_sha256: str, entry: Any, mode: dict[str, Any]) -> str:
    """The cache key of the references of one problem file on one resolved pool entry in one math mode."""
    import torch

    identity = {
        "format": FORMAT, "problem": problem_sha256, "entry": entry.key, "draw": entry.dist.describe(),
        "overrides": [list(x) for x in entry.overrides or ()],
        "input_shapes": [list(s) if s is not None else None for s in entry.input_shapes or ()],
        "mode": mode, "torch": torch.__version__, "cuda": torch.version.cuda,
    }
    if entry.derive != "outputs":  # keys made before the option stay valid
        identity["derive"] = entry.derive
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


class ReferenceCache:
    """Cached reference outputs on disk (see the module docstring); `root=None` disables the cache."""

    def __init__(self, root: Path | None = None, enabled: bool = True):
        self.root = (root or cache_root() / REFERENCES_DIR) if enabled else None

    def path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / f"{key}.pt"

    def load(self, key: str) -> tuple[list, list] | None:
        """(ref32, ref64) as CPU tensors, or None when not cached (or unreadable: computed again)."""
        import torch

        if self.root is None or not self.path(key).is_file():
            return None
        try:
            data = torch.load(self.path(key), map_location="cpu", mmap=True, weights_only=True)
        except Exception:  # a cache file from another torch, or damaged: computed again
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        return list(data["ref32"]), list(data["ref64"])

    def fits(self, ref32: list, ref64: list) -> bool:
        """Whether references of this size are written: at most `MAX_CACHED_BYTES`, leaving `MIN_FREE_BYTES`."""
        size = tensor_bytes(ref32) + tensor_bytes(ref64)
        if self.root is None or size > MAX_CACHED_BYTES:
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        return shutil.disk_usage(self.root).free - size >= MIN_FREE_BYTES

    def save(self, key: str, ref32: list, ref64: list) -> bool:
        """Write the references (CPU tensors) now if they `fit`; True if written."""
        import torch

        if not self.fits(ref32, ref64):
            return False
        data = {"format": FORMAT, "ref32": list(ref32), "ref64": list(ref64)}
        write_with(self.path(key), lambda tmp: torch.save(data, tmp))
        return True

    def compute_once(self, key: str, compute: Callable[[], tuple[list, list]]) -> tuple[list, list]:
        """The references of `key`: from the cache, else `compute()`d under the key's lock (workers wanting the
        same key wait and read the file) and handed to the writer thread, which releases the lock once the
        file is written."""
        cached = self.load(key)
        if cached is not None or self.root is None:
            return cached if cached is not None else compute()
        lock = self.root / "locks" / f"{key}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            cached = self.load(key)
            if cached is None:
                cached = compute()
                if self.fits(*cached):
                    _pending[:] = [f for f in _pending if not f.done()]
                    _pending.append(_background().submit(self._write_then_release, key, cached, handle))
                    handle = None
            return cached
        finally:
            if handle is not None:
                handle.close()

    def _write_then_release(self, key: str, references: tuple[list, list], handle) -> None:
        try:
            self.save(key, *references)
        except OSError as err:  # a full or read-only disk: only a missed cache entry
            print(f"oracleaudit worker: reference cache not written ({err})", file=sys.stderr)
        finally:
            handle.close()
