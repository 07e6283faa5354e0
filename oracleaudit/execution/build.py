"""The compile-once build of a solution and all its mutants: one torch extension per CUDA unit (and chunk of
variants) holding every variant in its own namespace, selected at run time by intercepting `load_inline`.

A solution calls `load_inline(name, cpp_sources, cuda_sources, functions=[f, ...])` at import time. For
each such call oracleaudit builds ONE extension whose CUDA source holds variant k (k = 0 is the original,
then one per mutant) inside `namespace oa_v<k>_ { ... }` (includes hoisted, macros #undef'd between
variants, `extern "C"` dropped so variants do not clash), whose C++ source repeats the solution's
declarations in each namespace, and whose bindings export `f__v<k>` for every function f. To run variant k,
the solution file is executed with `torch.utils.cpp_extension.load_inline` replaced by a function that
returns a view of that extension in which `f` means `f__v<k>`: `ModelNew` gets the variant transparently.

The CUDA translation unit includes `<torch/types.h>` where the solution includes `<torch/extension.h>` or
`<torch/torch.h>` (CUDA sources define no Python bindings, and the rest of those headers is what makes a
build slow: nvcc took 77 s for a one-kernel unit with them and 34.5 s without, and clones stopped adding
measurable time; bench/build_cost.py). A unit whose original does not compile that way is built with its own
headers and remembered (`full-headers/` in the build folder), so no later build tries again. The binding unit
(g++) includes torch's precompiled <torch/extension.h> where it can be made (`precompiled_header`).

This module needs no tree-sitter or libclang (the GPU machine lacks them): includes and macros are found
with line-anchored regular expressions, edits are applied through `CudaUnit` offsets.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from oracleaudit import precompiled_header
from oracleaudit.cache import held
from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import Mutant
from oracleaudit.source import CudaUnit, load_units
from oracleaudit.status import ORIGINAL

# With <torch/types.h> a clone adds 0.1-0.4 s to a build whose fixed cost is about half of a 256-variant one
# (bench/results/build_sizes.json): smaller chunks would cost far more CPU than they save. A solution of more
# variants (256 + 79 in a traced shard: 201 s, its extensions built one after the other, its rows the run's last)
# is cut into chunks of equal size, built side by side (scheduler.prebuild_in_order).
MAX_VARIANTS_PER_EXTENSION = 256
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[^\n]*", re.M)
_HEAVY_HEADER = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(extension|torch)\.h[>"]')
LIGHT_HEADER = "#include <torch/types.h>"
FULL_HEADERS_DIR = "full-headers"  # in the build folder: units whose original needs its own torch headers
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)
_EXTERN_C = re.compile(r'extern[ \t]+"C"[ \t]*(?=[^{\s])')
_HOST_BINDING = re.compile(r"PYBIND11_MODULE|TORCH_LIBRARY")


@dataclass(frozen=True)
class Variant:
    """One variant of a solution: the original (mutant None) or one mutant."""

    index: int
    mutant: Mutant | None

    @property
    def key(self) -> str:
        return ORIGINAL if self.mutant is None else self.mutant.id


@dataclass
class ExtensionPlan:
    """One extension to build: a CUDA unit of the solution with a chunk of its variants."""

    unit: CudaUnit
    variants: list[Variant]
    name: str
    chunk: int = 0
    cuda_source: str = ""
    cpp_source: str = ""
    light: bool = False  # the solution's torch/extension.h (or torch/torch.h) include became torch/types.h


@dataclass
class BuildPlan:
    """Everything needed to build and run a solution's variants: for each CUDA unit, one or more
    extensions (chunks of at most MAX_VARIANTS_PER_EXTENSION variants, each with the original too)."""

    solution: Path
    variants: list[Variant]
    extensions: list[ExtensionPlan] = field(default_factory=list)


def plan_build(solution: Path, mutants: Sequence[Mutant], call_args: dict[int, dict[str, Any]] | None = None,
               max_variants: int = MAX_VARIANTS_PER_EXTENSION, full_headers: frozenset[int] = frozenset()
               ) -> BuildPlan:
    """Plan the extensions of one solution: the original plus `mutants` (all of that solution).

    `call_args[unit]` gives the unit's load_inline arguments (cpp_sources and functions); they are read
    from the solution file when omitted. Units whose index is in `full_headers` keep the solution's own
    torch headers; the others include the light one (see the module docstring).
    """
    units = load_units(solution)
    for mutant in mutants:
        if mutant.source_sha256 != units[0].sha256:
            raise OracleAuditError(f"{solution}: file changed since mutant {mutant.id} was made (sha256 differs)")
    variants = [Variant(0, None)] + [Variant(i + 1, m) for i, m in enumerate(mutants)]
    call_args = call_args or load_inline_arguments(solution)
    plan = BuildPlan(solution, variants)
    for unit in units:
        args = call_args.get(unit.index)
        if args is None:
            raise OracleAuditError(f"{solution}: no load_inline call found for CUDA unit {unit.index}")
        own = [v for v in variants if v.mutant is None or v.mutant.unit == unit.index]
        others = [v for v in variants if v.mutant is not None and v.mutant.unit != unit.index]
        # A mutant of another unit runs this unit's original code: it shares variant 0's code here, so it
        # is bound to the original's functions instead of being cloned.
        count = -(-len(own) // max_variants)  # as few chunks as max_variants allows, of equal size
        size = -(-len(own) // count)
        chunks = [own[i:i + size] for i in range(0, len(own), size)]
        for number, chunk in enumerate(chunks):
            if chunk[0].mutant is not None:
                chunk = [variants[0], *chunk]
            light = unit.index not in full_headers and any(
                _HEAVY_HEADER.match(line) for line in _INCLUDE.findall(unit.text))
            cuda_source = _cuda_source(unit, chunk, light)
            cpp_source = _cpp_source(args["cpp_sources"], args["functions"], chunk, others if number == 0 else [])
            # Named by content: an extension is built once per machine (cache_root()/builds) whatever
            # evidence folder or test asks for it, and two different extensions never share a name.
            digest = hashlib.sha256(f"{cuda_source}\0{cpp_source}".encode()).hexdigest()[:16]
            extension = ExtensionPlan(unit, chunk, f"oa_{digest}_{unit.index}_{number}", number, light=light)
            extension.cuda_source, extension.cpp_source = cuda_source, cpp_source
            plan.extensions.append(extension)
    return plan


def load_inline_arguments(solution: Path) -> dict[int, dict[str, Any]]:
    """Capture the arguments of each load_inline call by executing the solution with load_inline replaced
    by a recorder (no compilation happens)."""
    captured: list[dict[str, Any]] = []

    def recorder(name, cpp_sources, cuda_sources=None, functions=None, **kwargs):
        captured.append({"name": name, "cpp_sources": cpp_sources, "cuda_sources": cuda_sources,
                         "functions": functions, "kwargs": kwargs})
        return _Recorder()

    class _Recorder(types.SimpleNamespace):
        def __getattr__(self, item):  # the solution may touch the module at import time
            return lambda *a, **k: None

    _exec_solution(solution, recorder, module_name=f"oracleaudit_probe_{abs(hash(str(solution)))}")
    units = load_units(solution)
    result: dict[int, dict[str, Any]] = {}
    for call in captured:
        sources = call["cuda_sources"]
        sources = [sources] if isinstance(sources, str) else list(sources or [])
        for unit in units:
            if unit.text in sources:
                cpp = call["cpp_sources"]
                cpp = cpp if isinstance(cpp, str) else "\n".join(cpp)
                functions = call["functions"]
                if isinstance(functions, dict):
                    functions = list(functions)
                result[unit.index] = {"name": call["name"], "cpp_sources": cpp, "functions": list(functions or []),
                                      "kwargs": call["kwargs"]}
    return result


def _cuda_source(unit: CudaUnit, variants: list[Variant], light: bool = False) -> str:
    includes = []
    for line in _INCLUDE.findall(unit.text):
        line = LIGHT_HEADER if light and _HEAVY_HEADER.match(line) else line.strip()
        if line not in includes:
            includes.append(line)
    macros = list(dict.fromkeys(_DEFINE.findall(unit.text)))
    parts = ["// oracleaudit: every variant of one CUDA unit, each in its own namespace", *includes]
    for variant in variants:
        text = unit.text if variant.mutant is None else unit.edited(variant.mutant.start, variant.mutant.end,
                                                                     variant.mutant.replacement)
        if _HOST_BINDING.search(text):
            raise OracleAuditError(f"{unit.path}: CUDA source defines its own Python bindings; cannot clone it")
        text = _INCLUDE.sub(lambda m: "", text)
        text = _EXTERN_C.sub("", text)
        parts.extend(f"#undef {name}" for name in macros)
        parts.append(f"namespace oa_v{variant.index}_ {{")
        parts.append(text)
        parts.append(f"}}  // namespace oa_v{variant.index}_")
    parts.extend(f"#undef {name}" for name in macros)
    return "\n".join(parts) + "\n"


def _cpp_source(cpp: str, functions: list[str], variants: list[Variant], shared: list[Variant]) -> str:
    body = _INCLUDE.sub(lambda m: "", cpp)
    includes = "\n".join(dict.fromkeys(line.strip() for line in _INCLUDE.findall(cpp)))
    parts = [includes]
    for variant in variants:
        parts.append(f"namespace oa_v{variant.index}_ {{\n{body}\n}}  // namespace oa_v{variant.index}_")
    parts.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
    for variant in variants:
        for function in functions:
            parts.append(f'  m.def("{function}__v{variant.index}", &oa_v{variant.index}_::{function});')
    for variant in shared:
        for function in functions:
            parts.append(f'  m.def("{function}__v{variant.index}", &oa_v0_::{function});')
    parts.append("}")
    return "\n".join(parts) + "\n"


class VariantModule(types.ModuleType):
    """What the solution's `load_inline` returns for variant k: `f` resolves to the extension's `f__v<k>`."""

    def __init__(self, extension: Any, index: int):
        super().__init__(f"{extension.__name__}__v{index}")
        self._extension = extension
        self._index = index

    def __getattr__(self, item: str) -> Any:
        try:
            return getattr(self._extension, f"{item}__v{self._index}")
        except AttributeError:
            return getattr(self._extension, item)


def build(plan: BuildPlan, build_dir: Path, extra_cuda_cflags: Sequence[str] = (), verbose: bool = False,
          only: str | None = None) -> dict[str, Any]:
    """Build every extension of a plan (or the one named `only`) with load_inline (the real one); returns
    {extension name: module}."""
    from torch.utils.cpp_extension import load_inline

    call_args = load_inline_arguments(plan.solution)
    built = {}
    if only is not None and only not in {e.name for e in plan.extensions}:
        raise OracleAuditError(f"{plan.solution}: its build plan has no extension {only}")
    for extension in plan.extensions:
        if only is not None and extension.name != only:
            continue
        kwargs = dict(call_args[extension.unit.index]["kwargs"])
        kwargs.pop("build_directory", None)
        kwargs.pop("verbose", None)
        kwargs["extra_cuda_cflags"] = [*(kwargs.get("extra_cuda_cflags") or []), *extra_cuda_cflags]
        kwargs["use_pch"] = precompiled_header.usable(kwargs.get("extra_cflags"), kwargs.get("extra_include_paths"))
        if kwargs["use_pch"] is None:
            del kwargs["use_pch"]
        directory = build_dir / extension.name
        with exclusive_build_directory(directory):
            built[extension.name] = precompiled_header.load(
                load_inline, name=extension.name, cpp_sources=extension.cpp_source,
                cuda_sources=extension.cuda_source, functions=None, build_directory=str(directory),
                verbose=verbose, **kwargs)
    return built


TORCH_LOCK = "lock"  # the file torch's load_inline creates in a build directory while it builds or loads


@contextlib.contextmanager
def exclusive_build_directory(directory: Path) -> Iterator[None]:
    """Hold one extension build directory against every other process building there (created if missing).

    load_inline guards a build directory with a lock file that it deletes when done; a build process that is
    killed (a run stopped during its builds) leaves it behind, and every later load_inline there, even of a
    build already finished, waits for it forever. Every build here holds this flock on another file, which
    the kernel releases when its holder dies; so a torch lock file found while holding it is stale and is
    removed, with what that build may have left half-written: ninja, killed, keeps an object file it was
    writing and later takes it for up to date, and the extension then links without its module."""
    with held(directory / "oracleaudit.lock"):
        stale = directory / TORCH_LOCK
        if stale.exists():
            for leftover in [*directory.glob("*.o"), *directory.glob("*.so"), *directory.glob(".ninja_*")]:
                leftover.unlink(missing_ok=True)
            stale.unlink(missing_ok=True)
        yield


_NVCC_ERROR = re.compile(r"cuda\.cu\((\d+)\): error: (.*)")
_GCC_ERROR = re.compile(r"main\.cpp:(\d+):\d+: error: (.*)")
_NAMESPACE_OPEN = re.compile(r"^namespace oa_v(\d+)_ \{")


def build_isolating(solution: Path, mutants: Sequence[Mutant], build_dir: Path,
                    ) -> tuple[BuildPlan, dict[str, Any], dict[str, str]]:
    """Build the plan of `solution` and `mutants`; a mutant whose clone does not compile with torch's own
    flags (the mutate stage's check is close to them, not identical) is dropped and the rest rebuilt.
    A unit whose original does not compile with the light torch header is marked (in `build_dir`) and built
    with its own headers. Returns the plan, the built extensions and {mutant id: first compiler error} of the
    dropped ones. The original failing to build with its own headers, an error that names no mutant's
    clone, or a compiler crash (a second one: `precompiled_header.load` has built once more) is raised."""
    dropped: dict[str, str] = {}
    full = full_header_units(solution, build_dir)
    while True:
        plan = plan_build(solution, [m for m in mutants if m.id not in dropped], full_headers=full)
        try:
            return plan, build(plan, build_dir), dropped
        except RuntimeError as err:
            if precompiled_header.COMPILER_CRASH.search(str(err)):
                raise  # the compiler's fault, not a sign that the unit needs its own headers
            culprits = _culprits(plan, build_dir, str(err))
            if culprits:
                dropped.update(culprits)
                continue
            light = [e for e in plan.extensions if e.light and f"'{e.name}'" in str(err)]
            if not light:
                raise
            for extension in light:
                _mark_full_headers(extension.unit, build_dir, str(err))
            full = full_header_units(solution, build_dir)


def extensions_of(solution: Path, mutants: Sequence[Mutant], build_dir: Path) -> list[tuple[str, int]]:
    """The extensions `build_isolating` builds first for these mutants, as (name, variants): each can be
    built alone (`build_extension`), side by side, and `build_isolating` then finds them built."""
    plan = plan_build(solution, mutants, full_headers=full_header_units(solution, build_dir))
    return [(extension.name, len(extension.variants)) for extension in plan.extensions]


def build_extension(solution: Path, mutants: Sequence[Mutant], build_dir: Path, name: str) -> None:
    """Build the extension `name` of `extensions_of(solution, mutants, build_dir)`; raises as `build` does
    (the culprits of a failure are for `build_isolating` to find)."""
    build(plan_build(solution, mutants, full_headers=full_header_units(solution, build_dir)), build_dir, only=name)


def _full_headers_marker(unit: CudaUnit, build_dir: Path) -> Path:
    return build_dir / FULL_HEADERS_DIR / hashlib.sha256(unit.text.encode()).hexdigest()[:24]


def full_header_units(solution: Path, build_dir: Path) -> frozenset[int]:
    """The units of `solution` that an earlier build found to need their own torch headers."""
    return frozenset(u.index for u in load_units(solution) if _full_headers_marker(u, build_dir).is_file())


def _mark_full_headers(unit: CudaUnit, build_dir: Path, message: str) -> None:
    marker = _full_headers_marker(unit, build_dir)
    marker.parent.mkdir(parents=True, exist_ok=True)
    errors = [line.strip() for line in message.splitlines() if "error" in line][:5]
    marker.write_text(f"{unit.path}: unit {unit.index} does not build with {LIGHT_HEADER}:\n" + "\n".join(errors) + "\n")


def _culprits(plan: BuildPlan, build_dir: Path, message: str) -> dict[str, str]:
    """The mutants whose namespace holds the lines a failed build's errors point at (in the source files
    load_inline wrote), with the first error of each; empty if an error is outside every mutant's clone."""
    culprits: dict[str, str] = {}
    for extension in plan.extensions:
        if f"'{extension.name}'" not in message:
            continue
        by_index = {v.index: v for v in extension.variants}
        for file_name, pattern in (("cuda.cu", _NVCC_ERROR), ("main.cpp", _GCC_ERROR)):
            errors = [(int(m.group(1)), m.group(2).strip()) for m in pattern.finditer(message)]
            path = build_dir / extension.name / file_name
            if not errors or not path.is_file():
                continue
            owner, current = {}, None
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                opened = _NAMESPACE_OPEN.match(line)
                if opened:
                    current = int(opened.group(1))
                elif line.startswith("}  // namespace oa_v") or line.startswith("PYBIND11_MODULE("):
                    current = None
                owner[number] = current
            for line, text in errors:
                variant = by_index.get(owner.get(line))
                if variant is None or variant.mutant is None:
                    return {}
                culprits.setdefault(variant.mutant.id, f"{file_name}:{line}: {text}")
    return culprits


