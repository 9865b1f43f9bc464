"""Window stores: values addressed by ``(key, window_start)``, expired after ``retention``.

Window starts are float seconds kept to the millisecond (Kafka's resolution): every start is
normalized to ``ms / 1000`` on the way in, so ``0.1 + 0.2`` and ``0.3`` name one window.
``fetch`` bounds are rounded the same way (both inclusive).

The composite key's bytes, used on disk, in the changelog and for ordering, are::

    serialized key + 8-byte big-endian unsigned (window_start_ms + 2**63)

The bias turns signed milliseconds into unsigned ones, so byte order is ``(key bytes,
start)`` order and one key's windows between two starts are one contiguous range. A key
whose bytes extend another's (``b"a"``, ``b"a\\x80"``: possible with ``BytesSerde`` or JSON
numbers, never with ``StrSerde``, ``LongSerde`` or JSON strings) may fall inside that range,
so ``fetch`` checks the key of every row.

Retention: the store tracks the greatest window start applied (or restored). Windows that
start before ``retained_from = greatest start - retention`` are expired: ``get``/``fetch``/
``range`` never return them, writes to them are ignored, and ``flush`` drops them from
memory and disk. Retention spans keys, so whether a window near the line is still visible
depends on other keys' writes: give windows a grace period and keep ``retention >= window
size + grace``, so that a processor rejects late records (by stream time) before the store
would drop their windows.
"""

from __future__ import annotations

import bisect
import math
import struct
from collections.abc import AsyncIterator
from operator import itemgetter
from typing import Any, Final

import aiosqlite

from aiostreams.errors import ConfigError
from aiostreams.serde import Serde
from aiostreams.state.base import (
    TOMBSTONE,
    StoreContext,
    StoreKind,
    StoreState,
)
from aiostreams.state.core import StoreCore
from aiostreams.state.key_identity import EncodedKey, key_identity
from aiostreams.state.sqlite import DEFAULT_CACHE_SIZE, Pending, SQLiteKeyValueStore

__all__ = [
    "InMemoryWindowStore",
    "SQLiteWindowStore",
    "bound_ms",
    "decode_window_key",
    "encode_window_key",
    "normalize_window_start",
    "window_start_ms",
]

_BIAS: Final = 1 << 63
_START: Final = struct.Struct(">Q")
_MIN_MS: Final = -_BIAS
_MAX_MS: Final = _BIAS - 1


def window_start_ms(window_start: float) -> int:
    """``window_start`` (float seconds) as integer milliseconds, rounded to the nearest."""
    try:
        ms = round(window_start * 1000)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(
            f"a window start must be finite float seconds, got {window_start!r}"
        ) from None
    if not _MIN_MS <= ms <= _MAX_MS:
        raise ValueError(f"window start {window_start!r} is out of range (64-bit milliseconds)")
    return ms


def normalize_window_start(window_start: float) -> float:
    """The canonical float of ``window_start``: ``window_start_ms(window_start) / 1000``."""
    return window_start_ms(window_start) / 1000


def bound_ms(t: float) -> int:
    """A ``fetch`` bound in milliseconds: rounded like a window start; infinities clamp to
    the ends of the range."""
    if t != t:
        raise ValueError("a time bound cannot be NaN")
    if math.isinf(t):
        return _MAX_MS if t > 0 else _MIN_MS
    return max(_MIN_MS, min(_MAX_MS, round(t * 1000)))


def encode_window_key(key_bytes: bytes, start_ms: int) -> bytes:
    """The composite key bytes of ``(key, start)``: see the module docstring."""
    return key_bytes + _START.pack(start_ms + _BIAS)


def decode_window_key(data: bytes) -> tuple[bytes, int]:
    """``(key bytes, start ms)`` of composite key bytes."""
    if len(data) < _START.size:
        raise ValueError(
            f"{data!r} is not a window store key: it needs at least {_START.size} bytes"
        )
    return data[:-_START.size], _START.unpack_from(data, len(data) - _START.size)[0] - _BIAS


