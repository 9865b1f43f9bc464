"""The DSL's key-value aggregations, tables and stream-table joins read their stores
without awaiting, so they take the engine's synchronous path; a store that can only be
read by awaiting is refused at init, before any record, with what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app

from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.overlay import StoreOverlay, view_for
from aiostreams.topology.nodes import ProcessorNode
from aiostreams.topology.processor import is_async_processor


def processors_of(app: Any) -> dict[str, bool]:
    """Each processor node's kind -> whether its processor must be awaited."""
    found = {}
    for node in app.topology._nodes.values():
        if isinstance(node, ProcessorNode):
            found[node.name.rsplit("-", 1)[0]] = is_async_processor(node.supplier())
    return found


async def test_count_table_and_stream_table_join_are_synchronous_and_exact(
        tmp_path: Path) -> None:
    app = make_app(state_dir=str(tmp_path))
    orders = app.topic("orders", key=str, value=int)
    tiers = app.topic("tiers", key=str, value=int)
    counts = app.topic("counts", key=str, value=int)
    joined = app.topic("joined", key=str, value=int)
    stream = app.stream(orders)
    stream.group_by_key().count(materialized="n", persistent=True).to_stream().to(counts)
    table = app.table(tiers, materialized="tiers", persistent=True)
    stream.join(table, lambda amount, tier: amount * tier).to(joined)
    kinds = processors_of(app)
    assert kinds["KSTREAM-AGGREGATE"] is False
    assert kinds["KTABLE-SOURCE"] is False
    assert kinds["KSTREAM-JOIN"] is False
    produce(app, tiers, [In("a", 10, 0.0)])
    produce(app, orders, [In("a", 1, 1.0), In("b", 2, 2.0), In("a", 3, 3.0)])
    result = await run_app(app, [counts, joined])
    assert result.pairs("counts") == [("a", 1), ("b", 1), ("a", 2)]
    assert result.pairs("joined") == [("a", 10), ("a", 30)]


class AwaitOnly(InMemoryKeyValueStore):
    """A store whose reads must be awaited (it overrides ``get``)."""

    async def get(self, key: Any) -> Any | None:
        return await super().get(key)


class Context:
    """The one part of a processor context ``init`` uses: ``store``."""

    def __init__(self, view: Any) -> None:
        self.view = view

    def store(self, name: str) -> Any:
        return self.view


async def test_an_aggregate_over_a_store_read_only_by_awaiting_fails_at_init() -> None:
    from aiostreams.processors.tables import AggregateProcessor

    view = view_for(StoreOverlay(AwaitOnly("n")))
    assert view.reads_now is False
    with pytest.raises(TypeError, match="cannot be read without awaiting"):
        await AggregateProcessor("n", lambda: 0, lambda _k, _v, n: n + 1).init(
            Context(view))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="get_now"):
        view.get_now("k")
    assert view_for(StoreOverlay(InMemoryKeyValueStore("m"))).reads_now is True
