"""Exactly-once commits of several task groups at once (engine/committer.py): each group's
transaction runs its round trips while the others run theirs, and one group's failure
neither stops nor undoes the others' commits; between commits the sender hands each
channel's outputs over while another channel's send waits for the broker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from taskkit import GatedUpper, raw, str_topic

from aiostreams.engine.committer import Committer
from aiostreams.engine.output_channel import OutputChannel
from aiostreams.engine.output_router import OutputRouter
from aiostreams.engine.restore import Restorer
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.task_lifecycle import TaskFactory
from aiostreams.errors import ProducerFencedError, UnknownTopicError
from aiostreams.runtime.clock import ManualClock
from aiostreams.testing import Sequencer, settle
from aiostreams.topology.topology import Topology
from aiostreams.transport.base import Consumer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition
from tests.support.taskkit import QuietListener

PARTITIONS = 3
INPUTS = [TopicPartition("in", p) for p in range(PARTITIONS)]


@dataclass
class Rig:
    broker: MemoryBroker
    consumer: Consumer
    groups: list[tuple[OutputChannel, list[StreamTask]]]
    committer: Committer
    seq: Sequencer
    steps: list[tuple[int, str]]
    hooks: dict[tuple[int, str], Callable[[], None]]
    routes: OutputRouter

    def feed_all(self) -> None:
        """One record "v<p>" into each partition p, retired at once."""
        for p, (_, [task]) in enumerate(self.groups):
            task.enqueue(INPUTS[p], [raw("in", p, 0, f"k{p}", f"v{p}")])
            task.pump()
        self.seq.release(*(f"v{p}" for p in range(PARTITIONS)))

    async def commit(self) -> tuple[dict[TopicPartition, int],
                                    list[tuple[list[StreamTask], BaseException]]]:
        return await self.committer.commit(self.groups, self.consumer, closing=False,
                                           flush_all=True)


def spy(steps: list[tuple[int, str]], group: int, obj: Any, name: str,
        before: Callable[[], None]) -> None:
    """Record each call of ``obj.name`` as (group, name), run ``before`` (it may raise),
    let the loop turn as a request to a real broker would, then call the real method."""
    real = getattr(obj, name)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        steps.append((group, name))
        before()
        await settle()
        return await real(*args, **kwargs)

    setattr(obj, name, recorded)


async def rig() -> Rig:
    broker = MemoryBroker()
    broker.create_topic("in", PARTITIONS)
    broker.create_topic("out", PARTITIONS)
    transport = MemoryTransport(broker)
    consumer = transport.consumer("app")
    await consumer.start()
    consumer.subscribe(["in"], QuietListener())
    await consumer.getmany(0.0)  # joins the group: every partition of "in" is ours
    routes = OutputRouter(transport, app_id="app", client_id="t", exactly_once=True,
                          sinks={}, request_commit=lambda: None)
    await routes.start()
    seq = Sequencer()
    topology = (Topology().add_source("src", str_topic("in"))
                .add_processor("upper", lambda: GatedUpper(seq), "src")
                .add_sink("sink", str_topic("out"), "upper"))
    make = TaskFactory("app", TaskSettings(), topology.topics, ManualClock(),
                       emit=routes.emit, on_failed=lambda t, e: None,
                       request_commit=lambda: None, node_retry={})
    steps: list[tuple[int, str]] = []
    hooks: dict[tuple[int, str], Callable[[], None]] = {}
    groups: list[tuple[OutputChannel, list[StreamTask]]] = []
    def hook(key: tuple[int, str]) -> Callable[[], None]:
        return lambda: hooks.get(key, lambda: None)()

    for p in range(PARTITIONS):
        task = make(topology.build()[0], p, [INPUTS[p]])
        await routes.open(task.task_id)
        await task.initialize()
        channel = routes.channel_of(task.task_id)
        for name in ("begin_transaction", "send_batch", "flush",
                     "send_offsets_to_transaction", "commit_transaction"):
            spy(steps, p, channel.producer, name, hook((p, name)))
        groups.append((channel, [task]))
    committer = Committer(app_id="app", exactly_once=True,
                          restorer=Restorer(transport, exactly_once=True, state_dir=None),
                          sinks={})
    return Rig(broker, consumer, groups, committer, seq, steps, hooks, routes)


def landed(broker: MemoryBroker) -> list[str]:
    return sorted(r.value.decode() for p in range(PARTITIONS)
                  for r in broker.records("out", p) if r.value is not None)


async def test_the_groups_transactions_overlap_instead_of_running_one_after_another(
        ) -> None:
    r = await rig()
    r.feed_all()
    await settle()
    committed, lost = await r.commit()
    assert committed == {tp: 1 for tp in INPUTS} and lost == []
    first_commit = r.steps.index(next(s for s in r.steps if s[1] == "commit_transaction"))
    begun = {group for group, name in r.steps[:first_commit] if name == "begin_transaction"}
    assert begun == set(range(PARTITIONS))  # every transaction open before any commits
    for p in range(PARTITIONS):  # each group still runs the steps in the protocol's order
        assert [name for group, name in r.steps if group == p] == [
            "begin_transaction", "send_batch", "flush", "send_offsets_to_transaction",
            "commit_transaction"]
    assert landed(r.broker) == ["V0", "V1", "V2"]
    assert all(r.broker.committed("app", tp) == 1 for tp in INPUTS)


async def test_a_failing_group_is_raised_after_the_others_have_committed() -> None:
    r = await rig()
    r.feed_all()
    await settle()

    def fail() -> None:
        raise UnknownTopicError("out")

    r.hooks[(1, "flush")] = fail
    with pytest.raises(UnknownTopicError):
        await r.commit()
    assert r.committer.committed == {INPUTS[0]: 1, INPUTS[2]: 1}
    assert [r.broker.committed("app", tp) for tp in INPUTS] == [1, None, 1]
    assert landed(r.broker) == ["V0", "V2"]  # group 1's transaction never committed


async def test_a_fenced_group_is_lost_while_the_others_commit() -> None:
    r = await rig()
    r.feed_all()
    await settle()

    def fence() -> None:
        raise ProducerFencedError("a newer owner of task 0_2")

    r.hooks[(2, "send_offsets_to_transaction")] = fence
    committed, lost = await r.commit()
    assert committed == {INPUTS[0]: 1, INPUTS[1]: 1}
    assert [(group, type(error)) for group, error in lost] == [
        (r.groups[2][1], ProducerFencedError)]
    assert [r.broker.committed("app", tp) for tp in INPUTS] == [1, 1, None]


async def test_the_sender_hands_a_channels_outputs_over_while_another_channel_waits(
        ) -> None:
    r = await rig()
    gate = asyncio.Event()  # the broker holding channel 0's send
    sending = [asyncio.Event() for _ in range(PARTITIONS)]
    for p, (channel, _) in enumerate(r.groups):
        real = channel.producer.send_batch

        async def send_batch(records: Sequence[OutgoingRecord], p: int = p,
                             real: Any = real) -> None:
            sending[p].set()
            if p == 0:
                await gate.wait()
            await real(records)

        channel.producer.send_batch = send_batch  # type: ignore[method-assign]
    sender = asyncio.create_task(r.routes.send_loop())
    r.feed_all()
    async with asyncio.timeout(10):  # a bound for the mutant, not a wait for time
        for event in sending:
            await event.wait()
    gate.set()
    committed, lost = await r.commit()
    assert committed == {tp: 1 for tp in INPUTS} and lost == []
    assert landed(r.broker) == ["V0", "V1", "V2"]
    sender.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sender
