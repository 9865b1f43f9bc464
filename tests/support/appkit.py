"""Helpers for app-level tests on any transport: produce input, read output."""

from __future__ import annotations

import asyncio
import itertools

from aiostreams.transport.base import Consumer, IsolationLevel, TopicSpec, Transport
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


async def create_topic(transport: Transport, name: str, partitions: int) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(name, partitions)])
    finally:
        await admin.stop()


async def produce(transport: Transport, topic: str,
                  items: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = transport.producer()
    await producer.start()
    try:
        for i in range(0, len(items), 5000):
            await producer.send_batch([OutgoingRecord(topic, k, v)
                                       for k, v in items[i:i + 5000]])
        await producer.flush()
    finally:
        await producer.stop()


async def _reader_from_start(transport: Transport, topic: str,
                             read_committed: bool) -> Consumer:
    """A started consumer (no group) assigned to every partition of ``topic``, at offset 0."""
    admin = transport.admin()
    await admin.start()
    try:
        partitions = await admin.partitions_for(topic)
    finally:
        await admin.stop()
    assert partitions is not None, f"topic {topic} does not exist"
    consumer = transport.consumer(
        None, isolation_level=(IsolationLevel.READ_COMMITTED if read_committed
                               else IsolationLevel.READ_UNCOMMITTED))
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    return consumer


async def read_until_all_seen(transport: Transport, topic: str, values: set[bytes], *,
                              timeout: float = 60.0,
                              read_committed: bool = False) -> list[RawRecord]:
    """Read ``topic`` until every value in ``values`` has appeared (duplicates allowed, as
    at-least-once delivers them), then for a moment more; return everything read."""
    consumer = await _reader_from_start(transport, topic, read_committed)
    got: list[RawRecord] = []
    missing = set(values)
    try:
        try:
            async with asyncio.timeout(timeout):
                while missing:
                    batch = await consumer.getmany(0.5)
                    for records in batch.values():
                        got.extend(records)
                        missing.difference_update(r.value for r in records)
        except TimeoutError:
            raise AssertionError(
                f"{len(missing)} value(s) never arrived in {topic} within {timeout}s, "
                f"e.g. {sorted(missing)[:5]}") from None
        extra = await consumer.getmany(0.2)
        got.extend(r for records in extra.values() for r in records)
    finally:
        await consumer.stop()
    return got


async def read_exactly(transport: Transport, topic: str, count: int, *,
                       timeout: float = 60.0, read_committed: bool = False) -> list[RawRecord]:
    """Read ``count`` records from every partition of ``topic`` (waiting for them to arrive),
    then check briefly that no more than ``count`` are there."""
    consumer = await _reader_from_start(transport, topic, read_committed)
    got: list[RawRecord] = []
    try:
        async with asyncio.timeout(timeout):
            while len(got) < count:
                batch = await consumer.getmany(0.5)
                for records in batch.values():
                    got.extend(records)
        extra = await consumer.getmany(0.2)
        got.extend(r for records in extra.values() for r in records)
    finally:
        await consumer.stop()
    return got
