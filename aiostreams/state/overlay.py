"""Store-to-load forwarding: the buffered writes of in-flight records, visible to reads.

Each store of a task has one :class:`StoreOverlay`. A write by an executing record goes to
its slot *and* to the overlay; a read consults the overlay first (the newest buffered write
of that key wins) and the store only when no in-flight record has written the key. At
retire the write leaves the overlay and is applied to the store; when an attempt fails its
writes are withdrawn. With ``ordering="key"``, same-key records execute one after another,
so a read sees exactly what the serial run would have seen: per-key read-modify-write is
correct with thousands of records in flight and no locks.

Invariant: an overlay entry exists exactly while its slot is in flight and has not
withdrawn it. Entries are indexed by :func:`~aiostreams.state.key_identity.key_identity`
(the key's bytes where Python's ``==`` would merge keys Kafka keeps apart, such as ``1``
and ``True`` under a JSON key serde); the original key is kept beside them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from operator import itemgetter
from typing import Any, cast

from aiostreams.runtime.slot import CURRENT_SLOT, Slot
from aiostreams.state.base import TOMBSTONE, StateStore, StoreKind, WindowStore
from aiostreams.state.key_identity import key_identity
from aiostreams.state.window import bound_ms, normalize_window_start

ChangelogBytes = tuple[bytes | None, bytes | None]
"""A write's changelog record: (key bytes, value bytes or None for a delete)."""


def store_kind(store: StateStore) -> StoreKind:
    """The store's ``kind``; for a store without one, ``WINDOW`` when it has the window
    store's members (``fetch``, ``retention``, ``retained_from``), else ``KEY_VALUE``."""
    kind = getattr(store, "kind", None)
    if isinstance(kind, StoreKind):
        return kind
    # Not isinstance(store, WindowStore): that would also demand the missing ``kind``.
    windowed = (callable(getattr(store, "fetch", None)) and hasattr(store, "retention")
                and hasattr(store, "retained_from"))
    return StoreKind.WINDOW if windowed else StoreKind.KEY_VALUE


def _shortcut(store: StateStore, name: str, stands_for: tuple[str, ...]) -> Any:
    """The store's method ``name``, unless a subclass below the class that gave it
    overrides one of the methods it ``stands_for``: then those overrides must run, and
    there is none (as :func:`aiostreams.serde.shortcuts` decides for serdes)."""
    method = getattr(store, name, None)
    if method is None:
        return None
    mro = type(store).__mro__
    giver = next((i for i, cls in enumerate(mro) if name in vars(cls)), None)
    if giver is None:
        return method  # set on the instance itself
    for other in stands_for:
        definer = next((i for i, cls in enumerate(mro) if other in vars(cls)), giver)
        if definer < giver:
            return None
    return method


def logged_apply(store: StateStore) -> Callable[[Any, Any], ChangelogBytes] | None:
    """The store's ``apply_logged(key, value)`` (apply, and return the changelog record),
    or None (see :func:`_shortcut`: a subclass overriding ``apply``, ``changelog_record``
    or ``sort_key`` gets those called)."""
    method: Callable[[Any, Any], ChangelogBytes] | None = _shortcut(
        store, "apply_logged", ("apply", "changelog_record", "sort_key"))
    return method


def read_now(store: StateStore) -> Callable[[Any], Any] | None:
    """The store's ``get_now(key)``: ``get`` answered without awaiting (the stores of this
    package all have one), or None (none, or a subclass overrides ``get``)."""
    method: Callable[[Any], Any] | None = _shortcut(store, "get_now", ("get",))
    return method


