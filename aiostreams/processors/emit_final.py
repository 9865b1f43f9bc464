"""Emit strategy ``on_window_close`` (Kafka Streams' KIP-825, ``windowedBy(...)
.emitStrategy(EmitStrategy.onWindowClose())``) for time, sliding and session windows: a
windowed aggregate emits each window once, its final value, when the window closes, instead
of every update.

Each processor here aggregates as its update-emitting parent does (forwarding nothing
then) and afterwards, with ``last`` the close time of the previous emission, emits the
windows that closed since, as Kafka 3.9 does:

**Time windows** (:class:`EmitOnWindowCloseProcessor`; after each record with a key, a
record dropped as late included), ``close = stream time - grace``:

1. nothing happens unless ``close`` moved past ``last`` (or nothing was emitted yet) and
   ``close - size >= 0``;
2. windows starting in ``[lower, close - size]`` are due, with ``lower = 0`` for the first
   emission, else ``max(0, last - size) + 1``; when ``last`` was set and the windows
   containing ``close - size`` are those containing ``lower - 1``, no new window closed and
   nothing happens (``last`` unchanged);
3. else the due windows of *every* key are forwarded in order of start, then serialized
   key (Kafka's time-ordered store) - those the store still returns by Kafka's rule: start
   at least the greatest window start written minus retention - each
   ``(Windowed(key, start, end), aggregate)`` stamped with the aggregate's timestamp and
   carrying the current record's headers; ``last`` becomes ``close`` (even when no window
   was due).

**Sliding windows** (:class:`SlidingEmitOnWindowCloseProcessor`; only after a record that
was aggregated and is not *early*, ``t >= d``: Kafka returns before emitting for null
keys or values, late records and early ones), ``close = stream time - grace``: unless
``close <= last``, windows ending before ``close`` (start ``<= close - d - 1``, which must
be ``>= 0``) and starting at or after ``0`` (first emission) or ``max(0, last - d)`` are
forwarded as above, in (start, key) order, from what the store returns by the same rule
(the time-ordered store keeps a window starting exactly ``retention`` before its newest
start, one ms more than the update-emitting store; ``keeps_edge``); ``last = close``.

**Session windows** (:class:`SessionEmitOnWindowCloseProcessor`; after each record with a
key, late ones included), ``close = stream time - grace - gap``: unless ``close <= last``,
sessions *ending* in ``[max(0, last), close - 1]`` (the first emission: from 0) are
forwarded in order of (end, start, serialized key), each ``(Windowed(key, start, end),
aggregate)`` stamped with its end and carrying the current record's headers; ``last =
close`` - but when that range is empty nothing happens and ``last`` stays. The sessions
are those Kafka's time-ordered session store still holds: it drops whole *segments* of
``max(retention / 2, 60 s)`` of session ends once they are older than the segment of
``store time - retention`` (store time: the greatest session end written), so a session
can be dropped unemitted when stream time jumps (the aiostreams store is given that much
more retention, so it still holds every session Kafka's does). A session merge deletes
the merged sessions, already emitted or not, and the merged session is emitted when *it*
closes: a final result can be followed by the final result of a later session that
swallowed it (Kafka's behaviour; a record can extend a session that closed within its
gap, since lateness is judged by the merged session's end).

``last`` is state: it lives in a changelogged key-value store of its own (Kafka keeps it as
processor metadata committed with the offsets), so a restored task emits neither twice nor
never; a restored processor also reads its store's time back from the store. Kafka
additionally emits at most once per ``emit.interval.ms.kstreams.windowed.aggregation`` of
wall-clock time (1 s); aiostreams has no such throttle, i.e. Kafka's behaviour with that
interval at 0, which is how the oracle configures Kafka: results never depend on
wall-clock time or speed.

Invariant (asserted): ``last`` only increases. Emission reads every key's windows, so it
runs in issue order: the stream-time step has awaited every earlier record of the task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.processors.sliding_windows import SlidingWindowAggregateProcessor
from aiostreams.processors.store_values import ValueAndTimestamp
from aiostreams.processors.windows import (
    SessionAggregateProcessor,
    TimeWindowAggregateProcessor,
)
from aiostreams.serde import Serde
from aiostreams.topology.processor import ProcessorContext
from aiostreams.topology.stream_time import NO_TIME, StoreTime
from aiostreams.types import Record
from aiostreams.windows import (
    LateRecords,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Windowed,
    restamped,
    to_ms,
)

AnyRecord = Record[Any, Any]
LAST_EMIT_KEY = "last-emit-window-close-ms"


class EmitOnWindowCloseProcessor(TimeWindowAggregateProcessor):
    """See the module docstring. ``emit_store`` holds ``last`` under :data:`LAST_EMIT_KEY`;
    ``key_serde`` orders keys of one window start as Kafka's store does."""

    forwards_updates = False

    def __init__(self, store: str, windows: TimeWindows, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], late: LateRecords, emit_store: str,
                 key_serde: Serde[Any], retention_ms: int) -> None:
        super().__init__(store, windows, start, adder, late)
        self.emit_store = emit_store
        self.key_serde = key_serde
        self._store_time = StoreTime(retention_ms)
        self._seeded = False

    async def process(self, record: AnyRecord) -> None:
        await super().process(record)
        if record.key is None:
            return
        assert self._time.ms != NO_TIME
        close = self._time.ms - self.windows.grace_ms
        await self._track_store_time(to_ms(record.timestamp), close)
        emits = self.context.store(self.emit_store)
        last: int | None = await emits.get(LAST_EMIT_KEY)
        if last is not None and last >= close:
            return
        size = self.windows.size_ms
        upper = close - size
        if upper < 0:
            return
        lower = 0 if last is None else max(0, last - size) + 1
        if last is not None and ({s for s, _ in self.windows.windows_for(upper)}
                                 == {s for s, _ in self.windows.windows_for(lower - 1)}):
            return
        # Kafka's time-ordered window store returns starts >= its time - retention (one
        # ms more than its other window stores keep).
        lower = max(lower, self._store_time.ms - self._store_time.retention_ms)
        due = ([] if upper < lower else
               await self.context.store(self.store_name).fetch_all(lower / 1000, upper / 1000))
        serialize = self.key_serde.serialize
        due.sort(key=lambda w: (to_ms(w[1]), serialize(self.store_name, w[0]) or b""))
        for key, start, stored in due:
            assert isinstance(stored, ValueAndTimestamp), stored
            start_ms = to_ms(start)
            self.context.forward(restamped(
                record, Windowed(key, start, (start_ms + size) / 1000), stored.value,
                to_ms(stored.timestamp)))
        assert last is None or close > last, (last, close)
        emits.put(LAST_EMIT_KEY, close)

    async def _track_store_time(self, ts: int, close: int) -> None:
        """Follow the window store's time as Kafka's does: the greatest window start
        written (a restored task first reads it from the store)."""
        if not self._seeded:
            self._seeded = True
            stored = await self.context.store(self.store_name).fetch_all(
                -float("inf"), float("inf"))
            for _, start, _ in stored:
                self._store_time.advance(to_ms(start))
        for start_ms, end_ms in self.windows.windows_for(ts):
            if end_ms > close:
                self._store_time.advance(start_ms)


