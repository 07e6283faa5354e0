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
   With the pool's `derive = "draws"`, a drawn distribution (one not based on `official`) replaces instead
   each float tensor that get_inputs() draws with `torch.rand`/`randn`/`rand_like`/`randn_like`, as it is
   drawn (same generator, same order), so what get_inputs() does with the draw still applies: KLDivLoss's
   `torch.rand(...).softmax(-1)` stays a probability row under any distribution, where replacing the
   result would feed it negative values. For a get_inputs() that only draws and returns, both derivations
   give bitwise the same inputs; one that draws with none of those functions has its result replaced.
   `official`-based entries (official, scaled) are get_inputs()'s own values, scaled after it returns, as
   KernelBench-verified scales its hidden configs.
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
    derive = "draws"             # optional: "outputs" (default) or "draws" (step 2 above)
    [[entries]]
    distribution = "normal"      # a name of DISTRIBUTIONS
    seeds = [0, 1]               # a list of ints, or "kernelbench" (KernelBench's 5 trial seeds); or seed = 0
    variants = ["official"]      # optional, default ["official"]; official, odd, small, batch
    scales = [3.0]               # optional (or `scale = 3.0`): multiply the drawn floats
    draws = [2, 3]               # optional (or `draw = 2`, default 1): the k-th get_inputs() call after the seed
    math_mode = "no_tf32"        # optional: default, no_tf32 or tf32 (`oracleaudit.pool.entry`)
    weights = "trial"            # optional: models built after this input's seed ("fixed": after seed 42)
    # ...and the distribution's own parameters, e.g. `value = 0.5` for "constant"

Errors name the file, the entry (1-based, in file order) and the field:
`pool default.toml: entry 3: unknown distribution 'gauss' (known: ...)`.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping

from oracleaudit.errors import OracleAuditError
from oracleaudit.fields import Invalid, number, one_of, type_name
from oracleaudit.files import file_sha256
from oracleaudit.kernelbench import official_seeds
from oracleaudit.pool.distributions import (
    BASES,
    DISTRIBUTIONS,
    REQUIRED,
    Distribution,
    constant,
    laplace,
    lognormal,
    mixed_range,
    near_max,
    near_ties,
    normal,
    official,
    ramp,
    uniform,
    uniform_pm1,
    zeros,
)
from oracleaudit.pool.entry import (
    DERIVATIONS,
    DRAW_FUNCTIONS,
    MATH_MODES,
    MAX_DRAW,
    PoolEntry,
    math_flags,
    recorded_mode,
)
from oracleaudit.pool.key import ENTRY_WEIGHTS, input_key
from oracleaudit.pool.shapes import SHAPES, ResolvedShape, ShapePlan, resolve_shapes
from oracleaudit.problem import Problem

__all__ = [
    "BASES",
    "DERIVATIONS",
    "DISTRIBUTIONS",
    "DRAW_FUNCTIONS",
    "MATH_MODES",
    "SCHEMA_VERSION",
    "SHAPES",
    "Distribution",
    "Pool",
    "PoolEntry",
    "ResolvedShape",
    "ShapePlan",
    "constant",
    "laplace",
    "lognormal",
    "math_flags",
    "mixed_range",
    "near_max",
    "near_ties",
    "normal",
    "official",
    "pools_dir",
    "ramp",
    "recorded_mode",
    "resolve_shapes",
    "shipped_pools",
    "uniform",
    "uniform_pm1",
    "zeros",
]

SCHEMA_VERSION = 1
KERNELBENCH_SEEDS = "kernelbench"
RANDN_SEED = 42
_MAX_SEED = 2**64 - 1
_ENTRY_FIELDS = ("distribution", "seeds", "seed", "variants", "scale", "scales", "draw", "draws", "math_mode",
                 "weights")


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


def _seeds(raw: Mapping[str, Any], dist_name: str, where: str) -> list[int]:
    if "seeds" in raw and "seed" in raw:
        raise Invalid(f"{where}: give seeds or seed, not both")
    if dist_name == "randn_seed42":
        given = raw.get("seeds", raw.get("seed", [RANDN_SEED]))
        if given not in ([RANDN_SEED], RANDN_SEED):
            raise Invalid(f"{where}: seeds: randn_seed42 always uses seed {RANDN_SEED}, got {given!r}")
        return [RANDN_SEED]
    if "seed" in raw:
        values = [raw["seed"]]
        label = "seed"
    elif "seeds" in raw:
        if raw["seeds"] == KERNELBENCH_SEEDS:
            return official_seeds()
        if not isinstance(raw["seeds"], list):
            raise Invalid(f"{where}: seeds must be a list of integers or \"{KERNELBENCH_SEEDS}\", "
                           f"got {raw['seeds']!r}")
        values = raw["seeds"]
        label = "seeds"
    else:
        raise Invalid(f"{where}: seeds is missing (a list of integers, or \"{KERNELBENCH_SEEDS}\")")
    if not values:
        raise Invalid(f"{where}: seeds is empty")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SEED:
            raise Invalid(f"{where}: {label} must be integers in [0, 2**64 - 1], got {value!r}")
    if len(set(values)) != len(values):
        raise Invalid(f"{where}: {label} repeat a value: {values!r}")
    return list(values)


