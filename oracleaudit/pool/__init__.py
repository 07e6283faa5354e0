"""The input pool: which inputs every problem is run on, defined as data (a TOML pool file).

A pool is a list of entries; each entry is one input distribution × one seed × one shape variant, with an
optional scaling, and a stable key such as `official/s=734796314/official` or `normal/s=7/odd`
(`{distribution}[/{param}={value}...][/x={scale}]/s={seed}/{variant}`). The shipped pools live in
`oracleaudit/data/pools/{name}.toml`; `Pool.load` takes such a name or the path of a user's file.

How an entry makes its inputs (`PoolEntry.make_inputs`), bit-for-bit reproducible on CPU:

1. `torch.manual_seed(seed)`, then `get_inputs()` of the problem module, exactly as KernelBench does for
   each trial. For the `official` distribution these are the inputs. The global CPU RNG state is restored
   afterwards.
2. Otherwise a `torch.Generator` on the CPU is seeded with the same seed, and every floating-point tensor
   of `get_inputs()`'s result, in order (depth first through nested lists), is replaced by
   `distribution.draw(template, generator)`: a new tensor of the template's shape and dtype. Everything
   else (integer tensors such as labels and indices, Python numbers) is kept, so integer inputs keep their
   valid range. Random draws are made in float32 (float64 for float64 templates) and cast to the
   template's dtype; scalings are applied in the template's dtype.
3. The tensors are moved to the requested device.

Distributions compose like strategies: `normal().scaled(1e3)`, `normal().mixed(1e3, 1e-3)`,
`normal().sorted()`, `normal().near_max()`; see `DISTRIBUTIONS` for the names a pool file may use and
their parameters. Notable equivalences: `normal` at seed 42 draws exactly what `torch.manual_seed(42)`
followed by `torch.randn` per float input draws (that is `randn_seed42`); `normal`, `uniform_pm1` and
`normal ×1e3` at seed 42 are the inputs of oracleaudit's own verification checks.

Shape variants are made through the problem's module-level int constants: `official`, `odd` and `small`
come from `oracleaudit.shapes`; `batch` changes only batch-like constants (names containing "batch",
value ≥ 3) to b // 2 + 1, validated on the reference Model like the others. A pool's `max_elements` scales
shapes down when an input would hold more elements than that: of the constants that are ≥ 16 in the file,
the largest one whose halving shrinks the largest input is halved (for `odd` and `small`: replaced by the
largest prime not above its half), repeatedly, and the result is validated on the reference Model; `odd`
and `small` are then derived from the scaled official constants. The overrides and input shapes actually
used are recorded per (problem, variant) in a `ShapePlan` and on every resolved `PoolEntry`.

Pool file format (schema_version 1):

    schema_version = 1
    description = "..."          # optional
    max_elements = 16777216      # optional: scale shapes down above this many elements per input
    [[entries]]
    distribution = "normal"      # a name of DISTRIBUTIONS
    seeds = [0, 1]               # a list of ints, or "kernelbench" (KernelBench's 5 trial seeds); or seed = 0
    variants = ["official"]      # optional, default ["official"]; official, odd, small, batch
    scales = [3.0]               # optional (or `scale = 3.0`): multiply the drawn floats
    # ...and the distribution's own parameters, e.g. `value = 0.5` for "constant"

Errors name the file, the entry (1-based, in file order) and the field:
`pool default.toml: entry 3: unknown distribution 'gauss' (known: ...)`.
"""

from __future__ import annotations

import contextlib
import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.tensors import leaves, to_device
from oracleaudit.kernelbench import official_seeds
from oracleaudit.files import file_sha256
from oracleaudit.problem import Problem, int_constants, load_problem_module
from oracleaudit.pool.shapes import (
    MIN_CHANGED,
    DroppedVariant,
    _candidate_subsets,
    _run_reference,
    odd_size,
    shape_variants,
    small_sizes,
)

__all__ = [
    "BASES",
    "DISTRIBUTIONS",
    "SCHEMA_VERSION",
    "VARIANTS",
    "Distribution",
    "Pool",
    "PoolEntry",
    "ResolvedVariant",
    "ShapePlan",
    "constant",
    "laplace",
    "lognormal",
    "mixed_range",
    "near_max",
    "near_ties",
    "normal",
    "official",
    "pools_dir",
    "ramp",
    "resolve_shapes",
    "shipped_pools",
    "uniform",
    "uniform_pm1",
    "zeros",
]

