"""What the table sinks (Delta, Iceberg, Parquet) share: the contract's bookkeeping on the
event loop, and - for the tables that commit against a snapshot (Delta, Iceberg) - the
flush, the writer thread's commit loop and the scheduled table maintenance.

* :class:`TableSinkBase` (every table sink): binding to the app and its topic incarnations
  before start, the lifecycle's one place of change, and the contract's ``add``,
  ``backlogged``, ``durable_offset`` and ``pending_offset``, all kept by the sink's
  :class:`~aiostreams.sinks.sink_batching.Batcher`.
* :class:`SnapshotTableSink` (Delta, Iceberg): :meth:`~SnapshotTableSink.flush` hands the
  batch to the writer thread, where :meth:`~SnapshotTableSink._write_batch` calls the
  sink's ``_check_and_commit`` (check the durable offsets on the newest snapshot, drop the
  replays, commit the rest against that snapshot) and, when the commit lost a race with
  another writer (the sink's ``_race`` exception: nothing of it committed), checks again,
  up to :data:`COMMIT_ATTEMPTS` times. Any error in a write leaves the sink FAILED.
  After a flush that succeeded, the table's maintenance (:mod:`aiostreams.sinks.maintenance`),
  when the sink has one and a task is due, is queued on the same writer thread: it runs
  between two of this sink's writes, never racing them, and its errors never fail the sink.
  An idle sink with maintenance due says it is ``backlogged``, so the worker's next commit
  flushes it (an empty flush, no table commit) and the maintenance runs on schedule even
  when no row comes.

Invariants (asserted): those of the batcher; a commit's durable offsets only move forward.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.table_health import TableHealth
from aiostreams.sinks.incarnations import known_ids
from aiostreams.sinks.maintenance import MaintenanceRunner, MaintenanceStep
from aiostreams.sinks.sink_batching import Batcher, stop_table_sink, write_taken
from aiostreams.sinks.sink_state import SinkFailedError, SinkMetrics, SinkState, move_to
from aiostreams.sinks.spark.spark_thread import submit_to_spark_thread
from aiostreams.types import TopicPartition

__all__ = ["COMMIT_ATTEMPTS", "SnapshotTableSink", "TableSinkBase", "Written"]

log = logging.getLogger("aiostreams.sinks")

T = TypeVar("T")

COMMIT_ATTEMPTS = 8
"""Commits of one batch tried against successively newer snapshots before the sink fails."""


@dataclass(frozen=True)
class Written:
    """What one write of a snapshot table sink did."""

    rows: int
    replayed: int
    files: int
    durable: dict[TopicPartition, int]  # per source partition of the batch, after the write


class TableSinkBase(Generic[T]):
    """The bookkeeping every table sink shares; subclasses set ``name``, ``state``,
    ``metrics``, ``app_id``, ``topic_ids`` and ``_batch`` in their ``__init__``."""

    name: str
    state: SinkState
    metrics: SinkMetrics
    app_id: str | None
    topic_ids: dict[str, str]
    _batch: Batcher[T]
    _failure: BaseException | None

    def _move_to(self, state: SinkState) -> None:
        self.state = move_to(self.name, self.state, state)

    @property
    def app(self) -> str:
        """The app id the table's identity and its commits name."""
        return self.app_id or "aiostreams"

    def bind_app(self, app_id: str) -> None:
        """Name the app this sink writes for (the worker calls it before ``start``)."""
        if self.state is not SinkState.CREATED:
            raise RuntimeError(f"sink {self.name!r}: bind_app() comes before start()")
        self.app_id = app_id

    def bind_topic_ids(self, ids: Mapping[str, str | None]) -> None:
        """Name the incarnation (Kafka topic id) of each source topic as the app starts (the
        worker calls it before ``start``); None for a topic without an id (not checked)."""
        if self.state is not SinkState.CREATED:
            raise RuntimeError(f"sink {self.name!r}: bind_topic_ids() comes before start()")
        self.topic_ids = known_ids(ids)

    def add(self, record: ExternalRecord) -> None:
        """Buffer a retired result; never blocks. Replays are dropped; after a failure,
        records are dropped (they are replayed after a restart)."""
        self._batch.add(record, keep=self.state is SinkState.RUNNING)

    @property
    def backlogged(self) -> bool:
        """See :attr:`aiostreams.sinks.sink_batching.Batcher.backlogged`."""
        return self._batch.backlogged

    def durable_offset(self, source: TopicPartition) -> int | None:
        """The durable offset of ``source`` as last known on the event loop, or None."""
        return self._batch.durable.get(source)

    def pending_offset(self, source: TopicPartition) -> int | None:
        """The first offset of ``source`` added and not durable yet (buffered, in a write
        that has not succeeded, or dropped after a failure), or None."""
        return self._batch.pending_offset(source)


