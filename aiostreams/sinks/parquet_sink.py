"""A Parquet dataset as an external sink: results durable before offsets are committed, and
each input written exactly once.

::

    sink = ParquetSink("/data/orders", Order, partition_by=("region",))
    add_parquet_sink(app.topology, "orders-parquet", "enrich", sink)

The algorithm (the contract is :mod:`aiostreams.engine.external_sink`):

* :meth:`ParquetSink.add` (event loop, at retire) appends the record to an in-memory buffer;
  records at or below their source partition's durable offset are replays and are dropped.
  Every ``convert_rows`` rows (default ``CONVERT_ROWS``), the buffer is handed to the Spark
  thread to be converted to Arrow ahead of the write (replays the log knows of dropped), so
  Python objects are held for at most that many rows, and a batch waits as Arrow columns.
* :meth:`ParquetSink.flush` (event loop, in a commit, before offsets are committed) hands
  over the rest and, on the Spark thread after those conversions, joins them into one Arrow
  table, writes it to a staging directory, renames the complete files into the dataset, and
  appends an entry to the commit log naming the files and, per source partition, the offset
  range written (:mod:`aiostreams.sinks.commit_log`). The log entry is the commit point; it
  returns after.
* :meth:`ParquetSink.pending_offset` and :attr:`ParquetSink.backlogged`: the committable
  offsets and the back-pressure of :mod:`aiostreams.sinks.sink_batching`.
* :meth:`ParquetSink.start` takes the dataset's writer lock and recovers: it reads the log
  (the durable offsets) and deletes staging leftovers and data files no entry lists. It
  refuses (loudly, before writing) a dataset whose log names another app than the one the
  worker bound the sink to (:meth:`ParquetSink.bind_app`), another incarnation of a source
  topic (:meth:`ParquetSink.bind_topic_ids`, :mod:`aiostreams.sinks.incarnations`), or
  whose newest file the model no longer fits (:mod:`aiostreams.sinks.schema_evolution`).

So whatever crashes where, a replay from the committed offsets rewrites exactly the rows
whose batch has no log entry: the dataset holds each input's results once.

Invariants (asserted): those of :mod:`aiostreams.sinks.sink_batching`, and the durable
offset never passes a record that was not written.

Cancellation: a cancelled :meth:`flush` raises ``CancelledError`` at once, but its write runs
to completion on the Spark thread; the commit that awaited it fails, so nothing is committed.
Its rows stay pending (:meth:`ParquetSink.pending_offset`) until a later flush succeeds: the
next flush queues behind that write (one thread, FIFO), and succeeds only if it did. If the
abandoned write failed, the sink is FAILED.

Failure: any error during a write leaves the sink FAILED (its buffer and the dataset's last
batch are in doubt): later flushes raise :class:`SinkFailedError`, and ``stop`` only
releases the lock. Restart the app; the new sink recovers from the commit log.
"""

from __future__ import annotations

import concurrent.futures
import enum
import logging
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyarrow.parquet import read_schema
from pydantic import BaseModel

from aiostreams.errors import ConfigError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.commit_log import (
    STAGING_DIR,
    CommitLog,
    LogEntry,
    Recovery,
    merge_ranges,
    offset_ranges,
)
from aiostreams.sinks.incarnations import known_ids
from aiostreams.sinks.parquet_writer import (
    COMPRESSIONS,
    Engine,
    move_into_dataset,
    write_staged,
)
from aiostreams.sinks.paths import parse_table_path
from aiostreams.sinks.rows import rows_to_table
from aiostreams.sinks.schema_evolution import check_appendable
from aiostreams.sinks.sink_batching import (
    FIRST_WRITE_GUESS,
    Batcher,
    Offsets,
    stop_table_sink,
    write_taken,
)
from aiostreams.sinks.sink_columns import TableColumns
from aiostreams.sinks.sink_state import (
    SinkFailedError,
    SinkMetrics,
    SinkState,
)
from aiostreams.sinks.spark.session import SparkConfig, get_session
from aiostreams.sinks.spark.spark_thread import run_on_spark_thread, submit_to_spark_thread
from aiostreams.sinks.table_sink import TableSinkBase
from aiostreams.types import TopicPartition

