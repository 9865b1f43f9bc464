"""The commit protocol: a few named steps, in this order, so a crash at any point loses
nothing.

0. **caches**: flush the tasks' record caches (:mod:`~aiostreams.engine.cache_flush`),
   each task holding issuing from then until the snapshot is taken, so the snapshot holds
   the flushed outputs and store writes of exactly the records it commits (a task with no
   cache does nothing here);
1. **snapshot** (:func:`commit_snapshot`): take the committable offsets of every task (one
   past each partition's last retired record - each task asserts it never passes an
   unretired one) *and*, in the same synchronous step, every output retired so far
   (``exactly_once``: and seal the state stores - the writes of those same records);
2. **send**: hand those outputs (changelog records included) to the producer and flush it
   (durable on the broker);
3. **sinks**: flush the external sinks (at-least-once: only the backlogged ones, unless
   the commit closes tasks) and lower each offset to the first record a sink holds that is
   not durable (see :mod:`aiostreams.engine.external_sink`);
4. **marks** (``at_least_once``): note the changelog end offsets for the checkpoint, then
   flush the state stores;
5. **commit** the offsets (``exactly_once``: send them to the transaction and commit it -
   the transaction holds exactly the outputs of the records whose offsets it commits -
   while the changelogs' stable ends are read for the marks);
6. **checkpoint** (``at_least_once``): write the local checkpoint (see
   :mod:`aiostreams.engine.restore`); **sealed state** (``exactly_once``): write what step 1
   sealed to the store files, each with its changelog mark, in one SQLite transaction
   per store (:mod:`aiostreams.state.changelog_mark`). Only now: a store file never holds
   a write of a transaction that has not committed. A crash before it leaves the files
   behind the changelog, and the next owner replays the committed tail from the marks.

Under ``exactly_once`` with no external sink, the groups (one transaction each, see
:mod:`aiostreams.engine.output_channel`) run these steps concurrently, each under its
channel's lock: they share no partition, so each only advances its own entries of
:attr:`Committer.committed`.

Invariants, asserted: a committed offset never moves back; after a full sink flush no sink
holds a record below the snapshot; nothing is committed past an output whose send failed
(the failed channel's error is raised before step 5). Under exactly-once no store file is
written between the snapshot and the transaction's commit (by construction: step 6 is the
only writer; ``tests/engine/test_exactly_once_crash_points.py`` crashes at every step).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from aiostreams.engine.outage import InDoubtCommitError, show_offsets
from aiostreams.engine.output_channel import OutputChannel
from aiostreams.engine.restore import Restorer
from aiostreams.engine.task import StreamTask
from aiostreams.errors import CommitFailedError, ProducerFencedError, TransportError
from aiostreams.runtime.clock import Clock, TimerHandle
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.transport.base import Consumer
from aiostreams.types import TopicPartition

if TYPE_CHECKING:  # imported only when the app traces: it imports opentelemetry
    from aiostreams.engine.tracing import CommitTrace

log = logging.getLogger("aiostreams.worker")


class Committable(Protocol):
    """What a task offers the commit (StreamTask has it)."""

    def committable(self) -> dict[TopicPartition, int]: ...

    def check_commit_point(self, offsets: Mapping[TopicPartition, int]) -> None: ...


def commit_snapshot(tasks: Iterable[Committable], committed: Mapping[TopicPartition, int]
                    ) -> dict[TopicPartition, int]:
    """Step 1: the offsets ``tasks`` can commit beyond ``committed`` (each task checks that
    none passes an unretired record). Synchronous, so it pairs with the outputs taken
    with it."""
    offsets: dict[TopicPartition, int] = {}
    for task in tasks:
        candidate = {tp: off for tp, off in task.committable().items()
                     if off > committed.get(tp, -1)}
        task.check_commit_point(candidate)
        offsets.update(candidate)
    return offsets


async def flush_caches(tasks: Sequence[StreamTask]) -> None:
    """Step 0: flush the record caches of the tasks that have some, at the same time."""
    cached = [task.flush_caches() for task in tasks if task.caches]
    if cached:
        await asyncio.gather(*cached)


def commit_trace(tasks: Iterable[StreamTask]) -> CommitTrace | None:
    """The span of a commit of ``tasks`` and of the records they retired since the last
    one (taken now, with the snapshot), when the app traces; else None."""
    tracers = [task.tracer for task in tasks if task.tracer is not None]
    if not tracers:
        return None
    from aiostreams.engine.tracing import CommitTrace  # the app traces: otel is installed
    return CommitTrace(tracers)


def advance(committed: dict[TopicPartition, int], offsets: Mapping[TopicPartition, int]
            ) -> None:
    """Record ``offsets`` as committed; asserts none moves back."""
    for tp, off in offsets.items():
        previous = committed.get(tp, -1)
        if off < previous:
            raise AssertionError(f"{tp}: committed offset moved back {previous} -> {off}")
        committed[tp] = off


class Committer:
    """Runs the steps above for groups of tasks sharing a channel; owns the committed
    offsets (:attr:`committed`: per partition, the group's offset as last committed or
    read at assignment)."""

    def __init__(self, *, app_id: str, exactly_once: bool, restorer: Restorer,
                 sinks: Mapping[str, ExternalSink]) -> None:
        self._app_id = app_id
        self._exactly_once = exactly_once
        self._restorer = restorer
        self._sinks = sinks
        self._sink_failure: BaseException | None = None
        self.committed: dict[TopicPartition, int] = {}

    async def commit(self, groups: Sequence[tuple[OutputChannel, list[StreamTask]]],
                     consumer: Consumer, *, closing: bool, flush_all: bool
                     ) -> tuple[dict[TopicPartition, int],
                                list[tuple[list[StreamTask], BaseException]]]:
        """Commit each group through its channel (holding its lock). Returns the offsets
        committed and the groups whose commit the group coordinator refused or whose
        producer was fenced (their tasks are lost: the caller closes them without
        committing). ``closing``: the tasks are being closed - a failed commit loses them
        instead of raising, and under exactly-once their checkpoint is written too.

        Cancellation: do not cancel a commit (the worker shields it); a cancelled one
        leaves its transaction to the broker's timeout and commits nothing more."""
        committed: dict[TopicPartition, int] = {}
        lost: list[tuple[list[StreamTask], BaseException]] = []
        if self._concurrent(groups, closing):
            outcomes = await asyncio.gather(
                *(self._commit_locked(channel, group, consumer, closing, flush_all)
                  for channel, group in groups),
                return_exceptions=True)
        else:  # one after another: a failure stops the groups after it
            outcomes = []
            for channel, group in groups:
                try:
                    outcomes.append(await self._commit_locked(channel, group, consumer,
                                                              closing, flush_all))
                except Exception as error:
                    outcomes.append(error)
                    if not (closing or isinstance(error, (CommitFailedError,
                                                          ProducerFencedError))):
                        break
        first_error: BaseException | None = None
        for (_, group), outcome in zip(groups, outcomes, strict=False):
            if isinstance(outcome, (CommitFailedError, ProducerFencedError)):
                lost.append((group, outcome))
            elif isinstance(outcome, Exception):
                if not closing:
                    first_error = first_error or outcome
                    continue
                # the tasks are being closed and cannot commit: their new owner (or
                # the next start) resumes from the last commit, as after a crash
                log.debug("worker: the closing commit failed", exc_info=outcome)
                lost.append((group, outcome))
            elif isinstance(outcome, BaseException):
                raise outcome  # a cancellation or an interpreter exit: nothing to sort
            else:
                committed.update(outcome)
        if first_error is not None:
            raise first_error
        return committed, lost

    def _concurrent(self, groups: Sequence[tuple[OutputChannel, list[StreamTask]]],
                    closing: bool) -> bool:
        """Whether the groups may commit at the same time (each its own transaction, so
        their round trips overlap): they share no partition, channel or store, so only what
        they do share orders them - the external sinks (one flush for all), the consumer's
        offset commit (at-least-once) and the changelog marks of a closing commit (they
        read the consumer's positions) keep them one after another."""
        return len(groups) > 1 and self._exactly_once and not self._sinks and not closing

    async def _commit_locked(self, channel: OutputChannel, group: list[StreamTask],
                             consumer: Consumer, closing: bool, flush_all: bool
                             ) -> dict[TopicPartition, int]:
        async with channel.lock:
            return await self._commit_group(channel, group, consumer, closing, flush_all)

    async def _commit_group(self, channel: OutputChannel, tasks: list[StreamTask],
                            consumer: Consumer, closing: bool, flush_all: bool
                            ) -> dict[TopicPartition, int]:
        # 0. caches: flushed, and the tasks hold issuing until the snapshot
        try:
            await flush_caches(tasks)
            # 1. snapshot: offsets and outputs together, no await in between - everything
            # in the channel now was retired before the snapshot; later outputs wait for
            # the next commit (transaction)
            offsets = commit_snapshot(tasks, self.committed)
            if self._exactly_once:
                for task in tasks:
                    task.seal_stores()
        finally:
            for task in tasks:
                task.release_hold()
        trace = commit_trace(tasks)  # with the snapshot: the records it covers
        if trace is None:
            return await self._commit_steps(channel, tasks, consumer, closing, flush_all,
                                            offsets)
        try:
            offsets = await self._commit_steps(channel, tasks, consumer, closing, flush_all,
                                               offsets)
        except BaseException as error:
            trace.failed(error)
            raise
        trace.committed(offsets)
        return offsets

    async def _commit_steps(self, channel: OutputChannel, tasks: list[StreamTask],
                            consumer: Consumer, closing: bool, flush_all: bool,
                            offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Steps 2-6 for the ``offsets`` of the snapshot; returns what was committed."""
        # 2. send
        await channel.send(channel.take())
        if channel.error is not None:
            raise channel.error
        try:
            await channel.producer.flush()
        except TransportError as e:
            channel.error = e  # some outputs since the last commit may not have landed
            raise
        # 3. sinks
        await self._flush_sinks(flush_all)
        if self._sinks:
            # Records retired after the snapshot have higher offsets, so after a full flush
            # nothing below the snapshot is pending: only a partial flush lowers the offsets
            # (and under exactly-once every flush is full, so a transaction's outputs and
            # offsets still match).
            capped = self._below_sink_pending(offsets)
            if flush_all and capped != offsets:
                raise AssertionError(f"a sink holds records below {offsets} after a full "
                                     f"flush: {capped}")
            offsets = capped
        generation = consumer.generation  # the marks are this generation's owner's only
        if self._exactly_once:
            # 5. commit, reading the marks meanwhile; 6. the sealed state
            marks = _owned_marks(channel, consumer, generation, await self._commit_reading_marks(
                channel, tasks, consumer, offsets))
            advance(self.committed, offsets)
            for task in tasks:
                await task.flush_sealed_stores(marks.get(task.task_id, {}))
            return offsets
        # 4. marks, then the stores
        marks = await self._restorer.changelog_marks(tasks, consumer)
        for task in tasks:
            await task.flush_stores()
        # 5. commit
        if channel.transactional:
            await self._commit_transaction(channel, offsets)
        elif offsets:
            await consumer.commit(offsets)
        # 6. checkpoint
        marks = _owned_marks(channel, consumer, generation, marks)
        if marks:
            await self._restorer.write_checkpoints(tasks, marks)
        advance(self.committed, offsets)
        return offsets

    async def _commit_reading_marks(self, channel: OutputChannel, tasks: list[StreamTask],
                                    consumer: Consumer, offsets: dict[TopicPartition, int]
                                    ) -> dict[str, dict[TopicPartition, int]]:
        """Step 5 under exactly-once, with the changelogs' stable ends read at the same
        time (their round trips overlap). Any stable end read after the snapshot is a
        mark the sealed writes may carry: everything committed below it is this owner's
        earlier transactions (in the files) or this transaction (being written); the
        records of this transaction may lie above it, and are replayed again harmlessly."""
        reading = asyncio.get_running_loop().create_task(
            self._restorer.changelog_marks(tasks, consumer))
        try:
            if channel.transactional:
                await self._commit_transaction(channel, offsets)
        except BaseException:
            reading.cancel()
            await asyncio.wait([reading])
            raise
        try:
            return await reading
        except TransportError as e:
            # the files keep their older marks: a longer tail to replay, nothing wrong
            log.warning("worker: reading the changelogs' ends for the store marks failed "
                        "(%s); the stores are written with their previous marks", e)
            return {}

    async def _commit_transaction(self, channel: OutputChannel,
                                  offsets: dict[TopicPartition, int]) -> None:
        if not (offsets or channel.in_transaction):
            return
        if not channel.in_transaction:
            await channel.producer.begin_transaction()
            channel.in_transaction = True
        if offsets:
            try:
                await channel.producer.send_offsets_to_transaction(offsets, self._app_id)
            except TransportError as e:
                # before the commit point: the transaction did not commit, so its tasks
                # can start again from the last one (a rewind)
                channel.error = e
                raise
        try:
            await channel.producer.commit_transaction()
        except TransportError as e:
            # past the commit point: the transaction may have committed or not - the
            # rewind settles which before its tasks start again (see InDoubtCommitError)
            error = InDoubtCommitError(
                f"{channel.name}: the outcome of the transaction committing "
                f"{show_offsets(offsets)} is unknown ({e})")
            channel.error = error
            raise error from e
        channel.in_transaction = False

    async def _flush_sinks(self, everything: bool) -> None:
        """Make external sinks durable: every sink, or (``everything`` false) the backlogged
        ones. A sink whose flush failed once blocks every later commit (even on shutdown):
        what it failed to write must never be committed past."""
        if self._sink_failure is not None:
            raise self._sink_failure
        for sink in self._sinks.values():
            if not (everything or sink.backlogged):
                continue
            try:
                await sink.flush()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._sink_failure = e
                raise

    def _below_sink_pending(self, offsets: dict[TopicPartition, int]
                            ) -> dict[TopicPartition, int]:
        """``offsets``, each capped at the first record of its partition that an external
        sink holds but has not made durable; partitions left with no progress are dropped."""
        capped: dict[TopicPartition, int] = {}
        for tp, offset in offsets.items():
            for sink in self._sinks.values():
                pending = sink.pending_offset(tp)
                if pending is not None and pending < offset:
                    offset = pending
            if offset > self.committed.get(tp, -1):
                capped[tp] = offset
        return capped


class CommitTimer:
    """Asks for a commit every ``interval`` seconds of ``clock`` (the commit interval), and
    on request (a task's ``ctx.commit()``, a backlogged sink): :attr:`requested` says one is
    due; the fetch loop (or the test driver) commits and :meth:`take` clears it.
    ``on_due`` also runs at each tick (e.g. the stall watch)."""

    def __init__(self, clock: Clock, interval: float,
                 on_due: Callable[[], None] = lambda: None) -> None:
        assert interval >= 0, f"the commit interval must not be negative, got {interval}"
        self._clock = clock
        self._interval = interval
        self._on_due = on_due
        self._handle: TimerHandle | None = None
        self.requested = False

    def start(self) -> None:
        """Tick every ``interval`` seconds from now until :meth:`cancel`."""
        def due() -> None:
            self.requested = True
            self._on_due()
            if self._handle is not None:
                self.start()
        self._handle = self._clock.call_later(self._interval, due)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def request(self) -> None:
        self.requested = True

    def take(self) -> bool:
        """Whether a commit was due; clears the request."""
        due, self.requested = self.requested, False
        return due


def _owned_marks(channel: OutputChannel, consumer: Consumer, generation: int,
                 marks: dict[str, dict[TopicPartition, int]]
                 ) -> dict[str, dict[TopicPartition, int]]:
    """``marks`` if the changelog ends they hold are this owner's alone, else none.

    A mark says the store files hold every changelog record below it, which is true only
    while no other owner wrote there. A read of the ends held up in the network (a cut
    link) can be answered after the group moved the task away and its new owner wrote: a
    commit with nothing to send proves no ownership, so the marks are kept only if the
    worker still holds its lease once they are in, **in the generation it held when it
    asked** (``generation``, read before the first request). The lease alone is not
    enough: a worker that rejoined before the late answer came holds a valid lease again,
    for a new generation, and a later owner always holds a partition in a later
    generation, so an unchanged generation with a valid lease means no one else can have
    written. Without the marks the files keep their older marks or checkpoint: a longer
    tail to replay, nothing wrong."""
    if not marks:
        return marks
    if not channel.owns():
        log.warning("worker: the changelogs' ends for the store marks came in after this "
                    "worker lost its lease on the tasks; the files keep their older marks")
        return {}
    if consumer.generation != generation:
        log.warning("worker: the changelogs' ends for the store marks were asked in group "
                    "generation %d and came in at generation %d; another member may have "
                    "written meanwhile, so the files keep their older marks", generation,
                    consumer.generation)
        return {}
    return marks
