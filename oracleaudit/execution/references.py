"""The reference outputs of a problem on one pool input — the fp32 Model's (in the pool entry's math mode) and
its float64 copy's — and the input itself, computed once and cached on disk so that every slice, worker and later
run of the same problem and pool input reuses them.

Cache layout: `$ORACLEAUDIT_CACHE/references/<key>.bin`, one file per key, written under a temporary name and
renamed into place, read memory-mapped:

    8 bytes   the header's length H (unsigned, little-endian)
    H bytes   the header, JSON: {"format": 3, "tensors": [{"group": "ref32"|"ref64"|"input", "dtype": "float32",
              "shape": [...], "offset": O, "nbytes": N}, ...], "inputs": null | [{"tensor": I} | {"value": V}, ...]}
              (offsets from the start of the file; "inputs" lists get_inputs()'s items in order: the I-th tensor
              of group "input", or a Python bool, int or float)
    data      each tensor's bytes (C order, this machine's byte order), each starting at a multiple of 64

The key hashes everything the references depend on: the problem file's bytes, the pool entry (key,
distribution, shape overrides and input shapes), the fp32 math mode, the GPU model, the torch and CUDA
versions and `FORMAT`. References larger than `MAX_CACHED_BYTES` are not written (each slice recomputes them:
a 3-D convolution at KernelBench's size has 1 GiB of fp32 and 2 GiB of fp64 output per input, which would
fill a disk), nor any that would leave less than `MIN_FREE_BYTES` free on the cache's disk (the bundled
dataset's references under the default pool are ~40 GB). A lock file per key makes concurrent workers compute
a reference once. A failed write is only a missed cache entry, never the job's failure.

The input is kept beside its references where it can be given back exactly (`storable`: tensors that are
contiguous, own their whole storage and share none, and Python scalars); "inputs" is null otherwise, and the
worker makes it again. Making an input draws get_inputs() `draw` times on the CPU: 7.0x the time of reading the
same bytes back, and every slice, and every fresh worker after a crash, made each input it ran on again
(bench/results/input_cost.json).

Why raw bytes: torch.save (a zip archive with a checksum per record) took 0.13 s a file on average on the GPU
machine, 29% of a profiled cold run's worker time; writing the bytes is a copy into the page cache (here a
48 MB pair of references: 106 ms raw against 137 ms by torch.save, on a slow disk).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import shutil
import struct
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

from oracleaudit.cache import cache_root, held
from oracleaudit.files import write_with
from oracleaudit.tensors import tensor_bytes

REFERENCES_DIR = "references"
FORMAT = 3
MAX_CACHED_BYTES = 256 << 20
MIN_FREE_BYTES = 8 << 30  # never fill the cache's disk past this (builds and stores need it)
_ALIGN = 64
_SCALARS = (bool, int, float)


class Cached(NamedTuple):
    """What the cache holds for a key: the references (CPU tensors) and the input (None: not kept, make it)."""

    ref32: list
    ref64: list
    inputs: list | None = None


def storable(inputs: list) -> bool:
    """Whether `inputs` (get_inputs()'s items) come back from the cache exactly as they are: each a Python bool,
    int or float, or a dense tensor that is contiguous, needs no gradient and owns its whole storage, no two
    sharing one (a view, a stride or a shared storage would not survive the bytes)."""
    import torch

    seen = set()
    for item in inputs:
        if type(item) in _SCALARS:
            continue
        if not isinstance(item, torch.Tensor) or item.layout != torch.strided or item.requires_grad \
                or not item.is_contiguous() or item.storage_offset() != 0 or item.device.type != "cpu":
            return False
        storage = item.untyped_storage()
        if storage.nbytes() != item.numel() * item.element_size():
            return False
        if storage.nbytes() and storage.data_ptr() in seen:
            return False
        seen.add(storage.data_ptr())
    return True


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
        return self.root / f"{key}.bin"

    def load(self, key: str) -> Cached | None:
        """The references and the input as CPU tensors (views of the memory-mapped file), or None when not
        cached (or unreadable: computed again)."""
        if self.root is None or not self.path(key).is_file():
            return None
        try:
            return _read(self.path(key))
        except (OSError, ValueError, KeyError, IndexError, TypeError, struct.error):  # damaged or another format
            return None

    def fits(self, ref32: list, ref64: list, inputs: list | None = None) -> bool:
        """Whether references (and an input) of this size are written: at most `MAX_CACHED_BYTES`, leaving
        `MIN_FREE_BYTES`."""
        size = tensor_bytes(ref32) + tensor_bytes(ref64) + tensor_bytes(inputs or [])
        if self.root is None or size > MAX_CACHED_BYTES:
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        return shutil.disk_usage(self.root).free - size >= MIN_FREE_BYTES

    def save(self, key: str, ref32: list, ref64: list, inputs: list | None = None) -> bool:
        """Write the references (CPU tensors) if they `fit`, with `inputs` where `storable` and fitting too (else
        the file says the input is not kept); True if written."""
        kept = inputs if inputs is not None and storable(inputs) else None
        if kept is not None and not self.fits(ref32, ref64, kept):
            kept = None  # the references alone, if they fit
        if not self.fits(ref32, ref64, kept):
            return False
        write_with(self.path(key), lambda tmp: _write(tmp, ref32, ref64, kept))
        return True

    def compute_once(self, key: str, compute: Callable[[], tuple]) -> Cached:
        """What the cache holds for `key`: read, else `compute()`d — (ref32, ref64, inputs) — and written under
        the key's lock (a worker wanting the same key meanwhile waits, then reads the file). A computed result
        comes back whole, its input included."""
        cached = self.load(key)
        if cached is not None or self.root is None:
            return cached if cached is not None else Cached(*compute())
        with held(self.root / "locks" / f"{key}.lock"):
            cached = self.load(key)
            if cached is None:
                cached = Cached(*compute())
                try:
                    self.save(key, *cached)
                except OSError as err:  # a full or read-only disk: only a missed cache entry
                    print(f"oracleaudit worker: reference cache not written ({err})", file=sys.stderr)
            return cached


def _write(path: Path, ref32: list, ref64: list, inputs: list | None = None) -> None:
    import torch

    items = [("ref32", t) for t in ref32] + [("ref64", t) for t in ref64]
    listed = None
    if inputs is not None:
        listed = []
        for item in inputs:
            if isinstance(item, torch.Tensor):
                listed.append({"tensor": sum(group == "input" for group, _ in items)})
                items.append(("input", item))
            else:
                listed.append({"value": item})
    sizes = [t.numel() * t.element_size() for _, t in items]
    start = 0
    while True:  # the data starts after the header, whose offsets depend on where the data starts
        entries, offset = [], start
        for (group, t), nbytes in zip(items, sizes):
            entries.append({"group": group, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                            "offset": offset, "nbytes": nbytes})
            offset += -(-nbytes // _ALIGN) * _ALIGN
        header = json.dumps({"format": FORMAT, "tensors": entries, "inputs": listed}, sort_keys=True).encode()
        if 8 + len(header) <= start:
            break
        start = -(-(8 + len(header)) // _ALIGN) * _ALIGN
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", start - 8) + header.ljust(start - 8))
        for (_, t), entry in zip(items, entries):
            if entry["nbytes"]:
                f.seek(entry["offset"])
                f.write(memoryview(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()))
        f.truncate(max([e["offset"] + e["nbytes"] for e in entries], default=start))


def _read(path: Path) -> Cached:
    import torch

    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        if size > path.stat().st_size:
            raise ValueError("header longer than the file")
        header = json.loads(f.read(size))
        if header.get("format") != FORMAT:
            raise ValueError(f"format {header.get('format')}")
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if f.seek(0, 2) else b""
    out: dict[str, list] = {"ref32": [], "ref64": [], "input": []}
    for entry in header["tensors"]:
        dtype = getattr(torch, entry["dtype"])
        count = entry["nbytes"] // torch.empty((), dtype=dtype).element_size()
        flat = (torch.frombuffer(mapped, dtype=dtype, count=count, offset=entry["offset"]) if count
                else torch.empty(0, dtype=dtype))
        out[entry["group"]].append(flat.reshape(entry["shape"]))
    listed = header["inputs"]
    inputs = None if listed is None else [out["input"][item["tensor"]] if "tensor" in item else item["value"]
                                          for item in listed]
    return Cached(out["ref32"], out["ref64"], inputs)