__all__ = ["FIRST_WRITE_GUESS", "FlushStep", "ParquetSink", "SinkFailedError", "SinkMetrics",
           "SinkState"]

log = logging.getLogger("aiostreams.sinks")

DEFAULT_BATCH_ROWS: dict[Engine, int] = {"pyarrow": 50_000, "spark": 500_000}
"""Rows per write unless ``batch_rows`` says otherwise. Spark's fixed cost per job is large,
so its batches are larger (measured: ``benchmarks/RESULTS.md``). A filling batch is held as
Arrow columns (tens of bytes per row), plus at most ``convert_rows`` values as objects."""

CONVERT_ROWS = 50_000
"""Rows per Arrow conversion handed to the Spark thread while a batch fills."""


class FlushStep(enum.Enum):
    """The points of a write after which a crash leaves a distinct dataset state."""

    STAGED = "staged"  # complete files in _staging; dataset unchanged
    MOVED = "moved"  # files in the dataset, no log entry: deleted by the next start
    LOGGED = "logged"  # the log entry is durable: the batch is committed


@dataclass(frozen=True)
class _Converted:
    """Rows converted on the Spark thread: ``table`` is None when all were replays."""

    table: pa.Table | None
    ranges: dict[TopicPartition, tuple[int, int]]  # first and last offset per source
    rows: int
    replayed: int


_Job = concurrent.futures.Future[_Converted]


@dataclass(frozen=True)
class _Written:
    entry: LogEntry | None
    replayed: int
    durable: dict[TopicPartition, int]  # the log's durable offsets after the write


