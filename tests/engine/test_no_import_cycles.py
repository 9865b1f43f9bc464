"""No import circle among the engine's modules, and no engine module in a package-wide
circle (every import counts: module level, function-local and ``if TYPE_CHECKING:`` ones),
so each module can be read, and tested, after the ones it depends on."""

from __future__ import annotations

from import_graph import circles, import_graph


def test_the_cycle_finder_finds_a_two_module_circle() -> None:
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]


def test_engine_modules_import_each_other_without_a_circle() -> None:
    graph = import_graph()
    engine = {m: {d for d in deps if d.startswith("aiostreams.engine.")}
              for m, deps in graph.items() if m.startswith("aiostreams.engine.")}
    assert engine, "no engine modules found"
    assert circles(engine) == []


def test_no_engine_module_is_part_of_a_package_wide_circle() -> None:
    in_cycles = [sorted(c) for c in circles(import_graph())
                 if any(m.startswith("aiostreams.engine.") for m in c)]
    assert in_cycles == []
