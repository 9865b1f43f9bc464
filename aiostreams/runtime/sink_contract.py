"""The sink contract: how a sink outside Kafka (Delta, Parquet, files, databases) takes part
in the commit protocol.

An external sink node in the topology turns each record reaching it into an
:class:`ExternalRecord` buffered in the record's slot, like any output. At retire the worker
hands it to the sink (:meth:`ExternalSink.add`, in retire order per source partition). A
sink writes in batches of its own size, not one per commit:

* at-least-once: a commit awaits :meth:`ExternalSink.flush` only for sinks that ask for it
  (:attr:`ExternalSink.backlogged`: enough rows, or the oldest waited long enough), and
  commits each source partition no further than the first record any sink holds that is
  not durable yet (:meth:`ExternalSink.pending_offset`);
* exactly-once, and every commit that closes tasks (revocation, shutdown) or that
  ``App.wait_until_caught_up`` asks for: the commit flushes every sink first, so its
  offsets (and, under exactly-once, the Kafka outputs of its transaction) cover everything
  retired.

So after any crash, the committed offsets never pass a record whose result is not durable,
and file sizes follow the sink's batch settings, not the commit interval.

Exactly once: a replay after a crash re-adds records whose results may already be durable
(flushed, but the offset commit did not happen). The sink remembers, durably and atomically
with its data, the highest source offset it has written per source partition
(:meth:`ExternalSink.durable_offset`), and drops anything at or below it — as Spark's file
sink keeps ``_spark_metadata``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.types import TopicPartition

__all__ = ["ExternalRecord", "ExternalSink"]


@runtime_checkable
class ExternalSink(Protocol):
    name: str

    async def start(self) -> None:
        """Open resources and read the durable offsets (called once, before any ``add``)."""
        ...

    def add(self, record: ExternalRecord) -> None:
        """Take a retired result (must not block). Records at or below the source
        partition's durable offset are replays and must be dropped."""
        ...

    async def flush(self) -> None:
        """Make every record added so far durable; raise if that failed. The commit then
        fails, nothing is committed, and the worker commits nothing more (not even on
        shutdown): the records are processed again after a restart."""
        ...

    def durable_offset(self, source: TopicPartition) -> int | None:
        """The highest source offset whose result is durable, or None."""
        ...

    def pending_offset(self, source: TopicPartition) -> int | None:
        """The lowest offset of ``source`` whose record was added but whose result is not
        durable yet (buffered, being written, or dropped by a failed sink), or None when
        everything added from ``source`` is durable. The worker never commits ``source``
        past it."""
        ...

    @property
    def backlogged(self) -> bool:
        """True once the sink wants a flush (enough rows buffered, the oldest waited long
        enough, or - for a table sink - its maintenance is due): the worker then commits
        early, and that commit flushes it."""
        ...

    async def stop(self) -> None:
        """Flush and release resources (a clean shutdown)."""
        ...
