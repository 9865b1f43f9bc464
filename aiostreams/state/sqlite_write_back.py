"""A SQLite store's write-back: the transactions that move buffered writes to its file.

``flush`` writes everything pending; under exactly-once, ``seal`` (at the commit's snapshot)
sets apart what a Kafka transaction holds and ``flush_sealed`` (once it committed) writes only
that, with the changelog mark, in one SQLite transaction (see
:mod:`aiostreams.state.changelog_mark`). Mixed into
:class:`~aiostreams.state.sqlite.SQLiteKeyValueStore`, whose docstring states the invariants
of ``_pending``, ``_flushing`` and ``_sealed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Final

import aiosqlite

from aiostreams.state.changelog_mark import ChangelogMark, write_mark
from aiostreams.state.sqlite_file import in_key_order

__all__ = ["MISS", "Pending", "SQLiteWriteBack"]

Pending = dict[bytes, bytes | None]
"""Serialized key -> serialized value, or None for a delete."""

MISS: Final = object()  # not in this dict


class SQLiteWriteBack:
    """The flushes of a store's buffered writes (module doc); the store provides the
    connection (``_require_open``) and the hooks' overrides."""

    _pending: Pending
    _flushing: Pending
    _sealed: Pending
    _flushes: int
    _flush_lock: asyncio.Lock
    _write_task: asyncio.Task[None] | None
    changelog_mark: ChangelogMark | None

    def _require_open(self) -> aiosqlite.Connection:
        raise NotImplementedError

    async def flush(self, mark: ChangelogMark | None = None) -> None:
        """Commit every pending write, and ``mark`` when given, in one transaction.

        Cancellation: the transaction itself is shielded and runs to its end (commit, or
        rollback on error); the cancelled call puts its batch back in front of newer
        pending writes, so nothing is lost and a later flush writes it (again, harmlessly).
        On an error the batch is likewise kept for the next flush, and the error raised.
        """
        async with self._flush_lock:
            db = self._require_open()
            await self._settle()
            self._sealed = {}  # older values of keys this flush writes
            if not (self._pending or self._needs_housekeeping(sealed=False)
                    or self._new_mark(mark)):
                return
            batch, self._pending = self._pending, {}
            self._flushing = batch
            task = asyncio.get_running_loop().create_task(
                self._commit(db, batch, mark, sealed=False))
            task.add_done_callback(_retrieve_exception)
            self._write_task = task
            try:
                await asyncio.shield(task)
            except BaseException:
                batch.update(self._pending)  # writes applied meanwhile are newer
                self._pending = batch
                raise
            finally:
                self._flushing = {}
            self._flushes += 1
            self._flushed(batch)
            self.changelog_mark = mark or self.changelog_mark

    def seal(self) -> None:
        """Set apart the writes applied so far for :meth:`flush_sealed` (O(pending))."""
        self._sealed = dict(self._pending)
        self._sealing()

    async def flush_sealed(self, mark: ChangelogMark | None) -> None:
        """Commit the sealed writes, and ``mark`` when given, in one transaction; writes
        applied after the seal stay pending.

        Cancellation: as :meth:`flush` (the transaction runs to its end); the sealed
        writes are still pending either way, so a later seal takes them again."""
        async with self._flush_lock:
            db = self._require_open()
            await self._settle()
            batch, self._sealed = self._sealed, {}
            if not (batch or self._needs_housekeeping(sealed=True) or self._new_mark(mark)):
                return
            task = asyncio.get_running_loop().create_task(
                self._commit(db, batch, mark, sealed=True))
            task.add_done_callback(_retrieve_exception)
            self._write_task = task
            await asyncio.shield(task)
            self._flushes += 1
            pending = self._pending
            for kb, vb in batch.items():
                if pending.get(kb, MISS) == vb:  # not written again since the seal
                    del pending[kb]
            self._flushed(batch)
            self.changelog_mark = mark or self.changelog_mark

    def _new_mark(self, mark: ChangelogMark | None) -> bool:
        return mark is not None and mark != self.changelog_mark

    async def _commit(self, db: aiosqlite.Connection, batch: Pending,
                      mark: ChangelogMark | None, *, sealed: bool) -> None:
        # Lists made here, before the first await: a cancelled flush merges newer writes
        # into ``batch`` while this transaction still runs. They are sorted on the
        # store's thread (SQLite inserts keys in B-tree order about 1.5x as fast).
        puts = [(k, v) for k, v in batch.items() if v is not None]
        deletes = [(k,) for k, v in batch.items() if v is None]
        await db.execute("BEGIN")
        try:
            if puts:
                await db.executemany(
                    "INSERT INTO kv (k, v) VALUES (?, ?) "
                    "ON CONFLICT (k) DO UPDATE SET v = excluded.v", in_key_order(puts))
            if deletes:
                await db.executemany("DELETE FROM kv WHERE k = ?", in_key_order(deletes))
            await self._housekeep(db, sealed=sealed)
            if mark is not None:
                await write_mark(db, mark)
            await db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error, ValueError):
                await db.execute("ROLLBACK")
            raise

    def _needs_housekeeping(self, *, sealed: bool) -> bool:
        """Hook: whether a flush has work besides pending writes (window retention);
        ``sealed``: a sealed flush, which goes only as far as the seal saw."""
        return False

    async def _housekeep(self, db: aiosqlite.Connection, *, sealed: bool) -> None:
        """Hook: more statements inside the flush transaction."""

    def _sealing(self) -> None:
        """Hook: note what a sealed flush's housekeeping may go up to (at ``seal``)."""

    def _flushed(self, batch: Pending) -> None:
        """Hook: ``batch`` is committed."""

    async def _settle(self) -> None:
        """Wait for the transaction of a cancelled flush to end (its outcome is known:
        its batch is back in pending either way)."""
        task = self._write_task
        if task is not None and not task.done():
            await asyncio.wait([task])


def _retrieve_exception(task: asyncio.Task[None]) -> None:
    # The flush that started the task reports its error; this only marks it as seen
    # when that flush was cancelled and is no longer there to await it.
    if not task.cancelled():
        task.exception()
