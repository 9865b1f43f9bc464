"""Purging consumed records from repartition topics, as Kafka Streams does.

Repartition topics are created with ``retention.ms=-1`` (see
:mod:`aiostreams.topology.internal_topics`): a record written there must stay until the
downstream task has processed it, however old its timestamp - with a time-based retention,
reprocessing old data through ``group_by`` would lose records the broker deleted before
they were read. So the topics never expire by time, and the app deletes what it has
*committed* instead (Kafka's delete-records), at most every ``interval`` seconds after a
commit (Kafka Streams' ``repartition.purge.interval.ms``, 30 s by default).

Invariant: a purge never deletes at or above an offset this worker has committed for the
partition, so nothing unprocessed is lost. A failed purge is logged and retried at the
next interval; it never fails the app (the records only stay longer).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from aiostreams.errors import AiostreamsError
from aiostreams.runtime.clock import Clock
from aiostreams.transport.base import Admin, Transport
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.purge")


class RepartitionPurger:
    """Deletes committed records of ``topics`` (the app's repartition topics)."""

    def __init__(self, transport: Transport, topics: Collection[str], clock: Clock,
                 interval: float) -> None:
        self._transport = transport
        self._topics = frozenset(topics)
        self._clock = clock
        self._interval = interval
        self._admin: Admin | None = None
        self._last: float | None = None
        self._purged: dict[TopicPartition, int] = {}

    async def after_commit(self, committed: Mapping[TopicPartition, int]) -> None:
        """Purge below ``committed`` (this worker's committed offsets) if the interval has
        passed since the last purge. Cancellation: stops the request; nothing is lost."""
        if not self._topics:
            return
        now = self._clock.monotonic()
        if self._last is not None and now - self._last < self._interval:
            return
        self._last = now
        before = {tp: offset for tp, offset in committed.items()
                  if tp.topic in self._topics and offset > self._purged.get(tp, 0)}
        if not before:
            return
        try:
            if self._admin is None:
                admin = self._transport.admin()
                await admin.start()
                self._admin = admin
            await self._admin.delete_records(before)
        except AiostreamsError as error:
            log.warning("could not purge consumed records of repartition topics %s (will "
                        "try again in %.0fs): %s", sorted(map(str, before)), self._interval,
                        error)
            return
        self._purged.update(before)

    async def stop(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.stop()
