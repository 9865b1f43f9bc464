"""The processors of windowed aggregations, with Kafka Streams' semantics (3.9).

Both track stream time over the records that reach *them*
(:class:`~aiostreams.topology.stream_time.NodeStreamTime`), so they await every earlier
record of the task first; the steps upstream still run concurrently.

**Time windows.** A record with a null key is skipped (a null *value* is aggregated, as in
Kafka Streams). For each window containing the record's timestamp: a window with
``end <= stream time - grace`` is closed and the record is dropped for it (counted as
late); otherwise ``new = adder(key, value, old or initial)`` is stored with its timestamp,
the maximum timestamp of the records that made it, and forwarded as
``(Windowed(key, start, end), new)`` stamped with that timestamp. A ``None`` result deletes
the window.

**Sessions.** The sessions of the key that the record can merge with are those with
``end >= ts - gap`` and ``start <= ts + gap`` that the store still holds (its own time,
:class:`~aiostreams.topology.stream_time.StoreTime`: the greatest session end written,
hides sessions ending at or before ``store time - retention``). The merged session spans
them and the record; if its end is before ``stream time - grace - gap`` the record is late
and dropped. Otherwise each merged session is deleted and forwarded as a tombstone stamped
with *its* end - unless the merged session is just ``[ts, ts]`` (an existing one-point
session at the same time is updated in place, with no tombstone) - and the new aggregate is
stored under the merged end and forwarded stamped with that end. Session results carry no
headers (Kafka Streams makes them new records; time-window updates keep the input's).

**Old values.** When a table downstream asks for them (its :class:`OldValues` enabled: a
re-grouping, a suppression, a table-table join), each update carries the old aggregate as
Kafka Streams' ``Change(new, old)``: a time window's value before the record (the
initializer's when the window is new, as Kafka), a merged session's tombstone its
aggregate, a new or grown session none.

Invariants: a time window is never written or forwarded once ``end + grace <= stream
time``; a session is never extended once ``end + gap + grace < stream time``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.processors.record_caching import cached_stamped
from aiostreams.processors.steps import NO_VALUE
from aiostreams.processors.store_values import ValueAndTimestamp, WindowAccess, window_access
from aiostreams.processors.table_changes import OldValues, update
from aiostreams.processors.tables import ValueGetter
from aiostreams.processors.window_caching import CachedWindows
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.topology.stream_time import NodeStreamTime, StoreTime
from aiostreams.types import Record
from aiostreams.windows import (
    LateRecords,
    SessionWindows,
    TimeWindows,
    Windowed,
    restamped,
    to_ms,
)

AnyRecord = Record[Any, Any]
_NO_END = float("inf")


class WindowedAggregate(Processor[Any, Any]):
    """What every windowed aggregation holds: its store, initializer and adder, where late
    records go, its counters (``dropped_late``, ``skipped``), its own stream time, and its
    record cache when ``caching`` and the task caches (see :meth:`_open_cache`)."""

    forwards_updates = True
    """Whether each update is forwarded (emit on window update, Kafka's default); the
    emit-on-window-close subclasses forward closed windows instead (and cache nothing)."""

    def __init__(self, store: str, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], late: LateRecords,
                 caching: bool = True, old_values: OldValues | None = None) -> None:
        self.store_name = store
        self.start = start
        self.adder = adder
        self.late = late
        self.caching = caching
        self.old_values = old_values
        self.sends_old = False  # read from old_values at init (the topology is built)
        self.dropped_late = 0
        self.skipped = 0
        self._time = NodeStreamTime()
        self._cache: CachedWindows | None = None  # when cached

    def _open_cache(self, context: ProcessorContext,
                    flush: Callable[[CachedWindows, ProcessorContext], None], *,
                    indexed: bool = True) -> None:
        """At init: open the store's record cache with ``flush`` (nothing when ``caching``
        is off, updates are not forwarded, or the task caches nothing)."""
        self.sends_old = self.old_values is not None and self.old_values.enabled
        if self.caching and self.forwards_updates:
            self._cache = CachedWindows.open_for(context, self.store_name, flush,
                                                 indexed=indexed, sends_old=self.sends_old)

    def _skipped(self, record: AnyRecord, *, null_values: bool = False) -> bool:
        """True (and counted) for a record without a key (or, with ``null_values``, without
        a value): Kafka Streams skips those in windowed aggregations."""
        if record.key is None or (null_values and record.value is None):
            self.skipped += 1
            self.late.dropped.drop(self.context,
                                   "null_key" if record.key is None else "null_value")
            return True
        return False


class TimeWindowAggregateProcessor(WindowedAggregate):
    """See the module docstring. The store maps ``(key, start)`` to the aggregate and its
    timestamp (:class:`~aiostreams.processors.store_values.ValueAndTimestamp`)."""

    def __init__(self, store: str, windows: TimeWindows, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], late: LateRecords,
                 caching: bool = True, old_values: OldValues | None = None) -> None:
        super().__init__(store, start, adder, late, caching, old_values)
        self.windows = windows

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        self._open_cache(context, CachedWindows.flush_windows, indexed=False)

    async def process(self, record: AnyRecord) -> None:
        if self._skipped(record):
            return
        key, value, ctx = record.key, record.value, self.context
        ts = to_ms(record.timestamp)
        close_ms = await self._time.observe(ctx, ts) - self.windows.grace_ms
        store = window_access(ctx.store(self.store_name))
        get_now = store.get_now if store.reads_now else None  # no coroutine per window
        cached = self._cache
        for start_ms, end_ms in self.windows.windows_for(ts):
            if end_ms <= close_ms:
                self.dropped_late += 1
                self.late.record(ctx.node_name, record, task=ctx.task_id)
                continue
            start = start_ms / 1000
            if cached is not None:
                await self._update_cached(cached, store, record, start_ms, end_ms, ts)
                continue
            old = get_now(key, start) if get_now is not None else await store.get(key, start)
            if old is None:
                stamp, before = ts, self.start()
            else:
                stamp, before = max(ts, to_ms(old.timestamp)), old.value
            new = self.adder(key, value, before)
            if new is None:
                store.delete(key, start)
            else:
                store.put(key, start, ValueAndTimestamp(new, stamp / 1000))
            if self.forwards_updates:
                result = restamped(record, Windowed(key, start, end_ms / 1000), new, stamp)
                ctx.forward(result if not self.sends_old else
                            update(result, new, None if before is NO_VALUE else before))

    async def _update_cached(self, cached: CachedWindows, store: WindowAccess,
                             record: AnyRecord, start_ms: int, end_ms: int, ts: int) -> None:
        """One window's update into the record cache (keyed ``(key, start)``): nothing is
        written to the store or forwarded until the flush."""
        key = record.key
        start = start_ms / 1000
        entry = cached.held(key, start_ms)
        if entry is not None:
            old = entry.stored
        elif store.reads_now:
            old = store.get_now(key, start)
        else:
            old = await store.get(key, start)
        if old is None:
            stamp, new = ts, self.adder(key, record.value, self.start())
        else:
            stamp, new = max(ts, to_ms(old.timestamp)), self.adder(key, record.value, old.value)
        stored = None if new is None else ValueAndTimestamp(new, stamp / 1000)
        cached.put(key, start_ms, stored,
                   restamped(record, Windowed(key, start, end_ms / 1000), new, stamp))


class SessionAggregateProcessor(WindowedAggregate):
    """See the module docstring. The store maps ``(key, session end)`` to
    ``(session start, aggregate)``."""

    def __init__(self, store: str, windows: SessionWindows, retention_ms: int,
                 start: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any], late: LateRecords,
                 caching: bool = True, old_values: OldValues | None = None) -> None:
        super().__init__(store, start, adder, late, caching, old_values)
        self.windows = windows
        self.merger = merger
        self._store_time = StoreTime(retention_ms)

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        self._open_cache(context, CachedWindows.flush_sessions)

    async def process(self, record: AnyRecord) -> None:
        if self._skipped(record):
            return
        key, value, ctx = record.key, record.value, self.context
        gap = self.windows.gap_ms
        ts = to_ms(record.timestamp)
        close_ms = await self._time.observe(ctx, ts) - self.windows.grace_ms - gap
        store: WindowAccess = window_access(ctx.store(self.store_name))
        visible_from = max(ts - gap, self._store_time.earliest_visible())
        cached = self._cache
        sessions = (await cached.fetch(store, key, visible_from, _NO_END) if cached is not None
                    else [(to_ms(end), stored) for end, stored in
                          await store.fetch(key, visible_from / 1000, _NO_END)])
        found = [(end, to_ms(stored[0]), stored[1]) for end, stored in sessions
                 if to_ms(stored[0]) <= ts + gap]
        first = min([ts, *(s for _, s, _ in found)])
        last = max([ts, *(e for e, _, _ in found)])
        if last < close_ms:
            self.dropped_late += 1
            self.late.record(ctx.node_name, record, task=ctx.task_id)
            return
        aggregate = self.start()
        for _, _, old in found:
            aggregate = self.merger(key, aggregate, old)
        if (first, last) != (ts, ts):
            for end_ms, start_ms, merged in found:
                self._write(store, record, start_ms, end_ms, None, merged)
        aggregate = self.adder(key, value, aggregate)
        self._write(store, record, first, last, aggregate)

    def _write(self, store: WindowAccess, record: AnyRecord, start_ms: int, end_ms: int,
               aggregate: Any, old: Any = None) -> None:
        """Session ``[start_ms, end_ms]`` of the record's key now holds ``aggregate`` (None:
        it is gone): into the store and downstream, or, when cached, into the cache (the
        flush writes and forwards it; the result keeps the record's headers there, as
        Kafka's flushed records keep the context of their last write)."""
        key = record.key
        window = Windowed(key, start_ms / 1000, end_ms / 1000)
        self._store_time.advance(end_ms)
        cached = self._cache
        if cached is not None:
            if aggregate is None and store.get_now(key, end_ms / 1000) is None:
                cached.forget(key, end_ms)  # downstream never saw it: nothing to send
            else:
                stored = None if aggregate is None else (start_ms / 1000, aggregate)
                cached.put(key, end_ms, stored, restamped(record, window, aggregate, end_ms))
            return
        if aggregate is None:
            store.delete(key, end_ms / 1000)
        else:
            store.put(key, end_ms / 1000, (start_ms / 1000, aggregate))
        if self.forwards_updates:
            result = restamped(record, window, aggregate, end_ms, headers=())
            self.context.forward(update(result, aggregate, old) if self.sends_old else result)


class TimeWindowGetter(ValueGetter):
    """A time-windowed table's value of a :class:`Windowed` key: the update its store's
    record cache holds first (unless the reader asked for flushed values: see
    :func:`~aiostreams.processors.record_caching.read_flushed`), else the store's."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.stores = (store,)

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        if not isinstance(key, Windowed):
            return None
        store_key = self._store_key(key)
        found, stored = cached_stamped(ctx, self.store, store_key)
        if not found:
            stored = await window_access(ctx.store(self.store)).get(*store_key)
        return None if stored is None else self._value(stored, key)

    @staticmethod
    def _store_key(key: Windowed[Any]) -> tuple[Any, float]:
        return key.key, key.start

    @staticmethod
    def _value(stored: Any, key: Windowed[Any]) -> Any | None:
        return stored.value


class SessionGetter(TimeWindowGetter):
    """A session-windowed table's value of a :class:`Windowed` key (stored under its end,
    with its start)."""

    @staticmethod
    def _store_key(key: Windowed[Any]) -> tuple[Any, float]:
        return key.key, key.end

    @staticmethod
    def _value(stored: Any, key: Windowed[Any]) -> Any | None:
        return None if to_ms(stored[0]) != to_ms(key.start) else stored[1]
