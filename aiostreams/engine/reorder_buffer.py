"""The reorder buffer (ROB): in-flight work in issue order, retired in that order only.

A :class:`Slot` is one issued unit of work (a record, or a punctuation). While it executes,
what it forwards to sinks, sends and writes to stores is buffered in the slot; nothing leaves
it until it reaches the head of the buffer *and* has finished. Then it retires: its outputs
are released, its state writes applied, and its partition's committable offset moves to
``offset + 1``.

Invariants (asserted):

* slots retire in issue order, each exactly once, and only in state DONE;
* the committable offset of a partition is one past its last retired record; it never
  decreases and never passes a record that has not retired;
* the buffer never holds more than ``capacity`` slots.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from aiostreams.engine.external_sink import ExternalRecord
from aiostreams.engine.trace_hooks import SlotTrace
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition


class SlotState(enum.Enum):
    WAITING = "waiting"  # issued; waits for an earlier slot (hazard or barrier)
    EXECUTING = "executing"
    BACKOFF = "backoff"  # failed; waits in the delay queue for its next attempt
    DONE = "done"  # finished (succeeded, skipped or dead-lettered); may retire
    FAILED = "failed"  # failed for good with the ``fail`` handler; never retires


class SlotKind(enum.Enum):
    RECORD = "record"
    PUNCTUATION = "punctuation"


class Slot:
    """One unit of in-flight work and everything it has buffered."""

    __slots__ = (
        "attempts",
        "finished_at",
        "forward_buffer",
        "hazard",
        "held",
        "kind",
        "node",
        "outputs",
        "punctuate",
        "raw",
        "record",
        "seq",
        "source",
        "state",
        "stream_time",
        "successor",
        "trace",
        "writes",
    )

    def __init__(
        self,
        kind: SlotKind,
        raw: RawRecord | None,
        source: Any,
        hazard: Hashable | None,
        punctuate: Callable[[], Any] | None = None,
    ) -> None:
        self.kind = kind
        self.raw = raw
        self.source = source
        self.hazard = hazard
        self.punctuate = punctuate
        self.seq = -1
        self.state = SlotState.WAITING
        self.record: Record[Any, Any] | None = None
        self.outputs: list[OutgoingRecord | ExternalRecord] = []
        # (store, key, value|TOMBSTONE); a shared empty tuple until the first write, so the
        # many slots of a stateless pipeline waiting to retire carry no list each
        self.writes: list[tuple[Any, Any, Any]] | tuple[()] = ()
        self.forward_buffer: list[tuple[str | None, Record[Any, Any]]] | None = None
        self.successor: Slot | None = None
        self.attempts = 0
        self.node = ""  # the node executing now, or the one that failed
        self.stream_time = float("-inf")  # the task's stream time when this slot was issued
        self.held = 0  # bytes this slot holds in its task's byte budget
        # monotonic seconds when it finished, where that can matter (engine.head_of_line)
        self.finished_at: float | None = None
        self.trace: SlotTrace | None = None  # its spans, when the app traces (engine.tracing)

    def reset_buffers(self) -> None:
        """Forget what an attempt buffered (before a retry, or when the record is set aside)."""
        self.outputs = []
        self.writes = ()
        self.forward_buffer = None

    def __repr__(self) -> str:
        where = (f"{self.raw.topic}[{self.raw.partition}]@{self.raw.offset}"
                 if self.raw is not None else "punctuation")
        return f"record {where}" if self.raw is not None else where  # logs show it


_new = object.__new__
_RECORD = SlotKind.RECORD
_WAITING = SlotState.WAITING
_DONE = SlotState.DONE  # module constants: an enum member read through its class is slow
_BEFORE_ANY = float("-inf")


def record_slot(raw: RawRecord, source: Any, hazard: Hashable | None) -> Slot:
    """``Slot(SlotKind.RECORD, raw, source, hazard)``, built without the class call: the
    issue loop makes one per record, and a class call to a Python ``__init__`` costs about
    as much again as the stores (a test checks that both agree on every attribute)."""
    slot: Slot = _new(Slot)
    slot.kind = _RECORD
    slot.raw = raw
    slot.source = source
    slot.hazard = hazard
    slot.punctuate = None
    slot.seq = -1
    slot.state = _WAITING
    slot.record = None
    slot.outputs = []
    slot.writes = ()
    slot.forward_buffer = None
    slot.successor = None
    slot.attempts = 0
    slot.node = ""
    slot.stream_time = _BEFORE_ANY
    slot.held = 0
    slot.finished_at = None
    slot.trace = None
    return slot


CURRENT_SLOT: ContextVar[Slot] = ContextVar("aiostreams_current_slot")
"""The slot whose processor chain runs in this context: set by the task for each
execution (an executor per slot, the inline path for its reused slot). The node contexts
and the store views read it, so concurrent records never see each other's buffers."""


