"""Helpers for the Delta sink's tests: a sink whose progress can be awaited, an app wired to
it, and the Delta table read by each reader (delta-rs, pandas, DuckDB, Spark)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from sparkkit import Order

from aiostreams import App
from aiostreams.engine.external_sink import ExternalRecord
from aiostreams.spark import DeltaSink, add_delta_sink
from aiostreams.transport.base import Transport
from aiostreams.types import TopicPartition

DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.0.0"


class WatchedDeltaSink(DeltaSink):
    """A DeltaSink whose progress can be awaited: :meth:`durable_through` (the given source
    offsets are durable, checked after every flush) and :meth:`retired_through` (``add`` has
    seen them, replays included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiters: list[tuple[str, dict[TopicPartition, int], asyncio.Event]] = []
        self.seen: dict[TopicPartition, int] = {}

    def _wait(self, kind: str, targets: dict[TopicPartition, int]) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters.append((kind, targets, event))
        self._wake()
        return event

    def durable_through(self, targets: dict[TopicPartition, int]) -> asyncio.Event:
        return self._wait("durable", targets)

    def retired_through(self, targets: dict[TopicPartition, int]) -> asyncio.Event:
        return self._wait("retired", targets)

    def _wake(self) -> None:
        for kind, targets, event in self._waiters:
            have = self.durable_offset if kind == "durable" else self.seen.get
            if all((have(tp) or -1) >= off for tp, off in targets.items()):
                event.set()

    async def flush(self) -> None:
        await super().flush()
        self._wake()

    def add(self, record: ExternalRecord) -> None:
        super().add(record)
        self.seen[record.source] = record.offset
        self._wake()


def make_delta_app(name: str, transport: Transport, topic: str, sink: DeltaSink,
                   **settings: Any) -> App:
    settings.setdefault("commit_interval_ms", 100)
    app = App(name, transport=transport, **settings)
    app.topic(topic, key=str, value=Order)
    app.topology.add_source("orders", topic)
    add_delta_sink(app.topology, "delta", "orders", sink)
    return app


def read_with_deltars(path: Path) -> pa.Table:
    return DeltaTable(str(path)).to_pyarrow_table()


def read_with_pandas(path: Path) -> list[tuple[int, int]]:
    """(partition, offset) of every row, through pandas (deltalake's ``to_pandas``)."""
    frame = DeltaTable(str(path)).to_pandas(columns=["partition", "offset"])
    return [(int(p), int(o)) for p, o in zip(frame["partition"], frame["offset"], strict=True)]


def read_with_duckdb(path: Path) -> list[tuple[int, int]]:
    """(partition, offset) of every row, through DuckDB. DuckDB's ``delta`` extension is
    downloaded on first use and this machine is offline, so DuckDB scans the Arrow dataset
    of the table's current snapshot (the files its log lists) instead."""
    import duckdb

    dataset = DeltaTable(str(path)).to_pyarrow_dataset()  # noqa: F841 (DuckDB reads it)
    with duckdb.connect() as con:
        rows = con.execute('SELECT "partition", "offset" FROM dataset').fetchall()
    return [(int(p), int(o)) for p, o in rows]


def read_with_spark(spark: Any, path: Path) -> list[tuple[int, int]]:
    """(partition, offset) of every row, read by Spark's Delta source (the delta jar)."""
    df = spark.read.format("delta").load(str(path)).select("partition", "offset")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "unclosed <socket.socket", ResourceWarning)
        rows = [(int(r[0]), int(r[1])) for r in df.collect()]
        gc.collect()
    return rows


def pairs(table: pa.Table) -> list[tuple[int, int]]:
    return list(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                    strict=True))
