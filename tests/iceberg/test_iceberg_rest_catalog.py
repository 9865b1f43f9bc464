"""The Iceberg sink through a REST catalog (:mod:`aiostreams.localcatalog`: Iceberg's
reference REST adapter from Maven Central, on 127.0.0.1) keeps its promise: a commit built on
a snapshot that is no longer current is refused by the catalog (no re-basing), a write that
crashed after its snapshot landed is replayed as a no-op, and pyiceberg reads each input once
through a fresh client of the catalog."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from icebergkit import (
    TABLE,
    CrashingIcebergSink,
    Order,
    expected_pairs,
    make_iceberg_app,
    pairs,
    records,
    table_durable,
    topic_of_orders,
)

from aiostreams import AiostreamsError, App
from aiostreams.localcatalog import LocalRestCatalog
from aiostreams.sinks.delta_table import WRITER
from aiostreams.sinks.iceberg_sink import IcebergSink, IcebergStep
from aiostreams.sinks.iceberg_table import (
    OFFSETS_KEY,
    IcebergCommitRace,
    append_batch,
    open_table,
)
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.timeout(300)]

N = 400


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRestCatalog]:
    with LocalRestCatalog(tmp_path_factory.mktemp("rest-warehouse")) as catalog:
        yield catalog


def ends_of(broker: MemoryBroker, topic: str) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, p): broker.end_offset(TopicPartition(topic, p)) - 1
            for p in range(2)}


async def test_the_rest_catalog_refuses_a_commit_on_a_snapshot_that_is_no_longer_current(
        rest_catalog: LocalRestCatalog) -> None:
    table = "race.orders"
    tp = TopicPartition("orders", 0)
    first = IcebergSink(table, Order, catalog=rest_catalog.client(), include=("offset",))
    await first.start()
    for r in records(tp, range(10)):
        first.add(r)
    await first.stop()
    stale = open_table(rest_catalog.client(), table)  # the snapshot a slow writer checked
    assert stale is not None
    second = IcebergSink(table, Order, catalog=rest_catalog.client(), include=("offset",))
    await second.start()
    for r in records(tp, range(10, 20)):
        second.add(r)
    await second.stop()  # a newer snapshot: the stale one is no longer main's head

    data = first.schema.to_table([r.value for r in records(tp, range(20, 25))],
                                 {"offset": list(range(20, 25))})
    with pytest.raises(IcebergCommitRace):
        append_batch(stale, data, app=first.app, writer=WRITER, offsets={tp: 24},
                     files_written=lambda: None)
    fresh = open_table(rest_catalog.client(), table)
    assert fresh is not None
    offsets = fresh.scan().to_arrow().column("offset").to_pylist()
    assert sorted(offsets) == list(range(20))  # nothing re-based onto the newer snapshot


async def test_to_iceberg_through_a_rest_catalog_replays_a_crashed_write_as_a_no_op(
        rest_catalog: LocalRestCatalog) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    await topic_of_orders(transport, "orders", range(N))
    first = ends_of(broker, "orders")
    crashing = CrashingIcebergSink(TABLE, Order, catalog=rest_catalog.client(),
                                   include=("partition", "offset"), batch_interval=0.2)
    app = make_iceberg_app("rest-eo", transport, "orders", crashing)
    await app.start()
    await crashing.durable_through(first).wait()
    crashing.crash_at = IcebergStep.COMMITTED  # the snapshot lands; its offsets are not
    await topic_of_orders(transport, "orders", range(N, 2 * N), create=False)
    with pytest.raises(AiostreamsError):
        await app.wait()
    end = ends_of(broker, "orders")
    assert {tp: broker.committed("rest-eo", tp) for tp in end} != {
        tp: o + 1 for tp, o in end.items()}  # so the restarted app replays what landed

    again = App("rest-eo", transport=transport, commit_interval_ms=100)
    orders = again.topic("orders", key=str, value=Order)
    sink = again.stream(orders).to_iceberg(
        TABLE, Order, catalog=rest_catalog.client(), include=("partition", "offset"),
        batch_interval=0.2)
    async with again:
        await again.wait_until_caught_up(timeout=30)  # every commit flushes the sink
    assert table_durable(sink) == end
    # the replayed records reached the sink, which dropped those the crashed write landed
    assert sink.metrics.rows_replayed > 0
    assert sink.metrics.rows_replayed + sink.metrics.rows_written == N

    table = rest_catalog.client("reader").load_table(TABLE)
    summary = table.current_snapshot().summary
    assert summary is not None and OFFSETS_KEY in summary  # kept by the REST catalog
    seen = Counter(pairs(table.scan().to_arrow()))
    assert set(seen) == expected_pairs(end) and set(seen.values()) == {1}
    assert str(rest_catalog.warehouse) in table.metadata_location  # the catalog's files
