"""Fresh ModelNew instances of one variant, as KernelBench makes them — the weight seed, then the constructor
— made once per set of init args and deep-copied per input (`ModelTemplates`)."""

from __future__ import annotations

import copy
import os
import types
from typing import Any

from oracleaudit.kernelbench import WEIGHT_SEED
from oracleaudit.tensors import tensor_bytes

__all__ = ["ModelTemplates", "entry_init"]

PINNED_ENV = "ORACLEAUDIT_PINNED_TEMPLATES"  # "0": templates and host entries pageable; "variant": see entries.pins


class ModelTemplates:
    """Fresh ModelNew instances of one variant, as KernelBench makes them (the weight seed, then the
    constructor), made once per set of init args and deep-copied per input.

    A copy equals a fresh construction: the same parameter and buffer values, the same Python state, and
    the CPU and CUDA RNG states the constructor left behind are restored with it. Extension modules the
    model refers to are shared, not copied. A model that cannot be deep-copied is constructed per input.
    `on_host` keeps the template on the CPU and makes each copy's parameters and buffers on the device
    directly (input-by-input order). There, for a CUDA device, the template's tensors are moved to pinned
    (page-locked) memory once, and each copy is an asynchronous transfer: a copy from pageable memory first
    waits for everything the worker queued (a synchronisation per tensor, each also waiting out the other
    workers' time on a shared GPU), and such copies were most of a pair's device time (bench/pair_cost.py).
    The template is never written to, so a transfer still in flight reads what it was made with."""

    def __init__(self, model_class, device: str, on_host: bool = False, weight_seed: int = WEIGHT_SEED):
        self.model_class = model_class
        self.weight_seed = weight_seed
        self.device = device
        self.on_host = on_host
        self.templates: dict[Any, tuple | None] = {}
        self.template_bytes = 0  # kept as templates are made: the worker asks before every pair

    def fresh(self, key: Any, init: list):
        import torch

        template = self.templates.get(key)
        if template is not None:
            model, rng = template
            memo = shared_modules(model)
            if self.on_host:  # parameters and buffers straight to the device, not copied on the host first
                memo.update(self._moved(model))
            copied = copy.deepcopy(model, memo)
            self._set_rng(rng)
            return copied.to(self.device) if self.on_host else copied
        torch.manual_seed(self.weight_seed)
        model = self.model_class(*init)
        if not self.on_host:
            model = model.to(self.device)
        model = model.eval()
        if key not in self.templates:
            rng = self._rng()
            try:
                self.templates[key] = (self._pinned(copy.deepcopy(model, shared_modules(model))), rng)
            except Exception:  # e.g. an attribute pybind11 cannot copy: construct per input instead
                self.templates[key] = None
            else:
                template = self.templates[key][0]
                if hasattr(template, "parameters"):
                    self.template_bytes += tensor_bytes([*template.parameters(), *template.buffers()])
        return model.to(self.device) if self.on_host else model

    def _moved(self, model) -> dict[int, Any]:
        """A deepcopy memo taking each parameter and buffer of `model` to a new copy on the device (a parameter
        stays a parameter; one tensor held twice, as tied weights are, gets one copy)."""
        import torch

        memo: dict[int, Any] = {}
        if not hasattr(model, "parameters"):
            return memo
        for tensor in (*model.parameters(), *model.buffers()):
            if id(tensor) not in memo:
                moved = tensor.detach().to(self.device, copy=True, non_blocking=tensor.is_pinned())
                if isinstance(tensor, torch.nn.Parameter):
                    moved = torch.nn.Parameter(moved, requires_grad=tensor.requires_grad)
                memo[id(tensor)] = moved
        return memo

    def pins(self) -> bool:
        """Whether templates are kept in pinned memory: on the host, for a CUDA device, unless PINNED_ENV is 0."""
        import torch

        return self.on_host and torch.device(self.device).type == "cuda" and os.environ.get(PINNED_ENV) != "0"

    def _pinned(self, model):
        """`model` with its parameters and buffers moved to pinned memory where `pins()` (a tensor held twice,
        as tied weights are, is moved once)."""
        if not self.pins() or not hasattr(model, "parameters"):
            return model
        seen = set()
        for tensor in (*model.parameters(), *model.buffers()):
            if id(tensor) not in seen and tensor.device.type == "cpu":
                seen.add(id(tensor))
                tensor.data = tensor.data.pin_memory()
        return model

    def bytes(self) -> int:
        """The bytes of the templates' parameters and buffers."""
        return self.template_bytes

    def _rng(self) -> tuple:
        import torch

        cuda = torch.device(self.device).type == "cuda"
        return torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if cuda else None

    def _set_rng(self, rng: tuple) -> None:
        import torch

        torch.set_rng_state(rng[0])
        if rng[1] is not None:
            torch.cuda.set_rng_state(rng[1], self.device)


def shared_modules(model) -> dict[int, Any]:
    """A deepcopy memo that keeps Python modules (compiled extensions) the model's objects refer to."""
    memo = {}
    modules = model.modules() if hasattr(model, "modules") else [model]
    for sub in modules:
        for value in vars(sub).values():
            if isinstance(value, types.ModuleType):
                memo[id(value)] = value
    return memo


def entry_init(module: Any, device: str) -> list:
    """A problem module's init args (`get_init_inputs()`), tensors moved to `device`."""
    init = list(module.get_init_inputs())
    return [x.to(device) if hasattr(x, "to") else x for x in init]
