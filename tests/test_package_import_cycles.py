"""No import circles in the package, every import counted (see ``import_graph`` in
tests/support for how the graph is read).

One circle is allowed, and only among the fluent DSL classes (``aiostreams/dsl/``): their
methods return each other (``Stream.group_by → GroupedStream``, ``GroupedStream.count →
Table``, ``Table.to_stream → Stream``), like Kafka's ``KStreamImpl`` and ``KTableImpl``.
Everything they build on (processors, windows, stores, the topology) is below them.
"""

from __future__ import annotations

from pathlib import Path

from import_graph import circles, import_graph, imported


def is_fluent_dsl(module: str) -> bool:
    return module.startswith("aiostreams.dsl.")


def test_the_only_import_circle_is_among_the_fluent_dsl_classes() -> None:
    found = circles(import_graph())
    assert [sorted(c) for c in found if not all(map(is_fluent_dsl, c))] == []


def test_nothing_below_the_app_imports_it() -> None:
    graph = import_graph()
    users = {m for m, targets in graph.items() if "aiostreams.app" in targets}
    below = {m for m in users if m.startswith(("aiostreams.topology", "aiostreams.engine",
                                                "aiostreams.state", "aiostreams.transport"))}
    assert below == set()


def test_the_finder_sees_a_circle_through_imports_in_functions_and_type_checking(
        tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from aiostreams.b import B\n"
                      "def f():\n    from aiostreams import c\n    import aiostreams.d\n")
    known = {"aiostreams.b", "aiostreams.c", "aiostreams.d"}
    assert set(imported("aiostreams.a", source, known)) == known
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
