"""No import circle among the package's modules (every import counts: module level,
function-local and ``if TYPE_CHECKING:`` ones), so each module can be read, and tested,
after the ones it depends on."""

from __future__ import annotations

import ast
from pathlib import Path

import aiostreams

ROOT = Path(aiostreams.__file__).parent


def module_name(path: Path) -> str:
    parts = ["aiostreams", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module → the package modules it imports (``from pkg import submodule`` names the
    submodule; ``from module import name`` names the module)."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                           else base for alias in node.names]
            else:
                continue
            deps.update(t for t in targets if t in modules and t != name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_two_module_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_engine_modules_import_each_other_without_a_circle() -> None:
    graph = import_graph()
    engine = {m: {d for d in deps if d.startswith("aiostreams.engine.")}
              for m, deps in graph.items() if m.startswith("aiostreams.engine.")}
    assert engine, "no engine modules found"
    assert cycles(engine) == []


def test_no_engine_module_is_part_of_a_package_wide_circle() -> None:
    in_cycles = [c for c in cycles(import_graph())
                 if any(m.startswith("aiostreams.engine.") for m in c)]
    assert in_cycles == []
