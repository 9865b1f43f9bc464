"""The configuration reference (``docs/reference/configuration.md``) is generated from the
settings model by ``docs/hooks.py``: grouped by concern, every setting in exactly one group,
each with its type and allowed values, default, environment variable and description; and
inline code wraps only after ``_ . /`` (wall 9 of issue 36: "max_in_fli ght")."""

from __future__ import annotations

import importlib
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

import aiostreams

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    sys.path.insert(0, str(DOCS))
    try:
        return importlib.import_module("hooks")
    finally:
        sys.path.remove(str(DOCS))


def entries(reference: str) -> dict[str, str]:
    """Setting name -> the HTML of its ``<dt>``/``<dd>`` pair."""
    found = re.findall(r'(<dt id="(\w+)">.*?</dd>)', reference, re.S)
    return {name: entry for entry, name in found}


def test_every_setting_is_in_exactly_one_concern(hooks: ModuleType) -> None:
    listed = Counter(name for _, _, members in hooks.CONCERNS for name in members)
    settings = set(aiostreams.Settings.model_fields)
    twice = sorted(name for name, count in listed.items() if count > 1)
    missing = sorted(settings - set(listed))
    stale = sorted(set(listed) - settings)
    assert not (twice or missing or stale), (
        f"docs/hooks.py CONCERNS: listed twice {twice}, not listed {missing}, "
        f"not settings {stale}; give each setting one section")


def test_a_setting_no_concern_lists_still_gets_an_entry(hooks: ModuleType) -> None:
    groups = hooks.grouped_settings(["broker", "brand_new", "max_in_flight"])
    assert [(title, members) for title, _, members in groups] == [
        ("Where the app runs", ["broker"]),
        ("Records in flight: the reorder buffer", ["max_in_flight"]),
        (hooks.UNGROUPED, ["brand_new"])]


def test_the_reference_gives_every_settings_type_default_variable_and_meaning(
        hooks: ModuleType) -> None:
    page = hooks.on_page_markdown("# Configuration\n\n<!-- settings-table -->\n")
    found = entries(page)
    assert set(found) == set(aiostreams.Settings.model_fields)
    for name, entry in found.items():
        assert f"<code>AIOSTREAMS_{name.upper()}</code>" in entry, name
        assert " · default <code>" in entry, name
        meaning = re.search(r"<p>(.*?)</p></dd>", entry, re.S)
        assert meaning and meaning[1].strip(" ."), f"{name} has no description"
    assert "<code>'key'</code> | <code>'partition'</code> | <code>'unordered'</code>" in (
        found["ordering"])
    assert ("<code>'fail'</code> | <code>'skip'</code> | <code>'dead_letter'</code> | "
            "<code>None</code>") in found["on_error"]
    assert "<code>int</code>, ≥ 1 · default <code>20_000</code>" in found["max_in_flight"]
    assert "default <code>33_554_432 (32 MiB)</code>" in found["max_task_buffer_bytes"]
    # another setting named in a description links to its entry
    assert '<a href="#max_task_buffer_bytes">' in found["max_in_flight"]
    headings = re.findall(r"^## (.+)$", page, re.M)
    assert headings == [title for title, _, _ in hooks.CONCERNS]


def test_inline_code_breaks_only_after_separators_and_code_blocks_are_untouched(
        hooks: ModuleType) -> None:
    html = ("<td><code>max_in_flight</code></td><p><code>a.b/c</code></p>"
            "<pre><span></span><code>max_in_flight = 1\n</code></pre><code>x_</code>")
    assert hooks.on_page_content(html) == (
        "<td><code>max_<wbr>in_<wbr>flight</code></td><p><code>a.<wbr>b/<wbr>c</code></p>"
        "<pre><span></span><code>max_in_flight = 1\n</code></pre><code>x_</code>")


def test_the_marker_quoted_in_a_sentence_is_left_alone(hooks: ModuleType) -> None:
    prose = "The hook fills a line `<!-- settings-table -->` with the reference.\n"
    assert hooks.on_page_markdown(prose) == prose