SCHEMA_VERSION = 1
VARIANTS = ("official", "odd", "small", "batch")
KERNELBENCH_SEEDS = "kernelbench"
RANDN_SEED = 42
NEAR_MAX_FP16 = 6e4
NEAR_MAX = 1e30
_MAX_SEED = 2**64 - 1


# ---------------------------------------------------------------------------------------------------------
# Distributions: small composable objects that draw one float tensor shaped like a template


def _work_dtype(template: torch.Tensor) -> torch.dtype:
    return torch.float64 if template.dtype == torch.float64 else torch.float32


def _num(value: float) -> str:
    """A canonical short spelling of a number, for keys and descriptions: 3, 0.01, -1, 1000, 1e+30."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


class Distribution:
    """Draws a float tensor of a template's shape and dtype from a CPU generator; compose with the methods."""

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def scaled(self, factor: float) -> Distribution:
        """This distribution's values × `factor` (in the template's dtype)."""
        return Scaled(self, float(factor))

    def mixed(self, high: float = 1e3, low: float = 1e-3, pattern: str = "random") -> Distribution:
        """Each value × `high` or × `low`: by a random mask (p = 0.5) or alternating along the flat index."""
        return MixedScale(self, float(high), float(low), pattern)

    def sorted(self, descending: bool = False) -> Distribution:
        """The values sorted over the flattened tensor: monotone along every dimension."""
        return Sorted(self, descending)

    def near_max(self) -> Distribution:
        """The values × 1e30 (× 6e4 for float16), as autokernel's near-max stability input."""
        return NearMax(self)

    def __repr__(self) -> str:
        return self.describe()


@dataclass(frozen=True, repr=False)
class Official(Distribution):
    """The template itself: the problem's own `get_inputs()` value (torch.rand for KernelBench)."""

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return template

    def describe(self) -> str:
        return "official()"


@dataclass(frozen=True, repr=False)
class Normal(Distribution):
    mean: float = 0.0
    std: float = 1.0

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = torch.randn(template.shape, generator=generator, dtype=_work_dtype(template))
        if (self.mean, self.std) != (0.0, 1.0):
            x = x * self.std + self.mean
        return x.to(template.dtype)

    def describe(self) -> str:
        return "normal()" if (self.mean, self.std) == (0.0, 1.0) else f"normal({_num(self.mean)}, {_num(self.std)})"


@dataclass(frozen=True, repr=False)
class Uniform(Distribution):
    low: float = -1.0
    high: float = 1.0

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = torch.rand(template.shape, generator=generator, dtype=_work_dtype(template))
        if (self.low, self.high) == (-1.0, 1.0):
            x = x * 2 - 1  # the spelling oracleaudit's verification uses
        else:
            x = x * (self.high - self.low) + self.low
        return x.to(template.dtype)

    def describe(self) -> str:
        return f"uniform({_num(self.low)}, {_num(self.high)})"


@dataclass(frozen=True, repr=False)
class LogNormal(Distribution):
    mean: float = 0.0
    sigma: float = 1.0

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = torch.randn(template.shape, generator=generator, dtype=_work_dtype(template))
        return torch.exp(x * self.sigma + self.mean).to(template.dtype)

    def describe(self) -> str:
        return f"lognormal({_num(self.mean)}, {_num(self.sigma)})"


@dataclass(frozen=True, repr=False)
class Laplace(Distribution):
    """loc + b · (E1 − E2) with E = −log(1 − U), U ~ uniform[0, 1): two uniform tensors are drawn."""

    loc: float = 0.0
    b: float = 1.0

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        dtype = _work_dtype(template)
        u1 = torch.rand(template.shape, generator=generator, dtype=dtype)
        u2 = torch.rand(template.shape, generator=generator, dtype=dtype)
        x = torch.log1p(-u2) - torch.log1p(-u1)
        return (x * self.b + self.loc).to(template.dtype)

    def describe(self) -> str:
        return f"laplace({_num(self.loc)}, {_num(self.b)})"


@dataclass(frozen=True, repr=False)
class Zeros(Distribution):
    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return torch.zeros(template.shape, dtype=template.dtype)

    def describe(self) -> str:
        return "zeros()"


@dataclass(frozen=True, repr=False)
class Constant(Distribution):
    value: float = 0.5

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return torch.full(template.shape, self.value, dtype=template.dtype)

    def describe(self) -> str:
        return f"constant({_num(self.value)})"