class StoreOverlay:
    """The buffered writes of one store's in-flight records, newest last per key.

    For a window store (keys ``(key, window_start)``) it also indexes the buffered window
    starts by key, so that a ``fetch`` does not scan every buffered write.
    """

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.kind = store_kind(store)
        self._pending: dict[Any, list[tuple[Slot, Any]]] = {}
        self._originals: dict[Any, Any] = {}  # identity -> the key, for EncodedKey ones
        # A versioned store's writes are versions ``(key, timestamp)``: indexed like windows.
        self._windows: dict[Any, set[float]] | None = (
            {} if self.kind in (StoreKind.WINDOW, StoreKind.VERSIONED) else None)
        self._apply_logged = logged_apply(store) or self._apply_then_log
        self.get_now = read_now(store)
        """The store's synchronous point read, or None (then reads must await ``get``)."""

    def __len__(self) -> int:
        return len(self._pending)

    def _encode(self, key: Any) -> bytes:
        if self._windows is not None:
            return self.store.sort_key((key, 0.0))  # the key's bytes lead a window key
        return self.store.sort_key(key)

    def identity(self, key: Any) -> Any:
        """What the overlay indexes ``key`` by (``(identity, start)`` for a window key)."""
        if self._windows is not None:
            ident = key_identity(key[0], self._encode)
            return key if ident is key[0] else (ident, key[1])  # no new tuple on the fast path
        return key_identity(key, self._encode)

    def read(self, key: Any) -> tuple[bool, Any]:
        entries = self._pending.get(self.identity(key))
        if entries:
            value = entries[-1][1]
            return True, (None if value is TOMBSTONE else value)
        return False, None

    def write(self, slot: Slot, key: Any, value: Any) -> None:
        ident = self.identity(key)
        entries = self._pending.get(ident)
        if entries is None:
            entries = self._pending[ident] = []
            if self._windows is not None:
                self._windows.setdefault(ident[0], set()).add(ident[1])
            if ident is not key and (self._windows is None or ident[0] is not key[0]):
                self._originals[ident] = key
        entries.append((slot, value))
        writes = slot.writes
        if not writes:
            writes = slot.writes = []
        writes.append((self, key, value))

    def retire(self, slot: Slot, key: Any, value: Any) -> None:
        """Apply ``slot``'s write to the store and drop it from the overlay."""
        self._drop(slot, key)
        self.store.apply(key, value)

    def retire_logged(self, slot: Slot, key: Any, value: Any) -> ChangelogBytes:
        """:meth:`retire`, and the write's changelog record (``store.changelog_record``):
        from the store's ``apply_logged`` when it has one (it serializes the write once for
        both), else from a second serialization."""
        self._drop(slot, key)
        return self._apply_logged(key, value)

    def _apply_then_log(self, key: Any, value: Any) -> ChangelogBytes:
        self.store.apply(key, value)
        return self.store.changelog_record(key, value)

    def withdraw(self, slot: Slot, key: Any) -> None:
        """Forget ``slot``'s write of ``key`` (its attempt failed)."""
        self._drop(slot, key)

    def _drop(self, slot: Slot, key: Any) -> None:
        ident = self.identity(key)
        entries = self._pending[ident]
        for i, (owner, _) in enumerate(entries):
            if owner is slot:
                del entries[i]
                break
        else:
            raise AssertionError(f"{slot!r} has no buffered write of {key!r}")
        if not entries:
            del self._pending[ident]
            self._originals.pop(ident, None)
            if self._windows is not None:
                starts = self._windows[ident[0]]
                starts.discard(ident[1])
                if not starts:
                    del self._windows[ident[0]]

    def pending_items(self) -> list[tuple[Any, Any]]:
        """Each buffered key (as written) with its newest value (or ``TOMBSTONE``)."""
        originals = self._originals
        return [(originals.get(k, k), v[-1][1])
                for k, v in self._pending.items()]

    def pending_between(self, lo: float, hi: float) -> list[tuple[Any, Any]]:
        """A window store's newest buffered ``((key, start), value|TOMBSTONE)`` with ``lo
        <= start <= hi`` (a pass over the buffered writes, bounded by the records in
        flight, not over the store)."""
        assert self._windows is not None, "pending_between() is for window stores"
        originals = self._originals
        return [(originals.get(k, k), v[-1][1])
                for k, v in self._pending.items() if lo <= k[1] <= hi]

    def pending_windows(self, key: Any) -> list[tuple[float, Any]]:
        """A window (or versioned) store's newest buffered ``(window_start,
        value|TOMBSTONE)`` of ``key``."""
        assert self._windows is not None, "pending_windows() is for window stores"
        pending = self._pending
        ident = key_identity(key, self._encode)
        return [(start, pending[(ident, start)][-1][1])
                for start in self._windows.get(ident, ())]


