"""The status page in a real headless browser (Chromium), looking at a running app: the
page loads, its graph shows every node of the topology, and its numbers move while records
flow (tests/support/status_demo.py is the app; tests/support/browser.py the browser)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from browser import LoopThread
from status_demo import SCORING_LIMIT, RunningDemo, start_demo

from aiostreams.ops.topology_graph import topology_graph


@pytest.fixture
def demo() -> Iterator[RunningDemo]:
    with LoopThread() as loop:
        running = loop.run(start_demo())
        try:
            yield running
        finally:
            loop.run(running.stop())


def expected_graph(demo: RunningDemo) -> dict[str, set[str]]:
    """Node ids by kind, from the topology itself (not from the page)."""
    subs = demo.app.build()
    by_kind: dict[str, set[str]] = {}
    for sub in subs:
        for kind, nodes in (("source", sub.sources), ("processor", sub.processors),
                            ("sink", sub.sinks)):
            by_kind.setdefault(kind, set()).update(n.name for n in nodes)
        by_kind.setdefault("store", set()).update(f"store:{s.name}" for s in sub.stores)
    by_kind["topic"] = {f"topic:{t}" for sub in subs for t in sub.source_topics
                        if t.endswith("-repartition")}
    return by_kind


def test_the_page_draws_every_node_and_its_numbers_move_while_records_flow(
        demo: RunningDemo, new_page: Callable[..., Any]) -> None:
    page = new_page(1280, 900)
    page.goto(demo.page_url)
    assert page.title() == "fraud-scoring · aiostreams"

    drawn: dict[str, set[str]] = {}
    for node in page.query_selector_all("svg.topology g.node"):
        drawn.setdefault(node.get_attribute("data-kind"), set()).add(
            node.get_attribute("data-id"))
    expected = expected_graph(demo)
    assert drawn == expected
    assert len(expected["store"]) == 1 and len(expected["topic"]) == 1  # the demo has both
    assert sum(map(len, drawn.values())) == len(topology_graph(demo.app.build()).nodes)
    assert page.locator("svg.topology path.edge").count() >= sum(map(len, drawn.values())) - 1

    committed = page.locator('[data-k="committed:0_0:orders:0"]')
    as_number = "parseInt(el.textContent.replace(/[^0-9]/g, ''))"
    # the first commit may come after the page loaded ("-" until then)
    page.wait_for_function(f"el => {as_number} >= 0", arg=committed.element_handle(),
                           timeout=15_000)
    first = int(committed.inner_text().replace(",", ""))
    page.evaluate("window.loadedOnce = true")  # gone if the page reloaded
    # the script refreshes every second: wait for the number in place to pass the first
    page.wait_for_function(f"([el, first]) => {as_number} > first",
                           arg=[committed.element_handle(), first], timeout=15_000)
    assert page.evaluate("window.loadedOnce") is True  # updated in place, not reloaded
    assert page.locator("#updated").inner_text().startswith("updated")
    assert page.locator('[data-k="limit:scoring"]').inner_text() == str(SCORING_LIMIT)
    assert page.locator('[data-k="breaker:scoring"]').inner_text() == "closed"
    assert int(page.locator('[data-k="dead_letters"]').inner_text().replace(",", "")) >= 0

    phone = new_page(390, 844)
    phone.goto(demo.page_url)
    # the wide tables scroll in their boxes and the graph scales: the page itself does not
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
