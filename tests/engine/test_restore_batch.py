"""A replay hands each fetched batch to the store at once (``restore_batch``) and still
restores exactly the changelog's last value per key, tombstones deleting, whatever the
batch size and wherever the flushes fall; it reads nothing past the end offset taken when
it starts; and while it runs, the garbage collector's young threshold is raised and then
put back.

Real SQLite files, the memory broker's changelog."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams.engine import restore as restore_module
from aiostreams.engine.restore import YOUNG_GARBAGE_WINDOW, Restorer
from aiostreams.serde import BytesSerde, StrSerde
from aiostreams.state.base import TOMBSTONE, StoreContext
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.window import SQLiteWindowStore
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

TP = TopicPartition("changelog", 0)
Changelog = list[tuple[bytes, bytes | None]]

CHANGELOGS = st.lists(
    st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"\x00", b"\xff\x01"]),
              st.one_of(st.none(), st.binary(max_size=6))),
    max_size=60)


def new_broker(changelog: Changelog) -> MemoryBroker:
    broker = MemoryBroker()
    broker.create_topic(TP.topic, 1)
    append(broker, changelog)
    return broker


def append(broker: MemoryBroker, changelog: Changelog) -> None:
    broker.append((OutgoingRecord(TP.topic, key, value), 0) for key, value in changelog)


def replayed(changelog: Changelog) -> dict[bytes, bytes]:
    """What the changelog says the store holds: the last value per key, None deleting."""
    state: dict[bytes, bytes] = {}
    for key, value in changelog:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


async def replay_into(store: SQLiteKeyValueStore, broker: MemoryBroker, poll: int) -> None:
    transport = MemoryTransport(broker)
    consumer = transport.consumer(None, max_poll_records=poll)
    await consumer.start()
    try:
        await Restorer(transport, exactly_once=False, state_dir=None)._replay(
            consumer, store, TP, 0, "0_0", store.name)
    finally:
        await consumer.stop()


async def file_contents(state_dir: Path) -> dict[bytes, bytes]:
    """The rows of the store's file, read by a new instance (nothing buffered)."""
    store = SQLiteKeyValueStore("s", BytesSerde(), BytesSerde())
    await store.open(StoreContext("0_0", state_dir, 0))
    try:
        return {key: value async for key, value in store.range(None, None)}
    finally:
        await store.close()


SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(changelog=CHANGELOGS, poll=st.sampled_from([1, 3, 2000]),
       flush_keys=st.sampled_from([1, 2, 1000]))
def test_a_replay_restores_the_last_value_per_key_across_batches_and_flushes(
        changelog: Changelog, poll: int, flush_keys: int,
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restore_module, "RESTORE_FLUSH_KEYS", flush_keys)
    state_dir = tmp_path_factory.mktemp("replay")

    async def check() -> None:
        store = SQLiteKeyValueStore("s", BytesSerde(), BytesSerde())
        await store.open(StoreContext("0_0", state_dir, 0))
        try:
            store.restore_batch([RawRecord(TP.topic, 0, 0, 0.0, b"a", b"stale")])
            await store.flush()  # the file holds a row the changelog may overwrite or delete
            await store.get(b"b")  # and the read cache an entry
            await replay_into(store, new_broker(changelog), poll)
            assert await store.get(b"b") == replayed(changelog).get(b"b")
        finally:
            await store.close()
        expected = replayed([(b"a", b"stale"), *changelog])
        assert await file_contents(state_dir) == expected

    asyncio.run(check())


class AppendingStore(SQLiteKeyValueStore):
    """Appends ``later`` to the changelog when the replay hands it its first batch: records
    written after the replay took the end offset."""

    def __init__(self, broker: MemoryBroker, later: Changelog) -> None:
        super().__init__("s", BytesSerde(), BytesSerde())
        self.broker, self.later = broker, later

    def restore_batch(self, records: Sequence[RawRecord]) -> int:
        append(self.broker, self.later)
        self.later = []
        return super().restore_batch(records)


