"""External sinks in the commit protocol: results arrive at retire, in order, and are flushed
before the offsets that cover them are committed; an at-least-once commit flushes only a
backlogged sink and commits no further than the first record it still holds."""

from __future__ import annotations

import asyncio

from appkit import create_topic, produce, unique

from aiostreams import App, Processor, Record
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.testing import Sequencer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition


class RecordingSink:
    """Keeps what it is given (one source partition, from offset 0); at each flush notes how
    far the group had committed. Backlogged once ``batch`` records wait."""

    def __init__(self, broker: MemoryBroker, group: str, tp: TopicPartition,
                 batch: int = 1) -> None:
        self.name = ""
        self.broker, self.group, self.tp = broker, group, tp
        self.batch = batch
        self.added: list[ExternalRecord] = []
        self.durable = 0
        self.flush_log: list[tuple[int, int | None]] = []
        self.all_durable = asyncio.Event()
        self.expected = 0
        self.all_added = asyncio.Event()
        self.expected_added = 0

    async def start(self) -> None:
        return None

    def add(self, record: ExternalRecord) -> None:
        self.added.append(record)
        if len(self.added) >= self.expected_added:
            self.all_added.set()

    async def flush(self) -> None:
        self.flush_log.append((len(self.added), self.broker.committed(self.group, self.tp)))
        self.durable = len(self.added)
        if self.durable >= self.expected:
            self.all_durable.set()

    def durable_offset(self, source: TopicPartition) -> int | None:
        return self.durable - 1 if self.durable else None

    def pending_offset(self, source: TopicPartition) -> int | None:
        return self.durable if source == self.tp and len(self.added) > self.durable else None

    @property
    def backlogged(self) -> bool:
        return len(self.added) - self.durable >= self.batch

    async def stop(self) -> None:
        return None


class Gated(Processor[str, str]):
    def __init__(self, seq: Sequencer) -> None:
        self.seq = seq

    async def process(self, record: Record[str, str]) -> None:
        if record.offset == 0:
            await self.seq.wait("first")
        self.context.forward(record)


async def test_external_sink_gets_results_at_retire_and_flushes_before_commit() -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src = unique("in")
    await create_topic(transport, src, 1)
    await produce(transport, src, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)])
    tp = TopicPartition(src, 0)
    sink = RecordingSink(broker, "ext", tp)
    sink.expected = 50
    seq = Sequencer()
    app = App("ext", transport=transport, commit_interval_ms=20)
    app.topic(src, key=str, value=str)
    app.topology.add_source("src", src).add_processor("gate", lambda: Gated(seq), "src")
    app.topology.add_external_sink("files", sink, "gate")
    async with app:
        await seq.wait_started("first")
        assert sink.added == []  # 49 records finished, but the head has not: nothing retired
        seq.release("first")
        await sink.all_durable.wait()
    assert [r.offset for r in sink.added] == list(range(50))
    assert all(r.source == tp for r in sink.added)
    for added_at_flush, committed_before in sink.flush_log:
        assert (committed_before or 0) <= added_at_flush
    assert broker.committed("ext", tp) == 50


class SlowSink(RecordingSink):
    """Asks for a flush once ``batch`` records wait, and its first flush blocks until
    released: a Spark write that takes long."""

    def __init__(self, broker: MemoryBroker, group: str, tp: TopicPartition,
                 batch: int) -> None:
        super().__init__(broker, group, tp, batch)
        self.flushing = asyncio.Event()
        self.release = asyncio.Event()

    async def flush(self) -> None:
        if not self.flushing.is_set() and self.added:
            self.flushing.set()
            await self.release.wait()
        await super().flush()


async def test_a_slow_sink_flush_stops_fetching_so_its_buffer_stays_bounded() -> None:
    """Back-pressure: the commit that waits for a slow flush runs in the fetch loop, so
    nothing is fetched meanwhile; what keeps reaching the sink is only what was fetched
    before, never the rest of the topic."""
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src = unique("in")
    await create_topic(transport, src, 1)
    total = 20_000
    await produce(transport, src, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(total)])
    tp = TopicPartition(src, 0)
    sink = SlowSink(broker, "slow", tp, batch=500)
    app = App("slow", transport=transport, commit_interval_ms=100,
              max_poll_records=200, max_buffered_per_partition=200, max_in_flight=50)
    app.topic(src, key=str, value=str)
    app.topology.add_source("src", src).add_external_sink("files", sink, "src")
    async with app:
        await sink.flushing.wait()
        [task] = app.status().tasks
        fetched = task.counters["records_in"]
        for _ in range(500):  # let the loop run; no time passes, nothing is waited for
            await asyncio.sleep(0)
        # nothing fetched while the flush waits
        assert app.status().tasks[0].counters["records_in"] == fetched
        assert len(sink.added) <= fetched < 500 + 2 * 200
        sink.release.set()
        await app.wait_until_caught_up(timeout=60)
    assert sink.durable == total
    assert [r.offset for r in sink.added] == list(range(total))


async def test_at_least_once_commits_stop_at_a_sinks_first_buffered_record_until_it_flushes(
        ) -> None:
    """Commits do not flush a sink that is not backlogged; they commit its source partition
    only up to the first record it holds, so its files follow its batch size, not the commit
    interval. Shutdown (and ``wait_until_caught_up``) flush it."""
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src = unique("in")
    await create_topic(transport, src, 1)
    tp = TopicPartition(src, 0)
    sink = RecordingSink(broker, "batching", tp, batch=1000)
    app = App("batching", transport=transport, commit_interval_ms=20)
    app.topic(src, key=str, value=str)
    app.topology.add_source("src", src).add_external_sink("files", sink, "src")
    async with app:
        worker = app.inspect().worker  # internal: awaits the worker's next commit
        assert worker is not None
        sink.expected_added = 50
        await produce(transport, src, [(b"k", f"v{i}".encode()) for i in range(50)])
        await sink.all_added.wait()
        for _ in range(3):
            await worker.next_commit()
        assert sink.flush_log == []  # 50 < the batch of 1000: nothing written yet
        assert broker.committed("batching", tp) is None  # record 0 is only buffered
        await app.wait_until_caught_up(timeout=60)  # flushes the sink
        assert sink.flush_log == [(50, None)]
        assert broker.committed("batching", tp) == 50
        sink.all_added.clear()
        sink.expected_added = 80
        await produce(transport, src, [(b"k", f"v{i}".encode()) for i in range(50, 80)])
        await sink.all_added.wait()
        for _ in range(3):
            await worker.next_commit()
        assert broker.committed("batching", tp) == 50  # not past record 50, still buffered
        assert len(sink.flush_log) == 1
    assert sink.flush_log[1:] == [(80, 50)]  # the shutdown's commit flushed it first
    assert broker.committed("batching", tp) == 80
