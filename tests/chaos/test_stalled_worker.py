"""A worker frozen past its session timeout while records are in flight loses no update.

Three workers of one app (as ``aiostreams run --workers 3`` starts them) run the stateful app
of ``tests/support/stateful_worker.py``: an async step, a per-key count and sum, a count
re-keyed through a repartition topic, SQLite stores. One worker is frozen (SIGSTOP) for well
past its session timeout while input keeps coming and thousands of its records are in flight;
the group gives its tasks to the others; then it resumes. Under at-least-once every final
aggregate, as its changelog says (read the way a restore reads it: records of an owner that
had lost the task are skipped, see ``aiostreams.state.owner_epoch``), must count every input
at least once - never below - with the workers sharing one state directory and with one
each (separate hosts). Before the task-ownership fixes, 4 runs in 8 ended below the input.

Under exactly-once (read committed) every aggregate must count every input exactly once.
``make test`` runs it five times, once under exactly-once, once with the aggregates' record
cache on (updates held until each commit, so what a frozen worker holds is lost with it and
must be redone by the others); the slow tier, ``AIOSTREAMS_CHAOS_REPEAT=20``, adds twenty
repetitions of each layout, with and without the cache, under both guarantees.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from appkit import create_topic, produce
from kafkakit import start_worker, stop_worker, until_logged

from aiostreams.transport.base import IsolationLevel
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import RawRecord, TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(600)]

SCRIPT = Path(__file__).parents[1] / "support" / "stateful_worker.py"
SESSION_TIMEOUT = 4.0
FROZEN_FOR = 12.0  # three session timeouts: the group surely moved the tasks away
KEYS = 30
RECORDS = 6_600
PARTITIONS = 6
SLOW_REPEAT = int(os.environ.get("AIOSTREAMS_CHAOS_REPEAT", "0"))

CACHED = 1 << 20
"""``cache_max_bytes`` of the cached case: the aggregates hold updates until each commit."""
ALO, EOS = "at_least_once", "exactly_once"
CASES = [pytest.param("shared", 0, 0, ALO, id="shared-dir-1"),
         pytest.param("shared", 1, 0, ALO, id="shared-dir-2"),
         pytest.param("per-host", 0, 0, ALO, id="own-dirs-1"),
         pytest.param("shared", 2, CACHED, ALO, id="shared-dir-record-cache"),
         pytest.param("shared", 1, 0, EOS, id="shared-dir-exactly-once")]
SLOW_CASES = [pytest.param(layout, i, cache, guarantee,
                           id=f"{layout}-{i}{'-cached' if cache else ''}-{guarantee}")
              for layout in ("shared", "per-host") for cache in (0, CACHED)
              for guarantee in (ALO, EOS) for i in range(SLOW_REPEAT)]


def inputs() -> list[tuple[bytes, bytes]]:
    return [(f"k{i % KEYS:02d}".encode(), str(i).encode()) for i in range(RECORDS)]


@pytest.mark.parametrize(("layout", "run", "cache", "guarantee"), CASES + SLOW_CASES)
async def test_a_worker_frozen_with_records_in_flight_loses_no_update(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, layout: str, run: int,
        cache: int, guarantee: str) -> None:
    exact = guarantee == EOS  # under exactly-once every aggregate counts each input once
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, app = topic_name("in"), topic_name("out"), topic_name("stall")
    await create_topic(transport, src, PARTITIONS)
    await create_topic(transport, dst, PARTITIONS)
    records = inputs()
    third = len(records) // 3  # the frozen worker's share has records in flight

    def state_dir(i: int) -> str:
        return str(tmp_path / ("state" if layout == "shared" else f"host{i}"))

    logs = [tmp_path / f"worker{i}.log" for i in range(3)]
    workers = []
    for i, log in enumerate(logs):
        with log.open("wb") as sink:
            workers.append(start_worker(kafka_bootstrap, app, src, dst, script=SCRIPT,
                                        WORKER_STATE_DIR=state_dir(i),
                                        WORKER_SESSION_TIMEOUT=str(SESSION_TIMEOUT),
                                        WORKER_MAX_DELAY_MS="50", WORKER_LOG="INFO",
                                        WORKER_CACHE_BYTES=str(cache),
                                        WORKER_GUARANTEE=guarantee,
                                        stderr=sink.fileno()))
    frozen, frozen_log = workers[run % 3], logs[run % 3]
    try:
        await produce(transport, src, records[:third])
        # the group settled with all three, the one to freeze holding tasks: else it may be
        # frozen with nothing to lose (mid-join, or given nothing yet)
        await until_all_hold_tasks(logs)
        await until_progress(transport, app, src, third // 2)
        # the rest of the input while it is frozen, so it has records in flight when it
        # stops, and the others have processed everything by the time it resumes: what it
        # writes then (its in-flight records, from the state it had) would be the last
        # word on those keys
        feeding = asyncio.ensure_future(produce(transport, src, records[third:]))
        frozen.send_signal(signal.SIGSTOP)
        await feeding
        await asyncio.sleep(FROZEN_FOR)  # the fault's length, not a wait for an event
        frozen.send_signal(signal.SIGCONT)
        await until_logged(frozen_log, "away while this worker was out of it")
        await until_committed_to_end(transport, app, src)
        assert [w.poll() for w in workers] == [None, None, None], "a worker exited"
    finally:
        frozen.send_signal(signal.SIGCONT)
        codes = [await stop_worker(w, timeout=90) for w in workers]
    assert codes == [0, 0, 0]
    # what the changelogs say, read as a restore reads them ...
    check(await changelog_values(transport, f"{app}-agg-changelog"),
          await changelog_values(transport, f"{app}-rekeyed-changelog"), records,
          exact=exact)
    # ... and what a new worker restores from them, from scratch: one more record per key
    # (values 0..6, so every re-keyed group gets some) must land on exact-or-more state
    extra = [(f"k{i:02d}".encode(), str(i % 7).encode()) for i in range(KEYS)]
    fresh = start_worker(kafka_bootstrap, app, src, dst, script=SCRIPT,
                         WORKER_STATE_DIR=str(tmp_path / "fresh"),
                         WORKER_SESSION_TIMEOUT=str(SESSION_TIMEOUT), WORKER_LOG="WARNING",
                         WORKER_GUARANTEE=guarantee)
    try:
        seen = await end_offsets(transport, dst)
        await produce(transport, src, extra)
        await until_committed_to_end(transport, app, src)
    finally:
        assert await stop_worker(fresh, timeout=90) == 0
    agg, rekeyed = await restored_values(transport, dst, seen)
    check(agg, rekeyed, records + extra, only=({k.decode() for k, _ in extra},
                                              {f"g{int(v) % 7}" for _, v in extra}),
          exact=exact)


async def until_all_hold_tasks(logs: list[Path], timeout: float = 120.0) -> None:
    """Return once every worker's log (at INFO) says it was assigned partitions in the same,
    newest generation: the group is settled and each worker has tasks."""
    def newest(text: str) -> tuple[int, str] | None:
        assigned = re.findall(r"aiostreams.worker: assigned (.*)", text)
        generations = re.findall(r"aiostreams.worker: assignment generation (\d+)", text)
        # the two lines are written together: the newest of each go together
        return (int(generations[-1]), assigned[-1]) if generations and assigned else None

    async with asyncio.timeout(timeout):
        while True:
            seen = [newest(await asyncio.to_thread(log.read_text, errors="replace"))
                    for log in logs]
            if (all(s is not None and s[1] != "nothing" for s in seen)
                    and len({s[0] for s in seen if s is not None}) == 1):
                return
            await asyncio.sleep(0.2)  # another process: only its log says so


def check(agg: dict[str, dict[str, int]], rekeyed: dict[str, dict[str, int]],
          records: list[tuple[bytes, bytes]],
          only: tuple[set[str], set[str]] | None = None, exact: bool = False) -> None:
    """No aggregate below what ``records`` make it (at-least-once may count a record twice,
    never zero times), none above either when ``exact`` (exactly-once); ``only`` limits the
    keys and groups looked at."""
    expected_n = Counter(k.decode() for k, _ in records)
    expected_s: dict[str, int] = defaultdict(int)
    for k, v in records:
        expected_s[k.decode()] += int(v)
    expected_groups = Counter(f"g{int(v) % 7}" for _, v in records)
    keys, groups = only if only is not None else (set(expected_n), set(expected_groups))
    short = {k: (agg.get(k), expected_n[k]) for k in keys
             if k not in agg or agg[k]["n"] < expected_n[k] or agg[k]["s"] < expected_s[k]}
    assert not short, f"aggregates below the input (key: (state, inputs)): {short}"
    below = {g: (rekeyed.get(g), expected_groups[g]) for g in groups
             if rekeyed.get(g, {"n": 0})["n"] < expected_groups[g]}
    assert not below, f"re-keyed counts below the input: {below}"
    if exact:
        over = {k: (agg[k], expected_n[k], expected_s[k]) for k in keys
                if (agg[k]["n"], agg[k]["s"]) != (expected_n[k], expected_s[k])}
        assert not over, f"aggregates above the input under exactly-once: {over}"
        over_groups = {g: (rekeyed[g], expected_groups[g]) for g in groups
                       if rekeyed[g]["n"] != expected_groups[g]}
        assert not over_groups, f"re-keyed counts above the input: {over_groups}"


async def restored_values(transport: KafkaTransport, dst: str,
                          since: dict[TopicPartition, int]
                          ) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """The last update per key the fresh worker wrote to ``dst`` (after ``since``): per-key
    aggregates (``k..``) and re-keyed counts (``g..``)."""
    consumer = transport.consumer(None, isolation_level=IsolationLevel.READ_COMMITTED)
    await consumer.start()
    tps = list(since)
    agg: dict[str, dict[str, int]] = {}
    rekeyed: dict[str, dict[str, int]] = {}
    try:
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, since[tp])
        async with asyncio.timeout(60):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for got in (await consumer.getmany(0.5)).values():
                    for record in got:
                        assert record.key is not None and record.value is not None
                        key = record.key.decode().strip('"')
                        (rekeyed if key.startswith("g") else agg)[key] = orjson.loads(
                            record.value)
    finally:
        await consumer.stop()
    return agg, rekeyed


async def until_progress(transport: KafkaTransport, app: str, src: str, count: int) -> None:
    """Return once the group has committed ``count`` input offsets."""
    async with asyncio.timeout(120):
        while True:
            if sum((await committed(transport, app, src)).values()) >= count:
                return
            await asyncio.sleep(0.5)  # nothing announces a commit to an outside reader


async def until_committed_to_end(transport: KafkaTransport, app: str, src: str) -> None:
    """Return once the group committed the end of the input and of every repartition
    topic of the app (so every record went through both aggregations)."""
    admin = transport.admin()
    await admin.start()
    try:
        topics = [src, *(t for t in await admin.list_topics()
                         if t.startswith(app) and t.endswith("-repartition"))]
    finally:
        await admin.stop()
    assert len(topics) == 2, topics
    async with asyncio.timeout(240):
        while True:
            done = True
            for topic in topics:
                ends = await end_offsets(transport, topic)
                offsets = await committed(transport, app, topic)
                behind = {tp: o for tp, o in offsets.items() if o != ends[tp]}
                if behind and await records_after(transport, behind, ends):
                    done = False
            if done:
                return
            await asyncio.sleep(0.5)  # nothing announces a commit to an outside reader


async def records_after(transport: KafkaTransport, offsets: dict[TopicPartition, int],
                        ends: dict[TopicPartition, int]) -> bool:
    """Whether a read-committed reader finds a record from ``offsets`` on. A topic written
    in transactions (a repartition topic under exactly-once) ends with a commit marker,
    which no consumer commits past: there the committed offset stays one below the end."""
    consumer = transport.consumer(None, isolation_level=IsolationLevel.READ_COMMITTED)
    await consumer.start()
    try:
        consumer.assign(list(offsets))
        for tp, offset in offsets.items():
            consumer.seek(tp, offset)
        async with asyncio.timeout(30):
            while [tp for tp in offsets if await consumer.position(tp) < ends[tp]]:
                if any((await consumer.getmany(0.2)).values()):
                    return True
        return False
    finally:
        await consumer.stop()


async def end_offsets(transport: KafkaTransport, topic: str) -> dict[TopicPartition, int]:
    """``topic``'s end offsets (it has :data:`PARTITIONS` partitions)."""
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        return await consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        await consumer.stop()


