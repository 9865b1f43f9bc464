"""A versioned key-value store (Kafka's KIP-889): every write is a *version* of its key,
valid from its timestamp until the next version's, and reads may ask "as of" a time.

The model, in milliseconds (the API takes float seconds):

* a key's versions are ``(valid_from, value)`` sorted by ``valid_from``; a delete is a
  version whose value is absent (a tombstone). A version is valid until the next one's
  ``valid_from`` (its ``valid_to``), the newest one for ever;
* a put at a timestamp some version already has replaces that version's value;
* the store's *observed stream time* is the largest timestamp ever put;
* ``history_retention`` bounds what ``get(key, as_of)`` answers: a read older than
  ``observed stream time - history_retention`` sees only the newest version (when it is
  not a tombstone and began at or before ``as_of``), else None - Kafka Streams'
  ``RocksDBVersionedStore``, which keeps the newest version of a key for ever whatever its
  age and answers older reads "for predictability" with None;
* a put older than ``observed stream time - history_retention`` (the store's grace
  period, which Kafka Streams sets equal to the history retention) is refused.

What is kept: the versions of every key, minus those that no read can see any more
(``valid_to <= observed stream time - history_retention``), which ``flush`` drops. Kafka's
segments drop them more coarsely; what is *visible* is the same.

The engine sees a store of composite keys ``(key, timestamp)``: a retired write
``apply((key, t), value | TOMBSTONE)`` inserts one version; its changelog record is keyed
by the key alone and carries ``8-byte big-endian ms timestamp + cell`` (the cell is
``0x01 + value bytes``, or ``0x00`` for a tombstone), so compaction keeps a key's latest
version and the changelog config (``min.compaction.lag.ms`` = history retention + a day,
as Kafka Streams sets it) keeps the history a restore needs. A restore replays the
versions in changelog order and rebuilds the same history and stream time.

Backends: the versions live in a window store of composite keys with unbounded retention
(:class:`~aiostreams.state.window.InMemoryWindowStore`, or
:class:`~aiostreams.state.window.SQLiteWindowStore` under ``state_dir`` when
``persistent``), so both go through the same engine path. Reads that must see in-flight
writes go through :class:`~aiostreams.state.versioned_view.VersionedStoreView`.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from aiostreams.errors import ConfigError
from aiostreams.serde import JsonSerde, Serde, serde_for
from aiostreams.state.base import TOMBSTONE, StoreContext, StoreKind, check_store_name
from aiostreams.state.changelog_mark import ChangelogMark
from aiostreams.state.core import StoreCore
from aiostreams.state.key_identity import key_identity
from aiostreams.state.store_spec import WINDOW_CHANGELOG_EXTRA_RETENTION, StoreSpec
from aiostreams.state.window import (
    InMemoryWindowStore,
    SQLiteWindowStore,
    encode_window_key,
    window_start_ms,
)

__all__ = [
    "DELETED",
    "InFlightTimes",
    "Versioned",
    "VersionedKeyValueStore",
    "VersionedRecord",
    "find_version",
    "versioned_store",
]

_TS: Final = struct.Struct(">q")
_UNBOUNDED: Final = 1e15  # seconds: the inner window store never expires a version itself
NO_STREAM_TIME: Final = -(2**62)


@dataclass(frozen=True)
class Versioned:
    """Materialize a table in a versioned store (Kafka's
    ``Stores.persistentVersionedKeyValueStore(name, historyRetention)``).

    ``history_retention`` (float seconds, >= 0): how far behind the table's stream time
    ``get(key, as_of)`` still answers from history, and how late an update may arrive and
    still be stored. Stream-table joins read the value valid at each stream record's
    timestamp."""

    history_retention: float

    def __post_init__(self) -> None:
        r = self.history_retention
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 <= r < math.inf:
            raise ConfigError(
                f"Versioned(history_retention={r!r}): give finite float seconds >= 0 (how "
                "long the table keeps superseded values for as-of reads)")

    @property
    def history_retention_ms(self) -> int:
        return round(self.history_retention * 1000)


class VersionedRecord(NamedTuple):
    """A version read from a versioned store: its value, when it became valid (seconds)
    and when it stopped being valid (``None``: it is the newest)."""

    value: Any
    timestamp: float
    valid_to: float | None


class _Deleted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DELETED"


DELETED: Final = _Deleted()
"""The value of a tombstone version as the backends hold it."""


class _CellSerde:
    """A version's value in the backend: ``0x00`` (tombstone) or ``0x01 + value bytes``."""

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def serialize(self, topic: str, cell: Any) -> bytes | None:
        if cell is DELETED:
            return b"\x00"
        data = self.inner.serialize(topic, cell)
        return b"\x01" + (data or b"")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if data[:1] == b"\x00":
            return DELETED
        return self.inner.deserialize(topic, data[1:])


