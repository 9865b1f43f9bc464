"""Table maintenance of the Iceberg sink: compaction leaves fewer files and every row once
(and the durable offsets readable, so a replay is still dropped); vacuum deletes old orphans
and keeps every listed file; a compaction that loses a race with another writer's commit is
dropped and duplicates nothing; a sink without maintenance runs none; the figures reach
Prometheus."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from icebergkit import (
    TABLE,
    Order,
    assert_every_reader_sees_each_input_once,
    read_arrow,
    records,
    table_durable,
    topic_of_orders,
)
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation

from aiostreams import App
from aiostreams.errors import ConfigError
from aiostreams.ops.metrics import metrics_registry
from aiostreams.runtime.table_health import TableHealth
from aiostreams.sinks import TableMaintenance
from aiostreams.sinks.iceberg_maintenance import IcebergMaintainer
from aiostreams.sinks.iceberg_sink import IcebergSink
from aiostreams.sinks.iceberg_table import OFFSETS_KEY
from aiostreams.sinks.maintenance import MaintenanceConflict
from aiostreams.sinks.spark.spark_thread import run_on_spark_thread
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
EVERY_FLUSH = TableMaintenance(compact_every=1e-6, vacuum_every=None, retention=3600.0,
                               target_file_size=1 << 20)


def live_files(table: Table) -> list[str]:
    return [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]


def parquet_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*.parquet")}


def listed_files(table: Table) -> set[str]:
    """The data files any snapshot of ``table`` lists."""
    return {t.file.file_path.removeprefix("file://") for s in table.metadata.snapshots
            for t in table.scan(snapshot_id=s.snapshot_id).plan_files()}


def expected(lasts: dict[TopicPartition, int]) -> set[tuple[int, int]]:
    return {(tp.partition, o) for tp, last in lasts.items() for o in range(last + 1)}


async def write_batches(sink: IcebergSink, batches: int, rows: int = 12,
                        first: int = 0) -> None:
    """``batches`` flushes of ``rows`` rows from each of P0 and P1 (from batch ``first``
    on), each followed by a wait until the maintenance queued after it (the writer thread is
    FIFO) is done."""
    for b in range(first, first + batches):
        for tp in (P0, P1):
            for r in records(tp, range(b * rows, (b + 1) * rows), id_base=1000 * tp.partition):
                sink.add(r)
        await sink.flush()
        await run_on_spark_thread(lambda: None)


def make_sink(warehouse: Path, maintenance: TableMaintenance | None = EVERY_FLUSH) -> IcebergSink:
    return IcebergSink(TABLE, Order, warehouse=warehouse, include=("partition", "offset"),
                       partition_by=("region",), maintenance=maintenance)


async def test_compaction_leaves_one_file_per_partition_and_every_row_once(
        tmp_path: Path) -> None:
    plain = make_sink(tmp_path / "plain", maintenance=None)
    compacted = make_sink(tmp_path / "compacted")
    for sink in (plain, compacted):
        await sink.start()
        await write_batches(sink, 5)
    plain_table, table = plain.load(), compacted.load()
    assert plain_table is not None and table is not None
    assert len(live_files(plain_table)) == 5 * 3  # a file per region per batch
    assert len(live_files(table)) == 3  # one per region
    health = compacted.table_health
    assert health is not None and plain.table_health is None
    assert health.compactions == 5 and health.files_compacted > 0 and health.conflicts == 0
    assert health.files_per_partition == {"region=apac": 1, "region=eu": 1, "region=us": 1}
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.operation is Operation.REPLACE
    assert snapshot.summary.get(OFFSETS_KEY) is None  # a compaction records no offsets
    lasts = {P0: 59, P1: 59}
    assert table_durable(compacted) == lasts  # read through it, from the append below
    assert_every_reader_sees_each_input_once(compacted, expected(lasts))
    assert sorted(read_arrow(compacted).column("id").to_pylist()) == sorted(
        read_arrow(plain).column("id").to_pylist())
    for sink in (plain, compacted):
        await sink.stop()


async def test_a_replay_after_compaction_and_expiry_is_still_dropped(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    await sink.start()
    await write_batches(sink, 3)
    await sink.stop()
    table = sink.load()
    assert table is not None
    # expire every snapshot older than now: only the compaction and the append below stay
    await run_on_spark_thread(IcebergMaintainer(sink.load, sink.app)._expire, table,
                              int(time.time() * 1000) + 1)
    table = sink.load()
    assert table is not None and len(table.metadata.snapshots) == 2
    again = make_sink(tmp_path)
    await again.start()
    assert again.durable_offset(P0) == again.durable_offset(P1) == 35
    for tp in (P0, P1):
        for r in records(tp, range(0, 40), id_base=1000 * tp.partition):
            again.add(r)  # a replay from offset 0: all but the last 4 of each are durable
    await again.stop()
    assert again.metrics.rows_replayed == 2 * 36
    assert_every_reader_sees_each_input_once(again, expected({P0: 39, P1: 39}))


async def test_vacuum_deletes_old_orphans_and_keeps_listed_files_and_recent_ones(
        tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    await sink.start()
    await write_batches(sink, 3)
    table = sink.load()
    assert table is not None
    data = Path(table.metadata.location.removeprefix("file://")) / "data"
    old_orphan = data / "region=eu" / "00000-0-killed-write.parquet"
    recent_orphan = data / "region=eu" / "00000-1-being-written.parquet"
    for stray in (old_orphan, recent_orphan):
        stray.write_bytes(b"PAR1" + b"\0" * 1000)
    long_ago = time.time() - 7200
    os.utime(old_orphan, (long_ago, long_ago))
    health = TableHealth()
    settings = TableMaintenance(retention=3600.0)
    await run_on_spark_thread(IcebergMaintainer(sink.load, sink.app).vacuum, settings, health)
    assert not old_orphan.exists()
    assert recent_orphan.exists()  # younger than the retention: maybe a write in progress
    assert health.files_deleted == 1 and health.bytes_reclaimed == 1004
    table = sink.load()
    assert table is not None
    assert listed_files(table) <= parquet_files(tmp_path)  # every listed file is still there
    assert_every_reader_sees_each_input_once(sink, expected({P0: 35, P1: 35}))
    await sink.stop()


async def test_vacuum_past_the_retention_deletes_the_files_compaction_replaced(
        tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    await sink.start()
    await write_batches(sink, 4)
    on_disk = len(parquet_files(tmp_path))
    health = TableHealth()
    # retention 1 ms: every snapshot but the kept ones expires, then their files go
    await run_on_spark_thread(IcebergMaintainer(sink.load, sink.app).vacuum,
                              TableMaintenance(retention=0.001), health)
    table = sink.load()
    assert table is not None
    listed = listed_files(table)
    assert parquet_files(tmp_path) == listed
    assert len(listed) < on_disk and health.bytes_reclaimed > 0
    assert_every_reader_sees_each_input_once(sink, expected({P0: 47, P1: 47}))
    await sink.stop()


async def test_a_compaction_that_lost_a_race_commits_nothing_and_cleans_its_files(
        tmp_path: Path) -> None:
    one = make_sink(tmp_path, maintenance=None)
    await one.start()
    await write_batches(one, 3)
    stale = one.load()  # the snapshot a second worker's compaction starts from
    assert stale is not None
    for r in records(P0, range(36, 40)):  # meanwhile the first worker appends
        one.add(r)
    await one.flush()
    files_before = parquet_files(tmp_path)
    health = TableHealth()
    maintainer = IcebergMaintainer(lambda: stale, "aiostreams")
    with pytest.raises(MaintenanceConflict):
        await run_on_spark_thread(maintainer.compact, EVERY_FLUSH, health)
    assert parquet_files(tmp_path) == files_before  # its rewritten files deleted
    table = one.load()
    assert table is not None and table.current_snapshot() is not None
    assert table.current_snapshot().summary.operation is Operation.APPEND  # type: ignore
    assert_every_reader_sees_each_input_once(one, expected({P0: 39, P1: 35}))
    await one.stop()


async def test_a_sink_whose_maintenance_conflicts_keeps_writing(tmp_path: Path) -> None:
    """The runner counts a lost race and carries on; the next compaction lands."""
    sink = make_sink(tmp_path)
    await sink.start()
    await write_batches(sink, 2)
    runner = sink._maintenance
    assert runner is not None
    real = runner._maintainer
    lost = 0

    class Losing(IcebergMaintainer):
        def compact(self, settings: TableMaintenance, health: TableHealth) -> None:
            nonlocal lost
            lost += 1
            raise MaintenanceConflict("another writer's commit came first")

    runner._maintainer = lambda: Losing(sink.load, sink.app)
    await write_batches(sink, 2, first=2)
    runner._maintainer = real
    await write_batches(sink, 1, first=4)
    health = sink.table_health
    assert health is not None
    assert (lost, health.conflicts, health.errors) == (2, 2, 0), health
    assert health.files_per_partition == {"region=apac": 1, "region=eu": 1, "region=us": 1}
    assert_every_reader_sees_each_input_once(sink, expected({P0: 59, P1: 59}))
    await sink.stop()


async def three_rounds_durable(app: App, broker: MemoryBroker, transport: MemoryTransport,
                               sink: IcebergSink) -> dict[TopicPartition, int]:
    """Three rounds of 200 orders (the first already in the topic), each durable in the
    table before the next: three appends at least. Returns the last offsets."""
    ends: dict[TopicPartition, int] = {}
    for round in range(3):
        if round:
            await topic_of_orders(transport, "orders", range(200 * round, 200 * round + 200),
                                  create=False)
        ends = {TopicPartition("orders", p): broker.end_offset(TopicPartition("orders", p))
                - 1 for p in range(2)}
        while table_durable(sink) != ends:  # a table commit announces nothing in-process
            await app.wait_until_caught_up(timeout=30)
    return ends


async def test_a_maintained_sink_exports_its_table_figures_to_prometheus(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    await topic_of_orders(transport, "orders", range(200))
    app = App("maintained", transport=transport, commit_interval_ms=100)
    orders = app.topic("orders", key=str, value=Order)
    stream = app.stream(orders)
    sink = stream.to_iceberg(
        TABLE, Order, warehouse=tmp_path, include=("partition", "offset"),
        partition_by=("region",), batch_rows=100, batch_interval=0.1, maintenance=EVERY_FLUSH)
    plain = stream.to_iceberg("lake.plain", Order, warehouse=tmp_path / "plain")
    registry, _ = metrics_registry(app)
    async with app:
        await three_rounds_durable(app, broker, transport, sink)  # files to compact
        await run_on_spark_thread(lambda: None)  # the maintenance queued by the last flush
        text = generate_latest(registry).decode()
    health = sink.table_health
    assert health is not None and health.compactions >= 2
    samples = {(m.name, tuple(sorted(m.labels.items()))): m.value
               for family in text_string_to_metric_families(text) for m in family.samples}
    ours = (("app", "maintained"), ("sink", sink.name))
    assert samples[("aiostreams_table_compactions_total", ours)] == health.compactions
    assert samples[("aiostreams_table_files_compacted_total", ours)] == health.files_compacted
    assert samples[("aiostreams_table_maintenance_conflicts_total", ours)] == 0
    for region in ("eu", "us", "apac"):
        key = tuple(sorted((*ours, ("partition", f"region={region}"))))
        assert samples[("aiostreams_table_files", key)] == 1
    assert plain.name not in text  # a sink without maintenance has no series


async def test_an_idle_sink_runs_its_maintenance_when_due_without_a_new_row(
        tmp_path: Path) -> None:
    """Maintenance is on a schedule, not on new rows: once compaction is due, the next
    commit of an app with no input left flushes the sink empty and the compaction runs."""
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    await topic_of_orders(transport, "orders", range(200))
    app = App("idle-maintained", transport=transport, commit_interval_ms=100)
    orders = app.topic("orders", key=str, value=Order)
    hourly = TableMaintenance(compact_every=3600.0, vacuum_every=None, retention=3600.0,
                              target_file_size=1 << 20)
    sink = app.stream(orders).to_iceberg(
        TABLE, Order, warehouse=tmp_path, include=("partition", "offset"),
        partition_by=("region",), batch_rows=100, batch_interval=0.1, maintenance=hourly)
    async with app:
        ends = await three_rounds_durable(app, broker, transport, sink)  # files to compact
        table = sink.load()
        assert table is not None and len(live_files(table)) > 3
        runner, health = sink._maintenance, sink.table_health
        assert runner is not None and health is not None and health.compactions == 0
        an_hour_later = runner._clock() + 3601.0
        runner._clock = lambda: an_hour_later  # the hour passes with no input
        worker = app.inspect().worker
        assert worker is not None
        for _ in range(2):  # one commit may have passed its flush before the hour did
            await worker.next_commit()
        await run_on_spark_thread(lambda: None)  # the compaction that flush queued
    assert health.compactions == 1 and health.errors == 0
    table = sink.load()
    assert table is not None and len(live_files(table)) == 3  # one per region
    assert_every_reader_sees_each_input_once(sink, expected(ends))


def test_maintenance_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="retention"):
        TableMaintenance(retention=0)
    with pytest.raises(ConfigError, match="compact_every"):
        TableMaintenance(compact_every=-1.0)
    with pytest.raises(ConfigError, match="min_files"):
        TableMaintenance(min_files=1)
    with pytest.raises(ConfigError, match="TableMaintenance"):
        IcebergSink(TABLE, Order, warehouse="/tmp/x",
                    maintenance={"compact_every": 1})  # type: ignore[arg-type]
    assert TableMaintenance(retention=1.0).retention_hours == 1
    assert TableMaintenance(retention=3601.0).retention_hours == 2