@dataclass(frozen=True, repr=False)
class Ramp(Distribution):
    """Evenly spaced values from `low` to `high` along the flat index (no randomness)."""

    low: float = -1.0
    high: float = 1.0

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = torch.linspace(self.low, self.high, template.numel(), dtype=torch.float64)
        return x.reshape(template.shape).to(template.dtype)

    def describe(self) -> str:
        return f"ramp({_num(self.low)}, {_num(self.high)})"


@dataclass(frozen=True, repr=False)
class NearTies(Distribution):
    """base + spread · U, U ~ uniform[0, 1) in float64, rounded to the dtype: values equal up to tiny
    perturbations (and, at the dtype's resolution, some exact ties) — for argmax-like operators."""

    base: float = 1.0
    spread: float = 1e-4

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        u = torch.rand(template.shape, generator=generator, dtype=torch.float64)
        return (u * self.spread + self.base).to(template.dtype)

    def describe(self) -> str:
        return f"near_ties({_num(self.base)}, {_num(self.spread)})"


@dataclass(frozen=True, repr=False)
class Scaled(Distribution):
    inner: Distribution
    factor: float

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.inner.draw(template, generator) * self.factor

    def describe(self) -> str:
        return f"{self.inner.describe()}.scaled({_num(self.factor)})"


@dataclass(frozen=True, repr=False)
class MixedScale(Distribution):
    inner: Distribution
    high: float = 1e3
    low: float = 1e-3
    pattern: str = "random"

    def __post_init__(self) -> None:
        if self.pattern not in ("random", "alternating"):
            raise ValueError(f"pattern must be 'random' or 'alternating', got {self.pattern!r}")

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = self.inner.draw(template, generator)
        if self.pattern == "random":
            mask = torch.rand(template.shape, generator=generator) > 0.5
        else:
            mask = (torch.arange(template.numel()) % 2 == 0).reshape(template.shape)
        high = torch.tensor(self.high, dtype=x.dtype)
        low = torch.tensor(self.low, dtype=x.dtype)
        return x * torch.where(mask, high, low)

    def describe(self) -> str:
        return f"{self.inner.describe()}.mixed({_num(self.high)}, {_num(self.low)}, {self.pattern!r})"


@dataclass(frozen=True, repr=False)
class Sorted(Distribution):
    inner: Distribution
    descending: bool = False

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = self.inner.draw(template, generator)
        return torch.sort(x.flatten(), descending=self.descending).values.reshape(template.shape)

    def describe(self) -> str:
        return f"{self.inner.describe()}.sorted({'descending=True' if self.descending else ''})"


@dataclass(frozen=True, repr=False)
class NearMax(Distribution):
    inner: Distribution

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        factor = NEAR_MAX_FP16 if template.dtype == torch.float16 else NEAR_MAX
        return self.inner.draw(template, generator) * factor

    def describe(self) -> str:
        return f"{self.inner.describe()}.near_max()"


def official() -> Distribution:
    """The problem's own `get_inputs()` values."""
    return Official()


def normal(mean: float = 0.0, std: float = 1.0) -> Distribution:
    return Normal(float(mean), float(std))


def uniform(low: float, high: float) -> Distribution:
    return Uniform(float(low), float(high))


def uniform_pm1() -> Distribution:
    """uniform(−1, 1)."""
    return Uniform(-1.0, 1.0)


def lognormal(mean: float = 0.0, sigma: float = 1.0) -> Distribution:
    return LogNormal(float(mean), float(sigma))


def laplace(loc: float = 0.0, b: float = 1.0) -> Distribution:
    return Laplace(float(loc), float(b))


def zeros() -> Distribution:
    return Zeros()


def constant(value: float) -> Distribution:
    return Constant(float(value))


def ramp(low: float = -1.0, high: float = 1.0) -> Distribution:
    return Ramp(float(low), float(high))


def near_ties(base: float = 1.0, spread: float = 1e-4) -> Distribution:
    return NearTies(float(base), float(spread))


def near_max(of: Distribution | None = None) -> Distribution:
    """`of` (default standard normal) × 1e30, × 6e4 for float16."""
    return (of or normal()).near_max()


def mixed_range(of: Distribution | None = None, high: float = 1e3, low: float = 1e-3,
                pattern: str = "random") -> Distribution:
    """`of` (default standard normal), each value × `high` or × `low`."""
    return (of or normal()).mixed(high, low, pattern)


# ---------------------------------------------------------------------------------------------------------
# The names a pool file may use


