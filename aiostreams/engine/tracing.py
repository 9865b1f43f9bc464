"""OpenTelemetry spans per record, timed from the engine's own timestamps.

Loaded only when an app enables tracing (``App(..., tracing=True)``; this module imports
``opentelemetry``, the ``otel`` extra). Each record a task issues gets one span and its
children, all in the record's trace::

    aiostreams.record            fetched -> committed (kind CONSUMER; topic, partition,
    |                            offset, key hash, task id, attempts, outcome)
    +- aiostreams.queue_wait     fetched -> issued into the reorder buffer
    +- aiostreams.permit_wait    a service call waits for its permit (breaker, limit, rate,
    |                            retry budget) -> dispatched          (one per call)
    +- aiostreams.call           dispatched -> answered (kind CLIENT; service, attempt,
    |                            outcome, error.type)                 (one per call)
    +- aiostreams.head_of_line_wait   finished -> retired (behind earlier records)

and a failed attempt is an ``exception`` event on the record span (with the attempt and
what the failure policy chose). A commit is a span of its own, ``aiostreams.commit``
(its own trace: one commit holds many records of many traces), with the offsets it
committed; each record span it made durable ends when that commit ends, carries a *link* to
it (Jaeger: "references", Tempo: "links") and its ids as ``aiostreams.commit.trace_id`` /
``aiostreams.commit.span_id``, so a user can go from a record to the commit and search the
commit's records.

A batched call (``map_values_batched_async``) is one call for many records: each traced
record of the batch gets its own ``aiostreams.permit_wait`` (from joining the batch: the
batch filling, then the permit) and ``aiostreams.call`` in its own trace, with
``aiostreams.batch.size`` and ``aiostreams.batch.call_id`` (the same for every record of
that call, so a search finds the batch); the user's spans inside the batch function are
children of the first traced record's call span.

W3C trace context: when the input record carries a ``traceparent`` header its span is the
child of that context; every output the record releases (the dead letter included) carries
the record span's ``traceparent`` (an existing one, copied from the input, is replaced).

Times: the engine's monotonic clock, shifted to the epoch once per task
(``wall_time() - monotonic()``), so spans from a manual clock line up with its wall time.

Invariants: a record span starts at or before each of its children and ends (at its
commit, or when its task closes) after every one of them; each record span ends once.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from aiostreams.runtime.clock import Clock
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.slot import Slot
from aiostreams.runtime.trace_hooks import CallTrace
from aiostreams.types import Headers, OutgoingRecord, RawRecord, TopicPartition

if TYPE_CHECKING:
    from contextvars import Token

__all__ = ["TRACEPARENT", "CommitTrace", "RecordTrace", "TaskTracer", "Tracing"]

TRACEPARENT = "traceparent"
"""The W3C trace-context header, read on input and written on output records."""


class Tracing:
    """An app's tracing: where its tasks' spans go (``provider``, else the global one)."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer("aiostreams", tracer_provider=provider)
        self.propagator = TraceContextTextMapPropagator()

    def for_task(self, task_id: str, clock: Clock) -> TaskTracer:
        return TaskTracer(self, task_id, clock)


