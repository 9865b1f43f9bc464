"""How the DSL's stateful processors use a record cache (see
:mod:`aiostreams.state.record_cache` and :mod:`aiostreams.engine.cache_flush`): open it at
init, read it before the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.topology.processor import ProcessorContext

__all__ = ["READS_FLUSHED", "cached_stamped", "open_record_cache", "read_flushed"]


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
