"""The package's shape, read from its source with `ast`: a stage imports the shared contracts, itself and
earlier stages only (never a later one), shared modules import no stage, nothing imports in a cycle, no
module takes another's private names, and no module grows past the size one reader keeps in mind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "oracleaudit"
# pipeline order; refcheck after scoring: it judges references with scoring's rule and runs them as execution does
STAGES = ("mutation", "dataset", "execution", "scoring", "refcheck", "minimization", "reporting")
ENTRY = ("oracleaudit", "oracleaudit.__main__", "oracleaudit.cli", "oracleaudit.commands")  # may import anything
MAX_LINES = 600


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(path: Path, name: str) -> list[tuple[str, tuple[str, ...]]]:
    """(imported module, names taken from it) for every import in the file, at any depth."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names if alias.name.startswith("oracleaudit")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.startswith("oracleaudit"):
                known = modules()
                for alias in node.names:  # `from package import module` imports the module
                    target = f"{base}.{alias.name}"
                    found.append((target, ()) if target in known else (base, (alias.name,)))
    return found


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


GRAPH = {name: imports(path, name) for name, path in modules().items()}


def rank(module: str) -> int:
    """-1 for the shared contracts, else the stage's place in the pipeline."""
    stage = stage_of(module)
    return -1 if stage is None else STAGES.index(stage)


def test_imports_go_down_the_pipeline_or_into_the_shared_contracts() -> None:
    wrong = []
    for name, found in GRAPH.items():
        if name in ENTRY:
            continue
        for target, _ in found:
            if target in ENTRY:
                wrong.append(f"{name} imports the entry point {target}")
            elif rank(target) > rank(name) or (rank(name) == -1 and rank(target) != -1):
                wrong.append(f"{name} ({stage_of(name) or 'shared'}) imports {target} ({stage_of(target)})")
    assert wrong == []


def test_no_module_imports_itself_back_through_others() -> None:
    graph = {name: {t for t, _ in found if t in GRAPH and t != name} for name, found in GRAPH.items()}
    cycles = []

    def visit(node: str, path: list[str], on_path: set[str], done: set[str]) -> None:
        on_path.add(node)
        path.append(node)
        for nxt in sorted(graph[node]):
            if nxt in on_path:
                cycles.append(" → ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in done:
                visit(nxt, path, on_path, done)
        on_path.discard(node)
        path.pop()
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [], set(), done)
    # A package's __init__ importing its own modules, which import the package's other modules, is the usual
    # shape of a package; a cycle counts only when it returns through the package itself from a module.
    assert [c for c in cycles if not c.startswith("oracleaudit → ")] == []


def test_no_module_takes_private_names_from_another() -> None:
    taken = [f"{name} takes {target}.{n}" for name, found in GRAPH.items() for target, names in found
             for n in names if n.startswith("_") and target != name]
    assert taken == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_a_module_stays_within_one_reading(name: str) -> None:
    lines = len(modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines"
