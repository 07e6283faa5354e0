"""The reference outputs of a problem on one pool input: the fp32 Model's (in the pool entry's math mode) and
its float64 copy's, computed once and cached on disk so that every slice, worker and later
run of the same problem and pool input reuses them.

Cache layout: `$ORACLEAUDIT_CACHE/references/<key>.pt` (torch.save of {"format", "ref32", "ref64"}, CPU
tensors), written under a temporary name and renamed into place, read memory-mapped. The key hashes
everything the references depend on: the problem file's bytes, the pool entry (key, distribution, shape
overrides and input shapes), the fp32 math mode, the GPU model, the torch and CUDA versions and `FORMAT`.
References larger than `MAX_CACHED_BYTES` are not written (each slice recomputes them: a 3-D convolution
at KernelBench's size has 1 GiB of fp32 and 2 GiB of fp64 output per input, which would fill a disk).
A lock file per key makes concurrent workers compute a reference once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

from oracleaudit.cache import cache_root, held
from oracleaudit.files import write_with
from oracleaudit.tensors import tensor_bytes

REFERENCES_DIR = "references"
FORMAT = 1
MAX_CACHED_BYTES = 256 << 20




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

    def save(self, key: str, ref32: list, ref64: list) -> bool:
        """Write the references (CPU tensors) unless they exceed `MAX_CACHED_BYTES`; True if written."""
        import torch

        if self.root is None or tensor_bytes(ref32) + tensor_bytes(ref64) > MAX_CACHED_BYTES:
            return False
        data = {"format": FORMAT, "ref32": list(ref32), "ref64": list(ref64)}
        write_with(self.path(key), lambda tmp: torch.save(data, tmp))
        return True

    @contextlib.contextmanager
    def computing(self, key: str) -> Iterator[None]:
        """Hold the key's lock while computing it (no lock when the cache is disabled)."""
        if self.root is None:
            yield
            return
        with held(self.root / "locks" / f"{key}.lock"):
            yield
