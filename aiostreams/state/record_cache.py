"""The record cache of one materialized store in one task (Kafka Streams' ``NamedCache``,
KIP-63): the newest update of each key, held back from the store and from downstream until
a flush.

It is a store of its own, in memory and never logged, written through the task's overlay
like any store: a processor's write of an entry is buffered in its slot and reaches the
cache when the record *retires* (so a retried or dead-lettered record leaves no entry, and
the cache holds exactly the retired records' updates, in issue order). A processor reads
the cache before its store; the flush (:mod:`aiostreams.engine.cache_flush`) writes each
entry to the store (and so its changelog) and forwards it downstream, in the order the
entries were last updated (Kafka Streams' ``NamedCache`` moves a re-written key to the end
of its dirty keys), from a barrier slot of the reorder buffer.

Only dirty entries are held: a flush empties the cache, so reads after it go to the store.
An eviction therefore flushes every entry, as Kafka Streams' ``NamedCache.evict`` does for a
dirty eldest entry (it flushes the whole namespace).

Size: an entry costs its key's bytes + its stored value's bytes (both from the backing
store's serdes, computed once, when the entry becomes dirty) + :data:`ENTRY_OVERHEAD`. When
the total passes ``max_bytes``, ``on_full`` is called once (the task queues a flush barrier
after the record being retired); the budget is soft by what retires before that barrier.

Invariants: ``bytes`` is the sum of the held entries' sizes; entries are kept in the order
of their last update (a dict keeps insertion order; an update of a held key moves it to the
end).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiostreams.state.base import TOMBSTONE, StoreContext, StoreKind, StoreState
from aiostreams.state.key_identity import EncodedKey, key_identity
from aiostreams.types import Record

__all__ = ["ENTRY_OVERHEAD", "CacheEntry", "RecordCacheStore"]

_EXACT = frozenset({str, bytes, int})

ENTRY_OVERHEAD = 120
"""Bytes counted per entry beyond its key and value bytes: an estimate of its Python
objects (the entry, the dict slot, the record it keeps for its context)."""


@dataclass(slots=True)
class CacheEntry:
    """A dirty key's newest update: ``stored`` is what the store will hold (None: delete),
    ``record`` the update's record (its context - topic, offset, headers - goes downstream
    with the flushed update); ``size`` is set by the cache."""

    stored: Any
    record: Record[Any, Any]
    size: int = 0


class RecordCacheStore:
    """See the module docstring. ``backing`` is the store it caches (its key bytes and
    value serde size the entries); keys are the backing store's keys (``(key, start)`` for
    a window store)."""

    kind = StoreKind.KEY_VALUE
    persistent = False

    def __init__(self, backing: Any, max_bytes: int, on_full: Callable[[], None]) -> None:
        if max_bytes <= 0:
            raise ValueError(f"a record cache needs max_bytes > 0, got {max_bytes}")
        self.name = f"{backing.name}-cache"
        self.backing = backing
        self.max_bytes = max_bytes
        self.on_full = on_full
        self.bytes = 0
        self.state = StoreState.CREATED
        self.fresh = True
        self._entries: dict[Any, CacheEntry] = {}
        self._keys: dict[Any, Any] = {}  # identity -> original key, for EncodedKey ones
        self._full_told = False
        self._sort_keys: dict[tuple[Any, float], bytes] = {}  # see sort_key

    def __len__(self) -> int:
        return len(self._entries)

    def sort_key(self, key: Any) -> bytes:
        """The backing store's bytes of ``key``. A window key ``(key, start)`` whose key is
        exactly a str, bytes or int is encoded once and remembered (the overlay asks for it
        on every read, write and retirement: five encodings a window update otherwise);
        other keys are encoded each time, since Python's ``==`` may merge keys whose bytes
        differ (``1`` and ``True``). The memo is dropped whenever it outgrows the cache."""
        if type(key) is tuple and len(key) == 2 and type(key[0]) in _EXACT \
                and type(key[1]) is float:
            memo = self._sort_keys
            data = memo.get(key)
            if data is None:
                if len(memo) > 2 * len(self._entries) + 10_000:
                    memo.clear()
                data = memo[key] = self.backing.sort_key(key)
            return data
        encoded: bytes = self.backing.sort_key(key)
        return encoded

    def _identity(self, key: Any) -> Any:
        return key_identity(key, self.sort_key)

    async def open(self, context: StoreContext) -> None:
        self.state = StoreState.OPEN

    def get_now(self, key: Any) -> CacheEntry | None:
        return self._entries.get(self._identity(key))

    async def get(self, key: Any) -> CacheEntry | None:
        return self.get_now(key)

    def apply(self, key: Any, value: Any) -> None:
        ident = self._identity(key)
        entries = self._entries
        if value is TOMBSTONE:
            gone = entries.pop(ident, None)
            if gone is not None:
                self.bytes -= gone.size
                self._keys.pop(ident, None)
            if not entries:
                self._full_told = False
            return
        assert isinstance(value, CacheEntry), f"{self.name}: not a cache entry: {value!r}"
        held = entries.pop(ident, None)
        if held is not None:  # to the end: entries flush in the order of their last update
            value.size = held.size  # sized once, when it became dirty
            entries[ident] = value
            return
        value.size = self._size(key, value)
        entries[ident] = value
        if ident is not key:
            self._keys[ident] = key
        self.bytes += value.size
        if self.bytes > self.max_bytes and not self._full_told:
            self._full_told = True
            self.on_full()

    def _size(self, key: Any, entry: CacheEntry) -> int:
        backing = self.backing
        value_bytes = (0 if entry.stored is None
                       else len(backing.value_serde.serialize(backing.name, entry.stored) or b""))
        return len(self.sort_key(key)) + value_bytes + ENTRY_OVERHEAD

    def dirty(self) -> list[tuple[Any, CacheEntry]]:
        """The held entries (key, entry), in the order of their last update."""
        keys = self._keys
        return [(keys[ident] if isinstance(ident, EncodedKey) else ident, entry)
                for ident, entry in self._entries.items()]

    def changelog_record(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        raise AssertionError(f"{self.name}: a record cache is never logged")

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        raise AssertionError(f"{self.name}: a record cache is never restored")

    async def range(self, start: Any | None, end: Any | None
                    ) -> AsyncIterator[tuple[Any, Any]]:
        for key, entry in self.dirty():
            yield key, entry

    async def approximate_num_entries(self) -> int:
        return len(self._entries)

    async def flush(self) -> None:
        return None

    async def wipe(self) -> None:
        self._entries.clear()
        self._keys.clear()
        self.bytes = 0

    async def close(self) -> None:
        self.state = StoreState.CLOSED
