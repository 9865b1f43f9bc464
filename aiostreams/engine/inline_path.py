"""The inline path: a record that can execute and retire at once, with no slot.

When nothing is in flight and the source's chain is synchronous, nothing can come between a
record and its retirement: no earlier slot to wait for, no hazard, nothing to reorder. The
task's issue loop then runs the record here: on one reused :class:`Slot` (bound as
``CURRENT_SLOT`` by the issue loop), its outputs appended straight to the task's released
list and its store writes applied at once, as retirement would (and its outputs given their
origin headers when the app marks them, :mod:`aiostreams.runtime.origin`). :meth:`InlinePath.drain`
does the same over a whole single-partition queue, with the issue loop's per-record checks
hoisted and the committable offset moved once at the end.

A record that fails here is handed back (:meth:`InlineHost.inline_failed`) with what it
released cut back to ``mark``; the task issues it as a real slot, exactly as if it had been
issued normally, and recovery takes over.

Invariants: on return the reused slot holds no record and no writes; the committable offset
of a partition moves only past records that ran here without failing; ``drain`` stops at the
first record that the issue loop would treat differently (the task stopped running, a
punctuation became scheduled or due, a record failed).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol

from aiostreams.engine.graph import SourceExec
from aiostreams.engine.punctuation import PunctuationQueue
from aiostreams.engine.reorder_buffer import ReorderBuffer
from aiostreams.engine.task_state import TaskState
from aiostreams.engine.task_stores import TaskStores
from aiostreams.runtime.origin import OriginMarks
from aiostreams.runtime.slot import Slot, SlotKind
from aiostreams.types import RawRecord, TopicPartition


class InlineHost(Protocol):
    """What the inline path reads and writes of its task (``StreamTask``)."""

    state: TaskState
    stream_time: float

    def inline_failed(self, raw: RawRecord, source: SourceExec, mark: int,
                      error: Exception) -> None: ...


class InlinePath:
    def __init__(self, host: InlineHost, rob: ReorderBuffer, stores: TaskStores,
                 punctuations: PunctuationQueue,
                 tp_of: Mapping[str, TopicPartition], marks: OriginMarks | None = None
                 ) -> None:
        self.slot = Slot(SlotKind.RECORD, None, None, None)  # reused for every record
        self._marks = marks  # stamps a record's outputs as retirement would
        self._host = host
        self._rob = rob
        self._apply = stores.apply
        self._punctuations = punctuations
        self._tp_of = tp_of

    def run(self, raw: RawRecord, source: SourceExec, released: list[Any]) -> bool:
        """Execute and retire ``raw`` at once; False when it failed (and was handed back)."""
        slot = self.slot
        slot.stream_time = self._host.stream_time
        slot.raw = raw
        slot.source = source
        slot.outputs = released
        mark = len(released)
        try:
            source.run(raw, slot)
        except Exception as error:
            slot.record = None
            self._host.inline_failed(raw, source, mark, error)
            return False
        slot.record = None
        if self._marks is not None:
            self._marks.stamp(raw, released, mark)
        if slot.writes:
            # changelog records follow the record's outputs, as at retirement
            self._apply(slot, released)
            slot.writes = ()
        self._rob.advance(self._tp_of[raw.topic], raw.offset)
        return True

    def drain(self, queue: deque[RawRecord], source: SourceExec, released: list[Any]) -> None:
        """:meth:`run` over a single queue (one topic, so one source) for as long as
        nothing changes what the issue loop would decide (see the module docstring)."""
        punctuations = self._punctuations
        if punctuations.scheduled or punctuations.due:
            return
        host = self._host
        slot = self.slot
        run = source.run
        # source.run without its call per record (see SourceExec.sole), and without setting
        # slot.node: nothing reads the inline slot's node (a failed record is run again on a
        # real slot, which names the node that raised)
        decode, sole = source.decode, source.sole
        apply = self._apply
        marks = self._marks
        slot.outputs = released
        running = TaskState.RUNNING
        stream_time = slot.stream_time = host.stream_time
        last = -1
        raw: RawRecord | None = None
        try:
            while queue and host.state is running and not punctuations.scheduled:
                raw = queue.popleft()
                if raw.timestamp > stream_time:
                    stream_time = host.stream_time = slot.stream_time = raw.timestamp
                slot.raw = raw
                mark = len(released)
                try:
                    if sole is None:
                        run(raw, slot)
                    else:
                        record = slot.record = decode(raw)
                        sole(record, slot)
                except Exception as error:
                    slot.record = None
                    self._advance(raw.topic, last)
                    last = -1
                    host.inline_failed(raw, source, mark, error)
                    return
                if marks is not None:
                    marks.stamp(raw, released, mark)
                if slot.writes:
                    apply(slot, released)
                    slot.writes = ()
                last = raw.offset
        finally:
            slot.record = None
            if raw is not None:
                self._advance(raw.topic, last)

    def _advance(self, topic: str, last: int) -> None:
        if last >= 0:
            self._rob.advance(self._tp_of[topic], last)