class ReorderBuffer:
    def __init__(self, capacity: int, partitions: Collection[TopicPartition] = ()) -> None:
        if capacity < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {capacity}")
        self.capacity = capacity
        # a task reads one partition per topic, so a record's topic names its partition
        self._tp_of = {tp.topic: tp for tp in partitions}
        self._slots: deque[Slot] = deque()
        self._next_seq = 0
        self.committable: dict[TopicPartition, int] = {}

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def full(self) -> bool:
        return len(self._slots) >= self.capacity

    @property
    def head(self) -> Slot | None:
        return self._slots[0] if self._slots else None

    @property
    def slots_view(self) -> Sequence[Slot]:
        """The buffer itself, oldest first (read only: for the issue loop's length checks)."""
        return self._slots

    def issue(self, slot: Slot) -> None:
        if len(self._slots) >= self.capacity:
            raise AssertionError("issue into a full reorder buffer")
        slot.seq = self._next_seq
        self._next_seq += 1
        self._slots.append(slot)

    def pop_retirable(self) -> list[Slot]:
        """Remove and return, oldest first, every slot from the head up to the first one
        that has not finished; their partitions' committable offsets move past them."""
        slots = self._slots
        done = _DONE
        retired: list[Slot] = []
        last: RawRecord | None = None  # the last retired record, while they share a partition
        for slot in slots:
            if slot.state is not done:
                break
            retired.append(slot)
            raw = slot.raw
            if raw is None:
                continue
            if last is not None and (last.topic != raw.topic or last.partition != raw.partition):
                self._advance_to(last)
            last = raw
        for _ in retired:
            slots.popleft()
        if last is not None:
            self._advance_to(last)
        return retired

    def _advance_to(self, raw: RawRecord) -> None:
        tp = self._tp_of.get(raw.topic)
        if tp is None or tp.partition != raw.partition:
            tp = TopicPartition(raw.topic, raw.partition)
        self.advance(tp, raw.offset)

    def advance(self, tp: TopicPartition, offset: int) -> None:
        """Record that the record at ``offset`` of ``tp`` retired."""
        previous = self.committable.get(tp, -1)
        if offset + 1 <= previous:
            raise AssertionError(
                f"{tp}: committable offset would move back from {previous} to {offset + 1}"
            )
        self.committable[tp] = offset + 1

    def oldest_unretired_offset(self, tp: TopicPartition) -> int | None:
        for slot in self._slots:
            raw = slot.raw
            if raw is not None and raw.topic == tp.topic and raw.partition == tp.partition:
                return raw.offset
        return None

    def check_commit_point(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Assert that committing ``offsets`` passes no unretired record."""
        for tp, offset in offsets.items():
            oldest = self.oldest_unretired_offset(tp)
            if oldest is not None and offset > oldest:
                raise AssertionError(
                    f"{tp}: commit at {offset} would pass unretired offset {oldest}"
                )