_REQUIRED = object()


@dataclass(frozen=True)
class _Param:
    kind: str  # "number", "choice" or "base"
    default: Any = _REQUIRED
    choices: tuple[str, ...] = ()


BASES: dict[str, Callable[[], Distribution]] = {
    "official": official,
    "normal": normal,
    "uniform_pm1": uniform_pm1,
    "lognormal": lognormal,
    "laplace": laplace,
}
"""Distributions a composed distribution may start from (`of = "..."`)."""


@dataclass(frozen=True)
class _Kind:
    params: Mapping[str, _Param]
    build: Callable[[Mapping[str, Any]], Distribution]
    doc: str


def _base(p: Mapping[str, Any]) -> Distribution:
    return BASES[p["of"]]()


DISTRIBUTIONS: dict[str, _Kind] = {
    "official": _Kind({}, lambda p: official(), "the problem's own get_inputs() (KernelBench: torch.rand)"),
    "normal": _Kind({"mean": _Param("number", 0.0), "std": _Param("number", 1.0)},
                    lambda p: normal(p["mean"], p["std"]), "normal(mean, std)"),
    "uniform": _Kind({"low": _Param("number"), "high": _Param("number")},
                     lambda p: uniform(p["low"], p["high"]), "uniform(low, high)"),
    "uniform_pm1": _Kind({}, lambda p: uniform_pm1(), "uniform(-1, 1)"),
    "scaled": _Kind({"of": _Param("base", "official")}, _base,
                    "the official inputs (or `of`) × scale; needs scale or scales"),
    "lognormal": _Kind({"mean": _Param("number", 0.0), "sigma": _Param("number", 1.0)},
                       lambda p: lognormal(p["mean"], p["sigma"]), "exp(normal(mean, sigma))"),
    "laplace": _Kind({"loc": _Param("number", 0.0), "b": _Param("number", 1.0)},
                     lambda p: laplace(p["loc"], p["b"]), "Laplace(loc, b)"),
    "zeros": _Kind({}, lambda p: zeros(), "all zeros"),
    "constant": _Kind({"value": _Param("number")}, lambda p: constant(p["value"]), "all equal to value"),
    "sorted": _Kind({"order": _Param("choice", "ascending", ("ascending", "descending")),
                     "of": _Param("base", "normal")},
                    lambda p: _base(p).sorted(p["order"] == "descending"),
                    "`of` values sorted over the flat index (monotone along every dimension)"),
    "ramp": _Kind({"low": _Param("number", -1.0), "high": _Param("number", 1.0)},
                  lambda p: ramp(p["low"], p["high"]), "evenly spaced values along the flat index"),
    "mixed_range": _Kind({"high": _Param("number", 1e3), "low": _Param("number", 1e-3),
                          "pattern": _Param("choice", "random", ("random", "alternating")),
                          "of": _Param("base", "normal")},
                         lambda p: _base(p).mixed(p["high"], p["low"], p["pattern"]),
                         "`of` with each value × high or × low (large dynamic range)"),
    "near_ties": _Kind({"base": _Param("number", 1.0), "spread": _Param("number", 1e-4)},
                       lambda p: near_ties(p["base"], p["spread"]), "base + spread·uniform[0, 1)"),
    "near_max": _Kind({"of": _Param("base", "normal")}, lambda p: _base(p).near_max(),
                      "`of` × 1e30 (float16: × 6e4), autokernel's near-max input"),
    "randn_seed42": _Kind({}, lambda p: normal(),
                          "torch.randn after seeding 42 (autokernel, sol-execbench-like); seed fixed at 42"),
}
"""Distribution names a pool file may use: their parameters (with defaults) and what they draw."""

_ENTRY_FIELDS = ("distribution", "seeds", "seed", "variants", "scale", "scales")


# ---------------------------------------------------------------------------------------------------------
# Shape plans: the overrides and input shapes of each (problem, variant)


@dataclass(frozen=True)
class ResolvedVariant:
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
    variants: tuple[ResolvedVariant, ...]
    dropped: tuple[DroppedVariant, ...]

    def get(self, name: str) -> ResolvedVariant | None:
        return next((v for v in self.variants if v.name == name), None)

    def as_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "max_elements": self.max_elements,
            "variants": [v.as_json() for v in self.variants],
            "dropped": [{"name": d.name, "reason": d.reason} for d in self.dropped],
        }