def _split(name: str, composite: Any) -> tuple[Any, int]:
    try:
        key, start = composite
    except (TypeError, ValueError):
        raise ValueError(
            f"window store {name!r} takes (key, window_start) keys, got {composite!r}"
        ) from None
    return key, window_start_ms(start)


def check_retention(name: str, retention: float) -> float:
    if (isinstance(retention, bool) or not isinstance(retention, int | float)
            or not 0 < retention < math.inf):
        raise ConfigError(
            f"window store {name!r}: retention must be positive float seconds (at least "
            f"window size + grace), got {retention!r}"
        )
    return float(retention)


class _Retention:
    """The greatest window start seen and the line below which windows are expired."""

    __slots__ = ("max_ms", "retention_ms")

    def __init__(self, retention: float) -> None:
        self.retention_ms = round(retention * 1000)
        self.max_ms: int | None = None

    def observe(self, ms: int) -> None:
        """Note a write of the window starting at ``ms``."""
        if self.max_ms is None or ms > self.max_ms:
            self.max_ms = ms

    @property
    def cutoff_ms(self) -> int | None:
        if self.max_ms is None:
            return None
        return max(_MIN_MS, self.max_ms - self.retention_ms)

    def expired(self, ms: int) -> bool:
        cutoff = self.cutoff_ms
        return cutoff is not None and ms < cutoff

    @property
    def retained_from(self) -> float:
        cutoff = self.cutoff_ms
        return -math.inf if cutoff is None else cutoff / 1000


