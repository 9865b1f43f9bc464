"""How the windowed aggregates use a record cache (see :mod:`aiostreams.state.record_cache`
and :mod:`aiostreams.engine.cache_flush`): the cache keys are the window store's,
``(key, time)`` with ``time`` a window's start (time and sliding windows) or a session's
end, and the flush writes each held window to the store and forwards it, as Kafka
Streams' ``CachingWindowStore`` and ``CachingSessionStore`` do.

**Range reads.** The session and sliding-window aggregates find a key's windows by a
range fetch, not a point read, so :meth:`CachedWindows.fetch` merges the store's windows
with the ones the cache holds (a held delete hides the store's). To find a key's held
windows without walking the whole cache, the helper keeps an index ``key -> times`` (sorted,
so a fetch reads only the times in its range) of what it put; the index may name a time
whose write was withdrawn (a failed attempt), and the cache is asked for each, so it only
needs to be a superset. It is cleared by the flush, which runs when nothing is in flight.

**Visibility.** The processors hide windows older than their store's retention by their
own :class:`~aiostreams.topology.stream_time.StoreTime`, which they advance as they write,
cache or no cache. So the cache never shows a window the uncached run would not find: the
result does not depend on when flushes happen. (Kafka Streams' in-memory stores advance
their time when the cache flushes into them, and its cache answers for expired windows
until then (and keeps flushed entries): a record about the grace period or more behind
stream time can merge with a session that the uncached run has already forgotten. See the
deviations in docs/guides/windows-joins.md.)

**Sessions.** The store keeps one session per ``(key, end)``; Kafka Streams keys sessions
by ``(key, end, start)``, so a merge that keeps a session's end and moves its start
removes one key and writes another. The cache holds only the newest state of
``(key, end)``, and the flush restores Kafka's view: when the store holds a session at that
end that the held state removes or replaces by one with another start, that session's
tombstone is forwarded first (stamped with its end, as Kafka's flush stamps every session
update); a held delete of a session the store never held (made and merged away between
two flushes) forwards nothing.

**Old values.** When a table downstream asks for them (``sends_old``: a re-grouping, a
suppression, a join), each flushed update carries the value the store held for that window
before the flush (None if none), as Kafka's caching stores send ``Change(new, old)``; a
session's tombstone carries the session's aggregate.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable
from typing import Any

from aiostreams.processors.record_caching import open_record_cache
from aiostreams.processors.store_values import WindowAccess, window_access
from aiostreams.processors.table_changes import update
from aiostreams.state.key_identity import key_identity
from aiostreams.state.record_cache import CacheEntry
from aiostreams.topology.processor import ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import Windowed, restamped, to_ms

__all__ = ["CachedWindows"]


class CachedWindows:
    """Window store ``store`` behind its record cache (see the module docstring).
    ``indexed``: keep the ``key -> times`` index that :meth:`fetch` needs (an aggregate
    that only reads single windows, the time-window one, leaves it off)."""

    def __init__(self, store: str, *, indexed: bool = True, sends_old: bool = False) -> None:
        self.store = store
        self.indexed = indexed
        self.sends_old = sends_old
        self.cache: Any = None  # (cache store, its view) once opened with caching on
        self._held: dict[Hashable, list[int]] = {}  # key -> its held times, sorted

    @classmethod
    def open_for(cls, ctx: ProcessorContext, store: str,
                 flush: Callable[[CachedWindows, ProcessorContext], None], *,
                 indexed: bool = True, sends_old: bool = False) -> CachedWindows | None:
        """Store ``store``'s cache, opened at a processor's init with ``flush`` (e.g.
        :meth:`flush_sessions`) as its flush; None when it has none (see :meth:`open`)."""
        cached = cls(store, indexed=indexed, sends_old=sends_old)
        return cached if cached.open(ctx, lambda: flush(cached, ctx)) else None

    def open(self, ctx: ProcessorContext, flush: Callable[[], None]) -> bool:
        """Open the cache at the processor's init; False (and nothing opened) when caching
        is off or the store cannot be read without awaiting (the flush reads it)."""
        if window_access(ctx.store(self.store)).reads_now:
            self.cache = open_record_cache(ctx, self.store, flush)
        return self.cache is not None

    def _identity(self, key: Any) -> Hashable:
        return key_identity(key, lambda k: bytes(self.cache[0].sort_key((k, 0.0))))

    def held(self, key: Any, time_ms: int) -> CacheEntry | None:
        """The update the cache (or an earlier record in flight) holds for the window."""
        entry: CacheEntry | None = self.cache[1].get_now((key, time_ms / 1000))
        return entry

    def put(self, key: Any, time_ms: int, stored: Any, record: Record[Any, Any]) -> None:
        """Hold ``stored`` (None: a delete) for window ``(key, time_ms)``; ``record`` is
        what the flush forwards for it."""
        self.cache[1].put((key, time_ms / 1000), CacheEntry(stored, record))
        if self.indexed:
            times = self._held.setdefault(self._identity(key), [])
            at = bisect_left(times, time_ms)
            if at == len(times) or times[at] != time_ms:
                times.insert(at, time_ms)

    def forget(self, key: Any, time_ms: int) -> None:
        """Hold nothing for window ``(key, time_ms)`` any more: for a delete of a window the
        store does not hold, which would only be skipped by the flush (a session extended
        record by record leaves one such delete per record otherwise)."""
        self.cache[1].delete((key, time_ms / 1000))

    async def fetch(self, store: WindowAccess, key: Any, time_from_ms: int,
                    time_to_ms: float) -> list[tuple[int, Any]]:
        """``(time ms, stored)`` of ``key``'s windows with ``time_from_ms <= time <=
        time_to_ms``, in time order: the store's, with the held updates in their place."""
        assert self.indexed, f"{self.store}: a range fetch needs the held-window index"
        found = {to_ms(time): stored for time, stored in
                 await store.fetch(key, time_from_ms / 1000, time_to_ms / 1000)}
        view = self.cache[1]
        times = self._held.get(self._identity(key), [])
        for time_ms in times[bisect_left(times, time_from_ms):
                             bisect_right(times, time_to_ms)]:
            entry: CacheEntry | None = view.get_now((key, time_ms / 1000))
            if entry is None:
                continue
            if entry.stored is None:
                found.pop(time_ms, None)
            else:
                found[time_ms] = entry.stored
        return sorted(found.items(), key=lambda item: item[0])

    def _drain(self) -> list[tuple[Any, CacheEntry]]:
        """The held windows in the order of their last updates, each taken out of the cache."""
        cache, view = self.cache
        dirty: list[tuple[Any, CacheEntry]] = cache.dirty()
        for key, _ in dirty:
            view.delete(key)
        self._held.clear()
        return dirty

    def flush_windows(self, ctx: ProcessorContext) -> None:
        """Write each held time or sliding window to the store and forward its newest
        update. A delete of a window the store never held forwards nothing (Kafka's caching
        window store forwards only when the new or the old value is there)."""
        store = window_access(ctx.store(self.store))
        for (key, start), entry in self._drain():
            # the store's value: for a delete (skipped if there is none) or an old value
            old = (store.get_now(key, start) if entry.stored is None or self.sends_old
                   else None)
            if entry.stored is None:
                store.delete(key, start)
                if old is None:
                    continue
            else:
                store.put(key, start, entry.stored)
            record = entry.record
            if self.sends_old:
                record = update(record, record.value, None if old is None else old.value)
            ctx.forward(record)

    def flush_sessions(self, ctx: ProcessorContext) -> None:
        """Write each held session state to the store and forward it (see the module
        docstring): first the tombstone of the session the store held at that end, when
        the held state removes it or puts one with another start there."""
        store = window_access(ctx.store(self.store))
        for (key, end), entry in self._drain():
            old = store.get_now(key, end)
            new = entry.stored
            moved = old is not None and (new is None or to_ms(old[0]) != to_ms(new[0]))
            if old is not None and moved:
                gone = restamped(entry.record, Windowed(key, old[0], end), None, to_ms(end))
                ctx.forward(update(gone, None, old[1]) if self.sends_old else gone)
            if new is None:
                if old is not None:
                    store.delete(key, end)
                continue
            store.put(key, end, new)
            record = entry.record
            if self.sends_old:  # the store's value of this very session, if it held it
                record = update(record, record.value, None if old is None or moved else old[1])
            ctx.forward(record)