class LastEmit:
    """``last`` of one processor: the close time of its previous emission, in the
    changelogged key-value store ``store`` under :data:`LAST_EMIT_KEY`."""

    def __init__(self, store: str) -> None:
        self.store = store

    async def get(self, ctx: ProcessorContext) -> int | None:
        last: int | None = await ctx.store(self.store).get(LAST_EMIT_KEY)
        return last

    def put(self, ctx: ProcessorContext, last: int | None, close: int) -> None:
        assert last is None or close > last, (last, close)
        ctx.store(self.store).put(LAST_EMIT_KEY, close)


class _SeedsStoreTime:
    """Seeds a restored task's store time once, before its first record (the sliding and
    session emitters; the time-window emitter seeds inside ``_track_store_time``)."""

    _seeded: bool
    store_name: str
    _store_time: StoreTime

    async def _seed(self, ctx: ProcessorContext) -> None:
        await ctx.wait_for_earlier_records()
        if not self._seeded:
            self._seeded = True
            await seed_store_time(ctx, self.store_name, self._store_time)


async def seed_store_time(ctx: ProcessorContext, store: str, time: StoreTime) -> None:
    """Advance ``time`` to the greatest window start (session end) ``store`` holds: a
    restored task's store time, which Kafka's store recovers with its contents."""
    for _, start, _ in await ctx.store(store).fetch_all(-float("inf"), float("inf")):
        time.advance(to_ms(start))


