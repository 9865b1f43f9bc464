"""The worker: one consumer-group member running the topology's tasks on one event loop.

It fetches records in batches and hands each partition's records to its task; releases the
outputs tasks retire to the producer in batches (aiokafka #528: per-record concurrent sends
are quadratic); and commits. A commit is a few named steps, in this order, so a crash at
any point loses nothing:

1. take the committable offsets of every task (one past each partition's last retired
   record — asserted never to pass an unretired one);
2. hand every output retired so far (changelog records included) to the producer and flush
   it (durable on the broker);
3. flush the external sinks (at-least-once: only the backlogged ones, unless the commit
   closes tasks) and lower each offset to the first record a sink holds that is not durable
   (see :mod:`aiostreams.engine.external_sink`);
4. note the changelog end offsets for the checkpoint, then flush the state stores;
5. commit the offsets (with ``exactly_once``: send them to the transaction and commit it);
6. write the local checkpoint (see :mod:`aiostreams.engine.restore`).

Rebalance callbacks run inside the fetch call, so they never overlap a commit.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiostreams.engine.clock import Clock, TimerHandle
from aiostreams.engine.external_sink import ExternalRecord, ExternalSink
from aiostreams.engine.output_channel import OutputChannel
from aiostreams.engine.purge import RepartitionPurger
from aiostreams.engine.restore import Restorer
from aiostreams.engine.stall_watch import StallWatch
from aiostreams.engine.task import StreamTask, TaskSettings, task_id_for
from aiostreams.errors import (
    AiostreamsError,
    BrokerUnavailableError,
    CommitFailedError,
    CoPartitioningError,
    ProducerFencedError,
    TaskFailedError,
    TransportError,
    UnknownTopicError,
)
from aiostreams.policies import Retry
from aiostreams.topic import Topic
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import (
    Consumer,
    IsolationLevel,
    TopicSpec,
    Transport,
)
from aiostreams.types import OutgoingRecord, TopicPartition

log = logging.getLogger("aiostreams.worker")


STOP_GRACE = 10.0
"""Seconds a stop may take beyond ``drain_timeout`` (commit, leaving the group, closing
the clients) before it gives up waiting for the broker."""
CLIENT_CLOSE_MIN = 2.0
"""Seconds each client still gets to close once the stop's budget is spent."""


async def _close_within(closing: Awaitable[None], seconds: float, what: str) -> None:
    """Await ``closing`` for at most ``max(seconds, CLIENT_CLOSE_MIN)``; past that, log
    and give up on it (a broker that does not answer must not hold a stop)."""
    try:
        async with asyncio.timeout(max(seconds, CLIENT_CLOSE_MIN)):
            await closing
    except TimeoutError:
        log.warning("worker: gave up waiting for %s to close (the broker did not answer)",
                    what)
    except Exception:  # a client that fails to close must not fail the stop
        log.warning("worker: closing %s failed", what, exc_info=True)


class WorkerState(enum.Enum):
    """``CREATED → STARTING → RUNNING → STOPPING → STOPPED``; ``FAILED`` when a task failed
    or the broker gave up on us (it still stops cleanly)."""

    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass
class WorkerConfig:
    app_id: str
    task: TaskSettings
    commit_interval: float = 1.0
    purge_interval: float = 30.0
    poll_timeout: float = 0.1
    max_poll_records: int = 2000
    drain_timeout: float = 30.0
    broker_timeout: float = 120.0
    exactly_once: bool = False
    default_partitions: int = 1
    group_instance_id: str | None = None
    client_id: str = "aiostreams"
    state_dir: Any = None
    node_retry: Mapping[str, Retry] = field(default_factory=dict)
    stuck_record_warning: float | None = None  # seconds; see engine/stall_watch.py


@dataclass
class CommitRecord:
    """What one commit wrote (kept for tests and metrics)."""

    offsets: dict[TopicPartition, int]
    duration: float


_CONNECTION_ERRORS = frozenset({"KafkaConnectionError", "NodeNotReadyError",
                                "KafkaTimeoutError", "RequestTimedOutError"})


