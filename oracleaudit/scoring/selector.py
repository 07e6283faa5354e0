"""Which pool inputs one `inputs` item of an oracle stage draws (`InputSelector`), and its parsing from the
oracle file: an exact pool key, a glob pattern over keys, or a table matched against the parsed key
(`oracleaudit.pool.key` is the one spelling of keys)."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from typing import Any

from oracleaudit import fields
from oracleaudit.fields import Invalid
from oracleaudit.pool.key import ENTRY_MATH_MODES as POOL_MATH_MODES
from oracleaudit.pool.key import ENTRY_WEIGHTS as POOL_WEIGHTS
from oracleaudit.pool.key import number_text, parse_input_key

_SELECTOR_FIELDS = ("distribution", "seeds", "seed", "variants", "variant", "scales", "scale", "params", "draw",
                    "draws", "math_mode", "weights")


@dataclass(frozen=True)
class InputSelector:
    """Which pool inputs one `inputs` item of a stage draws: an exact key, a glob pattern over keys
    (`official/s=*/official`), or a table matching the parsed key (distribution, seeds, variants, scales,
    params; a part left out must be at its default: unscaled, default parameters, the official shape)."""

    pattern: str | None = None
    distribution: str | None = None
    seeds: tuple[int, ...] | None = None
    variants: tuple[str, ...] = ("official",)
    scales: tuple[float, ...] | None = None
    params: tuple[tuple[str, str], ...] = ()
    draws: tuple[int, ...] = (1,)
    math_mode: str = "default"
    weights: str = "fixed"

    def matches(self, key: str) -> bool:
        if self.pattern is not None:
            return fnmatch.fnmatchcase(key, self.pattern)
        parts = parse_input_key(key)
        if parts is None or parts["distribution"] != self.distribution:
            return False
        if self.seeds is not None and parts["seed"] not in self.seeds:
            return False
        if parts["shape"] not in self.variants:
            return False
        if self.scales is None:
            if parts["scale"] is not None:
                return False
        elif parts["scale"] is None or not any(math.isclose(parts["scale"], s, rel_tol=1e-12) for s in self.scales):
            return False
        if parts["draw"] not in self.draws or parts["math_mode"] != self.math_mode or parts["weights"] != self.weights:
            return False
        return parts["params"] == dict(self.params)

    def describe(self) -> str:
        if self.pattern is not None:
            return self.pattern
        bits = [self.distribution or "?"]
        bits += [f"{k}={v}" for k, v in self.params]
        if self.scales is not None:
            bits.append("x=" + ",".join(number_text(s) for s in self.scales))
        if self.draws != (1,):
            bits.append("draw=" + ",".join(str(d) for d in self.draws))
        if self.math_mode != "default":
            bits.append(f"math={self.math_mode}")
        if self.weights != "fixed":
            bits.append(f"weights={self.weights}")
        bits.append("s=" + ("*" if self.seeds is None else ",".join(str(s) for s in self.seeds)))
        bits.append(",".join(self.variants))
        return "/".join(bits)


def parse_selector(raw: Any, where: str) -> InputSelector:
    """One `inputs` item of an oracle stage; `where` names it in errors."""
    from oracleaudit.pool.distributions import DISTRIBUTIONS
    from oracleaudit.pool.shapes import SHAPES

    if isinstance(raw, str):
        if not raw.strip():
            raise Invalid(f"{where} must be a pool entry key or a pattern, got an empty string")
        return InputSelector(pattern=raw)
    raw = fields.table(raw, where)
    fields.known(raw, _SELECTOR_FIELDS, where)
    dist = raw.get("distribution")
    if dist is None:
        raise Invalid(f"{where}.distribution is missing")
    if dist not in DISTRIBUTIONS:
        raise Invalid(f"{where}.distribution: unknown distribution {dist!r} (known: {', '.join(DISTRIBUTIONS)})")
    for single, plural in (("seed", "seeds"), ("variant", "variants"), ("scale", "scales")):
        if single in raw and plural in raw:
            raise Invalid(f"{where}: give {single} or {plural}, not both")
    seeds: tuple[int, ...] | None = None
    if "seed" in raw or "seeds" in raw:
        value = raw.get("seeds", [raw.get("seed")])
        if value == "kernelbench":
            from oracleaudit.kernelbench import official_seeds

            seeds = tuple(official_seeds())
        else:
            if not isinstance(value, list) or not value or not all(
                    isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value):
                raise Invalid(f"{where}.seeds must be a non-empty list of integers ≥ 0 or \"kernelbench\", "
                               f"got {value!r}")
            seeds = tuple(value)
    variants = raw.get("variants", [raw["variant"]] if "variant" in raw else ["official"])
    if not isinstance(variants, list) or not variants:
        raise Invalid(f"{where}.variants must be a non-empty list, got {variants!r}")
    for variant in variants:
        if variant not in SHAPES:
            raise Invalid(f"{where}.variants: unknown variant {variant!r} (known: {', '.join(SHAPES)})")
    scales = None
    if "scale" in raw or "scales" in raw:
        value = raw.get("scales", [raw.get("scale")])
        if not isinstance(value, list) or not value:
            raise Invalid(f"{where}.scales must be a non-empty list of numbers, got {value!r}")
        scales = tuple(fields.number(v, f"{where}.scales") for v in value)
    params = raw.get("params", {})
    params = fields.table(params, f"{where}.params")
    allowed = DISTRIBUTIONS[dist].params
    for name, value in params.items():
        if name not in allowed:
            raise Invalid(f"{where}.params: distribution {dist!r} has no parameter {name!r} "
                           f"(it has: {', '.join(allowed) or 'none'})")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise Invalid(f"{where}.params.{name} must be a string or a number, got {fields.type_name(value)}")
    keyed = tuple((k, number_text(v) if isinstance(v, (int, float)) else v) for k, v in params.items())
    if "draw" in raw and "draws" in raw:
        raise Invalid(f"{where}: give draw or draws, not both")
    draws = raw.get("draws", [raw.get("draw", 1)])
    if not isinstance(draws, list) or not draws or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in draws):
        raise Invalid(f"{where}.draws must be a non-empty list of integers ≥ 1, got {draws!r}")
    math_mode = fields.one_of(raw.get("math_mode", "default"), POOL_MATH_MODES, f"{where}.math_mode")
    weights = fields.one_of(raw.get("weights", "fixed"), POOL_WEIGHTS, f"{where}.weights")
    return InputSelector(distribution=dist, seeds=seeds, variants=tuple(variants), scales=scales, params=keyed,
                         draws=tuple(draws), math_mode=math_mode, weights=weights)
