"""Restoring state stores from their changelogs, and the checkpoint that shortens it.

Before a task processes anything, each of its logged stores is brought back:

* a **persistent** store whose task has a checkpoint entry for its changelog partition
  replays the changelog from that offset (its files already hold everything before it);
* any other store (in-memory, or persistent without a usable checkpoint) is wiped and
  replays the changelog from the beginning.

The replay reads up to the changelog's end offset taken when the restore starts (with
``exactly_once``, the last stable offset: only committed writes).

The checkpoint (one file per task, ``<state_dir>/<task_id>/.checkpoint``) maps changelog
partitions to the offset the store files are complete up to, and the owner epoch of the
records before it: a replay skips records of a lower epoch, written by an owner that had
lost the task (:mod:`~aiostreams.state.owner_epoch`). A checkpoint past the changelog's end
(a changelog deleted or recreated) is not trusted: the store is restored from the start. A
task that was lost (its commit refused, its lease run out) discards its checkpoint, so its
next owner here restores from the start too. With ``at_least_once`` it is
written after every commit (outputs and changelog flushed → offsets committed → stores
flushed → checkpoint); a crash between those steps leaves an older checkpoint, and the
replay from it re-applies absolute values, which is harmless.

With ``exactly_once`` the checkpoint file is not used (it is deleted when a task starts):
each store file carries its own **mark** (:mod:`~aiostreams.state.changelog_mark`),
written in the SQLite transaction that writes the state it speaks for, and a store file
is written only after the Kafka transaction holding those writes committed
(:mod:`~aiostreams.engine.committer`, step 6). So a file never holds an aborted write, and
a persistent store replays the changelog from its mark: after a crash, only the
committed tail since the last commit. A file without a mark (new, of an older version,
or of a store the changelog does not match) is wiped and restored from the start. A
replay's flushes write marks too, so a restore cut short resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aiostreams.engine.task_state import TaskState
from aiostreams.errors import StoreFormatError, TaskFailedError
from aiostreams.state.base import restore_each
from aiostreams.state.changelog_mark import ChangelogMark, TransactionalStore
from aiostreams.state.owner_epoch import NO_EPOCH, EpochFence
from aiostreams.state.store_format import check_records, store_format_of
from aiostreams.transport.base import Consumer, IsolationLevel, Transport
from aiostreams.types import RawRecord, TopicPartition

if TYPE_CHECKING:
    from aiostreams.engine.task import StreamTask

log = logging.getLogger("aiostreams.restore")

RESTORE_FLUSH_EVERY = 50_000
"""Changelog records a replay buffers in a store that cannot say how many distinct writes
it holds before it flushes it (one transaction, one fsync, per this many; not one per
fetched batch)."""

RESTORE_FLUSH_KEYS = 200_000
"""For a store that says how many distinct writes it holds (``pending_writes``: the SQLite
stores keep the newest per key): flush once it holds this many (checked after each fetched
batch; the flush takes one more batch along). A changelog repeats keys,
and only the last update of a key reaches the file: 1M updates of 100k keys write 100k
rows instead of 1M (2.5 CPU seconds of SQLite upserts saved)."""

RESTORE_FLUSH_BYTES = 64 * 1024 * 1024
"""...or once this many key and value bytes were buffered since its last flush (counted
per update, so an upper bound of what it holds): memory stays bounded whatever the
record size."""


REPLAY_POLL = 0.1
"""Seconds a replay's fetch waits for records. Short: the records are all there, and a
fetch that returns none - the changelog's last records are transaction markers or an
aborted transaction's, which a read_committed consumer never returns - would otherwise
hold a tail restore of a few records for the whole wait."""


RESTORE_GC_THRESHOLD = 10_000
"""The cyclic garbage collector's generation-0 threshold while a replay runs (CPython's
default is 700); see :class:`YoungGarbageWindow`."""


class YoungGarbageWindow:
    """While at least one replay runs, ``gc``'s generation-0 threshold is at least
    :data:`RESTORE_GC_THRESHOLD`; the last replay to end puts the previous one back.

    Why: a replay allocates two tracked objects per record (aiokafka's record and our
    ``RawRecord``), a fetched batch of up to 2000 records at once. With a threshold of 700
    every young collection finds the batch being consumed alive and promotes it, and the
    promoted batches set off a full collection of the whole heap every ~50k records: 0.5
    of 2.6 CPU seconds for a 1M-record changelog. With a threshold above a batch, the
    records die young and almost no collection runs. The setting is process-wide for the
    replays' duration: the worker's other tasks still have their cyclic garbage collected,
    after 10,000 net allocations instead of 700. A threshold already higher (or 0: automatic
    collection off) is left alone, and so is one changed by someone else meanwhile.

    Invariant: ``users`` is the number of replays inside the window; the threshold was
    raised iff ``saved`` is not None, which only happens while ``users > 0``.
    """

    def __init__(self) -> None:
        self.users = 0
        self.saved: tuple[int, int, int] | None = None
        self._lock = threading.Lock()  # replays may run on several event loops' threads

    def __enter__(self) -> None:
        with self._lock:
            if self.users == 0:
                first, second, third = gc.get_threshold()
                if 0 < first < RESTORE_GC_THRESHOLD:
                    self.saved = (first, second, third)
                    gc.set_threshold(RESTORE_GC_THRESHOLD, second, third)
            self.users += 1

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        with self._lock:
            assert self.users > 0, "a garbage window left more often than entered"
            self.users -= 1
            if self.users == 0 and self.saved is not None:
                saved, self.saved = self.saved, None
                if gc.get_threshold()[0] == RESTORE_GC_THRESHOLD:  # else: not ours to undo
                    gc.set_threshold(*saved)


YOUNG_GARBAGE_WINDOW = YoungGarbageWindow()


class Restorer:
    def __init__(self, transport: Transport, *, exactly_once: bool,
                 state_dir: Path | str | None, role: str = "task") -> None:
        self._transport = transport
        self.role = role  # how its log lines name what they restore ("standby task")
        self._exactly_once = exactly_once
        self._state_dir = Path(state_dir) if state_dir is not None else None
        self.restored_records = 0
        self.changelog_ends: dict[str, int] = {}
        """Task id -> the summed changelog end of its persistent stores at its last
        commit (what an active task reports holding to a state-aware assignor)."""

    def _checkpoint(self, task: StreamTask) -> Any | None:
        """The checkpoint of ``task``'s directory (None when it keeps no files)."""
        if self._state_dir is None or task.directory is None:
            return None
        from aiostreams.state.checkpoint import CHECKPOINT_FILE, Checkpoint

        return Checkpoint(task.directory.path / CHECKPOINT_FILE)

    async def discard_checkpoint(self, task: StreamTask) -> None:
        """Stop trusting ``task``'s files: its next restore replays every changelog from
        the start (after a task was lost, its files may hold writes past the checkpoint
        that the group's other owner redid differently)."""
        self.changelog_ends.pop(task.task_id, None)  # its files vouch for nothing now
        checkpoint = self._checkpoint(task)
        if checkpoint is not None:
            await asyncio.to_thread(checkpoint.delete)  # no file (or directory): nothing to do

    async def restore(self, task: StreamTask) -> dict[TopicPartition, tuple[int, int]]:
        """Replay each logged store of ``task`` from its changelog (see the module doc).
        Returns, per changelog partition, the offset its store now holds everything below
        and the highest owner epoch of those records (a standby follows on from there).

        Raises :class:`~aiostreams.errors.TaskFailedError` naming the task, the store and
        its changelog partition when a replay fails. Cancellation: stops at the next fetch
        or flush; what was replayed stays in the stores (a flush under way completes), the
        restore consumer is closed, and a later restore starts again from the checkpoint,
        which never claims more than the files hold."""
        changelogs = task.changelog_partitions
        if not changelogs:
            return {}
        reached: dict[TopicPartition, tuple[int, int]] = {}
        checkpoint = self._checkpoint(task)
        saved, epochs = (checkpoint.read_with_epochs() if checkpoint is not None
                         else ({}, {}))
        if checkpoint is not None and self._exactly_once:
            checkpoint.delete()
        if self._exactly_once:
            saved, epochs = _marks_of(task)
        starts: dict[str, int | None] = {}
        for name, tp in changelogs.items():
            store = task.stores[name]
            # a checkpoint speaks only for files it saw: not for a store whose file was
            # missing or unreadable and has just been made anew ("fresh")
            usable = getattr(store, "persistent", False) and not getattr(store, "fresh", False)
            starts[name] = saved.get(tp) if usable else None
        stale = {changelogs[name] for name, start in starts.items() if start is None} & set(saved)
        if checkpoint is not None and stale and not self._exactly_once:
            # those stores are wiped and replayed from the start: their entries must go
            # first, or a replay cut short would leave a checkpoint vouching for a file
            # that holds only part of what it says
            kept = {tp: off for tp, off in saved.items() if tp not in stale}
            await asyncio.to_thread(checkpoint.write, kept)
        consumer = self._transport.consumer(
            None, client_id=f"{task.task_id}-restore",
            isolation_level=IsolationLevel.of(self._exactly_once))
        await consumer.start()
        try:
            for name, tp in sorted(changelogs.items()):
                store = task.stores[name]
                try:
                    start = starts[name]
                    end = (await consumer.end_offsets([tp]))[tp]
                    if start is not None and start > end:
                        log.warning(
                            "task %s: the checkpoint of store %r says its files hold %s up "
                            "to offset %d, but the changelog ends at %d (deleted or "
                            "recreated since): restoring it from the changelog's start",
                            task.task_id, name, tp, start, end)
                        start = None
                    fence = EpochFence(epochs.get(tp, NO_EPOCH) if start is not None
                                       else NO_EPOCH)
                    if start is None:
                        wipe = getattr(store, "wipe", None)
                        # a fresh file (just made) holds nothing to wipe
                        if (wipe is not None and getattr(store, "persistent", False)
                                and not getattr(store, "fresh", False)):
                            await wipe()
                        start = (await consumer.beginning_offsets([tp]))[tp]
                    await self._replay(consumer, store, tp, start, task.task_id, name,
                                       end=end, fence=fence)
                    reached[tp] = (max(start, end), fence.high)
                except StoreFormatError:
                    raise  # its message names the store, the formats and the fix
                except Exception as error:
                    failure = TaskFailedError(
                        f"task {task.task_id}: restoring store {name!r} from its changelog "
                        f"{tp.topic}[{tp.partition}] failed: {type(error).__name__}: {error}. "
                        "The task processes nothing until it is restored; fix the cause "
                        "(or delete the store's local files to restore it from the "
                        "changelog's start) and restart")
                    raise failure from error
        finally:
            await consumer.stop()
        return reached

    async def _replay(self, consumer: Consumer, store: Any, tp: TopicPartition, start: int,
                      task_id: str, name: str, *, end: int | None = None,
                      fence: EpochFence | None = None) -> None:
        """Replay ``tp`` from ``start`` up to ``end`` (default: its end offset now) into
        ``store``, skipping what ``fence`` says are stale writes."""
        if end is None:
            end = (await consumer.end_offsets([tp]))[tp]
        if fence is None:
            fence = EpochFence()
        with YOUNG_GARBAGE_WINDOW:
            await self._replay_records(consumer, store, tp, (start, end), fence, task_id,
                                       name)
        if fence.skipped:
            log.warning("task %s: restoring %r from %s skipped %d record(s) that an owner "
                        "which had lost the task wrote after its successor's (stale writes, "
                        "see aiostreams.state.owner_epoch)", task_id, name, tp, fence.skipped)

    async def _replay_records(self, consumer: Consumer, store: Any, tp: TopicPartition,
                              span: tuple[int, int], fence: EpochFence, task_id: str,
                              name: str) -> None:
        start, end = span
        if start >= end:
            log.info("%s %s: store %r is up to date at %s offset %d", self.role, task_id, name,
                     tp, end)
            return
        began = time.monotonic()
        consumer.assign([tp])
        consumer.seek(tp, start)
        restore_batch: Callable[[Sequence[RawRecord]], int] = getattr(
            store, "restore_batch", lambda records: restore_each(store, records))
        distinct: Callable[[], int] | None = (
            (lambda: int(store.pending_writes)) if hasattr(store, "pending_writes") else None)

        def flush(upto: int) -> Any:
            """The store's flush, marked: the file then holds every record below ``upto``."""
            if isinstance(store, TransactionalStore):
                return store.flush(ChangelogMark.at(tp, upto, fence.high))
            return store.flush()

        position = start
        applied_to = start  # one past the last record buffered
        count = 0
        unflushed = 0  # records since the last flush
        unflushed_bytes = 0
        last_log = began
        # One flush may run (on the store's thread) while the next records are fetched:
        # at most two buffers' worth in memory, and batches reach the file in order (a
        # store's flushes never overlap).
        flushing: asyncio.Task[None] | None = None
        try:
            while position < end:
                records = (await consumer.getmany(REPLAY_POLL)).get(tp)
                if records:
                    if records[-1].offset >= end:
                        records = [record for record in records if record.offset < end]
                    check_records(store_format_of(store), name, records)  # before any is applied
                    unflushed_bytes += restore_batch(fence.admitted(records))
                    unflushed += len(records)
                    if records:
                        applied_to = records[-1].offset + 1
                # a fetch of buffered records returns without suspending: let the worker's
                # other tasks, its fetch loop and its commits run between batches
                await asyncio.sleep(0)
                full = (unflushed >= RESTORE_FLUSH_EVERY if distinct is None
                        else distinct() >= RESTORE_FLUSH_KEYS)
                if full or unflushed_bytes >= RESTORE_FLUSH_BYTES:
                    if flushing is not None:
                        await flushing
                    flushing = asyncio.get_running_loop().create_task(flush(applied_to))
                    count += unflushed
                    unflushed = unflushed_bytes = 0
                position = await consumer.position(tp)
                now = time.monotonic()
                if now - last_log >= 5.0:
                    log.info("%s %s: restoring %r from %s: %d/%d", self.role, task_id, name, tp,
                             position - start, end - start)
                    last_log = now
            if flushing is not None:
                await flushing
            await flush(end)
            count += unflushed
        finally:
            if flushing is not None and not flushing.done():
                flushing.cancel()  # the store puts the batch back; the caller closes it
                await asyncio.wait([flushing])
        self.restored_records += count
        log.info("%s %s: restored %d record(s) into %r from %s [%d, %d) in %.2fs", self.role,
                 task_id, count, name, tp, start, end, time.monotonic() - began)

    async def changelog_marks(self, tasks: Sequence[StreamTask],
                              consumer: Consumer) -> dict[str, dict[TopicPartition, int]]:
        """Per task, the changelog end offsets of its persistent stores.

        Take them after the producer flush and *before* the stores flush: a write is
        applied to its store before its changelog record is sent, so every record below a
        mark is in the store files once they are flushed."""
        marks: dict[str, dict[TopicPartition, int]] = {}
        if self._state_dir is None:
            return marks
        for task in tasks:
            if task.state is TaskState.RESTORING:
                raise AssertionError(f"task {task.task_id} is restoring: no checkpoint may "
                                     "vouch for its stores before the restore completed")
            tps = [tp for name, tp in task.changelog_partitions.items()
                   if getattr(task.stores[name], "persistent", False)]
            if tps:
                marks[task.task_id] = await consumer.end_offsets(tps)
                self.changelog_ends[task.task_id] = sum(marks[task.task_id].values())
        return marks

    async def write_checkpoints(self, tasks: Sequence[StreamTask],
                                marks: dict[str, dict[TopicPartition, int]]) -> None:
        """Write the marks taken by :meth:`changelog_marks`, after stores were flushed and
        the input offsets committed (on a thread: a checkpoint write fsyncs)."""
        for task in tasks:
            checkpoint = self._checkpoint(task)
            if checkpoint is not None and task.task_id in marks:
                offsets = marks[task.task_id]
                # everything before the marks was restored or written by this owner, whose
                # epoch is the highest any of it carries
                epochs = dict.fromkeys(offsets, task.owner_epoch)
                await asyncio.to_thread(checkpoint.write, offsets, epochs)


def _marks_of(task: StreamTask) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The offsets and epochs the marks of ``task``'s store files give for their changelog
    partitions (under exactly-once, in place of the checkpoint's). A mark of another
    partition than the store's (a file copied from elsewhere) is not trusted."""
    offsets: dict[TopicPartition, int] = {}
    epochs: dict[TopicPartition, int] = {}
    for name, tp in task.changelog_partitions.items():
        store = task.stores[name]
        mark = store.changelog_mark if isinstance(store, TransactionalStore) else None
        if mark is not None and mark.tp == tp:
            offsets[tp] = mark.offset
            epochs[tp] = mark.epoch
        elif mark is not None:
            log.warning("task %s: the file of store %r is marked for %s, not its changelog "
                        "partition %s: restoring it from the changelog's start",
                        task.task_id, name, mark.tp, tp)
    return offsets, epochs
