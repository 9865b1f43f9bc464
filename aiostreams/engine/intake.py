"""A task's intake: fetched records waiting to be issued, and the back-pressure on fetching.

The worker hands each fetched batch to the task (``enqueue``); the records wait in the
partition queues (:mod:`~aiostreams.engine.partition_queue`, which also chooses the next one
and idles for empty partitions) until the task issues them. Fetching a partition is paused
(``on_pause(tp, True)``) while any of these holds, and resumed once none does:

* its queue holds ``max_buffered_per_partition`` records or more;
* the reorder buffer is full (or the task no longer runs) and the queue is not empty;
* the task's byte budget (:mod:`~aiostreams.engine.byte_budget`) is exhausted: then every
  partition pauses (and the task stops issuing), so a stuck record bounds the memory the
  task holds.

Invariant: ``on_pause`` is called only on a change, so the paused set and the consumer's
agree; the idle timer is at most one (a new deadline replaces the old one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aiostreams.engine.byte_budget import ByteBudget
from aiostreams.engine.partition_queue import HasUnfetched, PartitionGroup
from aiostreams.runtime.clock import Clock, TimerHandle
from aiostreams.types import RawRecord, TopicPartition


class Intake:
    def __init__(self, partitions: Sequence[TopicPartition], clock: Clock, *,
                 max_task_idle: float, max_buffered_per_partition: int,
                 max_task_buffer_bytes: int,
                 on_pause: Callable[[TopicPartition, bool], None],
                 has_unfetched: HasUnfetched | None = None) -> None:
        self.queues = PartitionGroup(partitions, max_task_idle, has_unfetched)
        self.budget = ByteBudget(max_task_buffer_bytes)
        self._clock = clock
        self._limit = max_buffered_per_partition
        self._on_pause = on_pause
        self._paused: set[TopicPartition] = set()
        self._idle_timer: TimerHandle | None = None

    @property
    def partitions(self) -> list[TopicPartition]:
        return self.queues.partitions

    def enqueue(self, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
        self.queues.add(tp, records)

    def seed_position(self, tp: TopicPartition, offset: int) -> None:
        """Where fetching ``tp`` starts; lets the queues tell an empty partition that is
        caught up from one whose records are still on their way."""
        self.queues.seed_position(tp, offset)

    def buffered(self, tp: TopicPartition | None = None) -> int:
        """Records waiting to be issued: of ``tp``, or of every partition."""
        if tp is None:
            return self.queues.total_buffered()
        return self.queues.buffered(tp)

    @property
    def buffered_bytes(self) -> int:
        """Bytes the reorder buffer holds against ``max_task_buffer_bytes`` (issued inputs
        not yet retired, and finished outputs waiting to retire)."""
        return self.budget.held

    # -- idling -------------------------------------------------------------------------

    def arm_idle_timer(self, deadline: float, wake: Callable[[], None]) -> None:
        """Call ``wake`` at ``deadline`` (monotonic seconds), replacing an earlier timer."""
        self.cancel_idle_timer()

        def fire() -> None:
            self._idle_timer = None
            wake()

        self._idle_timer = self._clock.call_later(deadline - self._clock.monotonic(), fire)

    def cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    # -- back-pressure ------------------------------------------------------------------

    def update_pause(self, full: bool) -> None:
        """Pause or resume each partition by the rules in the module docstring; ``full``:
        the reorder buffer is full or the task no longer runs."""
        limit = self._limit
        over = self.budget.exhausted
        queues = self.queues
        paused = self._paused
        for tp in queues.partitions:
            n = queues.buffered(tp)
            want = over or n >= limit or (full and n > 0)
            if want != (tp in paused):
                if want:
                    paused.add(tp)
                else:
                    paused.discard(tp)
                self._on_pause(tp, want)

    def is_paused(self, tp: TopicPartition) -> bool:
        return tp in self._paused
