"""Noticing that the Kafka client under a worker died, and deciding what to do about it.

The client (aiokafka) works in background tasks; when one dies, or its fetcher stops
getting responses while the broker answers, nothing tells the worker: it would sit at
0 CPU with no log and no commit. :class:`ClientWatchdog` asks every client for its
liveness (the transport's ``liveness(stall_after)``: see
:mod:`aiostreams.transport.kafka_watchdog`) every ``interval`` seconds, from a task of
its own, so even a fetch loop stuck somewhere is noticed. On a verdict other than alive it

1. logs an ERROR saying what died and why, and reports ``/health`` degraded
   (:attr:`ClientWatchdog.degraded`) until every client is alive again;
2. for the consumer: hands the verdict to the fetch loop (:meth:`take`), which loses its
   tasks - closed without committing, as after a fence: the records since the last commit
   are processed again, under exactly-once their open transactions are aborted - and
   replaces the consumer by a fresh one that rejoins the group;
   for a producer: fails its output channel, which the next fetch answers by a rewind
   (its tasks start again from their last commit with a new producer).

It also counts fetches the client could not parse (:meth:`corrupt_fetch`; the transport
has already dropped the connection, so the next fetch is fresh). A partition with
``failure_limit`` unparsable fetches in a row, or ``failure_limit`` rebuilds of the
consumer in a row with no record fetched in between, stops the worker with
:class:`~aiostreams.errors.ClientFailedError` naming what kept failing: corrupt bytes never
crash-loop silently, and nothing corrupt is ever accepted (the transport returns no
record of an unparsable fetch).

Invariants: ``pending`` holds at most one verdict, never an alive one; a count is reset
only by progress (records fetched of that partition / of any partition).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from aiostreams.errors import ClientFailedError, CorruptFetchError, InstanceIdConflictError
from aiostreams.transport.kafka_watchdog import Liveness
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.watchdog")

__all__ = ["ClientWatchdog", "Watched"]

T = TypeVar("T")


@runtime_checkable
class Watched(Protocol):
    """A client the watchdog can ask (the Kafka consumer and producer are; the memory
    transport's are not: nothing of theirs runs apart from the worker)."""

    async def liveness(self, stall_after: float | None) -> Liveness: ...


class FailedChannel(Protocol):
    """An output channel as the watchdog sees it: its producer, and its error slot."""

    producer: Any
    error: BaseException | None
    name: str


class ClientWatchdog:
    """See the module docstring."""

    def __init__(self, *, interval: float | None, stall_after: float | None,
                 failure_limit: int) -> None:
        if interval is not None and interval <= 0:
            raise ValueError(f"client_watchdog_interval must be > 0 seconds, got {interval}")
        if stall_after is not None and stall_after <= 0:
            raise ValueError(f"client_stall_timeout must be > 0 seconds, got {stall_after}")
        if failure_limit < 1:
            raise ValueError(f"corrupt_fetch_limit must be >= 1, got {failure_limit}")
        self.interval = interval
        self.stall_after = stall_after
        self.failure_limit = failure_limit
        self.degraded: str | None = None
        """What is wrong with a client, while it is (for ``/health``); else None."""
        self.pending: Liveness | None = None
        self.rebuilds = 0  # consumer rebuilds since the last fetched record
        # the partitions the consumer was fetching at any rebuild since then
        self._streak: set[TopicPartition] = set()
        self.detections = 0  # verdicts other than alive, in all
        self._corrupt: dict[TopicPartition, int] = {}
        self._died = asyncio.Event()  # set while ``pending`` holds a verdict

    async def run(self, consumer: Any, channels: Any) -> None:
        """Check every ``interval`` seconds (``consumer()`` and ``channels()`` give what
        to check at that moment) until cancelled. Does nothing without an interval.

        Cancellation: propagates at once; nothing is left half-done."""
        if self.interval is None:
            return
        while True:
            await asyncio.sleep(self.interval)
            await self.check(consumer(), channels())

    async def check(self, consumer: Any, channels: Iterable[FailedChannel]) -> None:
        """One look at the consumer and the producers of ``channels``."""
        troubles: list[str] = []
        if isinstance(consumer, Watched):
            verdict = await consumer.liveness(self.stall_after)
            if not verdict.alive:
                troubles.append(verdict.reason)
                if self.pending is None:
                    self.detections += 1
                    if verdict.conflict is not None:
                        log.error("watchdog: %s", verdict.conflict)
                    else:
                        log.error("watchdog: the Kafka client died under the worker - %s. "
                                  "Rebuilding it: a fresh consumer rejoins the group and "
                                  "the tasks start again from their last commit",
                                  verdict.reason)
                    self.pending = verdict
                    self._died.set()
        for channel in list(channels):
            producer = channel.producer
            if not isinstance(producer, Watched):
                continue
            verdict = await producer.liveness(None)
            if verdict.alive:
                continue
            troubles.append(verdict.reason)
            if channel.error is None:
                self.detections += 1
                log.error("watchdog: the Kafka client died under the worker - %s. Starting "
                          "the tasks of %s again from their last commit with a new "
                          "producer", verdict.reason, channel.name)
                channel.error = ClientFailedError(verdict.reason)
        if self.pending is not None and self.pending.reason not in troubles:
            troubles.append(self.pending.reason)
        self.degraded = "; ".join(troubles) or None

    def take(self, fetching: Collection[TopicPartition] = ()) -> Liveness | None:
        """The verdict the fetch loop must act on by rebuilding the consumer, if any.
        Raises :class:`ClientFailedError` instead when ``failure_limit`` rebuilds in a row
        brought no record, naming every partition the consumer was ``fetching`` (assigned)
        at any of them - a rebuilt consumer's death may cut its assignment's tasks short
        of opening them all, so one look names only some; and
        :class:`InstanceIdConflictError` for a verdict with a ``conflict`` (another process
        took the member's instance id: a rebuilt consumer would take it back, and the two
        would fence each other for ever)."""
        verdict, self.pending = self.pending, None
        self._died.clear()
        if verdict is None:
            return None
        if verdict.conflict is not None:  # a rebuilt client would fence the other process
            raise InstanceIdConflictError(verdict.conflict)
        self.rebuilds += 1
        self._streak.update(fetching)
        if self.rebuilds > self.failure_limit:
            raise ClientFailedError(
                f"the Kafka consumer failed {self.rebuilds} times in a row, each time "
                f"rebuilt without fetching a record in between (corrupt_fetch_limit="
                f"{self.failure_limit}) while fetching partition(s) "
                f"{', '.join(map(str, sorted(self._streak))) or '(none assigned)'}; last: "
                f"{verdict.reason}. Nothing corrupt was "
                "accepted and nothing past the last commit is marked done. Check the "
                "network between this worker and the broker (a device corrupting bytes?) "
                "and the broker's logs")
        return verdict

    async def unless_dead(self, work: Coroutine[Any, Any, T]) -> T | None:
        """Await ``work`` (a fetch), or cancel it and return None as soon as the consumer
        is judged dead: a fetch can wait forever on a dead client (a rebalance callback
        waiting for a position only the dead fetcher would have found).

        Cancellation: ``work`` is cancelled too, and awaited."""
        job = asyncio.ensure_future(work)
        died = asyncio.ensure_future(self._died.wait())
        try:
            await asyncio.wait((job, died), return_when=asyncio.FIRST_COMPLETED)
        finally:
            died.cancel()
            if not job.done():
                job.cancel()
                await asyncio.wait((job,))
        return None if job.cancelled() else job.result()

    def fetched(self, batch: Mapping[TopicPartition, Sequence[object]]) -> None:
        """Progress: records arrived for the partitions of ``batch`` that have some."""
        for tp, records in batch.items():
            if records:
                self.rebuilds = 0
                self._streak.clear()
                self._corrupt.pop(tp, None)

    def corrupt_fetch(self, error: CorruptFetchError) -> None:
        """Count an unparsable fetch of ``error.partitions``; logged as a warning. Raises
        :class:`ClientFailedError` naming the partition that reached ``failure_limit``."""
        count, worst = 0, None
        for tp in error.partitions:
            self._corrupt[tp] = self._corrupt.get(tp, 0) + 1
            if self._corrupt[tp] > count:
                count, worst = self._corrupt[tp], tp
        log.warning("watchdog: %s (%d in a row for %s; the worker stops at %d)", error,
                    count, worst, self.failure_limit)
        if worst is not None and count >= self.failure_limit:
            raise ClientFailedError(
                f"{count} fetches in a row of partition {worst} could not be parsed "
                f"(corrupt_fetch_limit={self.failure_limit}), each retried on a fresh "
                f"connection; last: {error}. Nothing corrupt was accepted and nothing past "
                "the last commit is marked done. Check the network between this worker and "
                "the broker (a device corrupting bytes?) and the broker's logs for that "
                "partition")
