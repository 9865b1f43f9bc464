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

from collections import deque
from collections.abc import Collection, Mapping, Sequence

from aiostreams.runtime.slot import Slot, SlotState
from aiostreams.types import RawRecord, TopicPartition

_DONE = SlotState.DONE  # a module constant: an enum member read through its class is slow


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
