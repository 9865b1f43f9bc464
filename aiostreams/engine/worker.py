"""The worker: one consumer-group member running the topology's tasks on one event loop.

It is the conductor of a few collaborators, each in a module of its own:

* :mod:`~aiostreams.engine.topic_plan` sizes and names the topics, which the worker
  creates at start;
* :mod:`~aiostreams.engine.task_lifecycle` opens and closes the tasks as the group assigns
  and revokes partitions, and loses or rewinds them after broker trouble;
* :mod:`~aiostreams.engine.worker_core` delivers each fetched batch to the tasks and
  commits them (the commit protocol of :mod:`~aiostreams.engine.committer`), with the
  :mod:`~aiostreams.engine.output_router` that takes each task's retired outputs to its
  output channel (or external sink) - the same core the test driver runs;
* :mod:`~aiostreams.engine.outage` says which trouble is ridden out and for how long;
* :mod:`~aiostreams.engine.group_member` holds the consumer and the worker's place in the
  group: the instance id it joins with, the rebalance callbacks, and a fresh consumer when
  :mod:`~aiostreams.engine.client_watchdog` noticed that a Kafka client died under it;
* :mod:`~aiostreams.engine.ownership` stops every write of tasks the group may have moved
  away (a member whose lease ran out) and closes them.

The fetch loop and the sender run in one :class:`asyncio.TaskGroup`. A commit - from the
commit timer, a task's request, a rebalance or the stop - runs as a task of its own that its
caller awaits through :func:`asyncio.shield`: cancelling the loops never cuts a commit
half-way (which would leave a transaction in doubt); :meth:`Worker.stop` lets it finish
within the stop's budget. Rebalance callbacks run inside the fetch call, so they never
overlap the fetch loop's own work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from aiostreams.engine.client_watchdog import ClientWatchdog
from aiostreams.engine.committer import CommitTimer
from aiostreams.engine.external_sink import start_sinks, stop_sinks
from aiostreams.engine.group_member import GroupMember
from aiostreams.engine.outage import retriable, ride_out
from aiostreams.engine.ownership import TaskOwnership
from aiostreams.engine.placement_member import PlacementMember
from aiostreams.engine.provision import ensure_topics
from aiostreams.engine.purge import RepartitionPurger
from aiostreams.engine.stall_watch import StallWatch
from aiostreams.engine.stop_budget import CLIENT_CLOSE_MIN, STOP_GRACE, Shielded, close_within
from aiostreams.engine.task import StreamTask
from aiostreams.engine.task_lifecycle import TaskTable
from aiostreams.engine.worker_config import CommitRecord, WorkerConfig
from aiostreams.engine.worker_core import Fetcher, WorkerCore
from aiostreams.errors import (
    AiostreamsError,
    CorruptFetchError,
    TaskFailedError,
    TransportError,
)
from aiostreams.lifecycle.state import AppState
from aiostreams.runtime.clock import Clock
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.state.store_spec import changelog_topic
from aiostreams.topic import Topic
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import Consumer, Transport
from aiostreams.transport.offset_reset import OffsetResets
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.worker")

__all__ = ["STOP_GRACE", "CommitRecord", "Worker", "WorkerConfig"]


class Worker:
    def __init__(self, subs: Sequence[SubTopology], topics: Mapping[str, Topic],
                 transport: Transport, config: WorkerConfig, clock: Clock, *,
                 on_commit: Callable[[CommitRecord], None] | None = None,
                 external_sinks: Sequence[ExternalSink] = ()) -> None:
        self.subs = list(subs)
        self.topics = dict(topics)
        self.transport = transport
        self.config = config
        self.clock = clock
        self.state = AppState.CREATED
        self.failure: BaseException | None = None
        self._sinks: dict[str, ExternalSink] = {s.name: s for s in external_sinks}
        self._commit_timer = CommitTimer(clock, config.commit_interval, self._check_stalls)
        self._commits = Shielded()
        self._stopped = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._loop_tasks: list[asyncio.Task[None]] = []
        self._core = WorkerCore(transport, app_id=config.app_id, client_id=config.client_id,
                                exactly_once=config.exactly_once, state_dir=config.state_dir,
                                sinks=self._sinks, clock=clock,
                                request_commit=self.request_commit,
                                owns=lambda: self._ownership.owns(), on_commit=on_commit)
        self._router = self._core.router
        self._committer = self._core.committer
        make_task = self._core.task_factory(
            config.task, self.topics, node_retry=config.node_retry,
            on_failed=self._on_task_failed,
            fetcher=Fetcher(lambda: self._consumer, lambda tp: tp in self._table.task_of))
        self.restorer = self._core.restorer  # its restored_records: the restore metric
        self._table = TaskTable(self.subs, make_task, self._router, self._core.restorer,
                                self._committer.committed, clock=clock,
                                broker_timeout=config.broker_timeout,
                                on_failed=self._on_task_failed)
        self._ownership = TaskOwnership(self._table, lambda: self._consumer,
                                        self._committer.committed)
        self.member = GroupMember(transport, config, self._table, self._ownership,
                                  self._revoke, state_aware=config.placement is not None)
        self.stall_watch = StallWatch(config.stuck_record_warning)
        self.client_watchdog = ClientWatchdog(
            interval=config.client_watchdog_interval, stall_after=config.client_stall_timeout,
            failure_limit=config.corrupt_fetch_limit)
        self.placement = None if config.placement is None else PlacementMember.of(
            self, self.subs, config, make_task, transport, self._table.tasks,
            self._core.restorer.changelog_ends)
        self._purger = RepartitionPurger(
            transport, [t for t in self._table.sub_of_topic
                        if t in self.topics and self.topics[t].internal],
            clock, config.purge_interval)

    def _enter(self, new: AppState) -> None:
        self.state = self.state.advance(new, who="worker")

    @property
    def _consumer(self) -> Consumer | None:
        return self.member.consumer

    @property
    def commits(self) -> int:
        """How many commits moved an offset."""
        return self._core.commits

    @property
    def tasks(self) -> dict[str, StreamTask]:
        return self._table.tasks

    @property
    def stores_ready(self) -> bool:
        """Whether this worker has had its first assignment and none of its tasks is still
        restoring its stores (what its stores hold is then all their changelogs held)."""
        return self.member.assigned and not any(
            self._table.restoring(t) for t in self._table.tasks.values())

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self.state is not AppState.CREATED:
            raise RuntimeError(f"a worker starts once; this one is {self.state.value}")
        self._enter(AppState.STARTING)
        await ensure_topics(self.transport, self.subs, self.topics, app_id=self.config.app_id,
                            dead_letter_topic=self.config.task.dead_letter_topic,
                            default_partitions=self.config.default_partitions)
        await start_sinks(list(self._sinks.values()), self.transport, self.config.app_id,
                          (t for sub in self.subs for t in sub.source_topics))
        await self._router.start()
        self.member.claim_instance_id()
        if self.placement is not None:
            await self.placement.scan(self.config.state_dir, self.config.exactly_once)
        await self.member.start(self.placement or self)
        self._enter(AppState.RUNNING)
        self._runner = asyncio.get_running_loop().create_task(self._run_loops(),
                                                              name="aiostreams-worker")
        self._commit_timer.start()

    async def _run_loops(self) -> None:
        """The fetch loop and the sender, together: if one crashes (a bug), the other is
        cancelled and the worker fails - never a worker that silently stopped fetching."""
        try:
            async with asyncio.TaskGroup() as group:
                self._loop_tasks = [
                    group.create_task(self._fetch_loop(), name="aiostreams-fetch"),
                    group.create_task(self._router.send_loop(), name="aiostreams-send"),
                    group.create_task(self.client_watchdog.run(
                        lambda: self._consumer, self._router.channels),
                        name="aiostreams-watchdog")]
        except* Exception as crashed:
            log.error("worker: a loop crashed", exc_info=crashed.exceptions[0])
            self._set_failure(crashed.exceptions[0])

    def request_stop(self) -> None:
        self._stop_requested.set()

    async def stop(self) -> None:
        """Stop fetching, drain in-flight work (up to ``drain_timeout``), retire, commit,
        close tasks, leave the group. Idempotent.

        Bounded: the whole stop takes at most ``drain_timeout + STOP_GRACE`` seconds of
        real time, whatever the broker does: the commit may use all of it but the last
        ``CLIENT_CLOSE_MIN`` seconds, in which the tasks and then the clients are closed
        (each group at once). The loops are cancelled once a rebalance's revoke under way
        has returned (its partitions are ours to commit only until then); a commit under
        way is shielded and finishes first. When the broker does not answer in time (an
        outage) or refuses the last commit, the commit is abandoned - nothing past the
        last successful commit is marked done, so those records are processed again at
        the next start - and :meth:`raise_failure` raises
        :class:`~aiostreams.errors.UncommittedStopError`, naming them.

        Cancellation: the remaining steps are skipped and the clients closed; uncommitted
        work is redone by the next owner."""
        if self.state in (AppState.STOPPED, AppState.CREATED):
            if self.state is AppState.CREATED:
                self._enter(AppState.STOPPED)
            self._stopped.set()
            return
        if self.state is AppState.STOPPING:
            await self._stopped.wait()
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.drain_timeout + STOP_GRACE

        def left() -> float:  # for the commit: the clients' share at the end is kept
            return max(0.0, deadline - CLIENT_CLOSE_MIN - loop.time())

        def closing_left() -> float:
            return max(0.0, deadline - loop.time())

        failed = self.state is AppState.FAILED
        self._enter(AppState.STOPPING)
        self._stop_requested.set()
        self._commit_timer.cancel()
        await self._stop_loops(left())
        try:
            async with asyncio.timeout(left()):
                await self._commits.settle()
                await self._revoke(list(self.tasks.values()))
        except TimeoutError:
            self._core.note_uncommitted(
                self.tasks.values(), f"the broker did not answer within the stop's "
                f"{self.config.drain_timeout + STOP_GRACE:.0f} s (drain_timeout + "
                f"{STOP_GRACE:.0f} s)")
            await self._commits.abandon()
            await asyncio.gather(*(close_within(self._table.close(task), closing_left(),
                                                f"task {task.task_id}", at_least=0.25)
                                   for task in list(self.tasks.values())))
        finally:
            closings = [self._router.stop(closing_left),
                        close_within(self._purger.stop(), closing_left(), "the purge client",
                                     at_least=0.25)]
            if self._consumer is not None:
                closings.append(close_within(self._consumer.stop(), closing_left(),
                                             "the consumer", at_least=0.25))
            await asyncio.gather(*closings)
            if self.placement is not None:
                await self.placement.standbys.close()
            self.member.release()
            await stop_sinks(self._sinks.values())
            self._enter(AppState.FAILED if failed or self.failure else AppState.STOPPED)
            self._stopped.set()

    async def _stop_loops(self, seconds: float) -> None:
        """Cancel the fetch loop and the sender (those that are not the caller), once a
        revoke under way has returned (waiting at most ``seconds`` for it)."""
        me = asyncio.current_task()
        if me in self._loop_tasks:  # a stop from inside the loops: end the others
            for other in self._loop_tasks:
                if other is not me:
                    other.cancel()
            return
        await self.member.after_revoke(seconds)
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)

    # -- rebalance (called by the consumer inside getmany: see GroupMember) -------------

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        await self.member.on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        await self.member.on_partitions_assigned(assigned)

    def changelog_topic(self, store: str) -> str:
        return changelog_topic(self.config.app_id, store)

    async def _revoke(self, tasks: list[StreamTask]) -> None:
        await self._table.revoke(tasks, self.config.drain_timeout, self._commit_closing)

    async def _commit_closing(self, tasks: list[StreamTask]) -> None:
        await self.commit(tasks, closing=True)

    # -- fetching -----------------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        """Fetch, hand records to tasks, commit when due; ride out broker trouble (see
        :func:`~aiostreams.engine.outage.ride_out`): the uncommitted work simply waits,
        nothing is committed past it. An error it cannot ride out stops the worker."""
        error = await ride_out(self._fetch_once, stopping=self._stop_requested,
                               transient=self._transient, clock=self.clock,
                               broker_timeout=self.config.broker_timeout,
                               on_retry=self.request_commit)
        if error is not None:
            self._set_failure(error)

    async def _fetch_once(self) -> None:
        assigned = self._consumer.assignment() if self._consumer is not None else ()
        dead = self.client_watchdog.take({*self._table.task_of, *assigned})
        if dead is not None:
            await self.member.rebuild(dead, self.client_watchdog.rebuilds)
        consumer = self._consumer
        assert consumer is not None
        try:
            fetched = await self.client_watchdog.unless_dead(consumer.getmany(
                self.config.poll_timeout, self.config.max_poll_records))
        except CorruptFetchError as corrupt:
            self.client_watchdog.corrupt_fetch(corrupt)  # raises at the limit
            return  # retried by the next fetch, on a fresh connection
        if fetched is None:
            return  # the consumer died: rebuilt at the next step
        batch = fetched
        self.client_watchdog.fetched(batch)
        owned = await self._ownership.after_fetch()  # a lost task's records are put back below
        for tp, first in self._core.deliver(batch, self._table.task_of).items():
            consumer.seek(tp, first)  # never drop fetched records: read them again when a
            consumer.pause([tp])      # task owns them
        if owned:  # reopen lost partitions only once the lease holds again
            await self._table.recover(consumer)
        if self._commit_timer.take():  # one commit per tick or request, not one per fetch
            await self.commit()
        # A fetch that found records ready returns without suspending, and sync processors
        # retire without awaiting: without this the loop would never let the sender, the
        # commit timer or the application's own coroutines run while input is waiting.
        await asyncio.sleep(0)

    def _transient(self, error: TransportError) -> bool:
        """Worth retrying (:mod:`~aiostreams.engine.outage`): a failed send, flush or commit
        is answered by a rewind at the next fetch; any failure that passes with time is."""
        if any(channel.error is error for channel in self._router.channels()):
            return self._table.rewindable(error)
        return retriable(error)

    # -- committing ---------------------------------------------------------------------

    def request_commit(self) -> None:
        self._commit_timer.request()

    def request_sink_flush(self) -> None:
        """Make the next commit flush every external sink, backlogged or not (an
        at-least-once commit flushes only backlogged ones): for callers that wait for the
        committed offsets to reach the end of the input."""
        self._core.request_sink_flush()

    def _check_stalls(self) -> None:
        self.stall_watch.check(self.tasks.values(), self.clock.monotonic())

    async def commit(self, tasks: Sequence[StreamTask] | None = None, *,
                     closing: bool = False) -> dict[TopicPartition, int]:
        """Commit what the given tasks (default: all) have retired; see
        :mod:`~aiostreams.engine.committer` for the steps (``closing``: the tasks are being
        closed, so under exactly-once their checkpoint is written too). Returns the offsets
        committed.

        Cancellation: the commit itself is shielded - it runs to its end (the stop waits
        for it, or abandons it when the broker does not answer in its budget); only the
        wait is cancelled."""
        return await self._commits.run(self._commit(tasks, closing))

    async def _commit(self, tasks: Sequence[StreamTask] | None, closing: bool
                      ) -> dict[TopicPartition, int]:
        consumer = self._consumer
        if consumer is None:
            return {}
        # a restoring task is never committed: its offsets stay where the group has them
        chosen = self._table.committing(self.tasks.values() if tasks is None else tasks)
        committed, lost = await self._core.commit(chosen, consumer, closing=closing)
        for group, reason in lost:
            if self.state is AppState.STOPPING:
                self._core.note_uncommitted(group, f"{type(reason).__name__}: {reason}")
            await self._table.lose(group, reason, consumer)
        if committed:
            self._table.rewinding_since = None
            await self._purger.after_commit(self._core.committed)
        self._core.announce_commit()
        return committed

    async def stop_requested(self) -> None:
        """Return once a stop has been asked for (a signal, ``request_stop``, a failure):
        from then :attr:`stopping` is true."""
        await self._stop_requested.wait()

    @property
    def stopping(self) -> bool:
        return self._stop_requested.is_set()

    @property
    def offset_resets(self) -> OffsetResets | None:
        """The out-of-range resets of the input partitions (None before ``start()``)."""
        return self._consumer.offset_resets if self._consumer is not None else None

    def committed_offset(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for ``tp`` as this worker last committed or read it
        at assignment (None when it holds no position for ``tp``)."""
        return self._committer.committed.get(tp)

    async def next_commit(self) -> None:
        """Wait for the next commit, or until a stop is asked for (a failure asks for one:
        after it no commit may come). Cancellation-safe."""
        await self._core.next_commit(self._stop_requested)

    # -- failure ------------------------------------------------------------------------

    def _on_task_failed(self, task: StreamTask, error: TaskFailedError) -> None:
        self._set_failure(error)

    def _set_failure(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
        if self.state is AppState.RUNNING:
            self._enter(AppState.FAILED)
        self._stop_requested.set()

    def raise_failure(self) -> None:
        """Raise what stopped the worker, if anything did; after a stop whose last commit
        did not land, :class:`~aiostreams.errors.UncommittedStopError`."""
        if self.failure is not None:
            if isinstance(self.failure, AiostreamsError):
                raise self.failure
            raise TaskFailedError(f"the worker stopped: {self.failure}") from self.failure
        if self._core.uncommitted is not None:
            raise self._core.uncommitted
