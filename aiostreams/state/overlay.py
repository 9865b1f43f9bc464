"""Store-to-load forwarding: the buffered writes of in-flight records, visible to reads.

Each store of a task has one :class:`StoreOverlay`. A write by an executing record goes to
its slot *and* to the overlay; a read consults the overlay first (the newest buffered write
of that key wins) and the store only when no in-flight record has written the key. At
retire the write leaves the overlay and is applied to the store; when an attempt fails its
writes are withdrawn. With ``ordering="key"``, same-key records execute one after another,
so a read sees exactly what the serial run would have seen: per-key read-modify-write is
correct with thousands of records in flight and no locks.

Invariant: an overlay entry exists exactly while its slot is in flight and has not
withdrawn it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from aiostreams.state.base import TOMBSTONE, StateStore

if TYPE_CHECKING:
    from aiostreams.engine.reorder_buffer import Slot

CURRENT_SLOT: ContextVar[Slot] = ContextVar("aiostreams_current_slot")
"""The slot whose processor chain is running in this context (task or inline run)."""


class StoreOverlay:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._pending: dict[Any, list[tuple[Slot, Any]]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def read(self, key: Any) -> tuple[bool, Any]:
        entries = self._pending.get(key)
        if entries:
            value = entries[-1][1]
            return True, (None if value is TOMBSTONE else value)
        return False, None

    def write(self, slot: Slot, key: Any, value: Any) -> None:
        self._pending.setdefault(key, []).append((slot, value))
        slot.writes.append((self, key, value))

    def retire(self, slot: Slot, key: Any, value: Any) -> None:
        """Apply ``slot``'s write to the store and drop it from the overlay."""
        self._drop(slot, key)
        self.store.apply(key, value)

    def withdraw(self, slot: Slot, key: Any) -> None:
        """Forget ``slot``'s write of ``key`` (its attempt failed)."""
        self._drop(slot, key)

    def _drop(self, slot: Slot, key: Any) -> None:
        entries = self._pending[key]
        for i, (owner, _) in enumerate(entries):
            if owner is slot:
                del entries[i]
                break
        else:
            raise AssertionError(f"{slot!r} has no buffered write of {key!r}")
        if not entries:
            del self._pending[key]

    def pending_items(self) -> dict[Any, Any]:
        return {k: v[-1][1] for k, v in self._pending.items()}


class KeyValueStoreView:
    """What ``ctx.store(name)`` returns for a key-value store: reads see buffered writes of
    earlier records; writes are buffered in the current record's slot until it retires."""

    def __init__(self, overlay: StoreOverlay) -> None:
        self._overlay = overlay

    @property
    def name(self) -> str:
        return self._overlay.store.name

    async def get(self, key: Any) -> Any | None:
        found, value = self._overlay.read(key)
        if found:
            return value
        return await self._overlay.store.get(key)

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            raise ValueError(
                f"store {self.name!r}: put(key, None) is ambiguous; call delete(key)"
            )
        self._overlay.write(CURRENT_SLOT.get(), key, value)

    def delete(self, key: Any) -> None:
        self._overlay.write(CURRENT_SLOT.get(), key, TOMBSTONE)

    async def range(self, start: Any | None = None,
                    end: Any | None = None) -> AsyncIterator[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` in key order, buffered writes included."""
        pending = {
            k: v for k, v in self._overlay.pending_items().items()
            if (start is None or k >= start) and (end is None or k <= end)
        }
        merged: dict[Any, Any] = {}
        async for k, v in self._overlay.store.range(start, end):
            merged[k] = v
        merged.update(pending)
        for k in sorted(merged):
            v = merged[k]
            if v is not TOMBSTONE:
                yield k, v

    async def all(self) -> AsyncIterator[tuple[Any, Any]]:
        async for item in self.range(None, None):
            yield item

    async def approximate_num_entries(self) -> int:
        return await self._overlay.store.approximate_num_entries()


def view_for(overlay: StoreOverlay) -> KeyValueStoreView:
    """The processor-facing view of a store."""
    return KeyValueStoreView(overlay)
