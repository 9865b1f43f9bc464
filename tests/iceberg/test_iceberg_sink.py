"""The Iceberg sink on the memory broker: what goes in comes out (schema and partitioning as
declared), a table of another shape or app is refused, and a write interrupted at each of
its steps, then replayed by a fresh app, leaves every input in the table once."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from icebergkit import (
    TABLE,
    CrashingIcebergSink,
    Order,
    WatchedIcebergSink,
    assert_every_reader_sees_each_input_once,
    expected_pairs,
    make_iceberg_app,
    make_order,
    pairs,
    read_arrow,
    records,
    table_durable,
    topic_of_orders,
)

from aiostreams import AiostreamsError, App
from aiostreams.errors import ConfigError
from aiostreams.sinks import SinkState, TableIdentityError
from aiostreams.sinks.iceberg_sink import IcebergSink, IcebergStep
from aiostreams.sinks.iceberg_table import OFFSETS_KEY
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

N = 600


def ends_of(broker: MemoryBroker, topic: str) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, p): broker.end_offset(TopicPartition(topic, p)) - 1
            for p in range(2)}


async def test_to_iceberg_writes_each_value_once_with_the_declared_schema_and_partitioning(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    await topic_of_orders(transport, "orders", range(N))
    app = App("roundtrip", transport=transport, commit_interval_ms=100)
    orders = app.topic("orders", key=str, value=Order)
    sink = app.stream(orders).to_iceberg(
        TABLE, Order, warehouse=tmp_path / "lake", include=("partition", "offset"),
        partition_by=("region", "day(placed_at)"), batch_interval=0.2)
    ends = ends_of(broker, "orders")
    async with app:
        while table_durable(sink) != ends:  # a table commit announces nothing in-process
            await app.wait_until_caught_up(timeout=30)

    table = sink.load()
    assert table is not None
    spec = [(table.schema().find_column_name(f.source_id), str(f.transform))
            for f in table.spec().fields]
    assert spec == [("region", "identity"), ("placed_at", "day")]
    data = read_arrow(sink)
    assert data.schema.field("placed_at").type == pa.timestamp("us", tz="UTC")
    assert data.schema.field("items").type.value_type == pa.string()
    rows = {r["id"]: r for r in data.to_pylist()}
    assert sorted(rows) == list(range(N))
    for i in (0, 1, 5, N - 1):
        want = make_order(i).model_dump()
        got = {k: rows[i][k] for k in want}
        assert got == want
    assert_every_reader_sees_each_input_once(sink, expected_pairs(ends))
    assert len({f.file.partition for f in table.scan().plan_files()}) > 1


async def test_each_snapshot_records_every_durable_offset_in_its_summary(tmp_path: Path) -> None:
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    sink = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await sink.start()
    for r in records(p0, range(5)):
        sink.add(r)
    await sink.flush()
    for r in records(p1, range(3), id_base=100):
        sink.add(r)
    await sink.flush()
    await sink.stop()
    table = sink.load()
    assert table is not None and table.current_snapshot() is not None
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None
    assert summary[OFFSETS_KEY] == '{"orders":{"0":4,"1":2}}'  # p0 kept though not written
    assert table_durable(sink) == {p0: 4, p1: 2}


async def test_records_at_or_below_the_durable_offsets_are_dropped_as_replays(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    first = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await first.start()
    for r in records(tp, range(10)):
        first.add(r)
    await first.stop()
    second = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await second.start()
    assert second.durable_offset(tp) == 9  # read back from the snapshot summary at start
    for r in records(tp, range(5, 15)):
        second.add(r)
    await second.stop()
    assert second.metrics.rows_replayed == 5
    assert sorted(read_arrow(second).column("id").to_pylist()) == list(range(15))


async def test_a_batch_another_sink_committed_meanwhile_is_not_written_twice(
        tmp_path: Path) -> None:
    """Both start before either wrote; the second write re-reads the offsets on the writer
    thread and drops what the first made durable."""
    tp = TopicPartition("orders", 1)
    one = IcebergSink(TABLE, Order, warehouse=tmp_path)
    two = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await one.start()
    await two.start()
    for r in records(tp, range(20)):
        one.add(r)
    for r in records(tp, range(10, 25)):
        two.add(r)
    await one.flush()
    await two.flush()
    assert two.metrics.rows_replayed == 10
    assert two.durable_offset(tp) == 24
    assert sorted(read_arrow(two).column("id").to_pylist()) == list(range(25))
    await one.stop()
    await two.stop()


class RacedIcebergSink(IcebergSink):
    """Between this sink's check and its commit, another writer commits ``other`` (the same
    source partition, overlapping offsets) - ``races`` times."""

    def __init__(self, *args: object, other: list[list[object]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.other = other

    def _after(self, step: IcebergStep) -> None:
        if step is IcebergStep.FILES_WRITTEN and self.other:
            writer = IcebergSink(self.table, Order, catalog=self.catalog)
            writer._write_batch(self.other.pop(0))  # type: ignore[arg-type]


async def test_a_commit_that_loses_a_race_checks_again_and_never_adds_a_row_twice(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    seed = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await seed.start()
    seed.add(records(tp, range(1))[0])
    await seed.stop()
    sink = RacedIcebergSink(TABLE, Order, warehouse=tmp_path,
                            other=[records(tp, range(1, 30)), records(tp, range(30, 40))])
    await sink.start()
    for r in records(tp, range(1, 50)):
        sink.add(r)
    await sink.stop()
    ids = Counter(read_arrow(sink).column("id").to_pylist())
    assert sorted(ids) == list(range(50)) and set(ids.values()) == {1}
    assert sink.metrics.commit_conflicts == 2
    assert sink.metrics.rows_written == 10  # 40..49: the rest the other writer committed
    assert table_durable(sink) == {tp: 49}


@pytest.mark.parametrize("step", list(IcebergStep))
async def test_crash_at_each_iceberg_write_step_then_replay_holds_each_input_once(
        tmp_path: Path, step: IcebergStep) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    await topic_of_orders(transport, "orders", range(N))
    first = ends_of(broker, "orders")
    crashing = CrashingIcebergSink(TABLE, Order, warehouse=tmp_path,
                                   include=("partition", "offset"), batch_interval=0.2)
    app = make_iceberg_app("eo", transport, "orders", crashing)
    await app.start()
    await crashing.durable_through(first).wait()
    table = crashing.load()
    assert table is not None and table.current_snapshot() is not None
    snapshot_before = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    crashing.crash_at = step
    await topic_of_orders(transport, "orders", range(N, 2 * N), create=False)
    with pytest.raises(AiostreamsError):
        await app.wait()
    assert crashing.state is SinkState.STOPPED
    end = ends_of(broker, "orders")
    assert {tp: broker.committed("eo", tp) for tp in end} != {tp: o + 1 for tp, o in end.items()}
    table = crashing.load()
    assert table is not None
    landed = table.current_snapshot().snapshot_id != snapshot_before  # type: ignore[union-attr]
    assert landed is (step is IcebergStep.COMMITTED)

    sink = WatchedIcebergSink(TABLE, Order, warehouse=tmp_path,
                              include=("partition", "offset"), batch_interval=0.2)
    async with make_iceberg_app("eo", transport, "orders", sink) as again:
        await sink.durable_through(end).wait()
        await again.wait_until_caught_up(timeout=30)
    if step is IcebergStep.COMMITTED:
        assert sink.metrics.rows_replayed > 0
    data = read_arrow(sink)
    assert sorted(data.column("id").to_pylist()) == list(range(2 * N))
    assert max(Counter(pairs(data)).values()) == 1


async def test_a_table_of_another_app_or_partitioning_is_refused_before_writing(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    sink = IcebergSink(TABLE, Order, warehouse=tmp_path, partition_by=("region",))
    sink.bind_app("one")
    await sink.start()
    sink.add(records(tp, range(1))[0])
    await sink.stop()

    other_app = IcebergSink(TABLE, Order, warehouse=tmp_path, partition_by=("region",))
    other_app.bind_app("two")
    with pytest.raises(TableIdentityError,
                       match=r"the Iceberg table lake\.orders is written for app 'one'"):
        await other_app.start()
    other_spec = IcebergSink(TABLE, Order, warehouse=tmp_path,
                             partition_by=("day(placed_at)",))
    other_spec.bind_app("one")
    with pytest.raises(ConfigError, match=r"partitioned by \['identity\(region\)'\]"):
        await other_spec.start()


class Renamed(Order):
    id: str  # type: ignore[assignment]


async def test_a_model_that_no_longer_fits_is_refused_and_a_new_optional_field_is_added(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    sink = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await sink.start()
    sink.add(records(tp, range(1))[0])
    await sink.stop()
    with pytest.raises(ConfigError, match="id"):
        await IcebergSink(TABLE, Renamed, warehouse=tmp_path).start()

    class Later(Order):
        shipped_on: dt.date | None = None

    later = IcebergSink(TABLE, Later, warehouse=tmp_path)
    await later.start()
    later.add(records(tp, range(1, 2))[0].__class__(
        "iceberg", tp, 1, "1", Later(**make_order(1).model_dump(), shipped_on=dt.date(2024, 5, 2)),
        0.0))
    await later.stop()
    rows = sorted(read_arrow(later).to_pylist(), key=lambda r: r["id"])
    assert [r["shipped_on"] for r in rows] == [None, dt.date(2024, 5, 2)]


def test_bad_arguments_say_what_to_change(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"namespace\.table"):
        IcebergSink("orders", Order, warehouse=tmp_path)
    with pytest.raises(ConfigError, match=r"catalog .* or a warehouse"):
        IcebergSink(TABLE, Order)
    with pytest.raises(ConfigError, match="date or timestamp"):
        IcebergSink(TABLE, Order, warehouse=tmp_path, partition_by=("day(region)",))
    with pytest.raises(ConfigError, match="not a column"):
        IcebergSink(TABLE, Order, warehouse=tmp_path, partition_by=("nope",))


async def test_durable_offsets_survive_foreign_snapshots_and_expired_history(
        tmp_path: Path) -> None:
    """Another engine's snapshot on top (no aiostreams summary) is skipped, and expiring
    every older snapshot loses no partition's offset: each aiostreams snapshot holds them
    all."""
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    sink = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await sink.start()
    for source, base in ((p0, 0), (p1, 100)):
        for r in records(source, range(5), id_base=base):
            sink.add(r)
        await sink.flush()
    await sink.stop()
    table = sink.load()
    assert table is not None
    table.append(sink.schema.to_table([make_order(999)], {}))  # a foreign writer's append
    table = sink.load()
    assert table is not None and len(table.metadata.snapshots) == 3
    current = table.current_snapshot()
    assert current is not None
    table.maintenance.expire_snapshots().by_ids(
        [s.snapshot_id for s in table.metadata.snapshots
         if s.snapshot_id not in (current.snapshot_id, current.parent_snapshot_id)]).commit()

    again = IcebergSink(TABLE, Order, warehouse=tmp_path)
    await again.start()
    assert (again.durable_offset(p0), again.durable_offset(p1)) == (4, 4)
    for source, base in ((p0, 0), (p1, 100)):
        for r in records(source, range(8), id_base=base):
            again.add(r)
    await again.stop()
    ids = Counter(read_arrow(again).column("id").to_pylist())
    assert set(ids.values()) == {1} and len(ids) == 8 + 8 + 1
