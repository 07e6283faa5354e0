"""What a worker does to the GPU's memory around a pair so that one pair cannot shape another's outcome:
checksums of what must stay as made (the pristine input, the references, the Model's weights: a stray write of
a mutant changes them), and poison in the memory a variant's outputs are about to be given.

Poison. A kernel that leaves some of its output unwritten returns what its memory held before. PyTorch's
caching allocator hands a freed block to the next request that fits it, so without poison that would be an
output of the pair before — input by input, another variant's output on the same input (the original's, for
the first mutant): the right values, which would hide the fault. So before a variant's first run, the blocks
its outputs will receive are filled with poison: `poison_blocks` takes BLOCKS_POISONED blocks of each output's
size and frees them again, and the allocator, which picks the lowest-addressed block of the best-fitting size
(coalescing freed neighbours), gives the next requests of those sizes the same blocks, unless the kernel takes
more of them for itself first. The poison is PyTorch's own for uninitialised memory
(`torch.utils.deterministic.fill_uninitialized_memory`): NaN in floating-point tensors, the largest value in
integer ones (True in bool ones). Nothing else changes: the reference runs between a variant's two runs, so the
second run sees the blocks the reference left, as a checker that runs the reference first would.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["BLOCKS_POISONED", "bits", "checksums", "poison", "poison_blocks"]

BLOCKS_POISONED = 3  # blocks of each output's size poisoned before a run (a kernel's first temporaries too)


def bits(t):
    """The tensor's bytes (so NaNs with equal bits compare equal and -0.0 differs from 0.0)."""
    import torch

    return t.contiguous().reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


def checksums(items: list) -> Any:
    """One int64 per non-empty tensor (the wrapping sum of its 32-bit words, or bytes), as one tensor on the
    tensors' device (the CPU for none): cheap for any size (no widened copy), changed by any stray write
    that changes a value, and equal on every device (integer sums do not depend on their order)."""
    import torch

    sums = []
    for t in items:
        if not t.numel():
            continue
        b = bits(t.detach())
        words = b.view(torch.int32) if b.numel() % 4 == 0 else b
        sums.append(words.sum(dtype=torch.int64))
    return torch.stack(sums) if sums else torch.zeros(0, dtype=torch.int64)


def poison(items: Iterable) -> None:
    """Fill each tensor with its dtype's poison (in place; on its own stream, after what was queued)."""
    import torch

    with torch.no_grad():
        for t in items:
            if not isinstance(t, torch.Tensor) or not t.numel():
                continue
            if t.dtype.is_floating_point or t.dtype.is_complex:
                t.fill_(float("nan"))
            elif t.dtype == torch.bool:
                t.fill_(True)
            else:
                t.fill_(torch.iinfo(t.dtype).max)


def poison_blocks(like: Iterable) -> None:
    """Poison BLOCKS_POISONED free blocks of the size of each tensor in `like` (on its device) and free them
    again: the blocks the next allocations of those sizes receive."""
    import torch

    taken = [torch.empty_like(t) for t in like if isinstance(t, torch.Tensor) for _ in range(BLOCKS_POISONED)]
    poison(taken)
    del taken
