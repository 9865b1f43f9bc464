"""A task's state stores, their overlays and their changelogs (Kafka's
``ProcessorStateManager``, for one task).

Each store of the sub-topology gets one :class:`~aiostreams.state.overlay.StoreOverlay`
(store-to-load forwarding of in-flight writes) and, when it is logged, one changelog
partition: the task's partition of its changelog topic. Processors see store *views*
over the overlays; a write lands in the current slot (``CURRENT_SLOT``) and its overlay.

Invariant: a slot's writes reach the store only through :meth:`TaskStores.apply` (at
retirement, in issue order) or leave the overlays through :meth:`TaskStores.withdraw` (a
failed attempt); each logged write is followed by exactly one changelog record. Under
exactly-once a store's file gets only what :meth:`TaskStores.seal` set apart, once the
transaction holding it committed (:meth:`TaskStores.flush_sealed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.slot import Slot
from aiostreams.state.base import StateStore, StoreContext
from aiostreams.state.changelog_mark import ChangelogMark, TransactionalStore
from aiostreams.state.overlay import StoreOverlay, view_for
from aiostreams.state.owner_epoch import NO_EPOCH, owner_headers
from aiostreams.state.record_cache import RecordCacheStore
from aiostreams.state.store_format import changelog_headers, store_format_of
from aiostreams.state.store_spec import StoreSpec
from aiostreams.types import Headers, OutgoingRecord, TopicPartition


class TaskStores:
    def __init__(self, specs: Sequence[StoreSpec], *, partition: int,
                 changelog_topics: Mapping[str, str]) -> None:
        self._partition = partition
        self.owner_epoch = NO_EPOCH
        self._format_of: dict[StoreOverlay, Headers] = {}  # each logged store's format header
        self.stores: dict[str, StateStore] = {}
        self._overlays: dict[str, StoreOverlay] = {}
        self._changelog_of: dict[StoreOverlay, str] = {}
        self._headers_of: dict[StoreOverlay, Headers] = {}  # of its changelog records
        self.caches: dict[str, tuple[RecordCacheStore, Any]] = {}  # store -> cache, view
        for spec in specs:
            store = spec.factory()
            self.stores[spec.name] = store
            overlay = StoreOverlay(store)
            self._overlays[spec.name] = overlay
            topic = changelog_topics.get(spec.name)
            if spec.logged and topic is not None:
                self._changelog_of[overlay] = topic
                self._format_of[overlay] = changelog_headers(store_format_of(store))
        self.set_owner_epoch(NO_EPOCH)

    def set_owner_epoch(self, epoch: int) -> None:
        """The group generation in which this task's owner took it: every changelog
        record it writes from now on carries it (see :mod:`~aiostreams.state.owner_epoch`)."""
        self.owner_epoch = epoch
        owner = owner_headers(epoch)
        self._headers_of = {o: (*fmt, *owner) for o, fmt in self._format_of.items()}

    @property
    def persistent(self) -> bool:
        """Whether any store keeps files (under the task's directory)."""
        return any(getattr(s, "persistent", False) for s in self.stores.values())

    def views(self, names: Sequence[str]) -> dict[str, Any]:
        """The views a processor connected to stores ``names`` reads and writes through."""
        return {name: view_for(self._overlays[name]) for name in names}

    def cache_for(self, name: str, max_bytes: int, on_full: Callable[[], None]
                  ) -> tuple[RecordCacheStore, Any]:
        """Store ``name``'s record cache in this task and its view (made on first call;
        in memory, never logged: see :mod:`~aiostreams.state.record_cache`)."""
        made = self.caches.get(name)
        if made is None:
            cache = RecordCacheStore(self.stores[name], max_bytes, on_full)
            made = self.caches[name] = (cache, view_for(StoreOverlay(cache)))
        return made

    def cache_view(self, name: str) -> Any | None:
        """The view of store ``name``'s record cache in this task, or None (uncached)."""
        made = self.caches.get(name)
        return None if made is None else made[1]

    @property
    def changelog_partitions(self) -> dict[str, TopicPartition]:
        """Store name → the changelog partition that backs it in this task."""
        by_overlay = {o: name for name, o in self._overlays.items()}
        return {by_overlay[o]: TopicPartition(t, self._partition)
                for o, t in self._changelog_of.items()}

    async def open(self, task_id: str, state_dir: Any) -> None:
        ctx = StoreContext(task_id, state_dir, self._partition)
        for store in self.stores.values():
            await store.open(ctx)

    async def flush(self) -> None:
        for store in self.stores.values():
            await store.flush()

    def seal(self) -> None:
        """Set apart every store's writes applied so far (at the commit's snapshot)."""
        for store in self.stores.values():
            if isinstance(store, TransactionalStore):
                store.seal()

    async def flush_sealed(self, ends: dict[TopicPartition, int]) -> None:
        """Write what :meth:`seal` set apart, each persistent logged store with its mark:
        its changelog partition's offset in ``ends`` and this owner's epoch (the highest of
        every record below it: earlier owners' were restored before this one wrote). A
        store that keeps no file just flushes."""
        changelogs = self.changelog_partitions
        for name, store in self.stores.items():
            if not isinstance(store, TransactionalStore):
                await store.flush()
                continue
            tp = changelogs.get(name)
            end = ends.get(tp) if tp is not None else None
            await store.flush_sealed(None if tp is None or end is None
                                     else ChangelogMark.at(tp, end, self.owner_epoch))

    async def close(self) -> None:
        for store in self.stores.values():
            await store.close()

    def apply(self, slot: Slot, released: list[OutgoingRecord | ExternalRecord]) -> None:
        """Apply the retiring ``slot``'s writes to the stores, appending their changelog
        records to ``released`` (after the slot's own outputs, as a serial run orders them),
        each marked with its store's format."""
        changelog_of = self._changelog_of
        headers = self._headers_of
        for overlay, key, value in slot.writes:
            changelog = changelog_of.get(overlay)
            if changelog is None:
                overlay.retire(slot, key, value)
                continue
            k, v = overlay.retire_logged(slot, key, value)  # one serialization for both
            released.append(OutgoingRecord(changelog, k, v, None,
                                           headers[overlay], self._partition))

    @staticmethod
    def withdraw(slot: Slot) -> None:
        """Take a failed attempt's writes back out of the overlays (the slot forgets them)."""
        for overlay, key, _ in slot.writes:
            overlay.withdraw(slot, key)
        slot.writes = ()
