"""Standby tasks: copies of other workers' task state, kept up to date from the changelogs
(Kafka Streams' ``StandbyTask``), so that a task moving here restores only a tail.

A standby task is a task's stores and nothing else: no processors, no source reads, no
outputs, no offset commits. Its job (:meth:`StandbyTable.assign` starts one per task):

1. restore the stores as an active task would (:class:`~aiostreams.engine.restore.
   Restorer`: from the checkpoint, or under exactly-once from the files' marks);
2. **follow** the changelogs: fetch (``read_committed`` under exactly-once: a standby's
   stores only ever hold committed writes), apply, and every ``flush_interval`` seconds
   flush the stores with the same local offset marks the restore reads - under
   exactly-once the mark in the SQLite transaction of the data
   (:class:`~aiostreams.state.changelog_mark.TransactionalStore`), under at-least-once
   the task's checkpoint after the flush.

**Promotion** (the group makes a standby task active here): :meth:`StandbyTable.release`
stops the job, flushes with marks and closes the stores (releasing the task directory);
the active task then opens the same files and its restore replays only what the standby
had not applied. **Demotion** (an active task revoked, a standby of it assigned): the
active task closes through its commit, which leaves its checkpoint or marks; the standby
opens the files and follows on. Local files are never deleted on either move.

Standbys need persistent stores (``state_dir``): an in-memory store's copy would not
outlive the standby. Invariants: at most one standby per task id; a standby's stores
never take a write that is not in its changelog (it applies only changelog records);
marks and checkpoints never claim more than was flushed (written after the flush).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiostreams.engine.restore import Restorer
from aiostreams.engine.task import StreamTask
from aiostreams.state.base import restore_each
from aiostreams.state.changelog_mark import ChangelogMark, TransactionalStore
from aiostreams.state.checkpoint import CHECKPOINT_FILE, Checkpoint
from aiostreams.state.owner_epoch import EpochFence
from aiostreams.state.store_format import check_records, store_format_of
from aiostreams.transport.base import Consumer, IsolationLevel, Transport
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.standby")

__all__ = ["FOLLOW_POLL", "StandbyTable", "StandbyTask"]

FOLLOW_POLL = 0.5
"""Seconds a standby's fetch waits for new changelog records."""