class InMemoryWindowStore(StoreCore):
    """Windowed state in dicts: per key, window start -> value.

    Invariants: ``_windows`` never holds an empty dict, ``TOMBSTONE`` or ``None``;
    ``_by_start`` maps each start (ms) to exactly the keys with a window there (never an
    empty set), and ``_starts`` is the sorted list of its starts - so ``flush`` drops
    expired windows, and ``fetch_all`` finds a time range's windows, in time proportional
    to what they drop or return (plus a bisection). Keys are indexed by
    :func:`~aiostreams.state.key_identity.key_identity`; ``_keys`` holds the original of
    every ``EncodedKey`` that has a window.
    """

    kind: StoreKind = StoreKind.WINDOW
    persistent = False

    def __init__(
        self,
        name: str,
        *,
        retention: float,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
    ) -> None:
        super().__init__(name, key_serde, value_serde)
        self.retention = check_retention(name, retention)
        self.context: StoreContext | None = None
        self._retention = _Retention(self.retention)
        self._windows: dict[Any, dict[float, Any]] = {}
        self._keys: dict[Any, Any] = {}
        self._by_start: dict[int, set[Any]] = {}
        self._starts: list[int] = []

    def _identity(self, key: Any) -> Any:
        return key_identity(key, self._key_bytes)

    def _original(self, ident: Any) -> Any:
        return self._keys[ident] if isinstance(ident, EncodedKey) else ident

    def _forget(self, ident: Any) -> None:
        del self._windows[ident]
        self._keys.pop(ident, None)

    @property
    def retained_from(self) -> float:
        return self._retention.retained_from

    async def open(self, context: StoreContext) -> None:
        self._require_created()
        self.context = context
        self.state = StoreState.OPEN

    def sort_key(self, key: Any) -> bytes:
        k, ms = _split(self.name, key)
        return encode_window_key(self._key_bytes(k), ms)

    async def get(self, key: Any) -> Any | None:
        k, ms = _split(self.name, key)
        if self._retention.expired(ms):
            return None
        windows = self._windows.get(self._identity(k))
        return None if windows is None else windows.get(ms / 1000)

    def apply(self, key: Any, value: Any) -> None:
        k, ms = _split(self.name, key)
        self._put(k, ms, value)

    def _put(self, key: Any, ms: int, value: Any) -> None:
        if self._retention.expired(ms):
            return
        self._retention.observe(ms)
        start = ms / 1000
        ident = self._identity(key)
        if value is TOMBSTONE:
            windows = self._windows.get(ident)
            if windows is not None and windows.pop(start, _GONE) is not _GONE:
                if not windows:
                    self._forget(ident)
                keys = self._by_start[ms]
                keys.discard(ident)
                if not keys:
                    del self._by_start[ms]
                    starts = self._starts
                    del starts[bisect.bisect_left(starts, ms)]
            return
        self._windows.setdefault(ident, {})[start] = value
        if ident is not key:
            self._keys[ident] = key
        held = self._by_start.get(ms)
        if held is None:
            held = self._by_start[ms] = set()
            bisect.insort(self._starts, ms)
        held.add(ident)

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        kb, ms = decode_window_key(self._changelog_key(key))
        k = self.key_serde.deserialize(self.name, kb)
        self._put(k, ms,
                  TOMBSTONE if value is None else self.value_serde.deserialize(self.name, value))

    async def fetch(self, key: Any, time_from: float,
                    time_to: float) -> AsyncIterator[tuple[float, Any]]:
        lo = max(bound_ms(time_from) / 1000, self.retained_from)
        hi = bound_ms(time_to) / 1000
        windows = self._windows.get(self._identity(key))
        if windows is None:
            return
        for start in sorted(s for s in windows if lo <= s <= hi):
            value = windows.get(start)  # may be gone if a write landed while the caller awaited
            if value is not None:
                yield start, value

    async def fetch_all(self, time_from: float,
                        time_to: float) -> AsyncIterator[tuple[tuple[Any, float], Any]]:
        """``((key, start), value)`` of every key's windows with ``time_from <= start <=
        time_to`` (bounds rounded like starts), in (start, key bytes) order: a bisection of
        the sorted starts, not a scan of the store."""
        lo = bound_ms(time_from)
        cutoff = self._retention.cutoff_ms
        if cutoff is not None:
            lo = max(lo, cutoff)
        hi = bound_ms(time_to)
        starts = self._starts
        due = starts[bisect.bisect_left(starts, lo):bisect.bisect_right(starts, hi)]
        for ms in due:
            idents = self._by_start.get(ms)
            if idents is None:  # deleted while the caller awaited
                continue
            start = ms / 1000
            for _, ident in sorted((self._ident_bytes(i), i) for i in idents):
                held = self._windows.get(ident)
                value = None if held is None else held.get(start)
                if value is not None:
                    yield (self._original(ident), start), value

    def _ident_bytes(self, ident: Any) -> bytes:
        return ident.data if isinstance(ident, EncodedKey) else self._key_bytes(ident)

    async def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        lo = None if start is None else self.sort_key(start)
        hi = None if end is None else self.sort_key(end)
        floor = self.retained_from
        entries = []
        for ident, windows in self._windows.items():
            kb = ident.data if isinstance(ident, EncodedKey) else self._key_bytes(ident)
            for s in windows:
                if s < floor:
                    continue
                sk = encode_window_key(kb, round(s * 1000))
                if (lo is None or sk >= lo) and (hi is None or sk <= hi):
                    entries.append((sk, ident, s))
        entries.sort(key=itemgetter(0))
        for _, ident, s in entries:
            held = self._windows.get(ident)
            value = None if held is None else held.get(s)
            if value is not None:
                yield (self._original(ident), s), value

    async def approximate_num_entries(self) -> int:
        return sum(len(w) for w in self._windows.values())

    async def flush(self) -> None:
        """Drop the expired windows."""
        cutoff = self._retention.cutoff_ms
        if cutoff is None:
            return
        starts = self._starts
        expired = bisect.bisect_left(starts, cutoff)
        for ms in starts[:expired]:
            start = ms / 1000
            for ident in self._by_start.pop(ms):
                windows = self._windows[ident]
                del windows[start]
                if not windows:
                    self._forget(ident)
        del starts[:expired]

    async def wipe(self) -> None:
        self._windows.clear()
        self._keys.clear()
        self._by_start.clear()
        self._starts.clear()
        self._retention = _Retention(self.retention)
        self.fresh = True

    async def close(self) -> None:
        self.state = StoreState.CLOSED

    def snapshot(self) -> dict[tuple[Any, float], Any]:
        """A copy of the retained windows, ``{(key, start): value}`` (tests, the driver)."""
        floor = self.retained_from
        out: dict[tuple[Any, float], Any] = {}
        for ident, windows in self._windows.items():
            original = self._original(ident)
            for s, v in windows.items():
                if s >= floor:
                    try:
                        out[(original, s)] = v
                    except TypeError:  # an unhashable key: shown by its EncodedKey
                        out[(ident, s)] = v
        return out


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
        self._retention = _Retention(self.retention)
        self._pending_by_key: dict[bytes, set[bytes]] = {}
        self._dropped_below: int | None = None  # the cutoff the file was last cleaned to
        self._cleaning_below: int | None = None  # the cutoff of the running flush

    @property
    def retained_from(self) -> float:
        return self._retention.retained_from

    # -- keys -----------------------------------------------------------------------------

    def _encode_key(self, key: Any) -> bytes:
        k, ms = _split(self.name, key)
        return encode_window_key(super()._encode_key(k), ms)

    def _decode_key(self, data: bytes) -> Any:
        kb, ms = decode_window_key(data)
        return super()._decode_key(kb), ms / 1000

    # -- the per-record path --------------------------------------------------------------

    def apply(self, key: Any, value: Any) -> None:
        k, ms = _split(self.name, key)
        if self._retention.expired(ms):
            return
        kb = super()._encode_key(k)
        composite = encode_window_key(kb, ms)
        self._write(composite, value)  # may raise: then nothing changed
        self._retention.observe(ms)
        self._note_pending(kb, composite)

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        composite = self._changelog_key(key)
        kb, ms = decode_window_key(composite)
        if not self._retention.expired(ms):
            self._retention.observe(ms)
            super().restore(composite, value)
            self._note_pending(kb, composite)

    def _note_pending(self, kb: bytes, composite: bytes) -> None:
        keys = self._pending_by_key.get(kb)
        if keys is None:
            self._pending_by_key[kb] = {composite}
        else:
            keys.add(composite)

    async def get(self, key: Any) -> Any | None:
        k, ms = _split(self.name, key)
        if self._retention.expired(ms):
            return None
        return await self._get_bytes(encode_window_key(super()._encode_key(k), ms))

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
        lo_b, hi_b = _START.pack(lo + _BIAS), _START.pack(hi + _BIAS)
        db = self._require_open()
        rows = await db.execute_fetchall(
            "SELECT k, v FROM kv WHERE substr(k, -8) BETWEEN ? AND ?", (lo_b, hi_b))
        found: dict[bytes, bytes | None] = {k: v for k, v in rows}
        size = _START.size
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
                self._retention.observe(_START.unpack(latest)[0] - _BIAS)

    def _needs_housekeeping(self) -> bool:
        cutoff = self._retention.cutoff_ms
        return cutoff is not None and (self._dropped_below is None
                                       or cutoff > self._dropped_below)

    async def _housekeep(self, db: aiosqlite.Connection) -> None:
        cutoff = self._cleaning_below = self._retention.cutoff_ms
        if cutoff is not None:
            await db.execute("DELETE FROM kv WHERE substr(k, -8) < ?",
                             (_START.pack(cutoff + _BIAS),))

    def _flushed(self, batch: Pending) -> None:
        self._dropped_below = self._cleaning_below
        by_key = self._pending_by_key
        for composite in batch:
            if composite in self._pending:
                continue
            kb = composite[:-_START.size]
            keys = by_key.get(kb)
            if keys is not None:
                keys.discard(composite)
                if not keys:
                    del by_key[kb]
        # Expired windows may still sit in the cache: they are never read (get checks the
        # retention line first), and the LRU ages them out.

    def _reset(self) -> None:
        self._retention = _Retention(self.retention)
        self._pending_by_key = {}
        self._dropped_below = None
        self._cleaning_below = None


_GONE: Final = object()
