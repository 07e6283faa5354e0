"""The fused evidence kernels: `measure.measure`'s element-wise work on CUDA tensors in four kernels and
one transfer, instead of the ~150 small kernels and ~6 synchronisations of the torch version.

Several workers share one GPU, and a GPU time-slices between processes, so every kernel launch and every
host synchronisation of one worker waits on the others: the evidence was most of a worker's time
(bench/worker_cost.py). `data/evidence_kernels.cu` computes the counts, the grid histogram, the statistics
and the hull candidates (the points that beat every lower bin, see `measure._bin_filter`); the caller
finishes the hull from them (below). Counts, grid counts and hulls are bitwise those of the
torch version; the float statistics (sums, norms) are summed in another order, so they may differ in the
last bits (tests/execution/test_evidence_kernels.py).

Hull candidates: at most `first_pairs()` (FIRST_PAIRS, or 1 in FIRST_PAIRS_PER elements of a larger
comparison) come back with the result and are finished on the CPU. Up to
`host_pairs()` (a correctly rounded fp32 output against the fp64 reference leaves some 38,000 of 3.4 million
elements) come in a second transfer and are finished on the CPU too: numpy's hull is one synchronisation,
where the torch version's passes on the GPU make a dozen, and each waits for the other workers' time slices.
More (an error that grows with |ref|, such as a scaled or all-zero output, makes every element a candidate)
are finished on the GPU where they already are, as the torch version does. Both hulls are the same to the bit.

The source is built once per machine with nvcc into a shared library (no torch headers, a few seconds),
cached under `$ORACLEAUDIT_CACHE/kernels/` by a hash of the source, the nvcc version and the flags, and
called through ctypes on PyTorch's current stream. Without nvcc, or when the build fails, `library()`
says why once on stderr and `measure.measure` uses the torch version.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from oracleaudit.cache import cache_root, held
from oracleaudit.errors import OracleAuditError

SOURCE = Path(__file__).resolve().parent.parent / "data" / "evidence_kernels.cu"
N_COUNTS = 10  # the eight flag counts of measure._measure, Σ[out == 0], Σ[ref != 0]
N_STATS = 8  # measure._statistics's values
# Candidate pairs fetched with the result in its one transfer: FIRST_PAIRS, or one per FIRST_PAIRS_PER elements
# of a larger comparison (within the host bound); more take a second transfer, and with it a second
# synchronisation, which waits out the time slices of every other worker on the GPU. A correctly rounded fp32
# output against the fp64 reference leaves ~1.1% of its elements as candidates (47,087 of 4,194,304 for
# normal values): with 1 in 64 such a comparison comes back in the one transfer (1 MiB for 4M elements).
FIRST_PAIRS = 2048
FIRST_PAIRS_PER = 64
# Candidates up to this many are finished on the CPU after a second transfer; more on the GPU. The environment
# variable sets another bound (bench/pair_cost.py --host-pairs times them side by side).
HOST_PAIRS = 1 << 16
HOST_PAIRS_ENV = "ORACLEAUDIT_HOST_HULL_PAIRS"
# Candidates kept on the device (a cap on the pairs buffer); beyond it the torch version finds the hull.
CAPACITY = 1 << 20
MAX_GRID = 64  # the kernels' largest tolerance grid
SUB_BINS = 64  # hull-candidate bins per binade of |ref| (measure._bin_filter bins the same way)


@dataclass(frozen=True)
class Raw:
    """One call's results: the counts, the grid counts (in the caller's grid order), the statistics'
    values and the hull candidates as float64 tensors: on the CPU up to `host_pairs()` of them, else still on
    the GPU (None when there were more than CAPACITY)."""

    counts: list[int]
    within: list[int]
    stats: list[float]
    all_zero_out: bool
    candidates: tuple[torch.Tensor, torch.Tensor] | None


class Library:
    """The built shared library, its functions typed."""

    def __init__(self, path: Path):
        self.lib = ctypes.CDLL(str(path))
        args = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_int,
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
        for name in ("oa_evidence_f32", "oa_evidence_f64"):
            getattr(self.lib, name).argtypes = args
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.oa_workspace_words.restype = ctypes.c_longlong
        self.lib.oa_error_string.argtypes = [ctypes.c_int]
        self.lib.oa_error_string.restype = ctypes.c_char_p
        self.workspace_words = int(self.lib.oa_workspace_words())
        if (int(self.lib.oa_max_grid()), int(self.lib.oa_sub_bins())) != (MAX_GRID, SUB_BINS):
            raise OracleAuditError(f"{path}: built from a source whose constants differ from this package's")

    def run(self, a: torch.Tensor, b: torch.Tensor, grid: tuple[float, ...]) -> Raw:
        """The kernels on contiguous 1-D float32/float64 CUDA tensors of one dtype and length n > 0."""
        launched = self.launch(a, b, grid)
        return launched.finish(launched.head_view().cpu().numpy())  # the one synchronisation

    def launch(self, a: torch.Tensor, b: torch.Tensor, grid: tuple[float, ...]) -> "Launched":
        """Queue the kernels on the current stream; the caller brings `head_view()` to the host (with other
        tensors, in one transfer if it likes) and calls `finish` with it."""
        n = a.numel()
        order = sorted(range(len(grid)), key=grid.__getitem__)  # the kernel wants the grid ascending
        ascending = (ctypes.c_double * len(grid))(*(grid[i] for i in order))
        capacity = min(n, CAPACITY)
        head = N_COUNTS + len(grid) + 2 + N_STATS
        work = torch.empty(self.workspace_words, dtype=torch.int64, device=a.device)
        result = torch.empty(head + 2 * capacity, dtype=torch.float64, device=a.device)
        stream = torch.cuda.current_stream(a.device).cuda_stream
        function = self.lib.oa_evidence_f32 if a.dtype == torch.float32 else self.lib.oa_evidence_f64
        code = function(a.device.index, a.data_ptr(), b.data_ptr(), n, ascending, len(grid), work.data_ptr(),
                        result.data_ptr(), capacity, stream)
        if code:
            raise RuntimeError(f"CUDA error: {self.lib.oa_error_string(code).decode()} (evidence kernels)")
        return Launched(result, work, n, order, head, capacity, first_pairs(n, capacity),
                        min(capacity, host_pairs()))


@dataclass(frozen=True)
class Launched:
    """The kernels of one comparison, queued: `result` fills as they run."""

    result: torch.Tensor
    work: torch.Tensor  # kept alive until the kernels have run
    n: int
    order: list[int]
    head: int
    capacity: int
    first: int
    host: int  # candidates up to this many are finished on the CPU

    def head_view(self) -> torch.Tensor:
        """What comes back in the one transfer: the counts, histogram, statistics and the first candidates."""
        return self.result[:self.head + 2 * self.first]

    def needs_device(self, values: np.ndarray) -> bool:
        """Whether `finish` waits for the device again: its candidates did not all come back with `values`."""
        return int(values[N_COUNTS + len(self.order) + 1]) > self.first

    def finish(self, values: np.ndarray) -> Raw:
        """The results, from `head_view()` on the host."""
        grid_size = len(self.order)
        counts = [int(v) for v in values[:N_COUNTS]]
        histogram = values[N_COUNTS:N_COUNTS + grid_size].astype(np.int64)  # the last bin: no grid value passes
        survivors = int(values[N_COUNTS + grid_size + 1])
        stats = values[N_COUNTS + grid_size + 2:self.head].tolist()
        n_equal = self.n - counts[0]
        within = [0] * grid_size
        for rank, passing in enumerate(np.cumsum(histogram).tolist()):
            within[self.order[rank]] = n_equal + int(passing)
        candidates = None
        if survivors <= self.capacity:
            if survivors <= self.first:  # few: finished on the CPU, where they already are
                pairs = torch.from_numpy(np.array(values[self.head:self.head + 2 * survivors]).reshape(-1, 2))
            elif survivors <= self.host:  # more: to the CPU in a second transfer, finished there
                pairs = self.result[self.head:self.head + 2 * survivors].view(-1, 2).cpu()
            else:  # many (an error growing with |ref|): finished on the GPU, with no second transfer
                pairs = self.result[self.head:self.head + 2 * survivors].view(-1, 2)
            candidates = (pairs[:, 0].contiguous(), pairs[:, 1].contiguous())
        all_zero = counts[8] == self.n and counts[9] > 0
        return Raw(counts[:8], within, stats, all_zero, candidates)


def first_pairs(n: int, capacity: int) -> int:
    """The candidates a comparison of `n` elements brings back in its one transfer: FIRST_PAIRS, or one per
    FIRST_PAIRS_PER elements where that is more, within the capacity and `host_pairs()`."""
    return min(capacity, host_pairs(), max(FIRST_PAIRS, n // FIRST_PAIRS_PER))


def host_pairs() -> int:
    """The most candidates finished on the CPU: `HOST_PAIRS_ENV` when set (at least FIRST_PAIRS), else
    HOST_PAIRS."""
    text = os.environ.get(HOST_PAIRS_ENV)
    if not text:
        return HOST_PAIRS
    try:
        value = int(text)
    except ValueError:
        raise OracleAuditError(f"{HOST_PAIRS_ENV} must be an integer, got {text!r}") from None
    return max(value, FIRST_PAIRS)


def _nvcc_flags(arch: str) -> list[str]:
    return ["-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-std=c++17"]


def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def build(arch: str, nvcc: str | None = None) -> Path:
    """The library built for `arch` (e.g. sm_90), from the cache when it is there. Concurrent callers on
    one machine build it once (a file lock); a build is published by an atomic rename."""
    nvcc = nvcc or shutil.which("nvcc")
    if nvcc is None:
        raise OracleAuditError("nvcc not found on PATH")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip()
    flags = _nvcc_flags(arch)
    key = hashlib.sha256("\0".join([version, *flags, SOURCE.read_text()]).encode()).hexdigest()[:20]
    folder = cache_root() / "kernels" / key
    library = folder / "liboa_evidence.so"
    if library.is_file():
        return library
    with held(folder / "lock"):
        if library.is_file():
            return library
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            target = Path(tmp) / library.name
            done = subprocess.run([nvcc, *flags, "-o", str(target), str(SOURCE)], capture_output=True, text=True)
            if done.returncode != 0:
                detail = (done.stderr or done.stdout).strip().splitlines()
                raise OracleAuditError(f"{SOURCE}: nvcc failed: {detail[0] if detail else done.returncode}")
            os.replace(target, library)
    return library


@functools.cache
def library() -> Library | None:
    """This process's library for the current GPU, or None (said once on stderr) when it cannot be built."""
    try:
        return Library(build(_arch()))
    except (OracleAuditError, OSError) as err:
        print(f"oracleaudit: evidence kernels unavailable ({err}); using the torch version", file=sys.stderr)
        return None


def supports(a: torch.Tensor, grid: tuple[float, ...]) -> bool:
    """Whether the kernels take this comparison: a non-empty float32/float64 CUDA tensor, a grid they hold."""
    return a.is_cuda and a.dtype in (torch.float32, torch.float64) and a.numel() > 0 and 0 < len(grid) <= MAX_GRID