async def test_a_replay_restores_nothing_past_the_end_offset_taken_at_its_start(
        tmp_path: Path) -> None:
    changelog: Changelog = [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")]
    broker = new_broker(changelog)
    store = AppendingStore(broker, [(b"a", b"late"), (b"c", b"late")])
    await store.open(StoreContext("0_0", tmp_path, 0))
    try:
        await replay_into(store, broker, poll=2)  # the second batch spans the end offset
        assert await store.get(b"a") == b"3"
        assert await store.get(b"c") is None
    finally:
        await store.close()


def window_changelog(store: SQLiteWindowStore) -> Changelog:
    """Writes of two keys over time, a delete, and a write already expired when it comes
    (retention 10 s, stream time 100 s)."""
    writes = [(("k", 90.0), "old"), (("k", 100.0), "new"), (("j", 95.0), "x"),
              (("j", 95.0), None), (("j", 99.0), "y"), (("k", 50.0), "expired")]
    records: Changelog = []
    for key, value in writes:
        kb, vb = store.changelog_record(key, TOMBSTONE if value is None else value)
        assert kb is not None
        records.append((kb, vb))
    return records


async def test_a_window_store_replayed_in_batches_equals_one_restored_record_by_record(
        tmp_path: Path) -> None:
    batched = SQLiteWindowStore("w", retention=10.0, key_serde=StrSerde())
    single = SQLiteWindowStore("w", retention=10.0, key_serde=StrSerde())
    await batched.open(StoreContext("0_0", tmp_path / "batched", 0))
    await single.open(StoreContext("0_0", tmp_path / "single", 0))
    try:
        changelog = window_changelog(batched)
        await replay_into(batched, new_broker(changelog), poll=2000)
        for key, value in changelog:
            single.restore(key, value)
        await single.flush()
        restored = [entry async for entry in batched.range(None, None)]
        assert restored == [entry async for entry in single.range(None, None)]
        assert restored == [(("j", 99.0), "y"), (("k", 90.0), "old"), (("k", 100.0), "new")]
    finally:
        await batched.close()
        await single.close()


class ThresholdNotingStore(SQLiteKeyValueStore):
    def __init__(self) -> None:
        super().__init__("s", BytesSerde(), BytesSerde())
        self.thresholds: list[int] = []

    def restore_batch(self, records: Sequence[RawRecord]) -> int:
        self.thresholds.append(gc.get_threshold()[0])
        return super().restore_batch(records)


@pytest.fixture
def default_gc_threshold() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*saved)


async def test_the_young_gc_threshold_is_raised_while_a_replay_runs_and_put_back_after(
        tmp_path: Path, default_gc_threshold: tuple[int, int, int]) -> None:
    store = ThresholdNotingStore()
    await store.open(StoreContext("0_0", tmp_path, 0))
    try:
        await replay_into(store, new_broker([(b"a", b"1"), (b"b", b"2")]), poll=1)
    finally:
        await store.close()
    assert store.thresholds == [restore_module.RESTORE_GC_THRESHOLD] * 2
    assert gc.get_threshold() == default_gc_threshold


def test_overlapping_replays_keep_the_threshold_raised_until_the_last_one_ends(
        default_gc_threshold: tuple[int, int, int]) -> None:
    window = type(YOUNG_GARBAGE_WINDOW)()
    raised = (restore_module.RESTORE_GC_THRESHOLD, *default_gc_threshold[1:])
    with window:
        with window:
            assert gc.get_threshold() == raised
        assert gc.get_threshold() == raised
    assert gc.get_threshold() == default_gc_threshold


def test_a_threshold_set_by_someone_else_during_a_replay_is_left_alone(
        default_gc_threshold: tuple[int, int, int]) -> None:
    window = type(YOUNG_GARBAGE_WINDOW)()
    with window:
        gc.set_threshold(5000, 20, 20)
    assert gc.get_threshold() == (5000, 20, 20)
    gc.set_threshold(50_000, 10, 10)
    with window:  # already higher: not lowered
        assert gc.get_threshold() == (50_000, 10, 10)
    assert gc.get_threshold() == (50_000, 10, 10)
