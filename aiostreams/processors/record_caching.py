"""How the DSL's stateful processors use a record cache (see
:mod:`aiostreams.state.record_cache` and :mod:`aiostreams.engine.cache_flush`): open it at
init, read it before the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.processors.store_values import ValueAndTimestamp
from aiostreams.processors.table_changes import NO_TIMESTAMP, read_stamped_now, update
from aiostreams.state.record_cache import CacheEntry
from aiostreams.topology.processor import ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import to_ms

__all__ = ["READS_FLUSHED", "CachedTable", "cached_stamped", "open_record_cache",
           "read_flushed"]


def open_record_cache(ctx: ProcessorContext, store: str,
                      flush: Callable[[], None]) -> tuple[Any, Any] | None:
    """``store``'s record cache and its view, ``flush`` registered as the node's flush;
    None when caching is off (``cache_max_bytes`` 0) or the context has no caches (a
    context other than the engine's)."""
    opener = getattr(ctx, "record_cache", None)
    if opener is None:
        return None
    made: tuple[Any, Any] | None = opener(store, flush)
    return made


READS_FLUSHED = "reads_flushed"
"""The attribute a processor sets on its own context when it must read the *flushed*
values of cached stores (what downstream has seen), not the cache: a table-table join,
whose update's old result must be the result downstream saw before (see
:func:`read_flushed`)."""


def read_flushed(ctx: ProcessorContext) -> None:
    """Make the getters ``ctx``'s processor calls read cached stores' flushed values: a
    table-table join computes each update's old result from the other side's value, and
    downstream (a re-grouped aggregate's subtractor) must see the result it saw before.
    Reading the cache there would join with an update not yet sent downstream, and the
    flush would then add it a second time."""
    setattr(ctx, READS_FLUSHED, True)


def cached_stamped(ctx: ProcessorContext, store: str, key: Any) -> tuple[bool, Any]:
    """(True, what the store will hold - a ``ValueAndTimestamp`` or None for a delete)
    when ``store``'s record cache holds an update of ``key`` and ``ctx`` reads through
    caches; else (False, None)."""
    if getattr(ctx, READS_FLUSHED, False):
        return False, None
    find = getattr(ctx, "cache_view", None)
    view = find(store) if find is not None else None
    if view is None:
        return False, None
    entry = view.get_now(key)
    if entry is None:
        return False, None
    return True, entry.stored


class CachedTable:
    """A DSL processor's stamped key-value store behind its record cache (when it has one):
    :meth:`read` the cache before the store, :meth:`write` to the cache only, and
    :meth:`flush` each dirty key to the store and downstream with the value the store held
    before it. Used by the grouped-stream and grouped-table aggregates."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.cache: Any = None  # (cache store, its view) once opened with caching on

    def open(self, ctx: ProcessorContext, flush: Callable[[], None]) -> None:
        """Open the cache at the processor's init (nothing when caching is off or the
        store cannot be read without awaiting)."""
        if getattr(ctx.store(self.store), "reads_now", False):
            self.cache = open_record_cache(ctx, self.store, flush)

    def read(self, ctx: ProcessorContext, key: Any) -> tuple[Any, int]:
        """``key``'s newest value and timestamp (ms; ``NO_TIMESTAMP`` when none)."""
        entry: CacheEntry | None = self.cache[1].get_now(key)
        if entry is None:
            return read_stamped_now(ctx, self.store, key)
        if entry.stored is None:
            return None, NO_TIMESTAMP
        return entry.stored.value, to_ms(entry.stored.timestamp)

    def write(self, key: Any, new: Any, stamp_ms: int, record: Record[Any, Any]) -> None:
        """Hold ``new`` (None: a delete) for ``key``, stamped ``stamp_ms``; ``record``'s
        context goes downstream with it."""
        stored = None if new is None else ValueAndTimestamp(new, stamp_ms / 1000)
        self.cache[1].put(key, CacheEntry(stored, update(record, new, None, stamp_ms / 1000)))

    def flush(self, ctx: ProcessorContext, old_values: bool = True) -> None:
        """Write each dirty key to the store and forward it, in the order of the keys' last
        updates, with the store's old value (``old_values`` False: without). A delete of a
        key the store never held forwards nothing (Kafka's caching stores forward only when
        the new or the old value is there)."""
        cache, view = self.cache
        store = ctx.store(self.store)
        for key, entry in cache.dirty():
            old = read_stamped_now(ctx, self.store, key)[0]
            stored = entry.stored
            view.delete(key)
            if stored is None:
                store.delete(key)
                if old is None:
                    continue
            else:
                store.put(key, stored)
            ctx.forward(update(entry.record, None if stored is None else stored.value,
                               old if old_values else None))
