"""The commit protocol (engine/committer.py) on the memory broker: the order of its steps,
nothing committed past unsent output, and an exactly-once commit as one transaction
holding the outputs of exactly the records whose offsets it commits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from taskkit import GatedUpper, raw, str_topic

from aiostreams.engine.committer import Committer, CommitTimer, advance, commit_snapshot
from aiostreams.engine.output_channel import OutputChannel
from aiostreams.engine.output_router import OutputRouter
from aiostreams.engine.restore import Restorer
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.task_lifecycle import TaskFactory
from aiostreams.errors import UnknownTopicError
from aiostreams.runtime.clock import ManualClock
from aiostreams.testing import Sequencer, settle
from aiostreams.topology.topology import Topology
from aiostreams.transport.base import Consumer, IsolationLevel
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition
from tests.support.taskkit import QuietListener

IN = TopicPartition("in", 0)
OUT = TopicPartition("out", 0)


@dataclass
class Rig:
    broker: MemoryBroker
    consumer: Consumer
    channel: OutputChannel
    committer: Committer
    task: StreamTask
    seq: Sequencer
    steps: list[str]
    hooks: dict[str, Callable[[], None]]

    async def commit(self, *, closing: bool = False) -> dict[TopicPartition, int]:
        committed, lost = await self.committer.commit([(self.channel, [self.task])],
                                                      self.consumer, closing=closing,
                                                      flush_all=True)
        assert lost == []
        return committed

    def feed(self, *values: str, start: int = 0) -> None:
        self.task.enqueue(IN, [raw("in", 0, start + i, "k" + v, v)
                               for i, v in enumerate(values)])
        self.task.pump()

    def landed(self) -> list[str]:
        """The values on "out" (under exactly-once: of committed transactions only)."""
        return [r.value.decode() for r in self.broker.records("out", 0)
                if r.value is not None]


def spy(steps: list[str], obj: Any, name: str,
        before: Callable[[], None] = lambda: None) -> None:
    """Record each call of ``obj.name`` in ``steps``, run ``before``, let the loop turn (as
    a request to a real broker would), then call the real method: the real client does
    the work."""
    real = getattr(obj, name)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        steps.append(name)
        before()
        await settle()
        return await real(*args, **kwargs)

    setattr(obj, name, recorded)


async def rig(*, exactly_once: bool) -> Rig:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    transport = MemoryTransport(broker)
    consumer = transport.consumer("app")
    await consumer.start()
    consumer.subscribe(["in"], QuietListener())
    await consumer.getmany(0.0)  # joins the group: "in"-0 is ours
    assert consumer.assignment() == {IN}
    routes = OutputRouter(transport, app_id="app", client_id="t", exactly_once=exactly_once,
                          sinks={}, request_commit=lambda: None)
    await routes.start()
    seq = Sequencer()
    topology = (Topology().add_source("src", str_topic("in"))
                .add_processor("upper", lambda: GatedUpper(seq), "src")
                .add_sink("sink", str_topic("out"), "upper"))
    make = TaskFactory("app", TaskSettings(), topology.topics, ManualClock(),
                       emit=routes.emit, on_failed=lambda t, e: None,
                       request_commit=lambda: None, node_retry={})
    task = make(topology.build()[0], 0, [IN])
    await routes.open(task.task_id)
    await task.initialize()
    committer = Committer(app_id="app", exactly_once=exactly_once,
                          restorer=Restorer(transport, exactly_once=exactly_once,
                                            state_dir=None), sinks={})
    channel = routes.channel_of(task.task_id)
    steps: list[str] = []
    hooks: dict[str, Callable[[], None]] = {}
    for obj, names in ((channel.producer, ("send_batch", "flush", "begin_transaction",
                                           "send_offsets_to_transaction",
                                           "commit_transaction")),
                       (consumer, ("commit",)),
                       (task, ("flush_stores", "flush_sealed_stores"))):
        for name in names:
            spy(steps, obj, name, lambda name=name: hooks.get(name, lambda: None)())
    return Rig(broker, consumer, channel, committer, task, seq, steps, hooks)


async def test_at_least_once_sends_and_flushes_outputs_then_stores_then_offsets() -> None:
    r = await rig(exactly_once=False)
    r.feed("a", "b", "c")
    r.seq.release("a", "b", "c")
    await settle()
    assert await r.commit() == {IN: 3}
    assert r.steps == ["send_batch", "flush", "flush_stores", "commit"]
    assert r.landed() == ["A", "B", "C"]
    assert r.broker.committed("app", IN) == 3


async def test_exactly_once_commits_outputs_and_offsets_in_one_transaction() -> None:
    r = await rig(exactly_once=True)
    r.feed("a", "b")
    r.seq.release("a", "b")
    await settle()
    reader = MemoryTransport(r.broker).consumer(
        None, isolation_level=IsolationLevel.READ_COMMITTED)
    await reader.start()
    seen_before_commit: list[tuple[int | None, int]] = []

    def at_commit_point() -> None:
        seen_before_commit.append((r.broker.committed("app", IN), r.broker.end_offset(OUT)))

    r.hooks["commit_transaction"] = at_commit_point
    assert await r.commit() == {IN: 2}
    # the state stores are written only once the transaction committed
    assert r.steps == ["begin_transaction", "send_batch", "flush",
                       "send_offsets_to_transaction", "commit_transaction",
                       "flush_sealed_stores"]
    assert seen_before_commit == [(None, 0)]  # neither offsets nor outputs before it
    assert r.broker.committed("app", IN) == 2
    assert (await reader.end_offsets([OUT]))[OUT] == 2
    await reader.stop()


async def test_a_transaction_holds_only_the_outputs_retired_before_its_snapshot() -> None:
    r = await rig(exactly_once=True)
    r.feed("a", "b")
    r.seq.release("a")
    await settle()

    r.hooks["flush"] = lambda: r.seq.release("b")  # "b" retires during the commit
    assert await r.commit() == {IN: 1}
    await settle()
    assert r.landed() == ["A"]  # "B" retired too late for this transaction
    assert r.channel.pending
    assert await r.commit() == {IN: 2}
    assert r.landed() == ["A", "B"]


async def test_nothing_is_committed_past_an_output_whose_send_failed() -> None:
    r = await rig(exactly_once=False)
    r.feed("a")
    r.seq.release("a")
    await settle()
    assert await r.commit() == {IN: 1}
    r.feed("b", "c", start=1)
    r.seq.release("b", "c")
    await settle()
    r.broker.delete_topics(["out"])  # the send of "B", "C" fails
    with pytest.raises(UnknownTopicError):
        await r.commit()
    assert r.broker.committed("app", IN) == 1
    assert r.committer.committed[IN] == 1
    assert isinstance(r.channel.error, UnknownTopicError)


def test_a_committed_offset_never_moves_back() -> None:
    committed = {IN: 5}
    advance(committed, {IN: 7})
    with pytest.raises(AssertionError, match="moved back 7 -> 6"):
        advance(committed, {IN: 6})


async def test_the_snapshot_stops_at_the_first_unretired_record() -> None:
    r = await rig(exactly_once=False)
    r.feed("a", "b", "c")
    r.seq.release("a", "c")  # "b" still executing
    await settle()
    assert commit_snapshot([r.task], {}) == {IN: 1}
    assert commit_snapshot([r.task], {IN: 1}) == {}  # nothing new past the last commit


def test_the_commit_timer_asks_every_interval_and_on_request() -> None:
    clock = ManualClock()
    ticks: list[float] = []
    timer = CommitTimer(clock, 1.0, lambda: ticks.append(clock.monotonic()))
    timer.start()
    assert not timer.take()
    clock.advance(1.0)
    assert timer.take() and not timer.take()
    clock.advance(2.0)
    assert len(ticks) == 3
    timer.cancel()
    clock.advance(5.0)
    assert len(ticks) == 3
    timer.request()
    assert timer.requested
