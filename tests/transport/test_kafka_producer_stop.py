"""Stopping a producer the network broke retrieves every delivery's outcome (issue 33: at
stop after resets under exactly-once, 8 x "Future exception was never retrieved" from the
client's sender): whether its deliveries failed before the stop or fail as aiokafka closes
(a dead sender fails every pending batch then), and whether aiokafka's abort and stop
fail or not."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaError

from aiostreams.transport.kafka_connection import KafkaOptions
from aiostreams.transport.kafka_producer import KafkaProducer
from aiostreams.transport.lifecycle import ProducerState


class BrokenAioProducer:
    """An aiokafka producer whose sender died: its abort asserts, its stop fails every
    pending batch and then raises what uvloop raised."""

    def __init__(self, pending: list[asyncio.Future[Any]]) -> None:
        self.pending = pending

    async def abort_transaction(self) -> None:
        raise AssertionError("Invalid state transition TransactionState.FATAL_ERROR -> "
                             "TransactionState.ABORTING_TRANSACTION")

    async def stop(self) -> None:
        for future in self.pending:
            future.set_exception(KafkaError("Unexpected error during batch delivery"))
        raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; "
                           "the handler is closed")


def lost_exceptions() -> list[dict[str, Any]]:
    """Install an exception handler on the running loop that collects what it reports."""
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(
        context))
    return reported


async def test_stopping_a_broken_transactional_producer_leaves_no_outcome_unretrieved(
) -> None:
    reported = lost_exceptions()
    loop = asyncio.get_running_loop()
    failed, pending = loop.create_future(), loop.create_future()
    failed.set_exception(KafkaConnectionError("Connection at 127.0.0.1:1 closed"))
    producer = KafkaProducer("127.0.0.1:1", KafkaOptions(), transactional_id="app-0_0")
    producer._producer = BrokenAioProducer([pending])  # type: ignore[assignment]
    producer._state = ProducerState.IN_TRANSACTION
    producer._deliveries = [("out", failed), ("out", pending)]
    with pytest.raises(RuntimeError, match="handler is closed"):
        await producer.stop()
    await asyncio.sleep(0)  # the retrieving callbacks run in the next loop turn
    del failed, pending, producer
    gc.collect()
    assert [c["message"] for c in reported] == []
