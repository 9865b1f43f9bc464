"""A stream task: one sub-topology over one input partition (or a co-partitioned group).

The task is the Tomasulo machine of aiostreams, and this module is its hot loop:

1. **Choose** the next record from the partition queues (smallest head timestamp, with
   task idling; :mod:`~aiostreams.engine.partition_queue`).
2. **Issue** it into the reorder buffer; a full buffer stops issuing (and pauses fetching).
3. **Wait** in the reservation station for earlier same-key (or same-partition) records.
4. **Execute** the source's compiled decode-and-run (:mod:`~aiostreams.engine.graph`):
   inline when the chain is synchronous and nothing is in flight (no slot at all), at once
   when synchronous, else on the executor pool (:mod:`~aiostreams.engine.executor_pool`).
   Forwards to sinks, ``send``s and store writes are buffered in the slot.
5. **Retire** the head once it has finished: release its outputs, apply its store writes
   (:mod:`~aiostreams.engine.task_stores`), advance the committable offset.

Collaborators, each testable alone: the task graph, the executor pool, the punctuation
queue (:mod:`~aiostreams.engine.punctuation`; punctuations are issued as barriers: they
start once every earlier slot has finished, and no later slot is issued until they
finish), the stores and overlays, and recovery (:mod:`~aiostreams.engine.recovery`), which
carries out the pure failure policy :func:`~aiostreams.engine.failure.decide`.

The worker drives it: ``enqueue`` each fetched batch then ``pump``; ``committable()`` when
committing; ``drain``/``close`` on revocation and shutdown.

Everything here runs on the event loop thread; no locks. The only suspension points are
inside processors' ``await``s, so the bookkeeping is atomic with respect to them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from aiostreams.engine.attempt import AttemptRunner, attempt_timeout
from aiostreams.engine.byte_budget import outputs_size, raw_size
from aiostreams.engine.clock import Clock, TimerHandle
from aiostreams.engine.executor_pool import ExecutorPool
from aiostreams.engine.external_sink import ExternalRecord
from aiostreams.engine.failure import task_failed_error
from aiostreams.engine.graph import SourceExec, TaskGraph
from aiostreams.engine.head_of_line import HeadOfLine
from aiostreams.engine.inline_path import InlinePath
from aiostreams.engine.intake import Intake
from aiostreams.engine.issue_order import IssueOrderGate
from aiostreams.engine.partition_queue import HasUnfetched
from aiostreams.engine.punctuation import (
    Punctuation,
    PunctuationCallback,
    PunctuationQueue,
    punctuation_body,
)
from aiostreams.engine.recovery import Recovery
from aiostreams.engine.reorder_buffer import CURRENT_SLOT, ReorderBuffer, Slot, SlotKind, SlotState
from aiostreams.engine.reservation_station import ReservationStation
from aiostreams.engine.task_state import TaskMetrics, TaskSettings, TaskState, check_transition
from aiostreams.engine.task_stores import TaskStores
from aiostreams.engine.topic_serdes import TopicSerdes
from aiostreams.errors import TaskFailedError
from aiostreams.policies import Ordering, Retry
from aiostreams.state.base import StateStore
from aiostreams.topic import Topic
from aiostreams.topology.processor import PunctuationType
from aiostreams.topology.topology import SubTopology
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

log = logging.getLogger("aiostreams.task")

TASK_FAILURE_LOG_MARK = "aiostreams_task_failure"
"""Attribute set on the log record of a task failure (see ``_fail``)."""

_NULL_KEY = object()


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
        self.state = TaskState.CREATED
        self.metrics = TaskMetrics()
        self.stream_time = float("-inf")
        self._clock = clock
        self._emit = emit
        self._on_failed = on_failed
        self._request_commit = request_commit
        self.serialize_for = TopicSerdes(topics).serialize_for
        self.intake = Intake(partitions, clock, max_task_idle=settings.max_task_idle,
                             max_buffered_per_partition=settings.max_buffered_per_partition,
                             max_task_buffer_bytes=settings.max_task_buffer_bytes,
                             on_pause=on_pause, has_unfetched=has_unfetched)
        self._queues = self.intake.queues
        self._budget = self.intake.budget
        self._rob = ReorderBuffer(settings.max_in_flight, partitions)
        self._in_rob = self._rob.slots_view
        self._monotonic = clock.monotonic
        self.head_of_line = HeadOfLine()
        self._station = ReservationStation()
        self._ordering = settings.ordering
        self._tp_of = {tp.topic: tp for tp in partitions}  # one partition per topic in a task
        self._task_stores = TaskStores(sub.stores, partition=partitions[0].partition,
                                       changelog_topics=changelog_topics or {})
        self._state_dir = state_dir
        self._graph = TaskGraph(sub, self, store_views=self._task_stores.views,
                                node_retry=node_retry or {},
                                max_record_bytes=settings.max_record_bytes, tp_of=self._tp_of)
        self._sources = self._graph.sources
        attempt = AttemptRunner(attempt_timeout(settings.processing_timeout,
                                                settings.retry.timeout))
        self._recovery = Recovery(
            task_id, settings, self.metrics, clock, attempt_timeout=attempt.timeout,
            node_retry=self._graph.retry_of, finish=self._finish, restart=self._restart,
            fail=self._fail)
        self._pool = ExecutorPool(
            min(settings.max_concurrency or settings.max_in_flight, settings.max_in_flight),
            execute=attempt, on_error=self._recovery.on_error, on_done=self._finish)
        self._gate = IssueOrderGate(self._rob.slots_view, self._pool.parked)
        self._punctuations = PunctuationQueue(
            clock, lambda: self.state is TaskState.RUNNING, self.schedule_pump)
        self._unfinished = 0  # issued slots not DONE (nor FAILED)
        self._barrier: Slot | None = None  # the punctuation in flight, if any
        self._pump_scheduled = False
        self._drained: asyncio.Event | None = None
        self._released: list[OutgoingRecord | ExternalRecord] = []
        self._inline = InlinePath(self, self._rob, self._task_stores, self._punctuations,
                                  self._tp_of)

    # -- lifecycle ----------------------------------------------------------------------

    async def open_stores(self) -> None:
        """Open the stores (``CREATED → RESTORING``); the worker restores them next."""
        self._transition(TaskState.RESTORING)
        await self._task_stores.open(self.task_id, self._state_dir)

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
        self._transition(TaskState.RUNNING)

    def _transition(self, new: TaskState) -> None:
        self.state = check_transition(self.task_id, self.state, new)

    # -- intake -------------------------------------------------------------------------

    @property
    def partitions(self) -> list[TopicPartition]:
        return self.intake.partitions

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
        return self.intake.buffered(tp)

    def enqueue(self, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
        """Buffer fetched records without issuing; call :meth:`pump` after a whole fetch
        batch is in, so the choice by timestamp sees every partition's records."""
        self.intake.enqueue(tp, records)
        self.metrics.records_in += len(records)

    def pump(self) -> None:
        """Retire what finished, then issue as long as possible."""
        self._pump()

    def seed_position(self, tp: TopicPartition, offset: int) -> None:
        """Where fetching ``tp`` starts (see :meth:`Intake.seed_position`)."""
        self.intake.seed_position(tp, offset)

    def committable(self) -> dict[TopicPartition, int]:
        return dict(self._rob.committable)

    def check_commit_point(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Assert that committing ``offsets`` passes no unretired record."""
        self._rob.check_commit_point(offsets)

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
        token = CURRENT_SLOT.set(self._inline.slot)
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
        budget = self._budget
        punctuations = self._punctuations
        due = punctuations.due
        by_key = self._ordering is Ordering.KEY
        executing = SlotState.EXECUTING
        done = SlotState.DONE
        run_inline = self._inline.run
        released = self._released
        while (self.state is TaskState.RUNNING and self._barrier is None
               and len(in_rob) < capacity):
            if due:
                self._issue_punctuation(due.pop(0))
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
                    self.intake.arm_idle_timer(nxt, self.schedule_pump)
                    return
                raw = nxt
            source = sources[raw.topic]
            if raw.timestamp > self.stream_time:
                self.stream_time = raw.timestamp
                if punctuations.scheduled:
                    punctuations.advance_stream_time(self.stream_time)
            if not in_rob and not source.chain_is_async:
                if run_inline(raw, source, released) and single is not None:
                    self._inline.drain(single, source, released)
                continue
            # _hazard_of, with its default (key) case inlined: one call less per record
            slot = Slot(SlotKind.RECORD, raw, source,
                        (raw.key if raw.key is not None else _NULL_KEY) if by_key
                        else self._hazard_of(raw))
            slot.stream_time = self.stream_time
            slot.held = size = raw_size(raw)  # until it retires (the byte budget)
            budget.take(size)
            issue(slot)
            self._unfinished += 1
            if len(in_rob) > metrics.max_rob_depth:
                metrics.max_rob_depth = len(in_rob)
            if admit(slot):
                if source.chain_is_async:
                    slot.state = executing
                    slot.attempts = 1
                    self._pool.dispatch(slot)
                else:
                    self._start(slot)
                    if in_rob[0] is slot and slot.state is done:
                        self._retire()

    def inline_failed(self, raw: RawRecord, source: SourceExec, mark: int,
                      error: Exception) -> None:
        """A record failed on the inline path: cut back what it released and wrote, and
        let a real slot take over, as if it had been issued normally."""
        inline = self._inline.slot
        TaskStores.withdraw(inline)
        del self._released[mark:]
        inline.forward_buffer = None
        slot = Slot(SlotKind.RECORD, raw, source, self._hazard_of(raw))
        slot.stream_time = inline.stream_time
        slot.held = raw_size(raw)
        self._budget.take(slot.held)
        self._rob.issue(slot)
        self._unfinished += 1
        admitted = self._station.admit(slot)
        assert admitted, "nothing was in flight, so nothing can block the record"
        slot.state = SlotState.EXECUTING
        slot.attempts = 1
        slot.node = inline.node
        self._recovery.on_error(slot, error)

    def _hazard_of(self, raw: RawRecord) -> Hashable | None:
        """What a record must wait for, by ordering: its key's bytes, its partition, or
        nothing."""
        ordering = self._ordering
        if ordering is Ordering.KEY:
            return raw.key if raw.key is not None else _NULL_KEY
        if ordering is Ordering.PARTITION:
            return raw.partition
        return None

    def _retire(self) -> None:
        released = self._released
        apply = self._task_stores.apply
        freed = 0
        retired = self._rob.pop_retirable()
        for slot in retired:
            if slot.outputs:
                released.extend(slot.outputs)
            if slot.writes:
                apply(slot, released)
            freed += slot.held
        self._budget.give(freed)
        self.head_of_line.retired(retired)

    # -- execution ----------------------------------------------------------------------

    def _start(self, slot: Slot) -> None:
        slot.state = SlotState.EXECUTING
        slot.attempts += 1
        source = slot.source
        if source is not None and not source.chain_is_async:
            token = CURRENT_SLOT.set(slot)
            try:
                source.run(slot.raw, slot)
            except Exception as error:
                self._recovery.on_error(slot, error)
                return
            finally:
                CURRENT_SLOT.reset(token)
            self._finish(slot)
            return
        self._pool.dispatch(slot)

    async def wait_for_earlier(self, slot: Slot) -> None:
        """Return once every record issued before ``slot`` has finished executing; see
        :mod:`~aiostreams.engine.issue_order`. Cancellation: stops waiting."""
        await self._gate.wait_for_earlier(slot)

    def _finish(self, slot: Slot) -> None:
        slot.state = SlotState.DONE
        slot.record = None  # only its outputs and writes wait for retirement
        in_rob = self._in_rob
        # its finish time matters to head-of-line waits unless it is the oldest in flight
        # and nothing after it has finished (see engine.head_of_line)
        if in_rob[0] is not slot or len(in_rob) != self._unfinished:
            slot.finished_at = self._monotonic()
        if slot.outputs:  # held, with its input, until it retires
            size = outputs_size(slot.outputs)
            slot.held += size
            self._budget.take(size)
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

    # -- failure (see recovery) ---------------------------------------------------------

    def _restart(self, slot: Slot) -> None:
        """A slot's backoff is over: run it again, unless the task stopped running."""
        if self.state in (TaskState.RUNNING, TaskState.SUSPENDED):
            self._start(slot)

    def _fail(self, slot: Slot, error: Exception) -> None:
        slot.state = SlotState.FAILED
        failure = task_failed_error(self.task_id, slot.node, slot.raw, slot.attempts, error)
        # marked, so a caller that reports the failure itself (the CLI's last line) can
        # leave this one out and the user reads it once
        log.error("%s", failure, extra={TASK_FAILURE_LOG_MARK: True})
        if self.state in (TaskState.RUNNING, TaskState.SUSPENDED):
            self._transition(TaskState.FAILED)
        if self._drained is not None:
            self._drained.set()
        self._on_failed(self, failure)

    # -- punctuation --------------------------------------------------------------------

    def schedule(self, node: str, interval: float, callback: PunctuationCallback,
                 kind: PunctuationType) -> TimerHandle:
        """Schedule ``callback`` for node ``node`` (see
        :mod:`~aiostreams.engine.punctuation`); the handle cancels it."""
        steps = self._graph.nodes[node].steps
        return self._punctuations.schedule(Punctuation(node, steps, interval, kind, callback))

    def _issue_punctuation(self, p: Punctuation) -> None:
        at = (self.stream_time if p.kind is PunctuationType.STREAM_TIME
              else self._clock.wall_time())
        slot = Slot(SlotKind.PUNCTUATION, None, None, None, punctuation_body(p, at))
        slot.stream_time = self.stream_time
        self._rob.issue(slot)
        self._unfinished += 1
        self.metrics.punctuations += 1
        self._barrier = slot
        if self._unfinished == 1:
            self._start(slot)

    # -- backpressure and idling --------------------------------------------------------

    def _update_pause(self) -> None:
        self.intake.update_pause(self._rob.full or self.state is not TaskState.RUNNING)

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
        self._punctuations.cancel_all()
        self.intake.cancel_idle_timer()
        self._recovery.cancel_all()
        await self._pool.cancel_all()
        await self._graph.close_processors(self.task_id)
        await self._task_stores.close()
        if self.state is not TaskState.CLOSED:
            self._transition(TaskState.CLOSED)

    @property
    def stores(self) -> dict[str, StateStore]:
        return dict(self._task_stores.stores)

    async def flush_stores(self) -> None:
        await self._task_stores.flush()

    def __repr__(self) -> str:
        return f"<StreamTask {self.task_id} {self.state.value} in_flight={len(self._rob)}>"


def task_id_for(sub: SubTopology, partition: int) -> str:
    return f"{sub.id}_{partition}"


__all__ = ["TASK_FAILURE_LOG_MARK", "StreamTask", "TaskMetrics", "TaskSettings",
           "TaskState", "task_id_for"]
