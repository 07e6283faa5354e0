"""KernelBench problems and their solutions: finding problem files, pairing solutions with them, loading both.

A problem file is `levelL/{id}_{Name}.py` under a problem root: `class Model`, module-level shape constants,
`get_inputs()` and `get_init_inputs()`. A solution file defines `class ModelNew`; it pairs with the problem
whose file stem equals its own stem, optionally prefixed `level{L}_` (`level1_23_Softmax.py` pairs with
`level1/23_Softmax.py`). A solution without a prefix that sits in a `levelL/` folder pairs at that level;
anywhere else it pairs by stem alone, provided exactly one level has a problem with that stem.

Problems read their shape constants when `get_inputs()` / `get_init_inputs()` are called, so a shape
variant is made by loading the module and setting those constants before calling them.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Iterable, Mapping, NamedTuple

from oracleaudit.errors import OracleAuditError
from oracleaudit.shipped import shipped_dir

__all__ = [
    "Pair",
    "Pairing",
    "Problem",
    "Unpaired",
    "bundled_root",
    "discover_problems",
    "first_line",
    "int_constants",
    "load_problem_module",
    "load_solution_module",
    "pair_solutions",
    "problem_at",
    "solution_files",
]

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_PROBLEM_FILE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_PREFIX = re.compile(r"^level(\d+)_(.+)$")
_PROBLEM_API = ("Model", "get_inputs", "get_init_inputs")

_module_counter = itertools.count()


@dataclass(frozen=True)
class Problem:
    """One problem file `levelL/{id}_{Name}.py`."""

    level: int
    id: int
    name: str
    path: Path

    @property
    def key(self) -> tuple[int, int]:
        """The problem's identity in a dataset: (level, id)."""
        return (self.level, self.id)

    @property
    def stem(self) -> str:
        return f"{self.id}_{self.name}"

    @property
    def relpath(self) -> str:
        """The path below the problem root, e.g. `level1/23_Softmax.py`."""
        return f"level{self.level}/{self.path.name}"

    @property
    def label(self) -> str:
        """A short human name, e.g. `level1/23_Softmax`."""
        return f"level{self.level}/{self.stem}"

    @property
    def root(self) -> Path:
        """The problem root the problem was found under."""
        return self.path.parent.parent


@dataclass(frozen=True)
class Pair:
    """A solution file paired with the problem it solves."""

    problem: Problem
    solution: Path


@dataclass(frozen=True)
class Unpaired:
    """A solution file that pairs with no problem, and why."""

    path: Path
    reason: str


class Pairing(NamedTuple):
    """The result of pairing solutions with problems: what paired and what did not."""

    pairs: tuple[Pair, ...]
    unpaired: tuple[Unpaired, ...]


def bundled_root() -> Path:
    """The problem root of the bundled dataset (its solutions are in its `solutions/` folder)."""
    return shipped_dir("datasets") / "oakb"


def first_line(err: BaseException) -> str:
    """A one-line description of an exception: its type and the first non-empty line of its message."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if isinstance(err, OracleAuditError) and lines:
        text = lines[0]  # already phrased for the user
    else:
        text = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    return text if len(text) <= 400 else text[:397] + "..."


def discover_problems(root: Path) -> list[Problem]:
    """All problems `levelL/{id}_{Name}.py` directly under `root`, sorted by (level, id).

    Other files and folders (a `solutions/` folder, READMEs, helpers) are ignored. A root that does not
    exist, holds no problem, or holds two problems with the same level and id is an error.
    """
    root = Path(root)
    if not root.is_dir():
        raise OracleAuditError(f"{root}: problem root is not a directory")
    found: dict[tuple[int, int], Problem] = {}
    for level_dir in sorted(root.iterdir()):
        level_match = _LEVEL_DIR.match(level_dir.name)
        if not level_match or not level_dir.is_dir():
            continue
        level = int(level_match.group(1))
        for path in sorted(level_dir.iterdir()):
            file_match = _PROBLEM_FILE.match(path.name)
            if not file_match or not path.is_file():
                continue
            problem = Problem(level, int(file_match.group(1)), file_match.group(2), path)
            if problem.key in found:
                raise OracleAuditError(
                    f"{path}: problem id {problem.id} is also used by {found[problem.key].path.name} "
                    f"in {level_dir}"
                )
            found[problem.key] = problem
    if not found:
        raise OracleAuditError(f"{root}: no problem files (expected levelL/{{id}}_{{Name}}.py)")
    return [found[key] for key in sorted(found)]


def solution_files(paths: Iterable[Path]) -> list[Path]:
    """Expand solution paths: files are kept, directories are searched recursively for `*.py`.

    The order is the order given, each directory's files sorted; repeated files are listed once.
    A path that does not exist is an error.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*.py")
                if p.is_file() and "__pycache__" not in p.parts and p.name != "__init__.py"
            )
        elif path.is_file():
            found = [path]
        else:
            raise OracleAuditError(f"{path}: no such solution file or directory")
        for file in found:
            resolved = file.resolve()
            if resolved not in seen:
                seen.add(resolved)
                files.append(file)
    return files


