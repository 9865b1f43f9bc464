"""A replay's inputs read from a real broker: an offset range of a partition (both ends
included, an open end stops at the end as it was), and a time range over every partition."""

from __future__ import annotations

import pytest
from appkit import create_topic

from aiostreams.replay import InputRange, read_ranges, read_times
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord

pytestmark = pytest.mark.kafka

T0 = 1_700_000_000.0


async def test_offset_and_time_ranges_read_exactly_their_records(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("pay")
    await create_topic(transport, topic, 2)
    producer = transport.producer()
    await producer.start()
    try:
        await producer.send_batch([OutgoingRecord(topic, f"k{i}".encode(), str(i).encode(),
                                                  T0 + i, (), i % 2) for i in range(20)])
        await producer.flush()
    finally:
        await producer.stop()
    got = await read_ranges(f"kafka://{kafka_bootstrap}",
                            [InputRange.parse(f"{topic}:0:2-4"),
                             InputRange.parse(f"{topic}:1:7-")])
    assert [(r.partition, r.offset, r.value) for r in got] == [
        (0, 2, b"4"), (0, 3, b"6"), (0, 4, b"8"), (1, 7, b"15"), (1, 8, b"17"),
        (1, 9, b"19")]
    timed = await read_times(transport, {topic: 2}, T0 + 5, T0 + 9)
    assert sorted(int(r.value or b"") for r in timed) == [5, 6, 7, 8]
    assert all(r.timestamp == T0 + int(r.value or b"") for r in timed)
