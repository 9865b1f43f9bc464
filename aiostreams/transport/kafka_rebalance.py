"""Rebalance callbacks moved from aiokafka's coordinator task into ``getmany``.

aiokafka calls its ``ConsumerRebalanceListener`` from a background coordinator task, at any
moment, concurrently with the application, and logs and swallows what the listener raises.
The transport Protocol (like Kafka's Java consumer, whose callbacks run inside ``poll``) runs
them inside ``getmany``, where the engine expects them, and lets their exceptions out.

:class:`RebalanceBridge` is the listener handed to aiokafka. Each callback becomes a
:class:`PendingRebalance` in a queue, and the coordinator task waits until the consumer has
run the application's listener for it and called :meth:`PendingRebalance.release`. Because
aiokafka only sends its JoinGroup after ``on_partitions_revoked`` returns, a revoked
partition can reach its next owner only after the application's ``on_partitions_revoked``
returned (bounded by the group's rebalance timeout, ``max_poll_interval``).

Invariants: callbacks are taken in the order aiokafka made them; after :meth:`close`, no
callback waits (so ``AIOKafkaConsumer.stop`` cannot hang on one) and new ones are dropped.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiokafka import ConsumerRebalanceListener
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.types import TopicPartition


class RebalancePhase(enum.Enum):
    REVOKED = "revoked"
    ASSIGNED = "assigned"


@dataclass(slots=True)
class PendingRebalance:
    """One callback aiokafka made, waiting for the application's listener to run."""

    phase: RebalancePhase
    partitions: frozenset[TopicPartition]
    _released: asyncio.Future[None] = field(repr=False)

    def release(self) -> None:
        """Let aiokafka's rebalance go on. Idempotent."""
        if not self._released.done():
            self._released.set_result(None)


class RebalanceBridge(ConsumerRebalanceListener):  # type: ignore[misc]  # untyped base
    """The aiokafka listener that queues callbacks for ``getmany`` (see the module doc)."""

    def __init__(self) -> None:
        self._pending: deque[PendingRebalance] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False

    # -- called by aiokafka's coordinator task --------------------------------------------

    async def on_partitions_revoked(self, revoked: Iterable[AioTopicPartition]) -> None:
        await self._hand_over(RebalancePhase.REVOKED, revoked)

    async def on_partitions_assigned(self, assigned: Iterable[AioTopicPartition]) -> None:
        await self._hand_over(RebalancePhase.ASSIGNED, assigned)

    async def _hand_over(
        self, phase: RebalancePhase, partitions: Iterable[AioTopicPartition]
    ) -> None:
        if self._closed:
            return
        pending = PendingRebalance(
            phase,
            frozenset(TopicPartition(tp.topic, tp.partition) for tp in partitions),
            asyncio.get_running_loop().create_future(),
        )
        self._pending.append(pending)
        self.wake()
        await pending._released

    # -- called by the consumer -------------------------------------------------------------

    def take(self) -> PendingRebalance | None:
        """The oldest callback not yet run, or None."""
        return self._pending.popleft() if self._pending else None

    def arrival(self) -> asyncio.Future[None]:
        """A future done once a callback is pending, :meth:`wake` was called, or the bridge
        is closed. Await it beside a fetch; never cancel it (it may be shared)."""
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
            if self._pending or self._closed:
                self._waiter.set_result(None)
        return self._waiter

    def wake(self) -> None:
        """Make the current :meth:`arrival` future done (a callback came, or stop began)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        """Release every waiting callback and drop later ones; wakes a waiting getmany."""
        self._closed = True
        while self._pending:
            self._pending.popleft().release()
        self.wake()
