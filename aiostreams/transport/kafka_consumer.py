"""The Kafka transport's consumer: aiokafka's ``AIOKafkaConsumer`` behind the Protocol.

Where aiokafka and the Protocol differ, this adapter bridges:

* rebalance callbacks run inside ``getmany`` (:mod:`~aiostreams.transport.kafka_rebalance`),
  empty ones are not made, and their exceptions propagate;
* ``assignment()`` is what the application has been told: a partition joins it just
  before ``on_partitions_assigned`` and leaves it just after ``on_partitions_revoked``, and
  ``getmany`` never returns records of a partition outside it;
* ``stop()`` runs ``on_partitions_revoked`` for what the consumer owns (aiokafka does not);
* a subscription or assignment naming a topic the broker does not have raises
  :class:`UnknownTopicError` from the next ``getmany`` (aiokafka would wait forever),
  and ``subscribe`` joins the group only once its topics are known to exist;
* commits are manual only (``enable_auto_commit=False``), timeouts are float seconds, and
  the rebalance timeout is ``max_poll_interval`` (as in Java; aiokafka defaults it to the
  session timeout): :mod:`~aiostreams.transport.kafka_aio_consumer`;
* aiokafka never resets a position by itself: a partition without a committed offset
  starts per ``auto_offset_reset`` and an out-of-range position is reset (loudly, counted
  in ``offset_resets``) or fails per ``offset_out_of_range``
  (:mod:`~aiostreams.transport.kafka_positions`);
* a failed fetch raises our errors, not aiokafka's
  (:mod:`~aiostreams.transport.kafka_fetch_errors`).

aiokafka's rebalancing is eager: ``on_partitions_revoked`` receives everything the member
owned and ``on_partitions_assigned`` its whole new assignment, even partitions it keeps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import (
    ConsumerStoppedError,
    CorruptRecordException,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.errors import InstanceIdConflictError, TransportError
from aiostreams.transport import lifecycle
from aiostreams.transport.base import ConsumerOptions, RebalanceListener
from aiostreams.transport.group_placement import PlacementReport, report_of
from aiostreams.transport.kafka_aio_consumer import new_aiokafka_consumer, stop_aiokafka
from aiostreams.transport.kafka_assignor import (
    AiostreamsAssignor,
    StandbyDelivery,
    assignment_strategy,
)
from aiostreams.transport.kafka_connection import KafkaOptions, KnownTopics, start_or_unavailable
from aiostreams.transport.kafka_consumer_queries import KafkaConsumerQueries, aio
from aiostreams.transport.kafka_fetch import fetch_unpaused, owned_records
from aiostreams.transport.kafka_fetch_errors import fetch_error, positions
from aiostreams.transport.kafka_instance_fence import instance_conflict_message
from aiostreams.transport.kafka_lease import install_lease, lease_generation
from aiostreams.transport.kafka_positions import KafkaPositions
from aiostreams.transport.kafka_rebalance import RebalanceBridge, RebalancePhase
from aiostreams.transport.lifecycle import ConsumerState
from aiostreams.transport.membership import MembershipLease
from aiostreams.transport.offset_reset import OffsetResets
from aiostreams.types import RawRecord, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["KafkaConsumer"]

_CLIENT_ERRORS = (KafkaError, TransportError, ConsumerStoppedError)


class KafkaConsumer(KafkaConsumerQueries):
    """A consumer of a Kafka cluster: a group member (``subscribe``) or manually assigned.

    Invariant: ``getmany`` returns records only of partitions in ``assignment()``, in offset
    order, each once (unless the consumer seeks back). Records aiokafka fetched for a
    partition the application does not own (yet) are put back with a seek.
    """

    def __init__(
        self,
        bootstrap: str,
        kafka_options: KafkaOptions,
        options: ConsumerOptions,
    ) -> None:
        self._bootstrap = bootstrap
        self._kafka = kafka_options
        self.options = options
        self._state = ConsumerState.CREATED
        self._consumer: AIOKafkaConsumer | None = None
        self._lease: MembershipLease | None = None
        self._bridge = RebalanceBridge()
        self._callback_lock = asyncio.Lock()
        self._polling = False
        # Group mode: the subscription asked for, and whether aiokafka has it yet.
        self._listener: RebalanceListener | None = None
        self._topics: frozenset[str] | None = None
        self._subscription_applied = False
        self._owned: frozenset[TopicPartition] = frozenset()
        # Manual mode.
        self._manual: frozenset[TopicPartition] | None = None
        self._topics_known = KnownTopics(bootstrap)
        self._positions = KafkaPositions(bootstrap, options)
        self._next_offsets = self._positions.next_offsets
        # Paused here, not in aiokafka: aiokafka drops what it has fetched for a partition
        # it pauses and fetches it again on resume (a megabyte per partition, every time
        # back-pressure toggles: wasted fetches, input gaps and a growing heap). Instead,
        # getmany asks aiokafka for the other partitions only, and what it holds stays.
        self._paused: set[TopicPartition] = set()
        self._assignor = AiostreamsAssignor(self._placement_report, lambda: self.generation)
        self._standbys = (StandbyDelivery(self._assignor)
                          if options.state_aware_assignment else None)

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (waiting up to ``connect_timeout`` for a broker, then raising
        :class:`~aiostreams.errors.BrokerUnavailableError`). A manual assignment made
        before takes effect at once; a subscription is joined by the first ``getmany``."""
        self._transition(ConsumerState.STARTED)
        consumer = new_aiokafka_consumer(self._bootstrap, self._kafka, self.options,
                                         assignment_strategy(self._assignor))
        try:
            await start_or_unavailable(
                consumer.start, consumer.stop, bootstrap=self._bootstrap,
                options=self._kafka, what=f"consumer {self.options.client_id!r}",
            )
        except BaseException:
            if self._state is ConsumerState.STARTED:
                self._transition(ConsumerState.STOPPING)
                self._transition(ConsumerState.STOPPED)
            raise
        if self._state is not ConsumerState.STARTED:  # stop() ran while we connected
            await consumer.stop()
            return
        self._consumer = consumer
        self._lease = install_lease(consumer, self._kafka.session_timeout,
                                    self._kafka.max_poll_interval,
                                    static=self.options.group_instance_id is not None)
        if self._manual is not None:
            consumer.assign([aio(tp) for tp in self._manual])

    async def stop(self) -> None:
        """Revoke everything owned (``on_partitions_revoked``), leave the group and close.

        A ``getmany`` waiting meanwhile returns ``{}``. If cancelled while the revoke
        callback runs, the consumer still leaves the group and ends up stopped. Idempotent.
        """
        if self._state in (ConsumerState.STOPPING, ConsumerState.STOPPED):
            return
        started = self._state is ConsumerState.STARTED
        self._transition(ConsumerState.STOPPING)
        self._bridge.wake()
        if self._standbys is not None:
            self._standbys.cancel()
        try:
            if started:
                async with self._callback_lock:
                    owned, listener = self._owned, self._listener
                    if owned and listener is not None:
                        try:
                            await listener.on_partitions_revoked(owned)
                        finally:
                            self._owned = frozenset()
        finally:
            self._bridge.close()  # after the callback: partitions move only once it returned
            if self._consumer is not None:
                await stop_aiokafka(self._consumer)
            self._transition(ConsumerState.STOPPED)

    # -- assignment ---------------------------------------------------------------------

    def subscribe(self, topics: Collection[str], listener: RebalanceListener) -> None:
        """Subscribe the group member to ``topics``; the next ``getmany`` checks that they
        exist (else :class:`UnknownTopicError`), joins the group and runs the callbacks."""
        lifecycle.check_subscribe(self._state, self.options, topics,
                                  assigned=self._manual is not None)
        self._topics = frozenset(topics)
        self._listener = listener
        self._subscription_applied = False
        self._topics_known.unverified.update(topics)
        self._bridge.wake()

    def assign(self, partitions: Collection[TopicPartition]) -> None:
        """Read exactly ``partitions``, with no group membership and no rebalances.

        Partitions kept from the previous assignment keep their positions; new ones start
        at the group's committed offset (when there is a group_id), else per
        ``auto_offset_reset``. Unknown topics raise from the next ``getmany``.
        """
        lifecycle.require_consumer_open(self._state, "assign")
        if self._topics is not None:
            raise TransportError(
                "this consumer subscribed to topics; subscribe and assign are exclusive, "
                "use a separate consumer for manual assignment"
            )
        for tp in partitions:
            if tp.partition < 0:
                raise ValueError(f"cannot assign {tp}: partition numbers start at 0")
        new = frozenset(TopicPartition(tp.topic, tp.partition) for tp in partitions)
        self._topics_known.unverified.update(tp.topic for tp in new)
        self._manual = new
        if self._consumer is not None:
            self._consumer.assign([aio(tp) for tp in new])
            for tp in new:  # aiokafka resets every position on assign; restore kept ones
                if tp in self._next_offsets:
                    self._consumer.seek(aio(tp), self._next_offsets[tp])
        for tp in self._next_offsets.keys() - new:
            del self._next_offsets[tp]
        self._paused &= new
        self._bridge.wake()

    def assignment(self) -> frozenset[TopicPartition]:
        return self._manual if self._manual is not None else self._owned

    def owns_assignment(self) -> bool:
        """Whether this member may still act as the owner of ``assignment()`` (see
        :mod:`~aiostreams.transport.membership`); when it may not, it asks to rejoin, and
        the group then says what it owns (revoking everything first)."""
        consumer, lease = self._consumer, self._lease
        if consumer is None or lease is None:
            return True  # no group: a manual assignment cannot be taken away
        if lease.valid(lease_generation(consumer)):
            return True
        if self._owned and not lease.taken_over:  # taken over: never rejoin (getmany raises)
            consumer._coordinator.request_rejoin()
        return False

    @property
    def generation(self) -> int:
        """The group generation this member is in (-1: none yet, or no group)."""
        return lease_generation(self._consumer) if self._lease is not None else -1

    @property
    def offset_resets(self) -> OffsetResets:
        return self._positions.resets

    # -- reading ------------------------------------------------------------------------

    async def getmany(
        self, timeout: float, max_records: int | None = None
    ) -> dict[TopicPartition, list[RawRecord]]:
        """Return records ready now, else wait up to ``timeout`` seconds for some.

        Runs pending rebalance callbacks first (and again if one arrives while waiting).
        At most ``max_records`` (default ``max_poll_records``) records in total. Raises
        :class:`~aiostreams.errors.OffsetOutOfRangeError` for a position outside its
        partition's log under ``offset_out_of_range="fail"`` (the position stays), and
        :class:`~aiostreams.errors.InstanceIdConflictError` once another process took this
        static member's ``group_instance_id`` (:mod:`~aiostreams.transport.kafka_lease`).

        Cancellation: positions only advance when records are returned, so a cancelled
        call loses nothing. If cancelled inside ``on_partitions_revoked`` the partitions
        are released all the same (as Kafka completes a rebalance whatever the callback
        does); if cancelled inside ``on_partitions_assigned`` they stay assigned.
        """
        consumer = self._require_started("getmany")
        lifecycle.check_getmany(timeout, max_records, self._polling)
        if self._lease is not None and self._lease.taken_over:
            raise InstanceIdConflictError(instance_conflict_message(
                self.options.group_id or "", self.options.group_instance_id))
        self._polling = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            return await self._poll(consumer, deadline, max_records)
        finally:
            self._polling = False

    async def _poll(
        self, consumer: AIOKafkaConsumer, deadline: float, max_records: int | None
    ) -> dict[TopicPartition, list[RawRecord]]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self._apply_subscription(consumer)
            except _CLIENT_ERRORS:
                if self._state is ConsumerState.STARTED:
                    raise
                return {}  # stop() closed the client under this call: as if woken by it
            await self._run_callbacks()
            if self._state is not ConsumerState.STARTED:
                return {}
            remaining = max(deadline - loop.time(), 0.0)
            try:
                fetched = await self._fetch(consumer, remaining, max_records)
            except UnicodeDecodeError as exc:  # a header name aiokafka cannot decode
                return await self._read_past_unparsable(consumer, max_records, exc)
            except _CLIENT_ERRORS:
                if self._state is ConsumerState.STARTED:
                    raise
                return {}
            await self._run_callbacks()  # those that came with the records go first
            if self._state is not ConsumerState.STARTED:
                return {}
            records = owned_records(consumer, fetched, self.assignment(), self._next_offsets)
            if records or loop.time() >= deadline:
                return records

    async def _fetch(
        self, consumer: AIOKafkaConsumer, timeout: float, max_records: int | None
    ) -> dict[AioTopicPartition, list[Any]]:
        """One fetch (:func:`~aiostreams.transport.kafka_fetch.fetch_unpaused`); aiokafka's
        position reports go to :meth:`KafkaPositions.recover`, its errors become ours
        (:func:`~aiostreams.transport.kafka_fetch_errors.fetch_error`)."""
        before = positions(consumer)
        try:
            return await fetch_unpaused(consumer, self._paused, self._bridge.arrival(),
                                        timeout, max_records)
        except (NoOffsetForPartitionError, OffsetOutOfRangeError) as exc:
            report = exc  # answered outside the handler: an error it raises is our own
        except (KafkaError, RuntimeError) as exc:  # a KafkaError is a RuntimeError
            if isinstance(exc, CorruptRecordException):
                # aiokafka has moved past the good records it drained before the corrupt
                # batch (and dropped them with the exception): back to what we returned,
                # and refetch
                for aio_tp, offset in before.items():
                    consumer.seek(aio_tp, offset)
                self._drop_connections()
            error = fetch_error(exc, bootstrap=self._bootstrap, group_id=self.options.group_id,
                                assignment=self.assignment())
            if error is None:
                raise
            raise error from exc
        await self._positions.recover(consumer, report, self.assignment(), timeout)
        return {}

    async def _read_past_unparsable(
        self, consumer: AIOKafkaConsumer, max_records: int | None, error: Exception
    ) -> dict[TopicPartition, list[RawRecord]]:
        """After aiokafka failed to parse a fetched record: read every fetchable partition
        with the tolerant parser (:meth:`KafkaPositions.read_tolerantly`)."""
        fetchable = sorted(tp for tp in self.assignment() if tp not in self._paused)
        log.warning("a fetched record of %s cannot be parsed by aiokafka (%s); reading "
                    "those partitions with the tolerant parser", fetchable, error)
        budget = self.options.max_poll_records if max_records is None else max_records
        return await self._positions.read_tolerantly(consumer, fetchable, budget)

    async def _apply_subscription(self, consumer: AIOKafkaConsumer) -> None:
        await self._topics_known.verify(consumer._client)
        if self._topics is not None and not self._subscription_applied:
            consumer.subscribe(topics=sorted(self._topics), listener=self._bridge)
            self._subscription_applied = True

    async def _run_callbacks(self) -> None:
        """Run the application's listener for every callback aiokafka is waiting on."""
        async with self._callback_lock:
            while self._state is ConsumerState.STARTED:
                pending = self._bridge.take()
                if pending is None:
                    return
                try:
                    await self._run_callback(pending.phase, pending.partitions)
                finally:
                    pending.release()

    async def _run_callback(
        self, phase: RebalancePhase, partitions: frozenset[TopicPartition]
    ) -> None:
        listener = self._listener
        assert listener is not None, "aiokafka called back a consumer that never subscribed"
        if phase is RebalancePhase.REVOKED:
            revoked = partitions & self._owned
            if revoked:
                try:
                    await listener.on_partitions_revoked(revoked)
                finally:
                    self._owned -= revoked
                    self._paused -= revoked
                    for tp in revoked:
                        self._next_offsets.pop(tp, None)
        else:
            assigned = partitions - self._owned
            self._owned |= partitions
            if assigned:
                await listener.on_partitions_assigned(assigned)
            if self._standbys is not None:
                await self._standbys.deliver(listener, self._request_rejoin)

    def _request_rejoin(self) -> None:
        consumer = self._consumer
        if consumer is not None and self._state is ConsumerState.STARTED \
                and consumer._coordinator is not None:
            consumer._coordinator.request_rejoin()

    def _placement_report(self) -> PlacementReport | None:
        return report_of(self._listener, state_aware=self.options.state_aware_assignment)

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        """``getmany`` returns nothing of ``partitions`` until they are resumed; records
        already fetched for them are kept, not fetched again (see ``_paused``)."""
        self._require_client("pause")
        for tp in partitions:
            self._require_assigned(tp, "pause")
        self._paused.update(partitions)

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        self._require_client("resume")
        for tp in partitions:
            self._require_assigned(tp, "resume")
        self._paused.difference_update(partitions)
        self._bridge.wake()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        consumer = self._require_client("seek")
        self._require_assigned(tp, "seek")
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to offset {offset}: offsets start at 0")
        for aio_tp in self._in_aiokafka_assignment(consumer, (tp,)):
            consumer.seek(aio_tp, offset)
        self._next_offsets[tp] = offset
        self._bridge.wake()
