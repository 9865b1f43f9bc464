"""Statements on a store's SQLite file that hold no store state: one value of a query,
key ranges read page by page, a flush's rows in key order, and deleting the file.

The file's one table is ``kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID`` (see
:mod:`aiostreams.state.sqlite`); keys compare as ``memcmp`` of their bytes, as Python
compares ``bytes``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

import aiosqlite

__all__ = ["PAGE_ROWS", "delete_files", "in_key_order", "rows_between", "scalar"]

PAGE_ROWS: Final = 512
"""Rows per query while ``rows_between`` walks the file."""

_SQLITE_FILE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")

Row = TypeVar("Row", bound=tuple[bytes, ...])
"""The parameters of one ``executemany`` row, the key first."""


async def scalar(db: aiosqlite.Connection, sql: str) -> Any:
    """The first column of the first row ``sql`` returns, or None."""
    rows: Iterable[Any] = await db.execute_fetchall(sql)
    for row in rows:
        return row[0]
    return None


async def rows_between(db: aiosqlite.Connection, lo: bytes | None,
                       hi: bytes | None) -> AsyncIterator[tuple[bytes, bytes]]:
    """The file's ``(k, v)`` with ``lo <= k <= hi`` (None: unbounded), in key order."""
    # Keyset pagination: each page is a complete statement, so no cursor stays open
    # across an await while a flush commits on the same connection.
    lower, bound = ("k >= ?", lo) if lo is not None else ("1", None)
    while True:
        where = [lower]
        params: list[Any] = [] if bound is None else [bound]
        if hi is not None:
            where.append("k <= ?")
            params.append(hi)
        rows = list(await db.execute_fetchall(
            f"SELECT k, v FROM kv WHERE {' AND '.join(where)} ORDER BY k LIMIT "
            f"{PAGE_ROWS}", params))
        for k, v in rows:
            yield k, v
        if len(rows) < PAGE_ROWS:
            return
        lower, bound = "k > ?", rows[-1][0]


def in_key_order(rows: list[Row]) -> Iterator[Row]:
    """``rows`` sorted by key, sorted when first iterated: on the thread that runs
    ``executemany``, not on the event loop. SQLite writes a B-tree's pages in key order
    with fewer page splits and cache misses (100k random 8-byte keys: ~1.3x as fast).
    Keys must be distinct (so no comparison reaches a value); ``rows`` is sorted in
    place, so the caller must not share it."""
    rows.sort()
    yield from rows


def delete_files(path: Path) -> None:
    """Delete the database at ``path`` and its WAL, shared-memory and journal files."""
    for suffix in _SQLITE_FILE_SUFFIXES:
        path.with_name(path.name + suffix).unlink(missing_ok=True)
