"""Stream time per operator, as Kafka Streams' window and join processors keep it.

Kafka Streams' windowed aggregations and stream-stream joins each track the largest
timestamp among the records that reached *that processor* (``observedStreamTime``), not the
task's: a record filtered out upstream (or dropped for a null key) neither advances it nor
makes later records late. :class:`NodeStreamTime` is that value for one processor instance
(one node of one task), in milliseconds.

Under concurrency the value must still be the serial run's: the record asks for it only
after every record issued before it has finished
(:meth:`~aiostreams.topology.processor.ProcessorContext.wait_for_earlier_records`), so the
records that reach the node update it one at a time in offset order.

Invariant (asserted): the value never decreases. It lives in memory, as in Kafka Streams:
after a restart it starts again from the first record the node sees (stores keep their own
time; see :class:`StoreTime`).
"""

from __future__ import annotations

from aiostreams.topology.processor import ProcessorContext

NO_TIME = -(2**62)
"""Stream time before any record (Kafka's ``NO_TIMESTAMP``, kept far below any real time
so that ``NO_TIME - grace`` is still "before everything")."""


class NodeStreamTime:
    """The stream time of one processor node in one task; see the module docstring."""

    __slots__ = ("ms",)

    def __init__(self) -> None:
        self.ms = NO_TIME

    async def observe(self, ctx: ProcessorContext, ts_ms: int) -> int:
        """Wait for every earlier record of the task to finish, then fold ``ts_ms`` (this
        record's timestamp) into the node's stream time and return it. Cancellation: stops
        waiting; the time is unchanged."""
        await ctx.wait_for_earlier_records()
        return self.advance(ts_ms)

    def advance(self, ts_ms: int) -> int:
        """Fold ``ts_ms`` in without waiting (for callers already in issue order)."""
        before = self.ms
        if ts_ms > before:
            self.ms = ts_ms
        assert self.ms >= before, "node stream time moved back"
        return self.ms


class StoreTime:
    """A window or session store's own notion of time, as Kafka Streams' segmented stores
    keep it: the largest window start (time windows) or session end (sessions) ever written
    to it, by puts and deletes alike. What the store can still return is bounded by it:
    nothing older than ``ms - retention + 1`` is visible. Updated in issue order by the
    processor that owns the store (it has awaited ``wait_for_earlier_records``), and seeded
    from the store's contents after a restore."""

    __slots__ = ("ms", "retention_ms")

    def __init__(self, retention_ms: int) -> None:
        self.ms = NO_TIME
        self.retention_ms = retention_ms

    def advance(self, ms: int) -> None:
        if ms > self.ms:
            self.ms = ms

    def earliest_visible(self) -> int:
        """The oldest window start / session end the store still returns."""
        return self.ms - self.retention_ms + 1
