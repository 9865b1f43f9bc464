"""A request whose connection is reset under it: aiokafka writes it to a transport that is
already closed, and uvloop raises a bare ``RuntimeError``. The Kafka adapters turn that one
into :class:`BrokerUnavailableError`, which the worker rides out (at-least-once) instead of
stopping as it would for a bug; any other ``RuntimeError`` still propagates as it is.

(Seen in the reset-storm chaos test: a commit landing on a reset connection stopped the
worker with "the handler is closed".)"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError

from aiostreams.engine.outage import retriable
from aiostreams.errors import BrokerUnavailableError, TransportError
from aiostreams.transport import kafka_offsets
from aiostreams.transport.kafka_connection import closed_mid_request
from aiostreams.transport.kafka_offsets import commit_offsets, read_committed_offset
from aiostreams.types import TopicPartition

RESET = RuntimeError("unable to perform operation on <TCPTransport closed=True "
                     "reading=False 0x560d3ee08c50>; the handler is closed")
TP = TopicPartition("in", 0)


class ConsumerWhoseRequestsRaise:
    """The two aiokafka consumer calls the offsets module makes, raising ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def commit(self, offsets: Any) -> None:
        raise self.error

    async def committed(self, tp: Any) -> int:
        raise self.error


def test_only_the_closed_transport_error_counts_as_a_reset() -> None:
    assert closed_mid_request(RESET)
    assert not closed_mid_request(RuntimeError("dictionary changed size during iteration"))
    assert not closed_mid_request(ValueError("the handler is closed"))


async def test_a_commit_on_a_reset_connection_is_broker_trouble_the_worker_rides_out() -> None:
    consumer: Any = ConsumerWhoseRequestsRaise(RESET)
    with pytest.raises(BrokerUnavailableError, match="nothing was committed") as raised:
        await commit_offsets(consumer, {TP: 5}, group_id="app", owned=[TP])
    assert raised.value.__cause__ is RESET
    assert retriable(raised.value)


async def test_reading_a_committed_offset_on_a_reset_connection_is_broker_trouble() -> None:
    consumer: Any = ConsumerWhoseRequestsRaise(RESET)
    with pytest.raises(BrokerUnavailableError) as raised:
        await read_committed_offset(consumer, TP, "app")
    assert retriable(raised.value)


async def test_any_other_runtime_error_of_a_commit_propagates_as_it_is() -> None:
    bug = RuntimeError("dictionary changed size during iteration")
    consumer: Any = ConsumerWhoseRequestsRaise(bug)
    with pytest.raises(RuntimeError) as raised:
        await commit_offsets(consumer, {TP: 5}, group_id="app", owned=[TP])
    assert raised.value is bug


class ConsumerWhoseEndOffsetsFail:
    """The aiokafka consumer of ``list_offsets``' fallback: its own ``end_offsets`` fails
    with ``error`` (the off-fetch-path request is made to fail by the test)."""

    _client = None

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.asked = False

    async def end_offsets(self, partitions: Any) -> dict[Any, int]:
        self.asked = True
        raise self.error


async def test_a_reset_while_listing_changelog_end_offsets_is_broker_trouble(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: a commit's changelog end-offset lookup met a reset and the raw
    KafkaConnectionError stopped the worker (aiokafka's KafkaError is a RuntimeError, which
    the lookup took for a bug). It falls back to aiokafka's own lookup, and a failure there
    is a TransportError the worker rides out."""
    async def reset(*args: Any, **kwargs: Any) -> dict[TopicPartition, int]:
        raise KafkaConnectionError("Connection at 127.0.0.1:9092 closed")

    monkeypatch.setattr(kafka_offsets, "list_end_offsets", reset)
    consumer = ConsumerWhoseEndOffsetsFail(KafkaConnectionError("closed again"))
    with pytest.raises(TransportError) as raised:
        await kafka_offsets.list_offsets(consumer, "end", [TP],  # type: ignore[arg-type]
                                         read_committed=False)
    assert consumer.asked, "it did not fall back to aiokafka's own lookup"
    assert retriable(raised.value)
