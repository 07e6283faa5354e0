"""A pool input's working set as a worker holds it: on the host (its inputs and its two references, kept
for the pairs still to come) and on the GPU (a pristine copy each pair clones, with the checksums that catch
stray writes). worker.py makes and uses them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from oracleaudit.execution.models import PINNED_ENV
from oracleaudit.tensors import map_tensors, tensor_bytes


def pins(device: str, by_input: bool) -> bool:
    """Whether host entries are pinned before they go to the GPU: on CUDA, in either pair order, unless PINNED_ENV
    is 0 (or "variant": variant by variant only, the policy before, for benchmarks). A copy from pageable memory is
    staged by the driver and waits for everything the worker queued; input by input such copies were 0.58
    synchronisations and 419 of 1,190 device microseconds a pair (bench/results/pair_cost_kernels.json)."""
    import torch

    setting = os.environ.get(PINNED_ENV)
    return torch.device(device).type == "cuda" and setting != "0" and not (by_input and setting == "variant")


@dataclass
class HostEntry:
    """One pool input of a group on the host: its inputs and the two references."""

    entry: Any
    inputs: list
    ref32: list
    ref64: list
    pinned: bool = False  # its tensors in page-locked memory: copied to the GPU asynchronously

    @property
    def bytes(self) -> int:
        return tensor_bytes(self.inputs) + tensor_bytes(self.ref32) + tensor_bytes(self.ref64)

    def pin(self) -> None:
        """Move its tensors to pinned (page-locked) memory: a copy from there to the GPU is queued like a kernel,
        where one from pageable memory waits for everything the worker queued before it."""
        self.inputs = map_tensors(self.inputs, lambda t: t.pin_memory())
        self.ref32 = [t.pin_memory() for t in self.ref32]
        self.ref64 = [t.pin_memory() for t in self.ref64]
        self.pinned = True


@dataclass
class GpuEntry:
    """The entry on the GPU: a pristine copy of the inputs (each pair runs on a clone of it) and the
    references, with the checksums they and the Model must keep (a tensor on the GPU, computed there when the
    copy is made: neither a synchronisation nor a pass over the host copies)."""

    entry: Any
    inputs: list
    ref32: list
    ref64: list
    sums: Any = None

    @property
    def key(self) -> str:
        return self.entry.key