def _shapes_of(inputs: Any) -> tuple[tuple[int, ...] | None, ...]:
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
                return _shapes_of(self.module.get_inputs())
        except Exception:
            with torch.random.fork_rng(devices=[]):  # get_inputs needs real tensors: allocate them
                return _shapes_of(self.module.get_inputs())

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


def _describe(overrides: Mapping[str, int]) -> str:
    return ", ".join(f"{n}={v}" for n, v in overrides.items()) or "the official constants"


def _validated(shapes: _Shapes, target: Mapping[str, int], base: Mapping[str, int], base_signature: Any,
               subsets: bool) -> tuple[dict[str, int] | None, str]:
    """The first of `target`'s subsets (all constants first) on which the reference runs and the inputs change;
    constants outside the subset keep their `base` values."""
    tried = _candidate_subsets(list(target)) if subsets else [tuple(target)]
    first_error = ""
    for subset in tried:
        values = {**base, **{n: target[n] for n in subset}}
        overrides = shapes.changed(values)
        signature, error = _run_reference(shapes.path, overrides, "cpu")
        if error is None and signature == base_signature:
            error = "changing the constants does not change the inputs (get_inputs ignores them)"
        if error is None:
            return values, ""
        if not first_error:
            first_error = f"with {_describe(overrides)}: {error}"
    return None, f"the reference fails on every tried subset of changed constants; {first_error}"


def resolve_shapes(problem: Problem | Path, variants: Sequence[str] = VARIANTS,
                   max_elements: int | None = None) -> ShapePlan:
    """The overrides and input shapes of the named shape variants of a problem (see the module docstring).

    Variants are validated on the reference Model on the CPU. A variant that cannot be made is dropped with
    the reason; if the official shapes cannot be run (or scaled to `max_elements`) it is an error.
    """
    path = Path(problem.path if isinstance(problem, Problem) else problem)
    label = problem.label if isinstance(problem, Problem) else f"{path.parent.name}/{path.stem}"
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise OracleAuditError(f"unknown shape variant {unknown[0]!r} (known: {', '.join(VARIANTS)})")
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
    wanted = [v for v in VARIANTS if v in variants and v != "official"]
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

    resolved: list[ResolvedVariant] = []
    for name in (v for v in VARIANTS if v in made and v in variants):
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
        resolved.append(ResolvedVariant(name, overrides, shapes(values), limited))
    order = {name: i for i, name in enumerate(VARIANTS)}
    dropped.sort(key=lambda d: order.get(d.name, len(order)))
    return ShapePlan(label, max_elements, tuple(resolved), tuple(dropped))


# ---------------------------------------------------------------------------------------------------------
# Pool entries


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """`torch.manual_seed(seed)` for the duration, the global CPU RNG state restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _replace_floats(value: Any, dist: Distribution, generator: torch.Generator) -> Any:
    if isinstance(value, list):
        return [_replace_floats(v, dist, generator) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace_floats(v, dist, generator) for v in value)
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        drawn = dist.draw(value.detach().cpu(), generator)
        return drawn.to(value.device)
    return value




@dataclass(frozen=True)
class PoolEntry:
    """One input of the pool: distribution × seed × shape variant (× scale), named by a stable key.

    Entries from `Pool.entries` are not yet resolved for a problem (`overrides` is None); entries from
    `Pool.entries_for(problem)` carry the constant overrides and input shapes of their variant for that
    problem and can make inputs.
    """

    key: str
    distribution: str
    seed: int
    variant: str
    scale: float
    params: tuple[tuple[str, Any], ...]
    dist: Distribution = field(compare=False)
    index: int = 0
    """The 1-based position of the pool file entry this input comes from."""
    overrides: tuple[tuple[str, int], ...] | None = None
    input_shapes: tuple[tuple[int, ...] | None, ...] | None = None

    @property
    def resolved(self) -> bool:
        return self.overrides is not None

    def load_problem(self, problem: Problem | Path) -> ModuleType:
        """The problem module with this entry's shape constants set (a fresh module)."""
        self._require_resolved()
        return load_problem_module(problem, dict(self.overrides or ()))

    def make_inputs(self, problem_module: ModuleType, device: str | torch.device = "cpu") -> list:
        """This entry's inputs for a problem module loaded with the entry's overrides (see `load_problem`).

        Deterministic: the same entry and problem file give bitwise-identical tensors (drawn on the CPU,
        then moved to `device`). The caller's global RNG state is left as it was.
        """
        self._require_resolved()
        for name, value in self.overrides or ():
            actual = getattr(problem_module, name, None)
            if actual != value:
                raise OracleAuditError(
                    f"pool entry {self.key}: the problem module has {name}={actual!r}, the entry needs {value} "
                    "(load it with entry.load_problem(problem))"
                )
        with _seeded(self.seed):
            inputs = list(problem_module.get_inputs())
        if not isinstance(self.dist, Official):
            generator = torch.Generator(device="cpu").manual_seed(self.seed)
            inputs = _replace_floats(inputs, self.dist, generator)
        if self.input_shapes is not None and _shapes_of(inputs) != self.input_shapes:
            raise OracleAuditError(
                f"pool entry {self.key}: get_inputs() gave shapes {list(_shapes_of(inputs))}, the pool recorded "
                f"{list(self.input_shapes)} for this problem (was the problem file changed?)"
            )
        return to_device(inputs, device)

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "distribution": self.distribution,
            "params": dict(self.params),
            "draw": self.dist.describe(),
            "seed": self.seed,
            "variant": self.variant,
            "scale": self.scale,
            "overrides": dict(self.overrides) if self.overrides is not None else None,
            "input_shapes": ([list(s) if s is not None else None for s in self.input_shapes]
                             if self.input_shapes is not None else None),
        }

    def _require_resolved(self) -> None:
        if self.overrides is None:
            raise OracleAuditError(
                f"pool entry {self.key} is not resolved for a problem; take it from Pool.entries_for(problem)"
            )


