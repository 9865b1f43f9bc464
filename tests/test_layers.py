"""The package keeps its layers: every import (at module level, in a function, or for type
checking) goes from a group of modules to one its row of ``MAY_IMPORT`` allows, the table
itself has no circle, the ``NEVER`` rules hold, and docs/concepts/architecture.md draws this
very table (see tests/support/layers.py for the data)."""

from __future__ import annotations

from pathlib import Path

from import_graph import circles, import_graph
from layers import GROUPS, MAY_IMPORT, NEVER, NEVER_EXCEPT, group_of

ARCHITECTURE = Path(__file__).parents[1] / "docs" / "concepts" / "architecture.md"


def crossings() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for module, targets in import_graph().items():
        for target in targets:
            pair = (group_of(module), group_of(target))
            if pair[0] != pair[1]:
                found.setdefault(pair, []).append(f"{module} -> {target}")
    return found


def test_every_module_is_in_a_layer_and_every_import_goes_where_its_layer_may() -> None:
    wrong = {f"{a} -> {b}": edges for (a, b), edges in crossings().items()
             if b not in MAY_IMPORT[a]}
    assert wrong == {}


def test_the_layers_themselves_form_no_circle() -> None:
    assert set(MAY_IMPORT) == set(GROUPS)
    assert circles({g: set(targets) for g, targets in MAY_IMPORT.items()}) == []
    assert all(g not in targets for g, targets in MAY_IMPORT.items())


def exempt(rule: str, module: str) -> bool:
    return any(module == p or module.startswith(p + ".") or (module.startswith(p)
               and p.endswith(".")) for p in NEVER_EXCEPT.get(rule, set()))


def test_no_never_rule_is_broken() -> None:
    broken = []
    for module, targets in import_graph().items():
        for importer, imported, why in NEVER:
            if not module.startswith(importer) or exempt(importer, module):
                continue
            for target in targets:
                if target.startswith(imported) and not exempt(importer, target):
                    broken.append(f"{module} -> {target}: {why}")
    assert broken == []


def drawing() -> str:
    """The table as architecture.md shows it: a layer per row, top to bottom."""
    rows = ["| layer | modules | may import |", "| --- | --- | --- |"]
    for group, prefixes in GROUPS.items():
        allowed = ", ".join(g for g in GROUPS if g in MAY_IMPORT[group]) or "nothing of ours"
        rows.append(f"| {group} | {', '.join(f'`{p}`' for p in prefixes)} | {allowed} |")
    return "\n".join(rows)


def test_architecture_md_draws_the_layer_table() -> None:
    assert drawing() in ARCHITECTURE.read_text(), (
        "docs/concepts/architecture.md no longer draws tests/support/layers.py; paste:\n"
        + drawing())


def test_a_lower_layer_importing_a_higher_one_is_caught(tmp_path: Path) -> None:
    assert "engine" not in MAY_IMPORT["state"]  # what the first test would report
    assert group_of("aiostreams.state.overlay") == "state"
    assert group_of("aiostreams.lifecycle.state") == "vocabulary"  # the longest prefix wins
