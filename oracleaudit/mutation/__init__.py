"""The mutate stage: solution files → candidate mutants (catalog rules at syntax sites whose semantic
predicates hold) → batched nvcc compile check and Trivial Compiler Equivalence → the `mutants/` folder."""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import COMPILE_ERROR, DUPLICATE, EQUIVALENT, PENDING, STATUSES, Mutant, mutant_id, write_mutants
from oracleaudit.mutation import compiler
from oracleaudit.mutation.catalog import Rule, load_catalog, select_rules
from oracleaudit.mutation.cudatree import CudaTree
from oracleaudit.mutation.semantics import analyse
from oracleaudit.mutation.site import find_sites
from oracleaudit.problem import bundled_root, pair_solutions
from oracleaudit.source import CudaUnit, line_col, load_units
from oracleaudit.terminal import progress_bar

DEVICE_BATCH = 48


@dataclass
class UnitSites:
    """A CUDA unit, its syntax tree, and the mutants found in it."""

    unit: CudaUnit
    tree: CudaTree
    mutants: list[Mutant] = field(default_factory=list)
    key: str = ""


@dataclass
class MutateResult:
    mutants: list[Mutant]
    solutions: int
    errors: list[str]
    unpaired: list[str]
    wall_s: float = 0.0
    compile_s: float = 0.0
    compiled: int = 0

    def summary(self) -> dict:
        by_status = Counter(m.status for m in self.mutants)
        by_family: dict[str, dict[str, int]] = defaultdict(lambda: {s: 0 for s in STATUSES})
        for mutant in self.mutants:
            by_family[mutant.family][mutant.status] += 1
        return {
            "solutions": self.solutions,
            "mutants": len(self.mutants),
            "by_status": {s: by_status.get(s, 0) for s in STATUSES},
            "by_family": {f: dict(v) for f, v in sorted(by_family.items())},
            "errors": self.errors,
            "unpaired": self.unpaired,
            "wall_s": round(self.wall_s, 2),
            "compile_s": round(self.compile_s, 2),
            "compiled_mutants": self.compiled,
            "per_mutant_compile_ms": round(1000 * self.compile_s / self.compiled, 1) if self.compiled else None,
        }


