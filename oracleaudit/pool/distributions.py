"""Input distributions: small composable objects that draw one float tensor shaped like a template from a
CPU generator (`normal().scaled(1e3)`, `normal().mixed(1e3, 1e-3)`, `normal().sorted()`), and the names and
parameters a pool file may use for them (`DISTRIBUTIONS`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from oracleaudit.pool.key import number_text

NEAR_MAX_FP16 = 6e4
NEAR_MAX = 1e30


# Distributions: small composable objects that draw one float tensor shaped like a template


def _work_dtype(template: torch.Tensor) -> torch.dtype:
    return torch.float64 if template.dtype == torch.float64 else torch.float32


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

    @property
    def official_based(self) -> bool:
        """Whether the values are the problem's own inputs, transformed (official, scaled official): such
        values are made from get_inputs()'s result, never drawn inside it."""
        inner = getattr(self, "inner", None)
        return inner.official_based if isinstance(inner, Distribution) else False

    def __repr__(self) -> str:
        return self.describe()


@dataclass(frozen=True, repr=False)
class Official(Distribution):
    """The template itself: the problem's own `get_inputs()` value (torch.rand for KernelBench)."""

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return template

    @property
    def official_based(self) -> bool:
        return True

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
        return "normal()" if (self.mean, self.std) == (0.0, 1.0) else f"normal({number_text(self.mean)}, {number_text(self.std)})"


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
        return f"uniform({number_text(self.low)}, {number_text(self.high)})"


@dataclass(frozen=True, repr=False)
class LogNormal(Distribution):
    mean: float = 0.0
    sigma: float = 1.0

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = torch.randn(template.shape, generator=generator, dtype=_work_dtype(template))
        return torch.exp(x * self.sigma + self.mean).to(template.dtype)

    def describe(self) -> str:
        return f"lognormal({number_text(self.mean)}, {number_text(self.sigma)})"


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
        return f"laplace({number_text(self.loc)}, {number_text(self.b)})"


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
        return f"constant({number_text(self.value)})"


@dataclass(frozen=True, repr=False)
class Ramp(Distribution):
    """Evenly spaced values from `low` to `high` along the flat index (no randomness)."""

    low: float = -1.0
    high: float = 1.0

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = torch.linspace(self.low, self.high, template.numel(), dtype=torch.float64)
        return x.reshape(template.shape).to(template.dtype)

    def describe(self) -> str:
        return f"ramp({number_text(self.low)}, {number_text(self.high)})"


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
        return f"near_ties({number_text(self.base)}, {number_text(self.spread)})"


@dataclass(frozen=True, repr=False)
class Scaled(Distribution):
    inner: Distribution
    factor: float

    def draw(self, template: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.inner.draw(template, generator) * self.factor

    def describe(self) -> str:
        return f"{self.inner.describe()}.scaled({number_text(self.factor)})"


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
        return f"{self.inner.describe()}.mixed({number_text(self.high)}, {number_text(self.low)}, {self.pattern!r})"


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


REQUIRED = object()


@dataclass(frozen=True)
class Param:
    kind: str  # "number", "choice" or "base"
    default: Any = REQUIRED
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
class Kind:
    params: Mapping[str, Param]
    build: Callable[[Mapping[str, Any]], Distribution]


def _base(p: Mapping[str, Any]) -> Distribution:
    return BASES[p["of"]]()


DISTRIBUTIONS: dict[str, Kind] = {
    # the problem's own get_inputs() (KernelBench: torch.rand)
    "official": Kind({}, lambda p: official()),
    "normal": Kind({"mean": Param("number", 0.0), "std": Param("number", 1.0)}, lambda p: normal(p["mean"], p["std"])),
    "uniform": Kind({"low": Param("number"), "high": Param("number")}, lambda p: uniform(p["low"], p["high"])),
    "uniform_pm1": Kind({}, lambda p: uniform_pm1()),
    # the official inputs (or `of`) × scale; needs scale or scales
    "scaled": Kind({"of": Param("base", "official")}, _base),
    # exp(normal(mean, sigma))
    "lognormal": Kind({"mean": Param("number", 0.0), "sigma": Param("number", 1.0)},
                      lambda p: lognormal(p["mean"], p["sigma"])),
    "laplace": Kind({"loc": Param("number", 0.0), "b": Param("number", 1.0)}, lambda p: laplace(p["loc"], p["b"])),
    "zeros": Kind({}, lambda p: zeros()),
    "constant": Kind({"value": Param("number")}, lambda p: constant(p["value"])),
    # `of` values sorted over the flat index (monotone along every dimension)
    "sorted": Kind({"order": Param("choice", "ascending", ("ascending", "descending")), "of": Param("base", "normal")},
                   lambda p: _base(p).sorted(p["order"] == "descending")),
    # evenly spaced values along the flat index
    "ramp": Kind({"low": Param("number", -1.0), "high": Param("number", 1.0)}, lambda p: ramp(p["low"], p["high"])),
    # `of` with each value × high or × low (a large dynamic range)
    "mixed_range": Kind({"high": Param("number", 1e3), "low": Param("number", 1e-3),
                         "pattern": Param("choice", "random", ("random", "alternating")), "of": Param("base", "normal")},
                        lambda p: _base(p).mixed(p["high"], p["low"], p["pattern"])),
    # base + spread·uniform[0, 1)
    "near_ties": Kind({"base": Param("number", 1.0), "spread": Param("number", 1e-4)},
                      lambda p: near_ties(p["base"], p["spread"])),
    # `of` × 1e30 (float16: × 6e4), autokernel's near-max input
    "near_max": Kind({"of": Param("base", "normal")}, lambda p: _base(p).near_max()),
    # torch.randn after seeding 42 (autokernel, sol-execbench-like); the seed is fixed at 42
    "randn_seed42": Kind({}, lambda p: normal()),
}
"""Distribution names a pool file may use: their parameters (with defaults) and what they draw."""