# ---------------------------------------------------------------------------------------------------------
# Pool files


def pools_dir() -> Path:
    """The folder of the shipped pool files."""
    return Path(__file__).resolve().parent.parent / "data" / "pools"


def names_a_file(name_or_path: str | Path) -> bool:
    """Whether `Pool.load` reads this as a pool file's path rather than a shipped pool's name."""
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or Path(text).suffix == ".toml" or "/" in text or "\\" in text


def shipped_pools() -> list[str]:
    """The names of the shipped pools."""
    return sorted(p.stem for p in pools_dir().glob("*.toml"))


class _Invalid(Exception):
    """A validation failure inside one pool file; Pool.load prefixes the file name."""


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"{what} must be a number, got {_type_name(value)} ({value!r})")
    if not math.isfinite(value):
        raise _Invalid(f"{what} must be finite, got {value!r}")
    return float(value)


def _seeds(raw: Mapping[str, Any], dist_name: str, where: str) -> list[int]:
    if "seeds" in raw and "seed" in raw:
        raise _Invalid(f"{where}: give seeds or seed, not both")
    if dist_name == "randn_seed42":
        given = raw.get("seeds", raw.get("seed", [RANDN_SEED]))
        if given not in ([RANDN_SEED], RANDN_SEED):
            raise _Invalid(f"{where}: seeds: randn_seed42 always uses seed {RANDN_SEED}, got {given!r}")
        return [RANDN_SEED]
    if "seed" in raw:
        values = [raw["seed"]]
        label = "seed"
    elif "seeds" in raw:
        if raw["seeds"] == KERNELBENCH_SEEDS:
            return official_seeds()
        if not isinstance(raw["seeds"], list):
            raise _Invalid(f"{where}: seeds must be a list of integers or \"{KERNELBENCH_SEEDS}\", "
                           f"got {raw['seeds']!r}")
        values = raw["seeds"]
        label = "seeds"
    else:
        raise _Invalid(f"{where}: seeds is missing (a list of integers, or \"{KERNELBENCH_SEEDS}\")")
    if not values:
        raise _Invalid(f"{where}: seeds is empty")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SEED:
            raise _Invalid(f"{where}: {label} must be integers in [0, 2**64 - 1], got {value!r}")
    if len(set(values)) != len(values):
        raise _Invalid(f"{where}: {label} repeat a value: {values!r}")
    return list(values)


def _scales(raw: Mapping[str, Any], dist_name: str, where: str) -> list[float | None]:
    if "scale" in raw and "scales" in raw:
        raise _Invalid(f"{where}: give scale or scales, not both")
    if "scales" in raw:
        if not isinstance(raw["scales"], list) or not raw["scales"]:
            raise _Invalid(f"{where}: scales must be a non-empty list of numbers, got {raw['scales']!r}")
        scales: list[float | None] = [_number(s, f"{where}: scales") for s in raw["scales"]]
    elif "scale" in raw:
        scales = [_number(raw["scale"], f"{where}: scale")]
    else:
        scales = [None]
    if dist_name == "scaled" and scales == [None]:
        raise _Invalid(f"{where}: distribution 'scaled' needs scale or scales")
    if dist_name == "official" and scales != [None]:
        raise _Invalid(f"{where}: scale: to scale the official inputs use distribution 'scaled'")
    if len(set(scales)) != len(scales):
        raise _Invalid(f"{where}: scales repeat a value: {raw['scales']!r}")
    return scales


