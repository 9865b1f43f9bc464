"""How the DSL's stateful processors use a record cache (see
:mod:`aiostreams.state.record_cache` and :mod:`aiostreams.engine.cache_flush`): open it at
init, read it before the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.topology.processor import ProcessorContext

__all__ = ["cached_stamped", "open_record_cache"]


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


def cached_stamped(ctx: ProcessorContext, store: str, key: Any) -> tuple[bool, Any]:
    """(True, what the store will hold - a ``ValueAndTimestamp`` or None for a delete)
    when ``store``'s record cache holds an update of ``key``; else (False, None)."""
    find = getattr(ctx, "cache_view", None)
    view = find(store) if find is not None else None
    if view is None:
        return False, None
    entry = view.get_now(key)
    if entry is None:
        return False, None
    return True, entry.stored
