"""The memory consumer's fetch: fair, round-robin takes from the memory broker's logs.

Each take starts from the next partition in turn (so no partition starves another when
``limit`` is small), shares ``limit`` evenly among the partitions that have records, and
advances each position by exactly what it returns: a partition's records come back from its
position with no gap and no repeat (asserted). A position outside its partition's log is
reset first (see :mod:`~aiostreams.transport.offset_reset`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from aiostreams.transport.memory_broker import MemoryBroker
from aiostreams.types import RawRecord, TopicPartition

__all__ = ["FairFetch", "ResetOutOfRange"]

ResetOutOfRange = Callable[[TopicPartition, int, int], None]
"""``reset(tp, log_start, log_end)``: move ``tp``'s position, outside the log, per the
consumer's policy (or raise)."""


class FairFetch:
    """Which assigned partitions a consumer reads, in which order, and what is paused."""

    def __init__(self) -> None:
        self.order: list[TopicPartition] = []
        self.paused: set[TopicPartition] = set()
        self._rotation = 0

    def assigned(self, partitions: Collection[TopicPartition]) -> None:
        """The assignment changed to ``partitions``: read them in order; a pause outlives
        only a partition still assigned."""
        self.order = sorted(partitions)
        self.paused &= set(partitions)

    def take(self, broker: MemoryBroker, positions: dict[TopicPartition, int], limit: int,
             reset: ResetOutOfRange) -> dict[TopicPartition, list[RawRecord]]:
        """Up to ``limit`` records, round-robin over the unpaused partitions of ``order``
        (all in ``positions``), advancing ``positions``. The caller holds the broker's lock."""
        order = self.order
        if not order:
            return {}
        start = self._rotation % len(order)
        self._rotation += 1
        logs = broker._logs
        log_start = broker._log_start
        ready: list[tuple[TopicPartition, list[RawRecord]]] = []
        for tp in order[start:] + order[:start]:
            partitions = logs.get(tp.topic)
            if tp in self.paused or partitions is None or tp.partition >= len(partitions):
                continue  # paused, or the topic was deleted under a manual assignment
            end = len(partitions[tp.partition])
            if positions[tp] > end or (log_start and positions[tp] < log_start.get(tp, 0)):
                reset(tp, log_start.get(tp, 0), end)
            if positions[tp] < end:
                ready.append((tp, partitions[tp.partition]))
        batch: dict[TopicPartition, list[RawRecord]] = {}
        remaining = limit
        while remaining and ready:
            share = max(1, remaining // len(ready))
            still_ready = []
            for tp, log in ready:
                position = positions[tp]
                taken = log[position : position + min(share, remaining)]
                assert taken[0].offset == position, f"{tp}: gap or repeat at {position}"
                batch.setdefault(tp, []).extend(taken)
                positions[tp] = position + len(taken)
                remaining -= len(taken)
                if not remaining:
                    break
                if positions[tp] < len(log):
                    still_ready.append((tp, log))
            ready = still_ready
        return batch