def find_version(versions: list[tuple[int, Any]], as_of_ms: int,
                 ) -> tuple[int, Any, int | None] | None:
    """``(valid_from, cell, valid_to)`` of the version valid at ``as_of_ms`` among
    ``versions`` (ascending ``valid_from``), or None when none began by then."""
    found = None
    for ms, cell in versions:
        if ms > as_of_ms:
            return None if found is None else (*found, ms)
        found = (ms, cell)
    return None if found is None else (*found, None)


class InFlightTimes:
    """The largest timestamp among one store's buffered (in-flight) versions.

    A max-heap of the buffered versions, pruned lazily: an entry counts while the overlay
    still holds a write of its ``(key, timestamp)``; once retired, the store's own
    ``observed_ms`` covers it, and a withdrawn write no longer counts."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any, float]] = []
        self._seq = 0

    def note(self, ms: int, key: Any, start: float) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (-ms, self._seq, key, start))

    def max_ms(self, overlay: Any, default: int) -> int:
        heap = self._heap
        while heap:
            neg, _, key, start = heap[0]
            if -neg > default and overlay.read((key, start))[0]:
                return -neg
            heapq.heappop(heap)
        return default


class VersionedKeyValueStore(StoreCore):
    """The applied versions of every key (see the module docstring).

    Invariants: ``observed_ms`` never decreases and is the largest timestamp applied or
    restored; ``_trim`` holds ``(valid_to of a key's oldest superseded version, key)`` for
    every key that may have a version ``flush`` can drop (it may hold more)."""

    kind: StoreKind = StoreKind.VERSIONED

    def __init__(self, name: str, *, history_retention: float, persistent: bool = False,
                 key_serde: Serde[Any] | None = None,
                 value_serde: Serde[Any] | None = None) -> None:
        super().__init__(name, key_serde, value_serde)
        self.history_retention_ms = Versioned(history_retention).history_retention_ms
        self.persistent = persistent
        cells = _CellSerde(self.value_serde)
        self._rows: InMemoryWindowStore | SQLiteWindowStore = (
            SQLiteWindowStore(name, retention=_UNBOUNDED, key_serde=self.key_serde,
                              value_serde=cells) if persistent
            else InMemoryWindowStore(name, retention=_UNBOUNDED, key_serde=self.key_serde,
                                     value_serde=cells))
        self._rows.store_format = self.store_format  # its file holds this store's versions
        self.observed_ms = NO_STREAM_TIME
        self._sealed_ms = NO_STREAM_TIME  # observed_ms when the store was last sealed
        self._trim: list[tuple[int, int, Any]] = []
        self._trim_seq = 0
        self.in_flight = InFlightTimes()
        """The timestamps of this task's buffered versions (read by the store's views)."""

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self, context: StoreContext) -> None:
        await self._rows.open(context)
        self.fresh = self._rows.fresh
        self.state = self._rows.state
        # A file with versions: its stream time is the greatest timestamp in it (the newest
        # version of some key, never dropped). Read in ms from the backend's retention
        # tracker (same package): its float ``retained_from`` is too coarse at this range.
        latest = self._rows._retention.max_ms
        if latest is not None:
            self.observed_ms = latest

    async def close(self) -> None:
        await self._rows.close()
        self.state = self._rows.state

    async def wipe(self) -> None:
        await self._rows.wipe()
        self.observed_ms = NO_STREAM_TIME
        self._trim.clear()
        self.fresh = True

    @property
    def changelog_mark(self) -> ChangelogMark | None:
        return self._rows.changelog_mark if isinstance(self._rows, SQLiteWindowStore) else None

    async def flush(self, mark: ChangelogMark | None = None) -> None:
        """Drop the versions no read can see any more, then flush the backend."""
        await self._trim_below(self.observed_ms - self.history_retention_ms, sealed=False)
        await self._flush_rows(mark)

    def seal(self) -> None:
        """Set apart the versions applied so far (see
        :class:`~aiostreams.state.changelog_mark.TransactionalStore`)."""
        self._sealed_ms = self.observed_ms
        if isinstance(self._rows, SQLiteWindowStore):
            self._rows.seal()

    async def flush_sealed(self, mark: ChangelogMark | None) -> None:
        """Write the sealed versions (and ``mark``); then drop what no read can see as
        of the sealed stream time, leaving alone keys with versions not written yet (they
        may belong to a transaction that does not commit): those drops go to the next
        sealed flush."""
        if isinstance(self._rows, SQLiteWindowStore):
            await self._rows.flush_sealed(mark)
        else:
            await self._rows.flush()
        await self._trim_below(self._sealed_ms - self.history_retention_ms, sealed=True)

    async def _flush_rows(self, mark: ChangelogMark | None) -> None:
        if isinstance(self._rows, SQLiteWindowStore):
            await self._rows.flush(mark)
        else:
            await self._rows.flush()

    async def _trim_below(self, cutoff: int, *, sealed: bool) -> None:
        deferred: list[tuple[int, int, Any]] = []
        while self._trim and self._trim[0][0] <= cutoff:
            entry = heapq.heappop(self._trim)
            if sealed and self._has_unwritten(entry[2]):
                deferred.append(entry)
                continue
            await self._drop_invisible(entry[2], cutoff)
        for entry in deferred:
            heapq.heappush(self._trim, entry)

    def _has_unwritten(self, key: Any) -> bool:
        """Whether ``key`` may have versions the file does not hold yet."""
        rows = self._rows
        return isinstance(rows, SQLiteWindowStore) and rows.has_pending(self._key_bytes(key))

    async def _drop_invisible(self, key: Any, cutoff: int) -> None:
        versions = await self.versions(key)
        # A version is invisible when the next one began at or before the cutoff.
        for (ms, _), (next_ms, _) in itertools.pairwise(versions):
            if next_ms > cutoff:
                break
            self._rows.apply((key, ms / 1000), TOMBSTONE)
        self._note_superseded(key, await self.versions(key))

    def _note_superseded(self, key: Any, versions: list[tuple[int, Any]]) -> None:
        if len(versions) > 1:
            self._trim_seq += 1
            heapq.heappush(self._trim, (versions[1][0], self._trim_seq, key))

    # -- keys and the changelog -----------------------------------------------------------

    def sort_key(self, key: Any) -> bytes:
        """The composite ``(key, timestamp)``'s bytes (a plain key: its own bytes)."""
        if isinstance(key, tuple) and len(key) == 2:
            return self._rows.sort_key(key)
        return self._key_bytes(key)

    def changelog_record(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        k, ts = key
        cell = DELETED if value is TOMBSTONE else value
        data = _CellSerde(self.value_serde).serialize(self.name, cell)
        assert data is not None
        return self._key_bytes(k), _TS.pack(window_start_ms(ts)) + data

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        kb = self._changelog_key(key)
        if value is None or len(value) < _TS.size + 1:
            raise ValueError(
                f"versioned store {self.name!r}: changelog record {value!r} is not a version "
                "(8-byte timestamp + cell); the changelog topic holds records this store did "
                "not write")
        (ms,) = _TS.unpack_from(value, 0)
        self._rows.restore(encode_window_key(kb, ms), value[_TS.size:])
        self._observe(ms)
        k = self.key_serde.deserialize(self.name, kb)
        self._trim_seq += 1
        heapq.heappush(self._trim, (ms, self._trim_seq, k))

    # -- the per-record path --------------------------------------------------------------

    def apply(self, key: Any, value: Any) -> None:
        """Insert the version ``key = (key, timestamp)`` (``TOMBSTONE``: a tombstone)."""
        k, ts = key
        ms = window_start_ms(ts)
        self._rows.apply((k, ms / 1000), DELETED if value is TOMBSTONE else value)
        self._observe(ms)
        # The version it supersedes (if any) becomes droppable once ``ms`` is old enough.
        self._trim_seq += 1
        heapq.heappush(self._trim, (ms, self._trim_seq, k))

    def _observe(self, ms: int) -> None:
        if ms > self.observed_ms:
            self.observed_ms = ms

    async def versions(self, key: Any) -> list[tuple[int, Any]]:
        """The applied versions of ``key``: ``(valid_from ms, value | DELETED)``, ascending."""
        return [(window_start_ms(start), cell)
                async for start, cell in self._rows.fetch(key, -math.inf, math.inf)]

    async def get(self, key: Any) -> Any | None:
        """The newest applied value of ``key`` (None: absent or deleted)."""
        versions = await self.versions(key)
        if not versions or versions[-1][1] is DELETED:
            return None
        return versions[-1][1]

    async def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        """The newest value of every key with ``start <= key <= end`` (deleted keys left
        out), in key-byte order."""
        lo = None if start is None else self._key_bytes(start)
        hi = None if end is None else self._key_bytes(end)
        current: Any = None
        current_kb: bytes | None = None
        newest: Any = DELETED
        async for (k, _), cell in self._rows.range(None, None):
            kb = self._key_bytes(k)
            if (lo is not None and kb < lo) or (hi is not None and kb > hi):
                continue
            if kb != current_kb:
                if current_kb is not None and newest is not DELETED:
                    yield current, newest
                current, current_kb = k, kb
            newest = cell
        if current_kb is not None and newest is not DELETED:
            yield current, newest

    async def approximate_num_entries(self) -> int:
        """Versions held (not keys)."""
        return await self._rows.approximate_num_entries()

    def identity(self, key: Any) -> Any:
        return key_identity(key, self._key_bytes)


def versioned_changelog_config(history_retention_ms: int) -> tuple[tuple[str, str], ...]:
    """Kafka Streams' versioned changelog: compacted, with a compaction lag of the history
    retention plus a day so that the versions a restore needs are kept."""
    lag = history_retention_ms + round(WINDOW_CHANGELOG_EXTRA_RETENTION * 1000)
    return (("cleanup.policy", "compact"), ("min.compaction.lag.ms", str(lag)),
            ("message.timestamp.type", "CreateTime"))


def versioned_store(name: str, *, history_retention: float, persistent: bool = False,
                    key_serde: Any = None, value_serde: Any = None,
                    logged: bool = True) -> StoreSpec:
    """A versioned key-value store (see the module docstring), in memory or in SQLite
    under ``state_dir`` (``persistent``). ``ctx.store(name)`` gives a
    :class:`~aiostreams.state.versioned_view.VersionedStoreView`. Serdes as for
    :func:`aiostreams.state.kv_store`."""
    check_store_name(name)
    config = Versioned(history_retention)
    ks = JsonSerde() if key_serde is None else serde_for(key_serde)
    vs = JsonSerde() if value_serde is None else serde_for(value_serde)
    factory = functools.partial(VersionedKeyValueStore, name,
                                history_retention=config.history_retention,
                                persistent=persistent, key_serde=ks, value_serde=vs)
    return StoreSpec(name, factory, logged=logged,
                     changelog_config=versioned_changelog_config(config.history_retention_ms))

