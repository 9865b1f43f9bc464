"""Whole apps on the memory broker: consumer group, commit, restart, scale-out, failure."""

from __future__ import annotations

import asyncio
import random

import pytest
from appkit import create_topic, produce, read_exactly, unique

from aiostreams import App, Processor, Record, TaskFailedError, UnknownTopicError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition


class SlowUpper(Processor[str, str]):
    """Awaits a random number of loop turns, like I/O of random latency."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    async def process(self, record: Record[str, str]) -> None:
        for _ in range(self.rng.randrange(5)):
            await asyncio.sleep(0)
        self.context.forward(record.with_value(record.value.upper()))


def make_app(name: str, transport: MemoryTransport, src: str, dst: str, **settings: object) -> App:
    app = App(name, transport=transport, commit_interval_ms=50, **settings)
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str, partitions=4)
    app.topology.add_source("src", src).add_processor("upper", SlowUpper, "src").add_sink(
        "sink", dst, "upper")
    return app


def inputs(n: int, keys: int = 50) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % keys}".encode(), f"v{i}".encode()) for i in range(n)]


async def test_app_processes_every_record_once_and_commits_end_offsets() -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 4)
    await produce(transport, src, inputs(2000))
    app = make_app("upper", transport, src, dst, max_in_flight=64)
    async with app:
        out = await read_exactly(transport, dst, 2000)
    assert sorted(r.value for r in out) == sorted(v.upper() for _, v in inputs(2000))
    by_key: dict[bytes | None, list[int]] = {}
    for r in sorted(out, key=lambda r: (r.partition, r.offset)):
        assert r.value is not None
        by_key.setdefault(r.key, []).append(int(r.value[1:]))
    assert all(seq == sorted(seq) for seq in by_key.values())  # per-key order kept
    for p in range(4):
        tp = TopicPartition(src, p)
        assert broker.committed("upper", tp) == broker.end_offset(tp)


async def test_restart_resumes_from_the_committed_offset_without_loss() -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 2)
    await produce(transport, src, inputs(500))
    async with make_app("resume", transport, src, dst):
        await read_exactly(transport, dst, 500)
    await produce(transport, src, inputs(300))
    async with make_app("resume", transport, src, dst):
        out = await read_exactly(transport, dst, 800)
    assert len(out) == 800  # nothing lost, nothing repeated after a clean stop


async def test_two_workers_split_partitions_and_one_takes_over() -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 4)
    first = make_app("pair", transport, src, dst)
    second = make_app("pair", transport, src, dst)
    await first.start()
    await second.start()
    await produce(transport, src, inputs(400))
    await read_exactly(transport, dst, 400)
    owned = [{t.task_id for t in a.status().tasks} for a in (first, second)]
    assert owned[0] and owned[1] and not owned[0] & owned[1]
    await second.stop()
    await produce(transport, src, inputs(400))
    out = await read_exactly(transport, dst, 800)
    await first.stop()
    assert len(out) == 800
    assert first.status().tasks == ()  # closed on stop


async def test_the_event_loop_runs_other_coroutines_between_fetched_batches() -> None:
    """Records ready in the broker and a processor that never awaits must not starve the
    loop: the sender, the commit timer and the application's coroutines run between
    batches."""
    ticks = 0
    seen: list[int] = []

    class SeesTicks(Processor[str, str]):
        def process(self, record: Record[str, str]) -> None:
            seen.append(ticks)
            self.context.forward(record)

    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 1)
    await produce(transport, src, inputs(2000))
    app = App("ticks", transport=transport, max_poll_records=100)
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str)
    app.topology.add_source("src", src).add_processor("see", SeesTicks, "src").add_sink(
        "sink", dst, "see")
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)  # one turn of the loop per tick

    ticking = asyncio.create_task(ticker())
    async with app:
        await read_exactly(transport, dst, 2000)
    stop.set()
    await ticking
    assert len(seen) == 2000
    assert len(set(seen)) >= 2000 // 100  # the ticker ran between every two batches


async def test_fail_handler_stops_the_app_with_a_clear_error() -> None:
    class Boom(Processor[str, str]):
        def process(self, record: Record[str, str]) -> None:
            if record.value == "v7":
                raise ValueError("v7 is poison")
            self.context.forward(record)

    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 1)
    await produce(transport, src, inputs(20))
    app = App("boom", transport=transport)
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str)
    app.topology.add_source("src", src).add_processor("boom", Boom, "src").add_sink(
        "sink", dst, "boom")
    await app.start()
    with pytest.raises(TaskFailedError, match=r"processor 'boom' failed on .*\[0\]@7"):
        await app.wait()
    assert broker.committed("boom", TopicPartition(src, 0)) == 7


async def test_missing_source_topic_is_a_clear_error() -> None:
    app = App("nosrc", transport=MemoryTransport(MemoryBroker()))
    app.topology.add_source("src", "does-not-exist").add_sink("sink", "out", "src")
    with pytest.raises(UnknownTopicError, match="source topic 'does-not-exist' does not exist"):
        await app.start()


async def test_a_failing_sink_is_named_in_the_error() -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src = unique("in")
    await create_topic(transport, src, 1)
    await produce(transport, src, inputs(3))
    app = App("badsink", transport=transport)
    app.topic(src, key=str, value=str)
    app.topology.add_source("src", src).add_sink("to-bytes", unique("raw-out"), "src")
    await app.start()
    with pytest.raises(TaskFailedError, match=r"processor 'to-bytes' failed .*BytesSerde"):
        await app.wait()


async def test_exactly_once_uses_a_transactional_producer_per_task() -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 4)
    await produce(transport, src, inputs(400))
    first = make_app("eos", transport, src, dst, processing_guarantee="exactly_once")
    second = make_app("eos", transport, src, dst, processing_guarantee="exactly_once")
    await first.start()
    await second.start()  # two workers: distinct per-task transactional ids, no fencing
    out = await read_exactly(transport, dst, 400, read_committed=True)
    await second.stop()
    await first.stop()
    assert sorted(r.value for r in out) == sorted(v.upper() for _, v in inputs(400))
    for p in range(4):
        tp = TopicPartition(src, p)
        assert broker.committed("eos", tp) == broker.end_offset(tp)



async def test_repartition_records_are_purged_once_committed() -> None:
    name = unique("purge")
    broker = MemoryBroker.named(name)
    transport = MemoryTransport(broker)
    await create_topic(transport, "words", 1)
    await produce(transport, "words", [(f"k{i}".encode(), f"w{i % 3}".encode())
                                       for i in range(50)])
    app = App(name, broker=f"memory://{name}", commit_interval_ms=5.0, poll_timeout=0.01,
              repartition_purge_interval_ms=0)
    words = app.topic("words", key=str, value=str)
    counts = app.topic("counts", key=str, value=int, partitions=1)
    (app.stream(words).group_by(lambda _k, word: word, name="by-word")
     .count().to_stream().to(counts))
    async with app:
        await app.wait_until_caught_up(timeout=10)
        assert app.inspect().worker is not None  # internal: forces a commit now
        await app.inspect().worker.commit()
    tp = TopicPartition(f"{name}-by-word-repartition", 0)
    assert broker.beginning_offset(tp) == broker.end_offset(tp) == 50
    assert broker.topic_config(tp.topic)["retention.ms"] == "-1"
