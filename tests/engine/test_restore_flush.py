"""How a replay flushes a SQLite store: it keeps the newest update per key in memory and
writes once it holds ``RESTORE_FLUSH_KEYS`` distinct keys (or ``RESTORE_FLUSH_BYTES``), so
a changelog that repeats keys writes each key once, and memory stays bounded.

Real SQLite files, the memory broker's changelog; the bounds are lowered for the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiostreams.engine import restore as restore_module
from aiostreams.engine.restore import Restorer
from aiostreams.serde import BytesSerde
from aiostreams.state.base import StoreContext
from aiostreams.state.changelog_mark import ChangelogMark
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

TP = TopicPartition("changelog", 0)
POLL = 2000  # the memory consumer's default max_poll_records: the check runs per batch


class CountingStore(SQLiteKeyValueStore):
    """Notes how many distinct writes each flush wrote."""

    def __init__(self) -> None:
        super().__init__("s", BytesSerde(), BytesSerde())
        self.flushed: list[int] = []

    async def flush(self, mark: ChangelogMark | None = None) -> None:
        if self.pending_writes:
            self.flushed.append(self.pending_writes)
        await super().flush(mark)


async def replay(tmp_path: Path, updates: int, keys: int) -> CountingStore:
    broker = MemoryBroker()
    broker.create_topic(TP.topic, 1)
    broker.append((OutgoingRecord(TP.topic, f"k{i % keys:05}".encode(), str(i).encode()), 0)
                  for i in range(updates))
    transport = MemoryTransport(broker)
    store = CountingStore()
    await store.open(StoreContext("0_0", tmp_path, 0))
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        await Restorer(transport, exactly_once=False, state_dir=None)._replay(
            consumer, store, TP, 0, "0_0", "s")
        assert await store.get(f"k{(updates - 1) % keys:05}".encode()) == \
            str(updates - 1).encode()
        assert await store.approximate_num_entries() == min(keys, updates)
    finally:
        await consumer.stop()
        await store.close()
    return store


async def test_a_changelog_that_repeats_keys_writes_each_key_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restore_module, "RESTORE_FLUSH_KEYS", 1000)
    store = await replay(tmp_path, updates=20_000, keys=500)
    assert store.flushed == [500]


async def test_distinct_keys_are_flushed_as_they_reach_the_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restore_module, "RESTORE_FLUSH_KEYS", 1000)
    store = await replay(tmp_path, updates=10_000, keys=10_000)
    assert sum(store.flushed) == 10_000
    assert len(store.flushed) >= 3
    # the bound is checked after each fetched batch, and a flush starts at the next turn
    # of the loop, after one more batch
    assert max(store.flushed) <= 1000 + 2 * POLL


async def test_large_values_are_flushed_by_their_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restore_module, "RESTORE_FLUSH_BYTES", 20_000)
    store = await replay(tmp_path, updates=10_000, keys=10_000)  # ~10 bytes an update
    assert len(store.flushed) >= 3
