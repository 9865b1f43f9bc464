"""What a Kafka consumer answers without fetching: positions, high watermarks, committed
and listed offsets (:mod:`~aiostreams.transport.kafka_offsets`), the watchdog's liveness
verdict (:mod:`~aiostreams.transport.kafka_watchdog`), and the state checks every call
makes. The base of :class:`~aiostreams.transport.kafka_consumer.KafkaConsumer`, which owns
the fields declared here and the fetch path.

Invariant: every query of a partition first checks that the application owns it
(``_require_assigned``), and every call that needs aiokafka checks the consumer's state
(``_require_client``): a call in the wrong state raises, it never waits forever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from aiokafka import AIOKafkaConsumer
from aiokafka.client import ConnectionGroup
from aiokafka.conn import CloseReason
from aiokafka.errors import IllegalStateError, KafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.errors import InstanceIdConflictError, TransportError
from aiostreams.transport import lifecycle
from aiostreams.transport.base import ConsumerOptions
from aiostreams.transport.kafka_connection import KafkaOptions, KnownTopics
from aiostreams.transport.kafka_instance_fence import instance_conflict_message, is_instance_fence
from aiostreams.transport.kafka_offsets import (
    commit_offsets,
    list_offsets,
    read_committed_offset,
)
from aiostreams.transport.kafka_positions import KafkaPositions
from aiostreams.transport.kafka_watchdog import (
    ALIVE,
    Liveness,
    broker_answers,
    judge,
    observe_consumer,
    suspects_stall,
)
from aiostreams.transport.lifecycle import ConsumerState
from aiostreams.types import TopicPartition

__all__ = ["KafkaConsumerQueries", "aio"]


def aio(tp: TopicPartition) -> AioTopicPartition:
    return AioTopicPartition(tp.topic, tp.partition)


class KafkaConsumerQueries:
    """See the module docstring; the fields are set by the subclass's ``__init__``."""

    _bootstrap: str
    _kafka: KafkaOptions
    options: ConsumerOptions
    _state: ConsumerState
    _consumer: AIOKafkaConsumer | None
    _topics_known: KnownTopics
    _positions: KafkaPositions

    def assignment(self) -> frozenset[TopicPartition]:
        raise NotImplementedError

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark from the last fetch response for ``tp`` (no I/O), or None."""
        consumer = self._consumer
        if consumer is None or tp not in self.assignment():
            return None
        try:
            value = consumer.highwater(aio(tp))
        except (KafkaError, IllegalStateError, AssertionError):
            return None
        return value if isinstance(value, int) else None

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record ``getmany`` returns for ``tp`` (waits, up to
        ``request_timeout``, for the committed offset when none was read yet)."""
        consumer = self._require_client("ask the position of")
        self._require_assigned(tp, "ask the position of")
        # an unknown topic: aiokafka would wait request_timeout, then fail
        await self._topics_known.verify(consumer._client)
        try:
            await self._positions.start_if_unpositioned(consumer, aio(tp))
            position: int = await consumer.position(aio(tp))
        except (KafkaError, IllegalStateError) as exc:
            raise TransportError(f"cannot get the position of {tp}: {exc!r}") from exc
        return position

    # -- offsets (see kafka_offsets) -----------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (next offset to read) for the group; all or none are stored.

        Raises :class:`CommitFailedError` for a partition this consumer does not hold now,
        or when the group rebalanced under it; :class:`InstanceIdConflictError` when
        another process took this member's ``group_instance_id``.
        """
        consumer = self._require_client("commit")
        group_id = self.options.require_group("commit")
        try:
            await commit_offsets(consumer, offsets, group_id=group_id,
                                 owned=self.assignment())
        except TransportError as exc:
            if not is_instance_fence(exc):
                raise
            raise InstanceIdConflictError(instance_conflict_message(
                group_id, self.options.group_instance_id)) from exc

    async def committed(self, tp: TopicPartition) -> int | None:
        if self.options.group_id is None:
            return None
        consumer = self._require_client("read the committed offset")
        return await read_committed_offset(consumer, tp, self.options.group_id)

    async def end_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The offset after the last record (the last stable offset for read_committed)."""
        return await self._list_offsets("end", partitions)

    async def beginning_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return await self._list_offsets("beginning", partitions)

    async def _list_offsets(self, which: str, partitions: Collection[TopicPartition]
                            ) -> dict[TopicPartition, int]:
        consumer = self._require_client(f"read {which} offsets")
        await self._topics_known.check_partitions(consumer._client, partitions)
        return await list_offsets(consumer, which, partitions,
                                  read_committed=self.options.read_committed)

    # -- liveness (see kafka_watchdog) --------------------------------------------------

    async def liveness(self, stall_after: float | None) -> Liveness:
        """The watchdog's verdict on the aiokafka consumer: a background task dead, or
        no fetch response for ``stall_after`` seconds while the broker answers a probe on
        a connection of its own (asked only then). Alive before start and after stop."""
        consumer = self._consumer
        if consumer is None or self._state is not ConsumerState.STARTED:
            return ALIVE
        seen = observe_consumer(consumer, f"consumer {self.options.client_id!r}")
        answers = None
        if suspects_stall(seen, stall_after):
            answers = await broker_answers(
                self._kafka.client_kwargs(self._bootstrap, self.options.client_id),
                self._kafka.request_timeout)
        verdict = judge(seen, stall_after=stall_after, answers=answers)
        if verdict.dead and is_instance_fence(verdict.reason):
            group = self.options.group_id or ""
            return dataclasses.replace(verdict, conflict=instance_conflict_message(
                group, self.options.group_instance_id))
        return verdict

    def _drop_connections(self) -> None:
        """Close the client's fetch connections (not the group coordinator's), so the
        next fetch opens a fresh one."""
        client = getattr(self._consumer, "_client", None)
        for (_, group), conn in list(getattr(client, "_conns", {}).items()):
            if group == ConnectionGroup.DEFAULT:
                conn.close(reason=CloseReason.CONNECTION_BROKEN)

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    def _in_aiokafka_assignment(
        consumer: AIOKafkaConsumer, partitions: Collection[TopicPartition]
    ) -> list[AioTopicPartition]:
        """The partitions aiokafka holds too (during a rebalance the application may still
        own partitions aiokafka already gave up; acting on those is moot)."""
        held = consumer.assignment()
        return [aio_tp for aio_tp in map(aio, partitions) if aio_tp in held]

    def _transition(self, new: ConsumerState) -> None:
        lifecycle.check_consumer_transition(self._state, new)
        self._state = new

    def _require_client(self, action: str) -> AIOKafkaConsumer:
        """The aiokafka consumer, also while ``stop()`` runs ``on_partitions_revoked`` (the
        callback commits what was processed: that must work)."""
        if self._state is ConsumerState.STOPPING and self._consumer is not None:
            return self._consumer
        return self._require_started(action)

    def _require_started(self, action: str) -> AIOKafkaConsumer:
        lifecycle.require_consumer_started(self._state, action)
        if self._consumer is None:
            raise TransportError(
                f"cannot {action}: the consumer is still connecting; await its start() first")
        return self._consumer

    def _require_assigned(self, tp: TopicPartition, action: str) -> None:
        if tp not in self.assignment():
            raise TransportError(
                f"cannot {action} {tp}: it is not assigned to this consumer "
                f"(assignment: {sorted(map(str, self.assignment()))})"
            )
