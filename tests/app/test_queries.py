"""Interactive queries in process: ``app.store(name)`` reads a running app's retired state
across its tasks, and says where a key lives when no local task owns it."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiostreams import App, Processor, Record, SessionWindows, TumblingWindows
from aiostreams.ops.queries import KeyNotLocalError, StoreNotReadyError, UnknownStoreError
from aiostreams.state import kv_store
from aiostreams.testing import Sequencer, settle
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.partitioner import murmur2

KEYS = [f"k{i}" for i in range(12)]


def counting_app(transport: MemoryTransport | None = None, name: str = "counts") -> App:
    if transport is None:
        app = App(name, broker=f"memory://q-{uuid.uuid4().hex[:8]}", commit_interval_ms=20)
    else:
        app = App(name, transport=transport, commit_interval_ms=20)
    words = app.topic("words", key=str, value=str, partitions=3)
    app.stream(words).group_by_key().count(materialized="counts")
    return app


async def send_counts(app: App) -> dict[str, int]:
    expected = {k: 0 for k in KEYS}
    for i in range(60):
        key = KEYS[(i * 7) % len(KEYS)]
        expected[key] += 1
        await app.send("words", key, f"w{i}")
    return expected


async def test_get_range_and_all_read_every_tasks_retired_counts() -> None:
    app = counting_app()
    async with app:
        expected = await send_counts(app)
        await app.wait_until_caught_up(timeout=30)
        counts = app.store("counts")
        assert {k: await counts.get(k) for k in KEYS} == expected  # values unwrapped
        assert await counts.get("never-seen") is None
        everything = [(k, v) async for k, v in counts.all()]
        assert dict(everything) == expected
        assert [k for k, _ in everything] == sorted(KEYS)  # one order across the tasks
        assert [k async for k, _ in counts.range("k1", "k3")] == ["k1", "k10", "k11", "k2",
                                                                  "k3"]


class PutThenWait(Processor[str, str]):
    """Writes the record's value to the store, then waits for the test to release it."""

    def __init__(self, seq: Sequencer) -> None:
        self.seq = seq

    async def process(self, record: Record[str, str]) -> None:
        self.context.store("latest").put(record.key, record.value)
        await self.seq.wait(record.value)


async def test_a_write_is_invisible_until_its_record_retires() -> None:
    seq = Sequencer()
    app = App("retired", broker=f"memory://q-{uuid.uuid4().hex[:8]}", commit_interval_ms=20)
    app.topic("in", key=str, value=str, partitions=1)
    app.topology.add_source("src", "in").add_processor("put", lambda: PutThenWait(seq), "src")
    app.topology.add_store(kv_store("latest", key_serde=str, value_serde=str), "put")
    async with app:
        await app.send("in", "a", "first")
        await seq.wait_started("first")  # its write is buffered in its slot
        assert await app.store("latest").get("a") is None
        seq.release("first")
        await app.wait_until_caught_up(timeout=30)
        assert await app.store("latest").get("a") == "first"
        await app.send("in", "a", "second")
        await seq.wait_started("second")
        assert await app.store("latest").get("a") == "first"  # not the buffered "second"
        seq.release("second")
        await app.wait_until_caught_up(timeout=30)
        assert await app.store("latest").get("a") == "second"


async def test_a_window_store_is_fetched_by_key_and_time_range() -> None:
    app = App("windows", broker=f"memory://q-{uuid.uuid4().hex[:8]}", commit_interval_ms=20)
    clicks = app.topic("clicks", key=str, value=str, partitions=2)
    (app.stream(clicks).group_by_key()
     .windowed_by(TumblingWindows(size=60.0, grace=0.0))
     .count(materialized="per-minute", retention=600.0))
    async with app:
        for t in (0.0, 10.0, 70.0, 130.0, 131.0):
            await app.send(clicks, "alice", "c", timestamp=1_700_000_040.0 + t)
        await app.wait_until_caught_up(timeout=30)
        view = app.store("per-minute")
        windows = await view.fetch("alice", 1_700_000_000.0, 1_700_000_200.0)
        assert [v for _, v in windows] == [2, 1, 2]
        assert [s for s, _ in windows] == [1_700_000_040.0, 1_700_000_100.0, 1_700_000_160.0]
        assert await view.fetch("alice", 1_700_000_100.0, 1_700_000_100.0) == [
            (1_700_000_100.0, 1)]
        assert await view.get(("alice", 1_700_000_160.0)) == 2
        assert await view.fetch("bob") == []