def _display_path(path: Path) -> str:
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def input_files(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Expand the PATH arguments (files, or directories searched for .py and .cu); missing ones are errors."""
    files: list[Path] = []
    errors: list[str] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in (".py", ".cu") and p.is_file()
                           and "__pycache__" not in p.parts and p.name != "__init__.py")
            if not found:
                errors.append(f"{path}: directory holds no .py or .cu solution files")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            errors.append(f"{path}: no such file or directory")
    unique = list(dict.fromkeys(files))
    return unique, errors


def find_mutants(paths: list[Path] | None, rules: list[Rule], problems: Path | None = None) -> tuple[list[UnitSites], int, list[str], list[str]]:
    """Parse every solution and collect its candidate mutants. Returns (units, solutions, errors, unpaired)."""
    if not paths:
        root = bundled_root()
        paths, problems = [root / "solutions"], problems or root
    files, errors = input_files([Path(p) for p in paths])
    problem_of: dict[Path, tuple[str, str]] = {}
    unpaired: list[str] = []
    if problems is not None and files:
        pairing = pair_solutions(files, Path(problems))
        for pair in pairing.pairs:
            problem_of[pair.solution.resolve()] = (pair.problem.label, _display_path(pair.problem.path))
        unpaired = [f"{u.path}: {u.reason}" for u in pairing.unpaired]
    units: list[UnitSites] = []
    solutions = 0
    for path in files:
        try:
            file_units = load_units(path)
        except OracleAuditError as err:
            errors.append(str(err))
            continue
        problem, problem_file = problem_of.get(path.resolve(), (None, None))
        source = _display_path(path)
        found_any, broken = False, False
        for unit in file_units:
            tree = CudaTree(unit.text)
            if tree.error_lines:
                where = unit.raw_offsets[_char_index(unit.text, tree.data, _line_start(tree.data, tree.error_lines[0]))]
                line, _ = line_col(unit.file_text, where)
                cuda_line = tree.error_lines[0]
                near = unit.text.splitlines()[cuda_line - 1].strip()[:60] if unit.text.strip() else ""
                errors.append(f"{path}:{line}: CUDA does not parse (syntax error on line {cuda_line} of the CUDA "
                              f"source, at or just before {near!r}); file skipped")
                broken = True
                continue
            facts = analyse(tree.clone_view(keep_host=False))
            sites = find_sites(tree, facts, rules)
            entry = UnitSites(unit, tree, key=f"{source}#{unit.index}")
            for site in sites:
                start = _char_index(unit.text, tree.data, site.start)
                end = _char_index(unit.text, tree.data, site.end)
                file_start, file_end = unit.file_span(start, end)
                replacement = unit.encode(site.replacement)
                start_line, start_col = line_col(unit.file_text, file_start)
                end_line, end_col = line_col(unit.file_text, file_end)
                scope = site.scope
                if scope == "both" and tree.in_host_span(site.start, site.end):
                    scope = "host"
                entry.mutants.append(Mutant(
                    id=mutant_id(problem, source, site.rule.name, file_start, file_end, replacement),
                    problem=problem, problem_file=problem_file, source=source, source_sha256=unit.sha256,
                    unit=unit.index, rule=site.rule.name, family=site.rule.family, start=file_start,
                    end=file_end, start_line=start_line, start_col=start_col, end_line=end_line,
                    end_col=end_col, original=unit.file_text[file_start:file_end], replacement=replacement,
                    scope=scope, function=site.function))
            found_any = found_any or bool(entry.mutants)
            units.append(entry)
        solutions += 1
        if not found_any and not broken:
            errors.append(f"{path}: no mutation site matched any selected rule")
    return units, solutions, errors, unpaired


def _line_start(data: bytes, line: int) -> int:
    offset = 0
    for _ in range(line - 1):
        offset = data.index(b"\n", offset) + 1
    return offset


def _char_index(text: str, data: bytes, byte_offset: int) -> int:
    if len(text) == len(data):
        return byte_offset
    return len(data[:byte_offset].decode(errors="ignore"))


def _dedupe(mutants: list[Mutant]) -> list[Mutant]:
    """Mark textually identical edits (same file span and replacement from two rules) as Duplicate."""
    first: dict[tuple, str] = {}
    out = []
    for mutant in mutants:
        key = (mutant.source, mutant.start, mutant.end, mutant.replacement)
        if key in first:
            out.append(mutant.with_status(DUPLICATE, "same edit as an earlier mutant", first[key]))
        else:
            first[key] = mutant.id
            out.append(mutant)
    return out


def _splice(view: bytes, unit: UnitSites, mutant: Mutant) -> bytes:
    """Apply a mutant to a clone view (whose byte offsets are those of the unit's CUDA text)."""
    start, end, replacement = unit.unit.cuda_edit(mutant.start, mutant.end, mutant.replacement)
    text = unit.unit.text
    return view[:len(text[:start].encode())] + replacement.encode() + view[len(text[:end].encode()):]


def check(units: list[UnitSites], jobs: int, show_progress: bool = True) -> tuple[dict[str, Mutant], list[str], float, int]:
    """Compile-check every Pending mutant and apply TCE; returns the updated mutants by id, warnings about
    originals that fail their own check, the compile time and the number of mutants checked."""
    from joblib import Parallel, delayed

    toolchain = compiler.Toolchain()
    device_batches: list[list[compiler.Clone]] = []
    host_clones: dict[str, list[compiler.Clone]] = {}
    by_id: dict[str, tuple[UnitSites, Mutant]] = {}
    for unit in units:
        tree = unit.tree
        macros = tuple(tree.macros)
        device_view = tree.clone_view(keep_host=False)
        host_view = tree.clone_view(keep_host=True)
        device_includes = tuple(tree.hoisted_includes(keep_host=False))
        host_includes = tuple(tree.hoisted_includes(keep_host=True))
        device, host = [], []
        for mutant in unit.mutants:
            if mutant.status != PENDING:
                continue
            by_id[mutant.id] = (unit, mutant)
            if mutant.scope in ("device", "both"):
                device.append(compiler.Clone(mutant.id, _splice(device_view, unit, mutant), macros, device_includes))
            if mutant.scope in ("host", "both"):
                host.append(compiler.Clone(mutant.id, _splice(host_view, unit, mutant), macros, host_includes))
        original = compiler.Clone(f"orig:{unit.key}", device_view, macros, device_includes)
        for i in range(0, max(len(device), 1), DEVICE_BATCH):
            device_batches.append([original, *device[i:i + DEVICE_BATCH]])
        if host:
            host_clones[unit.key] = [compiler.Clone(f"orig:{unit.key}", host_view, macros, host_includes), *host]
    host_batches = _host_batches(host_clones, jobs)
    tasks = [(batch, compiler.DEVICE) for batch in device_batches] + [(batch, compiler.HOST) for batch in host_batches]
    # Host batches are the slow ones: start them first so they overlap the many fast device batches.
    tasks.sort(key=lambda task: task[1] != compiler.HOST)
    start = time.perf_counter()
    device_outcomes: dict[str, compiler.CompileResult] = {}
    host_outcomes: dict[str, compiler.CompileResult] = {}
    originals: dict[str, compiler.CompileResult] = {}
    clones = sum(len(b) - 1 for b, _ in tasks)
    with progress_bar("compiling mutants", total=clones, enabled=show_progress) as advance:
        runner = Parallel(n_jobs=jobs, prefer="threads", return_as="generator_unordered")
        for mode, outcomes in runner(delayed(_settle_task)(toolchain, batch, mode) for batch, mode in tasks):
            target = device_outcomes if mode == compiler.DEVICE else host_outcomes
            for key, outcome in outcomes.items():
                if key.startswith("orig:"):
                    originals[f"{mode}:{key}"] = outcome
                else:
                    target[key] = outcome
            advance(sum(not key.startswith("orig:") for key in outcomes))
    elapsed = time.perf_counter() - start
    updated, warnings = _verdicts(units, by_id, device_outcomes, host_outcomes, originals)
    return updated, warnings, elapsed, len(by_id)


def _settle_task(toolchain, batch, mode):
    return mode, compiler.settle(toolchain, batch, mode)


def _host_batches(host_clones: dict[str, list[compiler.Clone]], jobs: int) -> list[list[compiler.Clone]]:
    """Spread the host clones over at most `jobs` translation units (each pays for the torch headers once),
    keeping a unit's original beside its mutants."""
    groups = sorted(host_clones.values(), key=len, reverse=True)
    total = sum(len(g) for g in groups)
    count = max(1, min(jobs, math.ceil(total / 24)))
    batches: list[list[compiler.Clone]] = [[] for _ in range(count)]
    for group in groups:
        min(batches, key=len).extend(group)
    return [b for b in batches if b]


def _verdicts(units, by_id, device, host, originals) -> tuple[dict[str, Mutant], list[str]]:
    updated: dict[str, Mutant] = {}
    warnings: list[str] = []
    for unit in units:
        device_original = originals.get(f"{compiler.DEVICE}:orig:{unit.key}")
        host_original = originals.get(f"{compiler.HOST}:orig:{unit.key}")
        for kind, original in (("device-only", device_original), ("host", host_original)):
            if original is not None and not original.ok:
                warnings.append(f"{unit.unit.path}: the unmutated {kind} check fails ({original.error}); "
                                "its mutants stay Pending, unchecked")
        seen_signatures: dict[str, str] = {}
        for mutant in unit.mutants:
            if mutant.id not in by_id:
                continue
            d, h = device.get(mutant.id), host.get(mutant.id)
            if device_original is not None and not device_original.ok and mutant.scope != "host":
                verdict = mutant.with_status(PENDING, "unchecked: the original's device code does not compile on "
                                                      f"its own ({device_original.error})")
            elif h is not None and host_original is not None and not host_original.ok:
                verdict = mutant.with_status(PENDING, f"unchecked: the original fails the host check ({host_original.error})")
            elif d is not None and not d.ok:
                verdict = mutant.with_status(COMPILE_ERROR, d.error)
            elif h is not None and not h.ok:
                verdict = mutant.with_status(COMPILE_ERROR, h.error)
            elif mutant.scope == "device" and d is not None and device_original is not None:
                if d.signature == device_original.signature:
                    verdict = mutant.with_status(EQUIVALENT, "same machine code as the original (TCE)")
                elif d.signature in seen_signatures:
                    verdict = mutant.with_status(DUPLICATE, "same machine code as an earlier mutant (TCE)",
                                                 seen_signatures[d.signature])
                else:
                    seen_signatures[d.signature] = mutant.id
                    verdict = mutant.with_status(PENDING, "compiles; machine code differs from the original")
            else:
                verdict = mutant.with_status(PENDING, "compiles (host code: no TCE)" if mutant.scope == "host"
                                             else "compiles (shared by host and device code: no TCE)")
            updated[mutant.id] = verdict
    return updated, warnings


def mutate(paths: list[Path] | None, out: Path | None, problems: Path | None = None,
           families: list[str] | None = None, rule_names: list[str] | None = None, compile_check: bool = True,
           jobs: int | None = None, catalog: Path | None = None, show_progress: bool = True) -> MutateResult:
    """Run the mutate stage and, when `out` is given, write its folder. Raises if nothing could be mutated."""
    started = time.perf_counter()
    rules = select_rules(load_catalog(catalog), families, rule_names)
    units, solutions, errors, unpaired = find_mutants(paths, rules, problems)
    mutants = _dedupe(sorted((m for u in units for m in u.mutants),
                             key=lambda m: (m.source, m.unit, m.start, m.end, m.rule, m.replacement)))
    by_id = {m.id: m for m in mutants}
    for unit in units:
        unit.mutants = [by_id[m.id] for m in unit.mutants]
    compile_s, compiled = 0.0, 0
    if compile_check and mutants:
        updated, warnings, compile_s, compiled = check(units, jobs or compiler.default_jobs(), show_progress)
        errors.extend(warnings)
        mutants = [updated.get(m.id, m) for m in mutants]
    elif mutants:
        mutants = [m.with_status(PENDING, "not compile-checked (--no-compile)") if m.status == PENDING else m
                   for m in mutants]
    result = MutateResult(mutants, solutions, errors, unpaired, compile_s=compile_s, compiled=compiled)
    if not mutants:
        detail = "; ".join(errors[:3]) if errors else "no rule matched"
        raise OracleAuditError(f"no mutants were produced ({detail})")
    if out is not None:
        file_texts = {u.key.rsplit("#", 1)[0]: u.unit.file_text for u in units}
        write_mutants(out, mutants, file_texts)
    result.wall_s = time.perf_counter() - started
    return result
