"""A persistent key-value store on SQLite (through aiosqlite), with a write-back buffer.

One database file per task and store, ``<state_dir>/<task_id>/<store>.sqlite``, in WAL mode
with ``synchronous=FULL``: a flush (one transaction per commit, never one per record) is
durable even across a power loss, so the checkpoint written after it never claims more than
the file holds. Keys and values are BLOBs, the bytes of the store's serdes.

The per-record path never waits for SQLite:

* ``apply`` serializes the write (so a value the serde refuses fails at retire, naming the
  store) and records it in the *pending* dict, newest write per key; it also refreshes the
  read cache (write-through).
* ``get`` looks in the LRU read cache, then in the pending writes, then reads the file
  with one indexed point query on a read-only connection of the event loop's thread
  (``_reader``): a B-tree lookup, microseconds from SQLite's page cache, where a trip
  through aiosqlite's thread costs tens of microseconds of CPU and suspends the record (a
  windowed aggregate, which takes its records one at a time, waits for every such trip in
  turn). WAL lets it read the last committed state while a flush writes on the store's
  thread; what that flush holds is still in ``_flushing``, which is looked at first.
* ``flush`` (the engine's commit) writes everything pending in one transaction with
  ``executemany``: one commit per flush, never one per record.
* under exactly-once, ``seal`` (at the commit's snapshot) sets apart what a transaction
  holds and ``flush_sealed`` (once it committed) writes only that, with the changelog
  mark, in one SQLite transaction (:mod:`aiostreams.state.changelog_mark`).

Keys are identified by their serialized bytes, in memory as on disk, and ``range`` walks
them in that byte order (SQLite compares BLOBs with ``memcmp``), merging the pending writes
in. For ``str`` keys under ``StrSerde`` the order is Python's; see
:mod:`aiostreams.state.base` for JSON keys.

Invariants:

* a cache entry is the latest applied value of its key (``_ABSENT``: known to be missing);
* ``_pending`` holds the writes applied since the last flush began, ``_flushing`` the batch
  being committed; a key's newest write is in ``_pending``, else ``_flushing``, else the
  file;
* ``_sealed`` is a copy of ``_pending`` taken at ``seal``: a sealed write stays in
  ``_pending`` until the file holds it, so reads never look at ``_sealed``, and a sealed
  flush that fails loses nothing (the next seal takes the write again); ``flush`` clears
  it (it writes newer values of the same keys);
* the file's ``meta`` row ``changelog`` (``changelog_mark``) is written only in the
  transaction that writes the data it speaks for;
* flushes never overlap (``_flush_lock``), so batches reach the file in apply order;
* ``_reader`` is open exactly while ``_db`` is (a wipe closes both before deleting the
  files); it only ever reads.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final

import aiosqlite

from aiostreams.errors import ConfigError
from aiostreams.serde import Serde
from aiostreams.state.base import (
    TOMBSTONE,
    StoreContext,
    StoreKind,
    StoreState,
    StoreStateError,
    restore_each,
)
from aiostreams.state.changelog_mark import ChangelogMark, read_mark
from aiostreams.state.core import StoreCore
from aiostreams.state.sqlite_file import (
    SCHEMA_VERSION,
    delete_files,
    prepare_file,
    rows_between,
    scalar,
)
from aiostreams.state.sqlite_write_back import MISS as _MISS
from aiostreams.state.sqlite_write_back import Pending, SQLiteWriteBack
from aiostreams.types import RawRecord

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_CACHE_SIZE", "SQLiteKeyValueStore"]

DEFAULT_CACHE_SIZE: Final = 10_000
"""Entries the read cache of one store keeps (values known present or absent)."""

_CORRUPT: Final = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Final = _Absent()  # a cached "no such key"



def _open_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection to the store's file (WAL already set by the writer), for
    point reads on the event loop's thread. Its statements run in autocommit: each sees
    the last committed state and holds no lock after it."""
    reader = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                             isolation_level=None)
    reader.execute("PRAGMA busy_timeout=5000")  # only while the WAL is being recovered
    return reader


