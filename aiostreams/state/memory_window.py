"""The in-memory window store: windowed state in dicts, with a start index.

Keys, starts and retention follow :mod:`aiostreams.state.window_keys`; the store's public
import path is :mod:`aiostreams.state.window` (with :class:`SQLiteWindowStore`).
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator
from operator import itemgetter
from typing import Any, Final

from aiostreams.serde import Serde
from aiostreams.state.base import TOMBSTONE, StoreContext, StoreKind, StoreState
from aiostreams.state.core import StoreCore
from aiostreams.state.key_identity import EncodedKey, key_identity
from aiostreams.state.window_keys import (
    Retention,
    bound_ms,
    check_retention,
    decode_window_key,
    encode_window_key,
    split_window_key,
)

__all__ = ["InMemoryWindowStore"]


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
        self._retention = Retention(self.retention)
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
        k, ms = split_window_key(self.name, key)
        return encode_window_key(self._key_bytes(k), ms)

    async def get(self, key: Any) -> Any | None:
        return self._lookup(key)

    def get_now(self, key: Any) -> Any | None:
        """:meth:`get` without awaiting."""
        return self._lookup(key)

    def _lookup(self, key: Any) -> Any | None:
        k, ms = split_window_key(self.name, key)
        if self._retention.expired(ms):
            return None
        windows = self._windows.get(self._identity(k))
        return None if windows is None else windows.get(ms / 1000)

    def apply(self, key: Any, value: Any) -> None:
        k, ms = split_window_key(self.name, key)
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
        self._retention = Retention(self.retention)
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


_GONE: Final = object()