def _scales(raw: Mapping[str, Any], dist_name: str, where: str) -> list[float | None]:
    if "scale" in raw and "scales" in raw:
        raise Invalid(f"{where}: give scale or scales, not both")
    if "scales" in raw:
        if not isinstance(raw["scales"], list) or not raw["scales"]:
            raise Invalid(f"{where}: scales must be a non-empty list of numbers, got {raw['scales']!r}")
        scales: list[float | None] = [number(s, f"{where}: scales") for s in raw["scales"]]
    elif "scale" in raw:
        scales = [number(raw["scale"], f"{where}: scale")]
    else:
        scales = [None]
    if dist_name == "scaled" and scales == [None]:
        raise Invalid(f"{where}: distribution 'scaled' needs scale or scales")
    if dist_name == "official" and scales != [None]:
        raise Invalid(f"{where}: scale: to scale the official inputs use distribution 'scaled'")
    if len(set(scales)) != len(scales):
        raise Invalid(f"{where}: scales repeat a value: {raw['scales']!r}")
    return scales


def _params(raw: Mapping[str, Any], dist_name: str, where: str) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The distribution's parameters (defaults filled in) and those that name it in keys: the required ones
    and the ones given with a non-default value, in declaration order."""
    kind = DISTRIBUTIONS[dist_name]
    values: dict[str, Any] = {}
    keyed: list[tuple[str, Any]] = []
    for name, param in kind.params.items():
        if name not in raw:
            if param.default is REQUIRED:
                raise Invalid(f"{where}: distribution '{dist_name}' needs {name}")
            values[name] = param.default
            continue
        value = raw[name]
        if param.kind == "number":
            value = number(value, f"{where}: {name}")
        elif param.kind == "choice" and value not in param.choices:
            raise Invalid(f"{where}: {name} must be one of {', '.join(param.choices)}, got {value!r}")
        elif param.kind == "base" and value not in BASES:
            raise Invalid(f"{where}: of must be one of {', '.join(BASES)}, got {value!r}")
        values[name] = value
        if param.default is REQUIRED or value != param.default:
            keyed.append((name, value))
    return values, keyed


def _draws(raw: Mapping[str, Any], where: str) -> list[int]:
    if "draw" in raw and "draws" in raw:
        raise Invalid(f"{where}: give draw or draws, not both")
    values = raw.get("draws", [raw.get("draw", 1)])
    label = "draws" if "draws" in raw else "draw"
    if not isinstance(values, list) or not values:
        raise Invalid(f"{where}: draws must be a non-empty list of integers, got {values!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DRAW:
            raise Invalid(f"{where}: {label} must be integers in [1, {MAX_DRAW}], got {value!r}")
    if len(set(values)) != len(values):
        raise Invalid(f"{where}: draws repeat a value: {values!r}")
    return list(values)


def _expand(raw: Any, index: int) -> list[PoolEntry]:
    """The pool entries of one `[[entries]]` table (1-based `index`)."""
    where = f"entry {index}"
    if not isinstance(raw, dict):
        raise Invalid(f"{where}: must be a table, got {type_name(raw)}")
    if "distribution" not in raw:
        raise Invalid(f"{where}: distribution is missing")
    dist_name = raw["distribution"]
    if not isinstance(dist_name, str) or dist_name not in DISTRIBUTIONS:
        raise Invalid(f"{where}: unknown distribution {dist_name!r} (known: {', '.join(DISTRIBUTIONS)})")
    kind = DISTRIBUTIONS[dist_name]
    for name in raw:
        if name not in _ENTRY_FIELDS and name not in kind.params:
            allowed = ", ".join(list(_ENTRY_FIELDS) + list(kind.params))
            raise Invalid(f"{where}: unknown field {name!r} for distribution '{dist_name}' (allowed: {allowed})")
    params, keyed = _params(raw, dist_name, where)
    seeds = _seeds(raw, dist_name, where)
    scales = _scales(raw, dist_name, where)
    variants = raw.get("variants", ["official"])
    if not isinstance(variants, list) or not variants:
        raise Invalid(f"{where}: variants must be a non-empty list, got {variants!r}")
    for variant in variants:
        if variant not in SHAPES:
            raise Invalid(f"{where}: unknown variant {variant!r} (known: {', '.join(SHAPES)})")
    if len(set(variants)) != len(variants):
        raise Invalid(f"{where}: variants repeat a value: {variants!r}")

    draws = _draws(raw, where)
    math_mode = one_of(raw.get("math_mode", "default"), MATH_MODES, f"{where}: math_mode")
    weights = one_of(raw.get("weights", "fixed"), ENTRY_WEIGHTS, f"{where}: weights")

    base = kind.build(params)
    entries = []
    for variant in variants:
        for scale in scales:
            dist = base if scale is None else base.scaled(scale)
            for draw in draws:
                key_params = [*keyed, *([("draw", draw)] if draw != 1 else []),
                              *([("math", math_mode)] if math_mode != "default" else []),
                              *([("weights", weights)] if weights != "fixed" else [])]
                for seed in seeds:
                    entries.append(PoolEntry(
                        key=input_key(dist_name, key_params, scale, seed, variant),
                        distribution=dist_name,
                        seed=seed,
                        shape=variant,
                        scale=1.0 if scale is None else scale,
                        params=tuple(keyed),
                        dist=dist,
                        index=index,
                        draw=draw,
                        math_mode=math_mode,
                        weights=weights,
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
    derive: str = "outputs"
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
        except Invalid as err:
            raise OracleAuditError(f"pool {label}: {err}") from None
        except tomllib.TOMLDecodeError as err:
            raise OracleAuditError(f"pool {label}: not valid TOML: {err}") from None

    @classmethod
    def _parse(cls, text: str, path: Path | None) -> Pool:
        data = tomllib.loads(text)
        known = ("schema_version", "name", "description", "max_elements", "derive", "entries")
        for name in data:
            if name not in known:
                raise Invalid(f"unknown top-level field {name!r} (allowed: {', '.join(known)})")
        if "schema_version" not in data:
            raise Invalid(f"schema_version is missing (this version of oracleaudit reads {SCHEMA_VERSION})")
        if data["schema_version"] != SCHEMA_VERSION:
            raise Invalid(f"schema_version must be {SCHEMA_VERSION}, got {data['schema_version']!r}")
        name = data.get("name", path.stem if path is not None else "pool")
        description = data.get("description", "")
        for field_name, value in (("name", name), ("description", description)):
            if not isinstance(value, str):
                raise Invalid(f"{field_name} must be a string, got {type_name(value)}")
        max_elements = data.get("max_elements")
        if max_elements is not None and (isinstance(max_elements, bool) or not isinstance(max_elements, int)
                                         or max_elements < 1):
            raise Invalid(f"max_elements must be an integer ≥ 1, got {max_elements!r}")
        derive = data.get("derive", "outputs")
        if derive not in DERIVATIONS:
            raise Invalid(f"derive must be one of {', '.join(DERIVATIONS)}, got {derive!r}")
        raw_entries = data.get("entries")
        if not raw_entries:
            raise Invalid("no entries (add [[entries]] tables)")
        if not isinstance(raw_entries, list):
            raise Invalid(f"entries must be an array of tables ([[entries]]), got {type_name(raw_entries)}")
        entries: list[PoolEntry] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_entries, start=1):
            for entry in _expand(raw, index):
                entry = replace(entry, derive=derive)
                if entry.key in seen:
                    raise Invalid(f"entry {index}: key {entry.key!r} repeats one of entry {seen[entry.key]}")
                seen[entry.key] = index
                entries.append(entry)
        return cls(name, path, description, max_elements, tuple(entries), derive)

    def digest(self) -> str:
        """The sha256 of what makes the pool's inputs (entries, derivation, max_elements; not its name,
        description or comments): two pools with one digest give every problem the same inputs."""
        content = {"derive": self.derive, "max_elements": self.max_elements,
                   "entries": [entry.as_json() for entry in self.entries]}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

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
    def shapes(self) -> tuple[str, ...]:
        """The shape variants the pool's entries use, in SHAPES order."""
        used = {e.shape for e in self.entries}
        return tuple(v for v in SHAPES if v in used)

    def shape_plan(self, problem: Problem | Path) -> ShapePlan:
        """The overrides and input shapes of each variant this pool uses, for one problem (cached)."""
        path = Path(problem.path if isinstance(problem, Problem) else problem)
        cache_key = (str(path.resolve()), file_sha256(path))
        if cache_key not in self._plans:
            self._plans[cache_key] = resolve_shapes(problem, self.shapes, self.max_elements)
        return self._plans[cache_key]

    def entries_for(self, problem: Problem | Path) -> list[PoolEntry]:
        """The pool's entries resolved for one problem, in pool order; entries of dropped variants are left
        out (see `shape_plan(problem).dropped`). No applicable entry at all is an error."""
        plan = self.shape_plan(problem)
        resolved = []
        for entry in self.entries:
            variant = plan.get(entry.shape)
            if variant is not None:
                resolved.append(replace(entry, overrides=variant.overrides, input_shapes=variant.input_shapes))
        if not resolved:
            reasons = "; ".join(f"{d.name}: {d.reason}" for d in plan.dropped)
            raise OracleAuditError(f"pool {self.name}: no entry applies to {plan.problem} ({reasons})")
        return resolved