class SQLiteKeyValueStore(SQLiteWriteBack, StoreCore):
    """Key-value state in a SQLite file, with a pending write-back dict and a read cache.

    ``cache_size`` bounds the read cache (entries; 0 disables it). Values read back from the
    file are what the value serde decodes (JSON turns tuples into lists).
    """

    kind: StoreKind = StoreKind.KEY_VALUE
    persistent = True

    def __init__(
        self,
        name: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(name, key_serde, value_serde)
        if not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigError(
                f"store {name!r}: cache_size must be an int >= 0 (entries), got {cache_size!r}"
            )
        self.cache_size = cache_size
        self.path: Path | None = None
        self._db: aiosqlite.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._pending: Pending = {}
        self._flushing: Pending = {}
        self._sealed: Pending = {}
        self.changelog_mark: ChangelogMark | None = None
        self._cache: OrderedDict[bytes, Any] = OrderedDict()
        self._flushes = 0  # completed flushes and wipes: a DB read older than one is stale
        self._flush_lock = asyncio.Lock()
        self._write_task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self, context: StoreContext) -> None:
        """Open (or create) ``<state_dir>/<task_id>/<name>.sqlite``.

        A file SQLite cannot read (not a database, corrupt) is deleted with a warning and
        replaced by an empty one, and ``fresh`` is set: restore it from the changelog's
        start. A file of a newer schema is a :class:`ConfigError` (it is left untouched).
        Cancellation: the store stays CREATED and no connection is left open.
        """
        self._require_created()
        path = context.task_dir(self.name) / f"{self.name}.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db, self.fresh = await self._connect(path)
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorname", "") not in _CORRUPT:
                exc.add_note(f"store {self.name!r}: opening {path}")
                raise
            log.warning("store %r: %s is not a readable SQLite database (%s); deleting it "
                        "and restoring the store from its changelog", self.name, path, exc)
            delete_files(path)
            self._db, self.fresh = await self._connect(path)
        self.path = path
        self.state = StoreState.OPEN

    async def _connect(self, path: Path) -> tuple[aiosqlite.Connection, bool]:
        """A configured connection to ``path``, and whether its table was just created."""
        db = await aiosqlite.connect(path, isolation_level=None)
        try:
            created = await prepare_file(db, path, self.name, self.store_format)
            await self._create_schema(db)
            await db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            await self._load(db)
            self.changelog_mark = None if created else await read_mark(db)
            self._reader = _open_reader(path)
        except BaseException:
            await db.close()
            raise
        return db, created

    async def _create_schema(self, db: aiosqlite.Connection) -> None:
        """Hook: more schema on top of the ``kv`` table (the window store's index)."""

    async def _load(self, db: aiosqlite.Connection) -> None:
        """Hook: read what the store keeps in memory from the file (at open and wipe)."""

    async def close(self) -> None:
        """Close the file. Writes not flushed are discarded (the file keeps the last
        commit). Idempotent. Cancellation: the connection is closed anyway (in its thread)."""
        if self.state is StoreState.CLOSED:
            return
        self.state = StoreState.CLOSED
        await self._settle()
        db, self._db = self._db, None
        self._close_reader()
        self._pending = {}
        self._sealed = {}
        self._cache.clear()
        if db is not None:
            await db.close()

    def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    async def wipe(self) -> None:
        """Delete the file (and its WAL) and everything buffered; continue on a new empty
        file, ``fresh``. Cancellation: may leave the store without a file; close it."""
        async with self._flush_lock:
            await self._settle()
            db = self._require_open()
            assert self.path is not None
            self._db = None
            self._close_reader()
            await db.close()
            delete_files(self.path)
            self._pending = {}
            self._flushing = {}
            self._sealed = {}
            self._cache.clear()
            self._flushes += 1
            self._reset()
            self._db, _ = await self._connect(self.path)
            self.fresh = True

    def _reset(self) -> None:
        """Hook: forget in-memory bookkeeping (at wipe)."""

    def _require_open(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreStateError(
                f"store {self.name!r} is {self.state.value}: open() it before use (the task "
                "opens its stores in initialize())"
            )
        return self._db

    # -- keys -----------------------------------------------------------------------------

    def _encode_key(self, key: Any) -> bytes:
        return self._key_bytes(key)

    def _decode_key(self, data: bytes) -> Any:
        return self.key_serde.deserialize(self.name, data)

    def sort_key(self, key: Any) -> bytes:
        return self._encode_key(key)

    # -- the per-record path --------------------------------------------------------------

    def apply(self, key: Any, value: Any) -> None:
        self._write(self._encode_key(key), value)

    def apply_logged(self, key: Any, value: Any) -> tuple[bytes, bytes | None]:
        """:meth:`apply`, returning the write's changelog record (what
        ``changelog_record`` gives) from the bytes just stored: serialized once."""
        kb = self._encode_key(key)
        return kb, self._write(kb, value)

    def _write(self, kb: bytes, value: Any) -> bytes | None:
        """Buffer the write of ``kb``; its value bytes (None for a delete)."""
        vb: bytes | None = None
        if value is TOMBSTONE:
            self._pending[kb] = None
            value = _ABSENT
        else:
            vb = self._value_bytes(value)
            self._pending[kb] = vb
        cache = self._cache
        cache[kb] = value
        cache.move_to_end(kb)
        if len(cache) > self.cache_size:
            cache.popitem(last=False)
        return vb

    def _value_bytes(self, value: Any) -> bytes:
        vb = self.value_serde.serialize(self.name, value)
        if vb is None:
            raise ValueError(
                f"store {self.name!r}: the value serde wrote None for {value!r}; delete "
                "the key instead of storing None"
            )
        return vb

    @property
    def pending_writes(self) -> int:
        """Distinct keys written (or restored) since the last flush began: what a flush
        will write, and what the restore bounds memory by."""
        return len(self._pending)

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        """Buffer one changelog record as pending (no decoding); ``flush`` after restore."""
        kb = self._changelog_key(key)
        self._pending[kb] = value
        self._cache.pop(kb, None)

    def restore_batch(self, records: Sequence[RawRecord]) -> int:
        """Buffer changelog ``records`` (in offset order) as :meth:`restore` does each, and
        return their key and value bytes (what a replay bounds its memory by). A null key
        raises ``ValueError``; the records before it are buffered."""
        if type(self).restore is not SQLiteKeyValueStore.restore:
            return restore_each(self, records)  # a subclass reads its records' keys
        # entries of restored keys are stale: dropping all of them is cheaper than a pop
        # per record, and always safe (the cache only repeats the pending writes and file)
        self._cache.clear()
        pending = self._pending
        size = 0
        for record in records:
            key, value = record.key, record.value
            if key is None:
                key = self._changelog_key(key)  # raises
            pending[key] = value
            size += len(key)
            if value is not None:
                size += len(value)
        return size

    async def get(self, key: Any) -> Any | None:
        """The applied value of ``key``. Cancellation: returns nothing, changes nothing."""
        return self._lookup(self._encode_key(key))

    def get_now(self, key: Any) -> Any | None:
        """:meth:`get` without awaiting (a point read never leaves the loop's thread)."""
        return self._lookup(self._encode_key(key))

    def _lookup(self, kb: bytes) -> Any | None:
        cache = self._cache
        cached = cache.get(kb, _MISS)
        if cached is not _MISS:
            cache.move_to_end(kb)
            return None if cached is _ABSENT else cached
        vb = self._pending.get(kb, _MISS)
        if vb is _MISS:
            vb = self._flushing.get(kb, _MISS)
        if vb is not _MISS:  # written, but evicted from the cache (or restored)
            assert vb is None or isinstance(vb, bytes)
            return None if vb is None else self.value_serde.deserialize(self.name, vb)
        self._require_open()
        reader = self._reader
        assert reader is not None, "a store with a connection has a reader"
        row = reader.execute("SELECT v FROM kv WHERE k = ?", (kb,)).fetchone()
        value = None if row is None else self.value_serde.deserialize(self.name, row[0])
        # nothing ran since the lookups above (no await): nothing newer can be pending
        cache[kb] = _ABSENT if value is None else value
        if len(cache) > self.cache_size:
            cache.popitem(last=False)
        return value

    # -- range ----------------------------------------------------------------------------

    async def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` in serialized-key byte order, pending writes
        included. Not a snapshot: writes applied while the caller iterates may or may not
        be seen."""
        lo = None if start is None else self._encode_key(start)
        hi = None if end is None else self._encode_key(end)
        async for kb, value in self._range_bytes(lo, hi):
            yield self._decode_key(kb), value

    def _buffered_between(self, lo: bytes | None, hi: bytes | None) -> Pending:
        """The unflushed writes with ``lo <= key <= hi`` (the newest per key)."""
        found = {k: v for k, v in self._flushing.items()
                 if (lo is None or k >= lo) and (hi is None or k <= hi)}
        found.update((k, v) for k, v in self._pending.items()
                     if (lo is None or k >= lo) and (hi is None or k <= hi))
        return found

    async def _range_bytes(self, lo: bytes | None,
                           hi: bytes | None) -> AsyncIterator[tuple[bytes, Any]]:
        """``(key bytes, value)`` with ``lo <= key <= hi`` in byte order: the file's rows
        merged with the buffered writes (which win), deletes left out."""
        if lo is not None and hi is not None and lo > hi:
            return
        buffered = sorted(self._buffered_between(lo, hi).items())
        decode = self.value_serde.deserialize
        i = 0
        async for kb, vb in rows_between(self._require_open(), lo, hi):
            while i < len(buffered) and buffered[i][0] < kb:
                bk, bv = buffered[i]
                i += 1
                if bv is not None:
                    yield bk, decode(self.name, bv)
            if i < len(buffered) and buffered[i][0] == kb:
                newer = buffered[i][1]
                i += 1
                if newer is None:
                    continue
                vb = newer
            yield kb, decode(self.name, vb)
        for bk, bv in buffered[i:]:
            if bv is not None:
                yield bk, decode(self.name, bv)

    async def approximate_num_entries(self) -> int:
        """Rows in the file plus pending puts (keys both pending and on file count twice)."""
        db = self._require_open()
        on_file = await scalar(db, "SELECT count(*) FROM kv")
        return int(on_file) + sum(1 for v in self._pending.values() if v is not None)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r} {self.state.value} "
                f"pending={len(self._pending)} path={self.path}>")