def load_variant(plan: BuildPlan, built: dict[str, Any], variant: Variant) -> types.ModuleType:
    """Execute the solution file with load_inline intercepted so that it gets `variant`."""
    by_unit: dict[str, Any] = {}
    for extension in plan.extensions:
        if any(v.index == variant.index for v in extension.variants) or (
                variant.mutant is not None and variant.mutant.unit != extension.unit.index and extension.chunk == 0):
            by_unit.setdefault(extension.unit.text, built[extension.name])

    def intercepted(name, cpp_sources, cuda_sources=None, functions=None, **kwargs):
        sources = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources or [])
        for text in sources:
            if text in by_unit:
                return VariantModule(by_unit[text], variant.index)
        raise OracleAuditError(f"{plan.solution}: load_inline({name!r}) has CUDA that was not built")

    return _exec_solution(plan.solution, intercepted, module_name=f"oracleaudit_solution_v{variant.index}")


def _exec_solution(path: Path, load_inline: Any, module_name: str) -> types.ModuleType:
    import torch.utils.cpp_extension as cpp_extension

    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise OracleAuditError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    original = cpp_extension.load_inline
    cpp_extension.load_inline = load_inline
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        cpp_extension.load_inline = original
        sys.modules.pop(module_name, None)
    return module
