"""An oracle protocol: a benchmark's correctness check written as data (`oracles/<name>.toml`), loaded and
validated into an `Oracle`.

A protocol says which pool inputs the checker draws (in stages, in trial order), which reference it compares
against (the fp32 reference in a stated math mode, or the fp64 one), the comparison rule (allclose tolerances
per output dtype and per problem; fraction of elements within tolerance; cosine / relative-L1 / RMSE
thresholds; the NaN policy; non-finite outputs; all-zero outputs; bitwise-equal repeats), which run statuses
fail or skip a trial, and how trial verdicts combine. The file format is documented in `oracles/README.md`;
`verdicts.py` applies a protocol to an evidence store.

`Oracle.load(name_or_path)` takes a catalog name (`kernelbench`) or the path of a user's `.toml` file. Every
problem with a file raises `OracleAuditError` on one line naming the file and the field:
`oracle kernelbench.toml: tolerance.float32.atol must be a number ≥ 0, got -1`.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from oracleaudit import fields
from oracleaudit.errors import OracleAuditError
from oracleaudit.fields import Invalid
from oracleaudit.scoring.selector import InputSelector, parse_selector
from oracleaudit.status import FAILURES, Status

__all__ = [
    "COMPONENTS",
    "MATH_MODES",
    "NAN_POLICIES",
    "SCHEMA_VERSION",
    "InputSelector",
    "Oracle",
    "Reference",
    "Criterion",
    "Stage",
    "Tol",
    "Tolerances",
    "catalog",
    "catalog_dir",
]

SCHEMA_VERSION = 1

PRECISIONS = ("fp32", "fp64")
MATH_MODES = {
    "default": (False, True),   # PyTorch's defaults: (matmul TF32, cuDNN TF32) = (off, on)
    "no_tf32": (False, False),
    "tf32": (True, True),
    "fp64": (False, False),     # the fp64 reference never uses TF32
}
"""Math modes of a reference, as the TF32 flags (torch.backends.cuda.matmul.allow_tf32,
torch.backends.cudnn.allow_tf32) the evidence records on every row."""

NAN_POLICIES = ("fails", "equal_nan", "nonfinite_in_both_passes")
RTOL_SCALES = ("reference", "output")
DTYPE_KEYS = ("float32", "float16", "bfloat16", "float64", "integer", "default")
COMBINE_MODES = ("all",)
MISSING_REFERENCE = ("skip", "fail")
TIMEOUT_SCOPES = ("run", "evaluation")  # timeout_s bounds one kernel run, or the sum of the protocol's runs
NONFINITE_REFERENCE = ("judge", "skip")

COMPONENTS = ("inputs", "tolerance", "reference", "rules")
"""The parts of a protocol that patch attribution swaps between two oracles: `inputs` (the stages: their
inputs and their own overrides), `tolerance` (the tolerance tables), `reference` (precision and math mode),
`rules` (the comparison rule and the status policy)."""

_TOP = ("schema_version", "name", "description", "source", "reference", "tolerance", "rule", "statuses",
        "stages", "combine")
_RULE_FIELDS = ("allclose", "rtol_scales", "nan", "nonfinite_output_fails", "nonfinite_reference_fails",
                "min_fraction_within", "min_cosine", "max_rel_l1", "max_rmse", "all_zero_fails", "bitwise_repeat",
                "repeat_allclose")
_STAGE_FIELDS = ("name", "inputs", "problems", "rule", "tolerance_scale", "statuses", "missing_reference",
                 "nonfinite_reference")


# ---------------------------------------------------------------------------------------------------------
# Inputs


# ---------------------------------------------------------------------------------------------------------
# Tolerances, rules, stages


@dataclass(frozen=True)
class Tol:
    atol: float
    rtol: float

    def scaled(self, factor: float) -> "Tol":
        return Tol(self.atol * factor, self.rtol * factor)


@dataclass(frozen=True)
class Tolerances:
    """allclose tolerances by output dtype (`float32`, `float16`, `bfloat16`, `float64`, `integer` for integer
    and bool outputs, `default` for any other), with per-problem overrides matched by glob on the problem
    label (case-insensitive; the first matching override that names the dtype wins)."""

    by_dtype: tuple[tuple[str, Tol], ...]
    per_problem: tuple[tuple[tuple[str, ...], tuple[tuple[str, Tol], ...]], ...] = ()

    def lookup(self, problem: str, dtype: str) -> Tol:
        key = _dtype_key(dtype)
        for patterns, table in self.per_problem:
            if any(fnmatch.fnmatchcase(problem.lower(), p.lower()) for p in patterns):
                found = dict(table).get(key) or dict(table).get("default")
                if found is not None:
                    return found
        found = _pick(dict(self.by_dtype), key)
        if found is None:  # unreachable for a validated protocol: float32 or default is required
            raise OracleAuditError(f"no tolerance for dtype {dtype}")
        return found

    def values(self) -> list[Tol]:
        return [t for _, t in self.by_dtype] + [t for _, table in self.per_problem for _, t in table]

    def uniform(self, t: float) -> "Tolerances":
        """The same tables with every atol and rtol set to `t` (per-problem overrides dropped)."""
        return Tolerances(tuple((k, Tol(t, t)) for k, _ in self.by_dtype))


def _dtype_key(dtype: str) -> str:
    if dtype in ("float32", "float16", "bfloat16", "float64"):
        return dtype
    if dtype.startswith(("int", "uint")) or dtype == "bool":
        return "integer"
    return "default"


def _pick(table: Mapping[str, Tol], key: str) -> Tol | None:
    return table.get(key) or table.get("default") or table.get("float32")


@dataclass(frozen=True)
class Criterion:
    """The comparison of one output with the reference (all parts that are set must pass)."""

    allclose: bool = True
    rtol_scales: str = "reference"  # |out − ref| ≤ atol + rtol·|ref|, or rtol·|out| (torch.allclose(ref, out))
    nan: str = "fails"
    nonfinite_output_fails: bool = False
    nonfinite_reference_fails: bool = False  # any NaN/Inf in the reference fails the output too
    min_fraction_within: float | None = None
    min_cosine: float | None = None
    max_rel_l1: float | None = None
    max_rmse: float | None = None
    all_zero_fails: bool = False
    bitwise_repeat: bool = False
    repeat_allclose: bool = False  # the second run must pass the comparison too (known only as bitwise equal)


@dataclass(frozen=True)
class Stage:
    """One stage of a protocol: its inputs in trial order and its own overrides of the protocol's rule
    (`rule` holds only the fields the stage sets), tolerance scale and status policy."""

    name: str
    inputs: tuple[InputSelector, ...]
    rule: tuple[tuple[str, Any], ...] = ()
    tolerance_scale: float = 1.0
    fail_statuses: tuple[str, ...] | None = None
    skip_statuses: tuple[str, ...] | None = None
    missing_reference: str = "skip"
    problems: tuple[str, ...] = ()  # glob patterns on the problem label (any case); empty: every problem
    nonfinite_reference: str = "judge"  # "skip": leave out inputs on which the problem's reference has NaN/Inf

    def draws(self, key: str) -> bool:
        return any(s.matches(key) for s in self.inputs)

    def applies(self, problem: str) -> bool:
        """Whether the stage runs on this problem at all."""
        return not self.problems or any(fnmatch.fnmatchcase(problem.lower(), p.lower()) for p in self.problems)


@dataclass(frozen=True)
class Reference:
    precision: str = "fp32"
    math_mode: str = "default"
    cast_inputs: str | None = None  # every input and init input cast to this dtype first (scoring/casting.py)


@dataclass(frozen=True)
class Oracle:
    """A validated protocol. `stage_rule`, `stage_statuses` and `stage_tolerance` give a stage's effective
    settings; `hybrid` builds the protocols that patch attribution compares."""

    name: str
    description: str
    reference: Reference
    tolerance: Tolerances
    rule: Criterion
    fail_statuses: tuple[str, ...]
    skip_statuses: tuple[str, ...]
    timeout_s: float | None
    stages: tuple[Stage, ...]
    combine: str = "all"
    source: str = ""
    path: Path | None = field(default=None, compare=False)
    timeout_scope: str = "run"

    # ---- effective settings of a stage --------------------------------------------------------------------

    def stage_rule(self, stage: Stage) -> Criterion:
        return replace(self.rule, **dict(stage.rule))

    def stage_statuses(self, stage: Stage) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(fail, skip) statuses of a stage: the stage's lists where it gives them, the protocol's otherwise."""
        fail = stage.fail_statuses if stage.fail_statuses is not None else self.fail_statuses
        skip = stage.skip_statuses if stage.skip_statuses is not None else self.skip_statuses
        if stage.skip_statuses is not None and stage.fail_statuses is None:
            fail = tuple(s for s in self.fail_statuses if s not in skip)
        return fail, skip

    # ---- derived protocols -----------------------------------------------------------------------------------

    def with_tolerance(self, t: float, name: str | None = None) -> "Oracle":
        """This protocol with every allclose tolerance (and the fraction-within tolerance) set to atol = rtol = t."""
        return replace(self, name=name or f"{self.name}@{t:g}", tolerance=self.tolerance.uniform(t))

    def hybrid(self, other: "Oracle", components: Iterable[str], name: str | None = None) -> "Oracle":
        """This protocol with the named components (see `COMPONENTS`) taken from `other`."""
        taken = set(components)
        unknown = taken - set(COMPONENTS)
        if unknown:
            raise OracleAuditError(f"unknown protocol components {sorted(unknown)} (known: {', '.join(COMPONENTS)})")
        changes: dict[str, Any] = {}
        if "inputs" in taken:
            changes["stages"] = other.stages
        if "tolerance" in taken:
            changes["tolerance"] = other.tolerance
        if "reference" in taken:
            changes["reference"] = other.reference
        if "rules" in taken:
            changes.update(rule=other.rule, fail_statuses=other.fail_statuses, skip_statuses=other.skip_statuses,
                           timeout_s=other.timeout_s, timeout_scope=other.timeout_scope)
        label = name or f"{self.name}+{'+'.join(c for c in COMPONENTS if c in taken) or 'nothing'}"
        return replace(self, name=label, **changes)

    def differing_components(self, other: "Oracle") -> list[str]:
        """The components (in `COMPONENTS` order) in which the two protocols differ."""
        return [c for c in COMPONENTS if replace(self.hybrid(other, [c]), name=self.name) != self]

    # ---- loading --------------------------------------------------------------------------------------------

    @classmethod
    def load(cls, name_or_path: str | Path) -> "Oracle":
        """A catalog protocol by name (`kernelbench`) or a protocol file by path; validated."""
        text = str(name_or_path)
        path = Path(name_or_path)
        if not (isinstance(name_or_path, Path) or path.suffix == ".toml" or "/" in text or "\\" in text):
            path = catalog_dir() / f"{text}.toml"
            if not path.is_file():
                raise OracleAuditError(f"no catalog oracle named {text!r} (catalog: {', '.join(catalog()) or 'none'}); "
                                       "pass the path of a .toml protocol file instead")
        if not path.is_file():
            raise OracleAuditError(f"oracle {path}: no such file")
        return cls.from_text(path.read_text(encoding="utf-8"), source=path)

    @classmethod
    def from_text(cls, text: str, source: str | Path = "<text>") -> "Oracle":
        path = Path(source) if isinstance(source, Path) else None
        label = path.name if path is not None else str(source)
        try:
            data = tomllib.loads(text)
            return _parse(data, path, None if label == "<text>" else Path(label).stem)
        except Invalid as err:
            raise OracleAuditError(f"oracle {label}: {err}") from None
        except tomllib.TOMLDecodeError as err:
            raise OracleAuditError(f"oracle {label}: not valid TOML: {err}") from None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "source": self.source,
                "reference": {"precision": self.reference.precision, "math_mode": self.reference.math_mode,
                              "cast_inputs": self.reference.cast_inputs},
                "stages": [{"name": s.name, "inputs": [i.describe() for i in s.inputs],
                            "tolerance_scale": s.tolerance_scale} for s in self.stages],
                "path": str(self.path) if self.path else None}


