"""Where retired outputs wait for the producer, and the transaction they belong to.

With ``at_least_once`` every task of a worker shares one channel (one idempotent producer).
With ``exactly_once`` each task has its own channel with a transactional producer whose id
is ``<app>-<task id>``: aiokafka's transactional offset commit carries no consumer-group
generation, so zombie fencing rests on transactional ids, and per-task ids make whoever
takes over a task fence its previous owner (Kafka Streams' EOS-v1 design).

Invariant: under ``exactly_once`` a transaction holds the outputs of exactly the records
whose offsets it commits. :meth:`take` hands over everything retired so far and is called
in the same synchronous step as the snapshot of committable offsets; the sender and the
commit both hold :attr:`lock` while talking to the producer, so no send slips into a
transaction that is being committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiostreams.errors import OwnershipLostError, ProducerFencedError
from aiostreams.transport.base import Producer
from aiostreams.types import OutgoingRecord

log = logging.getLogger("aiostreams.worker")


class OutputChannel:
    def __init__(self, producer: Producer, *, transactional: bool, name: str) -> None:
        self.producer = producer
        self.transactional = transactional
        self.name = name
        self.lock = asyncio.Lock()
        self.in_transaction = False
        self._outbox: list[OutgoingRecord] = []
        self.error: BaseException | None = None
        self.owns: Callable[[], bool] = _always
        """Whether the worker still owns the tasks whose outputs this channel sends (the
        group member's lease, see :mod:`~aiostreams.transport.membership`): checked before
        every batch, so a worker that may have lost its tasks sends nothing more of them."""

    def add(self, records: list[OutgoingRecord]) -> None:
        self._outbox.extend(records)

    @property
    def pending(self) -> bool:
        return bool(self._outbox)

    def take(self) -> list[OutgoingRecord]:
        batch, self._outbox = self._outbox, []
        return batch

    async def send(self, batch: list[OutgoingRecord]) -> None:
        """Produce ``batch`` (in the open transaction, begun if needed). Hold :attr:`lock`."""
        if not batch:
            return
        if not self.owns():
            raise OwnershipLostError(
                f"{self.name} sends nothing more: this worker may no longer own its tasks "
                f"(its group session may have expired); {len(batch)} retired record(s) are "
                "dropped and the tasks' new owners produce them again")
        if self.error is not None:
            # after a failed send nothing more goes out, or a later output could land
            # before an earlier one that is redone (a gap in a key's order)
            raise self.error
        try:
            if self.transactional and not self.in_transaction:
                await self.producer.begin_transaction()
                self.in_transaction = True
            await self.producer.send_batch(batch)
        except asyncio.CancelledError:
            raise
        except ProducerFencedError as e:
            log.warning("worker: %s was fenced by a newer owner of its task; %d record(s) "
                        "of its aborted transaction are dropped (the new owner produces "
                        "them again)", self.name, len(batch))
            self.error = e
            raise
        except Exception as e:
            log.exception("worker: producing %d record(s) through %s failed", len(batch),
                          self.name)
            self.error = e
            raise

    async def send_pending(self) -> None:
        """Send what has accumulated (the background sender's step), holding :attr:`lock`
        for one batch at a time: a commit waiting for the lock (asyncio's lock is FIFO)
        comes in after the batch under way, instead of after every output retired while it
        was sent (with async records retiring all along, that kept P1's commits waiting
        30-50 ms for the lock)."""
        while self._outbox:
            async with self.lock:
                await self.send(self.take())  # the commit may have taken it: then a no-op


def _always() -> bool:
    return True
