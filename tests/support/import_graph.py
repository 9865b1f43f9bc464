"""The package's import graph, every import counted, and its circles (for the import-circle
tests of the package and of the engine).

The graph has an edge ``a → b`` for every ``import b`` / ``from b import x`` in module ``a``
(``b.x`` when ``x`` is a module), wherever the import is: at module level, inside a function,
or under ``if TYPE_CHECKING:``. A package's ``__init__`` is an edge only where it is imported
by name (``import aiostreams.engine``), not implied by importing one of its modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import aiostreams

PACKAGE = Path(aiostreams.__file__).parent
ROOT = "aiostreams"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(module: str, path: Path, known: set[str]) -> Iterator[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == ROOT)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != ROOT:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield sub if sub in known else target


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {m: {t for t in imported(m, p, known) if t in known and t != m}
            for m, p in found.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out
