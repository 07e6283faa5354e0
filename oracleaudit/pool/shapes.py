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
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.problem import Problem, first_line, int_constants, load_problem_module
from oracleaudit.tensors import leaves, to_device

__all__ = [
    "MIN_CHANGED",
    "DroppedVariant",
    "ShapeVariant",
    "ShapeVariants",
    "odd_size",
    "shape_variants",
    "small_sizes",
]

SHAPES = ("official", "odd", "small", "batch")
"""The shape variants a pool may ask for: the problem's own constants, odd sizes, small sizes, another batch."""

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
    candidates = ({name: target[name] for name in subset} for subset in _candidate_subsets(list(target)))
    return _first_running(path, ((overrides, overrides) for overrides in candidates), official_signature, device)


def _first_running(path: Path, candidates: Iterable[tuple[dict[str, int], dict[str, int]]], base_signature: Any,
                   device: str) -> tuple[dict[str, int] | None, str]:
    """The result of the first (result, overrides) candidate with which the reference runs and its inputs
    differ from `base_signature`; else None and the first error."""
    first_error = ""
    for result, overrides in candidates:
        signature, error = _run_reference(path, overrides, device)
        if error is None and signature == base_signature:
            error = "changing the constants does not change the inputs (get_inputs ignores them)"
        if error is None:
            return result, ""
        if not first_error:
            first_error = f"with {_describe(overrides)}: {error}"
    return None, f"the reference fails on every tried subset of changed constants; {first_error}"


def _describe(overrides: Mapping[str, int]) -> str:
    return ", ".join(f"{n}={v}" for n, v in overrides.items()) or "the official constants"


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


# ---------------------------------------------------------------------------------------------------------
# Shape plans: the overrides and input shapes of each (problem, variant)


@dataclass(frozen=True)
class ResolvedShape:
    """A shape variant as used for one problem: the constants changed from the file and the input shapes."""

    name: str
    overrides: tuple[tuple[str, int], ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    scaled_to_limit: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "overrides": dict(self.overrides),
            "input_shapes": [list(s) if s is not None else None for s in self.input_shapes],
            "scaled_to_limit": self.scaled_to_limit,
        }


@dataclass(frozen=True)
class ShapePlan:
    """The shape variants a pool uses for one problem: the ones made and the ones dropped, with the reason."""

    problem: str
    max_elements: int | None
    shapes: tuple[ResolvedShape, ...]
    dropped: tuple[DroppedVariant, ...]

    def get(self, name: str) -> ResolvedShape | None:
        return next((v for v in self.shapes if v.name == name), None)

    def as_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "max_elements": self.max_elements,
            "shapes": [v.as_json() for v in self.shapes],
            "dropped": [{"name": d.name, "reason": d.reason} for d in self.dropped],
        }


def input_shapes(inputs: Any) -> tuple[tuple[int, ...] | None, ...]:
    return tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in leaves(inputs))


def _largest(shapes: Sequence[tuple[int, ...] | None]) -> int:
    return max((math.prod(s) for s in shapes if s is not None), default=0)


class _Shapes:
    """Input shapes of a problem for given constants, computed without allocating (on the meta device)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.module = load_problem_module(path)
        self.official = int_constants(self.module)

    def __call__(self, values: Mapping[str, int]) -> tuple[tuple[int, ...] | None, ...]:
        for name, value in {**self.official, **values}.items():
            setattr(self.module, name, value)
        try:
            with torch.device("meta"):
                return input_shapes(self.module.get_inputs())
        except Exception:
            with torch.random.fork_rng(devices=[]):  # get_inputs needs real tensors: allocate them
                return input_shapes(self.module.get_inputs())

    def changed(self, values: Mapping[str, int]) -> dict[str, int]:
        """The constants whose value differs from the file's, in definition order."""
        return {n: values[n] for n in self.official if n in values and values[n] != self.official[n]}


def _prev_prime(n: int) -> int:
    while n > 1 and not all(n % d for d in range(2, math.isqrt(n) + 1)):
        n -= 1
    return n


