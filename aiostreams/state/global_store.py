"""The store of a global table: every partition of its topic, held in full on every worker
(see :mod:`aiostreams.engine.global_updater` for how it is filled and kept up, and
:mod:`aiostreams.state.global_copy` for its copy on disk).

Records are applied by Kafka's rules for table sources: a null key is skipped, a null value
deletes the key. The store is keyed by the *serialized* key (as Kafka's stores are). A
record that cannot be decoded is skipped and counted (``GlobalStore.skipped``), never a
crash of the updater.

Invariant (asserted): the store's offset of a partition only increases, and is one past the
last record applied.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from aiostreams.errors import SerializationError
from aiostreams.state.base import TOMBSTONE
from aiostreams.state.global_copy import LocalCopy
from aiostreams.topic import Topic

__all__ = ["GlobalStore"]

log = logging.getLogger("aiostreams.global_table")


class GlobalStore:
    """One worker's copy of a global table: serialized key -> value, and per partition the
    offset after the last record applied. The rows are in memory, or - with ``state_dir``
    - in a SQLite file kept across restarts with a checkpoint of ``offsets``
    (:mod:`aiostreams.state.global_copy`). ``fetched`` counts the records applied
    since this process started (what was read from the topic, not from the local file)."""

    def __init__(self, topic: Topic, state_dir: Path | None = None) -> None:
        self.topic = topic
        self.data: dict[bytes, Any] = {}
        self.persisted = (None if state_dir is None
                          else LocalCopy(topic.name, topic.value_serde, state_dir))
        """The local copy to keep across restarts (none: in memory only)."""
        self.local: LocalCopy | None = None
        """The local copy while the updater has it open (the rows are in ``data`` until
        then: the test driver's feeder never opens one)."""
        self.offsets: dict[int, int] = {}
        self.skipped = 0
        self.fetched = 0
        self.updated = asyncio.Event()
        """Set whenever a record is applied (cleared by whoever waits on it)."""

    def apply(self, partition: int, offset: int, key: bytes | None,
              value: bytes | None) -> None:
        """Apply the record at ``offset`` of ``partition`` (see the module docstring)."""
        assert offset >= self.offsets.get(partition, 0), (partition, offset, self.offsets)
        self.offsets[partition] = offset + 1
        self.fetched += 1
        self.updated.set()
        if key is None:
            self.skipped += 1
            return
        if value is None:
            if self.local is None:
                self.data.pop(key, None)
            else:
                self.local.rows.apply(key, TOMBSTONE)
            return
        try:
            decoded = self.topic.value_serde.deserialize(self.topic.name, value)
        except Exception as e:
            self.skipped += 1
            log.warning("global table %r: skipped the undecodable record at partition %d "
                        "offset %d: %s", self.topic.name, partition, offset, e)
            return
        if self.local is None:
            self.data[key] = decoded
        else:
            self.local.rows.apply(key, decoded)

    async def get(self, key: Any, node: str) -> Any | None:
        """The value of ``key`` (encoded by the topic's key serde), or ``None``.
        Cancellation: returns nothing, changes nothing."""
        try:
            raw = self.topic.key_serde.serialize(self.topic.name, key)
        except Exception as e:
            raise SerializationError(
                f"{node}: the key selector returned {type(key).__name__} {key!r}, which the "
                f"key serde of global table {self.topic.name!r} cannot encode ({e}); return "
                "a key of the table's key type", topic=self.topic.name) from e
        if raw is None:
            return None
        if self.local is None:
            return self.data.get(raw)
        return await self.local.rows.get(raw)
