"""Table maintenance through real crashes on a real broker: a reader scanning every snapshot
while a worker with compaction after every batch is SIGKILLed during a compaction (its files
written, its snapshot not) or right after one, then a fresh app with maintenance finishes the
input; and ``--workers 3`` with maintenance on every worker while kills move partitions.

No read ever sees a duplicate, a gap, or a row past the offsets recorded for its snapshot (a
compaction's replace snapshot records none: it must hold exactly the rows of the append
below it); the durable offsets survive compaction, so the replay is a no-op; at the end
pyiceberg, pandas and DuckDB count each input once, and a vacuum deletes the killed
compaction's orphan files and nothing any snapshot lists."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from iceberg_chaos_worker import DONE_LINE, MAINTENANCE, chaos_app
from icebergkit import (
    TABLE,
    Order,
    WatchedIcebergSink,
    assert_every_reader_sees_each_input_once,
    end_offsets,
    expected_pairs,
    run_until_sigkilled,
    topic_of_orders,
    worker_env,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, ancestors_of
from test_iceberg_sigkill import run_until

from aiostreams.runtime.table_health import TableHealth
from aiostreams.sinks import TableMaintenance
from aiostreams.sinks.iceberg_maintenance import IcebergMaintainer
from aiostreams.sinks.iceberg_table import OFFSETS_KEY, decode_offsets
from aiostreams.sinks.spark.spark_thread import run_on_spark_thread
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(300)]

N = 4_000


def check_snapshot(table: Table, snapshot_id: int) -> str:
    """Read one snapshot: its rows must be exactly the offsets 0 to what the newest snapshot
    recording offsets in its ancestry (itself, or the append below a compaction) records.
    Returns its operation."""
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None and snapshot.summary is not None
    recorded: dict[Any, int] = {}
    for ancestor in ancestors_of(snapshot, table.metadata):
        offsets = ancestor.summary.get(OFFSETS_KEY) if ancestor.summary is not None else None
        if offsets is not None:
            recorded = decode_offsets(str(offsets))
            break
    data = table.scan(snapshot_id=snapshot_id, selected_fields=("partition", "offset")).to_arrow()
    seen = Counter(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist(),
                       strict=True))
    dups = sum(n > 1 for n in seen.values())
    want = {(tp.partition, o) for tp, last in recorded.items() for o in range(last + 1)}
    assert dups == 0 and set(seen) == want, (snapshot_id, snapshot.summary.operation, dups,
                                             len(seen), len(want))
    return str(snapshot.summary.operation.value)


async def read_every_snapshot(load: Any, stop: asyncio.Event) -> Counter[str]:
    """Until ``stop``, scan each new snapshot as a reader would (in a thread); the checked
    snapshots by operation."""
    checked: dict[int, str] = {}
    while True:
        last = stop.is_set()  # one more pass after the stop: the snapshots of the end too
        table = await asyncio.to_thread(load)
        if table is not None:
            for snapshot in table.metadata.snapshots:
                if snapshot.snapshot_id not in checked:
                    checked[snapshot.snapshot_id] = await asyncio.to_thread(
                        check_snapshot, table, snapshot.snapshot_id)
        if last:
            return Counter(checked.values())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)  # polling the catalog: nothing announces


def replaces_of(table: Table | None) -> int:
    """How many compactions (replace snapshots) ``table`` lists."""
    return 0 if table is None else sum(
        s.summary is not None and s.summary.operation is Operation.REPLACE
        for s in table.metadata.snapshots)


async def until_compacted(load: Any, replaces: int, timeout: float = 60.0) -> None:
    """Return once the table lists ``replaces`` compactions (polling the catalog: nothing
    announces a commit of another writer)."""
    async with asyncio.timeout(timeout):
        while True:
            if replaces_of(await asyncio.to_thread(load)) >= replaces:
                return
            await asyncio.sleep(0.2)


def parquet_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*.parquet")}


def listed_files(table: Table) -> set[str]:
    return {t.file.file_path.removeprefix("file://") for s in table.metadata.snapshots
            for t in table.scan(snapshot_id=s.snapshot_id).plan_files()}


def reader_of(warehouse: Path, app: str) -> WatchedIcebergSink:
    sink = WatchedIcebergSink(TABLE, Order, warehouse=warehouse, partition_by=("region",),
                              include=("partition", "offset"), batch_interval=0.5,
                              maintenance=MAINTENANCE)
    sink.bind_app(app)
    return sink


COMPACTION_KILLS = (["during_compaction", "after_compaction"] if "ICEBERG_KILLS" in os.environ
                    else ["during_compaction"])
"""Kill points of the single-worker test: ``during_compaction`` in make test (the one that
leaves orphans); both in a long run (``ICEBERG_KILLS`` set, as for the sink's own tests)."""


@pytest.mark.parametrize("kill_point", COMPACTION_KILLS)
async def test_a_writer_killed_in_a_compaction_with_a_reader_running_leaves_each_input_once(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, kill_point: str) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic, group = topic_name("orders"), topic_name("iceberg-maint")
    await topic_of_orders(transport, topic, range(N))
    warehouse = tmp_path / "lake"
    sink = reader_of(warehouse, group)
    stop = asyncio.Event()
    reads = asyncio.create_task(read_every_snapshot(sink.load, stop))
    try:
        await run_until_sigkilled("iceberg_chaos_worker.py", kafka_bootstrap, topic, group,
                                  str(warehouse), kill_point, "2", "maintenance")
        table = sink.load()
        assert table is not None
        replaces = replaces_of(table)
        assert replaces == (1 if kill_point == "during_compaction" else 2)
        orphans = parquet_files(warehouse) - listed_files(table)
        if kill_point == "during_compaction":  # the killed compaction's files
            assert orphans, "the killed compaction left no orphan data file"

        ends = await end_offsets(transport, topic)
        async with chaos_app(kafka_bootstrap, topic, group, sink, group_instance_id="worker-1"):
            await sink.durable_through(ends).wait()
            # the new app compacts too, on schedule, with or without more rows to write
            await until_compacted(sink.load, replaces + 1)
    finally:
        stop.set()
        checked = await reads
    assert checked["replace"] >= 2 and checked["append"] >= 4, checked
    expected = expected_pairs(ends)
    assert_every_reader_sees_each_input_once(sink, expected)

    health = TableHealth()  # no writer left: a vacuum may take everything unlisted
    await run_on_spark_thread(IcebergMaintainer(sink.load, sink.app).vacuum,
                              TableMaintenance(retention=0.001), health)
    table = sink.load()
    assert table is not None
    assert parquet_files(warehouse) == listed_files(table)
    assert not orphans & parquet_files(warehouse)
    assert_every_reader_sees_each_input_once(sink, expected)


async def test_three_workers_with_maintenance_killed_during_rebalances_leave_each_input_once(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("orders")
    await topic_of_orders(transport, topic, range(N), partitions=3)
    ends = await end_offsets(transport, topic, partitions=3)
    tokens = tmp_path / "kill-tokens"
    tokens.mkdir()
    kills = 2
    for i in range(kills):
        (tokens / f"kill-{i}").touch()
    warehouse = tmp_path / "lake"
    env = worker_env()
    env.update(IW_BOOTSTRAP=kafka_bootstrap, IW_TOPIC=topic, IW_WAREHOUSE=str(warehouse),
               IW_KILL_POINT="after_write", IW_NTH="2", IW_TOKENS=str(tokens),
               IW_MAINTENANCE="1", IW_ENDS=json.dumps([ends[tp] for tp in sorted(ends)]))
    command = [sys.executable, "-m", "aiostreams", "run", "iceberg_chaos_worker:app",
               "--workers", "3", "--broker", f"kafka://{kafka_bootstrap}"]
    reader = reader_of(warehouse, f"iw-{topic}")
    stop = asyncio.Event()
    reads = asyncio.create_task(read_every_snapshot(reader.load, stop))
    try:
        code, stderr = await run_until(command, env, DONE_LINE, timeout=240)
    finally:
        stop.set()
        checked = await reads

    assert code == 130, stderr[-4000:]
    assert list(tokens.iterdir()) == [], stderr[-4000:]  # every kill happened
    assert len(re.findall(r"restarted worker \d", stderr)) == kills, stderr[-4000:]
    assert checked["replace"] >= 1 and checked["append"] >= 5, checked
    assert_every_reader_sees_each_input_once(reader, expected_pairs(ends))
