"""What the test driver's ``store(name)`` answers: a snapshot of each store's applied state
over every task, taken at the end of each ``process_all``.

A snapshot holds what a store's retired records wrote - its own contents, read through its
record cache when it has one (``cache_max_bytes``; as Kafka Streams' caching store is read:
the cache's newest updates win, and a cached delete removes the key) - never the writes of
records still in flight. Values are plain (:func:`~aiostreams.processors.store_values.plain_value`);
a key that cannot be a dictionary key (a JSON list) is kept by its bytes
(:class:`~aiostreams.state.key_identity.EncodedKey`). Window stores are keyed by
``(key, window_start)``.

Invariant: a snapshot changes only when :meth:`StoreSnapshots.take` runs again; what
:meth:`StoreSnapshots.store` returns is a copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiostreams.engine.task import StreamTask
from aiostreams.processors.store_values import plain_value
from aiostreams.state.base import StateStore
from aiostreams.state.key_identity import EncodedKey

__all__ = ["StoreSnapshots"]


class StoreSnapshots:
    """The stores of a driver's tasks as of the last :meth:`take`."""

    def __init__(self) -> None:
        self._snapshots: dict[str, dict[Any, Any]] = {}

    async def take(self, tasks: Iterable[StreamTask]) -> None:
        """Snapshot every store of ``tasks`` (one store name over all its tasks)."""
        snapshots: dict[str, dict[Any, Any]] = {}
        for task in tasks:
            for name, store in task.stores.items():
                contents = snapshots.setdefault(name, {})
                async for key, value in store.range(None, None):
                    contents[_hashable(store, key)] = plain_value(value)
                # what the store's record cache holds is read through it (KS' caching
                # store): its newest updates, deletes included
                for key, entry in task.cached_entries(name):
                    if entry.stored is None:
                        contents.pop(_hashable(store, key), None)
                    else:
                        contents[_hashable(store, key)] = plain_value(entry.stored)
        self._snapshots = snapshots

    def store(self, name: str, tasks: Iterable[StreamTask]) -> dict[Any, Any]:
        """A copy of store ``name``'s snapshot; KeyError naming the stores ``tasks`` have
        when there is none."""
        if name not in self._snapshots:
            known = sorted({s for t in tasks for s in t.stores})
            raise KeyError(f"no store named {name!r}; the topology's stores: {known}")
        return dict(self._snapshots[name])


def _hashable(store: StateStore, key: Any) -> Any:
    """``key`` as a dictionary key: itself, or (unhashable: a JSON list) its bytes."""
    try:
        hash(key)
    except TypeError:
        return EncodedKey(store.sort_key(key))
    return key
