"""A position outside its partition's log is reset per ``offset_out_of_range``, loudly, or
fails: the same on ``memory://`` and on a real Kafka broker (the ``kafka`` parameter).

Each test commits a group's offset, then moves the log from under it (delete-records, or
a commit past the end), and reads with a consumer of that group.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest

from aiostreams.errors import OffsetOutOfRangeError
from aiostreams.transport.base import Consumer, TopicSpec, Transport
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.offset_reset import ResetReason
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

WITHIN = 60.0
"""Seconds a real broker gets to answer a fetch with the out-of-range error."""
RESET_LOG = "aiostreams.offset_reset"


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def transport(request: pytest.FixtureRequest) -> Transport:
    if request.param == "memory":
        return MemoryTransport(MemoryBroker())
    from aiostreams.transport.kafka import KafkaTransport

    return KafkaTransport(request.getfixturevalue("kafka_bootstrap"))


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Callable[[str], str]:
    test = request.node.originalname.removeprefix("test_")[:40].replace("_", "-")
    return lambda prefix: f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def clients() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def log_of(transport: Transport, topic: str, records: int) -> TopicPartition:
    """A one-partition topic holding ``records`` records (offsets 0..records-1)."""
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(topic, 1)])
    finally:
        await admin.stop()
    producer = transport.producer()
    await producer.start()
    try:
        await producer.send_batch([OutgoingRecord(topic, None, b"%d" % i)
                                   for i in range(records)])
        await producer.flush()
    finally:
        await producer.stop()
    return TopicPartition(topic, 0)


async def delete_below(transport: Transport, tp: TopicPartition, offset: int) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.delete_records({tp: offset})
    finally:
        await admin.stop()


async def member(transport: Transport, clients: AsyncExitStack, group: str,
                 tp: TopicPartition, *, commit: int | None = None, **options: Any) -> Consumer:
    """A started consumer of ``group`` reading ``tp`` (assigned), after committing
    ``commit`` for the group when given."""
    consumer = transport.consumer(group, **options)
    await consumer.start()
    clients.push_async_callback(consumer.stop)
    consumer.assign([tp])
    if commit is not None:
        await consumer.commit({tp: commit})
    return consumer


async def read_until(consumer: Consumer, done: Callable[[list[RawRecord]], bool]
                     ) -> list[RawRecord]:
    seen: list[RawRecord] = []
    deadline = time.monotonic() + WITHIN
    while not done(seen):
        assert time.monotonic() < deadline, f"nothing within {WITHIN}s: {seen}"
        for records in (await consumer.getmany(0.2)).values():
            seen.extend(records)
    return seen


async def committed_then_deleted(transport: Transport, clients: AsyncExitStack,
                                 unique: Callable[[str], str]) -> tuple[TopicPartition, str]:
    """10 records, the group committed at 3, then records below 6 deleted."""
    tp = await log_of(transport, unique("t"), 10)
    group = unique("g")
    committer = await member(transport, clients, group, tp, commit=3)
    await committer.stop()
    await delete_below(transport, tp, 6)
    return tp, group


def reset_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == RESET_LOG and r.levelno == logging.WARNING]


async def test_deleted_records_are_skipped_to_the_log_start_with_a_warning_and_a_count(
    transport: Transport, clients: AsyncExitStack, unique: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tp, group = await committed_then_deleted(transport, clients, unique)
    consumer = await member(transport, clients, group, tp, offset_out_of_range="earliest")

    records = await read_until(consumer, lambda seen: len(seen) >= 4)

    assert [r.offset for r in records] == [6, 7, 8, 9]
    [line] = reset_lines(caplog)
    assert f"offset 3 of {tp.topic}[0] is out of range (the log holds 6..10)" in line
    assert "3 records (offsets 3..5) were deleted" in line
    assert "reset 3 -> 6" in line and "3 records skipped, 0 read again" in line
    assert consumer.offset_resets.counts == {(tp.topic, 0, ResetReason.DELETED): 1}


async def test_latest_policy_skips_what_is_left_and_reads_from_the_log_end(
    transport: Transport, clients: AsyncExitStack, unique: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tp, group = await committed_then_deleted(transport, clients, unique)
    consumer = await member(transport, clients, group, tp, offset_out_of_range="latest")

    await read_until(consumer, lambda seen: consumer.offset_resets.total == 1)
    producer = transport.producer()
    await producer.start()
    clients.push_async_callback(producer.stop)
    await producer.send_batch([OutgoingRecord(tp.topic, None, b"after")])
    await producer.flush()
    records = await read_until(consumer, lambda seen: len(seen) >= 1)

    assert [(r.offset, r.value) for r in records] == [(10, b"after")]
    [line] = reset_lines(caplog)
    assert "reset 3 -> 10" in line and "7 records skipped" in line


async def test_fail_policy_raises_naming_the_gap_and_moves_nothing(
    transport: Transport, clients: AsyncExitStack, unique: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tp, group = await committed_then_deleted(transport, clients, unique)
    consumer = await member(transport, clients, group, tp, offset_out_of_range="fail")

    with pytest.raises(OffsetOutOfRangeError) as raised:
        await read_until(consumer, lambda seen: False)

    error = raised.value
    assert (error.topic, error.partition, error.offset, error.log_start, error.log_end) == (
        tp.topic, 0, 3, 6, 10)
    message = str(error)
    assert f"offset 3 of {tp.topic}[0] for group {group!r} is out of range" in message
    assert "3 records (offsets 3..5) were deleted" in message
    assert f"aiostreams groups reset {group} --topic {tp.topic}" in message
    assert await consumer.position(tp) == 3
    assert await consumer.committed(tp) == 3
    assert consumer.offset_resets.total == 0 and reset_lines(caplog) == []
    with pytest.raises(OffsetOutOfRangeError):  # and again: the position did not move
        await read_until(consumer, lambda seen: False)


async def test_a_committed_offset_past_the_log_end_is_reset_as_past_end(
    transport: Transport, clients: AsyncExitStack, unique: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tp = await log_of(transport, unique("t"), 4)
    group = unique("g")
    await (await member(transport, clients, group, tp, commit=20)).stop()
    consumer = await member(transport, clients, group, tp)  # default: as auto_offset_reset

    records = await read_until(consumer, lambda seen: len(seen) >= 4)

    assert [r.offset for r in records] == [0, 1, 2, 3]
    [line] = reset_lines(caplog)
    assert "the position is 16 past the log's end" in line
    assert "reset 20 -> 0" in line and "0 records skipped, 4 read again" in line
    assert consumer.offset_resets.counts == {(tp.topic, 0, ResetReason.PAST_END): 1}


@pytest.mark.parametrize(("auto_offset_reset", "first"), [("earliest", 0), ("latest", 5)])
async def test_a_partition_without_a_committed_offset_starts_per_auto_offset_reset_quietly(
    transport: Transport, clients: AsyncExitStack, unique: Callable[[str], str],
    caplog: pytest.LogCaptureFixture, auto_offset_reset: str, first: int,
) -> None:
    tp = await log_of(transport, unique("t"), 5)
    consumer = await member(transport, clients, unique("g"), tp,
                            auto_offset_reset=auto_offset_reset, offset_out_of_range="fail")

    assert await consumer.position(tp) == first
    if first == 0:
        records = await read_until(consumer, lambda seen: len(seen) >= 5)
        assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    assert consumer.offset_resets.total == 0 and reset_lines(caplog) == []
