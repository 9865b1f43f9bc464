"""Exactly once through the Delta sink: a write interrupted at each of its steps, then a fresh
app and sink replaying from the committed offsets, leave every input in the table once; a
replay is dropped against the table's app transactions, even by a sink that did not write
it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from deltakit import (
    CrashingDeltaSink,
    WatchedDeltaSink,
    make_delta_app,
    pairs,
    read_with_deltars,
)
from deltalake import DeltaTable
from sparkkit import (
    Order,
    add_orders,
    create_topic,
    order_records,
    produce,
    unique,
)

from aiostreams import AiostreamsError
from aiostreams.sinks import DeltaSink, DeltaStep, SinkState
from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

PHASE = 1500


def ends_of(broker: MemoryBroker, topic: str) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, p): broker.end_offset(TopicPartition(topic, p))
            for p in range(2)}


@pytest.mark.parametrize("step", list(DeltaStep))
async def test_crash_at_each_delta_write_step_then_replay_holds_each_input_once(
        tmp_path: Path, step: DeltaStep) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("eo")
    await create_topic(transport, topic, 2)
    path = tmp_path / "orders"
    await produce(transport, topic, order_records(range(PHASE)))
    first = {tp: end - 1 for tp, end in ends_of(broker, topic).items()}
    crashing = CrashingDeltaSink(path, Order, include=("partition", "offset"), batch_interval=0.5)
    app = make_delta_app(group, transport, topic, crashing)
    await app.start()
    await crashing.durable_through(first).wait()
    version_before = DeltaTable(str(path)).version()
    crashing.crash_at = step
    await produce(transport, topic, order_records(range(PHASE, 2 * PHASE)))
    with pytest.raises(AiostreamsError):
        await app.wait()
    assert crashing.state is SinkState.STOPPED
    end = ends_of(broker, topic)
    assert {tp: broker.committed(group, tp) or 0 for tp in end} != end
    committed_rows = DeltaTable(str(path)).version() > version_before
    assert committed_rows is (step is DeltaStep.COMMITTED)

    sink = WatchedDeltaSink(path, Order, include=("partition", "offset"), batch_interval=0.5)
    async with make_delta_app(group, transport, topic, sink):
        last = {tp: e - 1 for tp, e in end.items()}
        await sink.durable_through(last).wait()
        await sink.retired_through(last).wait()
    assert {tp: broker.committed(group, tp) for tp in end} == end
    if step is DeltaStep.COMMITTED:
        assert sink.metrics.rows_replayed > 0
    table = read_with_deltars(path)
    assert sorted(table.column("id").to_pylist()) == list(range(2 * PHASE))
    assert max(Counter(pairs(table)).values()) == 1


async def test_records_at_or_below_the_transaction_version_are_dropped_as_replays(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    first = DeltaSink(tmp_path / "d", Order)
    await first.start()
    add_orders(first, range(10), tp)  # type: ignore[arg-type]
    await first.stop()
    assert first.durable_offset(tp) == 9
    assert DeltaTable(str(tmp_path / "d")).transaction_version(
        transaction_app_id("aiostreams", tp)) == 9

    second = DeltaSink(tmp_path / "d", Order)
    await second.start()
    add_orders(second, range(5, 15), tp)  # type: ignore[arg-type]
    await second.stop()
    assert second.metrics.rows_replayed == 5
    ids = read_with_deltars(tmp_path / "d").column("id").to_pylist()
    assert sorted(ids) == list(range(15))


async def test_a_batch_another_sink_committed_meanwhile_is_not_written_twice(
        tmp_path: Path) -> None:
    """Both sinks start on an empty table (neither knows a durable offset), both take the
    same records: the second write re-reads the transaction versions inside the writer and
    drops them."""
    tp = TopicPartition("orders", 1)
    one, two = DeltaSink(tmp_path / "d", Order), DeltaSink(tmp_path / "d", Order)
    await one.start()
    await two.start()
    add_orders(one, range(20), tp)  # type: ignore[arg-type]
    add_orders(two, range(10, 25), tp)  # type: ignore[arg-type]
    await one.flush()
    await two.flush()
    assert two.metrics.rows_replayed == 10
    assert two.durable_offset(tp) == 24
    ids = read_with_deltars(tmp_path / "d").column("id").to_pylist()
    assert sorted(ids) == list(range(25))
    await one.stop()
    await two.stop()


async def test_pending_offset_holds_the_first_unwritten_record_until_its_commit_lands(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    sink = DeltaSink(tmp_path / "d", Order)
    await sink.start()
    add_orders(sink, range(3, 8), tp)  # type: ignore[arg-type]
    assert sink.pending_offset(tp) == 3
    await sink.flush()
    assert sink.pending_offset(tp) is None
    assert sink.durable_offset(tp) == 7
    await sink.stop()
