"""Changelog marks: how far a store file holds its changelog, written in the same SQLite
transaction as the data it speaks for.

A mark names the store's changelog partition, an ``offset`` and an owner ``epoch``: the
file holds the effect of every *committed* record of that partition below ``offset``, and
``epoch`` is the highest owner epoch among them (a replay from ``offset`` skips records
of a lower one, see :mod:`~aiostreams.state.owner_epoch`). It is a row of the file's
``meta`` table (``name = 'changelog'``), so the data and its mark are durable together or
not at all: no crash can leave one without the other.

How exactly-once keeps aborted writes out of a store (:class:`TransactionalStore`): at
the commit's snapshot the engine **seals** each store - the writes applied so far are the
ones whose changelog records and input offsets go into the transaction being committed;
later writes belong to the next one. Only after the Kafka transaction has committed does
:meth:`TransactionalStore.flush_sealed` write the sealed writes, and the mark, to the
file. So a store file never holds a write of a transaction that did not commit; a crash
before the SQLite commit leaves the file *behind* the changelog, never ahead, and the next
owner replays the committed tail from the mark.

A mark's offset may be lower than the true position (it is taken while the transaction
commits: the changelog's stable end may not include it yet); replaying records the file
already holds re-applies absolute values, which changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

import aiosqlite
import orjson

from aiostreams.types import TopicPartition

__all__ = ["MARK_ROW", "ChangelogMark", "TransactionalStore", "read_mark", "write_mark"]

MARK_ROW: Final = "changelog"
"""The ``meta`` row of a store file that holds its mark."""


@dataclass(frozen=True)
class ChangelogMark:
    """The file holds every committed record of ``topic``[``partition``] below
    ``offset``; ``epoch`` is the highest owner epoch among them."""

    topic: str
    partition: int
    offset: int
    epoch: int

    def __post_init__(self) -> None:
        if self.offset < 0 or self.partition < 0:
            raise ValueError(f"a changelog mark needs a partition and offset >= 0, got "
                             f"{self.topic}[{self.partition}]@{self.offset}")

    @classmethod
    def at(cls, tp: TopicPartition, offset: int, epoch: int) -> ChangelogMark:
        return cls(tp.topic, tp.partition, offset, epoch)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def encode(self) -> str:
        return orjson.dumps({"topic": self.topic, "partition": self.partition,
                             "offset": self.offset, "epoch": self.epoch}).decode()

    @classmethod
    def decode(cls, text: str) -> ChangelogMark | None:
        """The mark ``text`` holds, or None when it is not one (then the file is not
        trusted: its store is restored from the changelog's start)."""
        try:
            doc: Any = orjson.loads(text)
            return cls(str(doc["topic"]), int(doc["partition"]), int(doc["offset"]),
                       int(doc["epoch"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


async def read_mark(db: aiosqlite.Connection) -> ChangelogMark | None:
    """The mark of the file ``db`` is connected to (None: it has none)."""
    rows = await db.execute_fetchall("SELECT value FROM meta WHERE name = ?", (MARK_ROW,))
    for (text,) in rows:
        return ChangelogMark.decode(text)
    return None


async def write_mark(db: aiosqlite.Connection, mark: ChangelogMark) -> None:
    """Set the file's mark; call it inside the transaction that writes what it speaks for."""
    await db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                     (MARK_ROW, mark.encode()))


@runtime_checkable
class TransactionalStore(Protocol):
    """A store whose file never holds an uncommitted write under exactly-once (module doc).

    Invariants: after :meth:`seal`, the sealed writes are exactly those applied before it
    (later ones are not written by :meth:`flush_sealed`); ``changelog_mark`` is the mark
    of the file as last committed (None: it has none, or the store keeps no file)."""

    changelog_mark: ChangelogMark | None

    def seal(self) -> None:
        """Set apart the writes applied so far: the next :meth:`flush_sealed` writes these
        and nothing applied later. Synchronous (it pairs with the commit's snapshot)."""
        ...

    async def flush_sealed(self, mark: ChangelogMark | None) -> None:
        """Write the sealed writes, and ``mark`` when given, in one transaction (after the
        Kafka transaction that holds them has committed)."""
        ...

    async def flush(self, mark: ChangelogMark | None = None) -> None:
        """Write every applied write, and ``mark`` when given, in one transaction."""
        ...
