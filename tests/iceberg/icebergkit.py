"""Helpers for the Iceberg sink's tests: a model and its input records, a sink whose progress
can be awaited, an app wired to it, the table read by each reader (pyiceberg's Arrow scan,
pandas, DuckDB), and the scaffolding of the SIGKILL tests.

Self-contained on purpose (worker processes import it with only tests/iceberg on their path);
it repeats a few lines of tests/spark's kits rather than depend on that directory.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from aiostreams import App
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.iceberg_sink import IcebergSink, IcebergStep, add_iceberg_sink
from aiostreams.sinks.iceberg_table import durable_offsets
from aiostreams.transport.base import TopicSpec, Transport
from aiostreams.types import OutgoingRecord, TopicPartition

HERE = Path(__file__).parent
REPO = HERE.parent.parent
TABLE = "lake.orders"
BASE_TIME = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
REGIONS = ("eu", "us", "apac")


class Order(BaseModel):
    id: int
    region: str
    amount: float
    placed_at: dt.datetime
    items: list[str]
    note: str | None = None


def make_order(i: int) -> Order:
    return Order(id=i, region=REGIONS[i % 3], amount=i * 0.25,
                 placed_at=BASE_TIME + dt.timedelta(minutes=17 * i),
                 items=[f"sku-{j}" for j in range(i % 3)], note=None if i % 5 else f"n{i}")


class SimulatedCrash(Exception):
    """Stands for the process dying at a step of a write."""


def records(source: TopicPartition, offsets: range, id_base: int = 0) -> list[ExternalRecord]:
    """Order ``id_base + i`` as the retired result of ``source``'s offset ``i``."""
    return [ExternalRecord("iceberg", source, i, str(i), make_order(id_base + i), 0.0)
            for i in offsets]


class WatchedIcebergSink(IcebergSink):
    """An IcebergSink whose progress can be awaited: :meth:`durable_through` (its durable
    offsets, read from the table at start and after each flush, cover the targets)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiters: list[tuple[dict[TopicPartition, int], asyncio.Event]] = []

    def durable_through(self, targets: dict[TopicPartition, int]) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters.append((targets, event))
        self._wake()
        return event

    def _wake(self) -> None:
        for targets, event in self._waiters:
            if all((self.durable_offset(tp) or -1) >= o for tp, o in targets.items()):
                event.set()

    async def start(self) -> None:
        await super().start()
        self._wake()

    async def flush(self) -> None:
        await super().flush()
        self._wake()


class CrashingIcebergSink(WatchedIcebergSink):
    """Raises :class:`SimulatedCrash` after ``crash_at`` (once)."""

    crash_at: IcebergStep | None = None

    def _after(self, step: IcebergStep) -> None:
        if step is self.crash_at:
            self.crash_at = None
            raise SimulatedCrash(f"crash after the {step.value} step")


def make_iceberg_app(name: str, transport: Transport, topic: str, sink: IcebergSink,
                     **settings: Any) -> App:
    settings.setdefault("commit_interval_ms", 100)
    app = App(name, transport=transport, **settings)
    app.topic(topic, key=str, value=Order)
    app.topology.add_source("orders", topic)
    add_iceberg_sink(app.topology, "iceberg", "orders", sink)
    return app


async def create_topic(transport: Transport, name: str, partitions: int) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(name, partitions)])
    finally:
        await admin.stop()


async def topic_of_orders(transport: Transport, topic: str, ids: range,
                          partitions: int = 2, create: bool = True) -> None:
    """Create ``topic`` (when ``create``) and produce the orders ``ids``."""
    if create:
        await create_topic(transport, topic, partitions)
    producer = transport.producer()
    await producer.start()
    try:
        items = [OutgoingRecord(topic, str(i).encode(), make_order(i).model_dump_json().encode())
                 for i in ids]
        for i in range(0, len(items), 5000):
            await producer.send_batch(items[i:i + 5000])
        await producer.flush()
    finally:
        await producer.stop()


# -- readers -------------------------------------------------------------------------------

def read_arrow(sink: IcebergSink) -> pa.Table:
    table = sink.load()
    assert table is not None
    return table.scan().to_arrow()


def read_pandas(sink: IcebergSink) -> list[tuple[int, int]]:
    table = sink.load()
    assert table is not None
    frame = table.scan(selected_fields=("partition", "offset")).to_pandas()
    return [(int(p), int(o)) for p, o in zip(frame["partition"], frame["offset"], strict=True)]


def read_duckdb(sink: IcebergSink) -> list[tuple[int, int]]:
    """DuckDB on pyiceberg's Arrow scan (its iceberg extension is downloaded on first use,
    and this machine is offline)."""
    import duckdb

    table = sink.load()
    assert table is not None
    scan = table.scan(selected_fields=("partition", "offset")).to_arrow()  # noqa: F841
    with duckdb.connect() as con:
        rows = con.execute('SELECT "partition", "offset" FROM scan').fetchall()
    return [(int(p), int(o)) for p, o in rows]


def pairs(table: pa.Table) -> list[tuple[int, int]]:
    return list(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                    strict=True))


def seen_once(seen: list[tuple[int, int]], expected: set[tuple[int, int]]) -> tuple[int, ...]:
    """(lost, duplicated, rows): ``(0, 0, len(expected))`` when each input is seen once."""
    counts = Counter(seen)
    return (len(expected - counts.keys()), sum(n > 1 for n in counts.values()), len(seen))


def expected_pairs(ends: dict[TopicPartition, int]) -> set[tuple[int, int]]:
    return {(tp.partition, o) for tp, last in ends.items() for o in range(last + 1)}


def assert_every_reader_sees_each_input_once(sink: IcebergSink,
                                             expected: set[tuple[int, int]]) -> None:
    readers = {"pyiceberg": pairs(read_arrow(sink)), "pandas": read_pandas(sink),
               "duckdb": read_duckdb(sink)}
    for reader, seen in readers.items():
        assert seen_once(seen, expected) == (0, 0, len(expected)), reader


def table_durable(sink: IcebergSink) -> dict[TopicPartition, int]:
    table = sink.load()
    return {} if table is None else durable_offsets(table, sink.app)


# -- SIGKILL scaffolding --------------------------------------------------------------------

def worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOSTREAMS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO)])
    return env


async def run_until_sigkilled(script: str, *args: str) -> None:
    """Run ``tests/iceberg/<script>`` to its end, which must be a SIGKILL it sent itself."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / script), *args, env=worker_env(),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, stderr = await worker.communicate()
    assert worker.returncode == -signal.SIGKILL, (
        f"{script} ended with {worker.returncode}, not SIGKILL:\n{stderr.decode()[-2000:]}")


async def end_offsets(transport: Any, topic: str, partitions: int = 2
                      ) -> dict[TopicPartition, int]:
    """The last offset of each partition of ``topic``."""
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp: end - 1 for tp, end in ends.items()}
    finally:
        await consumer.stop()
