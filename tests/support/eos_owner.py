"""One exactly-once owner of a single task on the memory broker, for the tests that kill a
commit part-way: the consumer, output router, task, restorer and committer a worker would
hold, opened the way a worker opens a task it is given (fence the old producer, open and
restore the stores, start from the group's committed offset), and :func:`kill_at`, which
makes the next commit take a crash image and die at a named point."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

import aiostreams.state.sqlite_write_back as write_back
from aiostreams.engine.committer import Committer
from aiostreams.engine.output_router import OutputRouter
from aiostreams.engine.restore import Restorer
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.task_lifecycle import TaskFactory
from aiostreams.runtime.clock import ManualClock
from aiostreams.state.changelog_mark import ChangelogMark, write_mark
from aiostreams.topology.topology import Topology
from aiostreams.transport.base import Consumer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition
from tests.support.taskkit import QuietListener

IN = TopicPartition("in", 0)


class Killed(BaseException):
    """The process died here (nothing after this point runs)."""


@dataclass
class EosOwner:
    """One process owning the task ``in``-0: its consumer, producer (channel), task and
    commit; ``position`` is where it started (the group's committed offset)."""

    consumer: Consumer
    router: OutputRouter
    task: StreamTask
    restorer: Restorer
    committer: Committer
    position: int

    async def commit(self) -> None:
        channel = self.router.channel_of(self.task.task_id)
        _, lost = await self.committer.commit([(channel, [self.task])], self.consumer,
                                              closing=False, flush_all=True)
        assert lost == []

    async def stop(self) -> None:
        await self.task.close()
        await self.router.close(self.task.task_id)  # an open transaction is aborted
        await self.router.stop(lambda: 5.0)
        await self.consumer.stop()


OwnerT = TypeVar("OwnerT", bound=EosOwner)


async def start_owner(kind: Callable[..., OwnerT], broker: MemoryBroker, state_dir: Path,
                      app: str, top: Topology, settings: TaskSettings,
                      **extra: Any) -> OwnerT:
    """``kind(consumer, router, task, restorer, committer, position, **extra)`` for a new
    owner of ``top``'s task on ``in``-0, opened as a worker opens a task it is given."""
    transport = MemoryTransport(broker)
    consumer = transport.consumer(app)
    await consumer.start()
    consumer.subscribe(["in"], QuietListener())
    await consumer.getmany(0.0)
    assert consumer.assignment() == {IN}
    router = OutputRouter(transport, app_id=app, client_id="t", exactly_once=True, sinks={},
                          request_commit=lambda: None)
    await router.start()
    make = TaskFactory(app, settings, top.topics, ManualClock(), emit=router.emit,
                       on_failed=lambda t, e: None, request_commit=lambda: None,
                       node_retry={}, state_dir=state_dir)
    task = make(top.build()[0], 0, [IN])
    task.owner_epoch = consumer.generation
    await router.open(task.task_id)
    await task.open_stores()
    restorer = Restorer(transport, exactly_once=True, state_dir=state_dir)
    await restorer.restore(task)
    await task.initialize()
    position = await consumer.committed(IN) or 0
    task.seed_position(IN, position)
    committer = Committer(app_id=app, exactly_once=True, restorer=restorer, sinks={})
    committer.committed[IN] = position
    return kind(consumer, router, task, restorer, committer, position, **extra)


def kill_at(point: str, owner: EosOwner, monkeypatch: pytest.MonkeyPatch,
            image: Callable[[], object]) -> None:
    """Make ``owner``'s next commit take the crash image and die at ``point``: ``before X``
    (X a producer method, or the task's ``flush_sealed_stores``), ``after
    commit_transaction``, ``inside the first store's SQLite transaction`` or ``after
    flush_sealed_stores``."""
    def die() -> None:
        image()
        raise Killed(point)

    producer = owner.router.channel_of(owner.task.task_id).producer
    if point.startswith("before "):
        name = point.removeprefix("before ")
        target: Any = owner.task if name == "flush_sealed_stores" else producer
        real = getattr(target, name)

        async def before(*args: Any, **kwargs: Any) -> Any:
            die()
            return await real(*args, **kwargs)

        monkeypatch.setattr(target, name, before)
    elif point == "after commit_transaction":
        real_commit = producer.commit_transaction

        async def after() -> None:
            await real_commit()
            die()

        monkeypatch.setattr(producer, "commit_transaction", after)
    elif point == "inside the first store's SQLite transaction":
        async def marked(db: Any, mark: ChangelogMark) -> None:
            await write_mark(db, mark)
            die()  # the data and the mark are written, the COMMIT is not

        monkeypatch.setattr(write_back, "write_mark", marked)
    elif point == "after flush_sealed_stores":
        real_flush = owner.task.flush_sealed_stores

        async def flushed(ends: dict[TopicPartition, int]) -> None:
            await real_flush(ends)
            die()

        monkeypatch.setattr(owner.task, "flush_sealed_stores", flushed)
    else:
        raise AssertionError(point)