async def test_a_key_no_local_task_owns_names_its_partition() -> None:
    transport = MemoryTransport(MemoryBroker())
    first, second = counting_app(transport), counting_app(transport)
    async with first, second:
        expected = await send_counts(first)
        await first.wait_until_caught_up(timeout=30)
        for app, other in ((first, second), (second, first)):
            view, other_view = app.store("counts"), other.store("counts")
            misses = 0
            for key in KEYS:
                partition = (murmur2(key.encode()) & 0x7FFFFFFF) % 3
                assert await view.partition_of(key) == partition
                try:
                    got = await view.get(key)
                except KeyNotLocalError as e:
                    assert e.partition == partition and partition not in e.local
                    assert f"partition {partition}" in str(e)
                    got = await other_view.get(key)
                    misses += 1
                assert got == expected[key]
            assert 0 < misses < len(KEYS)  # each worker owns some keys, not all


async def test_queries_say_what_is_wrong() -> None:
    app = counting_app()
    with pytest.raises(UnknownStoreError, match=r"no store 'count'; its stores: \['counts'\]"):
        app.store("count")
    with pytest.raises(StoreNotReadyError, match="is created"):
        await app.store("counts").get("k1")



@settings(max_examples=25, deadline=None)
@given(keys=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=30),
       partitions=st.integers(1, 4))
def test_every_key_is_read_from_the_partition_its_records_went_to(
        keys: list[str], partitions: int) -> None:
    """For any keys and partition count: ``partition_of`` is where the producer put the
    key's records, ``get`` returns each key's count, and ``all`` is every key once, in
    serialized-key order."""
    async def run() -> None:
        app = App("prop", broker=f"memory://q-{uuid.uuid4().hex[:8]}", commit_interval_ms=20)
        words = app.topic("words", key=str, value=str, partitions=partitions)
        app.stream(words).group_by_key().count(materialized="counts")
        async with app:
            for key in keys:
                await app.send(words, key, "w")
            await app.wait_until_caught_up(timeout=30)
            async with app.consumer(words) as consumer:
                landed = {r.key: r.partition for r in await consumer.read_to_end()}
            view = app.store("counts")
            for key in set(keys):
                assert await view.partition_of(key) == landed[key]
                assert await view.get(key) == keys.count(key)
            listed = [k async for k, _ in view.all()]
            assert listed == sorted(set(keys), key=lambda k: k.encode())

    asyncio.run(run())


async def test_get_reads_a_key_held_in_the_record_cache() -> None:
    """With ``cache_max_bytes`` on and no commit yet, a count lives only in its task's
    record cache: ``get`` answers it from there (as Kafka Streams' caching store does)."""
    app = App("cached-q", broker=f"memory://q-{uuid.uuid4().hex[:8]}",
              commit_interval_ms=3_600_000, cache_max_bytes=1_000_000)
    words = app.topic("words", key=str, value=str, partitions=1)
    seen: list[str] = []
    fifth = asyncio.Event()

    def saw(_key: str, value: str) -> None:
        seen.append(value)
        if len(seen) == 5:
            fifth.set()

    app.stream(words).peek(saw).group_by_key().count(materialized="counts")
    async with app:
        for i in range(5):
            await app.send("words", "k", f"w{i}")
        async with asyncio.timeout(30):
            await fifth.wait()
        await settle()  # the pump the fifth record scheduled retires it into the cache
        (task,) = app.inspect().tasks.values()
        assert [k for k, _ in task.cached_entries("counts")] == ["k"]
        assert await task.stores["counts"].get("k") is None  # not flushed: no commit yet
        assert await app.store("counts").get("k") == 5