def catalog_dir() -> Path:
    """The shipped oracle catalog (`oracles/` in a checkout, `oracleaudit/_shipped/oracles` in a wheel)."""
    from oracleaudit.shipped import shipped_dir

    try:
        return shipped_dir("oracles")
    except FileNotFoundError as err:
        raise OracleAuditError(str(err)) from None


def catalog() -> list[str]:
    """The names of the catalog protocols, sorted."""
    return sorted(p.stem for p in catalog_dir().glob("*.toml"))


def input_cover(problem: str, keys: Sequence[str], oracles: Sequence[Oracle]) -> tuple[str, ...]:
    """A small set of the pool input `keys` of `problem` that holds, for each oracle and each shape variant
    of the inputs it draws, one such input (greedily: the key in the most of those sets not yet covered, the
    first in `keys` of equals), in `keys` order. A kernel that fails on every input of a shape (a crash or a
    hang usually depends on the shape, not the values) is killed by each of these oracles once it is observed
    on the cover: the run stage observes a variant's cover inputs even where it infers the rest
    (supervisor.py)."""
    from oracleaudit.pool.key import parse_input_key

    shape = {k: (parse_input_key(k) or {}).get("shape") for k in keys}
    sets: dict[tuple[int, str | None], set[str]] = {}
    for index, oracle in enumerate(oracles):
        for k in keys:
            if any(stage.applies(problem) and stage.draws(k) for stage in oracle.stages):
                sets.setdefault((index, shape[k]), set()).add(k)
    open_sets = list(sets.values())
    order = {k: i for i, k in enumerate(keys)}
    chosen: set[str] = set()
    while open_sets:
        best = max(keys, key=lambda k: (sum(k in d for d in open_sets), -order[k]))
        chosen.add(best)
        open_sets = [d for d in open_sets if best not in d]
    return tuple(k for k in keys if k in chosen)


