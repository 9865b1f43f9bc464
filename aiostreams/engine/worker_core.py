r"""The worker's step-wise core: deliver a fetched batch to its tasks, and commit them.

Two steps, each the one way the engine does it, with no fetch loop, no consumer group and
no timer of their own - whoever drives the core brings those:

* :meth:`WorkerCore.deliver` hands each partition's records of a fetched batch to the task
  that owns the partition - every record in first, then each task that got some is pumped
  once, so a task choosing by timestamp sees the whole batch - and gives back the
  partitions no task owns (never dropped: the caller reads them again later);
* :meth:`WorkerCore.commit` runs the commit protocol of
  :mod:`~aiostreams.engine.committer` over the given tasks, grouped by their output
  channel: snapshot, send and flush the outputs, flush the sinks, changelog marks and the
  stores, commit the offsets, write the checkpoints. Each commit that moved an offset is
  counted and reported (:class:`~aiostreams.engine.worker_config.CommitRecord`); the
  driver :meth:`~WorkerCore.announce_commit`\ s every commit to whoever waits for the next
  one (:meth:`~WorkerCore.next_commit`), and :meth:`~WorkerCore.note_uncommitted` keeps
  what a last commit that did not land left undone.

Between the two, the outputs the tasks retire wait in their output channels
(:mod:`~aiostreams.engine.output_router`) until a sender hands them to the producer:
:meth:`WorkerCore.send` is that step, taken when the driver chooses.

Two drivers use it: :class:`~aiostreams.engine.worker.Worker` (its fetch loop, commit
timer, background sender and consumer group) and
:class:`~aiostreams.testing.driver.TopologyTestDriver` (its broker, its manual clock, and
``process_all``). So the test driver's tasks are built, fed and committed as the worker's
are (:meth:`WorkerCore.task_factory`, :meth:`~WorkerCore.deliver`,
:meth:`~WorkerCore.commit`). The names such a driver needs besides the core (the task, the
commit timer, changelog names) are re-exported here, so it reaches the engine through this
module and the clock only.

Invariants: a delivered record goes to the task that owns its partition, in fetch order,
or back to the caller; no task is pumped before the whole batch is in; a committed offset
never moves back and never passes an unretired record (the committer asserts both).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from aiostreams.engine.committer import Committer, CommitTimer
from aiostreams.engine.output_router import OutputRouter
from aiostreams.engine.restore import Restorer
from aiostreams.engine.stop_budget import not_committed, uncommitted_stop
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.task_lifecycle import TaskFactory
from aiostreams.engine.worker_config import CommitRecord
from aiostreams.errors import TaskFailedError, UncommittedStopError
from aiostreams.policies import Retry
from aiostreams.runtime.clock import Clock
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.state.store_spec import changelog_topic
from aiostreams.topic import Topic
from aiostreams.transport.base import Consumer, Transport
from aiostreams.types import RawRecord, TopicPartition

__all__ = ["CommitRecord", "CommitTimer", "Fetcher", "StreamTask", "WorkerCore",
           "changelog_topic"]

log = logging.getLogger("aiostreams.worker")

Lost = list[tuple[list[StreamTask], BaseException]]


class WorkerCore:
    """See the module docstring. ``sinks`` are the external sinks by name (the router
    hands them their records, the commit flushes them); ``request_commit`` is asked for an
    early commit when a sink is backlogged; ``owns`` says whether the tasks are still this
    core's to send for (a group member's lease); ``on_commit`` hears of every commit that
    moved an offset."""

    def __init__(self, transport: Transport, *, app_id: str, client_id: str,
                 exactly_once: bool, state_dir: Path | str | None,
                 sinks: Mapping[str, ExternalSink], clock: Clock,
                 request_commit: Callable[[], None],
                 owns: Callable[[], bool] = lambda: True,
                 on_commit: Callable[[CommitRecord], None] | None = None) -> None:
        self.app_id = app_id
        self.exactly_once = exactly_once
        self._state_dir = state_dir
        self._request_commit = request_commit
        self.restorer = Restorer(transport, exactly_once=exactly_once, state_dir=state_dir)
        self.router = OutputRouter(transport, app_id=app_id, client_id=client_id,
                                   exactly_once=exactly_once, sinks=sinks,
                                   request_commit=request_commit, owns=owns)
        self.committer = Committer(app_id=app_id, exactly_once=exactly_once,
                                   restorer=self.restorer, sinks=sinks)
        self._clock = clock
        self._on_commit = on_commit
        self._sink_flush_requested = False
        self.commits = 0
        """How many commits moved an offset."""
        self._committed_event = asyncio.Event()
        self.uncommitted: UncommittedStopError | None = None
        """Set when a stop's last commit did not land (see :meth:`note_uncommitted`)."""
        self._uncommitted: dict[TopicPartition, tuple[int, int]] = {}

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """Per partition, the group's offset as last committed (or read at assignment)."""
        return self.committer.committed

    def task_factory(self, settings: TaskSettings, topics: Mapping[str, Topic], *,
                     node_retry: Mapping[str, Retry],
                     on_failed: Callable[[StreamTask, TaskFailedError], None],
                     fetcher: Fetcher | None = None) -> TaskFactory:
        """How this core's tasks are built: their outputs go to its router, their stores
        live under its state directory, a ``ctx.commit()`` asks its driver for a commit.
        With a ``fetcher`` (the worker's consumer, and which partitions are its tasks'),
        a task's back-pressure pauses and resumes fetching its partitions and its idling
        asks whether the broker holds records not fetched yet; without one (the test
        driver, which hands over everything it has) neither reaches anything."""
        return TaskFactory(self.app_id, settings, topics, self._clock, emit=self.router.emit,
                           on_failed=on_failed, request_commit=self._request_commit,
                           node_retry=node_retry, state_dir=self._state_dir,
                           on_pause=fetcher.pause if fetcher else _no_pause,
                           has_unfetched=fetcher.has_unfetched if fetcher else None)

    # -- deliver ------------------------------------------------------------------------

    def deliver(self, batch: Mapping[TopicPartition, Sequence[RawRecord]],
                task_of: Mapping[TopicPartition, StreamTask]) -> dict[TopicPartition, int]:
        """Hand ``batch`` to the tasks owning its partitions, then pump each that got some.
        Returns, for each partition with records but no task, the offset of its first
        record: the caller puts it back (the worker seeks and pauses it)."""
        touched: dict[str, StreamTask] = {}
        unowned: dict[TopicPartition, int] = {}
        for tp, records in batch.items():
            if not records:
                continue
            task = task_of.get(tp)
            if task is None:
                unowned[tp] = records[0].offset
                continue
            task.enqueue(tp, records)
            touched[task.task_id] = task
        for task in touched.values():
            task.pump()
        return unowned

    # -- send ---------------------------------------------------------------------------

    async def send(self) -> None:
        """Hand every output retired so far to its producer, in retire order (the step the
        worker's background sender takes as outputs come). Raises the error of a channel
        whose send failed, now or before: nothing more goes out through it.

        Cancellation: a batch cut half-way is neither in its outbox nor surely sent, as
        with the worker's sender (which shields it); call it where nothing cancels it
        (the test driver's producer never suspends, so nothing can)."""
        for channel in self.router.channels():
            if channel.error is not None:
                raise channel.error
            await channel.send_pending()

    # -- commit -------------------------------------------------------------------------

    def request_sink_flush(self) -> None:
        """Make the next commit flush every external sink, backlogged or not (an
        at-least-once commit flushes only backlogged ones)."""
        self._sink_flush_requested = True

    async def commit(self, tasks: Sequence[StreamTask], consumer: Consumer, *,
                     closing: bool = False) -> tuple[dict[TopicPartition, int], Lost]:
        """Commit what ``tasks`` retired through ``consumer`` (its group's offsets); see
        :meth:`~aiostreams.engine.committer.Committer.commit` for ``closing`` and for the
        tasks it returns as lost (the caller closes them without committing). Returns the
        offsets committed and the lost groups.

        Cancellation: do not cancel a commit (the worker shields it)."""
        flush_all = closing or self.exactly_once or self._sink_flush_requested
        self._sink_flush_requested = False
        started = self._clock.monotonic()
        committed, lost = await self.committer.commit(
            self.router.groups(tasks, lambda t: t.task_id), consumer,
            closing=closing, flush_all=flush_all)
        if committed:
            self.commits += 1
            if self._on_commit is not None:
                self._on_commit(CommitRecord(committed, self._clock.monotonic() - started))
        return committed, lost

    def announce_commit(self) -> None:
        """Wake whoever waits for the next commit (even an empty one: nothing left to
        do). The driver calls it once a commit, and what it does after one, is over."""
        event, self._committed_event = self._committed_event, asyncio.Event()
        event.set()

    async def next_commit(self, stopped: asyncio.Event) -> None:
        """Wait for the next :meth:`announce_commit`, or for ``stopped``.
        Cancellation-safe."""
        stopping = asyncio.ensure_future(stopped.wait())
        committed = asyncio.ensure_future(self._committed_event.wait())
        try:
            await asyncio.wait([stopping, committed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            committed.cancel()

    def note_uncommitted(self, tasks: Iterable[StreamTask], why: str) -> None:
        """A stop's last commit of ``tasks`` did not land (``why``): note what it leaves
        undone in :attr:`uncommitted`."""
        processed = {tp: o for t in tasks for tp, o in t.committable().items()}
        pending = not_committed(processed, self.committer.committed)
        if pending:
            self._uncommitted.update(pending)
            self.uncommitted = uncommitted_stop(self._uncommitted, why)
            log.error("worker: %s", self.uncommitted)


def _no_pause(tp: TopicPartition, paused: bool) -> None:
    pass


class Fetcher:
    """Relays a task's flow control to the consumer that fetches for it (the worker's:
    ``consumer()``; None while there is none) - only for partitions a task of the worker
    holds (``held``)."""

    def __init__(self, consumer: Callable[[], Consumer | None],
                 held: Callable[[TopicPartition], bool]) -> None:
        self._consumer = consumer
        self._held = held

    def pause(self, tp: TopicPartition, paused: bool) -> None:
        consumer = self._consumer()
        if consumer is None or not self._held(tp):
            return
        if paused:
            consumer.pause([tp])
        else:
            consumer.resume([tp])

    def has_unfetched(self, tp: TopicPartition, next_offset: int) -> bool:
        consumer = self._consumer()
        if consumer is None:
            return False
        highwater = consumer.highwater(tp)
        return highwater is not None and highwater > next_offset
