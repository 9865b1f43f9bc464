"""The commit protocol as the worker runs it, on the memory broker: a failed send starts
its tasks again from their last commit (the rewind); a stop does not cut a commit under way
(it is shielded); a crashed loop fails the worker; a tick of the commit interval asks for
one commit, not one at every fetch after it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from appkit import produce
from taskkit import GatedUpper

from aiostreams import App, Processor, Record
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.worker import Worker, WorkerConfig
from aiostreams.errors import TransportError
from aiostreams.lifecycle.state import AppState
from aiostreams.runtime.clock import Clock, LoopClock, ManualClock
from aiostreams.serde import StrSerde
from aiostreams.testing import Sequencer, settle
from aiostreams.topic import Topic
from aiostreams.topology.topology import Topology
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.memory_producer import MemoryProducer
from aiostreams.types import OutgoingRecord, TopicPartition

IN = TopicPartition("in", 0)


class Upper(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(record.value.upper()))


class FailsItsSecondSend(MemoryProducer):
    """A real memory producer whose second ``send_batch`` fails before appending anything
    (the connection dropped); it notes what the group had committed at that moment."""

    def __init__(self, broker: MemoryBroker, **kwargs: object) -> None:
        super().__init__(broker, **kwargs)  # type: ignore[arg-type]
        self.broker = broker
        self.sends = 0
        self.committed_at_failure: int | None = None
        self.landed_before_failure: int | None = None

    async def send_batch(self, records: Sequence[OutgoingRecord]) -> None:
        self.sends += 1
        if self.sends == 2:
            self.committed_at_failure = self.broker.committed("upper", IN) or 0
            self.landed_before_failure = self.broker.end_offset(TopicPartition("out", 0))
            raise TransportError("injected: connection reset mid-request") from \
                ConnectionResetError()
        await super().send_batch(records)


class OneFlakyProducer(MemoryTransport):
    """The memory transport, but its first plain producer (the worker's shared one) is
    :class:`FailsItsSecondSend`."""

    def __init__(self, broker: MemoryBroker) -> None:
        super().__init__(broker)
        self._broker_ref = broker
        self.flaky: FailsItsSecondSend | None = None

    def producer(self, *, client_id: str = "aiostreams",
                 transactional_id: str | None = None) -> MemoryProducer:
        if self.flaky is None and transactional_id is None:
            self.flaky = FailsItsSecondSend(self._broker_ref, client_id=client_id)
            return self.flaky
        return super().producer(client_id=client_id, transactional_id=transactional_id)


async def test_a_failed_send_processes_again_everything_after_the_last_commit() -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    transport = OneFlakyProducer(broker)
    app = App("upper", transport=transport, commit_interval_ms=50)
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_processor("upper", Upper, "src").add_sink(
        "sink", "out", "upper")
    values = [f"v{i}" for i in range(150)]
    async with app:
        await produce(transport, "in", [(b"k", v.encode()) for v in values[:100]])
        await app.wait_until_caught_up(timeout=30)
        await produce(transport, "in", [(b"k", v.encode()) for v in values[100:]])
        await app.wait_until_caught_up(timeout=30)
    flaky = transport.flaky
    assert flaky is not None and flaky.committed_at_failure is not None
    assert flaky.landed_before_failure is not None
    c, n = flaky.committed_at_failure, flaky.landed_before_failure
    out = [r.value.decode() for r in broker.records("out", 0) if r.value is not None]
    # what landed before the failure, then every record from the last commit on, once
    # more, in order: nothing lost, and the rewind went back exactly to the commit
    assert out == out[:n] + [v.upper() for v in values[c:]]
    assert n <= len(values) and c <= n
    assert broker.committed("upper", IN) == 150


class FlushWaitsForAGate(MemoryProducer):
    """A real memory producer whose ``flush`` waits for :attr:`gate` (a slow broker) and
    notes whether it was cut off (cancelled) while waiting."""

    def __init__(self, broker: MemoryBroker, **kwargs: object) -> None:
        super().__init__(broker, **kwargs)  # type: ignore[arg-type]
        self.flushing = asyncio.Event()
        self.gate = asyncio.Event()
        self.cut_off = False

    async def flush(self) -> None:
        self.flushing.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cut_off = True
            raise
        await super().flush()


class SlowFlushTransport(MemoryTransport):
    def __init__(self, broker: MemoryBroker) -> None:
        super().__init__(broker)
        self._broker_ref = broker
        self.slow: FlushWaitsForAGate | None = None

    def producer(self, *, client_id: str = "aiostreams",
                 transactional_id: str | None = None) -> MemoryProducer:
        if self.slow is None and transactional_id is None:
            self.slow = FlushWaitsForAGate(self._broker_ref, client_id=client_id)
            return self.slow
        return super().producer(client_id=client_id, transactional_id=transactional_id)


def upper_worker(transport: MemoryTransport, clock: Clock | None = None,
                 **config: object) -> Worker:
    topology = (Topology().add_source("src", Topic("in", StrSerde(), StrSerde()))
                .add_processor("upper", Upper, "src")
                .add_sink("sink", Topic("out", StrSerde(), StrSerde()), "upper"))
    return Worker(topology.build(), topology.topics, transport,
                  WorkerConfig(app_id="upper", task=TaskSettings(), **config),  # type: ignore[arg-type]
                  clock if clock is not None else LoopClock())


async def test_a_stop_lets_the_commit_under_way_finish_instead_of_cutting_it() -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    transport = SlowFlushTransport(broker)
    worker = upper_worker(transport, commit_interval=0.01)
    await worker.start()
    await produce(transport, "in", [(b"k", b"a"), (b"k", b"b")])
    slow = transport.slow
    assert slow is not None
    await slow.flushing.wait()  # a commit is under way, waiting for the broker
    stopping = asyncio.create_task(worker.stop())
    await settle(10)  # the stop begins: it cancels the loops, then waits for the commit
    assert worker.state is AppState.STOPPING and not stopping.done()
    slow.gate.set()
    await stopping
    assert not slow.cut_off
    assert broker.committed("upper", IN) == 2
    assert worker.state is AppState.STOPPED


async def test_a_crashed_loop_fails_the_worker_instead_of_leaving_it_idle() -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    worker = upper_worker(MemoryTransport(broker))

    async def crashing_sender() -> None:
        raise KeyError("a bug in the sender")

    worker._router.send_loop = crashing_sender  # type: ignore[method-assign]
    await worker.start()
    async with asyncio.timeout(10):  # a bound for the mutant, not a wait for time
        await worker.stop_requested()
    assert isinstance(worker.failure, KeyError)
    await worker.stop()
    assert worker.state is AppState.FAILED


async def test_a_stop_during_a_rebalance_lets_the_revoke_drain_and_commit() -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 2)
    broker.create_topic("out", 1)
    transport = MemoryTransport(broker)
    seq = Sequencer()
    topology = (Topology().add_source("src", Topic("in", StrSerde(), StrSerde()))
                .add_processor("upper", lambda: GatedUpper(seq), "src")
                .add_sink("sink", Topic("out", StrSerde(), StrSerde()), "upper"))
    first = Worker(topology.build(), topology.topics, transport,
                   WorkerConfig(app_id="upper", task=TaskSettings(), commit_interval=600.0),
                   LoopClock())
    revoking = asyncio.Event()
    real_revoke = first._table.revoke

    async def revoke(tasks: list[StreamTask], *args: Any) -> None:
        if tasks:
            revoking.set()
        await real_revoke(tasks, *args)

    first._table.revoke = revoke  # type: ignore[method-assign]
    await first.start()
    producer = transport.producer()
    await producer.start()
    await producer.send_batch([OutgoingRecord("in", b"k", b"x", partition=0),
                               OutgoingRecord("in", b"k", b"y", partition=1)])
    await seq.wait_started("x")
    await seq.wait_started("y")
    second = upper_worker(transport, commit_interval=600.0)
    await second.start()  # the group moves one partition to it: the first revokes it
    await revoking.wait()  # ... and drains it: its record waits for its gate
    stopping = asyncio.create_task(first.stop())
    await settle(10)  # the stop has cancelled the first's loops, mid-rebalance
    seq.release("x", "y")
    await stopping
    # both records committed by the first: the revoked one by the revoke it let finish
    assert [broker.committed("upper", TopicPartition("in", p)) for p in (0, 1)] == [1, 1]
    await second.stop()
    await producer.stop()


async def test_a_tick_of_the_commit_interval_asks_for_one_commit_not_one_per_fetch() -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    transport = MemoryTransport(broker)
    clock = ManualClock()
    worker = upper_worker(transport, clock, commit_interval=1.0, poll_timeout=0.01)
    commits = 0
    real_commit = worker._committer.commit

    async def commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal commits
        commits += 1
        return await real_commit(*args, **kwargs)

    fetches = 0
    fetched = asyncio.Event()
    real_fetch = worker._fetch_once

    async def fetch_once() -> None:
        nonlocal fetches
        await real_fetch()
        fetches += 1
        fetched.set()

    async def more_fetches(n: int) -> None:
        target = fetches + n
        while fetches < target:
            fetched.clear()
            await fetched.wait()

    worker._committer.commit = commit  # type: ignore[method-assign]
    worker._fetch_once = fetch_once  # type: ignore[method-assign]
    await worker.start()
    await produce(transport, "in", [(b"k", b"a")])
    await more_fetches(2)
    assert commits == 0  # no tick yet
    clock.advance(1.0)
    await more_fetches(2)  # the fetch that saw the tick committed
    assert commits == 1 and broker.committed("upper", IN) == 1
    await produce(transport, "in", [(b"k", b"b")])
    await more_fetches(3)
    assert commits == 1  # the tick was taken: no commit at every fetch after it
    clock.advance(1.0)
    await more_fetches(2)
    assert commits == 2 and broker.committed("upper", IN) == 2
    await worker.stop()
