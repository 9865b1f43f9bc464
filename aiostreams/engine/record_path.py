"""A task's record path: choose, issue, execute, finish, retire - the hot loop, in one place.

This is the Tomasulo machine of a :class:`~aiostreams.engine.task.StreamTask` (which owns
its lifecycle, its stores and what the worker, the app and the processors call):

1. **Choose** the next record from the partition queues (:mod:`~aiostreams.engine.intake`:
   smallest head timestamp, task idling, back-pressure on fetching).
2. **Issue** it into the reorder buffer; a full buffer stops issuing, and so does an
   exhausted byte budget (:mod:`~aiostreams.engine.byte_budget`). When nothing is in
   flight and the chain is synchronous, the record runs and retires at once instead, with no
   slot (:mod:`~aiostreams.engine.inline_path`).
3. **Wait** in the reservation station for earlier same-key (or same-partition) slots.
4. **Execute** the source's compiled decode-and-run (:mod:`~aiostreams.engine.graph`): at
   once when synchronous, else on the executor pool (one :mod:`~aiostreams.engine.attempt`
   at a time). Forwards, ``send``s and store writes are buffered in the slot; a failure goes
   to :mod:`~aiostreams.engine.recovery`, which carries out :func:`failure.decide
   <aiostreams.engine.failure.decide>`.
5. **Finish**: release the slot's hazard to the next same-key slot, schedule the pump.
6. **Retire** the head once it has finished: release its outputs, apply its store writes,
   advance the committable offset (:meth:`pump`, on the next turn of the loop).

Punctuations (:mod:`~aiostreams.engine.punctuation`) are issued as barriers: they start
once every earlier slot has finished, and no later slot is issued until they finish. So are
the record caches' flushes (:mod:`~aiostreams.engine.cache_flush`); a commit holds issuing
(:meth:`RecordPath.flush_caches`) from its flush barrier until its snapshot is taken.

Invariants: ``unfinished`` counts the issued slots not DONE (nor FAILED); at most one
barrier is in flight; only :meth:`pump` emits, in retirement order. Everything runs on the
event loop thread; the only suspension points are inside processors' ``await``s, so the
bookkeeping is atomic with respect to them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING

from aiostreams.engine.attempt import AttemptRunner, attempt_timeout
from aiostreams.engine.byte_budget import RECORD_OVERHEAD_BYTES, input_cost, outputs_cost
from aiostreams.engine.cache_flush import CACHE_FLUSH, CacheFlusher, cache_flush_body
from aiostreams.engine.executor_pool import ExecutorPool
from aiostreams.engine.failure import task_failed_error
from aiostreams.engine.graph import SourceExec, TaskGraph
from aiostreams.engine.head_of_line import HeadOfLine
from aiostreams.engine.inline_path import InlinePath
from aiostreams.engine.intake import Intake
from aiostreams.engine.issue_order import IssueOrderGate
from aiostreams.engine.punctuation import Punctuation, PunctuationQueue, punctuation_body
from aiostreams.engine.recovery import Recovery
from aiostreams.engine.reorder_buffer import ReorderBuffer
from aiostreams.engine.reservation_station import ReservationStation
from aiostreams.engine.task_state import TaskMetrics, TaskSettings, TaskState, check_transition
from aiostreams.engine.task_stores import TaskStores
from aiostreams.errors import TaskFailedError
from aiostreams.policies import Ordering
from aiostreams.runtime.clock import Clock
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.origin import OriginMarks
from aiostreams.runtime.slot import CURRENT_SLOT, Slot, SlotKind, SlotState, record_slot
from aiostreams.topology.processor import PunctuationType
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

if TYPE_CHECKING:  # imported only when the app traces: it imports opentelemetry
    from aiostreams.engine.tracing import TaskTracer

_NULL_KEY = object()
# An enum member read through its class costs about 120 ns on Python 3.11 (EnumType has a
# __getattr__, so every class attribute lookup takes the slow path); module constants for
# the ones read once per record
_RUNNING = TaskState.RUNNING
_EXECUTING = SlotState.EXECUTING
_DONE = SlotState.DONE
_WAITING = SlotState.WAITING
_BY_KEY = Ordering.KEY


class RecordPath:
    def __init__(self, task_id: str, settings: TaskSettings, metrics: TaskMetrics, *,
                 clock: Clock, intake: Intake, rob: ReorderBuffer, graph: TaskGraph,
                 stores: TaskStores, tp_of: Mapping[str, TopicPartition],
                 emit: Callable[[list[OutgoingRecord | ExternalRecord]], None],
                 on_failed: Callable[[TaskFailedError], None],
                 marks: OriginMarks | None = None) -> None:
        self.task_id = task_id
        self.state = TaskState.CREATED
        self.stream_time = float("-inf")
        self.metrics = metrics
        self.head_of_line = HeadOfLine()
        self.tracer: TaskTracer | None = (settings.tracing.for_task(task_id, clock)
                                          if settings.tracing is not None else None)
        """Spans per record (None: the app does not trace; nothing is allocated for it)."""
        self.pump_pending = False
        self.drained: asyncio.Event | None = None  # set when the buffer empties or it fails
        self._clock = clock
        self._monotonic = clock.monotonic
        self._emit = emit
        self._on_failed = on_failed
        self._intake = intake
        self._queues = intake.queues
        self._budget = intake.budget
        self._rob = rob
        self._in_rob = rob.slots_view
        self._station = ReservationStation()
        self._ordering = settings.ordering
        self._sources = graph.sources
        self._apply = stores.apply
        attempt = AttemptRunner(attempt_timeout(settings.processing_timeout,
                                                settings.retry.timeout))
        self.recovery = Recovery(
            task_id, settings, metrics, clock, attempt_timeout=attempt.timeout,
            node_retry=graph.retry_of, finish=self._finish, restart=self._restart,
            fail=self._fail)
        self.pool = ExecutorPool(
            min(settings.max_concurrency or settings.max_in_flight, settings.max_in_flight),
            execute=attempt, on_error=self.recovery.on_error, on_done=self._finish,
            block=attempt.executor_block)
        self.gate = IssueOrderGate(rob.slots_view, self.pool.parked)
        self._gate_waiters = self.gate.waiters
        self.punctuations = PunctuationQueue(
            clock, lambda: self.state is TaskState.RUNNING, self.schedule_pump)
        self._unfinished = 0  # issued slots not DONE (nor FAILED)
        self._barrier: Slot | None = None  # the punctuation in flight, if any
        self.cache_flushers: list[CacheFlusher] = []  # parents first (init order)
        self._flush_queued = False  # a CACHE_FLUSH waits in punctuations.due
        self._held = False  # a commit holds issuing until its snapshot (flush_caches)
        self._released: list[OutgoingRecord | ExternalRecord] = []
        self._marks = marks  # origin headers on outputs (runtime.origin)
        self._inline = InlinePath(self, rob, stores, self.punctuations, tp_of, marks)

    def transition(self, new: TaskState) -> None:
        self.state = check_transition(self.task_id, self.state, new)

    # -- the pump: retire, then issue as long as possible ------------------------------

    def schedule_pump(self) -> None:
        if not self.pump_pending:
            self.pump_pending = True
            asyncio.get_running_loop().call_soon(self.pump)

    def pump(self) -> None:
        """Retire what finished, then issue as long as possible, then emit what retired."""
        self.pump_pending = False
        self._retire()
        if self.state is _RUNNING:
            self._issue_loop()
            self._retire()
        if self._released:
            released, self._released = self._released, []
            self.metrics.records_out += len(released)
            self._emit(released)
        self._intake.update_pause(self._rob.full or self.state is not _RUNNING)
        if self.drained is not None and not self._rob:
            self.drained.set()

    def _issue_loop(self) -> None:
        # The inline path runs with CURRENT_SLOT bound to its reused slot for the whole
        # loop; other slots bind their own while they execute.
        token = CURRENT_SLOT.set(self._inline.slot)
        try:
            self._issue_records()
        finally:
            CURRENT_SLOT.reset(token)

    def _issue_records(self) -> None:
        rob = self._rob
        in_rob = self._in_rob  # the buffer's deque, read here without method calls
        capacity = rob.capacity
        queues = self._queues
        single = queues.single_queue
        sources = self._sources
        issue = rob.issue
        admit = self._station.admit
        metrics = self.metrics
        budget = self._budget
        budget_limit = budget.limit
        if budget.held >= budget_limit or self._held:  # (checked once a pump)
            return
        punctuations = self.punctuations
        due = punctuations.due
        by_key = self._ordering is _BY_KEY
        executing = _EXECUTING
        done = _DONE
        run_inline = self._inline.run
        released = self._released
        tracer = self.tracer
        inline_ok = tracer is None  # a traced record takes a slot: its spans need one
        while (self.state is _RUNNING and self._barrier is None
               and len(in_rob) < capacity):
            if due:
                self._issue_punctuation(due.pop(0))
                continue
            if single is not None:
                if not single:
                    return
                raw = single.popleft()
            else:
                nxt = queues.next_record(self._monotonic())
                if nxt is None:
                    return
                if isinstance(nxt, float):
                    self._intake.arm_idle_timer(nxt, self.schedule_pump)
                    return
                raw = nxt
            source = sources[raw.topic]
            if raw.timestamp > self.stream_time:
                self.stream_time = raw.timestamp
                if punctuations.scheduled:
                    punctuations.advance_stream_time(self.stream_time)
            if not in_rob and inline_ok and not source.chain_is_async:
                if run_inline(raw, source, released) and single is not None:
                    self._inline.drain(single, source, released)
                continue
            # _hazard_of, with its default (key) case inlined: one call less per record
            slot = record_slot(raw, source,
                               (raw.key if raw.key is not None else _NULL_KEY) if by_key
                               else self._hazard_of(raw))
            slot.stream_time = self.stream_time
            # until it retires (the byte budget): input_cost(raw), without a call per record
            # unless it has headers
            size = RECORD_OVERHEAD_BYTES + len(raw.key or b"") + len(raw.value or b"") \
                if not raw.headers else input_cost(raw)
            slot.held = size
            budget.held += size  # budget.take(size), without a call per record
            issue(slot)
            if tracer is not None:
                tracer.issued(slot)
            self._unfinished += 1
            if len(in_rob) > metrics.max_rob_depth:
                metrics.max_rob_depth = len(in_rob)
            if admit(slot):
                if source.chain_is_async:
                    slot.state = executing
                    slot.attempts = 1
                    self.pool.dispatch(slot)
                else:
                    self._start(slot)
                    if in_rob[0] is slot and slot.state is done:
                        self._retire()
            if budget.held >= budget_limit:  # at most one record past the limit
                return

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
        slot.held = input_cost(raw)
        self._budget.take(slot.held)
        self._rob.issue(slot)
        self._unfinished += 1
        admitted = self._station.admit(slot)
        assert admitted, "nothing was in flight, so nothing can block the record"
        slot.state = SlotState.EXECUTING
        slot.attempts = 1
        slot.node = inline.node
        self.recovery.on_error(slot, error)

    def _hazard_of(self, raw: RawRecord) -> Hashable | None:
        """What a record waits for, by ordering: its key's bytes, its partition, or nothing."""
        ordering = self._ordering
        if ordering is Ordering.KEY:
            return raw.key if raw.key is not None else _NULL_KEY
        if ordering is Ordering.PARTITION:
            return raw.partition
        return None

    def _issue_punctuation(self, p: Punctuation | object) -> None:
        if p is CACHE_FLUSH or not isinstance(p, Punctuation):
            self._flush_queued = False
            body = cache_flush_body(self.cache_flushers, self._retire)
        else:
            at = (self.stream_time if p.kind is PunctuationType.STREAM_TIME
                  else self._clock.wall_time())
            body = punctuation_body(p, at)
        slot = Slot(SlotKind.PUNCTUATION, None, None, None, body)
        slot.stream_time = self.stream_time
        self._rob.issue(slot)
        self._unfinished += 1
        self.metrics.punctuations += 1
        self._barrier = slot
        if self._unfinished == 1:
            self._start(slot)

    # -- record caches (see engine.cache_flush) ----------------------------------------

    def request_cache_flush(self) -> None:
        """A cache passed its budget: queue a flush barrier (after the current record)."""
        if not self._flush_queued:
            self._flush_queued = True
            self.punctuations.due.append(CACHE_FLUSH)  # type: ignore[arg-type]
            self.schedule_pump()

    def caches_dirty(self) -> bool:
        return any(len(f.cache) for f in self.cache_flushers)

    async def flush_caches(self) -> None:
        """Before a commit's snapshot: hold issuing, let everything in flight retire, then
        flush the caches through barriers until none is dirty (a flush may feed a cache
        downstream in the task). Returns with nothing in flight and issuing held - the
        caller takes its snapshot, then calls :meth:`release_hold`. Returns at once (and
        holds nothing) for a task with no cache, or one that is not running or draining.
        Cancellation: stops waiting; the caller must still :meth:`release_hold`."""
        if not self.cache_flushers:
            return
        self._held = True
        while self.state in (_RUNNING, TaskState.SUSPENDED):
            await self._quiesce()
            if self.state not in (_RUNNING, TaskState.SUSPENDED) or not self.caches_dirty():
                return
            self._issue_punctuation(CACHE_FLUSH)

    async def _quiesce(self) -> None:
        """Wait until nothing is in flight (the task holds issuing) or the task failed.
        Shares :attr:`drained` with a concurrent ``StreamTask.drain`` (which wakes the
        event it replaces, so this wait moves to the new one)."""
        created: asyncio.Event | None = None
        try:
            self.pump()
            while self._rob and self.state in (_RUNNING, TaskState.SUSPENDED):
                event = self.drained
                if event is None:
                    event = created = self.drained = asyncio.Event()
                event.clear()
                await event.wait()
        finally:
            if created is not None and self.drained is created:
                self.drained = None

    def release_hold(self) -> None:
        """The commit's snapshot is taken: issue again."""
        if self._held:
            self._held = False
            self.schedule_pump()

    # -- execute, finish, retire --------------------------------------------------------

    def _start(self, slot: Slot) -> None:
        slot.state = _EXECUTING
        slot.attempts += 1
        source = slot.source
        if source is not None and not source.chain_is_async:
            token = CURRENT_SLOT.set(slot)
            try:
                source.run(slot.raw, slot)
            except Exception as error:
                self.recovery.on_error(slot, error)
                return
            finally:
                CURRENT_SLOT.reset(token)
            self._finish(slot)
            return
        self.pool.dispatch(slot)

    def _finish(self, slot: Slot) -> None:
        slot.state = _DONE
        slot.record = None  # only its outputs and writes wait for retirement
        in_rob = self._in_rob
        # its finish time matters to head-of-line waits unless it is the oldest in flight
        # and nothing after it has finished (see engine.head_of_line)
        if in_rob[0] is not slot or len(in_rob) != self._unfinished:
            slot.finished_at = self._monotonic()
        if slot.outputs:  # held, with its input, until it retires
            size = outputs_cost(slot.outputs)
            slot.held += size
            self._budget.held += size  # take(size), without a call per record
        self._unfinished -= 1
        if self._gate_waiters:  # gate.finished() when a slot waits in it, else no call
            self.gate.finished()
        if slot is self._barrier:
            self._barrier = None
        successor = self._station.release(slot)
        if successor is not None:
            self._start(successor)
        barrier = self._barrier
        if barrier is not None and barrier.state is _WAITING and self._unfinished == 1:
            self._start(barrier)
        if not self.pump_pending:  # schedule_pump(), without a call per record
            self.pump_pending = True
            asyncio.get_running_loop().call_soon(self.pump)

    def _retire(self) -> None:
        released = self._released
        apply = self._apply
        freed = 0
        retired = self._rob.pop_retirable()
        if self.tracer is not None and retired:
            self.tracer.retiring(retired)  # before release: outputs get the traceparent
        marks = self._marks
        for slot in retired:
            if slot.outputs:
                if marks is not None and slot.raw is not None:
                    marks.stamp(slot.raw, slot.outputs)
                released.extend(slot.outputs)
            if slot.writes:
                apply(slot, released)
            freed += slot.held
        self._budget.give(freed)
        self.head_of_line.retired(retired)

    # -- failure (see recovery) ---------------------------------------------------------

    def _restart(self, slot: Slot) -> None:
        """A slot's backoff is over: run it again, unless the task stopped running."""
        if self.state in (TaskState.RUNNING, TaskState.SUSPENDED):
            self._start(slot)

    def _fail(self, slot: Slot, error: Exception) -> None:
        slot.state = SlotState.FAILED
        failure = task_failed_error(self.task_id, slot.node, slot.raw, slot.attempts, error)
        if self.state in (TaskState.RUNNING, TaskState.SUSPENDED):
            self.transition(TaskState.FAILED)
        if self.drained is not None:
            self.drained.set()
        self._on_failed(failure)
