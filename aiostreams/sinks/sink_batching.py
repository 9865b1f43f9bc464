"""What the table sinks (Delta, Parquet) buffer, when they ask to write, and how far the
worker may commit: one :class:`Batcher` per sink, on the event loop.

* :meth:`Batcher.add` takes a retired record; a record at or below its source partition's
  durable offset is a replay and is dropped. Every ``chunk_rows`` rows the open rows are
  handed off (``hand_off``: the Parquet sink converts them to Arrow on the writer thread
  ahead of the write; the Delta sink keeps them as they are), so a filling batch holds at
  most ``chunk_rows`` rows as Python objects.
* :attr:`Batcher.backlogged` turns true once ``batch_rows`` rows are buffered, or the oldest
  has waited ``batch_interval`` seconds less the last write's duration
  (:data:`FIRST_WRITE_GUESS` before the first): rows are durable about ``batch_interval``
  after they retire. The worker then commits early, and that commit flushes the sink.
* :meth:`Batcher.take` hands every chunk to a flush, which calls :meth:`Batcher.done` once
  its write succeeded; :func:`write_taken` is that part of both sinks' ``flush``.
* The committable-offset rule (:meth:`Batcher.pending_offset`): per source partition, the
  first offset added and not durable yet, whether buffered, taken by a write that has not
  succeeded, or dropped because the sink failed. The worker commits each input partition
  only up to it. So an at-least-once commit need not wait for a write: it flushes the sink
  only when backlogged, and files are ``batch_rows`` rows or ``batch_interval`` seconds of
  data, whatever the app's ``commit_interval_ms``. Under exactly-once every commit flushes
  (a transaction's outputs must match its offsets), so there files are as large as what
  arrives between two commits.

Back-pressure: the commit runs in the worker's fetch loop and awaits the write, so nothing
is fetched while a sink writes: what still reaches the sink meanwhile was fetched before (at
most the tasks' partition queues and reorder buffers), so the buffer stays bounded (about
``batch_rows`` plus that) however slow the write.

Invariants (asserted): per source partition, the offsets handed to ``add`` never decrease
while any of its records is pending (a partition that moved to another worker and back may
restart lower once everything added from it is durable, and is then checked against the
durable offset again); the durable offset never decreases.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from aiostreams.errors import ConfigError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.sink_state import (
    SinkFailedError,
    SinkMetrics,
    SinkState,
    raise_write_failure,
)
from aiostreams.sinks.spark.spark_thread import run_on_spark_thread
from aiostreams.types import TopicPartition

__all__ = ["FIRST_WRITE_GUESS", "Batch", "Batcher", "Chunk", "Offsets", "TableSink",
           "write_taken"]

FIRST_WRITE_GUESS = 1.0
"""Seconds a write is assumed to take until the sink has timed one (see ``backlogged``)."""

T = TypeVar("T")
W = TypeVar("W")
Offsets = dict[TopicPartition, int]
HandOff = Callable[[list[ExternalRecord], Offsets, Offsets], T]
"""``(records, firsts, lasts)`` → what a flush later takes: ``firsts``/``lasts`` are the
chunk's first and last offset per source partition."""


@dataclass(frozen=True)
class Chunk(Generic[T]):
    """Rows handed off and not yet taken by a flush."""

    firsts: Offsets  # per source partition, the chunk's first offset
    rows: int
    payload: T


@dataclass(frozen=True)
class Batch(Generic[T]):
    """What one flush writes: the payloads of its chunks, oldest first."""

    payloads: list[T]
    firsts: Offsets  # per source partition, the batch's first offset
    rows: int


