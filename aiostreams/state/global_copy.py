"""A global table's local state across restarts: a SQLite store and an offsets checkpoint.

Kafka Streams keeps a global store on disk with a checkpoint of the global consumer's
offsets and, on start, reads the topic only from there. aiostreams does the same when the
table is persistent (:meth:`aiostreams.App.global_table`, by default when the app has a
``state_dir``): the rows live in ``<state_dir>/global-<topic>/global-<topic>.sqlite``
(serialized key -> value, a :class:`~aiostreams.state.sqlite.SQLiteKeyValueStore`) and the
offsets in ``<state_dir>/global-<topic>/.checkpoint``
(:class:`~aiostreams.state.checkpoint.Checkpoint`: per partition, the next offset to read).

1. **Open** (:meth:`LocalCopy.open`): open the file, read the checkpoint, compare it with
   the topic's beginning and end offsets. The rows are kept and the offsets taken as the
   table's start only when the file and the checkpoint agree with the topic; otherwise the
   file is wiped and the topic read from its beginning, with a warning saying why: no
   usable checkpoint (missing or corrupt: the rows' offsets are unknown), a new or
   unreadable SQLite file beside a checkpoint, another partition count, a checkpoint
   *ahead* of a partition's end (the topic was deleted and recreated, or truncated), or
   *behind* its beginning (records were deleted unread).
2. **Save** (:meth:`LocalCopy.save`): flush the rows, *then* write the checkpoint of the
   offsets they contain. A crash between the two leaves the file ahead of the checkpoint;
   the next start reads a few records again, which a table applies idempotently (each is
   an upsert or delete, in offset order). The updater saves after the bootstrap, every
   ``commit_interval_ms`` while it keeps up, and when it stops.

Workers of one host may share the ``state_dir``: the directory is held by one of them at a
time (:class:`~aiostreams.state.task_directory.TaskDirectory`); another keeps its copy in a
private directory, bootstrapped from the topic.

Invariant: a checkpoint never names an offset whose record the file does not hold (the
checkpoint is written only after the flush of every record before it).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from aiostreams.serde import BytesSerde, Serde
from aiostreams.state.base import StoreContext
from aiostreams.state.checkpoint import CHECKPOINT_FILE, Checkpoint
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.task_directory import TaskDirectory
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.global_table")


class LocalCopy:
    """The SQLite file and checkpoint of one global table (see the module docstring)."""

    def __init__(self, topic: str, value_serde: Serde[Any], state_dir: Path) -> None:
        self.topic = topic
        self.name = f"global-{topic}"
        self.rows = SQLiteKeyValueStore(self.name, BytesSerde(), value_serde)
        # every worker keeps its own copy: workers of one host sharing a state_dir take turns
        # at the directory's lock, and one that finds it held reads into a private copy
        self.directory = TaskDirectory(state_dir, self.name)
        self.context = StoreContext(task_id=self.name, state_dir=state_dir, partition=0)
        self.checkpoint = Checkpoint(self.directory.path / CHECKPOINT_FILE)

    async def open(self, beginnings: dict[TopicPartition, int],
                   ends: dict[TopicPartition, int]) -> dict[int, int]:
        """Open the file; the offsets per partition to read on from (``{}``: from the
        beginning, the file then empty). Cancellation: the file may be left open; call
        :meth:`close`."""
        await asyncio.to_thread(self.directory.acquire)
        self.context = StoreContext(task_id=self.name, state_dir=self.directory.root,
                                    partition=0)
        self.checkpoint = Checkpoint(self.directory.path / CHECKPOINT_FILE)
        await self.rows.open(self.context)
        saved = await asyncio.to_thread(self.checkpoint.read)
        why = self._unusable(saved, beginnings, ends)
        if why is None:
            return {tp.partition: offset for tp, offset in saved.items()}
        if why:
            log.warning("global table %r: %s; wiping %s and reading the topic from its "
                        "beginning", self.topic, why, self.rows.path)
        await self.rows.wipe()
        await asyncio.to_thread(self.checkpoint.path.unlink, True)
        return {}

    def _unusable(self, saved: dict[TopicPartition, int],
                  beginnings: dict[TopicPartition, int],
                  ends: dict[TopicPartition, int]) -> str | None:
        """Why the local copy cannot be used (``""``: there is none), or ``None``."""
        if not saved:
            return "" if self.rows.fresh else "no usable checkpoint for the local rows"
        if self.rows.fresh:
            return "the SQLite file is new or was unreadable, but a checkpoint exists"
        if set(saved) != set(ends):
            return (f"the checkpoint has partitions {sorted(tp.partition for tp in saved)}, "
                    f"the topic {sorted(tp.partition for tp in ends)}")
        for tp, offset in sorted(saved.items()):
            if offset > ends[tp]:
                return (f"the checkpoint of partition {tp.partition} (offset {offset}) is "
                        f"ahead of its end ({ends[tp]}): the topic was recreated or "
                        "truncated")
            if offset < beginnings.get(tp, 0):
                return (f"the checkpoint of partition {tp.partition} (offset {offset}) is "
                        f"behind its beginning ({beginnings[tp]}): records were deleted "
                        "before they were read")
        return None

    async def save(self, offsets: dict[int, int]) -> None:
        """Flush the rows, then checkpoint ``offsets`` (one past the last record applied
        per partition). Cancellation: the flush completes or is redone by the next save;
        a checkpoint write already in its thread still completes (before any later one:
        :class:`~aiostreams.state.checkpoint.Checkpoint` serializes them)."""
        snapshot = {TopicPartition(self.topic, p): o for p, o in offsets.items()}
        await self.rows.flush()
        await asyncio.to_thread(self.checkpoint.write, snapshot)

    async def close(self) -> None:
        try:
            await self.rows.close()
        finally:
            await asyncio.to_thread(self.directory.release)


__all__ = ["LocalCopy"]