def input_deciders(problem: str, keys: Sequence[str], oracles: Sequence[Oracle]
                   ) -> tuple[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]:
    """Per input key of `problem`: the indices of `oracles` that draw it, of those that fail a trial with a
    RuntimeError there, and of those that fail one with a Timeout (a stage that applies and draws it, with the
    status among its fail statuses; a stage that leaves out inputs by the reference's values is not counted as
    failing, since it may leave this one out). An oracle fails a mutant on any failing trial (`combine =
    "all"`), so once every oracle drawing an input has failed a variant, its row there changes no verdict: the
    run stage does not observe it after the variant's crash or hang (`execution.ledger`)."""
    out = []
    for key in keys:
        draws: set[int] = set()
        fails: dict[str, set[int]] = {Status.RUNTIME_ERROR: set(), Status.TIMEOUT: set()}
        for index, oracle in enumerate(oracles):
            for stage in oracle.stages:
                if not (stage.applies(problem) and stage.draws(key)):
                    continue
                draws.add(index)
                fail, _ = oracle.stage_statuses(stage)
                for status, members in fails.items():
                    if status in fail and stage.nonfinite_reference != "skip" and oracle.combine == "all":
                        members.add(index)
        out.append((key, tuple(sorted(draws)), tuple(sorted(fails[Status.RUNTIME_ERROR])),
                    tuple(sorted(fails[Status.TIMEOUT]))))
    return tuple(out)