class TaskTracer:
    """One task's spans: records from fetch to commit (see the module docstring)."""

    def __init__(self, tracing: Tracing, task_id: str, clock: Clock) -> None:
        self.tracer = tracing.tracer
        self.propagator = tracing.propagator
        self.task_id = task_id
        self.monotonic = clock.monotonic
        self._epoch = clock.wall_time() - clock.monotonic()
        # per partition: (last offset of a fetched batch, when it was fetched), oldest first
        self._fetched: dict[tuple[str, int], deque[tuple[int, float]]] = {}
        self._retired: list[RecordTrace] = []  # retired, not yet committed

    def ns(self, monotonic: float) -> int:
        """Epoch nanoseconds of an engine monotonic time."""
        return int((monotonic + self._epoch) * 1e9)

    def child(self, name: str, parent: Context, start: float, end: float,
              attributes: Attributes = None) -> None:
        """A finished child span of ``parent`` from ``start`` to ``end`` (monotonic)."""
        span = self.tracer.start_span(name, context=parent, start_time=self.ns(start),
                                      attributes=attributes)
        span.end(end_time=self.ns(max(start, end)))

    # -- what the task and its record path call -----------------------------------------

    def fetched(self, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
        """A fetched batch of ``tp`` arrived (its queue wait starts)."""
        if records:
            batches = self._fetched.setdefault((tp.topic, tp.partition), deque())
            batches.append((records[-1].offset, self.monotonic()))

    def issued(self, slot: Slot) -> None:
        """``slot``'s record was issued: its span starts (at its fetch)."""
        raw = slot.raw
        assert raw is not None, "punctuations are not traced"
        now = self.monotonic()
        slot.trace = RecordTrace(self, raw, self._fetched_at(raw, now), now)

    def _fetched_at(self, raw: RawRecord, now: float) -> float:
        batches = self._fetched.get((raw.topic, raw.partition))
        while batches and batches[0][0] < raw.offset:
            batches.popleft()
        return batches[0][1] if batches else now  # not seen fetched: a zero queue wait

    def retiring(self, slots: Sequence[Slot]) -> None:
        """``slots`` retire now, in this order, before their outputs are released."""
        now = self.monotonic()
        for slot in slots:
            record = slot.trace
            if isinstance(record, RecordTrace):
                record.retired(slot, now)
                self._retired.append(record)

    def take_retired(self) -> list[RecordTrace]:
        """The records retired since the last call (a commit snapshot takes them)."""
        retired, self._retired = self._retired, []
        return retired

    def give_back(self, records: list[RecordTrace]) -> None:
        """Records a commit did not make durable: the next commit takes them."""
        self._retired[:0] = records

    def closed(self, in_flight: Sequence[Slot]) -> None:
        """The task closed: end the spans of records never committed."""
        for record in self.take_retired():
            record.end(self.monotonic(), committed=False)
        for slot in in_flight:
            if isinstance(slot.trace, RecordTrace):
                slot.trace.outcome = "unfinished"
                slot.trace.end(self.monotonic(), committed=False)
                slot.trace = None


class RecordTrace:
    """One record's span and what its children need (see the module docstring)."""

    __slots__ = (
        "attempts",
        "context",
        "offset",
        "outcome",
        "owner",
        "partition",
        "span",
        "topic",
        "traceparent",
    )

    def __init__(self, owner: TaskTracer, raw: RawRecord, fetched: float,
                 issued: float) -> None:
        self.owner = owner
        self.topic, self.partition, self.offset = raw.topic, raw.partition, raw.offset
        self.outcome = "processed"
        self.attempts = 1
        attributes: dict[str, str | int] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": raw.topic,
            "messaging.destination.partition.id": str(raw.partition),
            "messaging.kafka.offset": raw.offset,
            "aiostreams.task_id": owner.task_id,
        }
        if raw.key is not None:
            attributes["aiostreams.key_hash"] = hashlib.blake2b(
                raw.key, digest_size=8).hexdigest()
        self.span = owner.tracer.start_span(
            "aiostreams.record", context=_parent(owner, raw.headers), kind=SpanKind.CONSUMER,
            start_time=owner.ns(fetched), attributes=attributes)
        self.context = trace.set_span_in_context(self.span)
        ids = self.span.get_span_context()
        self.traceparent = (f"00-{ids.trace_id:032x}-{ids.span_id:016x}-"
                            f"{int(ids.trace_flags):02x}").encode()
        owner.child("aiostreams.queue_wait", self.context, fetched, issued)

    def call(self, service: str, attempt: int) -> CallTrace:
        return CallSpan(self, service, attempt)

    def failed(self, error: BaseException, action: str, attempt: int) -> None:
        self.span.record_exception(error, {"aiostreams.attempt": attempt,
                                           "aiostreams.decision": action},
                                   timestamp=self.owner.ns(self.owner.monotonic()))
        if action in ("dead_letter", "skip", "fail"):
            self.outcome = {"dead_letter": "dead_lettered", "skip": "skipped",
                            "fail": "failed"}[action]

    def retired(self, slot: Slot, now: float) -> None:
        """Its slot retires at ``now``: the head-of-line wait, ``traceparent`` on outputs."""
        self.attempts = slot.attempts
        # None: it was the oldest in flight and nothing after it had finished - it waited
        # for no earlier record, only for the loop turn that retires it (engine.head_of_line)
        finished = slot.finished_at if slot.finished_at is not None else now
        self.owner.child("aiostreams.head_of_line_wait", self.context, finished, now)
        if slot.outputs:
            slot.outputs = [self._stamped(out) for out in slot.outputs]

    def _stamped(self, out: OutgoingRecord | ExternalRecord) -> OutgoingRecord | ExternalRecord:
        if not isinstance(out, OutgoingRecord):
            return out
        headers: Headers = (*((n, v) for n, v in out.headers if n != TRACEPARENT),
                            (TRACEPARENT, self.traceparent))
        return OutgoingRecord(out.topic, out.key, out.value, out.timestamp, headers,
                              out.partition)

    def end(self, at: float, *, committed: bool, commit: Span | None = None) -> None:
        span = self.span
        span.set_attribute("aiostreams.outcome", self.outcome)
        span.set_attribute("aiostreams.attempts", self.attempts)
        span.set_attribute("aiostreams.committed", committed)
        if commit is not None:
            ids = commit.get_span_context()
            span.add_link(ids, {"aiostreams.link": "committed by"})
            span.set_attribute("aiostreams.commit.trace_id", f"{ids.trace_id:032x}")
            span.set_attribute("aiostreams.commit.span_id", f"{ids.span_id:016x}")
        if self.outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, "the record failed its task"))
        span.end(end_time=self.owner.ns(at))


