"""Shape variants of a problem, made by changing its module-level int constants.

Three variants are offered:

- `official`: the constants as written.
- `odd`: every int constant ≥ 16 becomes the prime nearest to 0.7× its value (so within 0.6–0.8×; a prime
  that large is odd and never a multiple of 32), to expose missing tail handling and floor-divided grids.
- `small`: every int constant ≥ 16 becomes a small prime, 17, 19, 23, ... assigned by rank of the
  original value (equal values stay equal, order is kept), to expose sizes smaller than one warp or block.

Constants below 16 (kernel sizes, dimension indices, strides, head counts, ...) are never changed.

A variant is validated by running the problem's reference `Model` on it. If the reference raises (a
divisibility constraint, a fixed reshape, ...) more constants are kept at their official values, in this
order: all changed; all but one changed (trying each constant in definition order); only batch-like
constants (names containing "batch") changed. If nothing works, or the change does not alter the shapes of
`get_inputs()` / the values of `get_init_inputs()`, the variant is dropped with the reason recorded.
Everything here is deterministic: the same problem file gives the same variants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.tensors import to_device
from oracleaudit.problem import Problem, first_line, int_constants, load_problem_module

__all__ = [
    "MIN_CHANGED",
    "DroppedVariant",
    "ShapeVariant",
    "ShapeVariants",
    "odd_size",
    "shape_variants",
    "small_sizes",
]

MIN_CHANGED = 16
"""Int constants below this value are never changed by a variant."""

ODD_FACTOR = 0.7
SMALL_START = 17
VALIDATION_SEED = 42


@dataclass(frozen=True)
class ShapeVariant:
    """A named set of constant overrides (empty for the official shapes)."""

    name: str
    overrides: tuple[tuple[str, int], ...] = ()

    def as_dict(self) -> dict[str, int]:
        return dict(self.overrides)


@dataclass(frozen=True)
class DroppedVariant:
    """A variant that could not be made, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class ShapeVariants:
    """The usable variants of one problem (official first) and the dropped ones."""

    variants: tuple[ShapeVariant, ...]
    dropped: tuple[DroppedVariant, ...]

    def get(self, name: str) -> ShapeVariant | None:
        return next((v for v in self.variants if v.name == name), None)


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


def odd_size(value: int) -> int:
    """The prime nearest to 0.7 × `value` (the smaller one on a tie), for `value` ≥ 16."""
    if value < MIN_CHANGED:
        raise ValueError(f"odd_size needs a value ≥ {MIN_CHANGED}, got {value}")
    target = ODD_FACTOR * value
    below = math.floor(target)
    while not _is_prime(below):
        below -= 1
    above = math.ceil(target)
    while not _is_prime(above):
        above += 1
    return below if target - below <= above - target else above


def small_sizes(values: Mapping[str, int]) -> dict[str, int]:
    """Map each value to a small prime 17, 19, 23, ... by the rank of its value among the distinct values."""
    distinct = sorted(set(values.values()))
    primes: list[int] = []
    candidate = SMALL_START
    while len(primes) < len(distinct):
        if _is_prime(candidate):
            primes.append(candidate)
        candidate += 1
    rank = dict(zip(distinct, primes))
    return {name: rank[value] for name, value in values.items()}


def shape_variants(problem: Problem | Path, device: str = "cpu") -> ShapeVariants:
    """The official, odd and small shape variants of a problem, each validated on its reference Model.

    The official shapes must run; if the reference raises on them the problem itself is broken and an
    OracleAuditError is raised.
    """
    path = Path(problem.path if isinstance(problem, Problem) else problem)
    constants = int_constants(load_problem_module(path))
    eligible = {name: value for name, value in constants.items() if value >= MIN_CHANGED}

    official_signature, error = _run_reference(path, {}, device)
    if error is not None:
        raise OracleAuditError(f"{path}: the reference Model fails on the official shapes: {error}")

    proposals: list[tuple[str, Callable[[Mapping[str, int]], dict[str, int]]]] = [
        ("odd", lambda values: {name: odd_size(value) for name, value in values.items()}),
        ("small", small_sizes),
    ]
    variants = [ShapeVariant("official")]
    dropped = []
    for name, propose in proposals:
        if not eligible:
            dropped.append(DroppedVariant(name, f"no module-level int constant ≥ {MIN_CHANGED} to change"))
            continue
        target = propose(eligible)
        found, reason = _first_valid(path, target, official_signature, device)
        if found is None:
            dropped.append(DroppedVariant(name, reason))
        else:
            variants.append(ShapeVariant(name, tuple((n, found[n]) for n in target if n in found)))
    return ShapeVariants(tuple(variants), tuple(dropped))


def _candidate_subsets(names: list[str]) -> list[tuple[str, ...]]:
    """Which constants to change, most first; duplicates removed, order kept."""
    subsets = [tuple(names)]
    if len(names) > 1:
        subsets += [tuple(n for n in names if n != kept) for kept in names]
    subsets.append(tuple(n for n in names if "batch" in n.lower()))
    unique: list[tuple[str, ...]] = []
    for subset in subsets:
        if subset and subset not in unique:
            unique.append(subset)
    return unique


def _first_valid(
    path: Path, target: Mapping[str, int], official_signature: Any, device: str
) -> tuple[dict[str, int] | None, str]:
    first_error = ""
    for subset in _candidate_subsets(list(target)):
        overrides = {name: target[name] for name in subset}
        signature, error = _run_reference(path, overrides, device)
        if error is None and signature == official_signature:
            error = "changing the constants does not change the inputs (get_inputs ignores them)"
        if error is None:
            return overrides, ""
        if not first_error:
            first_error = f"with {_describe(overrides)}: {error}"
    return None, f"the reference fails on every tried subset of changed constants; {first_error}"


def _describe(overrides: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={value}" for name, value in overrides.items())


def _signature(obj: Any) -> Any:
    """What the shape variant changes: tensor shapes and dtypes, and plain values."""
    if isinstance(obj, torch.Tensor):
        return ("tensor", tuple(obj.shape), str(obj.dtype))
    if isinstance(obj, (list, tuple)):
        return tuple(_signature(item) for item in obj)
    return repr(obj)


def _run_reference(path: Path, overrides: Mapping[str, int], device: str) -> tuple[Any, str | None]:
    """Run the reference Model with the given constants: (signature of its inputs, error or None)."""
    try:
        module = load_problem_module(path, overrides)
        init_inputs = module.get_init_inputs()
        torch.manual_seed(VALIDATION_SEED)
        model = module.Model(*to_device(init_inputs, device)).to(device)
        torch.manual_seed(VALIDATION_SEED)
        inputs = module.get_inputs()
        signature = (_signature(list(inputs)), _signature(list(init_inputs)))
        with torch.no_grad():
            output = model(*to_device(inputs, device))
        tensors = output if isinstance(output, (list, tuple)) else [output]
        if any(isinstance(t, torch.Tensor) and t.numel() == 0 for t in tensors):
            return signature, "the reference output is empty"
        return signature, None
    except OracleAuditError:
        raise
    except Exception as err:  # the reference rejecting the shapes is an expected outcome here
        return None, first_line(err)
    finally:
        if device.startswith("cuda"):
            torch.cuda.empty_cache()