def _half(value: int, keep_prime: bool) -> int | None:
    """The next smaller size when scaling down: the half (or the largest prime ≤ the half), None below 1 (2)."""
    if keep_prime:
        half = _prev_prime(value // 2)
        return half if half >= 2 else None
    return value // 2 if value // 2 >= 1 else None


def _scale_down(shapes: _Shapes, values: Mapping[str, int], limit: int, keep_prime: bool) -> dict[str, int]:
    """Halve eligible constants, largest first, until no input holds more than `limit` elements."""
    values = dict(values)
    eligible = [n for n, v in shapes.official.items() if v >= MIN_CHANGED]
    largest = _largest(shapes(values))
    while largest > limit:
        best: tuple[int, int, str, int] | None = None
        for index, name in enumerate(eligible):
            smaller = _half(values[name], keep_prime)
            if smaller is None:
                continue
            if _largest(shapes({**values, name: smaller})) < largest:
                candidate = (values[name], -index, name, smaller)
                best = candidate if best is None or candidate > best else best
        if best is None:
            raise _CannotScale(
                f"no module-level constant can bring the largest input ({largest} elements) "
                f"to max_elements={limit}"
            )
        values[best[2]] = best[3]
        largest = _largest(shapes(values))
    return values


class _CannotScale(Exception):
    pass


def _validated(shapes: _Shapes, target: Mapping[str, int], base: Mapping[str, int], base_signature: Any,
               subsets: bool) -> tuple[dict[str, int] | None, str]:
    """The first of `target`'s subsets (all constants first) on which the reference runs and the inputs change;
    constants outside the subset keep their `base` values."""
    tried = _candidate_subsets(list(target)) if subsets else [tuple(target)]
    values = ({**base, **{n: target[n] for n in subset}} for subset in tried)
    return _first_running(shapes.path, ((v, shapes.changed(v)) for v in values), base_signature, "cpu")


def resolve_shapes(problem: Problem | Path, variants: Sequence[str] = SHAPES,
                   max_elements: int | None = None) -> ShapePlan:
    """The overrides and input shapes of the named shape variants of a problem (see the module docstring).

    Variants are validated on the reference Model on the CPU. A variant that cannot be made is dropped with
    the reason; if the official shapes cannot be run (or scaled to `max_elements`) it is an error.
    """
    path = Path(problem.path if isinstance(problem, Problem) else problem)
    label = problem.label if isinstance(problem, Problem) else f"{path.parent.name}/{path.stem}"
    unknown = [v for v in variants if v not in SHAPES]
    if unknown:
        raise OracleAuditError(f"unknown shape variant {unknown[0]!r} (known: {', '.join(SHAPES)})")
    shapes = _Shapes(path)
    official_values = dict(shapes.official)
    scaled = max_elements is not None and _largest(shapes(official_values)) > max_elements
    if scaled:
        try:
            official_values = _scale_down(shapes, official_values, max_elements, keep_prime=False)
        except _CannotScale as err:
            raise OracleAuditError(f"{path}: the official shapes cannot be scaled down: {err}") from None
    base_overrides = shapes.changed(official_values)
    base_signature, error = _run_reference(path, base_overrides, "cpu")
    if error is not None:
        where = f" scaled to max_elements={max_elements} ({_describe(base_overrides)})" if scaled else ""
        raise OracleAuditError(f"{path}: the reference Model fails on the official shapes{where}: {error}")

    made: dict[str, dict[str, int]] = {"official": official_values}
    dropped: list[DroppedVariant] = []
    eligible = {n: official_values[n] for n, v in shapes.official.items() if v >= MIN_CHANGED}
    wanted = [v for v in SHAPES if v in variants and v != "official"]
    if not scaled and any(v in wanted for v in ("odd", "small")):
        found = shape_variants(path)  # exactly the variants oracleaudit's verification uses
        for name in ("odd", "small"):
            variant = found.get(name)
            if variant is not None:
                made[name] = {**official_values, **variant.as_dict()}
        dropped += [d for d in found.dropped if d.name in wanted]
    elif scaled:
        proposals = {
            "odd": lambda: {n: odd_size(v) for n, v in eligible.items() if v >= MIN_CHANGED},
            "small": lambda: small_sizes(eligible),
        }
        for name in (v for v in ("odd", "small") if v in wanted):
            target = proposals[name]()
            if not target:
                dropped.append(DroppedVariant(name, f"no module-level int constant ≥ {MIN_CHANGED} to change"))
                continue
            values, reason = _validated(shapes, target, official_values, base_signature, subsets=True)
            if values is None:
                dropped.append(DroppedVariant(name, reason))
            else:
                made[name] = values
    if "batch" in wanted:
        target = {n: v // 2 + 1 for n, v in official_values.items() if "batch" in n.lower() and v >= 3}
        if not target:
            dropped.append(DroppedVariant("batch", "no module-level int constant named like 'batch' (≥ 3) to change"))
        else:
            values, reason = _validated(shapes, target, official_values, base_signature, subsets=False)
            if values is None:
                dropped.append(DroppedVariant("batch", reason))
            else:
                made["batch"] = values

    resolved: list[ResolvedShape] = []
    for name in (v for v in SHAPES if v in made and v in variants):
        values = made[name]
        limited = scaled
        if max_elements is not None and _largest(shapes(values)) > max_elements:
            try:
                values = _scale_down(shapes, values, max_elements, keep_prime=name in ("odd", "small"))
            except _CannotScale as err:
                dropped.append(DroppedVariant(name, str(err)))
                continue
            _, error = _run_reference(path, shapes.changed(values), "cpu")
            if error is not None:
                dropped.append(DroppedVariant(
                    name, f"scaled to max_elements={max_elements} ({_describe(shapes.changed(values))}): {error}"))
                continue
            limited = True
        overrides = tuple(shapes.changed(values).items())
        resolved.append(ResolvedShape(name, overrides, shapes(values), limited))
    order = {name: i for i, name in enumerate(SHAPES)}
    dropped.sort(key=lambda d: order.get(d.name, len(order)))
    return ShapePlan(label, max_elements, tuple(resolved), tuple(dropped))
