"""Sliding windows: Kafka Streams' ``SlidingWindows`` and ``KStreamSlidingWindowAggregate``.

A sliding window is defined by the records, not by the epoch: every record at ``t``
creates its *left* window ``[t - d, t]`` (ending at it) and, when a later record of the key
falls within ``d`` after it, its *right* window ``[t + 1, t + 1 + d]``; a window holds the
aggregate of the key's records within it. ``d`` is the time difference. A record also
updates every existing window of its key that contains it. So each distinct set of
records that fit within ``d`` of one another gets exactly one window.

Per record ``(k, v)`` at ``t`` (null key or value: skipped), as Kafka 3.9 does with its
in-memory store (which iterates backwards):

1. the node's stream time advances; ``close = stream time - grace``; if ``t + d < close``
   the record is late: dropped, counted;
2. if ``t < d`` (an *early* record, whose left window would start before 0) it goes into
   the window ``[0, d]`` instead, with right windows handled as below (``_process_early``);
3. otherwise the key's windows starting in ``[t - 2d, t + 1]`` are read newest first:
   a window starting at ``t + 1`` is the record's right window (already there); one ending
   after ``t`` contains the record (updated; the newest is remembered as the source of the
   record's right window); one ending at ``t`` is its left window (updated; if it holds a
   record at ``t`` already, nothing is created); the first one ending before ``t`` gives the
   aggregate of the records before ``t`` (the previous record's time, and what the left
   window starts from) and ends the scan;
4. missing windows are created: the previous record's right window (if that record is
   within ``d`` before ``t``), the record's left window (from the earlier aggregate or the
   initial value), and its right window (a copy of the newest containing window's
   aggregate, when it holds a record after ``t``).

Every window written is forwarded as ``(Windowed(k, start, start + d), aggregate)`` stamped
with the latest timestamp among its records; a window already ending before ``close`` is
never updated. The window store keeps ``2d + grace`` and, like Kafka's in-memory window
store, drops a put (and hides a window) whose start is at or before its newest start minus
that retention; its time is kept in memory (:class:`StoreTime`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.processors.steps import NO_VALUE
from aiostreams.processors.store_values import (
    ValueAndTimestamp,
    WindowAccess,
    window_access,
)
from aiostreams.processors.table_changes import OldValues
from aiostreams.processors.table_changes import update as changed
from aiostreams.processors.window_caching import CachedWindows
from aiostreams.processors.windows import WindowedAggregate
from aiostreams.topology.processor import ProcessorContext
from aiostreams.topology.stream_time import StoreTime
from aiostreams.types import Record
from aiostreams.windows import (
    LateRecords,
    SlidingWindows,
    Windowed,
    restamped,
    to_ms,
)

AnyRecord = Record[Any, Any]
Stamped = ValueAndTimestamp


class SlidingWindowAggregateProcessor(WindowedAggregate):
    """Steps 1-4 of the module docstring. ``retention_ms``: the store's (default ``2d +
    grace``). ``keeps_edge``: the store keeps (and returns) a window starting exactly
    ``retention`` before its newest start, as Kafka's time-ordered store (used with emit
    on window close) does: one ms more than its other window stores."""

    forwards_updates = True
    """Whether each window written is forwarded (Kafka's default emit strategy)."""

    def __init__(self, store: str, windows: SlidingWindows, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], late: LateRecords, *,
                 retention_ms: int | None = None, keeps_edge: bool = False,
                 caching: bool = True, old_values: OldValues | None = None) -> None:
        super().__init__(store, start, adder, late, caching, old_values)
        self.d = windows.difference_ms
        self.grace_ms = windows.grace_ms
        retention = 2 * self.d + self.grace_ms if retention_ms is None else retention_ms
        self._store_time = StoreTime(retention + (1 if keeps_edge else 0))

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        self._open_cache(context, CachedWindows.flush_windows)

    async def process(self, record: AnyRecord) -> None:
        if self._skipped(record, null_values=True):
            return
        ctx = self.context
        ts = to_ms(record.timestamp)
        close = await self._time.observe(ctx, ts) - self.grace_ms
        if ts + self.d < close:
            self.dropped_late += 1
            self.late.record(ctx.node_name, record, task=ctx.task_id)
            return
        store = window_access(ctx.store(self.store_name))
        if ts < self.d:
            await self._process_early(store, record, ts, close)
            return
        starts: set[int] = set()
        left_agg: Stamped | None = None
        right_agg: Stamped | None = None
        left_created = right_created = False
        previous: int | None = None
        for start, stored in reversed(await self._fetch(store, record.key,
                                                        max(0, ts - 2 * self.d), ts + 1)):
            starts.add(start)
            end = start + self.d
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right_agg is None:
                    right_agg = stored
                self._update(store, record, start, stored, close)
            elif end == ts:
                left_created = True
                self._update(store, record, start, stored, close)
                if to_ms(stored.timestamp) < ts:
                    previous = to_ms(stored.timestamp)
                else:
                    return
            else:
                left_agg = stored
                previous = to_ms(stored.timestamp)
                break
        if previous is not None and previous + 1 not in starts and previous + 1 + self.d >= ts:
            self._update(store, record, previous + 1, Stamped(self.start(), ts / 1000), close)
        if not left_created:
            if previous is not None and left_agg is not None and ts - self.d <= previous:
                base = Stamped(left_agg.value, ts / 1000)
            else:
                base = Stamped(self.start(), ts / 1000)
            self._update(store, record, ts - self.d, base, close)
        if not right_created and right_agg is not None and to_ms(right_agg.timestamp) > ts:
            self._put_right_window(store, record, ts, right_agg)

    async def _process_early(self, store: WindowAccess, record: AnyRecord, ts: int,
                             close: int) -> None:
        """Step 2: ``0 <= t < d``; the window ``[0, d]`` stands for the left window."""
        combined: tuple[int, Stamped] | None = None
        right_agg: Stamped | None = None
        right_created = False
        starts: set[int] = set()
        previous: int | None = None
        for start, stored in await self._fetch(store, record.key, 0, ts + 1):
            starts.add(start)
            if start == 0:
                combined = (start, stored)
                if to_ms(stored.timestamp) < ts:
                    previous = to_ms(stored.timestamp)
            elif start <= ts:
                right_agg = stored
                self._update(store, record, start, stored, close)
            elif start == ts + 1:
                right_created = True
        if right_agg is None and combined is not None and to_ms(combined[1].timestamp) > ts:
            right_agg = combined[1]
        if not right_created and right_agg is not None and to_ms(right_agg.timestamp) > ts:
            self._put_right_window(store, record, ts, right_agg)
        if previous is not None and previous + 1 not in starts:
            self._update(store, record, previous + 1, Stamped(self.start(), ts / 1000), close)
        if combined is None:
            self._update(store, record, 0, Stamped(self.start(), ts / 1000), close)
        else:
            self._update(store, record, 0, combined[1], close)

    async def _fetch(self, store: WindowAccess, key: Any, time_from: int,
                     time_to: int) -> list[tuple[int, Stamped]]:
        visible = max(time_from, self._store_time.earliest_visible())
        if visible > time_to:
            return []
        if self._cache is not None:
            return await self._cache.fetch(store, key, visible, time_to)
        return [(to_ms(start), stored) for start, stored in
                await store.fetch(key, visible / 1000, time_to / 1000)]

    def _write(self, store: WindowAccess, record: AnyRecord, start: int,
               value: Stamped, old: Any = None) -> None:
        """Window ``start`` of the record's key now holds ``value``: into the store (unless
        expired: Kafka's in-memory window store drops the put) and forwarded (with ``old``
        when old values are sent: Kafka's ``Change(new, old)``), or, when cached, into the
        cache (the flush writes and forwards it, with the store's old value)."""
        key = record.key
        result = restamped(record, Windowed(key, start / 1000, (start + self.d) / 1000),
                           value.value, to_ms(value.timestamp))
        now = (result if not self.sends_old else
               changed(result, value.value, None if old is NO_VALUE else old))
        self._store_time.advance(start)
        expired = start <= self._store_time.ms - self._store_time.retention_ms
        cached = self._cache
        if cached is None:
            if not expired:
                store.put(key, start / 1000, value)
            if self.forwards_updates:
                self.context.forward(now)
            return
        if not expired:
            cached.put(key, start, value, result)
            return
        # Not stored, still forwarded (as uncached): a window held from before it expired
        # keeps its stored value and forwards this update at the flush (so the update is
        # still its last); otherwise it goes now, as no later write of it can follow.
        held = cached.held(key, start)
        if held is None:
            self.context.forward(now)
        else:
            cached.put(key, start, held.stored, result)

    def _update(self, store: WindowAccess, record: AnyRecord, start: int, held: Stamped,
                close: int) -> None:
        """Kafka's ``updateWindowAndForward``: add the record to the window ``start``."""
        if start + self.d < close:
            return
        old = held.value
        new = self.adder(record.key, record.value, old)
        stamp = (to_ms(record.timestamp) if old is None
                 else max(to_ms(record.timestamp), to_ms(held.timestamp)))
        self._write(store, record, start, Stamped(new, stamp / 1000), old)

    def _put_right_window(self, store: WindowAccess, record: AnyRecord, ts: int,
                          agg: Stamped) -> None:
        self._write(store, record, ts + 1, agg)


__all__ = ["SlidingWindowAggregateProcessor"]
