"""Window stores: values addressed by ``(key, window_start)``, expired after ``retention``.

This module is the stores' public import path: :class:`InMemoryWindowStore` (in
:mod:`aiostreams.state.memory_window`), :class:`SQLiteWindowStore` (here), and the key
functions of :mod:`aiostreams.state.window_keys`, which says how starts are rounded to the
millisecond, how a ``(key, start)`` becomes the composite key bytes used on disk, in the
changelog and for ordering, and how retention expires windows across keys.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import aiosqlite

from aiostreams.serde import Serde
from aiostreams.state.base import TOMBSTONE, StoreKind
from aiostreams.state.memory_window import InMemoryWindowStore
from aiostreams.state.sqlite import DEFAULT_CACHE_SIZE, SQLiteKeyValueStore
from aiostreams.state.sqlite_write_back import Pending
from aiostreams.state.window_keys import (
    START_BIAS,
    START_BYTES,
    Retention,
    bound_ms,
    check_retention,
    decode_window_key,
    encode_window_key,
    normalize_window_start,
    split_window_key,
    window_start_ms,
)

__all__ = [
    "InMemoryWindowStore",
    "SQLiteWindowStore",
    "bound_ms",
    "decode_window_key",
    "encode_window_key",
    "normalize_window_start",
    "window_start_ms",
]


class SQLiteWindowStore(SQLiteKeyValueStore):
    """Windowed state in a SQLite file: the key-value store over composite key bytes.

    An index on the last 8 bytes of the key (the start) makes the retention delete, the
    greatest start (read back at open) and ``fetch_all`` (a time range) index scans.
    ``fetch`` is one range query merged with the pending writes of that key (indexed by
    key bytes, so it does not scan them all).

    Invariant: ``_pending_by_key`` maps each key's bytes to the composite keys of its
    writes in ``_pending`` or ``_flushing`` (it may name more; never fewer).
    """

    kind: StoreKind = StoreKind.WINDOW

    def __init__(
        self,
        name: str,
        *,
        retention: float,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(name, key_serde, value_serde, cache_size=cache_size)
        self.retention = check_retention(name, retention)
        self._retention = Retention(self.retention)
        self._pending_by_key: dict[bytes, set[bytes]] = {}
        self._dropped_below: int | None = None  # the cutoff the file was last cleaned to
        self._cleaning_below: int | None = None  # the cutoff of the running flush
        self._sealed_cutoff: int | None = None  # the cutoff when the store was sealed

    @property
    def retained_from(self) -> float:
        return self._retention.retained_from

    # -- keys -----------------------------------------------------------------------------

    def _encode_key(self, key: Any) -> bytes:
        k, ms = split_window_key(self.name, key)
        return encode_window_key(super()._encode_key(k), ms)

    def _decode_key(self, data: bytes) -> Any:
        kb, ms = decode_window_key(data)
        return super()._decode_key(kb), ms / 1000

    # -- the per-record path --------------------------------------------------------------

    def apply(self, key: Any, value: Any) -> None:
        k, ms = split_window_key(self.name, key)
        if self._retention.expired(ms):
            return
        kb = super()._encode_key(k)
        composite = encode_window_key(kb, ms)
        self._write(composite, value)  # may raise: then nothing changed
        self._retention.observe(ms)
        self._note_pending(kb, composite)

    def apply_logged(self, key: Any, value: Any) -> tuple[bytes, bytes | None]:
        """:meth:`apply` (a write to an expired window is ignored), returning its changelog
        record (what ``changelog_record`` gives, expired or not), serialized once."""
        k, ms = split_window_key(self.name, key)
        kb = super()._encode_key(k)
        composite = encode_window_key(kb, ms)
        if self._retention.expired(ms):
            return composite, (None if value is TOMBSTONE
                               else self.value_serde.serialize(self.name, value))
        vb = self._write(composite, value)  # may raise: then nothing changed
        self._retention.observe(ms)
        self._note_pending(kb, composite)
        return composite, vb

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        composite = self._changelog_key(key)
        kb, ms = decode_window_key(composite)
        if not self._retention.expired(ms):
            self._retention.observe(ms)
            super().restore(composite, value)
            self._note_pending(kb, composite)

    def has_pending(self, kb: bytes) -> bool:
        """Whether key ``kb`` may have windows written but not flushed."""
        return bool(self._pending_by_key.get(kb))

    def _note_pending(self, kb: bytes, composite: bytes) -> None:
        keys = self._pending_by_key.get(kb)
        if keys is None:
            self._pending_by_key[kb] = {composite}
        else:
            keys.add(composite)

    async def get(self, key: Any) -> Any | None:
        return self._window_lookup(key)

    def get_now(self, key: Any) -> Any | None:
        """:meth:`get` without awaiting (a point read never leaves the loop's thread)."""
        return self._window_lookup(key)

    def _window_lookup(self, key: Any) -> Any | None:
        k, ms = split_window_key(self.name, key)
        if self._retention.expired(ms):
            return None
        return self._lookup(encode_window_key(super()._encode_key(k), ms))

    async def fetch(self, key: Any, time_from: float,
                    time_to: float) -> AsyncIterator[tuple[float, Any]]:
        kb = super()._encode_key(key)
        lo_ms = bound_ms(time_from)
        cutoff = self._retention.cutoff_ms
        if cutoff is not None:
            lo_ms = max(lo_ms, cutoff)
        hi_ms = bound_ms(time_to)
        async for composite, value in self._range_bytes(encode_window_key(kb, lo_ms),
                                                        encode_window_key(kb, hi_ms)):
            row_key, ms = decode_window_key(composite)
            if row_key == kb:
                yield ms / 1000, value

    async def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        async for composite, value in super().range(start, end):
            if not self._retention.expired(round(composite[1] * 1000)):
                yield composite, value

    async def fetch_all(self, time_from: float,
                        time_to: float) -> AsyncIterator[tuple[tuple[Any, float], Any]]:
        """``((key, start), value)`` of every key's windows with ``time_from <= start <=
        time_to`` (bounds rounded like starts), in (start, key bytes) order: one query on
        the start index, merged with the unflushed writes (which win; deletes left out)."""
        lo = bound_ms(time_from)
        cutoff = self._retention.cutoff_ms
        if cutoff is not None:
            lo = max(lo, cutoff)
        hi = bound_ms(time_to)
        if lo > hi:
            return
        lo_b, hi_b = START_BYTES.pack(lo + START_BIAS), START_BYTES.pack(hi + START_BIAS)
        db = self._require_open()
        rows = await db.execute_fetchall(
            "SELECT k, v FROM kv WHERE substr(k, -8) BETWEEN ? AND ?", (lo_b, hi_b))
        found: dict[bytes, bytes | None] = {k: v for k, v in rows}
        size = START_BYTES.size
        for buffered in (self._flushing, self._pending):  # the newest last
            for composite, vb in buffered.items():
                if lo_b <= composite[-size:] <= hi_b:
                    assert vb is None or isinstance(vb, bytes)
                    found[composite] = vb
        decode = self.value_serde.deserialize
        for composite in sorted(found, key=lambda c: (c[-size:], c[:-size])):
            vb = found[composite]
            if vb is not None:
                yield self._decode_key(composite), decode(self.name, vb)

    def _buffered_between(self, lo: bytes | None, hi: bytes | None) -> Pending:
        if lo is None or hi is None:
            return super()._buffered_between(lo, hi)
        lo_key, _ = decode_window_key(lo)
        hi_key, _ = decode_window_key(hi)
        if lo_key != hi_key:  # not one key's windows: scan them all
            return super()._buffered_between(lo, hi)
        found: Pending = {}
        for composite in self._pending_by_key.get(lo_key, ()):
            if lo <= composite <= hi:
                vb = self._pending.get(composite, _GONE)
                if vb is _GONE:
                    vb = self._flushing.get(composite, _GONE)
                if vb is not _GONE:
                    assert vb is None or isinstance(vb, bytes)
                    found[composite] = vb
        return found

    # -- hooks of the key-value store -----------------------------------------------------

    async def _create_schema(self, db: aiosqlite.Connection) -> None:
        await db.execute("CREATE INDEX IF NOT EXISTS kv_window_start ON kv (substr(k, -8))")

    async def _load(self, db: aiosqlite.Connection) -> None:
        rows = await db.execute_fetchall("SELECT max(substr(k, -8)) FROM kv")
        for (latest,) in rows:
            if latest is not None:
                self._retention.observe(START_BYTES.unpack(latest)[0] - START_BIAS)

    def _cutoff(self, sealed: bool) -> int | None:
        """The retention line a flush drops windows below: a sealed flush only the one
        its writes saw (a later write's stream time may belong to an aborted transaction)."""
        return self._sealed_cutoff if sealed else self._retention.cutoff_ms

    def _sealing(self) -> None:
        self._sealed_cutoff = self._retention.cutoff_ms

    def _needs_housekeeping(self, *, sealed: bool) -> bool:
        cutoff = self._cutoff(sealed)
        return cutoff is not None and (self._dropped_below is None
                                       or cutoff > self._dropped_below)

    async def _housekeep(self, db: aiosqlite.Connection, *, sealed: bool) -> None:
        cutoff = self._cleaning_below = self._cutoff(sealed)
        if cutoff is not None:
            await db.execute("DELETE FROM kv WHERE substr(k, -8) < ?",
                             (START_BYTES.pack(cutoff + START_BIAS),))

    def _flushed(self, batch: Pending) -> None:
        cleaned = self._cleaning_below
        if cleaned is not None and (self._dropped_below is None or cleaned > self._dropped_below):
            self._dropped_below = cleaned
        by_key = self._pending_by_key
        for composite in batch:
            if composite in self._pending:
                continue
            kb = composite[:-START_BYTES.size]
            keys = by_key.get(kb)
            if keys is not None:
                keys.discard(composite)
                if not keys:
                    del by_key[kb]
        # Expired windows may still sit in the cache: they are never read (get checks the
        # retention line first), and the LRU ages them out.

    def _reset(self) -> None:
        self._retention = Retention(self.retention)
        self._pending_by_key = {}
        self._dropped_below = None
        self._cleaning_below = None
        self._sealed_cutoff = None


_GONE: Final = object()