class KeyValueStoreView:
    """What ``ctx.store(name)`` returns for a key-value store: reads see buffered writes of
    earlier records; writes are buffered in the current record's slot until it retires.

    Values are shared, not copied: write a new value with ``put`` rather than mutating one
    that ``get`` returned (a mutation would change state that is already applied)."""

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

    @property
    def reads_now(self) -> bool:
        """Whether :meth:`get_now` can answer (the store reads without awaiting)."""
        return self._overlay.get_now is not None

    def get_now(self, key: Any) -> Any | None:
        """:meth:`get` without awaiting; a ``TypeError`` when the store can only be read by
        awaiting (``reads_now`` is False)."""
        found, value = self._overlay.read(key)
        if found:
            return value
        return _read_now(self._overlay)(key)

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            raise ValueError(
                f"store {self.name!r}: put(key, None) is ambiguous; call delete(key)"
            )
        if key is None:
            raise ValueError(f"store {self.name!r}: a key cannot be None")
        self._overlay.write(CURRENT_SLOT.get(), key, value)

    def delete(self, key: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: a key cannot be None")
        self._overlay.write(CURRENT_SLOT.get(), key, TOMBSTONE)

    async def range(self, start: Any | None = None,
                    end: Any | None = None) -> AsyncIterator[tuple[Any, Any]]:
        """Entries with ``start <= key <= end``, buffered writes included, in the store's
        order: serialized-key bytes (``store.sort_key``; Python's order for ``str`` keys
        under ``StrSerde``)."""
        store = self._overlay.store
        lo = None if start is None else store.sort_key(start)
        hi = None if end is None else store.sort_key(end)
        buffered = []
        for k, v in self._overlay.pending_items():
            sk = store.sort_key(k)
            if (lo is None or sk >= lo) and (hi is None or sk <= hi):
                buffered.append((sk, k, v))
        buffered.sort(key=itemgetter(0))
        i = 0
        async for k, v in store.range(start, end):
            sk = store.sort_key(k)
            while i < len(buffered) and buffered[i][0] < sk:
                _, bk, bv = buffered[i]
                i += 1
                if bv is not TOMBSTONE:
                    yield bk, bv
            if i < len(buffered) and buffered[i][0] == sk:
                _, k, v = buffered[i]
                i += 1
                if v is TOMBSTONE:
                    continue
            yield k, v
        for _, bk, bv in buffered[i:]:
            if bv is not TOMBSTONE:
                yield bk, bv

    async def all(self) -> AsyncIterator[tuple[Any, Any]]:
        async for item in self.range(None, None):
            yield item

    async def approximate_num_entries(self) -> int:
        return await self._overlay.store.approximate_num_entries()


class WindowStoreView:
    """What ``ctx.store(name)`` returns for a window store: the key-value view's rules over
    the composite keys ``(key, window_start)``.

    Window starts are float seconds kept to the millisecond (normalized on the way in, as
    the store does). Reads see the buffered writes of earlier records; expired windows
    (before the store's ``retained_from``) are never returned, buffered or not. Values are
    shared, not copied (see :class:`KeyValueStoreView`).
    """

    def __init__(self, overlay: StoreOverlay) -> None:
        if overlay.kind is not StoreKind.WINDOW:
            raise TypeError(
                f"store {overlay.store.name!r} is not a window store; use KeyValueStoreView"
            )
        self._overlay = overlay
        self._store = cast(WindowStore, overlay.store)

    @property
    def name(self) -> str:
        return self._store.name

    @property
    def retention(self) -> float:
        return self._store.retention

    async def get(self, key: Any, window_start: float) -> Any | None:
        start = normalize_window_start(window_start)
        if start < self._store.retained_from:
            return None
        found, value = self._overlay.read((key, start))
        if found:
            return value
        return await self._store.get((key, start))

    @property
    def reads_now(self) -> bool:
        """Whether :meth:`get_now` can answer (the store reads without awaiting)."""
        return self._overlay.get_now is not None

    def get_now(self, key: Any, window_start: float) -> Any | None:
        """:meth:`get` without awaiting; a ``TypeError`` when the store can only be read by
        awaiting (``reads_now`` is False)."""
        start = normalize_window_start(window_start)
        if start < self._store.retained_from:
            return None
        found, value = self._overlay.read((key, start))
        if found:
            return value
        return _read_now(self._overlay)((key, start))

    def put(self, key: Any, window_start: float, value: Any) -> None:
        if value is None:
            raise ValueError(
                f"store {self.name!r}: put(key, window_start, None) is ambiguous; call "
                "delete(key, window_start)"
            )
        self._write(key, window_start, value)

    def delete(self, key: Any, window_start: float) -> None:
        self._write(key, window_start, TOMBSTONE)

    def _write(self, key: Any, window_start: float, value: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: a key cannot be None")
        start = normalize_window_start(window_start)
        self._overlay.write(CURRENT_SLOT.get(), (key, start), value)

    async def fetch(self, key: Any, time_from: float,
                    time_to: float) -> list[tuple[float, Any]]:
        """``(window_start, value)`` of ``key`` with ``time_from <= start <= time_to`` (bounds
        rounded to the millisecond, like starts), in start order, buffered writes included."""
        # The buffered writes are taken before the store is read: an earlier record may
        # retire while the store's read awaits I/O, its write leaving the overlay for a
        # store whose read has already passed it (SQLite), and would be seen by neither.
        buffered = self._overlay.pending_windows(key)
        merged: dict[float, Any] = {}
        async for start, value in self._store.fetch(key, time_from, time_to):
            merged[start] = value
        lo = max(bound_ms(time_from) / 1000, self._store.retained_from)
        hi = bound_ms(time_to) / 1000
        for start, value in buffered:
            if lo <= start <= hi:
                merged[start] = value
        return [(start, merged[start]) for start in sorted(merged)
                if merged[start] is not TOMBSTONE]

    async def approximate_num_entries(self) -> int:
        return await self._store.approximate_num_entries()

    async def fetch_all(self, time_from: float,
                        time_to: float) -> list[tuple[Any, float, Any]]:
        """``(key, window_start, value)`` of every key's windows with ``time_from <= start
        <= time_to``, buffered writes included, in no particular order (the store's time
        index: costs the windows in range plus the buffered writes, not the whole store)."""
        lo = max(bound_ms(time_from) / 1000, self._store.retained_from)
        hi = bound_ms(time_to) / 1000
        identity = self._overlay.identity
        # before the store's read: see fetch
        buffered = self._overlay.pending_between(lo, hi)
        merged: dict[Any, tuple[Any, float, Any]] = {}
        async for (key, start), value in self._stored_between(time_from, time_to):
            if lo <= start <= hi:
                merged[identity((key, start))] = (key, start, value)
        for (key, start), value in buffered:
            merged[identity((key, start))] = (key, start, value)
        return [entry for entry in merged.values() if entry[2] is not TOMBSTONE]

    def _stored_between(self, time_from: float,
                        time_to: float) -> AsyncIterator[tuple[tuple[Any, float], Any]]:
        """The store's windows in the time range: its ``fetch_all`` (a time index), or for
        a user's store written before ``fetch_all`` joined the protocol, a full scan."""
        fetch_all = getattr(self._store, "fetch_all", None)
        if fetch_all is None:
            return self._store.range(None, None)
        windows: AsyncIterator[tuple[tuple[Any, float], Any]] = fetch_all(time_from, time_to)
        return windows


def _read_now(overlay: StoreOverlay) -> Callable[[Any], Any]:
    get_now = overlay.get_now
    if get_now is None:
        store = overlay.store
        raise TypeError(
            f"store {store.name!r} ({type(store).__name__}) can only be read by awaiting "
            "get(): give it a get_now(key) that answers without awaiting (the in-memory "
            "and SQLite stores have one), or read it from an async processor"
        )
    return get_now


def view_for(overlay: StoreOverlay) -> Any:
    """The view processors get for ``overlay``'s store, chosen by its kind."""
    if overlay.kind is StoreKind.VERSIONED:
        from aiostreams.state.versioned_view import VersionedStoreView

        return VersionedStoreView(overlay)
    if overlay.kind is StoreKind.WINDOW:
        return WindowStoreView(overlay)
    return KeyValueStoreView(overlay)
