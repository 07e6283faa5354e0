"""The mutation rule catalog: one TOML file per family in `mutators/`, each rule a tree-sitter query, a
replacement template and optional semantic predicates. See mutators/README.md for the file format."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from oracleaudit.errors import OracleAuditError
from oracleaudit.shipped import shipped_dir

CATALOG_SCHEMA_VERSION = 1
SCOPES = ("device", "host", "any")
PREDICATES = {
    # name: number of arguments after the capture
    "float": 0, "double": 0, "int": 0, "float_decl": 0, "double_decl": 0, "accumulator": 0,
    "in_kernel": 0, "in_loop": 0, "not_in": 1, "inside": 1, "text_matches": 1, "not_text_matches": 1,
    "declares_shared": 0,
}
TRANSFORMS = ("perturb", "halve", "double", "plus_one", "minus_one", "swap_xy", "swap_yx", "negate_literal",
              "zero", "tenfold", "tenth", "bump_shift", "output_pointer")
_PLACEHOLDER = re.compile(r"\{(\w+)(?:\|(\w+))?\}")
_PREDICATE = re.compile(r"^\s*(\w+)\(\s*(\w+)\s*(?:,\s*(.+?)\s*)?\)\s*$")


@dataclass(frozen=True)
class Predicate:
    name: str
    capture: str
    argument: str | None


@dataclass(frozen=True)
class Rule:
    """One mutation rule. `site` is the capture whose text is replaced by the rendered `replace` template."""

    name: str
    family: str
    description: str
    query: str
    site: str
    replace: str
    scope: str
    where: tuple[Predicate, ...]
    origin: str

    @cached_property
    def compiled(self):
        from tree_sitter import Query

        from oracleaudit.mutation.cudatree import cuda_language

        try:
            return Query(cuda_language(), self.query)
        except Exception as err:  # tree-sitter raises QueryError subclasses with a readable message
            raise OracleAuditError(f"{self.origin}: rule {self.name}: bad tree-sitter query: {err}") from None


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    rules: tuple[Rule, ...]
    origin: str


def default_catalog_dir() -> Path:
    return shipped_dir("mutators")


def load_family(path: Path) -> Family:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise OracleAuditError(f"{path}: no such rule file") from None
    except tomllib.TOMLDecodeError as err:
        raise OracleAuditError(f"{path}: not valid TOML ({err})") from None
    version = data.get("schema_version")
    if version != CATALOG_SCHEMA_VERSION:
        raise OracleAuditError(f"{path}: schema_version must be {CATALOG_SCHEMA_VERSION}, got {version!r}")
    family = _required(data, "family", str, path)
    rules = []
    for i, raw in enumerate(data.get("rules", [])):
        where = "rules[{}]".format(i)
        name = _required(raw, "name", str, path, where)
        origin = f"{path}"
        query = _required(raw, "query", str, path, name)
        site = raw.get("site", "site")
        if f"@{site}" not in query:
            raise OracleAuditError(f"{path}: rule {name}: query has no @{site} capture")
        replace = _required(raw, "replace", str, path, name)
        for capture, transform in _PLACEHOLDER.findall(replace):
            if f"@{capture}" not in query:
                raise OracleAuditError(f"{path}: rule {name}: replace uses {{{capture}}} but the query has no @{capture}")
            if transform and transform not in TRANSFORMS:
                raise OracleAuditError(f"{path}: rule {name}: unknown transform {transform!r}")
        scope = raw.get("scope", "device")
        if scope not in SCOPES:
            raise OracleAuditError(f"{path}: rule {name}: scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        predicates = tuple(_predicate(text, path, name, query) for text in raw.get("where", []))
        rules.append(Rule(name, family, raw.get("description", ""), query, site, replace, scope, predicates, origin))
    if not rules:
        raise OracleAuditError(f"{path}: no rules")
    return Family(family, data.get("description", ""), tuple(rules), str(path))


def load_catalog(directory: Path | None = None) -> list[Family]:
    directory = directory or default_catalog_dir()
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise OracleAuditError(f"{directory}: no rule files (*.toml)")
    families = [load_family(f) for f in files]
    seen: dict[str, str] = {}
    for family in families:
        for rule in family.rules:
            if rule.name in seen:
                raise OracleAuditError(f"{rule.origin}: rule name {rule.name} is also used in {seen[rule.name]}")
            seen[rule.name] = rule.origin
    return families


def select_rules(families: list[Family], family_names: list[str] | None, rule_names: list[str] | None) -> list[Rule]:
    """The rules chosen by --family/--rule filters; an unknown name is an error, an empty choice too."""
    known_families = {f.name for f in families}
    known_rules = {r.name for f in families for r in f.rules}
    for name in family_names or []:
        if name not in known_families:
            raise OracleAuditError(f"--family {name}: unknown family (known: {', '.join(sorted(known_families))})")
    for name in rule_names or []:
        if name not in known_rules:
            raise OracleAuditError(f"--rule {name}: unknown rule (see `oracleaudit mutate --rules`)")
    chosen = [r for f in families for r in f.rules
              if (not family_names or f.name in family_names) and (not rule_names or r.name in rule_names)]
    if not chosen:
        raise OracleAuditError("the --family/--rule filters select no rule")
    return chosen


def _required(table: dict, key: str, kind: type, path: Path, where: str = ""):
    value = table.get(key)
    if not isinstance(value, kind) or (isinstance(value, str) and not value and key != "replace"):
        context = f" {where}" if where else ""
        raise OracleAuditError(f"{path}:{context} field {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _predicate(text: str, path: Path, rule: str, query: str) -> Predicate:
    match = _PREDICATE.match(text)
    if not match:
        raise OracleAuditError(f"{path}: rule {rule}: predicate {text!r} is not of the form name(capture[, arg])")
    name, capture, argument = match.groups()
    if name not in PREDICATES:
        raise OracleAuditError(f"{path}: rule {rule}: unknown predicate {name!r} (known: {', '.join(sorted(PREDICATES))})")
    if (argument is not None) != bool(PREDICATES[name]):
        raise OracleAuditError(f"{path}: rule {rule}: predicate {name} takes {PREDICATES[name]} argument(s) after the capture")
    if f"@{capture}" not in query:
        raise OracleAuditError(f"{path}: rule {rule}: predicate {text!r} names @{capture}, which the query lacks")
    if argument is not None:
        argument = argument.strip().strip("'\"")
    return Predicate(name, capture, argument)
