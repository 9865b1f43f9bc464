"""What ``ctx.store(name)`` returns for a versioned store: as-of reads that see the
versions written by earlier in-flight records, and puts that answer as Kafka Streams'
``VersionedKeyValueStore.put`` does.

A put is buffered in the current record's slot (through the store's overlay, keyed
``(key, timestamp)``) and applied at retire, like every write. Reads merge the store's
applied versions of the key with the buffered ones (a buffered version at the same
timestamp wins), and the stream time they compare against is the store's applied
stream time raised by every buffered version (:class:`InFlightTimes`), so a read sees
exactly what the serial run's store would hold at that point - provided the records that
write and read the store run in issue order (the DSL's versioned processors await
``wait_for_earlier_records``: the store's stream time spans keys).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.state.base import TOMBSTONE
from aiostreams.state.versioned import (
    DELETED,
    InFlightTimes,
    VersionedKeyValueStore,
    VersionedRecord,
    find_version,
)
from aiostreams.state.window import window_start_ms


class StoreOverlay(Protocol):
    """What the view uses of :class:`aiostreams.state.overlay.StoreOverlay` (which makes
    the view; naming the class here would make an import circle)."""

    store: Any

    def read(self, key: Any) -> tuple[bool, Any]: ...

    def write(self, slot: Any, key: Any, value: Any) -> None: ...

    def pending_windows(self, key: Any) -> list[tuple[float, Any]]: ...

__all__ = ["VersionedStoreView"]


class VersionedStoreView:
    """Versioned reads and writes for one record (see the module docstring). Times are
    float seconds (kept to the millisecond)."""

    def __init__(self, overlay: StoreOverlay) -> None:
        store = overlay.store
        if not isinstance(store, VersionedKeyValueStore):
            raise TypeError(f"store {store.name!r} is not a versioned store")
        self._overlay = overlay
        self._store = store
        self._in_flight: InFlightTimes = store.in_flight

    @property
    def name(self) -> str:
        return self._store.name

    @property
    def history_retention(self) -> float:
        return self._store.history_retention_ms / 1000

    def observed_stream_time_ms(self) -> int:
        """The largest timestamp put so far, in-flight puts of earlier records included."""
        return self._in_flight.max_ms(self._overlay, self._store.observed_ms)

    async def _versions(self, key: Any) -> list[tuple[int, Any]]:
        # The buffered versions are taken before the store is read: an earlier record may
        # retire while the read awaits I/O, its versions leaving the overlay for a store
        # whose read has already passed them, and would be seen by neither (as in
        # WindowStoreView.fetch).
        buffered = self._overlay.pending_windows(key)
        merged = dict(await self._store.versions(key))
        for start, value in buffered:
            merged[window_start_ms(start)] = DELETED if value is TOMBSTONE else value
        return sorted(merged.items(), key=lambda item: item[0])

    async def get(self, key: Any, as_of: float | None = None) -> VersionedRecord | None:
        """The newest version of ``key`` (``as_of`` None), or the one valid at ``as_of``
        seconds; None when there is none, it is a tombstone, or ``as_of`` is older than the
        history retention and the newest version began after it.
        Cancellation: returns nothing, changes nothing."""
        if key is None:
            raise ValueError(f"store {self.name!r}: a key cannot be None")
        versions = await self._versions(key)
        if as_of is None:
            return _newest(versions)
        as_of_ms = window_start_ms(as_of)
        if as_of_ms < self.observed_stream_time_ms() - self._store.history_retention_ms:
            # Past the history retention only the newest version is kept, for ever.
            newest = _newest(versions)
            return newest if newest is not None and versions[-1][0] <= as_of_ms else None
        found = find_version(versions, as_of_ms)
        if found is None or found[1] is DELETED:
            return None
        valid_from, value, valid_to = found
        return VersionedRecord(value, valid_from / 1000,
                               None if valid_to is None else valid_to / 1000)

    async def put(self, key: Any, value: Any, timestamp: float) -> float | None:
        """Buffer the version ``key = value`` from ``timestamp`` (``value`` None: a
        tombstone). Returns its ``valid_to`` in seconds: ``math.inf`` when it is the newest
        version, the next version's timestamp when it arrived out of order, or None when it
        was refused for being older than the stream time minus the history retention (then
        nothing is written). Cancellation: writes nothing if cancelled."""
        if key is None:
            raise ValueError(f"store {self.name!r}: a key cannot be None")
        ms = window_start_ms(timestamp)
        if ms < self.observed_stream_time_ms() - self._store.history_retention_ms:
            return None
        later = [v for v, _ in await self._versions(key) if v > ms]
        start = ms / 1000
        self._overlay.write(CURRENT_SLOT.get(), (key, start),
                            TOMBSTONE if value is None else value)
        self._in_flight.note(ms, key, start)
        return later[0] / 1000 if later else math.inf

    async def delete(self, key: Any, timestamp: float) -> VersionedRecord | None:
        """A tombstone version from ``timestamp``; returns the version it ends (valid at
        ``timestamp`` before), or None (also when refused as too old)."""
        before = await self.get(key, timestamp)
        return before if await self.put(key, None, timestamp) is not None else None

    async def approximate_num_entries(self) -> int:
        return await self._store.approximate_num_entries()


def _newest(versions: list[tuple[int, Any]]) -> VersionedRecord | None:
    if not versions or versions[-1][1] is DELETED:
        return None
    ms, value = versions[-1]
    return VersionedRecord(value, ms / 1000, None)