@dataclass
class StandbyTask:
    """One standby task: its stores (inside ``task``, never initialized) and how far they
    hold each changelog partition."""

    task: StreamTask
    applied: dict[TopicPartition, int] = field(default_factory=dict)
    """Changelog partition -> the offset the stores hold everything below (in memory;
    the files hold at least up to the last flushed mark)."""
    end: dict[TopicPartition, int] = field(default_factory=dict)
    """Changelog partition -> its end as last seen by the fetch."""
    epochs: dict[TopicPartition, EpochFence] = field(default_factory=dict)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the first catch-up (the restore) is done."""

    @property
    def offset(self) -> int:
        """The local offset reported to the assignor (summed over the stores)."""
        return sum(self.applied.values())

    @property
    def lag(self) -> int:
        """Records of the changelogs this standby has not applied yet."""
        return sum(max(0, self.end.get(tp, at) - at) for tp, at in self.applied.items())


class StandbyTable:
    """The worker's standby tasks (see the module doc)."""

    def __init__(self, make_task: Callable[[str], StreamTask], transport: Transport, *,
                 exactly_once: bool, state_dir: Path | str | None,
                 flush_interval: float) -> None:
        self._make_task = make_task
        self._transport = transport
        self._exactly_once = exactly_once
        self._state_dir = state_dir
        self._flush_interval = flush_interval
        self.restorer = Restorer(transport, exactly_once=exactly_once, state_dir=state_dir,
                                 role="standby task")
        self.tasks: dict[str, StandbyTask] = {}
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self.failures: dict[str, BaseException] = {}

    def offsets(self) -> dict[str, int]:
        return {task_id: s.offset for task_id, s in self.tasks.items() if s.ready.is_set()}

    def lags(self) -> dict[str, int]:
        return {task_id: s.lag for task_id, s in self.tasks.items()}

    async def assign(self, task_ids: Collection[str]) -> None:
        """Keep exactly ``task_ids`` as standbys: close the others, open the new ones."""
        wanted = set(task_ids)
        for task_id in sorted(set(self.tasks) - wanted):
            await self.release(task_id)
        if self._state_dir is None and wanted:
            log.warning("standby tasks %s are not kept: standbys need persistent stores "
                        "(set state_dir)", sorted(wanted))
            return
        for task_id in sorted(wanted - set(self.tasks)):
            task = self._make_task(task_id)
            await task.open_stores()
            if not any(getattr(task.stores[name], "persistent", False)
                       for name in task.changelog_partitions):
                await task.close()  # an in-memory copy would not outlive the standby
                log.info("standby task %s is not kept: its logged stores are in memory",
                         task_id)
                continue
            standby = StandbyTask(task)
            self.tasks[task_id] = standby
            self._jobs[task_id] = asyncio.get_running_loop().create_task(
                self._follow(standby), name=f"aiostreams-standby-{task_id}")

    async def release(self, task_id: str) -> None:
        """Stop following ``task_id``, flush what it applied (with its marks) and close its
        stores: their files are the next owner's here. Nothing when it is no standby.

        Cancellation: the stores are closed all the same (shielded)."""
        standby = self.tasks.pop(task_id, None)
        if standby is None:
            return
        job = self._jobs.pop(task_id)
        job.cancel()
        await asyncio.wait([job])
        try:
            if standby.ready.is_set() and task_id not in self.failures:
                await asyncio.shield(self._flush(standby))
        finally:
            await asyncio.shield(standby.task.close())
            self.failures.pop(task_id, None)

    async def close(self) -> None:
        for task_id in sorted(self.tasks):
            await self.release(task_id)

    async def _follow(self, standby: StandbyTask) -> None:
        task = standby.task
        try:
            reached = await self.restorer.restore(task)
            for tp, (offset, epoch) in reached.items():
                standby.applied[tp] = standby.end[tp] = offset
                standby.epochs[tp] = EpochFence(epoch)
            await self._flush(standby)
            standby.ready.set()
            log.info("standby task %s: restored up to %s; following its changelogs",
                     task.task_id, ", ".join(f"{tp.topic}[{tp.partition}]@{offset}"
                                             for tp, offset in sorted(standby.applied.items())))
            consumer = self._transport.consumer(
                None, client_id=f"{task.task_id}-standby",
                isolation_level=IsolationLevel.of(self._exactly_once))
            await consumer.start()
            try:
                await self._follow_with(consumer, standby)
            finally:
                await consumer.stop()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.error("standby task %s: following its changelogs failed (%s: %s); it is "
                      "kept no more - an active task taking it here restores from its files",
                      task.task_id, type(error).__name__, error)
            self.failures[task.task_id] = error

    async def _follow_with(self, consumer: Consumer, standby: StandbyTask) -> None:
        task = standby.task
        store_of = {tp: task.stores[name] for name, tp in task.changelog_partitions.items()}
        name_of = {tp: name for name, tp in task.changelog_partitions.items()}
        consumer.assign(list(store_of))
        for tp, offset in standby.applied.items():
            consumer.seek(tp, offset)
        flushed_at = time.monotonic()
        dirty = False
        while True:
            batch = await consumer.getmany(FOLLOW_POLL)
            for tp, records in batch.items():
                store = store_of[tp]
                check_records(store_format_of(store), name_of[tp], records)
                admitted = standby.epochs[tp].admitted(records)
                restore_batch = getattr(store, "restore_batch", None)
                if restore_batch is not None:
                    restore_batch(admitted)
                else:
                    restore_each(store, admitted)
                dirty = True
            for tp in store_of:
                standby.applied[tp] = await consumer.position(tp)
                high = consumer.highwater(tp)
                standby.end[tp] = max(standby.applied[tp],
                                      high if high is not None else standby.end.get(tp, 0))
            if dirty and time.monotonic() - flushed_at >= self._flush_interval:
                await self._flush(standby)
                flushed_at = time.monotonic()
                dirty = False

    async def _flush(self, standby: StandbyTask) -> None:
        """Flush the stores, each with its mark, then (at-least-once) the checkpoint."""
        task = standby.task
        applied = dict(standby.applied)
        epochs = {tp: fence.high for tp, fence in standby.epochs.items()}
        for name, tp in task.changelog_partitions.items():
            store: Any = task.stores[name]
            if isinstance(store, TransactionalStore) and tp in applied:
                await store.flush(ChangelogMark.at(tp, applied[tp], epochs[tp]))
            else:
                await store.flush()
        if not self._exactly_once and task.directory is not None and applied:
            persistent = {tp: off for name, tp in task.changelog_partitions.items()
                          if getattr(task.stores[name], "persistent", False)
                          and (off := applied.get(tp)) is not None}
            checkpoint = Checkpoint(task.directory.path / CHECKPOINT_FILE)
            await asyncio.to_thread(checkpoint.write, persistent,
                                    {tp: epochs[tp] for tp in persistent})