class ParquetSink(TableSinkBase[_Job]):
    """Writes the values reaching it (instances of ``model``) to the Parquet dataset at
    ``path``: a local or mounted directory, as a path or a ``file:`` URI
    (:mod:`aiostreams.sinks.paths`; a relative path is resolved now, against the current
    directory). On a cluster it must be the same shared directory for the driver and every
    executor. See the module docstring.

    ``partition_by``: columns (model fields or included metadata columns of type str, int,
    bool or date) to partition the directories by. ``include``: metadata columns to add,
    from ``("key", "topic", "partition", "offset", "timestamp")`` (``key_type`` types the
    key column; ``metadata_prefix`` renames them all). ``engine``: ``"spark"`` (the process's
    SparkSession, started with ``spark`` or defaults) or ``"pyarrow"``.

    ``batch_rows`` (default :data:`DEFAULT_BATCH_ROWS` for the engine) and ``batch_interval``
    (seconds): a write starts once that many rows wait, or when the oldest would otherwise
    be durable later than ``batch_interval`` after it retired. Under exactly-once, every
    commit also writes (see the module docstring). While a batch fills, every
    ``convert_rows`` rows are converted to Arrow on the Spark thread.
    """

    def __init__(
        self,
        path: str | Path,
        model: type[BaseModel],
        *,
        partition_by: Sequence[str] = (),
        compression: str = "snappy",
        batch_rows: int | None = None,
        batch_interval: float = 5.0,
        convert_rows: int = CONVERT_ROWS,
        include: Sequence[str] = (),
        key_type: Any = str,
        metadata_prefix: str = "",
        engine: Engine = "spark",
        spark: SparkConfig | None = None,
    ) -> None:
        where = parse_table_path(path)
        if where.local is None:
            raise ConfigError(
                f"ParquetSink writes to a local or mounted filesystem path, shared by the "
                f"driver and every executor (it renames files atomically and locks the "
                f"dataset with flock; neither engine can do that on {where.scheme}://); got "
                f"{where.given!r}. For hdfs:// and s3a:// tables, run the Structured "
                "Streaming job (python -m aiostreams.sinks.spark.structured), which hands the "
                "path to Spark")
        self.path = where.local
        if engine not in ("spark", "pyarrow"):
            raise ConfigError(f"engine must be 'spark' or 'pyarrow', got {engine!r}")
        if compression not in COMPRESSIONS:
            raise ConfigError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
        if batch_rows is None:
            batch_rows = DEFAULT_BATCH_ROWS[engine]
        if convert_rows < 1:
            raise ConfigError(f"convert_rows must be >= 1, got {convert_rows}")
        self.columns = TableColumns(
            model, partition_by=partition_by, include=include, key_type=key_type,
            metadata_prefix=metadata_prefix,
            empty_partition="a Hive-style directory 'col=' has no value: Spark writes it "
            "as null, and cannot read the directory pyarrow writes")
        self.schema = self.columns.schema
        self.partition_by = self.columns.partition_by
        self.name = ""
        self.model = model
        self.compression = compression
        self.batch_rows = batch_rows
        self.batch_interval = batch_interval
        self.engine: Engine = engine
        self.spark = spark
        self.validated_upstream = False  # set by add_parquet_sink: values were checked
        self.app_id: str | None = None  # set by bind_app (the worker, before start)
        self.topic_ids: dict[str, str] = {}  # set by bind_topic_ids (the worker, too)
        self.state = SinkState.CREATED
        self.metrics = SinkMetrics()
        self.recovery: Recovery | None = None
        self._batch: Batcher[_Job] = Batcher(
            f"ParquetSink({str(self.path)!r})", batch_rows=batch_rows,
            batch_interval=batch_interval, chunk_rows=convert_rows, metrics=self.metrics,
            hand_off=lambda records, firsts, lasts: submit_to_spark_thread(
                self._convert, records, firsts, lasts))
        # owned by the Spark thread once started:
        self._log = CommitLog(self.path)
        self._failure: BaseException | None = None

    def __repr__(self) -> str:
        return (f"ParquetSink({str(self.path)!r}, {self.model.__name__}, "
                f"engine={self.engine!r}, state={self.state.value})")

    # -- validation (a processor before the sink calls it) ----------------------------------

    def validate(self, value: Any, key: Any = None) -> None:
        """Raise :class:`SchemaMismatch` unless ``value`` (and ``key``, when the key is a
        column) fits the dataset's schema exactly, and its string partition values are not
        empty. Pure and cheap (a few µs): safe on the event loop, per record."""
        self.columns.validate(value, key)

    # -- ExternalSink ---------------------------------------------------------------------

    async def start(self) -> None:
        """Take the writer lock, recover from the commit log (see the module docstring) and,
        for ``engine="spark"``, start the SparkSession. Cancellation: the recovery runs to
        completion on the Spark thread; the sink stays CREATED and holds the lock until
        :meth:`stop`."""
        if self.state is not SinkState.CREATED:
            raise RuntimeError(f"sink {self.name!r} starts once; it is {self.state.value}")
        self.recovery = await run_on_spark_thread(self._recover)
        for source, offset in self._log.durable.items():
            self._batch.advance(source, offset)
        self._move_to(SinkState.RUNNING)
        if self.recovery.entries:
            log.info("%r: %d batch(es) committed already; durable offsets %s", self,
                     self.recovery.entries,
                     {str(tp): off for tp, off in sorted(self._batch.durable.items())})

    def _recover(self) -> Recovery:
        self._log.acquire()
        try:
            report = self._log.recover()
            self._log.check_owner(self.app_id)
            self._log.check_incarnations(self.topic_ids)
            if self._log.last_files:  # the model must still fit the newest file's schema
                check_appendable(read_schema(self.path / self._log.last_files[-1].path),
                                 self.schema.arrow_schema, model=self.model.__name__,
                                 dataset=str(self.path), partition_by=self.partition_by)
            if self.engine == "spark":
                get_session(self.spark)
        except BaseException:
            self._log.release()
            raise
        return report

    async def flush(self) -> None:
        """Write everything added so far and commit it to the log; returns once durable.
        Raises :class:`SinkFailedError` (or the write's error) if it is not. Cancellation:
        see the module docstring (the write completes; nothing is committed)."""
        done = await write_taken(
            self, self._batch, self._write, skip_empty=False,
            restart="restart the app so a new sink recovers from the commit log")
        assert done is not None
        written, rows, seconds = done
        m = self.metrics
        m.rows_added += rows
        m.rows_replayed += written.replayed
        m.flush_seconds += seconds
        entry = written.entry
        if entry is not None:
            m.last_flush_seconds = seconds  # of the last write (not of empty flushes)
            for o in entry.offsets:
                previous = self._batch.durable.get(o.source, -1)
                assert o.last > previous, f"{o.source}: durable offset {previous} -> {o.last}"
            m.rows_written += entry.rows
            m.files_written += len(entry.files)
            m.batches += 1
        for source, offset in written.durable.items():  # and those of abandoned writes
            self._batch.advance(source, offset)

    async def stop(self) -> None:
        """Flush (when running) and release the writer lock. Idempotent. The SparkSession
        stays up (one per process; see :mod:`aiostreams.sinks.spark.session`). Cancellation: the
        flush behaves as in :meth:`flush`; the lock is released in any case."""

        async def release() -> None:
            await run_on_spark_thread(self._log.release)

        await stop_table_sink(self, self.flush, release)

    # -- the write, on the Spark thread ---------------------------------------------------

    def _convert(self, records: list[ExternalRecord], firsts: Offsets,
                 lasts: Offsets) -> _Converted:
        """One chunk to Arrow. ``firsts``/``lasts``: per source partition, the chunk's first
        and last offset. An error here fails the sink (recorded; the next write raises)."""
        self._raise_if_failed()
        try:
            durable = self._log.durable
            if all(first > durable.get(source, -1) for source, first in firsts.items()):
                rows = records  # the usual case: nothing here is durable, so no row scan
                ranges = {source: (first, lasts[source]) for source, first in firsts.items()}
            else:  # an abandoned write (see flush) made some durable after add() took them
                rows = [r for r in records if r.offset > durable.get(r.source, -1)]
                ranges = offset_ranges(rows)
            if not rows:
                return _Converted(None, {}, 0, len(records))
            table = rows_to_table(
                rows, self.schema, sink=self.name, table_kind="Parquet schema",
                attach="add_parquet_sink",
                validate=None if self.validated_upstream else self.validate)
        except BaseException as e:
            self._failure = e
            raise
        return _Converted(table, ranges, len(rows), len(records) - len(rows))

    def _write(self, jobs: list[_Job]) -> _Written:
        """Write the converted chunks as one batch (their jobs ran before this one)."""
        converted = [job.result() for job in jobs]  # a conversion's own error, if any
        self._raise_if_failed()
        try:
            entry = self._write_batch(converted)
        except BaseException as e:
            self._failure = e
            raise
        return _Written(entry, sum(c.replayed for c in converted), dict(self._log.durable))

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise SinkFailedError(f"{self!r} failed earlier: {self._failure!r}")

    def _write_batch(self, converted: list[_Converted]) -> LogEntry | None:
        tables = [c.table for c in converted if c.table is not None]
        if not tables:
            return None
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        ranges = merge_ranges(c.ranges for c in converted)
        batch_id = self._log.next_batch
        token = secrets.token_hex(4)
        staging = self.path / STAGING_DIR / f"{batch_id}-{token}"
        files = write_staged(table, staging, engine=self.engine, partition_by=self.partition_by,
                             compression=self.compression, spark=self.spark)
        self._after(FlushStep.STAGED)
        moved = move_into_dataset(files, staging, self.path, batch=batch_id, token=token,
                                  compression=self.compression)
        self._after(FlushStep.MOVED)
        entry = LogEntry(batch_id, tuple(moved), ranges, sum(c.rows for c in converted),
                         self.engine, app=self.app_id,
                         topic_ids=known_ids(self.topic_ids, (r.topic for r in ranges)))
        self._log.append(entry)
        self._after(FlushStep.LOGGED)
        shutil.rmtree(staging, ignore_errors=True)
        return entry

    def _after(self, step: FlushStep) -> None:
        """Called on the Spark thread after each step of a write; a no-op. Fault-injection
        tests override it to raise, as a crash at that point would."""