class _Outage:
    """A stretch of continuous broker trouble, with exponential backoff (0.1 s → 5 s)."""

    def __init__(self, since: float) -> None:
        self.since = since
        self._backoff = 0.1

    def next_backoff(self) -> float:
        delay = self._backoff
        self._backoff = min(5.0, self._backoff * 2)
        return delay


class Worker:
    def __init__(
        self,
        subs: Sequence[SubTopology],
        topics: Mapping[str, Topic],
        transport: Transport,
        config: WorkerConfig,
        clock: Clock,
        *,
        on_commit: Callable[[CommitRecord], None] | None = None,
        external_sinks: Sequence[ExternalSink] = (),
    ) -> None:
        self.subs = list(subs)
        self.topics = dict(topics)
        self.transport = transport
        self.config = config
        self.clock = clock
        self.state = WorkerState.CREATED
        self.tasks: dict[str, StreamTask] = {}
        self.failure: BaseException | None = None
        self.commits = 0
        self._rewinding_since: float | None = None  # first rewind since the last commit
        # partitions whose task _rewind closed -> the committed offset to start again from
        self._orphans: dict[TopicPartition, int | None] = {}
        self._on_commit = on_commit
        self._sinks: dict[str, ExternalSink] = {s.name: s for s in external_sinks}
        self._sink_failure: BaseException | None = None
        self._task_of: dict[TopicPartition, StreamTask] = {}
        self._sub_of_topic = {t: sub for sub in self.subs for t in sub.source_topics}
        self._committed: dict[TopicPartition, int] = {}
        self._outbox_ready = asyncio.Event()
        self._shared: OutputChannel | None = None  # at-least-once: one for all tasks
        self._channels: dict[str, OutputChannel] = {}  # exactly-once: one per task
        self._commit_requested = False
        self._sink_flush_requested = False
        self._committed_event = asyncio.Event()
        self._commit_timer: TimerHandle | None = None
        self._stopped = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._consumer: Consumer | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._restorer = Restorer(transport, exactly_once=config.exactly_once,
                                  state_dir=config.state_dir)
        self.stall_watch = StallWatch(config.stuck_record_warning)
        self._purger = RepartitionPurger(
            transport, [t for t in self._sub_of_topic
                        if t in self.topics and self.topics[t].internal],
            clock, config.purge_interval)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self.state is not WorkerState.CREATED:
            raise RuntimeError(f"a worker starts once; this one is {self.state.value}")
        self.state = WorkerState.STARTING
        await self._ensure_topics()
        for sink in self._sinks.values():
            getattr(sink, "bind_app", lambda app_id: None)(self.config.app_id)  # identity
            await sink.start()
        cfg = self.config
        if not cfg.exactly_once:
            producer = self.transport.producer(client_id=cfg.client_id)
            await producer.start()
            self._shared = OutputChannel(producer, transactional=False, name="the producer")
        self._consumer = self.transport.consumer(
            cfg.app_id,
            client_id=cfg.client_id,
            isolation_level=(IsolationLevel.READ_COMMITTED if cfg.exactly_once
                             else IsolationLevel.READ_UNCOMMITTED),
            group_instance_id=cfg.group_instance_id,
            max_poll_records=cfg.max_poll_records,
        )
        await self._consumer.start()
        self._consumer.subscribe(list(self._sub_of_topic), self)
        self.state = WorkerState.RUNNING
        loop = asyncio.get_running_loop()
        self._loops = [loop.create_task(self._fetch_loop(), name="aiostreams-fetch"),
                       loop.create_task(self._send_loop(), name="aiostreams-send")]
        self._arm_commit_timer()

    async def _ensure_topics(self) -> None:
        admin = self.transport.admin()
        await admin.start()
        try:
            specs: list[TopicSpec] = []
            wanted: set[str] = set()
            for sub in self.subs:
                wanted.update(sub.source_topics)
                wanted.update(sub.sink_topics)
            if self.config.task.dead_letter_topic:
                wanted.add(self.config.task.dead_letter_topic)
            existing = {name: await admin.partitions_for(name) for name in sorted(wanted)}
            external = [n for n in existing.values() if n is not None]
            # internal topics (repartition) get as many partitions as the widest input
            internal_size = max(external, default=self.config.default_partitions)
            for name in sorted(wanted):
                if existing[name] is not None:
                    continue
                topic = self.topics.get(name)
                if topic is not None and (topic.partitions is not None or topic.internal):
                    specs.append(TopicSpec(name, topic.partitions or internal_size,
                                           config=dict(topic.config)))
                elif name == self.config.task.dead_letter_topic or any(
                        name in sub.sink_topics for sub in self.subs):
                    specs.append(TopicSpec(name, self.config.default_partitions))
                else:
                    raise UnknownTopicError(
                        f"source topic {name!r} does not exist on {self.transport.url}: create "
                        f"it, or declare it with app.topic({name!r}, partitions=N) so "
                        "aiostreams creates it"
                    )
            if specs:
                await admin.create_topics(specs)
            changelogs: list[TopicSpec] = []
            for sub in self.subs:
                counts = {t: await admin.partitions_for(t) for t in sub.source_topics}
                if len(set(counts.values())) > 1:
                    raise CoPartitioningError(
                        f"sub-topology {sub.id} reads {sorted(counts)} together, but their "
                        f"partition counts differ: {counts}; repartition one of them so they "
                        "match"
                    )
                width = max((c for c in counts.values() if c is not None), default=1)
                for store in sub.stores:
                    if store.logged:
                        name = self.changelog_topic(store.name)
                        have = await admin.partitions_for(name)
                        if have is None:
                            changelogs.append(TopicSpec(name, width,
                                                        config=dict(store.changelog_config)))
                        elif have != width:
                            raise CoPartitioningError(
                                f"changelog topic {name!r} has {have} partitions but its "
                                f"input has {width}; delete the changelog (and the app's "
                                "local state) or restore the input's partition count"
                            )
            if changelogs:
                await admin.create_topics(changelogs)
        finally:
            await admin.stop()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def request_stop(self) -> None:
        self._stop_requested.set()

    async def stop(self) -> None:
        """Stop fetching, drain in-flight work (up to ``drain_timeout``), retire, commit,
        close tasks, leave the group. Idempotent.

        Bounded: the whole stop takes at most ``drain_timeout + STOP_GRACE`` seconds of
        real time, whatever the broker does. When the broker does not answer in time (an
        outage), the commit is abandoned - nothing past the last successful commit is
        marked done, so those records are processed again at the next start - and the
        clients are closed without waiting for it; a log line says what was not committed.

        Cancellation: the remaining steps are skipped and the clients closed; uncommitted
        work is redone by the next owner."""
        if self.state in (WorkerState.STOPPED, WorkerState.CREATED):
            self.state = WorkerState.STOPPED
            self._stopped.set()
            return
        if self.state is WorkerState.STOPPING:
            await self._stopped.wait()
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.drain_timeout + STOP_GRACE

        def left() -> float:
            return max(0.0, deadline - loop.time())

        failed = self.state is WorkerState.FAILED
        self.state = WorkerState.STOPPING
        self._stop_requested.set()
        if self._commit_timer is not None:
            self._commit_timer.cancel()
        fetch = self._loops[0] if self._loops else None
        if fetch is not None and fetch is not asyncio.current_task():
            # let it finish its iteration (it may be committing): cancelling a commit
            # half-way would leave a transaction in doubt
            done, _ = await asyncio.wait([fetch], timeout=min(self.config.poll_timeout + 30.0,
                                                              left()))
            if not done:
                fetch.cancel()
            await asyncio.gather(fetch, return_exceptions=True)
        try:
            async with asyncio.timeout(left()):
                await self._revoke(list(self.tasks.values()))
        except TimeoutError:
            log.error("worker: could not commit before stopping: the broker did not answer "
                      "within the stop's %.0fs (drain_timeout + %.0fs). Nothing after the last "
                      "successful commit is marked done: those records (of %s) will be "
                      "processed again at the next start", self.config.drain_timeout,
                      STOP_GRACE, ", ".join(sorted(map(str, self._task_of))) or "no partition")
            for task in list(self.tasks.values()):
                await self._close_task_quietly(task)
        finally:
            for loop_task in self._loops[1:]:
                loop_task.cancel()
            await asyncio.gather(*self._loops[1:], return_exceptions=True)
            if self._consumer is not None:
                await _close_within(self._consumer.stop(), left(), "the consumer")
            channels = list(self._channels.values())
            if self._shared is not None:
                channels.append(self._shared)
            for channel in channels:
                await _close_within(channel.producer.stop(), left(), channel.name)
            self._channels.clear()
            await _close_within(self._purger.stop(), left(), "the purge client")
            for sink in self._sinks.values():
                try:
                    await sink.stop()
                except Exception:
                    log.exception("worker: stopping sink %r failed", sink.name)
            self.state = WorkerState.FAILED if failed or self.failure else WorkerState.STOPPED
            self._stopped.set()

    async def _close_task_quietly(self, task: StreamTask) -> None:
        try:
            await _close_within(self._close_task(task), CLIENT_CLOSE_MIN, f"task {task.task_id}")
        except Exception:
            log.exception("worker: closing task %s failed", task.task_id)

    # -- rebalance (called by the consumer inside getmany) ------------------------------

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        for tp in revoked:
            self._orphans.pop(tp, None)
        affected = {self._task_of[tp].task_id: self._task_of[tp] for tp in revoked
                    if tp in self._task_of}
        await self._revoke(list(affected.values()))

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        by_task: dict[tuple[int, int], list[TopicPartition]] = {}
        for tp in sorted(assigned):
            if tp in self._task_of:
                continue
            sub = self._sub_of_topic[tp.topic]
            by_task.setdefault((sub.id, tp.partition), []).append(tp)
        for (sub_id, partition), tps in sorted(by_task.items()):
            sub = next(s for s in self.subs if s.id == sub_id)
            task = self._make_task(sub, partition, tps)
            if self.config.exactly_once:
                # a transactional producer per task: starting it fences the task's previous
                # owner, should that zombie still be alive
                producer = self.transport.producer(
                    client_id=self.config.client_id,
                    transactional_id=f"{self.config.app_id}-{task.task_id}")
                await producer.start()
                self._channels[task.task_id] = OutputChannel(
                    producer, transactional=True, name=f"task {task.task_id}'s producer")
            try:
                await task.open_stores()
                await self._restorer.restore(task)
                await task.initialize()
            except BaseException:
                await task.close()  # stores hold threads and files: never leave them open
                channel = self._channels.pop(task.task_id, None)
                if channel is not None:
                    await channel.producer.stop()
                raise
            self.tasks[task.task_id] = task
            for tp in tps:
                self._task_of[tp] = task
                if self._consumer is not None:
                    position = await self._consumer.position(tp)
                    self._committed[tp] = position
                    task.seed_position(tp, position)
        log.info("assigned %s", ", ".join(map(str, sorted(assigned))) or "nothing")

    def changelog_topic(self, store: str) -> str:
        return f"{self.config.app_id}-{store}-changelog"

    def _make_task(self, sub: SubTopology, partition: int,
                   tps: list[TopicPartition]) -> StreamTask:
        task_id = task_id_for(sub, partition)
        return StreamTask(
            task_id, sub, tps, self.config.task,
            topics=self.topics, clock=self.clock,
            emit=lambda records: self._emit(task_id, records),
            on_failed=self._on_task_failed, on_pause=self._on_pause,
            request_commit=self.request_commit, node_retry=self.config.node_retry,
            state_dir=self.config.state_dir,
            changelog_topics={s.name: self.changelog_topic(s.name) for s in sub.stores
                              if s.logged},
            has_unfetched=self._has_unfetched,
        )

    def _has_unfetched(self, tp: TopicPartition, next_offset: int) -> bool:
        consumer = self._consumer
        if consumer is None:
            return False
        highwater = consumer.highwater(tp)
        return highwater is not None and highwater > next_offset

    async def _revoke(self, tasks: list[StreamTask]) -> None:
        if not tasks:
            return
        await asyncio.gather(*(t.drain(self.config.drain_timeout) for t in tasks))
        try:
            # A failed task commits too: up to (not including) its failed record.
            await self.commit(tasks, closing=True)
        finally:
            for task in tasks:
                if self.tasks.get(task.task_id) is task:
                    await self._close_task(task)

    async def _close_task(self, task: StreamTask) -> None:
        """Close ``task`` and forget it (its producer too, under exactly-once)."""
        try:
            await task.close()
        finally:
            self.tasks.pop(task.task_id, None)
            for tp in task.partitions:
                self._task_of.pop(tp, None)
                self._committed.pop(tp, None)
            channel = self._channels.pop(task.task_id, None)
            if channel is not None:
                # a producer cut off from the broker must not hold the worker
                await _close_within(channel.producer.stop(), STOP_GRACE, channel.name)

    async def _lose_tasks(self, tasks: Sequence[StreamTask], error: BaseException) -> None:
        """The group took ``tasks`` from this worker while it was away (paused past the
        session timeout, cut off from the broker): their commit was refused
        (:class:`CommitFailedError`) or a newer owner fenced their producer
        (:class:`ProducerFencedError`). Close them without committing - their records since
        the last commit are processed again by their new owner, the transaction of a fenced
        producer is aborted - and carry on. Their partitions are paused until the consumer,
        at its next fetch, rejoins the group and learns its new assignment (a partition it
        gets back starts again from the committed offset)."""
        lost = [t for t in tasks if self.tasks.get(t.task_id) is t]
        if not lost:
            return
        log.warning("worker: the group moved task(s) %s away while this worker was out of it "
                    "(%s: %s); closing them without committing - their records since the "
                    "last commit will be processed again by their new owner - and rejoining",
                    ", ".join(t.task_id for t in lost), type(error).__name__, error)
        consumer = self._consumer
        for task in lost:
            await self._close_task(task)
            if consumer is not None:
                held = [tp for tp in task.partitions if tp in consumer.assignment()]
                consumer.pause(held)

    # -- fetching -----------------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        """Fetch, hand records to tasks, commit when due; ride out broker trouble.

        A transient broker error (connection lost, coordinator moving, a request timing out)
        is retried with backoff for up to ``broker_timeout`` seconds of continuous trouble;
        the uncommitted work simply waits (nothing is committed past it). Anything else, or
        an outage longer than that, stops the worker with the error."""
        outage: _Outage | None = None
        while not self._stop_requested.is_set():
            try:
                await self._fetch_once()
                if outage is not None:
                    log.warning("worker: the broker is back after %.1fs",
                                self.clock.monotonic() - outage.since)
                    outage = None
            except asyncio.CancelledError:
                raise
            except TransportError as e:
                if not self._transient(e):
                    log.error("worker: stopping: %s", e)
                    self._set_failure(e)
                    return
                now = self.clock.monotonic()
                if outage is None:
                    outage = _Outage(now)
                    log.warning("worker: broker trouble, retrying for up to %.0fs: %s",
                                self.config.broker_timeout, e)
                if now - outage.since > self.config.broker_timeout:
                    log.error("worker: the broker has been unreachable for %.0fs; stopping: "
                              "%s", now - outage.since, e)
                    self._set_failure(e)
                    return
                self._commit_requested = True  # the interrupted commit is redone
                await asyncio.sleep(outage.next_backoff())
            except Exception as e:  # a bug, or a failure we cannot ride out: stop cleanly
                log.exception("worker: fetch loop failed")
                self._set_failure(e)
                return

    async def _fetch_once(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        batch = await consumer.getmany(self.config.poll_timeout, self.config.max_poll_records)
        touched: dict[str, StreamTask] = {}
        for tp, records in batch.items():
            task = self._task_of.get(tp)
            if task is None:
                if records:
                    # never drop fetched records: read them again when a task owns them
                    consumer.seek(tp, records[0].offset)
                    consumer.pause([tp])
                continue
            if records:
                task.enqueue(tp, records)
                touched[task.task_id] = task
        for task in touched.values():
            task.pump()
        for task_id, channel in list(self._channels.items()):
            if isinstance(channel.error, ProducerFencedError) and task_id in self.tasks:
                await self._lose_tasks([self.tasks[task_id]], channel.error)
        for channel in self._all_channels():
            if channel.error is not None and self._rewindable(channel.error):
                await self._rewind(channel)
        if self._orphans:
            await self._reopen()
        failed = next((c.error for c in self._all_channels() if c.error), None)
        if failed is not None:
            raise failed
        if self._commit_requested:
            await self.commit()
        # A fetch that found records ready returns without suspending, and sync processors
        # retire without awaiting: without this the loop would never let the sender, the
        # commit timer or the application's own coroutines run while input is waiting.
        await asyncio.sleep(0)

    async def _rewind(self, channel: OutputChannel) -> None:
        """A send through ``channel`` failed for a reason that passes (the broker did not
        answer in time, a connection dropped): its tasks' outputs since their last commit
        may or may not have landed. Close those tasks without committing and start them
        again from their last committed offsets (:meth:`_reopen`), so every record after the
        commit is processed again: at-least-once, its outputs may repeat; exactly-once, the
        open transaction is aborted with its producer and redone by a new one."""
        error = channel.error
        if self._rewinding_since is None:
            self._rewinding_since = self.clock.monotonic()
        tasks = [t for t in self.tasks.values() if self._channel_of(t.task_id) is channel]
        log.warning("worker: %s failed (%s: %s); starting task(s) %s again from their last "
                    "commit - their records since then are processed again",
                    channel.name, type(error).__name__, error,
                    ", ".join(t.task_id for t in tasks) or "-")
        for task in tasks:
            committed = {tp: self._committed.get(tp) for tp in task.partitions}
            await self._close_task(task)
            for tp, offset in committed.items():
                self._orphans[tp] = offset
        if channel is self._shared:
            # aiokafka's producer can stay broken after a reset mid-request (every send
            # then fails at once): the shared channel gets a new one
            broken = channel.producer
            producer = self.transport.producer(client_id=self.config.client_id)
            await producer.start()
            channel.producer = producer
            channel.take()  # in doubt: redone by the reopened tasks
            channel.error = None
            await _close_within(broken.stop(), STOP_GRACE, "the replaced producer")

    async def _reopen(self) -> None:
        """Start tasks again for the partitions :meth:`_rewind` closed, at their last
        committed offsets. If the broker still does not answer, they stay paused and this
        is tried again at the next fetch; a rebalance that revokes them ends the attempt."""
        consumer = self._consumer
        assert consumer is not None
        owned = consumer.assignment()
        pending = {tp: o for tp, o in self._orphans.items() if tp in owned}
        self._orphans = dict(pending)
        fresh = {tp: o for tp, o in pending.items() if tp not in self._task_of}
        for tp, offset in fresh.items():
            if offset is not None:
                consumer.seek(tp, offset)
        consumer.pause(list(fresh))  # nothing is fetched for them until their task runs
        await self.on_partitions_assigned(list(fresh))
        consumer.resume(list(pending))
        self._orphans.clear()

    def _rewindable(self, error: BaseException) -> bool:
        """Whether a failed send or flush is answered by starting its tasks again from
        their last commit (:meth:`_rewind`): any failure of the producer - including the odd
        ``RuntimeError`` aiokafka raises on a connection reset mid-request - but fencing
        (the task is lost instead) or a missing topic (which would fail again), for as long
        as the trouble has lasted less than ``broker_timeout`` since the last successful
        commit (then the worker stops, as for any outage that long)."""
        if isinstance(error, ProducerFencedError | UnknownTopicError):
            return False
        since = self._rewinding_since
        return since is None or self.clock.monotonic() - since <= self.config.broker_timeout

    def _retriable(self, error: BaseException) -> bool:
        """A failure that passes with time (a timeout, a dropped connection), whatever the
        processing guarantee: fencing and missing topics do not."""
        if isinstance(error, ProducerFencedError | UnknownTopicError | CommitFailedError):
            return False
        cause = error.__cause__ or error.__context__
        if type(cause).__name__ == "IllegalOperation":
            # "not in transaction": the coordinator aborted the open transaction under the
            # producer (a timeout, or a fence it has not reported yet): start again from the
            # last committed one
            return True
        retriable = getattr(cause, "retriable", None)
        if isinstance(retriable, bool):
            return retriable or type(cause).__name__ in _CONNECTION_ERRORS
        return isinstance(error, BrokerUnavailableError) or isinstance(
            cause, ConnectionError | TimeoutError)

    def _transient(self, error: TransportError) -> bool:
        """Worth retrying: the broker is restarting, a coordinator moves, a request timed
        out, and any failed send or flush (its tasks start again from their last commit:
        :meth:`_rewind`). Not: fencing, a missing topic. Under exactly-once only a failed
        send is ridden out; any other failure stops the worker, since a transactional
        commit's outcome is in doubt and a restart resumes from the last committed
        transaction."""
        if any(channel.error is error for channel in self._all_channels()):
            # a failed send or flush: the next fetch starts its tasks again (_rewind)
            return self._rewindable(error)
        return self._retriable(error) and not self.config.exactly_once

    def _on_pause(self, tp: TopicPartition, paused: bool) -> None:
        consumer = self._consumer
        if consumer is None or tp not in self._task_of:
            return
        if paused:
            consumer.pause([tp])
        else:
            consumer.resume([tp])

    # -- outputs ------------------------------------------------------------------------

    def _channel_of(self, task_id: str) -> OutputChannel:
        channel = self._shared if self._shared is not None else self._channels[task_id]
        return channel

    def _all_channels(self) -> list[OutputChannel]:
        return [self._shared] if self._shared is not None else list(self._channels.values())

    def _emit(self, task_id: str, records: list[OutgoingRecord | ExternalRecord]) -> None:
        if self._sinks:
            kafka: list[OutgoingRecord] = []
            added = False
            for r in records:
                if type(r) is ExternalRecord:
                    self._sinks[r.sink].add(r)
                    added = True
                else:
                    kafka.append(r)  # type: ignore[arg-type]
            if added and any(sink.backlogged for sink in self._sinks.values()):
                self._commit_requested = True  # an early commit, which flushes it
            if not kafka:
                return
            self._channel_of(task_id).add(kafka)
        else:
            self._channel_of(task_id).add(records)  # type: ignore[arg-type]
        self._outbox_ready.set()

    async def _send_loop(self) -> None:
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready.clear()
            for channel in self._all_channels():
                if channel.pending and channel.error is None:
                    try:
                        await channel.send_pending()
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        # the fetch loop then loses the channel's task (fenced), starts its
                        # tasks again from their last commit (_rewind) or stops the worker
                        pass

    # -- committing ---------------------------------------------------------------------

    def request_commit(self) -> None:
        self._commit_requested = True

    def request_sink_flush(self) -> None:
        """Make the next commit flush every external sink, backlogged or not (an
        at-least-once commit flushes only backlogged ones): for callers that wait for the
        committed offsets to reach the end of the input."""
        self._sink_flush_requested = True

    def _arm_commit_timer(self) -> None:
        def due() -> None:
            self._commit_requested = True
            self.stall_watch.check(self.tasks.values(), self.clock.monotonic())
            if self.state is WorkerState.RUNNING:
                self._arm_commit_timer()
        self._commit_timer = self.clock.call_later(self.config.commit_interval, due)

    async def commit(self, tasks: Sequence[StreamTask] | None = None, *,
                     closing: bool = False) -> dict[TopicPartition, int]:
        """Commit what the given tasks (default: all) have retired; see the module
        docstring for the steps (``closing``: the tasks are being closed, so under
        exactly-once their checkpoint is written too). Returns the offsets committed.

        Cancellation: do not cancel a commit (``stop`` lets it finish); a cancelled one
        leaves its transaction to the broker's timeout and commits nothing."""
        self._commit_requested = False
        flush_all = closing or self.config.exactly_once or self._sink_flush_requested
        self._sink_flush_requested = False
        consumer = self._consumer
        if consumer is None:
            return {}
        started = self.clock.monotonic()
        chosen = list(self.tasks.values()) if tasks is None else list(tasks)
        groups: list[tuple[OutputChannel, list[StreamTask]]]
        if self._shared is not None:
            groups = [(self._shared, chosen)]
        else:
            groups = [(self._channels[t.task_id], [t]) for t in chosen
                      if t.task_id in self._channels]
        committed: dict[TopicPartition, int] = {}
        lost: list[tuple[list[StreamTask], BaseException]] = []
        for channel, group in groups:
            async with channel.lock:
                try:
                    committed.update(await self._commit_group(channel, group, consumer,
                                                              closing, flush_all))
                except (CommitFailedError, ProducerFencedError) as refused:
                    lost.append((group, refused))
                except Exception as refused:
                    if not closing:
                        raise
                    # the tasks are being closed and cannot commit: their new owner (or
                    # the next start) resumes from the last commit, as after a crash
                    log.debug("worker: the closing commit failed", exc_info=True)
                    lost.append((group, refused))
        for group, reason in lost:
            await self._lose_tasks(group, reason)
        if committed:
            self._rewinding_since = None
            self.commits += 1
            if self._on_commit is not None:
                self._on_commit(CommitRecord(committed, self.clock.monotonic() - started))
            await self._purger.after_commit(self._committed)
        # wake whoever waits for the next commit, even an empty one (nothing left to do)
        event, self._committed_event = self._committed_event, asyncio.Event()
        event.set()
        return committed

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

    async def stop_requested(self) -> None:
        """Return once a stop has been asked for (a signal, ``request_stop``, a failure)."""
        await self._stop_requested.wait()

    def committed_offset(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for ``tp`` as this worker last committed or read it
        at assignment (None when it holds no position for ``tp``)."""
        return self._committed.get(tp)

    async def next_commit(self) -> None:
        """Wait for the next commit (or for the worker to stop). Cancellation-safe."""
        stopped = asyncio.ensure_future(self._stopped.wait())
        committed = asyncio.ensure_future(self._committed_event.wait())
        try:
            await asyncio.wait([stopped, committed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            committed.cancel()

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
            if offset > self._committed.get(tp, -1):
                capped[tp] = offset
        return capped

    async def _commit_group(self, channel: OutputChannel, tasks: list[StreamTask],
                            consumer: Consumer, closing: bool, flush_all: bool
                            ) -> dict[TopicPartition, int]:
        """One commit of ``tasks`` through ``channel``; hold ``channel.lock``.
        ``flush_all``: flush every external sink, not only the backlogged ones."""
        # The snapshot of committable offsets and the outputs that go with them are taken
        # together, with no await in between: everything in the channel now was retired
        # before the snapshot; what retires later waits for the next commit (transaction).
        offsets: dict[TopicPartition, int] = {}
        for task in tasks:
            candidate = {tp: off for tp, off in task.committable().items()
                         if off > self._committed.get(tp, -1)}
            task.check_commit_point(candidate)
            offsets.update(candidate)
        await channel.send(channel.take())
        if channel.error is not None:
            raise channel.error
        try:
            await channel.producer.flush()
        except TransportError as e:
            channel.error = e  # some outputs since the last commit may not have landed
            raise
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
        checkpoint_now = not self.config.exactly_once or closing
        marks = (await self._restorer.changelog_marks(tasks, consumer) if checkpoint_now
                 else {})
        for task in tasks:
            await task.flush_stores()
        if channel.transactional:
            if offsets or channel.in_transaction:
                if not channel.in_transaction:
                    await channel.producer.begin_transaction()
                    channel.in_transaction = True
                if offsets:
                    try:
                        await channel.producer.send_offsets_to_transaction(
                            offsets, self.config.app_id)
                    except TransportError as e:
                        # before the commit point: the transaction did not commit, so its
                        # tasks can start again from the last one (_rewind); a failure of
                        # commit_transaction below is in doubt and stops the worker
                        channel.error = e
                        raise
                await channel.producer.commit_transaction()
                channel.in_transaction = False
        elif offsets:
            await consumer.commit(offsets)
        if marks:
            await self._restorer.write_checkpoints(tasks, marks)
        for tp, off in offsets.items():
            previous = self._committed.get(tp, -1)
            if off < previous:
                raise AssertionError(f"{tp}: committed offset moved back {previous} -> {off}")
            self._committed[tp] = off
        return offsets

    # -- failure ------------------------------------------------------------------------

    def _on_task_failed(self, task: StreamTask, error: TaskFailedError) -> None:
        self._set_failure(error)

    def _set_failure(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
        if self.state is WorkerState.RUNNING:
            self.state = WorkerState.FAILED
        self._stop_requested.set()

    def raise_failure(self) -> None:
        if self.failure is not None:
            if isinstance(self.failure, AiostreamsError):
                raise self.failure
            raise TaskFailedError(f"the worker stopped: {self.failure}") from self.failure
