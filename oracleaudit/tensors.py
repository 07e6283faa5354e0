"""Tensors inside the nested lists and tuples that problems and models take and return (`get_inputs()`, a
forward's outputs): flattened, mapped and moved in one way everywhere."""

from __future__ import annotations

from typing import Any, Callable


def tensors(value: Any) -> list:
    """The tensors of a (nested) list or tuple, depth first; a tensor alone is a list of one."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors(item)]
    return []


def leaves(value: Any) -> list:
    """Every non-list, non-tuple value of a nested list or tuple, depth first (tensors and others)."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def map_tensors(value: Any, fn: Callable) -> Any:
    """The same nesting with `fn` applied to every tensor; other values kept."""
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, list):
        return [map_tensors(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_tensors(v, fn) for v in value)
    return value


def to_device(value: Any, device: Any) -> Any:
    return map_tensors(value, lambda t: t.to(device))


def copied_to(value: Any, device: Any, float64: bool = False) -> Any:
    """A private copy of every tensor on `device` (floating-point ones as float64 if asked)."""
    import torch

    return map_tensors(value, lambda t: t.to(device=device, copy=True,
                                             dtype=torch.float64 if float64 and t.is_floating_point() else t.dtype))


def to_double(value: Any) -> Any:
    """Floating-point tensors as float64 (integer tensors and other values kept), at any depth."""
    return map_tensors(value, lambda t: t.double() if t.is_floating_point() else t)


def tensor_bytes(value: Any) -> int:
    """Bytes of every tensor in a (nested) list or tuple."""
    return sum(t.numel() * t.element_size() for t in tensors(value))