class Batcher(Generic[T]):
    """The buffer and the committable-offset bookkeeping of one sink (see the module
    docstring). ``owner`` names the sink in assertion messages. Raises :class:`ConfigError`
    for a ``batch_rows`` below 1 or a ``batch_interval`` not above 0."""

    def __init__(self, owner: str, *, batch_rows: int, batch_interval: float,
                 chunk_rows: int, hand_off: HandOff[T], metrics: SinkMetrics) -> None:
        if batch_rows < 1:
            raise ConfigError(f"batch_rows must be >= 1, got {batch_rows}")
        if batch_interval <= 0:
            raise ConfigError(f"batch_interval must be > 0 seconds, got {batch_interval}")
        assert chunk_rows >= 1, chunk_rows
        self.owner = owner
        self.batch_rows = batch_rows
        self.batch_interval = batch_interval
        self.chunk_rows = min(batch_rows, chunk_rows)
        self.metrics = metrics
        self.durable: Offsets = {}  # per source partition, as last known on the event loop
        self.last_added: Offsets = {}
        self._hand_off_fn = hand_off
        self._open: list[ExternalRecord] = []  # added, not yet handed off
        # per source partition, the first offset added since the last hand-off (kept while
        # the sink is failed, when records are dropped instead of buffered):
        self._open_first: Offsets = {}
        self._chunks: list[Chunk[T]] = []  # handed off, oldest first
        self._chunked_rows = 0
        self._oldest = 0.0  # when the oldest buffered row (open or in a chunk) was added
        # per source partition, the first offset of each batch taken by a flush that has
        # not succeeded, oldest first:
        self._writing: list[Offsets] = []

    def add(self, record: ExternalRecord, *, keep: bool) -> None:
        """Take a retired record: drop it if it is a replay; else count it pending and,
        when ``keep`` (the sink is running), buffer it."""
        source, offset = record.source, record.offset
        last = self.last_added.get(source)
        if last is not None and offset < last:  # equal: another output of the same input
            if self.pending_offset(source) is not None:
                raise AssertionError(f"{self.owner}: {source} went back from offset {last} "
                                     f"to {offset} while records of it were pending")
            last = None  # it came back after another worker had it: check it again
        if last is None:  # the first record from ``source`` (since it came back)
            durable = self.durable.get(source)
            if durable is not None and offset <= durable:
                self.metrics.rows_replayed += 1
                return  # (offsets never decrease, so once one is not, none later is)
        self.last_added[source] = offset
        self._open_first.setdefault(source, offset)
        if keep:
            if not self._open and not self._chunks:
                self._oldest = time.monotonic()
            self._open.append(record)
            if len(self._open) >= self.chunk_rows:
                self._hand_off()

    def _hand_off(self) -> None:
        records, self._open = self._open, []
        firsts, self._open_first = self._open_first, {}
        lasts = {source: self.last_added[source] for source in firsts}
        self._chunks.append(Chunk(firsts, len(records),
                                  self._hand_off_fn(records, firsts, lasts)))
        self._chunked_rows += len(records)

    @property
    def buffered(self) -> int:
        return self._chunked_rows + len(self._open)

    @property
    def backlogged(self) -> bool:
        buffered = self.buffered
        if buffered >= self.batch_rows:
            return True
        m = self.metrics
        write = m.last_flush_seconds if m.batches else FIRST_WRITE_GUESS
        return buffered > 0 and time.monotonic() - self._oldest >= self.batch_interval - write

    def pending_offset(self, source: TopicPartition) -> int | None:
        """The first offset of ``source`` added and not durable yet, or None."""
        for firsts in (*self._writing, *(chunk.firsts for chunk in self._chunks)):
            first = firsts.get(source)  # oldest first, so the first hit is the lowest
            if first is not None:
                return first
        return self._open_first.get(source)

    def take(self) -> Batch[T]:
        """Everything buffered, for one flush; pending until :meth:`done` is called with
        it (a flush that fails never calls it: its rows stay pending)."""
        if self._open:
            self._hand_off()
        chunks, self._chunks = self._chunks, []
        self._chunked_rows = 0
        firsts: Offsets = {}
        for chunk in chunks:
            for source, first in chunk.firsts.items():
                firsts.setdefault(source, first)
        self._writing.append(firsts)
        return Batch([c.payload for c in chunks], firsts, sum(c.rows for c in chunks))

    def done(self, batch: Batch[T]) -> None:
        """``batch`` was written. The writer thread writes in order and a failed write fails
        every later one, so every batch taken before it was written too."""
        at = next(i for i, w in enumerate(self._writing) if w is batch.firsts)
        del self._writing[:at + 1]

    def advance(self, source: TopicPartition, offset: int) -> None:
        """Record ``source`` durable up to ``offset`` (read back from the table, so never
        lower than before)."""
        previous = self.durable.get(source, -1)
        assert offset >= previous, f"{self.owner}: {source} durable {previous} -> {offset}"
        self.durable[source] = offset


class TableSink(Protocol):
    """What :func:`write_taken` drives of a table sink: its lifecycle state, the error its
    writer thread recorded when a write failed (the sink then accepts no more writes), and
    its one place of state changes."""

    state: SinkState
    _failure: BaseException | None

    def _move_to(self, state: SinkState) -> None: ...


async def write_taken(sink: TableSink, batcher: Batcher[T], write: Callable[[list[T]], W], *,
                      restart: str, skip_empty: bool) -> tuple[W, int, float] | None:
    """The part of a table sink's ``flush`` both sinks share: refuse a failed sink (a
    :class:`SinkFailedError` whose hint is ``restart``) or one not running; take the batch
    and run ``write(payloads)`` on the Spark thread; on failure move the sink to FAILED if
    its writer recorded a failure and raise (:func:`raise_write_failure`), leaving the
    batch's rows pending; on success mark the batch done. Returns ``(written, rows,
    seconds the write took)``, or None for an empty batch when ``skip_empty``."""
    if sink.state is SinkState.FAILED:
        raise SinkFailedError(f"{sink!r} failed earlier ({sink._failure!r}); {restart}")
    if sink.state is not SinkState.RUNNING:
        raise RuntimeError(f"{sink!r}: flush() needs a started sink")
    batch = batcher.take()
    if skip_empty and not batch.rows:
        batcher.done(batch)
        return None
    began = time.monotonic()
    try:
        written = await run_on_spark_thread(write, batch.payloads)
    except BaseException as e:
        if sink._failure is not None and sink.state is SinkState.RUNNING:
            sink._move_to(SinkState.FAILED)
        raise_write_failure(sink, batch.rows, e)
    batcher.done(batch)  # FIFO: every earlier write succeeded too
    return written, batch.rows, time.monotonic() - began


async def stop_table_sink(sink: TableSink, flush: Callable[[], Awaitable[None]],
                          release: Callable[[], Awaitable[None]] | None = None) -> None:
    """A table sink's ``stop``: ``flush()`` when running, then - even if that failed -
    ``release()`` (when given) and STOPPED. Idempotent. Cancellation: as the flush; the
    release and the state change happen in any case."""
    if sink.state is SinkState.STOPPED:
        return
    try:
        if sink.state is SinkState.RUNNING:
            await flush()
    finally:
        if release is not None:
            await release()
        sink._move_to(SinkState.STOPPED)