class SlidingEmitOnWindowCloseProcessor(_SeedsStoreTime, SlidingWindowAggregateProcessor):
    """Sliding windows emitted on window close (see the module docstring)."""

    forwards_updates = False

    def __init__(self, store: str, windows: SlidingWindows, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], late: LateRecords, emit_store: str,
                 key_serde: Serde[Any], retention_ms: int) -> None:
        super().__init__(store, windows, start, adder, late, retention_ms=retention_ms,
                         keeps_edge=True)
        self.last_emit = LastEmit(emit_store)
        self.key_serde = key_serde
        self._seeded = False

    async def process(self, record: AnyRecord) -> None:
        ctx = self.context
        if not self._seeded:
            await self._seed(ctx)
        await super().process(record)
        if record.key is None or record.value is None:
            return
        ts = to_ms(record.timestamp)
        close = self._time.ms - self.grace_ms
        if ts + self.d < close or ts < self.d:
            return  # late or early: Kafka returns before emitting
        last = await self.last_emit.get(ctx)
        if last is not None and last >= close:
            return
        upper = close - self.d - 1
        if upper < 0:
            return
        lower = max(0 if last is None else max(0, last - self.d),
                    self._store_time.earliest_visible())
        due = ([] if upper < lower else
               await ctx.store(self.store_name).fetch_all(lower / 1000, upper / 1000))
        serialize = self.key_serde.serialize
        due.sort(key=lambda w: (to_ms(w[1]), serialize(self.store_name, w[0]) or b""))
        for key, start, stored in due:
            assert isinstance(stored, ValueAndTimestamp), stored
            start_ms = to_ms(start)
            ctx.forward(restamped(record, Windowed(key, start, (start_ms + self.d) / 1000),
                                  stored.value, to_ms(stored.timestamp)))
        self.last_emit.put(ctx, last, close)


def session_segment_ms(retention_ms: int) -> int:
    """The segment interval of Kafka's time-ordered session store of ``retention_ms``."""
    return max(retention_ms // 2, 60_000)


class SessionEmitOnWindowCloseProcessor(_SeedsStoreTime, SessionAggregateProcessor):
    """Session windows emitted on window close (see the module docstring). The store must
    keep ``retention + session_segment_ms(retention)``: Kafka's store holds sessions that
    long, in whole segments."""

    forwards_updates = False

    def __init__(self, store: str, windows: SessionWindows, retention_ms: int,
                 start: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any], late: LateRecords, emit_store: str,
                 key_serde: Serde[Any]) -> None:
        super().__init__(store, windows, retention_ms, start, adder, merger, late)
        self.last_emit = LastEmit(emit_store)
        self.key_serde = key_serde
        self.segment_ms = session_segment_ms(retention_ms)
        self._seeded = False

    async def process(self, record: AnyRecord) -> None:
        ctx = self.context
        if not self._seeded:
            await self._seed(ctx)
        await super().process(record)
        if record.key is None:
            return
        close = self._time.ms - self.windows.grace_ms - self.windows.gap_ms
        last = await self.last_emit.get(ctx)
        if last is not None and last >= close:
            return
        upper = close - 1
        lower = 0 if last is None else max(0, last)
        if upper < 0 or upper < lower:
            return
        # Kafka drops the segments before that of store time - retention (Java's integer
        # division: a negative time is in segment 0).
        oldest = max(0, self._store_time.ms - self._store_time.retention_ms)
        live_from = oldest // self.segment_ms * self.segment_ms
        fetch_from = max(lower, live_from)
        due = ([] if upper < fetch_from else
               await ctx.store(self.store_name).fetch_all(fetch_from / 1000, upper / 1000))
        serialize = self.key_serde.serialize
        due.sort(key=lambda s: (to_ms(s[1]), to_ms(s[2][0]),
                                serialize(self.store_name, s[0]) or b""))
        for key, end, (start, aggregate) in due:
            end_ms = to_ms(end)
            ctx.forward(restamped(record, Windowed(key, start, end_ms / 1000), aggregate,
                                  end_ms))
        self.last_emit.put(ctx, last, close)


__all__ = [
    "LAST_EMIT_KEY",
    "EmitOnWindowCloseProcessor",
    "LastEmit",
    "SessionEmitOnWindowCloseProcessor",
    "SlidingEmitOnWindowCloseProcessor",
    "session_segment_ms",
]