class SnapshotTableSink(TableSinkBase[list[ExternalRecord]]):
    """A table sink that commits each batch against the snapshot it checked the durable
    offsets on (Delta, Iceberg). Subclasses give ``_check_and_commit`` (on the writer
    thread), ``_race`` (the exception of a commit that lost a race) and ``path``."""

    path: object  # what errors name: the table's path or identifier
    _race: type[Exception]
    _maintenance: MaintenanceRunner | None = None

    @property
    def table_health(self) -> TableHealth | None:
        """The maintenance's figures (None when the sink has no maintenance)."""
        return None if self._maintenance is None else self._maintenance.health

    @property
    def backlogged(self) -> bool:
        """Rows to write (see :attr:`aiostreams.sinks.sink_batching.Batcher.backlogged`), or
        a maintenance task due: the next commit's flush queues it, rows or not."""
        runner = self._maintenance
        return self._batch.backlogged or (
            runner is not None and self.state is SinkState.RUNNING and runner.due())

    async def flush(self) -> None:
        """Write everything added so far as one table commit; returns once it landed.
        Raises :class:`SinkFailedError` if it did not. Cancellation: the write completes
        on the writer thread; the commit that awaited it fails, so nothing is committed."""
        done = await write_taken(
            self, self._batch, self._write_payloads, skip_empty=True,
            restart="restart the app so a new sink reads the durable offsets from the table")
        if done is None:  # nothing to write; the maintenance may still be due
            self._schedule_maintenance()
            return
        written, rows, seconds = done
        m = self.metrics
        m.flush_seconds += seconds
        m.rows_added += rows
        m.rows_replayed += written.replayed
        if written.rows:
            m.rows_written += written.rows
            m.files_written += written.files
            m.batches += 1
            m.last_flush_seconds = seconds
        for source, offset in written.durable.items():
            self._batch.advance(source, offset)
        self._schedule_maintenance()

    def _schedule_maintenance(self) -> None:
        """Queue the due maintenance on the writer thread, behind this flush's write and
        before the next one (the thread is FIFO)."""
        runner = self._maintenance
        if runner is not None and self.state is SinkState.RUNNING and runner.due():
            runner.queued()
            submit_to_spark_thread(runner.run)

    async def stop(self) -> None:
        """Flush (when running). Idempotent. Cancellation: as :meth:`flush`."""
        if self._maintenance is not None:
            self._maintenance.stop()
        await stop_table_sink(self, self.flush)

    # -- on the writer thread ---------------------------------------------------------------

    def _write_payloads(self, chunks: list[list[ExternalRecord]]) -> Written:
        if self._failure is not None:
            raise SinkFailedError(f"{self!r} failed earlier: {self._failure!r}")
        try:
            return self._write_batch([r for chunk in chunks for r in chunk])
        except BaseException as e:
            self._failure = e
            raise

    def _write_batch(self, records: list[ExternalRecord]) -> Written:
        """Check and commit ``records``; on a lost race, check again against the newest
        snapshot and commit what is still not durable."""
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                return self._check_and_commit(records)
            except self._race as e:
                if attempt == COMMIT_ATTEMPTS:
                    raise SinkFailedError(
                        f"{self!r}: {attempt} commits in a row lost a race with other writers "
                        f"of {self.path} (last: {e}); nothing of this batch was committed by "
                        "this sink. Restart the app; if it recurs, fewer workers should write "
                        "this table") from e
                self.metrics.commit_conflicts += 1
                log.info("sink %r: commit conflict (%s); checking the newest snapshot again "
                         "(attempt %d of %d)", self.name, e, attempt + 1, COMMIT_ATTEMPTS)
        raise AssertionError("unreachable")

    def _check_and_commit(self, records: list[ExternalRecord]) -> Written:
        raise NotImplementedError

    def _after_maintenance(self, step: MaintenanceStep) -> None:
        """Called on the writer thread after each step of a maintenance task; a no-op.
        Fault-injection tests override it to kill the process, as a crash there would."""