@dataclass(frozen=True)
class RunCover:
    """What the run stage needs of the oracles it serves (`execution.plan.Cover`): called with a problem and
    its input keys, the `input_cover`; `deciders`, the `input_deciders`."""

    oracles: tuple[Oracle, ...]

    def __call__(self, problem: str, keys: Sequence[str]) -> tuple[str, ...]:
        return input_cover(problem, keys, self.oracles)

    def deciders(self, problem: str, keys: Sequence[str]):
        return input_deciders(problem, keys, self.oracles)


def covering(names: Sequence[str | Path] = ()) -> RunCover:
    """The run stage's cover (`execution.plan.Cover`) of these oracles (catalog names or protocol files; none:
    every catalog oracle)."""
    return RunCover(tuple(Oracle.load(name) for name in names or catalog()))


# ---------------------------------------------------------------------------------------------------------
# Parsing


def _statuses(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise Invalid(f"{where} must be a list of statuses, got {fields.type_name(value)}")
    for status in value:
        if status not in FAILURES:
            raise Invalid(f"{where}: unknown status {status!r} (known: {', '.join(FAILURES)})")
    if len(set(value)) != len(value):
        raise Invalid(f"{where} repeats a status: {value!r}")
    return tuple(value)


def _tol_table(raw: Any, where: str) -> tuple[tuple[str, Tol], ...]:
    raw = fields.table(raw, where)
    out = []
    for key, value in raw.items():
        if key not in DTYPE_KEYS:
            raise Invalid(f"{where}: unknown dtype {key!r} (known: {', '.join(DTYPE_KEYS)})")
        entry = fields.table(value, f"{where}.{key}")
        fields.known(entry, ("atol", "rtol"), f"{where}.{key}")
        for part in ("atol", "rtol"):
            if part not in entry:
                raise Invalid(f"{where}.{key}.{part} is missing")
        out.append((key, Tol(fields.number(entry["atol"], f"{where}.{key}.atol", low=0.0),
                             fields.number(entry["rtol"], f"{where}.{key}.rtol", low=0.0))))
    return tuple(out)


def _tolerances(raw: Any) -> Tolerances:
    raw = dict(fields.table(raw, "tolerance"))
    per_problem_raw = raw.pop("per_problem", [])
    by_dtype = _tol_table(raw, "tolerance")
    if not any(k in ("float32", "default") for k, _ in by_dtype):
        raise Invalid("tolerance needs a float32 (or default) entry, e.g. float32 = { atol = 1e-4, rtol = 1e-4 }")
    if not isinstance(per_problem_raw, list):
        raise Invalid(f"tolerance.per_problem must be an array of tables ([[tolerance.per_problem]]), "
                       f"got {fields.type_name(per_problem_raw)}")
    per_problem = []
    for index, item in enumerate(per_problem_raw, start=1):
        where = f"tolerance.per_problem[{index}]"
        item = dict(fields.table(item, where))
        problems = item.pop("problems", None)
        if not isinstance(problems, list) or not problems or not all(isinstance(p, str) and p for p in problems):
            raise Invalid(f"{where}.problems must be a non-empty list of problem-label patterns, got {problems!r}")
        table = _tol_table(item, where)
        if not table:
            raise Invalid(f"{where} gives no dtype tolerance")
        per_problem.append((tuple(problems), table))
    return Tolerances(by_dtype, tuple(per_problem))


def _rule_fields(raw: Any, where: str) -> dict[str, Any]:
    raw = fields.table(raw, where)
    fields.known(raw, _RULE_FIELDS, where)
    out: dict[str, Any] = {}
    for name, value in raw.items():
        at = f"{where}.{name}"
        if name in ("allclose", "nonfinite_output_fails", "nonfinite_reference_fails", "all_zero_fails",
                    "bitwise_repeat", "repeat_allclose"):
            out[name] = fields.boolean(value, at)
        elif name in ("rtol_scales", "nan"):
            out[name] = fields.one_of(value, RTOL_SCALES if name == "rtol_scales" else NAN_POLICIES, at)
        elif name in ("min_fraction_within", "min_cosine"):
            out[name] = fields.number(value, at, low=-1.0 if name == "min_cosine" else 0.0, high=1.0)
        else:
            out[name] = fields.number(value, at, low=0.0)
    return out


def _stage(raw: Any, index: int, protocol_rule: Criterion) -> Stage:
    where = f"stages[{index}]"
    raw = fields.table(raw, where)
    fields.known(raw, _STAGE_FIELDS, where)
    name = raw.get("name", f"stage{index}")
    if not isinstance(name, str) or not name:
        raise Invalid(f"{where}.name must be a non-empty string, got {name!r}")
    inputs = raw.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise Invalid(f"{where}.inputs must be a non-empty list of pool keys, patterns or selector tables, "
                       f"got {inputs!r}")
    selectors = tuple(parse_selector(item, f"{where}.inputs[{i}]") for i, item in enumerate(inputs, start=1))
    problems = raw.get("problems", [])
    if not isinstance(problems, list) or not all(isinstance(p, str) and p for p in problems):
        raise Invalid(f"{where}.problems must be a list of problem-label patterns, got {problems!r}")
    rule = _rule_fields(raw.get("rule", {}), f"{where}.rule")
    _check_rule(replace(protocol_rule, **rule), f"{where}.rule")
    scale = fields.number(raw.get("tolerance_scale", 1.0), f"{where}.tolerance_scale", low=0.0, open_low=True)
    fail = skip = None
    if "statuses" in raw:
        statuses = fields.table(raw["statuses"], f"{where}.statuses")
        fields.known(statuses, ("fail", "skip"), f"{where}.statuses")
        fail = _statuses(statuses["fail"], f"{where}.statuses.fail") if "fail" in statuses else None
        skip = _statuses(statuses["skip"], f"{where}.statuses.skip") if "skip" in statuses else None
        if fail is not None and skip is not None:
            _check_partition(fail, skip, f"{where}.statuses")
    missing = fields.one_of(raw.get("missing_reference", "skip"), MISSING_REFERENCE, f"{where}.missing_reference")
    nonfinite = fields.one_of(raw.get("nonfinite_reference", "judge"), NONFINITE_REFERENCE,
                              f"{where}.nonfinite_reference")
    return Stage(name, selectors, tuple(sorted(rule.items())), scale, fail, skip, missing, tuple(problems),
                 nonfinite)


def _check_partition(fail: tuple[str, ...], skip: tuple[str, ...], where: str) -> None:
    both = sorted(set(fail) & set(skip))
    if both:
        raise Invalid(f"{where}: {', '.join(both)} cannot both fail and skip")
    missing = [s for s in FAILURES if s not in fail and s not in skip]
    if missing:
        raise Invalid(f"{where}: {', '.join(missing)} must be listed in fail or skip")


def _check_rule(rule: Criterion, where: str) -> None:
    if not (rule.allclose or rule.min_fraction_within is not None or rule.min_cosine is not None
            or rule.max_rel_l1 is not None or rule.max_rmse is not None or rule.bitwise_repeat
            or rule.nonfinite_output_fails or rule.all_zero_fails):
        raise Invalid(f"{where}: the rule checks nothing (set allclose, min_fraction_within, a metric threshold, "
                       "bitwise_repeat, nonfinite_output_fails or all_zero_fails)")


def _parse(data: dict[str, Any], path: Path | None, default_name: str | None) -> Oracle:
    fields.known(data, _TOP, "")
    if "schema_version" not in data:
        raise Invalid(f"schema_version is missing (this version of oracleaudit reads {SCHEMA_VERSION})")
    if data["schema_version"] != SCHEMA_VERSION:
        raise Invalid(f"schema_version must be {SCHEMA_VERSION}, got {data['schema_version']!r}")
    name = data.get("name", default_name)
    if name is None:
        raise Invalid("name is missing (a protocol read from text needs name = \"...\")")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
        raise Invalid(f"name must be letters, digits, '.', '_' or '-', got {name!r}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise Invalid(f"description must be a one-line string, got {description!r}")
    source = data.get("source", "")
    if not isinstance(source, str):
        raise Invalid(f"source must be a string, got {fields.type_name(source)}")

    reference_raw = fields.table(data.get("reference", {}), "reference")
    fields.known(reference_raw, ("precision", "math_mode", "cast_inputs"), "reference")
    cast = reference_raw.get("cast_inputs")
    if cast is not None and cast != "float32":
        raise Invalid(f"reference.cast_inputs must be \"float32\" (or left out), got {cast!r}")
    precision = fields.one_of(reference_raw.get("precision", "fp32"), PRECISIONS, "reference.precision")
    mode = fields.one_of(reference_raw.get("math_mode", "fp64" if precision == "fp64" else "default"),
                         tuple(MATH_MODES), "reference.math_mode")
    if (precision == "fp64") != (mode == "fp64"):
        raise Invalid(f"reference.math_mode {mode!r} does not fit precision {precision!r} "
                       "(the fp64 reference has math_mode \"fp64\"; an fp32 one default, no_tf32 or tf32)")

    if "tolerance" not in data:
        raise Invalid("tolerance is missing (e.g. [tolerance] float32 = { atol = 1e-4, rtol = 1e-4 })")
    tolerance = _tolerances(data["tolerance"])
    rule = Criterion(**_rule_fields(data.get("rule", {}), "rule"))

    statuses = fields.table(data.get("statuses", {}), "statuses")
    fields.known(statuses, ("fail", "skip", "timeout_s", "timeout_scope"), "statuses")
    skip = _statuses(statuses.get("skip", []), "statuses.skip")
    fail = _statuses(statuses["fail"], "statuses.fail") if "fail" in statuses else tuple(
        s for s in FAILURES if s not in skip)
    _check_partition(fail, skip, "statuses")
    timeout = statuses.get("timeout_s")
    if timeout is not None:
        timeout = fields.number(timeout, "statuses.timeout_s", low=0.0, open_low=True)
    scope = fields.one_of(statuses.get("timeout_scope", "run"), TIMEOUT_SCOPES, "statuses.timeout_scope")

    stages_raw = data.get("stages")
    if not isinstance(stages_raw, list) or not stages_raw:
        raise Invalid("stages is missing or empty (add [[stages]] tables with inputs)")
    stages = tuple(_stage(raw, i, rule) for i, raw in enumerate(stages_raw, start=1))
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise Invalid(f"stages repeat a name: {names!r}")
    combine = fields.one_of(data.get("combine", "all"), COMBINE_MODES, "combine")

    uses_fraction = rule.min_fraction_within is not None or any(
        dict(s.rule).get("min_fraction_within") is not None for s in stages)
    if uses_fraction:
        for tol in tolerance.values():
            if tol.atol != tol.rtol:
                raise Invalid(f"min_fraction_within counts elements within atol = rtol = t, but a tolerance has "
                               f"atol {tol.atol:g} ≠ rtol {tol.rtol:g}")
    return Oracle(name=name, description=description.strip(), reference=Reference(precision, mode, cast),
                  tolerance=tolerance, rule=rule, fail_statuses=fail, skip_statuses=skip, timeout_s=timeout,
                  stages=stages, combine=combine, source=source, path=path, timeout_scope=scope)
