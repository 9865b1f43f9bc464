"""Table maintenance of the Delta sink: compaction leaves fewer files and every row once for
delta-rs, pandas and DuckDB, and keeps the app transactions (a replay is still dropped);
vacuum deletes old orphans and keeps every listed file; two writers with maintenance on one
table interleave, and a compaction that loses a race with the other's commits nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from deltakit import (
    pairs,
    read_with_deltars,
    read_with_duckdb,
    read_with_pandas,
    records,
    seen_once,
)
from deltalake import DeltaTable
from sparkkit import Order

from aiostreams.runtime.table_health import TableHealth
from aiostreams.sinks import DeltaSink, TableMaintenance
from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.sinks.delta_maintenance import DeltaMaintainer
from aiostreams.sinks.maintenance import MaintenanceConflict
from aiostreams.sinks.spark.spark_thread import run_on_spark_thread
from aiostreams.types import TopicPartition

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
EVERY_FLUSH = TableMaintenance(compact_every=1e-6, vacuum_every=None, retention=3600.0,
                               target_file_size=1 << 20)


def make_sink(path: Path, maintenance: TableMaintenance | None = EVERY_FLUSH) -> DeltaSink:
    return DeltaSink(path, Order, include=("partition", "offset"), partition_by=("region",),
                     maintenance=maintenance)


async def write_batches(sink: DeltaSink, batches: int, first: int = 0, rows: int = 12) -> None:
    """Flushes of ``rows`` rows of P0 and P1 each, from batch ``first``; after each, wait
    for the maintenance it queued (the writer thread is FIFO)."""
    for b in range(first, first + batches):
        for tp in (P0, P1):
            for r in records(tp, range(b * rows, (b + 1) * rows)):
                sink.add(r)
        await sink.flush()
        await run_on_spark_thread(lambda: None)


def live_files(path: Path) -> int:
    return len(DeltaTable(str(path)).file_uris())


def parquet_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*.parquet")}


def assert_each_once(path: Path, lasts: dict[TopicPartition, int]) -> None:
    expected = {(tp.partition, o) for tp, last in lasts.items() for o in range(last + 1)}
    readers = {"delta-rs": pairs(read_with_deltars(path)), "pandas": read_with_pandas(path),
               "duckdb": read_with_duckdb(path)}
    for reader, seen in readers.items():
        assert seen_once(seen, expected) == (0, 0, len(expected)), reader


async def test_compaction_leaves_one_file_per_partition_keeps_offsets_and_a_replay_drops(
        tmp_path: Path) -> None:
    path = tmp_path / "orders"
    sink = make_sink(path)
    await sink.start()
    await write_batches(sink, 5)
    await sink.stop()
    assert live_files(path) == 3  # 5 batches x 3 regions, compacted to one per region
    health = sink.table_health
    assert health is not None and health.compactions == 5 and health.files_compacted > 0
    assert health.files_per_partition == {"region=apac": 1, "region=eu": 1, "region=us": 1}
    table = DeltaTable(str(path))
    assert table.history(1)[0]["operation"] == "OPTIMIZE"
    for tp in (P0, P1):
        assert table.transaction_version(transaction_app_id(sink.app, tp)) == 59
    assert_each_once(path, {P0: 59, P1: 59})

    again = make_sink(path, maintenance=None)
    await again.start()
    for tp in (P0, P1):
        for r in records(tp, range(50, 64)):
            again.add(r)
    await again.stop()
    assert again.metrics.rows_replayed == 2 * 10  # 50..59 were durable already
    assert_each_once(path, {P0: 63, P1: 63})


async def test_vacuum_deletes_old_orphans_and_keeps_listed_and_recent_files(
        tmp_path: Path) -> None:
    path = tmp_path / "orders"
    sink = make_sink(path, maintenance=None)
    await sink.start()
    await write_batches(sink, 2)
    await sink.stop()
    old_orphan = path / "region=eu" / "part-00000-killed-write-c000.snappy.parquet"
    recent_orphan = path / "region=eu" / "part-00001-being-written-c000.snappy.parquet"
    for stray in (old_orphan, recent_orphan):
        stray.write_bytes(b"PAR1" + b"\0" * 1000)
    long_ago = time.time() - 3 * 3600
    os.utime(old_orphan, (long_ago, long_ago))
    listed = {uri.removeprefix("file://") for uri in DeltaTable(str(path)).file_uris()}
    health = TableHealth()
    await run_on_spark_thread(DeltaMaintainer(str(path), {}, "aiostreams").vacuum,
                              TableMaintenance(retention=3600.0), health)
    assert not old_orphan.exists()
    assert recent_orphan.exists()  # younger than the retention: maybe a write in progress
    assert listed <= parquet_files(path)
    assert health.files_deleted == 1 and health.bytes_reclaimed == 1004
    assert_each_once(path, {P0: 23, P1: 23})


async def test_two_writers_with_maintenance_interleave_and_a_losing_compaction_commits_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "orders"
    one, two = make_sink(path), make_sink(path)
    await one.start()
    await two.start()
    for first in range(0, 6, 2):  # the two workers own P0 and P1 in turn
        for sink, tp in ((one, P0), (two, P1)):
            for r in records(tp, range(first * 10, (first + 2) * 10)):
                sink.add(r)
            await sink.flush()
            await run_on_spark_thread(lambda: None)
    for r in records(P0, range(60, 70)):
        one.add(r)
    await one.flush()
    await run_on_spark_thread(lambda: None)
    health = TableHealth()
    # two compactions at once: the first claims and reads; the second claims, reads and
    # commits; the first's commit must then fail (delta-rs alone would land both)
    for r in records(P1, range(60, 70)):
        two.add(r)
    await two.flush()
    await run_on_spark_thread(lambda: None)
    for r in records(P1, range(70, 80)):
        two.add(r)
    two_maintenance = two._maintenance
    assert two_maintenance is not None
    two_maintenance.stop()  # (its own compaction is the test's to run)
    await two.flush()
    first = DeltaMaintainer(str(path), {}, "aiostreams")
    claimed = await run_on_spark_thread(first._claim, DeltaTable(str(path)))
    await run_on_spark_thread(DeltaMaintainer(str(path), {}, "aiostreams").compact,
                              EVERY_FLUSH, health)
    with pytest.raises(MaintenanceConflict):
        await run_on_spark_thread(first._optimize, claimed, EVERY_FLUSH, health)
    await one.stop()
    await two.stop()
    for sink in (one, two):
        assert sink.table_health is not None and sink.table_health.errors == 0
    assert live_files(path) == 3
    assert_each_once(path, {P0: 69, P1: 79})
