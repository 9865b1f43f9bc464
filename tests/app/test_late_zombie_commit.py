"""Exactly-once: a previous owner's transaction that commits after the new owner read its
starting offsets (but before the new owner's producer fenced it) is not processed again.

The new owner reads the group's committed offsets when its partitions are assigned; the
fence (its transactional producer's init) comes later, when the task opens. Here the
previous owner's commit lands exactly in between - the test commits it from inside the
output router's ``open``, just before the fence - and the records it covered must not
come out a second time.
"""

from __future__ import annotations

from typing import Any

import pytest
from appkit import create_topic, produce, read_exactly, unique

from aiostreams import App
from aiostreams.engine.output_router import OutputRouter
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
async def test_a_commit_landing_before_the_fence_is_where_the_new_owner_starts(
        monkeypatch: pytest.MonkeyPatch, guarantee: str) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 1)
    await produce(transport, src, [(b"k", f"v{i}".encode()) for i in range(10)])
    tp = TopicPartition(src, 0)
    broker.commit_offsets("zombie", {tp: 4})  # what the group had when the worker joined
    opened = OutputRouter.open

    async def zombie_commits_then_fence(router: OutputRouter, task_id: str) -> None:
        broker.commit_offsets("zombie", {tp: 7})  # the previous owner's late transaction
        await opened(router, task_id)

    monkeypatch.setattr(OutputRouter, "open", zombie_commits_then_fence)
    app = App("zombie", transport=transport, commit_interval_ms=50,
              processing_guarantee=guarantee)
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str)
    app.stream(src).map_values(str.upper).to(dst)
    async with app:
        await app.wait_until_caught_up(timeout=10)
    out: list[Any] = await read_exactly(transport, dst, 3 if guarantee == "exactly_once" else 6)
    values = [r.value for r in out]
    if guarantee == "exactly_once":
        assert values == [b"V7", b"V8", b"V9"]  # 4..6 were the previous owner's
    else:  # at-least-once promises no such thing: it starts where it read, and repeats
        assert values == [f"V{i}".encode() for i in range(4, 10)]
