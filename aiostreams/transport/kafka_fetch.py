"""One aiokafka fetch as the Kafka consumer's ``getmany`` needs it: bounded in time,
given up on when a rebalance callback arrives, aware of the partitions paused here, and
turned into the records the application may see.

Pausing stays out of aiokafka: aiokafka drops what it has fetched for a partition it pauses
and fetches it again on resume (a megabyte per partition, every time back-pressure
toggles). Instead :func:`fetch_unpaused` asks aiokafka for the other partitions only, and
what it holds for the paused ones stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.transport.kafka_connection import to_ms
from aiostreams.types import RawRecord, TopicPartition

__all__ = ["FETCH_GRACE", "fetch_unpaused", "owned_records"]

FETCH_GRACE = 0.05
"""Beyond its timeout, how long a fetch may take before ``getmany`` stops waiting for it
(aiokafka's own ``getmany`` blocks without a timeout while a rebalance is in progress)."""


async def fetch_unpaused(
    consumer: AIOKafkaConsumer, paused: Collection[TopicPartition],
    interrupt: asyncio.Future[None], timeout: float, max_records: int | None,
) -> dict[AioTopicPartition, list[Any]]:
    """aiokafka's getmany of every partition not ``paused``, given up on (``{}``) when
    ``interrupt`` is done (a callback arrived, stop began) or ``timeout`` passes. Raises
    what aiokafka's getmany raises.

    Cancellation: cancelling aiokafka's fetch loses nothing (it drains its buffer without
    awaiting, so a cancelled fetch has taken no records); ``interrupt`` is never cancelled.
    """
    if paused:
        fetchable = [aio_tp for aio_tp in consumer.assignment()
                     if TopicPartition(aio_tp.topic, aio_tp.partition) not in paused]
        if not fetchable:  # everything paused (aiokafka would read "no partitions" as all)
            await asyncio.wait((interrupt,), timeout=timeout)
            return {}
        fetch = asyncio.ensure_future(
            consumer.getmany(*fetchable, timeout_ms=to_ms(timeout), max_records=max_records))
    else:
        fetch = asyncio.ensure_future(
            consumer.getmany(timeout_ms=to_ms(timeout), max_records=max_records))
    try:
        await asyncio.wait((fetch, interrupt), timeout=timeout + FETCH_GRACE,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not fetch.done():
            fetch.cancel()
            await asyncio.wait((fetch,))
    if fetch.cancelled():
        return {}
    result: dict[AioTopicPartition, list[Any]] = fetch.result()
    return result


def owned_records(
    consumer: AIOKafkaConsumer, fetched: dict[AioTopicPartition, list[Any]],
    owned: Collection[TopicPartition], next_offsets: dict[TopicPartition, int],
) -> dict[TopicPartition, list[RawRecord]]:
    """The records of ``fetched`` the application owns, as :class:`RawRecord`; advances
    ``next_offsets``. Records of a partition not (or no longer) announced to the
    application are put back with a seek, for whoever owns it next (this consumer
    included)."""
    records: dict[TopicPartition, list[RawRecord]] = {}
    for aio_tp, batch in fetched.items():
        tp = TopicPartition(aio_tp.topic, aio_tp.partition)
        if tp not in owned:
            if aio_tp in consumer.assignment():
                consumer.seek(aio_tp, batch[0].offset)
            continue
        records[tp] = [
            RawRecord(r.topic, r.partition, r.offset, r.timestamp / 1000.0, r.key,
                      r.value, r.headers if type(r.headers) is tuple else tuple(r.headers))
            for r in batch
        ]
        next_offsets[tp] = batch[-1].offset + 1
    return records