async def test_a_session_store_query_sees_a_merge_held_in_the_record_cache() -> None:
    """Sessions flushed by a commit, then merged by a record whose update is still held:
    ``fetch`` and ``get`` answer the merged session (the store still has the two)."""
    app = App("cached-sessions", broker=f"memory://q-{uuid.uuid4().hex[:8]}",
              commit_interval_ms=3_600_000, cache_max_bytes=1_000_000)
    words = app.topic("words", key=str, value=str, partitions=1)
    seen = 0
    counted = asyncio.Event()

    def saw(_key: str, _value: str) -> None:
        nonlocal seen
        seen += 1
        if seen in (2, 3):
            counted.set()

    (app.stream(words).peek(saw).group_by_key().windowed_by(SessionWindows(5.0, grace=100.0))
     .count(materialized="sessions"))
    async with app:
        worker = app.inspect().worker
        assert worker is not None
        for ts in (1.0, 10.0):
            await app.send("words", "k", "w", timestamp=ts)
        async with asyncio.timeout(30):
            await counted.wait()
        await settle()
        worker.request_commit()
        await worker.next_commit()  # [1, 1] and [10, 10] flushed into the store
        counted.clear()
        await app.send("words", "k", "w", timestamp=5.0)  # bridges them
        async with asyncio.timeout(30):
            await counted.wait()
        await settle()
        (task,) = app.inspect().tasks.values()
        assert [(s, e) async for s, e in task.stores["sessions"].fetch("k", 0.0, 60.0)] == [
            (1.0, (1.0, 1)), (10.0, (10.0, 1))]
        view = app.store("sessions")
        assert await view.fetch("k") == [(10.0, (1.0, 3))]
        assert await view.get(("k", 10.0)) == (1.0, 3)
        assert await view.get(("k", 1.0)) is None


async def test_range_all_and_fetch_merge_the_record_cache_with_the_store() -> None:
    """With ``cache_max_bytes`` on, some updates flushed to the stores and newer ones still
    held in the tasks' record caches: ``all``, ``range`` and a window store's ``fetch``
    answer what the stores will hold after the next flush - every key once, the held
    value in place of the flushed one - as the same records counted without a cache."""
    app = App("cached-range", broker=f"memory://q-{uuid.uuid4().hex[:8]}",
              commit_interval_ms=3_600_000, cache_max_bytes=1_000_000)
    words = app.topic("words", key=str, value=str, partitions=2)
    seen = 0
    counted = asyncio.Event()
    target = 0

    def saw(_key: str, _value: str) -> None:
        nonlocal seen
        seen += 1
        if seen == target:
            counted.set()

    grouped = app.stream(words).peek(saw).group_by_key()
    grouped.count(materialized="counts")
    grouped.windowed_by(TumblingWindows(size=60.0, grace=3600.0)).count(
        materialized="per-minute")
    first = [(f"k{i % 8}", float(i % 3) * 60.0) for i in range(40)]  # flushed by a commit
    second = [(f"k{i % 5}", float(i % 4) * 60.0) for i in range(3, 23)]  # held in caches

    async def send(batch: list[tuple[str, float]]) -> None:
        nonlocal target
        target += len(batch)
        counted.clear()
        for key, ts in batch:
            await app.send("words", key, "w", timestamp=ts)
        async with asyncio.timeout(30):
            await counted.wait()
        await settle()  # the pump the last record scheduled retires it into the cache

    async with app:
        worker = app.inspect().worker
        assert worker is not None
        await send(first)
        worker.request_commit()
        await worker.next_commit()  # flushes the caches into the stores
        await send(second)
        held = {k for task in app.inspect().tasks.values()
                for k, _ in task.cached_entries("counts")}
        assert held == {k for k, _ in second}  # the second batch's keys: held, not flushed
        counts, windows = app.store("counts"), app.store("per-minute")
        everything = [(k, v) async for k, v in counts.all()]
        in_range = [(k, v) async for k, v in counts.range("k1", "k3")]
        fetched = {k: await windows.fetch(k) for k in {k for k, _ in first}}
    truth = {k: 0 for k, _ in first}
    per_window: dict[str, dict[float, int]] = {k: {} for k in truth}
    for key, ts in first + second:
        truth[key] += 1
        per_window[key][ts] = per_window[key].get(ts, 0) + 1
    assert everything == sorted(truth.items())
    assert in_range == [(k, truth[k]) for k in ("k1", "k2", "k3")]
    assert fetched == {k: sorted(w.items()) for k, w in per_window.items()}
