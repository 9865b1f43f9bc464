"""A slot: one issued unit of in-flight work (a record or a punctuation) and what it
buffered; the reorder buffer (:mod:`aiostreams.engine.reorder_buffer`) holds them in issue
order and retires them in that order.

The slot is the kernel piece every layer may see: the node contexts and the store views
(``state/overlay``, ``state/versioned_view``), the service callers and the permit waits
find the record they run for through :data:`CURRENT_SLOT`, and buffer into it, so
concurrent records never see each other's buffers.

Invariants: a slot's state moves WAITING → EXECUTING → (BACKOFF → EXECUTING)* → DONE or
FAILED (the reorder buffer asserts it retires DONE slots only); :func:`record_slot` sets
every attribute :class:`Slot` does (a test checks both agree).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from typing import Any

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.trace_hooks import SlotTrace
from aiostreams.types import OutgoingRecord, RawRecord, Record

__all__ = ["CURRENT_SLOT", "Slot", "SlotKind", "SlotState", "record_slot"]


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
