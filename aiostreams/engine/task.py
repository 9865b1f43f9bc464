"""A stream task: one sub-topology over one input partition (or a co-partitioned group).

The task coordinates small parts, each testable alone, and owns what is not the record
path: its lifecycle (:mod:`~aiostreams.engine.task_state`), its stores
(:mod:`~aiostreams.engine.task_stores`), the compiled processors
(:mod:`~aiostreams.engine.graph`) and the calls the worker, the app and the processors make.
The hot loop - choose, issue, execute, finish, retire - is :mod:`~aiostreams.engine.record_path`;
fetched records wait in its :mod:`~aiostreams.engine.intake`.

The worker drives it: ``enqueue`` each fetched batch then ``pump``; ``committable()`` when
committing; ``drain``/``close`` on revocation and shutdown.

Invariant: the committable offset of a partition is one past its last retired record (the
reorder buffer asserts it, and :meth:`StreamTask.check_commit_point` before a commit).
Everything runs on the event loop thread; no locks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiostreams.engine.cache_flush import CacheFlusher
from aiostreams.engine.graph import TaskGraph
from aiostreams.engine.head_of_line import HeadOfLine
from aiostreams.engine.intake import Intake
from aiostreams.engine.partition_queue import HasUnfetched
from aiostreams.engine.punctuation import Punctuation, PunctuationCallback
from aiostreams.engine.record_path import RecordPath
from aiostreams.engine.reorder_buffer import ReorderBuffer
from aiostreams.engine.task_state import TaskMetrics, TaskSettings, TaskState
from aiostreams.engine.task_stores import TaskStores
from aiostreams.engine.topic_serdes import TopicSerdes
from aiostreams.errors import TaskFailedError, TopologyError
from aiostreams.policies import Retry
from aiostreams.runtime.clock import Clock, TimerHandle
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.origin import OriginMarks, OriginMode
from aiostreams.runtime.slot import Slot, SlotState
from aiostreams.state.base import StateStore
from aiostreams.state.record_cache import RecordCacheStore
from aiostreams.state.task_directory import TaskDirectory
from aiostreams.topic import Topic
from aiostreams.topology.processor import PunctuationType
from aiostreams.topology.topology import SubTopology
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

log = logging.getLogger("aiostreams.task")

TASK_FAILURE_LOG_MARK = "aiostreams_task_failure"
"""Attribute set on the log record of a task failure (see ``_failed``)."""


class StreamTask:
    """See the module docstring."""

    def __init__(
        self,
        task_id: str,
        sub: SubTopology,
        partitions: Sequence[TopicPartition],
        settings: TaskSettings,
        *,
        topics: Mapping[str, Topic],
        clock: Clock,
        emit: Callable[[list[OutgoingRecord | ExternalRecord]], None],
        on_failed: Callable[[StreamTask, TaskFailedError], None],
        on_pause: Callable[[TopicPartition, bool], None] = lambda tp, paused: None,
        request_commit: Callable[[], None] = lambda: None,
        node_retry: Mapping[str, Retry] | None = None,
        state_dir: Any = None,
        changelog_topics: Mapping[str, str] | None = None,
        has_unfetched: HasUnfetched | None = None,
    ) -> None:
        self.task_id = task_id
        self.sub = sub
        self.settings = settings
        self.metrics = TaskMetrics()
        self._on_failed = on_failed
        self.request_commit = request_commit
        self.serialize_for = TopicSerdes(topics).serialize_for
        self.intake = Intake(partitions, clock, max_task_idle=settings.max_task_idle,
                             max_buffered_per_partition=settings.max_buffered_per_partition,
                             max_task_buffer_bytes=settings.max_task_buffer_bytes,
                             on_pause=on_pause, has_unfetched=has_unfetched)
        self._rob = ReorderBuffer(settings.max_in_flight, partitions)
        tp_of = {tp.topic: tp for tp in partitions}  # one partition per topic in a task
        self._task_stores = TaskStores(sub.stores, partition=partitions[0].partition,
                                       changelog_topics=changelog_topics or {})
        self.directory: TaskDirectory | None = (
            TaskDirectory(state_dir, task_id)
            if state_dir is not None and self._task_stores.persistent else None)
        """Where the persistent stores and the checkpoint live, held by this task alone
        from :meth:`open_stores` to :meth:`close` (see :mod:`~aiostreams.state.task_directory`)."""
        marks = (settings.origins.for_task(sub.source_topics, sub.sink_topics)
                 if settings.origins is not None else None)  # runtime.origin
        self._graph = TaskGraph(sub, self, store_views=self._task_stores.views,
                                node_retry=node_retry or {},
                                max_record_bytes=settings.max_record_bytes, tp_of=tp_of,
                                lineage=settings.lineage,
                                unmarked=unmarked_topics(sub, topics, marks))
        self._path = RecordPath(task_id, settings, self.metrics, clock=clock,
                                intake=self.intake, rob=self._rob, graph=self._graph,
                                stores=self._task_stores, tp_of=tp_of, emit=emit,
                                on_failed=self._failed, marks=marks)
        self.head_of_line: HeadOfLine = self._path.head_of_line
        """How long finished records waited to retire behind earlier ones."""
        self.tracer = self._path.tracer
        """This task's spans per record (None: the app does not trace)."""

    @property
    def state(self) -> TaskState:
        return self._path.state

    # -- lifecycle ----------------------------------------------------------------------

    async def open_stores(self) -> None:
        """Open the stores (``CREATED → RESTORING``); the worker restores them next."""
        self._path.transition(TaskState.RESTORING)
        directory = self.directory
        if directory is None:
            await self._task_stores.open(self.task_id, None)
            return
        await asyncio.to_thread(directory.acquire)  # released by close(), even after a failure
        await self._task_stores.open(self.task_id, directory.root)

    @property
    def owner_epoch(self) -> int:
        """The group generation in which this worker took the task (stamped on its
        changelog records; -1 without a group)."""
        return self._task_stores.owner_epoch

    @owner_epoch.setter
    def owner_epoch(self, epoch: int) -> None:
        self._task_stores.set_owner_epoch(epoch)

    @property
    def changelog_partitions(self) -> dict[str, TopicPartition]:
        """Store name → the changelog partition that backs it in this task."""
        return self._task_stores.changelog_partitions

    async def initialize(self) -> None:
        """``init`` every processor (parents first) and start running. Opens the stores
        first when the worker has not (no restore needed)."""
        if self.state is TaskState.CREATED:
            await self.open_stores()
        await self._graph.init_processors()
        self._path.transition(TaskState.RUNNING)

    def _failed(self, failure: TaskFailedError) -> None:
        # marked, so a caller that reports the failure itself (the CLI's last line) can
        # leave this one out and the user reads it once
        log.error("%s", failure, extra={TASK_FAILURE_LOG_MARK: True})
        self._on_failed(self, failure)

    # -- what the worker calls ----------------------------------------------------------

    @property
    def partitions(self) -> list[TopicPartition]:
        return self.intake.partitions

    def enqueue(self, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
        """Buffer fetched records without issuing; call :meth:`pump` after a whole fetch
        batch is in, so the choice by timestamp sees every partition's records."""
        self.intake.enqueue(tp, records)
        self.metrics.records_in += len(records)
        if self.tracer is not None:
            self.tracer.fetched(tp, records)

    def pump(self) -> None:
        """Retire what finished, then issue as long as possible."""
        self._path.pump()

    def seed_position(self, tp: TopicPartition, offset: int) -> None:
        """Where fetching ``tp`` starts (see :meth:`Intake.seed_position`)."""
        self.intake.seed_position(tp, offset)

    def committable(self) -> dict[TopicPartition, int]:
        return dict(self._rob.committable)

    def check_commit_point(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Assert that committing ``offsets`` passes no unretired record."""
        self._rob.check_commit_point(offsets)

    # -- what the app, the metrics and the test driver read -----------------------------

    @property
    def oldest_unretired(self) -> RawRecord | None:
        """The input record at the head of the reorder buffer (None when nothing is in
        flight, or the head is a punctuation): what retirement, and the commit, wait for."""
        head = self._rob.head
        return head.raw if head is not None else None

    @property
    def executing(self) -> int:
        """Slots whose processors are running now (not waiting, backing off, or done)."""
        return sum(1 for slot in self._rob.slots_view if slot.state is SlotState.EXECUTING)

    @property
    def pump_pending(self) -> bool:
        """A pump (retire, then issue) is scheduled on the loop and has not run yet."""
        return self._path.pump_pending

    @property
    def in_flight(self) -> int:
        return len(self._rob)

    @property
    def enforced_processing_total(self) -> int:
        return self.intake.queues.enforced_processing_total

    def buffered(self, tp: TopicPartition | None = None) -> int:
        return self.intake.buffered(tp)

    # -- what the processors' contexts call (context.TaskHost) --------------------------

    @property
    def stream_time(self) -> float:
        """The largest record timestamp issued so far (-inf before the first)."""
        return self._path.stream_time

    def schedule(self, node: str, interval: float, callback: PunctuationCallback,
                 kind: PunctuationType) -> TimerHandle:
        """Schedule ``callback`` for node ``node`` (see
        :mod:`~aiostreams.engine.punctuation`); the handle cancels it."""
        steps = self._graph.nodes[node].steps
        return self._path.punctuations.schedule(
            Punctuation(node, steps, interval, kind, callback))

    def record_cache(self, node: str, store: str, flush: Callable[[], None]
                     ) -> tuple[RecordCacheStore, Any] | None:
        """Store ``store``'s record cache and its view, with ``flush`` registered as node
        ``node``'s flush (see :mod:`~aiostreams.engine.cache_flush`); None when the task
        caches nothing (``cache_max_bytes`` 0).

        Nodes sharing a store (a cogroup's aggregates) share its cache, and one flush (the
        first node's) writes and forwards every entry: a second would send each entry
        again. So they must have the same children, as a cogroup's do (its merge node)."""
        budget = self.settings.cache_max_bytes
        if budget <= 0:
            return None
        path = self._path
        cache, view = self._task_stores.cache_for(store, budget, path.request_cache_flush)
        steps = self._graph.nodes[node].steps
        flusher = next((f for f in path.cache_flushers if f.cache is cache), None)
        if flusher is None:
            path.cache_flushers.append(CacheFlusher(node, steps, cache, flush))
        elif flusher.steps.keys() != steps.keys():
            raise TopologyError(
                f"nodes {flusher.node!r} and {node!r} share store {store!r} with a record "
                f"cache but forward to different nodes ({sorted(flusher.steps)} and "
                f"{sorted(steps)}); one flush forwards for both, so give them the same "
                "children, or turn the store's caching off (caching=False)")
        return cache, view

    def cache_view(self, store: str) -> Any | None:
        """The view of store ``store``'s record cache (None: not cached in this task)."""
        return self._task_stores.cache_view(store)

    @property
    def caches(self) -> bool:
        """Whether any store of this task has a record cache."""
        return bool(self._path.cache_flushers)

    def record_cache_store(self, store: str) -> RecordCacheStore | None:
        """Store ``store``'s record cache in this task (None: uncached)."""
        made = self._task_stores.caches.get(store)
        return made[0] if made is not None else None

    def cached_entries(self, store: str) -> list[tuple[Any, Any]]:
        """The retired updates store ``store``'s record cache holds, in the order of their
        last updates (key, :class:`~aiostreams.state.record_cache.CacheEntry`); empty when
        uncached."""
        made = self._task_stores.caches.get(store)
        return made[0].dirty() if made is not None else []

    async def flush_caches(self) -> None:
        """Before a commit's snapshot: flush the record caches and hold issuing until
        :meth:`release_hold` (see :meth:`RecordPath.flush_caches
        <aiostreams.engine.record_path.RecordPath.flush_caches>`)."""
        await self._path.flush_caches()

    def release_hold(self) -> None:
        self._path.release_hold()

    async def wait_for_earlier(self, slot: Slot) -> None:
        """Return once every record issued before ``slot`` has finished executing; see
        :mod:`~aiostreams.engine.issue_order`. Cancellation: stops waiting."""
        await self._path.gate.wait_for_earlier(slot)

    # -- shutdown -----------------------------------------------------------------------

    async def drain(self, timeout: float) -> bool:
        """Stop issuing; wait up to ``timeout`` seconds for in-flight records to finish and
        retire. Returns True when everything retired. Cancellation: stops waiting, leaves
        the task SUSPENDED (``close`` then cancels what still runs)."""
        path = self._path
        if path.state is TaskState.RUNNING:
            path.transition(TaskState.SUSPENDED)
        if path.state is not TaskState.SUSPENDED:
            return not self._rob
        previous, drained = path.drained, asyncio.Event()
        path.drained = drained
        if previous is not None:
            previous.set()  # a commit's cache flush waiting on it moves to this one
        path.pump()
        if self._rob:
            try:
                async with asyncio.timeout(timeout):
                    while self._rob and path.state is TaskState.SUSPENDED:
                        drained.clear()
                        await drained.wait()
            except TimeoutError:
                log.warning("task %s: %d record(s) still in flight after the %.1fs drain "
                            "timeout; they will be processed again by the next owner",
                            self.task_id, len(self._rob), timeout)
        return not self._rob

    async def close(self) -> None:
        """Cancel what still runs, close processors (children first) and stores."""
        path = self._path
        if path.state is TaskState.RUNNING:
            path.transition(TaskState.SUSPENDED)
        path.punctuations.cancel_all()
        self.intake.cancel_idle_timer()
        path.recovery.cancel_all()
        await path.pool.cancel_all()
        if self.tracer is not None:
            self.tracer.closed(self._rob.slots_view)
        await self._graph.close_processors(self.task_id)
        try:
            await self._task_stores.close()
        finally:
            if self.directory is not None:
                await asyncio.to_thread(self.directory.release)
        if path.state is not TaskState.CLOSED:
            path.transition(TaskState.CLOSED)

    @property
    def stores(self) -> dict[str, StateStore]:
        return dict(self._task_stores.stores)

    async def flush_stores(self) -> None:
        await self._task_stores.flush()

    def seal_stores(self) -> None:
        """Set apart the state writes retired so far (exactly-once: with the snapshot)."""
        self._task_stores.seal()

    async def flush_sealed_stores(self, ends: dict[TopicPartition, int]) -> None:
        """Write what :meth:`seal_stores` set apart, marked with the changelog ``ends``."""
        await self._task_stores.flush_sealed(ends)

    def __repr__(self) -> str:
        return f"<StreamTask {self.task_id} {self.state.value} in_flight={len(self._rob)}>"


def task_id_for(sub: SubTopology, partition: int) -> str:
    return f"{sub.id}_{partition}"


__all__ = ["TASK_FAILURE_LOG_MARK", "StreamTask", "TaskMetrics", "TaskSettings",
           "TaskState", "task_id_for"]


def unmarked_topics(sub: SubTopology, topics: Mapping[str, Topic],
                    marks: OriginMarks | None) -> set[str]:
    """The topics of ``sub`` whose records lose their origin headers as they are read
    (:mod:`aiostreams.runtime.origin`): those that may carry one - every input of a
    replay, the topics a recording app reads back - and its internal topics, where a run
    that marked may have left some (never into state)."""
    return {t for t in sub.source_topics
            if (marks is not None and (marks.mode is OriginMode.REPLAY or t in marks.read_back))
            or (t in topics and topics[t].internal)}