async def committed(transport: KafkaTransport, group: str, topic: str
                    ) -> dict[TopicPartition, int]:
    consumer = transport.consumer(group)
    await consumer.start()
    try:
        found = {}
        for p in range(PARTITIONS):
            offset = await consumer.committed(TopicPartition(topic, p))
            found[TopicPartition(topic, p)] = offset or 0
        return found
    finally:
        await consumer.stop()


async def changelog_values(transport: KafkaTransport, topic: str) -> dict[str, dict[str, int]]:
    """The last value per key of a changelog, read as a restore reads it: within a partition,
    a record whose owner epoch (header ``aiostreams.owner``) is below one seen before it was
    written by an owner that had lost the task, and is skipped."""
    consumer = transport.consumer(None, isolation_level=IsolationLevel.READ_COMMITTED)
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    try:
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        by_partition: dict[TopicPartition, list[RawRecord]] = defaultdict(list)
        async with asyncio.timeout(60):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for tp, got in (await consumer.getmany(0.5)).items():
                    by_partition[tp].extend(got)
    finally:
        await consumer.stop()
    values: dict[str, dict[str, int]] = {}
    for got in by_partition.values():
        high = -1
        for record in got:
            epoch = next((int.from_bytes(v, "big", signed=True) for h, v in record.headers
                          if h == "aiostreams.owner" and v is not None), None)
            if epoch is not None:
                if epoch < high:
                    continue
                high = epoch
            assert record.key is not None
            key = record.key.decode()
            if key.startswith('"'):  # the re-keyed store's keys are JSON strings
                key = orjson.loads(key)
            if record.value is None:
                values.pop(key, None)
            else:
                values[key] = decode(record.value)
    return values


def decode(value: bytes) -> dict[str, int]:
    """A changelog value: 8 bytes of timestamp, then the aggregate (JSON) or a count (a
    64-bit big-endian long)."""
    body = value[8:]
    if body[:1] == b"{":
        parsed: dict[str, int] = orjson.loads(body)
        return parsed
    return {"n": int.from_bytes(body, "big", signed=True)}