def _parent(owner: TaskTracer, headers: Headers) -> Context | None:
    """The context of the record's ``traceparent`` header, if it has a valid one."""
    carrier = {n: v.decode("latin-1") for n, v in headers
               if v is not None and n in (TRACEPARENT, "tracestate")}
    if TRACEPARENT not in carrier:
        return None
    context = owner.propagator.extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


class CallSpan:
    """One service call of a traced record: its permit wait, then the call."""

    __slots__ = ("_attempt", "_batch", "_record", "_service", "_since", "_span", "_token")

    def __init__(self, record: RecordTrace, service: str, attempt: int) -> None:
        self._record = record
        self._service = service
        self._attempt = attempt
        self._since = record.owner.monotonic()
        self._span: Span | None = None
        self._token: Token[Context] | None = None
        self._batch: dict[str, str | int] = {}

    def in_batch(self, size: int, call_id: str) -> None:
        assert self._span is None, "a call says it is batched before it is dispatched"
        self._batch = {"aiostreams.batch.size": size, "aiostreams.batch.call_id": call_id}

    def dispatched(self) -> None:
        record = self._record
        owner = record.owner
        now = owner.monotonic()
        owner.child("aiostreams.permit_wait", record.context, self._since, now,
                    {"aiostreams.service": self._service})
        self._span = span = owner.tracer.start_span(
            "aiostreams.call", context=record.context, kind=SpanKind.CLIENT,
            start_time=owner.ns(now),
            attributes={"aiostreams.service": self._service,
                        "aiostreams.attempt": self._attempt, **self._batch})
        # the user's own spans inside the call (an instrumented HTTP client) are its children
        self._token = attach(trace.set_span_in_context(span))

    def ended(self, outcome: str, error: BaseException | None) -> None:
        span = self._span
        assert span is not None, "a call ends after it was dispatched"
        if self._token is not None:
            detach(self._token)
            self._token = None
        span.set_attribute("aiostreams.call.outcome", outcome)
        if error is not None:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end(end_time=self._record.owner.ns(self._record.owner.monotonic()))


class CommitTrace:
    """One commit of a group of tasks: its span, and the record spans it makes durable."""

    def __init__(self, tracers: Sequence[TaskTracer]) -> None:
        assert tracers, "a commit trace needs a traced task"
        self._owner = tracers[0]
        self._records = [(tracer, tracer.take_retired()) for tracer in tracers]
        self._started = self._owner.monotonic()

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The commit of ``offsets`` is done: end its span and those of its records."""
        owner = self._owner
        span = self._span(offsets)
        now = owner.monotonic()
        span.end(end_time=owner.ns(now))
        for tracer, records in self._records:
            later = []
            for record in records:
                if offsets.get(TopicPartition(record.topic, record.partition), -1) > record.offset:
                    record.end(now, committed=True, commit=span)
                else:  # held back by a sink not yet durable: a later commit covers it
                    later.append(record)
            tracer.give_back(later)

    def failed(self, error: BaseException) -> None:
        """The commit failed: its span says so; its records wait for the next one."""
        span = self._span({})
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"commit failed: {error}"))
        span.end(end_time=self._owner.ns(self._owner.monotonic()))
        for tracer, records in self._records:
            tracer.give_back(records)

    def _span(self, offsets: Mapping[TopicPartition, int]) -> Span:
        owner = self._owner
        return owner.tracer.start_span(
            "aiostreams.commit", context=Context(), start_time=owner.ns(self._started),
            attributes={
                "aiostreams.task_ids": [tracer.task_id for tracer, _ in self._records],
                "aiostreams.offsets": [f"{tp.topic}[{tp.partition}]={offset}"
                                       for tp, offset in sorted(offsets.items())],
                "aiostreams.records": sum(len(r) for _, r in self._records)})
