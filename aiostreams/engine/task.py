"""A stream task: one sub-topology over one input partition (or a co-partitioned group).

The task is the Tomasulo machine of aiostreams:

1. **Choose** the next record from the partition queues (smallest head timestamp, with
   task idling; :mod:`~aiostreams.engine.partition_queue`).
2. **Issue** it into the reorder buffer; a full buffer stops issuing.
3. **Wait** in the reservation station for earlier same-key (or same-partition) records.
4. **Execute** the processor chain: inline when every processor reachable from its source
   is synchronous (no asyncio task), otherwise on a pool of executor coroutines through the
   compiled async runners (:mod:`~aiostreams.engine.async_chain`). Forwards to sinks,
   ``send``s and store writes are buffered in the slot.
5. **Retire** the head once it has finished: release its outputs, apply its store writes,
   advance the committable offset.

Failures go through :mod:`~aiostreams.engine.failure`. Punctuations are issued like
records but as barriers: they start once every earlier slot has finished, and no later slot
is issued until they finish.

Everything here runs on the event loop thread; no locks. The only suspension points are
inside processors' ``await``s, so the bookkeeping is atomic with respect to them.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiostreams.engine.async_chain import (
    AsyncRunner,
    Step,
    compile_async_node,
    compile_fan_out,
    hand_over,
    step_of,
)
from aiostreams.engine.clock import Clock, TimerHandle
from aiostreams.engine.coarse_timeout import CoarseTimeouts, granularity_for
from aiostreams.engine.context import NodeContext
from aiostreams.engine.external_sink import ExternalRecord
from aiostreams.engine.failure import NO_RETRY, Deferred, OnError, Retry, dead_letter_record
from aiostreams.engine.issue_order import IssueOrderGate
from aiostreams.engine.partition_queue import HasUnfetched, PartitionGroup
from aiostreams.engine.reorder_buffer import ReorderBuffer, Slot, SlotKind, SlotState
from aiostreams.engine.reservation_station import Ordering, ReservationStation
from aiostreams.engine.sync_chain import Runner, compile_decoder, compile_node
from aiostreams.errors import (
    SerializationError,
    TaskFailedError,
)
from aiostreams.serde import Serde
from aiostreams.state.base import StateStore, StoreContext
from aiostreams.state.overlay import CURRENT_SLOT, StoreOverlay, view_for
from aiostreams.topic import Topic
from aiostreams.topology.processor import Processor, PunctuationType, is_async_processor
from aiostreams.topology.topology import SinkNode, SourceNode, SubTopology
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition

log = logging.getLogger("aiostreams.task")

TASK_FAILURE_LOG_MARK = "aiostreams_task_failure"
"""Attribute set on the log record of a task failure (see ``_fail``)."""


class TaskState(enum.Enum):
    """``CREATED → RUNNING → SUSPENDED → CLOSED``; ``FAILED`` from RUNNING/SUSPENDED."""

    CREATED = "created"
    RESTORING = "restoring"
    RUNNING = "running"
    SUSPENDED = "suspended"  # no longer issuing; in-flight work drains
    CLOSED = "closed"
    FAILED = "failed"


_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.CREATED: frozenset({TaskState.RESTORING, TaskState.RUNNING, TaskState.CLOSED}),
    TaskState.RESTORING: frozenset({TaskState.RUNNING, TaskState.CLOSED, TaskState.FAILED}),
    TaskState.RUNNING: frozenset({TaskState.SUSPENDED, TaskState.FAILED}),
    TaskState.SUSPENDED: frozenset({TaskState.CLOSED, TaskState.FAILED}),
    TaskState.FAILED: frozenset({TaskState.CLOSED}),
    TaskState.CLOSED: frozenset(),
}


@dataclass
class TaskSettings:
    max_in_flight: int = 1000
    ordering: Ordering = Ordering.KEY
    max_task_idle: float = 0.0
    max_buffered_per_partition: int = 1000
    retry: Retry = NO_RETRY
    on_error: OnError = OnError.FAIL
    dead_letter_topic: str | None = None
    processing_timeout: float | None = None
    max_record_bytes: int = 1_000_000
    max_concurrency: int | None = None  # None: max_in_flight


@dataclass
class TaskMetrics:
    records_in: int = 0
    records_out: int = 0
    retries: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    punctuations: int = 0
    deferred: int = 0
    max_rob_depth: int = 0
    by_node_errors: dict[str, int] = field(default_factory=dict)


class NodeExec:
    """A node of the sub-topology instantiated for one task."""

    __slots__ = ("children", "children_by_name", "context", "external", "is_async", "name",
                 "processor", "retry", "run_async", "run_sync", "sink", "steps", "stores",
                 "subtree_async")

    def __init__(self, name: str) -> None:
        self.name = name
        self.processor: Processor[Any, Any] | None = None
        self.sink: SinkNode | None = None
        self.external: str | None = None  # an external sink's name
        self.is_async = False
        self.children: list[NodeExec] = []
        self.children_by_name: dict[str, NodeExec] = {}
        self.stores: dict[str, Any] = {}
        self.context: NodeContext | None = None
        self.retry: Retry | None = None
        self.subtree_async = False  # this node or one below it must be awaited
        self.run_sync: Runner = _not_compiled  # runs it synchronously (see sync_chain)
        self.run_async: AsyncRunner | None = None  # when subtree_async (see async_chain)
        self.steps: dict[str, Step] = {}  # its children's, by name (a processor's)


def _not_compiled(record: Record[Any, Any], slot: Slot) -> None:
    raise AssertionError("a node ran before the task compiled its runners")


class SourceExec:
    __slots__ = ("chain_is_async", "children", "decode", "key_serde", "name", "run_async",
                 "value_serde")

    def __init__(self, node: SourceNode, children: list[NodeExec]) -> None:
        self.name = node.name
        self.key_serde: Serde[Any] = node.key_serde
        self.value_serde: Serde[Any] = node.value_serde
        self.decode = compile_decoder(node.key_serde, node.value_serde)
        self.children = children
        self.chain_is_async = any(c.subtree_async for c in children)
        # the children, awaited where they must be (used only when chain_is_async)
        self.run_async = compile_fan_out(
            [(c.run_sync, c.run_async) for c in children])


class _Punctuation:
    def __init__(self, node: NodeExec, interval: float, kind: PunctuationType,
                 callback: Callable[[float], Awaitable[None] | None]) -> None:
        if interval <= 0:
            raise ValueError(f"a punctuation interval must be > 0 seconds, got {interval}")
        self.node = node
        self.interval = interval
        self.kind = kind
        self.callback = callback
        self.next_due: float | None = None
        self.timer: TimerHandle | None = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.timer is not None:
            self.timer.cancel()


class StreamTask:
    """See the module docstring. Driven by the worker: ``add_records`` when fetched,
    ``committable()`` when committing, ``drain``/``close`` on revocation and shutdown."""

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
        self.state = TaskState.CREATED
        self.metrics = TaskMetrics()
        self.stream_time = float("-inf")
        self._clock = clock
        self._emit = emit
        self._on_failed = on_failed
        self._on_pause = on_pause
        self._request_commit = request_commit
        self._topics = dict(topics)
        self._queues = PartitionGroup(partitions, settings.max_task_idle, has_unfetched)
        self._rob = ReorderBuffer(settings.max_in_flight, partitions)
        self._station = ReservationStation()
        self._gate = IssueOrderGate(self._rob.slots_view, self._gate_wait)
        self._gate_waiting = 0  # executors parked in the gate (each lets one more run)
        self._ordering = settings.ordering
        self._max_record_bytes = settings.max_record_bytes
        timeouts = [t for t in (settings.processing_timeout, settings.retry.timeout) if t]
        self._attempt_timeout = min(timeouts) if timeouts else None  # both bound an attempt
        self._timeouts = CoarseTimeouts(granularity_for(self._attempt_timeout or 1.0))
        self._unfinished = 0
        self._barrier: Slot | None = None
        self._pump_scheduled = False
        self._idle_timer: TimerHandle | None = None
        self._paused: set[TopicPartition] = set()
        self._punctuations: list[_Punctuation] = []
        self._due_punctuations: list[_Punctuation] = []
        # the executor pool: long-lived coroutines that run async slots one after another
        # (a task per record would cost a Task, its registration and a context copy each)
        self._executors: set[asyncio.Task[None]] = set()
        self._idle_executors: list[asyncio.Future[Slot]] = []
        # slots waiting for an executor, oldest first (by reorder-buffer sequence): a
        # retried or long-blocked record holds the commit point, so it goes before newer ones
        self._ready: list[tuple[int, Slot]] = []
        self._max_concurrency = min(settings.max_concurrency or settings.max_in_flight,
                                    settings.max_in_flight)
        self._backoff_timers: dict[Slot, TimerHandle] = {}
        self._drained: asyncio.Event | None = None
        self._stores: dict[str, StateStore] = {}
        self._overlays: dict[str, StoreOverlay] = {}
        self._state_dir = state_dir
        self._changelog_topics = dict(changelog_topics or {})
        self._changelog_of: dict[StoreOverlay, str] = {}
        self._partition = partitions[0].partition
        self._tp_of = {tp.topic: tp for tp in partitions}  # one partition per topic in a task
        self._released: list[OutgoingRecord | ExternalRecord] = []
        self._inline = Slot(SlotKind.RECORD, None, None, None)
        self._build(node_retry or {})

    # -- construction -----------------------------------------------------------------

    def _build(self, node_retry: Mapping[str, Retry]) -> None:
        for spec in self.sub.stores:
            store = spec.factory()
            self._stores[spec.name] = store
            overlay = StoreOverlay(store)
            self._overlays[spec.name] = overlay
            topic = self._changelog_topics.get(spec.name)
            if spec.logged and topic is not None:
                self._changelog_of[overlay] = topic
        execs: dict[str, NodeExec] = {}
        for proc in self.sub.processors:
            ne = NodeExec(proc.name)
            ne.processor = proc.supplier()
            if not isinstance(ne.processor, Processor):
                raise TypeError(
                    f"processor {proc.name!r}: its supplier returned "
                    f"{type(ne.processor).__name__}, not a Processor"
                )
            ne.is_async = is_async_processor(ne.processor)
            ne.stores = {s: view_for(self._overlays[s]) for s in proc.stores}
            ne.retry = node_retry.get(proc.name)
            execs[proc.name] = ne
        for sink in self.sub.sinks:
            ne = NodeExec(sink.name)
            ne.sink = sink
            execs[sink.name] = ne
        for ext in self.sub.external_sinks:
            ne = NodeExec(ext.name)
            ne.external = ext.name
            execs[ext.name] = ne
        for proc in self.sub.processors:
            ne = execs[proc.name]
            ne.children = [execs[c] for c in proc.children]
            ne.children_by_name = {c.name: c for c in ne.children}
            ne.context = NodeContext(self, ne)
        self._nodes = execs
        for ne in execs.values():
            ne.subtree_async = _reaches_async(ne)

        def runner_of(ne: NodeExec) -> Runner:
            if ne.run_sync is _not_compiled:
                ne.run_sync = compile_node(ne, runner_of,
                                           max_record_bytes=self._max_record_bytes,
                                           tp_of=self._tp_of)
            return ne.run_sync

        def async_runner_of(ne: NodeExec) -> AsyncRunner:
            if ne.run_async is None:
                ne.steps = {c.name: step_of(c, async_runner_of) for c in ne.children}
                ne.run_async = compile_async_node(ne, ne.steps)
            return ne.run_async

        for ne in execs.values():
            runner_of(ne)
        for ne in execs.values():
            if ne.subtree_async:
                async_runner_of(ne)  # sets its steps too
            elif ne.processor is not None:  # a sync subtree: steps for punctuations' forwards
                ne.steps = {c.name: (c.run_sync, None) for c in ne.children}
        self._sources: dict[str, SourceExec] = {}
        for src in self.sub.sources:
            sx = SourceExec(src, [execs[c] for c in src.children])
            for topic in src.topics:
                self._sources[topic] = sx

    async def open_stores(self) -> None:
        """Open the stores (``CREATED → RESTORING``); the worker restores them next."""
        self._transition(TaskState.RESTORING)
        ctx = StoreContext(self.task_id, self._state_dir, self._partition)
        for store in self._stores.values():
            await store.open(ctx)

    @property
    def changelog_partitions(self) -> dict[str, TopicPartition]:
        """Store name → the changelog partition that backs it in this task."""
        by_overlay = {o: name for name, o in self._overlays.items()}
        return {by_overlay[o]: TopicPartition(t, self._partition)
                for o, t in self._changelog_of.items()}

    async def initialize(self) -> None:
        """``init`` every processor (parents first) and start running. Opens the stores
        first when the worker has not (no restore needed)."""
        if self.state is TaskState.CREATED:
            await self.open_stores()
        for ne in self._nodes.values():
            if ne.processor is not None:
                assert ne.context is not None
                await ne.processor.init(ne.context)
        self._transition(TaskState.RUNNING)

    def _transition(self, new: TaskState) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise AssertionError(f"task {self.task_id}: {self.state.value} -> {new.value}")
        self.state = new

    # -- intake -------------------------------------------------------------------------

    @property
    def partitions(self) -> list[TopicPartition]:
        return self._queues.partitions

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
        return self._pump_scheduled

    @property
    def in_flight(self) -> int:
        return len(self._rob)

    @property
    def enforced_processing_total(self) -> int:
        return self._queues.enforced_processing_total

    def buffered(self, tp: TopicPartition | None = None) -> int:
        if tp is None:
            return self._queues.total_buffered()
        return self._queues.buffered(tp)

    def add_records(self, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
        self.enqueue(tp, records)
        self._pump()

    def enqueue(self, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
        """Buffer fetched records without issuing; call :meth:`pump` after a whole fetch
        batch is in, so the choice by timestamp sees every partition's records."""
        self._queues.add(tp, records)
        self.metrics.records_in += len(records)

    def pump(self) -> None:
        self._pump()

    def seed_position(self, tp: TopicPartition, offset: int) -> None:
        """Where fetching ``tp`` starts; lets the task tell an empty partition that is
        caught up from one whose records are still on their way."""
        self._queues.seed_position(tp, offset)

    def committable(self) -> dict[TopicPartition, int]:
        return dict(self._rob.committable)

    def check_commit_point(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Assert that committing ``offsets`` passes no unretired record."""
        for tp, offset in offsets.items():
            oldest = self._rob.oldest_unretired_offset(tp)
            if oldest is not None and offset > oldest:
                raise AssertionError(
                    f"{tp}: commit at {offset} would pass unretired offset {oldest}"
                )

    # -- the pump: retire, then issue as long as possible ------------------------------

    def schedule_pump(self) -> None:
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        self._retire()
        if self.state is TaskState.RUNNING:
            self._issue_loop()
            self._retire()
        if self._released:
            released, self._released = self._released, []
            self.metrics.records_out += len(released)
            self._emit(released)
        self._update_pause()
        if self._drained is not None and not self._rob:
            self._drained.set()

    def _issue_loop(self) -> None:
        # The inline fast path runs with CURRENT_SLOT bound to the reused inline slot for
        # the whole loop; other slots bind their own while they execute.
        token = CURRENT_SLOT.set(self._inline)
        try:
            self._issue_records()
        finally:
            CURRENT_SLOT.reset(token)

    def _issue_records(self) -> None:
        rob = self._rob
        in_rob = rob.slots_view  # the buffer's deque, read here without method calls
        capacity = rob.capacity
        queues = self._queues
        single = queues.single_queue
        sources = self._sources
        issue = rob.issue
        admit = self._station.admit
        metrics = self.metrics
        by_key = self._ordering is Ordering.KEY
        executing = SlotState.EXECUTING
        done = SlotState.DONE
        while (self.state is TaskState.RUNNING and self._barrier is None
               and len(in_rob) < capacity):
            if self._due_punctuations:
                self._issue_punctuation(self._due_punctuations.pop(0))
                continue
            if single is not None:
                if not single:
                    return
                raw = single.popleft()
            else:
                nxt = queues.next_record(self._clock.monotonic())
                if nxt is None:
                    return
                if isinstance(nxt, float):
                    self._arm_idle_timer(nxt)
                    return
                raw = nxt
            source = sources[raw.topic]
            if raw.timestamp > self.stream_time:
                self.stream_time = raw.timestamp
                if self._punctuations:
                    self._check_stream_time_punctuations()
            if not in_rob and not source.chain_is_async:
                if self._run_inline(raw, source) and single is not None:
                    self._drain_inline(single, source)
                continue
            # _hazard_of, with its default (key) case inlined: one call less per record
            slot = Slot(SlotKind.RECORD, raw, source,
                        (raw.key if raw.key is not None else _NULL_KEY) if by_key
                        else self._hazard_of(raw))
            slot.stream_time = self.stream_time
            issue(slot)
            self._unfinished += 1
            if len(in_rob) > metrics.max_rob_depth:
                metrics.max_rob_depth = len(in_rob)
            if admit(slot):
                if source.chain_is_async:
                    slot.state = executing
                    slot.attempts = 1
                    self._dispatch(slot)
                else:
                    self._start(slot)
                    if in_rob[0] is slot and slot.state is done:
                        self._retire()

    def _run_inline(self, raw: RawRecord, source: SourceExec) -> bool:
        """The fast path: nothing is in flight and the chain is synchronous, so the record
        executes and retires at once, with no slot in the buffer and no hazard to check.
        Its outputs go straight onto the released list (cut back if it fails). On failure
        a real slot takes over, exactly as if it had been issued normally, and this
        returns False."""
        slot = self._inline
        slot.stream_time = self.stream_time
        slot.raw = raw
        slot.source = source
        released = slot.outputs = self._released
        mark = len(released)
        try:
            slot.node = source.name
            record = slot.record = source.decode(raw)
            for child in source.children:
                child.run_sync(record, slot)
        except Exception as error:
            slot.record = None
            self._inline_failed(raw, source, mark, error)
            return False
        slot.record = None
        if slot.writes:
            # changelog records follow the record's outputs, as at retirement
            self._apply_writes(slot)
            slot.writes = ()
        self._rob.advance(self._tp_of[raw.topic], raw.offset)
        return True

    def _drain_inline(self, queue: deque[RawRecord], source: SourceExec) -> None:
        """:meth:`_run_inline` over a single queue (one topic, so one source) for as long
        as nothing changes what the issue loop would decide: the task keeps running, no
        punctuation is scheduled, no record fails. The per-record checks of the issue
        loop are hoisted out, and the committable offset moves once, at the end."""
        if self._punctuations or self._due_punctuations or self._barrier is not None:
            return
        slot = self._inline
        runners = [child.run_sync for child in source.children]
        only = runners[0] if len(runners) == 1 else None
        decode = source.decode
        name = source.name
        released = slot.outputs = self._released
        running = TaskState.RUNNING
        stream_time = slot.stream_time = self.stream_time
        last = -1
        raw: RawRecord | None = None
        try:
            while queue and self.state is running and not self._punctuations:
                raw = queue.popleft()
                if raw.timestamp > stream_time:
                    stream_time = self.stream_time = slot.stream_time = raw.timestamp
                slot.raw = raw
                mark = len(released)
                try:
                    slot.node = name
                    record = slot.record = decode(raw)
                    if only is not None:
                        only(record, slot)
                    else:
                        for run in runners:
                            run(record, slot)
                except Exception as error:
                    slot.record = None
                    self._advance_inline(raw.topic, last)
                    last = -1
                    self._inline_failed(raw, source, mark, error)
                    return
                if slot.writes:
                    self._apply_writes(slot)
                    slot.writes = ()
                last = raw.offset
        finally:
            slot.record = None
            if raw is not None:
                self._advance_inline(raw.topic, last)

    def _advance_inline(self, topic: str, last: int) -> None:
        if last >= 0:
            self._rob.advance(self._tp_of[topic], last)

    def _inline_failed(self, raw: RawRecord, source: SourceExec, mark: int,
                       error: Exception) -> None:
        slot = self._inline
        for overlay, key, _ in slot.writes:
            overlay.withdraw(slot, key)
        slot.writes = ()
        del self._released[mark:]
        slot.forward_buffer = None
        self._fail_over(raw, source, slot.node, error)

    def _fail_over(self, raw: RawRecord, source: SourceExec, node: str,
                   error: Exception) -> None:
        slot = Slot(SlotKind.RECORD, raw, source, self._hazard_of(raw))
        slot.stream_time = self._inline.stream_time
        self._rob.issue(slot)
        self._unfinished += 1
        admitted = self._station.admit(slot)
        assert admitted, "nothing was in flight, so nothing can block the record"
        slot.state = SlotState.EXECUTING
        slot.attempts = 1
        slot.node = node
        self._on_error(slot, error)

    def _hazard_of(self, raw: RawRecord) -> Hashable | None:
        """What a record must wait for, by ordering: its key's bytes, its partition, or
        nothing."""
        ordering = self._ordering
        if ordering is Ordering.KEY:
            return raw.key if raw.key is not None else _NULL_KEY
        if ordering is Ordering.PARTITION:
            return raw.partition
        return None

    def _apply_writes(self, slot: Slot) -> None:
        released = self._released
        for overlay, key, value in slot.writes:
            overlay.retire(slot, key, value)
            changelog = self._changelog_of.get(overlay)
            if changelog is not None:
                k, v = overlay.store.changelog_record(key, value)
                released.append(OutgoingRecord(changelog, k, v, None, (), self._partition))

    def _retire(self) -> None:
        released = self._released
        for slot in self._rob.pop_retirable():
            if slot.outputs:
                released.extend(slot.outputs)
            if slot.writes:
                self._apply_writes(slot)

    # -- execution ----------------------------------------------------------------------

    def _start(self, slot: Slot) -> None:
        slot.state = SlotState.EXECUTING
        slot.attempts += 1
        if slot.source is not None and not slot.source.chain_is_async:
            token = CURRENT_SLOT.set(slot)
            try:
                self._run_record_sync(slot)
            except Exception as error:
                self._on_error(slot, error)
                return
            finally:
                CURRENT_SLOT.reset(token)
            self._finish(slot)
            return
        self._dispatch(slot)

    def _dispatch(self, slot: Slot) -> None:
        """Hand an async slot to an idle executor, or start one (at most
        ``max_concurrency`` executors); with all of them busy the slot waits in the ready
        heap, where the oldest slot is served first."""
        idle = self._idle_executors
        while idle:
            waiter = idle.pop()
            if not waiter.done():
                waiter.set_result(slot)
                return
        if len(self._executors) < self._max_concurrency + self._gate_waiting:
            self._spawn_executor(slot)
        else:
            heapq.heappush(self._ready, (slot.seq, slot))

    def _spawn_executor(self, slot: Slot) -> None:
        executor = asyncio.get_running_loop().create_task(self._executor(slot))
        self._executors.add(executor)
        executor.add_done_callback(self._executors.discard)

    def _gate_wait(self, delta: int) -> None:
        """An executor starts (+1) or stops (-1) waiting in the issue-order gate. While it
        waits it runs nothing, so one more executor may run: else every executor could wait
        for an earlier slot that sits in the ready heap (a deadlock)."""
        self._gate_waiting += delta
        assert self._gate_waiting >= 0
        ready = self._ready
        if delta > 0 and ready:
            self._spawn_executor(heapq.heappop(ready)[1])

    async def wait_for_earlier(self, slot: Slot) -> None:
        """Return once every record issued before ``slot`` has finished executing; see
        :mod:`~aiostreams.engine.issue_order`. Cancellation: stops waiting."""
        await self._gate.wait_for_earlier(slot)

    async def _executor(self, slot: Slot) -> None:
        """Run slots until the task closes (cancellation ends it; per-slot errors do not).

        A record slot runs here directly, through its source's compiled async runner (see
        :mod:`~aiostreams.engine.async_chain`): no coroutine per record beyond the
        runners'. The executor's context is reused from slot to slot (``CURRENT_SLOT`` is
        set for each); see :mod:`aiostreams.topology.processor` on user context variables."""
        loop = asyncio.get_running_loop()
        ready = self._ready
        idle = self._idle_executors
        set_current = CURRENT_SLOT.set
        record_kind = SlotKind.RECORD
        while True:
            set_current(slot)
            try:
                if self._attempt_timeout is None and slot.kind is record_kind:
                    source = slot.source
                    slot.node = source.name
                    record = slot.record = source.decode(slot.raw)
                    await source.run_async(record, slot)
                else:
                    await self._execute_timed(slot)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._on_error(slot, error)
            else:
                self._finish(slot)
            if len(self._executors) > self._max_concurrency + self._gate_waiting:
                return  # an executor added while others waited in the gate
            if ready:
                slot = heapq.heappop(ready)[1]
                continue
            waiter: asyncio.Future[Slot] = loop.create_future()
            idle.append(waiter)
            slot = await waiter

    async def _execute_timed(self, slot: Slot) -> None:
        """A punctuation, or any slot under a per-attempt timeout."""
        timeout = self._attempt_timeout
        if timeout is None:
            await self._run_slot_async(slot)
        else:
            with self._timeouts.bound(timeout):  # 4x cheaper than asyncio.timeout here
                await self._run_slot_async(slot)

    def _deserialize(self, slot: Slot) -> Record[Any, Any]:
        raw = slot.raw
        assert raw is not None
        record: Record[Any, Any] = slot.source.decode(raw)
        slot.record = record
        return record

    def _run_record_sync(self, slot: Slot) -> None:
        slot.node = slot.source.name
        record = self._deserialize(slot)
        for child in slot.source.children:
            child.run_sync(record, slot)

    async def _run_slot_async(self, slot: Slot) -> None:
        if slot.kind is SlotKind.PUNCTUATION:
            assert slot.punctuate is not None
            await slot.punctuate()
            return
        slot.node = slot.source.name
        record = self._deserialize(slot)
        await slot.source.run_async(record, slot)

    def serialize_for(self, topic: str, key: Any, value: Any) -> tuple[bytes | None,
                                                                        bytes | None]:
        t = self._topics.get(topic)
        if t is not None:
            return t.key_serde.serialize(topic, key), t.value_serde.serialize(topic, value)
        if (key is None or isinstance(key, bytes)) and (value is None or isinstance(value, bytes)):
            return key, value
        raise SerializationError(
            f"send() to {topic!r}: the topic is not declared, so key and value must be bytes; "
            "declare it with app.topic(name, key=..., value=...)",
            topic=topic,
        )

    def _finish(self, slot: Slot) -> None:
        slot.state = SlotState.DONE
        slot.record = None  # only its outputs and writes wait for retirement
        self._unfinished -= 1
        self._gate.finished()
        if slot is self._barrier:
            self._barrier = None
        successor = self._station.release(slot)
        if successor is not None:
            self._start(successor)
        barrier = self._barrier
        if barrier is not None and barrier.state is SlotState.WAITING and self._unfinished == 1:
            self._start(barrier)
        if not self._pump_scheduled:  # schedule_pump(), without a call per record
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    # -- failure ------------------------------------------------------------------------

    def _on_error(self, slot: Slot, error: Exception) -> None:
        for overlay, key, _ in slot.writes:
            overlay.withdraw(slot, key)
        slot.reset_buffers()
        if isinstance(error, Deferred) and slot.kind is SlotKind.RECORD:
            slot.attempts -= 1  # a deferral is not an attempt
            self.metrics.deferred += 1
            slot.state = SlotState.BACKOFF
            self._backoff_timers[slot] = self._clock.call_later(
                error.delay, lambda: self._retry_now(slot))
            return
        node = self._nodes.get(slot.node)
        retry = (node.retry if node is not None and node.retry is not None
                 else self.settings.retry)
        if isinstance(error, TimeoutError) and self._attempt_timeout is not None:
            error = TimeoutError(
                f"processing took longer than its {self._attempt_timeout}s timeout "
                "(processing_timeout / Retry.timeout)"
            )
        if slot.kind is SlotKind.RECORD and retry.should_retry(error, slot.attempts):
            self.metrics.retries += 1
            slot.state = SlotState.BACKOFF
            delay = retry.delay(slot.attempts)
            log.debug("task %s: %r failed (attempt %d), retrying in %.3fs: %s",
                      self.task_id, slot, slot.attempts, delay, error)
            self._backoff_timers[slot] = self._clock.call_later(
                delay, lambda: self._retry_now(slot))
            return
        self.metrics.by_node_errors[slot.node] = self.metrics.by_node_errors.get(slot.node,
                                                                                 0) + 1
        handler = self.settings.on_error
        if handler is OnError.DEAD_LETTER and self.settings.dead_letter_topic and slot.raw:
            self.metrics.dead_lettered += 1
            slot.outputs = [dead_letter_record(
                slot.raw, error, topic=self.settings.dead_letter_topic,
                attempts=slot.attempts, processor=slot.node,
                now=self._clock.wall_time(), max_bytes=self._max_record_bytes)]
            log.warning("task %s: %r dead-lettered to %s after %d attempt(s): %s: %s",
                        self.task_id, slot, self.settings.dead_letter_topic, slot.attempts,
                        type(error).__name__, error)
            self._finish(slot)
        elif handler is OnError.SKIP:
            self.metrics.skipped += 1
            log.warning("task %s: %r skipped after %d attempt(s): %s: %s", self.task_id,
                        slot, slot.attempts, type(error).__name__, error)
            self._finish(slot)
        else:
            self._fail(slot, error)

    def _retry_now(self, slot: Slot) -> None:
        self._backoff_timers.pop(slot, None)
        if slot.state is SlotState.BACKOFF and self.state in (TaskState.RUNNING,
                                                               TaskState.SUSPENDED):
            self._start(slot)

    def _fail(self, slot: Slot, error: Exception) -> None:
        slot.state = SlotState.FAILED
        raw = slot.raw
        where = (f"{raw.topic}[{raw.partition}]@{raw.offset}" if raw is not None
                 else "a punctuation")
        failure = TaskFailedError(
            f"task {self.task_id}: processor {slot.node!r} failed on {where} after "
            f"{slot.attempts} attempt(s): {type(error).__name__}: {error}. Nothing at or "
            "past this record was committed; fix the cause (or set on_error='skip' / "
            "'dead_letter') and restart."
        )
        failure.__cause__ = error
        # marked, so a caller that reports the failure itself (the CLI's last line) can
        # leave this one out and the user reads it once
        log.error("%s", failure, extra={TASK_FAILURE_LOG_MARK: True})
        if self.state in (TaskState.RUNNING, TaskState.SUSPENDED):
            self._transition(TaskState.FAILED)
        if self._drained is not None:
            self._drained.set()
        self._on_failed(self, failure)

    # -- punctuation --------------------------------------------------------------------

    def schedule(self, node: NodeExec, interval: float,
                 callback: Callable[[float], Awaitable[None] | None],
                 kind: PunctuationType) -> TimerHandle:
        p = _Punctuation(node, interval, kind, callback)
        self._punctuations.append(p)
        if kind is PunctuationType.WALL_CLOCK:
            self._arm_wall_clock(p)
        return p

    def _arm_wall_clock(self, p: _Punctuation) -> None:
        def fire() -> None:
            if p.cancelled or self.state is not TaskState.RUNNING:
                return
            self._due_punctuations.append(p)
            self._arm_wall_clock(p)
            self.schedule_pump()
        p.timer = self._clock.call_later(p.interval, fire)

    def _check_stream_time_punctuations(self) -> None:
        now = self.stream_time
        for p in self._punctuations:
            if p.kind is not PunctuationType.STREAM_TIME or p.cancelled:
                continue
            if p.next_due is None:
                p.next_due = now + p.interval
            elif now >= p.next_due:
                while p.next_due <= now:
                    p.next_due += p.interval
                self._due_punctuations.append(p)

    def _issue_punctuation(self, p: _Punctuation) -> None:
        at = (self.stream_time if p.kind is PunctuationType.STREAM_TIME
              else self._clock.wall_time())

        async def run() -> None:
            slot = CURRENT_SLOT.get()
            buffer: list[tuple[str | None, Record[Any, Any]]] = []
            slot.forward_buffer = buffer
            slot.node = p.node.name
            result = p.callback(at)
            if result is not None:
                await result
            slot.forward_buffer = None
            steps = p.node.steps
            await hand_over(buffer, slot, steps, list(steps.values()))

        slot = Slot(SlotKind.PUNCTUATION, None, None, None, run)
        slot.stream_time = self.stream_time
        self._rob.issue(slot)
        self._unfinished += 1
        self.metrics.punctuations += 1
        self._barrier = slot
        if self._unfinished == 1:
            self._start(slot)

    # -- backpressure and idling --------------------------------------------------------

    def _arm_idle_timer(self, deadline: float) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()

        def wake() -> None:
            self._idle_timer = None
            self.schedule_pump()

        self._idle_timer = self._clock.call_later(deadline - self._clock.monotonic(), wake)

    def _update_pause(self) -> None:
        limit = self.settings.max_buffered_per_partition
        full = self._rob.full or self.state is not TaskState.RUNNING
        for tp in self._queues.partitions:
            n = self._queues.buffered(tp)
            want = n >= limit or (full and n > 0)
            if want != (tp in self._paused):
                if want:
                    self._paused.add(tp)
                else:
                    self._paused.discard(tp)
                self._on_pause(tp, want)

    def is_paused(self, tp: TopicPartition) -> bool:
        return tp in self._paused

    def request_commit(self) -> None:
        self._request_commit()

    # -- shutdown -----------------------------------------------------------------------

    async def drain(self, timeout: float) -> bool:
        """Stop issuing; wait up to ``timeout`` seconds for in-flight records to finish and
        retire. Returns True when everything retired. Cancellation: stops waiting, leaves
        the task SUSPENDED (``close`` then cancels what still runs)."""
        if self.state is TaskState.RUNNING:
            self._transition(TaskState.SUSPENDED)
        if self.state is not TaskState.SUSPENDED:
            return not self._rob
        self._drained = asyncio.Event()
        self._pump()
        if self._rob:
            try:
                async with asyncio.timeout(timeout):
                    while self._rob and self.state is TaskState.SUSPENDED:
                        self._drained.clear()
                        await self._drained.wait()
            except TimeoutError:
                log.warning("task %s: %d record(s) still in flight after the %.1fs drain "
                            "timeout; they will be processed again by the next owner",
                            self.task_id, len(self._rob), timeout)
        return not self._rob

    async def close(self) -> None:
        """Cancel what still runs, close processors (children first) and stores."""
        if self.state is TaskState.RUNNING:
            self._transition(TaskState.SUSPENDED)
        for p in self._punctuations:
            p.cancel()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        for timer in self._backoff_timers.values():
            timer.cancel()
        self._backoff_timers.clear()
        running = list(self._executors)
        for t in running:
            t.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        errors: list[BaseException] = []
        for ne in reversed(list(self._nodes.values())):
            if ne.processor is not None:
                try:
                    await ne.processor.close()
                except Exception as e:
                    log.exception("task %s: closing processor %r failed", self.task_id,
                                  ne.name)
                    errors.append(e)
        for store in self._stores.values():
            await store.close()
        if self.state is not TaskState.CLOSED:
            self._transition(TaskState.CLOSED)

    @property
    def stores(self) -> dict[str, StateStore]:
        return dict(self._stores)

    async def flush_stores(self) -> None:
        for store in self._stores.values():
            await store.flush()

    def __repr__(self) -> str:
        return f"<StreamTask {self.task_id} {self.state.value} in_flight={len(self._rob)}>"


_NULL_KEY = object()


def _reaches_async(node: NodeExec) -> bool:
    if node.is_async:
        return True
    return any(_reaches_async(c) for c in node.children)


def task_id_for(sub: SubTopology, partition: int) -> str:
    return f"{sub.id}_{partition}"


__all__ = ["NodeExec", "StreamTask", "TaskSettings", "TaskState"]
