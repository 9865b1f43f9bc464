"""Helpers for the Delta sink's tests: a sink whose progress can be awaited, an app wired to
it, and the Delta table read by each reader (delta-rs, pandas, DuckDB, Spark)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from chaoskit import end_offsets as end_offsets  # the SIGKILL tests' (chaoskit's)
from deltalake import DeltaTable
from sparkkit import Order, SimulatedCrash, make_order

from aiostreams import App
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import DeltaSink, DeltaStep, add_delta_sink
from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.transport.base import Transport
from aiostreams.types import TopicPartition

DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.0.0"
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
HERE = Path(__file__).parent
REPO = HERE.parent.parent


class WatchedDeltaSink(DeltaSink):
    """A DeltaSink whose progress can be awaited: :meth:`durable_through` (the table's app
    transactions cover the given source offsets; checked at start and after every flush, by
    reading the table, since a partition with nothing left to replay never reaches the sink)
    and :meth:`retired_through` (``add`` has seen them, replays included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._durable_waiters: list[tuple[dict[TopicPartition, int], asyncio.Event]] = []
        self._retired_waiters: list[tuple[dict[TopicPartition, int], asyncio.Event]] = []
        self.seen: dict[TopicPartition, int] = {}

    def durable_through(self, targets: dict[TopicPartition, int]) -> asyncio.Event:
        event = asyncio.Event()
        self._durable_waiters.append((targets, event))
        self._wake_durable()
        return event

    def retired_through(self, targets: dict[TopicPartition, int]) -> asyncio.Event:
        event = asyncio.Event()
        self._retired_waiters.append((targets, event))
        self._wake_retired()
        return event

    def table_durable(self, tp: TopicPartition) -> int:
        options = self.storage_options or None
        if not DeltaTable.is_deltatable(str(self.path), storage_options=options):
            return -1
        version = DeltaTable(str(self.path), storage_options=options).transaction_version(
            transaction_app_id(self.app, tp))
        return -1 if version is None else version

    def _wake_durable(self) -> None:
        for targets, event in self._durable_waiters:
            if not event.is_set() and all(
                    self.table_durable(tp) >= off for tp, off in targets.items()):
                event.set()

    def _wake_retired(self) -> None:
        for targets, event in self._retired_waiters:
            if all(self.seen.get(tp, -1) >= off for tp, off in targets.items()):
                event.set()

    async def start(self) -> None:
        await super().start()
        self._wake_durable()

    async def flush(self) -> None:
        await super().flush()
        self._wake_durable()

    def add(self, record: ExternalRecord) -> None:
        super().add(record)
        self.seen[record.source] = record.offset
        if self._retired_waiters:
            self._wake_retired()


class CrashingDeltaSink(WatchedDeltaSink):
    """Raises :class:`SimulatedCrash` after ``crash_at`` (once): the write stops there, as
    if the process died."""

    crash_at: DeltaStep | None = None

    def _after(self, step: DeltaStep) -> None:
        if step is self.crash_at:
            self.crash_at = None
            raise SimulatedCrash(f"crash after the {step.value} step")


def make_delta_app(name: str, transport: Transport, topic: str, sink: DeltaSink,
                   **settings: Any) -> App:
    settings.setdefault("commit_interval_ms", 100)
    app = App(name, transport=transport, **settings)
    app.topic(topic, key=str, value=Order)
    app.topology.add_source("orders", topic)
    add_delta_sink(app.topology, "delta", "orders", sink)
    return app


Options = dict[str, str] | None  # delta-rs storage options (an object store's)


def read_with_deltars(path: Path | str, options: Options = None) -> pa.Table:
    return DeltaTable(str(path), storage_options=options).to_pyarrow_table()


def read_with_pandas(path: Path | str, options: Options = None) -> list[tuple[int, int]]:
    """(partition, offset) of every row, through pandas (deltalake's ``to_pandas``)."""
    frame = DeltaTable(str(path), storage_options=options).to_pandas(
        columns=["partition", "offset"])
    return [(int(p), int(o)) for p, o in zip(frame["partition"], frame["offset"], strict=True)]


def read_with_duckdb(path: Path | str, options: Options = None) -> list[tuple[int, int]]:
    """(partition, offset) of every row, through DuckDB. DuckDB's ``delta`` extension is
    downloaded on first use and this machine is offline, so DuckDB scans the Arrow dataset
    of the table's current snapshot (the files its log lists) instead."""
    import duckdb

    dataset = DeltaTable(str(path), storage_options=options).to_pyarrow_dataset()  # noqa: F841
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


def seen_once(seen: list[tuple[int, int]], expected: set[tuple[int, int]]) -> tuple[int, ...]:
    """(lost, duplicated, rows) of a reader's (partition, offset) pairs: ``(0, 0,
    len(expected))`` when the reader sees each expected input exactly once."""
    counts = Counter(seen)
    return (len(expected - counts.keys()), sum(n > 1 for n in counts.values()), len(seen))


def expected_pairs(ends: dict[TopicPartition, int]) -> set[tuple[int, int]]:
    """Every (partition, offset) up to ``ends`` (the last offset of each partition)."""
    return {(tp.partition, offset) for tp, last in ends.items() for offset in range(last + 1)}


def assert_every_reader_sees_each_input_once(
        path: Path | str, expected: set[tuple[int, int]], spark: Any,
        options: Options = None) -> None:
    """delta-rs, pandas, DuckDB and Spark's Delta source (``spark``: the config of a session
    with the Delta jar, run in a process of its own) each see every pair of ``expected``
    exactly once, and nothing else."""
    readers = {
        "delta-rs": pairs(read_with_deltars(path, options)),
        "pandas": read_with_pandas(path, options),
        "duckdb": read_with_duckdb(path, options),
        "spark": read_with_spark_process(spark, path),
    }
    for reader, seen in readers.items():
        assert seen_once(seen, expected) == (0, 0, len(expected)), reader


def assert_rust_pandas_duckdb_see_each_input_once(path: Path | str,
                                                 expected: set[tuple[int, int]]) -> None:
    """delta-rs, pandas and DuckDB (no JVM) each see every pair of ``expected`` once."""
    readers = {"delta-rs": pairs(read_with_deltars(path)), "pandas": read_with_pandas(path),
               "duckdb": read_with_duckdb(path)}
    for reader, seen in readers.items():
        assert seen_once(seen, expected) == (0, 0, len(expected)), reader


def read_with_spark_process(config: Any, path: Path | str) -> list[tuple[int, int]]:
    """(partition, offset) of every row, read by Spark's Delta source in a process of its
    own (``delta_spark_reader.py``: a JVM takes the Delta jar only at start)."""
    done = subprocess.run(
        [sys.executable, str(HERE / "delta_spark_reader.py"), config.model_dump_json(),
         str(path)], capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)})
    assert done.returncode == 0, done.stderr[-3000:]
    return [(p, o) for p, o in json.loads(done.stdout.strip().splitlines()[-1])]


def records(source: TopicPartition, offsets: range) -> list[ExternalRecord]:
    return [ExternalRecord("delta", source, i, str(i), make_order(i), 0.0) for i in offsets]


class RacedDeltaSink(DeltaSink):
    """Between this sink's check and its commit, another writer (a sink of its own, as its
    writer thread would) commits ``other`` - ``races`` times in a row."""

    def __init__(self, *args: object, other: list[ExternalRecord], races: int = 1,
                 **kwargs: object) -> None:
        super().__init__(*args, include=("partition", "offset"), **kwargs)  # type: ignore[arg-type]
        self.other, self.races = other, races

    def _after(self, step: DeltaStep) -> None:
        if step is DeltaStep.CHECKED and self.races > 0:
            self.races -= 1
            writer = DeltaSink(self.path, Order, include=("partition", "offset"),
                               storage_options=self.storage_options)
            writer._write_batch(self.other)
            shift = len(self.other)  # the next race commits the next offsets
            self.other = records(self.other[0].source,
                                 range(self.other[0].offset + shift,
                                       self.other[-1].offset + shift + 1))
