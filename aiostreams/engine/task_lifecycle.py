"""The worker's tasks: opening them for assigned partitions, closing them, and the two
ways to lose them without committing (after broker trouble).

* **open**: one task per sub-topology and partition (co-partitioned topics together);
  its channel (exactly-once: a transactional producer that fences the previous owner)
  and its stores opened; it starts from the group's committed position. A task with
  logged stores goes to the :class:`~aiostreams.engine.state_updater.StateUpdater`: it is
  ``RESTORING`` in the background, its partitions paused, until its stores are whole and
  its processors initialized; then its partitions resume (:meth:`TaskTable.restored`).
  The other tasks run meanwhile. A task without logged stores runs at once.
* **revoke** and **close**: a restoring task's restore is cancelled; it is closed without
  a commit (it has retired nothing, and its stores are not whole).
* **lose** (:meth:`TaskTable.lose`): the group moved the task away while the worker was
  out of it - the commit was refused, a newer owner fenced the producer, or the member's
  lease ran out (:mod:`~aiostreams.engine.ownership`). Closed without committing, its
  checkpoint discarded (its files may hold writes another owner redid differently) and its
  unsent outputs dropped; the partitions stay paused until the consumer rejoins.
* **rewind** (:meth:`TaskTable.rewind`) and **reopen** (:meth:`TaskTable.reopen`): a send
  failed for a reason that passes; the channel's tasks are closed without committing and
  started again from their last committed offsets, so every record since is processed
  again (at-least-once: outputs may repeat; exactly-once: the open transaction is aborted
  with its producer and redone by a new one).

Invariants: ``task_of`` maps exactly the partitions of the tasks in ``tasks`` (restoring
ones included: their state says so); a task's partitions leave ``committed`` when it
closes; a task the state updater holds is never committed (:meth:`TaskTable.committing`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiostreams.engine.outage import InDoubtCommitError, rewindable, settle_in_doubt
from aiostreams.engine.output_channel import OutputChannel
from aiostreams.engine.output_router import OutputRouter
from aiostreams.engine.partition_queue import HasUnfetched
from aiostreams.engine.restore import Restorer
from aiostreams.engine.state_updater import StateUpdater
from aiostreams.engine.stop_budget import CLIENT_CLOSE_MIN, close_within
from aiostreams.engine.task import StreamTask, TaskSettings, TaskState, task_id_for
from aiostreams.engine.topic_plan import changelog_names
from aiostreams.errors import CoPartitioningError, TaskFailedError, TransportError
from aiostreams.policies import Retry
from aiostreams.runtime.clock import Clock
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.topic import Topic
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import Consumer
from aiostreams.types import OutgoingRecord, TopicPartition

log = logging.getLogger("aiostreams.worker")
_MOVED = (TransportError,)
"""Errors of the group or the broker (a lease run out, a commit refused, a producer fenced, a
client dead, a coordinator gone): the group may have moved the task away, and
:meth:`TaskTable.lose` says so. A closing commit that failed otherwise (a sink's error) is
said as what it is."""

MakeTask = Callable[[SubTopology, int, list[TopicPartition]], StreamTask]


@dataclass(frozen=True)
class TaskFactory:
    """How an app's tasks are built - by the worker and by the test driver alike: one
    task per sub-topology and partition, its outputs emitted under its task id, its
    logged stores writing to their changelog topics."""

    app_id: str
    settings: TaskSettings
    topics: Mapping[str, Topic]
    clock: Clock
    emit: Callable[[str, list[OutgoingRecord | ExternalRecord]], None]
    on_failed: Callable[[StreamTask, TaskFailedError], None]
    request_commit: Callable[[], None]
    node_retry: Mapping[str, Retry]
    state_dir: Any = None
    on_pause: Callable[[TopicPartition, bool], None] = lambda tp, paused: None
    has_unfetched: HasUnfetched | None = None

    def __call__(self, sub: SubTopology, partition: int,
                 tps: list[TopicPartition]) -> StreamTask:
        task_id = task_id_for(sub, partition)
        emit = self.emit
        return StreamTask(
            task_id, sub, tps, self.settings, topics=self.topics, clock=self.clock,
            emit=lambda records: emit(task_id, records), on_failed=self.on_failed,
            on_pause=self.on_pause, request_commit=self.request_commit,
            node_retry=self.node_retry, state_dir=self.state_dir,
            changelog_topics=changelog_names(self.app_id, sub),
            has_unfetched=self.has_unfetched)


class TaskTable:
    def __init__(self, subs: Sequence[SubTopology], make_task: MakeTask,
                 router: OutputRouter, restorer: Restorer,
                 committed: dict[TopicPartition, int], *, clock: Clock,
                 broker_timeout: float,
                 on_failed: Callable[[StreamTask, TaskFailedError], None]) -> None:
        self._subs = {sub.id: sub for sub in subs}
        self.sub_of_topic = {t: sub for sub in subs for t in sub.source_topics}
        self._make_task = make_task
        self._router = router
        self._restorer = restorer
        self._updater = StateUpdater(restorer, on_restored=self.restored,
                                     on_failed=on_failed)
        self._consumer: Consumer | None = None
        self._committed = committed
        self.tasks: dict[str, StreamTask] = {}
        self.task_of: dict[TopicPartition, StreamTask] = {}
        # partitions whose task rewind closed -> the committed offset to start again from
        self.orphans: dict[TopicPartition, int | None] = {}
        # orphans whose last transactional commit is in doubt -> their task id
        self.in_doubt: dict[TopicPartition, str] = {}
        self._clock = clock
        self._broker_timeout = broker_timeout
        self.rewinding_since: float | None = None
        """When the first rewind since the last successful commit happened (the worker
        sets it back to None at each commit)."""

    def owns(self, task: StreamTask) -> bool:
        return self.tasks.get(task.task_id) is task

    def _check(self) -> None:
        """The invariant of the module docstring (checked after each open and close)."""
        held = {tp for t in self.tasks.values() for tp in t.partitions}
        if held != set(self.task_of) or not all(map(self.owns, self.task_of.values())):
            raise AssertionError(f"task_of {sorted(map(str, self.task_of))} does not map "
                                 f"the partitions of the open tasks {sorted(self.tasks)}")

    async def open(self, assigned: Collection[TopicPartition], consumer: Consumer | None
                   ) -> None:
        """Open a task for each sub-topology and partition in ``assigned`` not owned yet;
        those with logged stores start restoring in the background (their partitions
        paused until :meth:`restored`), the others run at once.

        Cancellation: the task being opened is closed (stores hold threads and files)."""
        self._consumer = consumer
        by_task: dict[tuple[int, int], list[TopicPartition]] = {}
        for tp in sorted(assigned):
            if tp not in self.task_of:
                sub = self.sub_of_topic[tp.topic]
                by_task.setdefault((sub.id, tp.partition), []).append(tp)
        for (sub_id, partition), tps in sorted(by_task.items()):
            _check_whole(self._subs[sub_id], partition, tps)
        for (sub_id, partition), tps in sorted(by_task.items()):
            task = self._make_task(self._subs[sub_id], partition, tps)
            task.owner_epoch = consumer.generation if consumer is not None else -1
            await self._router.open(task.task_id)
            try:
                await task.open_stores()
                positions = await self._start_positions(consumer, tps)
                if not task.changelog_partitions:
                    await task.initialize()
            except BaseException:
                await task.close()  # stores hold threads and files: never leave them open
                await self._router.close(task.task_id)
                raise
            self.tasks[task.task_id] = task
            for tp in tps:
                self.task_of[tp] = task
            for tp, position in positions.items():
                self._committed[tp] = position
                task.seed_position(tp, position)
            if task.state is TaskState.RESTORING:
                if consumer is not None:
                    consumer.pause(tps)  # nothing is fetched for it until it runs
                self._updater.add(task)
            self._check()

    async def _start_positions(self, consumer: Consumer | None,
                               tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Where the task's partitions start: the consumer's positions, and under
        exactly-once no earlier than the committed offsets read *after* the task's
        transactional producer fenced the previous owner. The consumer fetched the committed
        offsets when the partitions were assigned, before that fence: a previous owner's
        transaction that committed in between (it was still in flight, or its commit landed
        late) would otherwise have its records processed twice, outputs and all."""
        if consumer is None:
            return {}
        positions = {tp: await consumer.position(tp) for tp in tps}
        if self._router.exactly_once:
            for tp in tps:
                committed = await consumer.committed(tp)
                if committed is not None and committed > positions[tp]:
                    log.warning("%s: the previous owner committed up to %d after this worker "
                                "read %d; starting at %d (its records are not processed "
                                "again)", tp, committed, positions[tp], committed)
                    consumer.seek(tp, committed)
                    positions[tp] = committed
        return positions

    def restored(self, task: StreamTask) -> None:
        """``task``'s stores are whole and it runs: let its held records flow and resume
        fetching its partitions (those it does not hold paused itself)."""
        if not self.owns(task):
            return
        log.info("task %s: restored; running", task.task_id)
        task.pump()
        consumer = self._consumer
        if consumer is not None:
            owned = consumer.assignment()
            consumer.resume([tp for tp in task.partitions
                             if tp in owned and not task.intake.is_paused(tp)])

    def restoring(self, task: StreamTask) -> bool:
        """Whether ``task`` is held by the state updater (restoring, or failed to)."""
        return self._updater.holds(task)

    def committing(self, tasks: Collection[StreamTask]) -> list[StreamTask]:
        """The tasks of ``tasks`` a commit may include: not those restoring (their stores
        are not whole and their offsets stay where the group has them)."""
        return [t for t in tasks if not self._updater.holds(t)]

    async def revoke(self, tasks: list[StreamTask], drain_timeout: float,
                     commit: Callable[[list[StreamTask]], Awaitable[None]]) -> None:
        """Drain ``tasks`` (up to ``drain_timeout`` seconds), ``commit`` them (a failed task
        too: up to its failed record) and close them.

        Cancellation: the tasks stay open for whoever cancelled it (a stop, which closes
        them once the shielded commit that may still use them is over)."""
        restoring = [t for t in tasks if self._updater.holds(t)]
        tasks = self.committing(tasks)
        for task in restoring:
            if self.owns(task):
                await self.close(task)  # cancels its restore; nothing to commit
        if not tasks:
            return
        await asyncio.gather(*(t.drain(drain_timeout) for t in tasks))
        try:
            await commit(tasks)
        finally:
            if not _cancelling():
                for task in tasks:
                    if self.owns(task):
                        await self.close(task)

    async def close(self, task: StreamTask) -> None:
        """Close ``task`` and forget it (its producer too, under exactly-once); a restoring
        task's restore is cancelled first."""
        try:
            await self._updater.cancel(task)
            await task.close()
        finally:
            self.tasks.pop(task.task_id, None)
            for tp in task.partitions:
                self.task_of.pop(tp, None)
                self._committed.pop(tp, None)
            self._check()
            await self._router.close(task.task_id)

    async def close_quietly(self, task: StreamTask) -> None:
        """Close ``task`` within :data:`CLIENT_CLOSE_MIN` seconds, logging a failure."""
        try:
            await close_within(self.close(task), CLIENT_CLOSE_MIN, f"task {task.task_id}")
        except Exception:
            log.exception("worker: closing task %s failed", task.task_id)

    async def lose(self, tasks: Sequence[StreamTask], error: BaseException,
                   consumer: Consumer | None) -> None:
        """The group took ``tasks`` while this worker was away (paused past the session
        timeout, cut off from the broker): their commit was refused or their producer
        fenced. Close them without committing and pause their partitions until the
        consumer, at its next fetch, rejoins and learns its new assignment (a partition it
        gets back starts again from the committed offset)."""
        lost = [t for t in tasks if self.owns(t)]
        if not lost:
            return
        names = ", ".join(t.task_id for t in lost)
        if isinstance(error, _MOVED):
            log.warning("worker: the group moved task(s) %s away while this worker was out "
                        "of it (%s: %s); closing them without committing - their records "
                        "since the last commit will be processed again by their new owner - "
                        "and rejoining", names, type(error).__name__, error)
        else:  # a closing commit that failed for another reason (a sink, the broker)
            log.warning("worker: task(s) %s could not commit as they closed (%s: %s); "
                        "closing them without committing - their records since the last "
                        "commit will be processed again at the next start", names,
                        type(error).__name__, error)
        for task in lost:
            # its files may hold writes past the checkpoint that another owner redid
            # differently meanwhile: the next owner here restores from the changelog
            await self._restorer.discard_checkpoint(task)
            await self.close(task)
            if consumer is not None:
                consumer.pause([tp for tp in task.partitions if tp in consumer.assignment()])
        if not self.committing(self.tasks.values()):
            self._router.drop_shared_outbox()  # the lost tasks' unsent outputs

    def rewindable(self, error: BaseException) -> bool:
        """Whether a failed send or flush is answered by a rewind (see
        :func:`~aiostreams.engine.outage.rewindable`)."""
        return rewindable(error, self.rewinding_since, self._clock.monotonic(),
                          self._broker_timeout)

    async def recover(self, consumer: Consumer) -> None:
        """After a fetch: lose the tasks whose producer was fenced, rewind the channels
        whose send failed for a reason that passes, reopen what a rewind closed; raise the
        error of a channel left failed (the fetch loop decides whether to ride it out)."""
        for task_id, fenced in self._router.fenced():
            if task_id in self.tasks:
                await self.lose([self.tasks[task_id]], fenced, consumer)
        for channel in self._router.channels():
            if channel.error is not None and self.rewindable(channel.error):
                if self.rewinding_since is None:
                    self.rewinding_since = self._clock.monotonic()
                await self.rewind(channel)
        if self.orphans:
            await self.reopen(consumer)
        failed = self._router.failure()
        if failed is not None:
            raise failed

    async def rewind(self, channel: OutputChannel) -> None:
        """A send through ``channel`` failed for a reason that passes: close its tasks
        without committing and note their partitions, with their last committed offsets,
        for :meth:`reopen`."""
        error = channel.error
        tasks = [t for t in self.tasks.values()
                 if self._router.channel_of(t.task_id) is channel]
        log.warning("worker: %s failed (%s: %s); starting task(s) %s again from their last "
                    "commit - their records since then are processed again",
                    channel.name, type(error).__name__, error,
                    ", ".join(t.task_id for t in tasks) or "-")
        for task in tasks:
            committed = {tp: self._committed.get(tp) for tp in task.partitions}
            await self.close(task)
            self.orphans.update(committed)
            if isinstance(error, InDoubtCommitError):
                self.in_doubt.update(dict.fromkeys(task.partitions, task.task_id))
        if self._router.is_shared(channel):
            await self._router.replace_shared_producer()

    async def reopen(self, consumer: Consumer) -> None:
        """Start tasks again for the partitions :meth:`rewind` closed, at their last
        committed offsets. If the broker still does not answer, they stay paused and this
        is tried again at the next fetch; a rebalance that revokes them ends the attempt."""
        owned = consumer.assignment()
        self.in_doubt = {tp: t for tp, t in self.in_doubt.items() if tp in owned}
        await settle_in_doubt(self.in_doubt, self.orphans, self._router, consumer)
        pending = {tp: o for tp, o in self.orphans.items() if tp in owned}
        self.orphans = dict(pending)
        fresh = {tp: o for tp, o in pending.items() if tp not in self.task_of}
        for tp, offset in fresh.items():
            if offset is not None:
                consumer.seek(tp, offset)
        consumer.pause(list(fresh))  # nothing is fetched for them until their task runs
        await self.open(list(fresh), consumer)
        consumer.resume([tp for tp in pending if tp in self.task_of
                         and not self._updater.holds(self.task_of[tp])])
        self.orphans.clear()


def _cancelling() -> bool:
    """Whether the current task is being cancelled (``Task.cancelling``)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _check_whole(sub: SubTopology, partition: int, tps: Collection[TopicPartition]) -> None:
    """Refuse a task given only some of its sub-topology's topics at ``partition``: it
    would join or merge one side alone - wrong answers, and two members writing one task's
    stores. (Co-partitioned topics have equal counts, checked at start, so each has
    ``partition``.) The group's assignor keeps them together
    (:mod:`~aiostreams.transport.kafka_assignor`); a member assigning round-robin (an
    older client in the group) can split them."""
    missing = sorted(set(sub.source_topics) - {tp.topic for tp in tps})
    if missing:
        raise CoPartitioningError(
            f"the group assigned this worker {sorted(map(str, tps))} without partition "
            f"{partition} of {missing}, which task {task_id_for(sub, partition)} reads with "
            f"them: a group member assigns partitions round-robin (an older aiostreams "
            f"version?). Stop every worker of an older version, then start this one again")
