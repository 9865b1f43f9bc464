"""Helpers for the Spark bridge's tests: a nested model, input records, an app wired to a
Parquet sink on the memory broker, a sink whose progress can be awaited, and readers."""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import gc
import itertools
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from pydantic import BaseModel, Field

from aiostreams import App
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import ParquetSink, add_parquet_sink
from aiostreams.transport.base import TopicSpec, Transport
from aiostreams.types import OutgoingRecord, TopicPartition

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


class Tier(enum.Enum):
    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"


class Address(BaseModel):
    city: str
    zip: int | None = None


class Order(BaseModel):
    id: int
    region: str
    amount: Decimal = Field(max_digits=12, decimal_places=2)
    placed_at: dt.datetime
    tier: Tier
    shipping: Address
    items: list[str]
    note: str | None = None


BASE_TIME = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
REGIONS = ("eu", "us", "apac")


def make_order(i: int) -> Order:
    return Order(
        id=i,
        region=REGIONS[i % 3],
        amount=Decimal(i * 7 % 100_000) / 100,
        placed_at=BASE_TIME + dt.timedelta(seconds=i, microseconds=i % 1000),
        tier=list(Tier)[i % 3],
        shipping=Address(city=f"city-{i % 17}", zip=None if i % 4 == 0 else 10_000 + i % 900),
        items=[f"sku-{i % 5}-{j}" for j in range(i % 4)],
        note=None if i % 5 else f"note {i}",
    )


class SimulatedCrash(Exception):
    """Stands for the process dying at a step of a write."""


# create_topic/produce repeat tests/support/appkit.py on purpose: subprocesses (the
# Structured Streaming job, the SIGKILL worker) import this module with only tests/spark on
# their path, so it must not depend on the support kit.
async def create_topic(transport: Transport, name: str, partitions: int) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(name, partitions)])
    finally:
        await admin.stop()


async def produce(transport: Transport, topic: str,
                  items: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = transport.producer()
    await producer.start()
    try:
        for i in range(0, len(items), 5000):
            await producer.send_batch([OutgoingRecord(topic, k, v) for k, v in items[i:i + 5000]])
        await producer.flush()
    finally:
        await producer.stop()


async def topic_of_orders(transport: Transport, topic: str, n: int,
                          partitions: int = 2) -> None:
    """Create ``topic`` with ``partitions`` partitions and produce orders 0 to ``n - 1``."""
    await create_topic(transport, topic, partitions)
    await produce(transport, topic, order_records(range(n)))


ORDERS_0 = TopicPartition("orders", 0)


def add_orders(sink: ParquetSink, offsets: range, source: TopicPartition = ORDERS_0) -> None:
    """Hand the sink order ``i`` as the retired result of ``source``'s offset ``i``."""
    for i in offsets:
        sink.add(ExternalRecord("parquet", source, i, str(i), make_order(i), 0.0))


def order_records(ids: range) -> list[tuple[bytes | None, bytes | None]]:
    return [(str(i).encode(), make_order(i).model_dump_json().encode()) for i in ids]


class WatchedSink(ParquetSink):
    """A ParquetSink whose progress can be awaited: :meth:`durable_through` (the given source
    offsets are durable; checked after start and every flush) and :meth:`retired_through`
    (``add`` has seen them, replays included: a clean stop then commits past them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._durable_waiters: list[tuple[dict[TopicPartition, int], asyncio.Event]] = []
        self._retired_waiters: list[tuple[dict[TopicPartition, int], asyncio.Event]] = []
        self.seen: dict[TopicPartition, int] = {}

    def durable_through(self, targets: dict[TopicPartition, int]) -> asyncio.Event:
        event = asyncio.Event()
        self._durable_waiters.append((targets, event))
        self._wake()
        return event

    def retired_through(self, targets: dict[TopicPartition, int]) -> asyncio.Event:
        event = asyncio.Event()
        self._retired_waiters.append((targets, event))
        self._wake()
        return event

    def _wake(self) -> None:
        for targets, event in self._durable_waiters:
            if all((self.durable_offset(tp) or -1) >= off for tp, off in targets.items()):
                event.set()
        for targets, event in self._retired_waiters:
            if all(self.seen.get(tp, -1) >= off for tp, off in targets.items()):
                event.set()

    async def start(self) -> None:
        await super().start()
        self._wake()

    async def flush(self) -> None:
        await super().flush()
        self._wake()

    def add(self, record: ExternalRecord) -> None:
        super().add(record)
        self.seen[record.source] = record.offset
        if self._retired_waiters:
            self._wake()


def ends(topic: str, counts: dict[int, int]) -> dict[TopicPartition, int]:
    """The last offset of each partition, given how many records each holds."""
    return {TopicPartition(topic, p): n - 1 for p, n in counts.items() if n}


def make_app(name: str, transport: Transport, topic: str, sink: ParquetSink,
             **settings: Any) -> App:
    settings.setdefault("commit_interval_ms", 100)
    app = App(name, transport=transport, **settings)
    app.topic(topic, key=str, value=Order)
    app.topology.add_source("orders", topic)
    add_parquet_sink(app.topology, "parquet", "orders", sink)
    return app


def read_with_pyarrow(path: Path, sink: ParquetSink) -> pa.Table:
    schema = sink.schema.arrow_schema
    part = pa.schema([schema.field(c) for c in sink.partition_by]) if sink.partition_by else None
    dataset = ds.dataset(path, format="parquet",
                         partitioning=ds.partitioning(part, flavor="hive") if part else None)
    return dataset.to_table()


def read_with_spark(spark: Any, path: Path, sink: ParquetSink) -> pa.Table:
    """The dataset read by Spark with the sink's schema, as Arrow. pyspark 4.0.0's collect
    path (``_load_from_socket``) leaves its local socket to the garbage collector, which warns
    (``ResourceWarning``; fixed in later pyspark); that one warning is ignored here, while the
    socket is collected, and nowhere else."""
    from aiostreams.sinks import to_spark_schema

    df = spark.read.schema(to_spark_schema(sink.schema.arrow_schema)).parquet(str(path))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "unclosed <socket.socket", ResourceWarning)
        table: pa.Table = df.toArrow()
        gc.collect()
    return table


def loosen(t: pa.DataType) -> pa.DataType:
    """``t`` with every field nullable and list items named alike: what a type is,
    apart from how a writer spells nullability."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, loosen(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(pa.field("element", loosen(t.value_type)))
    return t


def loose_schema(schema: pa.Schema, columns: list[str]) -> pa.Schema:
    return pa.schema([pa.field(c, loosen(schema.field(c).type)) for c in columns])


def normalized(table: pa.Table, columns: list[str]) -> pa.Table:
    """``table``'s ``columns`` (in that order), loosened, sorted by ``id``."""
    picked = table.select(columns)
    picked = picked.cast(loose_schema(picked.schema, columns))
    return picked.sort_by("id")
