"""What a failed fetch of the Kafka consumer raises: aiokafka's exceptions as ours, each
saying what happened and what to do.

* a record batch that failed its CRC check: :class:`~aiostreams.errors.CorruptFetchError`,
  naming the partitions (the consumer first moves back to the positions it had returned,
  :func:`positions`, and drops its connections, so the fetch is retried);
* a group whose members assign with another protocol:
  :class:`~aiostreams.errors.GroupProtocolError`, saying how to upgrade;
* any other Kafka error: :class:`~aiostreams.errors.TransportError`, with the assignment;
* a connection closed mid-request: :class:`~aiostreams.errors.BrokerUnavailableError`.

aiokafka's position reports (no offset, out of range) are not errors here: the consumer
answers them (:mod:`~aiostreams.transport.kafka_positions`). Invariant:
:func:`fetch_error` is pure - it changes nothing, and returns None for an exception that
is not aiokafka's to translate (the caller re-raises it as it is).
"""

from __future__ import annotations

from collections.abc import Collection

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CorruptRecordException, InconsistentGroupProtocolError, KafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.errors import (
    BrokerUnavailableError,
    CorruptFetchError,
    GroupProtocolError,
    TransportError,
)
from aiostreams.transport.kafka_assignor import OLD_PROTOCOLS, PROTOCOL_NAME
from aiostreams.transport.kafka_connection import closed_mid_request
from aiostreams.types import TopicPartition

__all__ = ["fetch_error", "positions"]


def fetch_error(exc: Exception, *, bootstrap: str, group_id: str | None,
                assignment: Collection[TopicPartition]) -> TransportError | None:
    """Our error for ``exc``, raised by a fetch from ``bootstrap`` of a consumer of
    ``group_id`` assigned ``assignment``; None when ``exc`` is not one to translate."""
    if isinstance(exc, CorruptRecordException):
        return CorruptFetchError(
            f"a record batch fetched from {bootstrap} failed its CRC check "
            f"({exc}); nothing of it was accepted, the connection was dropped and the "
            "fetch will be retried", partitions=_named_in(str(exc), assignment))
    if isinstance(exc, InconsistentGroupProtocolError):
        return GroupProtocolError(
            f"the group {group_id!r} refused this worker: its members "
            f"assign partitions with a protocol other than {PROTOCOL_NAME!r}, the one "
            f"every aiostreams worker of this version offers - members of an older "
            f"version ({' or '.join(map(repr, OLD_PROTOCOLS))}, or round-robin before "
            f"them) or another kind of client. A one-time upgrade: stop every older "
            f"member of the group, then start this worker again")
    if isinstance(exc, KafkaError):
        return TransportError(
            f"fetching from {bootstrap} failed: {exc!r}; "
            f"assignment: {sorted(map(str, assignment))}")
    if isinstance(exc, RuntimeError) and closed_mid_request(exc):
        return BrokerUnavailableError(
            f"fetching from {bootstrap} failed: the connection closed "
            f"mid-request ({exc})")
    return None


def _named_in(text: str, assignment: Collection[TopicPartition]
              ) -> tuple[TopicPartition, ...]:
    """The assigned partitions ``text`` names (aiokafka names one in its errors as
    ``TopicPartition(topic='t', partition=0)``), else all the assigned ones."""
    named = tuple(tp for tp in sorted(assignment)
                  if f"topic={tp.topic!r}, partition={tp.partition})" in text)
    return named or tuple(sorted(assignment))


def positions(consumer: AIOKafkaConsumer) -> dict[AioTopicPartition, int]:
    """aiokafka's valid positions of its assigned partitions (no I/O): at the start of a
    fetch, one past the last record returned of each."""
    current = consumer._subscription.subscription
    assignment = None if current is None else current.assignment
    if assignment is None:
        return {}
    return {tp: assignment.state_value(tp).position for tp in assignment.tps
            if assignment.state_value(tp).has_valid_position}
