"""Per-partition record queues of one task, and the choice of the next record to issue.

Algorithm (Kafka Streams' ``PartitionGroup``, KIP-353): the next record is the head with the
smallest timestamp across the task's partitions (ties: the partition listed first). While
some partition has no buffered record and others do, the task waits up to
``max_task_idle`` seconds for it; once that passes it processes what it has and counts each
such record as an *enforced processing*. With ``max_task_idle == 0`` it waits only when an
empty partition is known to hold records on the broker that have not been fetched yet
(KIP-695: its high watermark is past the next offset expected), and then for at most
``UNFETCHED_WAIT`` seconds (a transaction marker at a partition's end looks like unfetched
data forever). A single-partition task never waits.

Invariant: within a partition, records leave in offset order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from aiostreams.types import RawRecord, TopicPartition

UNFETCHED_WAIT = 5.0

HasUnfetched = Callable[[TopicPartition, int], bool]
"""``(tp, next offset expected)`` → whether the broker holds records from there on."""


class PartitionGroup:
    def __init__(self, partitions: Sequence[TopicPartition], max_task_idle: float,
                 has_unfetched: HasUnfetched | None = None) -> None:
        if not partitions:
            raise ValueError("a task needs at least one partition")
        if max_task_idle < 0:
            raise ValueError(f"max_task_idle must be >= 0 seconds, got {max_task_idle}")
        self._order = list(partitions)
        self._queues: dict[TopicPartition, deque[RawRecord]] = {
            tp: deque() for tp in partitions
        }
        self._single = self._queues[self._order[0]] if len(partitions) == 1 else None
        self._max_idle = max_task_idle
        self._idle_since: float | None = None
        self._last_offset: dict[TopicPartition, int] = {}
        self._next_offset: dict[TopicPartition, int] = {}
        self._has_unfetched = has_unfetched
        self.enforced_processing_total = 0

    @property
    def single_queue(self) -> deque[RawRecord] | None:
        """The one queue of a single-partition task (which never idles), else None."""
        return self._single

    @property
    def partitions(self) -> list[TopicPartition]:
        return list(self._order)

    def add(self, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
        queue = self._queues[tp]
        last = self._last_offset.get(tp, -1)
        if records:
            if records[0].offset <= last:
                raise AssertionError(
                    f"{tp}: offset {records[0].offset} arrived after {last}; a partition "
                    "queue only moves forward"
                )
            self._last_offset[tp] = records[-1].offset
            self._next_offset[tp] = records[-1].offset + 1
        queue.extend(records)

    def seed_position(self, tp: TopicPartition, offset: int) -> None:
        """Where fetching of ``tp`` starts (the committed offset), before any record."""
        self._next_offset.setdefault(tp, offset)

    def buffered(self, tp: TopicPartition) -> int:
        return len(self._queues[tp])

    def total_buffered(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def next_record(self, now: float) -> RawRecord | float | None:
        """The record to issue next; or the monotonic deadline to wait for when idling for
        an empty partition; or None when nothing is buffered."""
        single = self._single
        if single is not None:
            return single.popleft() if single else None
        best: deque[RawRecord] | None = None
        empty: list[TopicPartition] = []
        for tp in self._order:
            q = self._queues[tp]
            if not q:
                empty.append(tp)
            elif best is None or q[0].timestamp < best[0].timestamp:
                best = q
        if best is None:
            self._idle_since = None
            return None
        if not empty:
            self._idle_since = None
            return best.popleft()
        wait = self._max_idle
        check = self._has_unfetched
        if check is not None and any(check(tp, self._next_offset.get(tp, 0)) for tp in empty):
            wait = max(wait, UNFETCHED_WAIT)
        if wait == 0:
            return best.popleft()
        if self._idle_since is None:
            self._idle_since = now
        deadline = self._idle_since + wait
        if now < deadline:
            return deadline
        self.enforced_processing_total += 1
        return best.popleft()