def _params(raw: Mapping[str, Any], dist_name: str, where: str) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The distribution's parameters (defaults filled in) and those that name it in keys: the required ones
    and the ones given with a non-default value, in declaration order."""
    kind = DISTRIBUTIONS[dist_name]
    values: dict[str, Any] = {}
    keyed: list[tuple[str, Any]] = []
    for name, param in kind.params.items():
        if name not in raw:
            if param.default is _REQUIRED:
                raise _Invalid(f"{where}: distribution '{dist_name}' needs {name}")
            values[name] = param.default
            continue
        value = raw[name]
        if param.kind == "number":
            value = _number(value, f"{where}: {name}")
        elif param.kind == "choice" and value not in param.choices:
            raise _Invalid(f"{where}: {name} must be one of {', '.join(param.choices)}, got {value!r}")
        elif param.kind == "base" and value not in BASES:
            raise _Invalid(f"{where}: of must be one of {', '.join(BASES)}, got {value!r}")
        values[name] = value
        if param.default is _REQUIRED or value != param.default:
            keyed.append((name, value))
    return values, keyed


def _key_part(value: Any) -> str:
    return _num(value) if isinstance(value, float) else str(value)


def _expand(raw: Any, index: int) -> list[PoolEntry]:
    """The pool entries of one `[[entries]]` table (1-based `index`)."""
    where = f"entry {index}"
    if not isinstance(raw, dict):
        raise _Invalid(f"{where}: must be a table, got {_type_name(raw)}")
    if "distribution" not in raw:
        raise _Invalid(f"{where}: distribution is missing")
    dist_name = raw["distribution"]
    if not isinstance(dist_name, str) or dist_name not in DISTRIBUTIONS:
        raise _Invalid(f"{where}: unknown distribution {dist_name!r} (known: {', '.join(DISTRIBUTIONS)})")
    kind = DISTRIBUTIONS[dist_name]
    for name in raw:
        if name not in _ENTRY_FIELDS and name not in kind.params:
            allowed = ", ".join(list(_ENTRY_FIELDS) + list(kind.params))
            raise _Invalid(f"{where}: unknown field {name!r} for distribution '{dist_name}' (allowed: {allowed})")
    params, keyed = _params(raw, dist_name, where)
    seeds = _seeds(raw, dist_name, where)
    scales = _scales(raw, dist_name, where)
    variants = raw.get("variants", ["official"])
    if not isinstance(variants, list) or not variants:
        raise _Invalid(f"{where}: variants must be a non-empty list, got {variants!r}")
    for variant in variants:
        if variant not in VARIANTS:
            raise _Invalid(f"{where}: unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    if len(set(variants)) != len(variants):
        raise _Invalid(f"{where}: variants repeat a value: {variants!r}")

    base = kind.build(params)
    stem = dist_name + "".join(f"/{name}={_key_part(value)}" for name, value in keyed)
    entries = []
    for variant in variants:
        for scale in scales:
            dist = base if scale is None else base.scaled(scale)
            scaled = "" if scale is None else f"/x={_num(scale)}"
            for seed in seeds:
                entries.append(PoolEntry(
                    key=f"{stem}{scaled}/s={seed}/{variant}",
                    distribution=dist_name,
                    seed=seed,
                    variant=variant,
                    scale=1.0 if scale is None else scale,
                    params=tuple(keyed),
                    dist=dist,
                    index=index,
                ))
    return entries


@dataclass
class Pool:
    """A named input pool: its entries (not yet resolved for a problem) and options."""

    name: str
    path: Path | None
    description: str
    max_elements: int | None
    entries: tuple[PoolEntry, ...]
    _plans: dict[tuple[str, str], ShapePlan] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def load(cls, name_or_path: str | Path) -> Pool:
        """A shipped pool by name (`default`) or a pool file by path; validated (OracleAuditError if bad)."""
        text = str(name_or_path)
        path = Path(name_or_path)
        if not names_a_file(name_or_path):
            path = pools_dir() / f"{text}.toml"
            if not path.is_file():
                raise OracleAuditError(
                    f"no shipped pool named {text!r} (shipped: {', '.join(shipped_pools()) or 'none'}); "
                    "pass the path of a .toml pool file instead"
                )
        if not path.is_file():
            raise OracleAuditError(f"pool {path}: no such file")
        return cls.from_text(path.read_text(encoding="utf-8"), source=path)

    @classmethod
    def from_text(cls, text: str, source: str | Path = "<text>") -> Pool:
        """Parse and validate a pool file's text; errors name `source`'s file name and the field."""
        path = Path(source) if isinstance(source, Path) else None
        label = path.name if path is not None else str(source)
        try:
            return cls._parse(text, path)
        except _Invalid as err:
            raise OracleAuditError(f"pool {label}: {err}") from None
        except tomllib.TOMLDecodeError as err:
            raise OracleAuditError(f"pool {label}: not valid TOML: {err}") from None

    @classmethod
    def _parse(cls, text: str, path: Path | None) -> Pool:
        data = tomllib.loads(text)
        known = ("schema_version", "name", "description", "max_elements", "entries")
        for name in data:
            if name not in known:
                raise _Invalid(f"unknown top-level field {name!r} (allowed: {', '.join(known)})")
        if "schema_version" not in data:
            raise _Invalid(f"schema_version is missing (this version of oracleaudit reads {SCHEMA_VERSION})")
        if data["schema_version"] != SCHEMA_VERSION:
            raise _Invalid(f"schema_version must be {SCHEMA_VERSION}, got {data['schema_version']!r}")
        name = data.get("name", path.stem if path is not None else "pool")
        description = data.get("description", "")
        for field_name, value in (("name", name), ("description", description)):
            if not isinstance(value, str):
                raise _Invalid(f"{field_name} must be a string, got {_type_name(value)}")
        max_elements = data.get("max_elements")
        if max_elements is not None and (isinstance(max_elements, bool) or not isinstance(max_elements, int)
                                         or max_elements < 1):
            raise _Invalid(f"max_elements must be an integer ≥ 1, got {max_elements!r}")
        raw_entries = data.get("entries")
        if not raw_entries:
            raise _Invalid("no entries (add [[entries]] tables)")
        if not isinstance(raw_entries, list):
            raise _Invalid(f"entries must be an array of tables ([[entries]]), got {_type_name(raw_entries)}")
        entries: list[PoolEntry] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_entries, start=1):
            for entry in _expand(raw, index):
                if entry.key in seen:
                    raise _Invalid(f"entry {index}: key {entry.key!r} repeats one of entry {seen[entry.key]}")
                seen[entry.key] = index
                entries.append(entry)
        return cls(name, path, description, max_elements, tuple(entries))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[PoolEntry]:
        return iter(self.entries)

    def keys(self) -> list[str]:
        return [e.key for e in self.entries]

    def get(self, key: str) -> PoolEntry:
        for entry in self.entries:
            if entry.key == key:
                return entry
        raise OracleAuditError(f"pool {self.name}: no entry with key {key!r}")

    @property
    def variants(self) -> tuple[str, ...]:
        """The shape variants the pool's entries use, in VARIANTS order."""
        used = {e.variant for e in self.entries}
        return tuple(v for v in VARIANTS if v in used)

    def shape_plan(self, problem: Problem | Path) -> ShapePlan:
        """The overrides and input shapes of each variant this pool uses, for one problem (cached)."""
        path = Path(problem.path if isinstance(problem, Problem) else problem)
        cache_key = (str(path.resolve()), file_sha256(path))
        if cache_key not in self._plans:
            self._plans[cache_key] = resolve_shapes(problem, self.variants, self.max_elements)
        return self._plans[cache_key]

    def entries_for(self, problem: Problem | Path) -> list[PoolEntry]:
        """The pool's entries resolved for one problem, in pool order; entries of dropped variants are left
        out (see `shape_plan(problem).dropped`). No applicable entry at all is an error."""
        plan = self.shape_plan(problem)
        resolved = []
        for entry in self.entries:
            variant = plan.get(entry.variant)
            if variant is not None:
                resolved.append(replace(entry, overrides=variant.overrides, input_shapes=variant.input_shapes))
        if not resolved:
            reasons = "; ".join(f"{d.name}: {d.reason}" for d in plan.dropped)
            raise OracleAuditError(f"pool {self.name}: no entry applies to {plan.problem} ({reasons})")
        return resolved