def pair_solutions(paths: Iterable[Path], problems: Path | Iterable[Problem]) -> Pairing:
    """Pair solution files (or directories of them) with the problems of a root (or a list of problems).

    Pairs are sorted by (level, id, solution path). Solutions that pair with nothing are returned in
    `unpaired` with the reason, in the order found; they are not an error.
    """
    problem_list = discover_problems(problems) if isinstance(problems, (str, Path)) else list(problems)
    by_level_stem = {(p.level, p.stem): p for p in problem_list}
    by_stem: dict[str, list[Problem]] = {}
    for p in problem_list:
        by_stem.setdefault(p.stem, []).append(p)
    problem_paths = {p.path.resolve() for p in problem_list}

    pairs: list[Pair] = []
    unpaired: list[Unpaired] = []
    for path in solution_files(paths):
        if path.resolve() in problem_paths:
            unpaired.append(Unpaired(path, "is a problem file, not a solution"))
            continue
        problem, reason = _match(path, by_level_stem, by_stem)
        if problem is None:
            unpaired.append(Unpaired(path, reason))
        else:
            pairs.append(Pair(problem, path))
    pairs.sort(key=lambda pair: (pair.problem.key, str(pair.solution)))
    return Pairing(tuple(pairs), tuple(unpaired))


def _match(
    path: Path,
    by_level_stem: Mapping[tuple[int, str], Problem],
    by_stem: Mapping[str, list[Problem]],
) -> tuple[Problem | None, str]:
    stem = path.stem
    prefixed = _LEVEL_PREFIX.match(stem)
    if prefixed:
        level, rest = int(prefixed.group(1)), prefixed.group(2)
        problem = by_level_stem.get((level, rest))
        return (problem, "") if problem else (None, f"no problem level{level}/{rest}.py")
    folder = _LEVEL_DIR.match(path.parent.name)
    if folder:
        level = int(folder.group(1))
        problem = by_level_stem.get((level, stem))
        return (problem, "") if problem else (None, f"no problem level{level}/{stem}.py")
    candidates = by_stem.get(stem, [])
    if len(candidates) == 1:
        return candidates[0], ""
    if not candidates:
        return None, f"no problem with the file stem {stem!r}"
    levels = ", ".join(str(p.level) for p in candidates)
    return None, (
        f"the stem {stem!r} names problems at levels {levels}; "
        f"prefix the file name with level{{L}}_ or put it in a levelL/ folder"
    )


def problem_at(path: Path | str) -> Problem:
    """The problem whose file is `path` (`ROOT/levelL/{id}_{Name}.py`), found under its own root."""
    target = Path(path).resolve()
    for problem in discover_problems(target.parent.parent):
        if problem.path.resolve() == target:
            return problem
    raise OracleAuditError(f"{path}: not a problem file levelL/{{id}}_{{Name}}.py under a problem root")


def int_constants(module: ModuleType) -> dict[str, int]:
    """The module-level int constants of a loaded problem (public names, bools excluded), in definition order."""
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and isinstance(value, int) and not isinstance(value, bool)
    }


def load_problem_module(problem: Problem | Path, overrides: Mapping[str, int] | None = None) -> ModuleType:
    """Load a problem file as a fresh module and set the given shape constants on it.

    Each call loads a new module under a unique name, so overrides never leak between loads. The
    overrides are applied before anything calls `get_inputs()` / `get_init_inputs()`; each must name an
    existing module-level int constant and be an int.
    """
    path = Path(problem.path if isinstance(problem, Problem) else problem)
    module = _load_module(path, "problem")
    missing = [name for name in _PROBLEM_API if not hasattr(module, name)]
    if missing:
        raise OracleAuditError(f"{path}: not a KernelBench problem (no {', '.join(missing)})")
    constants = int_constants(module)
    for name, value in (overrides or {}).items():
        if name not in constants:
            raise OracleAuditError(f"{path}: no module-level int constant {name!r} to override")
        if not isinstance(value, int) or isinstance(value, bool):
            raise OracleAuditError(f"{path}: override {name} must be an int, got {value!r}")
        setattr(module, name, value)
    return module


def load_solution_module(path: Path) -> ModuleType:
    """Load a solution file as a fresh module; importing it compiles its CUDA code (needs a GPU machine)."""
    path = Path(path)
    module = _load_module(path, "solution")
    if not hasattr(module, "ModelNew"):
        raise OracleAuditError(f"{path}: not a solution (no class ModelNew)")
    return module


def _load_module(path: Path, kind: str) -> ModuleType:
    if not path.is_file():
        raise OracleAuditError(f"{path}: no such {kind} file")
    name = f"oracleaudit_{kind}_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise OracleAuditError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise OracleAuditError(f"{path}: import failed: {first_line(err)}") from err
    return module
