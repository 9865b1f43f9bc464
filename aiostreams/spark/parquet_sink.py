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
  range written (:mod:`aiostreams.spark.commit_log`). The log entry is the commit point; it
  returns after.
* :meth:`ParquetSink.pending_offset` names, per source partition, the first record added
  but not yet durable (buffered, being written, or dropped after a failure); the worker
  commits no further. So an at-least-once commit need not wait for a write: it flushes the
  sink only when :attr:`ParquetSink.backlogged`, and files are ``batch_rows`` rows or
  ``batch_interval`` seconds of data, whatever the app's ``commit_interval_ms``. Under
  exactly-once every commit flushes (a transaction's outputs must match its offsets), so
  there files are as large as what arrives between two commits.
* :meth:`ParquetSink.start` takes the dataset's writer lock and recovers: it reads the log
  (the durable offsets) and deletes staging leftovers and data files no entry lists. It
  refuses (loudly, before writing) a dataset whose log names another app than the one the
  worker bound the sink to (:meth:`ParquetSink.bind_app`), or whose newest file the model
  no longer fits (:mod:`aiostreams.spark.schema_evolution`).

So whatever crashes where, a replay from the committed offsets rewrites exactly the rows
whose batch has no log entry: the dataset holds each input's results once.

Invariants (asserted): per source partition, the offsets handed to ``add`` never decrease,
and the durable offset never decreases and never passes a record that was not written.

Back-pressure: :attr:`ParquetSink.backlogged` turns true once ``batch_rows`` rows are
buffered, or the oldest has waited ``batch_interval`` seconds less the last write's duration
(so rows are durable about ``batch_interval`` after they retire); the worker then commits
early, and that commit flushes the sink. The commit runs in the worker's fetch loop and
awaits the write, so nothing is fetched while Spark writes: what still reaches the sink
meanwhile was fetched before (at most the tasks' partition queues and reorder buffers), so
the buffer stays bounded (about ``batch_rows`` plus that) however slow the write.

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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from aiostreams.engine.external_sink import ExternalRecord
from aiostreams.errors import AiostreamsError, ConfigError
from aiostreams.spark.commit_log import (
    STAGING_DIR,
    CommitLog,
    DatasetOwnerError,
    LogEntry,
    OffsetRange,
    Recovery,
)
from aiostreams.spark.parquet_writer import (
    COMPRESSIONS,
    Engine,
    move_into_dataset,
    write_staged,
)
from aiostreams.spark.paths import parse_table_path
from aiostreams.spark.rows import rows_to_table
from aiostreams.spark.schema import RowSchema, SchemaMismatch
from aiostreams.spark.schema_evolution import check_appendable
from aiostreams.spark.session import SparkConfig, get_session
from aiostreams.spark.spark_thread import run_on_spark_thread, submit_to_spark_thread
from aiostreams.types import TopicPartition

__all__ = ["FlushStep", "ParquetSink", "SinkFailedError", "SinkMetrics", "SinkState"]

log = logging.getLogger("aiostreams.spark")

_PARTITION_TYPES = ("string", "int64", "int32", "bool", "date32[day]")

DEFAULT_BATCH_ROWS: dict[Engine, int] = {"pyarrow": 50_000, "spark": 500_000}
"""Rows per write unless ``batch_rows`` says otherwise. Spark's fixed cost per job is large,
so its batches are larger (measured: ``benchmarks/RESULTS.md``). A filling batch is held as
Arrow columns (tens of bytes per row), plus at most ``convert_rows`` values as objects."""

CONVERT_ROWS = 50_000
"""Rows per Arrow conversion handed to the Spark thread while a batch fills."""

FIRST_WRITE_GUESS = 1.0
"""Seconds a write is assumed to take until the sink has timed one (see ``backlogged``)."""


class SinkState(enum.Enum):
    """``CREATED → RUNNING → STOPPED``; ``RUNNING → FAILED → STOPPED`` when a write fails."""

    CREATED = "created"
    RUNNING = "running"
    FAILED = "failed"
    STOPPED = "stopped"


_TRANSITIONS: dict[SinkState, frozenset[SinkState]] = {
    SinkState.CREATED: frozenset({SinkState.RUNNING, SinkState.FAILED, SinkState.STOPPED}),
    SinkState.RUNNING: frozenset({SinkState.FAILED, SinkState.STOPPED}),
    SinkState.FAILED: frozenset({SinkState.STOPPED}),
    SinkState.STOPPED: frozenset(),
}


class FlushStep(enum.Enum):
    """The points of a write after which a crash leaves a distinct dataset state."""

    STAGED = "staged"  # complete files in _staging; dataset unchanged
    MOVED = "moved"  # files in the dataset, no log entry: deleted by the next start
    LOGGED = "logged"  # the log entry is durable: the batch is committed


class SinkFailedError(AiostreamsError):
    """A write of the Parquet sink failed earlier; the sink accepts no more flushes."""


@dataclass
class SinkMetrics:
    rows_added: int = 0  # taken by flushes (replays excluded)
    rows_replayed: int = 0  # dropped by add() or flush(): already durable
    rows_written: int = 0
    files_written: int = 0
    batches: int = 0
    flush_seconds: float = 0.0  # total time commits waited for flushes
    last_flush_seconds: float = 0.0  # the last flush that wrote a batch
    commit_conflicts: int = 0  # Delta commits retried after another writer's commit


@dataclass(frozen=True)
class _Converted:
    """Rows converted on the Spark thread: ``table`` is None when all were replays."""

    table: pa.Table | None
    ranges: dict[TopicPartition, tuple[int, int]]  # first and last offset per source
    rows: int
    replayed: int


@dataclass(frozen=True)
class _Chunk:
    """Rows handed to the Spark thread for conversion and not yet taken by a flush."""

    firsts: dict[TopicPartition, int]  # per source partition, the chunk's first offset
    job: concurrent.futures.Future[_Converted]


@dataclass(frozen=True)
class _Written:
    entry: LogEntry | None
    replayed: int
    durable: dict[TopicPartition, int]  # the log's durable offsets after the write


class ParquetSink:
    """Writes the values reaching it (instances of ``model``) to the Parquet dataset at
    ``path``: a local or mounted directory, as a path or a ``file:`` URI
    (:mod:`aiostreams.spark.paths`; a relative path is resolved now, against the current
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
                "Streaming job (python -m aiostreams.spark.structured), which hands the "
                "path to Spark")
        self.path = where.local
        if engine not in ("spark", "pyarrow"):
            raise ConfigError(f"engine must be 'spark' or 'pyarrow', got {engine!r}")
        if compression not in COMPRESSIONS:
            raise ConfigError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
        if batch_rows is None:
            batch_rows = DEFAULT_BATCH_ROWS[engine]
        if batch_rows < 1:
            raise ConfigError(f"batch_rows must be >= 1, got {batch_rows}")
        if convert_rows < 1:
            raise ConfigError(f"convert_rows must be >= 1, got {convert_rows}")
        if batch_interval <= 0:
            raise ConfigError(f"batch_interval must be > 0 seconds, got {batch_interval}")
        self.schema = RowSchema(model, include=include, key_type=key_type,
                                metadata_prefix=metadata_prefix)
        self.partition_by = tuple(partition_by)
        self._check_partition_columns()
        self._key_column = self.schema.metadata_names.get("key")
        # string partition columns whose value comes from the model or the key:
        self._text_partitions = tuple(
            c for c in self.partition_by
            if pa.types.is_string(self.schema.arrow_schema.field(c).type)
            and (c == self._key_column or c in model.model_fields))
        self.name = ""
        self.model = model
        self.compression = compression
        self.batch_rows = batch_rows
        self.batch_interval = batch_interval
        self.engine: Engine = engine
        self.spark = spark
        self.validated_upstream = False  # set by add_parquet_sink: values were checked
        self.app_id: str | None = None  # set by bind_app (the worker, before start)
        self.state = SinkState.CREATED
        self.metrics = SinkMetrics()
        self.recovery: Recovery | None = None
        self._chunk_rows = min(batch_rows, convert_rows)
        self._open: list[ExternalRecord] = []  # added, not yet handed to conversion
        # per source partition, the first offset added since the last hand-off (kept after a
        # failure, when records are dropped instead of buffered):
        self._open_first: dict[TopicPartition, int] = {}
        self._chunks: list[_Chunk] = []  # handed to conversion, oldest first
        self._chunked_rows = 0
        self._oldest = 0.0  # when the oldest buffered row (open or in a chunk) was added
        # per source partition, the first offset of each batch taken by a flush that has not
        # succeeded, oldest first:
        self._writing: list[dict[TopicPartition, int]] = []
        self._durable: dict[TopicPartition, int] = {}
        self._last_added: dict[TopicPartition, int] = {}
        # owned by the Spark thread once started:
        self._log = CommitLog(self.path)
        self._failure: BaseException | None = None

    def _check_partition_columns(self) -> None:
        schema = self.schema.arrow_schema
        for column in self.partition_by:
            if column not in schema.names:
                raise ConfigError(f"partition_by: {column!r} is not a column; columns: "
                                  f"{schema.names}")
            kind = str(schema.field(column).type)
            if kind not in _PARTITION_TYPES:
                raise ConfigError(f"partition_by: {column!r} is {kind}; partition by a "
                                  "str, int, bool or date column")
        if len(set(self.partition_by)) != len(self.partition_by):
            raise ConfigError(f"partition_by names a column twice: {self.partition_by}")
        if len(self.partition_by) >= len(schema.names):
            raise ConfigError("partition_by cannot take every column: no data would be left "
                              "in the files")

    def _move_to(self, state: SinkState) -> None:
        if state not in _TRANSITIONS[self.state]:
            raise RuntimeError(f"sink {self.name!r}: {self.state.value} -> {state.value} is not "
                               "a lifecycle transition")
        self.state = state

    def __repr__(self) -> str:
        return (f"ParquetSink({str(self.path)!r}, {self.model.__name__}, "
                f"engine={self.engine!r}, state={self.state.value})")

    # -- validation (a processor before the sink calls it) ----------------------------------

    def validate(self, value: Any, key: Any = None) -> None:
        """Raise :class:`SchemaMismatch` unless ``value`` (and ``key``, when the key is a
        column) fits the dataset's schema exactly, and its string partition values are not
        empty. Pure and cheap (a few µs): safe on the event loop, per record."""
        self.schema.check(value, key)
        for column in self._text_partitions:
            text = key if column == self._key_column else getattr(value, column)
            if isinstance(text, enum.Enum):
                text = text.value
            if text == "":
                raise SchemaMismatch(
                    "an empty string cannot be a partition value: a Hive-style directory "
                    f"'{column}=' has no value (Spark writes it as null, and cannot read the "
                    "directory pyarrow writes); map it to None or a placeholder before the "
                    "sink", f"{self.model.__name__}.{column}"
                    if column != self._key_column else column)

    # -- ExternalSink ---------------------------------------------------------------------

    def bind_app(self, app_id: str) -> None:
        """Name the app this sink writes for (the worker calls it before :meth:`start`):
        its log entries carry it, and :meth:`start` refuses a dataset another app wrote."""
        if self.state is not SinkState.CREATED:
            raise RuntimeError(f"sink {self.name!r}: bind_app() comes before start()")
        self.app_id = app_id

    async def start(self) -> None:
        """Take the writer lock, recover from the commit log (see the module docstring) and,
        for ``engine="spark"``, start the SparkSession. Cancellation: the recovery runs to
        completion on the Spark thread; the sink stays CREATED and holds the lock until
        :meth:`stop`."""
        if self.state is not SinkState.CREATED:
            raise RuntimeError(f"sink {self.name!r} starts once; it is {self.state.value}")
        self.recovery = await run_on_spark_thread(self._recover)
        self._durable = dict(self._log.durable)
        self._move_to(SinkState.RUNNING)
        if self.recovery.entries:
            log.info("%r: %d batch(es) committed already; durable offsets %s", self,
                     self.recovery.entries,
                     {str(tp): off for tp, off in sorted(self._durable.items())})

    def _recover(self) -> Recovery:
        self._log.acquire()
        try:
            report = self._log.recover()
            self._check_owner()
            self._check_schema_appends()
            if self.engine == "spark":
                get_session(self.spark)
        except BaseException:
            self._log.release()
            raise
        return report

    def _check_owner(self) -> None:
        """Raise :class:`DatasetOwnerError` if the log's newest entry naming an app names
        another one than this sink's (an unnamed sink counts as another app)."""
        owner = self._log.app
        if owner is None or owner == self.app_id:
            return
        me = f"app {self.app_id!r}" if self.app_id else "a sink outside any app"
        raise DatasetOwnerError(
            f"{self.path} was written by app {owner!r} (commit log entry "
            f"{self._log.app_entry}); this is {me}. Its durable offsets are that app's: "
            "continuing would drop this app's records at or below them as replays. Give "
            "each app its own path (a renamed app is another app: give it a new path)")

    def _check_schema_appends(self) -> None:
        """Raise :class:`IncompatibleSchemaError` unless this sink's rows can append to the
        newest committed file's schema (each accepted change kept it readable)."""
        if not self._log.last_files:
            return
        import pyarrow.parquet as pq

        newest = self.path / self._log.last_files[-1].path
        check_appendable(pq.read_schema(newest), self.schema.arrow_schema,
                         model=self.model.__name__, dataset=str(self.path),
                         partition_by=self.partition_by)

    def add(self, record: ExternalRecord) -> None:
        """Buffer a retired result; never blocks. Replays (at or below the durable offset)
        are dropped. After a failure, records are dropped: they are replayed on restart."""
        source = record.source
        offset = record.offset
        last = self._last_added.get(source)
        if last is None:  # the first record from ``source``: is it a replay?
            durable = self._durable.get(source)
            if durable is not None and offset <= durable:
                self.metrics.rows_replayed += 1
                return  # (offsets never decrease, so once one is not, none later is)
        elif offset < last:
            raise AssertionError(f"{self!r}: {source} went back from offset {last} to {offset}")
        self._last_added[source] = offset
        if source not in self._open_first:
            self._open_first[source] = offset
        if self.state is SinkState.RUNNING:
            buffer = self._open
            if not buffer and not self._chunks:
                self._oldest = time.monotonic()
            buffer.append(record)
            if len(buffer) >= self._chunk_rows:
                self._hand_off()

    def _hand_off(self) -> None:
        """Queue the open rows' conversion on the Spark thread (FIFO: after every write
        queued before it, so it sees their durable offsets)."""
        records, self._open = self._open, []
        firsts, self._open_first = self._open_first, {}
        lasts = {source: self._last_added[source] for source in firsts}
        job = submit_to_spark_thread(self._convert, records, firsts, lasts)
        self._chunks.append(_Chunk(firsts, job))
        self._chunked_rows += len(records)

    @property
    def backlogged(self) -> bool:
        """True once ``batch_rows`` rows are buffered, or the oldest has waited
        ``batch_interval`` seconds less the last write's duration (``FIRST_WRITE_GUESS``
        before the first): the worker then commits early and flushes the sink."""
        buffered = self._chunked_rows + len(self._open)
        if buffered >= self.batch_rows:
            return True
        m = self.metrics
        write = m.last_flush_seconds if m.batches else FIRST_WRITE_GUESS
        return buffered > 0 and time.monotonic() - self._oldest >= self.batch_interval - write

    def durable_offset(self, source: TopicPartition) -> int | None:
        return self._durable.get(source)

    def pending_offset(self, source: TopicPartition) -> int | None:
        """The first offset of ``source`` added and not durable yet (buffered, in a write
        that has not succeeded, or dropped after a failure), or None."""
        for firsts in (*self._writing, *(chunk.firsts for chunk in self._chunks)):
            first = firsts.get(source)  # oldest first, so the first hit is the lowest
            if first is not None:
                return first
        return self._open_first.get(source)

    async def flush(self) -> None:
        """Write everything added so far and commit it to the log; returns once durable.
        Raises :class:`SinkFailedError` (or the write's error) if it is not. Cancellation:
        see the module docstring (the write completes; nothing is committed)."""
        if self.state is SinkState.FAILED:
            raise SinkFailedError(f"{self!r} failed earlier ({self._failure!r}); restart the "
                                  "app so a new sink recovers from the commit log")
        if self.state is not SinkState.RUNNING:
            raise RuntimeError(f"{self!r}: flush() needs a started sink")
        if self._open:
            self._hand_off()
        chunks, self._chunks = self._chunks, []
        rows, self._chunked_rows = self._chunked_rows, 0
        firsts: dict[TopicPartition, int] = {}
        for chunk in chunks:
            for source, first in chunk.firsts.items():
                firsts.setdefault(source, first)
        self._writing.append(firsts)  # pending until this write succeeds
        began = time.monotonic()
        try:
            written = await run_on_spark_thread(self._write, [c.job for c in chunks])
        except BaseException as e:
            if self._failure is not None and self.state is SinkState.RUNNING:
                self._move_to(SinkState.FAILED)
            if isinstance(e, Exception) and not isinstance(e, AiostreamsError):
                raise SinkFailedError(f"{self!r}: writing {rows} row(s) failed: "
                                      f"{type(e).__name__}: {e}") from e
            raise
        # The Spark thread writes in order and a failed write fails every later one, so
        # this write's success means every batch taken before it is durable too.
        done = next(i for i, w in enumerate(self._writing) if w is firsts)
        del self._writing[:done + 1]
        m = self.metrics
        m.rows_added += rows
        m.rows_replayed += written.replayed
        seconds = time.monotonic() - began
        m.flush_seconds += seconds
        entry = written.entry
        if entry is not None:
            m.last_flush_seconds = seconds  # of the last write (not of empty flushes)
            for o in entry.offsets:
                previous = self._durable.get(o.source, -1)
                assert o.last > previous, f"{o.source}: durable offset {previous} -> {o.last}"
                self._durable[o.source] = o.last
            m.rows_written += entry.rows
            m.files_written += len(entry.files)
            m.batches += 1
        for source, offset in written.durable.items():  # and those of abandoned writes
            if offset > self._durable.get(source, -1):
                self._durable[source] = offset

    async def stop(self) -> None:
        """Flush (when running) and release the writer lock. Idempotent. The SparkSession
        stays up (one per process; see :mod:`aiostreams.spark.session`). Cancellation: the
        flush behaves as in :meth:`flush`; the lock is released in any case."""
        if self.state is SinkState.STOPPED:
            return
        try:
            if self.state is SinkState.RUNNING:
                await self.flush()
        finally:
            await run_on_spark_thread(self._log.release)
            self._move_to(SinkState.STOPPED)

    # -- the write, on the Spark thread ---------------------------------------------------

    def _convert(self, records: list[ExternalRecord], firsts: dict[TopicPartition, int],
                 lasts: dict[TopicPartition, int]) -> _Converted:
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
                ranges = _offset_ranges(rows)
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

    def _write(self, jobs: list[concurrent.futures.Future[_Converted]]) -> _Written:
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
        spans: dict[TopicPartition, tuple[int, int]] = {}
        for c in converted:  # in offset order per source
            for source, (first, last) in c.ranges.items():
                spans[source] = (spans.get(source, (first, last))[0], last)
        ranges = tuple(OffsetRange(source.topic, source.partition, first, last)
                       for source, (first, last) in sorted(spans.items()))
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
                         self.engine, app=self.app_id)
        self._log.append(entry)
        self._after(FlushStep.LOGGED)
        shutil.rmtree(staging, ignore_errors=True)
        return entry

    def _after(self, step: FlushStep) -> None:
        """Called on the Spark thread after each step of a write; a no-op. Fault-injection
        tests override it to raise, as a crash at that point would."""


def _offset_ranges(rows: list[ExternalRecord]) -> dict[TopicPartition, tuple[int, int]]:
    ranges: dict[TopicPartition, list[int]] = {}
    for r in rows:
        span = ranges.get(r.source)
        if span is None:
            ranges[r.source] = [r.offset, r.offset]
        else:
            span[1] = r.offset  # offsets per source never decrease (asserted in add)
    return {tp: (first, last) for tp, (first, last) in ranges.items()}
