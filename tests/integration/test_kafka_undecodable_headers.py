"""Issue 24, item 2, on the real broker: a record whose header name is not UTF-8 (which
aiokafka's parser refuses) is read, processed and committed like any other, and the records
around it, in the same batch, are neither lost nor stuck."""

from __future__ import annotations

import asyncio
import struct

import pytest
from aiokafka.client import AIOKafkaClient
from aiokafka.codec import gzip_encode
from aiokafka.protocol.produce import ProduceRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition as AioTopicPartition
from appkit import create_topic, produce, read_exactly

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport

pytestmark = pytest.mark.kafka

BAD_NAME = b"\xff\xfeid"
PLACEHOLDER = b"@@@@"  # as long as BAD_NAME, replaced in the built batch


def batch_with_bad_header_name(values: list[bytes], poison: int, *, gzip: bool) -> bytes:
    """A record batch (magic 2) of ``values``; record ``poison`` has a header named
    BAD_NAME and one with a null value. Built by aiokafka, then patched (and compressed)."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i, value in enumerate(values):
        headers = [(PLACEHOLDER.decode(), b"x"), ("null", None)] if i == poison else []
        builder.append(i, 1_700_000_000_000 + i, b"k", value, headers)
    data = bytearray(builder.build())
    at = data.index(PLACEHOLDER)
    data[at:at + len(PLACEHOLDER)] = BAD_NAME
    if gzip:
        records = gzip_encode(bytes(data[61:]))
        data = data[:61] + records
        struct.pack_into(">i", data, 8, len(data) - 12)
        struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 1)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


_LEADERSHIP_MOVING = frozenset({3, 5, 6})  # unknown partition, no leader yet, not the leader


async def produce_raw(bootstrap: str, topic: str, batch: bytes, partition: int = 0) -> None:
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        for _ in range(100):
            await client.force_metadata_update()
            leader = client.cluster.leader_for_partition(AioTopicPartition(topic, partition))
            response = await client.send(leader, ProduceRequest(
                None, -1, 30000, [(topic, [(partition, batch)])]))
            code = response.topics[0][1][0][1]
            if code not in _LEADERSHIP_MOVING:
                break
            # a topic just created: its partition's leadership is still being settled
            await asyncio.sleep(0.1)
        assert code == 0, response  # no error code
    finally:
        await client.close()


class Keep(ais.Processor[bytes, bytes]):
    seen: list[ais.Record[bytes, bytes]] = []

    def process(self, record: ais.Record[bytes, bytes]) -> None:
        Keep.seen.append(record)
        self.context.forward(record)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_undecodable_header_name_is_read_processed_and_nothing_around_it_lost(
        kafka_bootstrap: str, topic_name, guarantee: str) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst = topic_name("in"), topic_name("out")
    await create_topic(transport, src, 1)
    await produce(transport, src, [(b"k", b"0")])
    await produce_raw(kafka_bootstrap, src, batch_with_bad_header_name(
        [b"1", b"2", b"3"], 1, gzip=False))
    await produce_raw(kafka_bootstrap, src, batch_with_bad_header_name(
        [b"4", b"5", b"6"], 0, gzip=True))
    await produce(transport, src, [(b"k", str(i).encode()) for i in range(7, 10)])
    Keep.seen = []
    app = ais.App(topic_name("app"), broker=f"kafka://{kafka_bootstrap}",
                  commit_interval_ms=100, processing_guarantee=guarantee)
    app.topic(src, key=bytes, value=bytes)
    app.topic(dst, key=bytes, value=bytes)
    app.topology.add_source("src", src).add_processor("keep", Keep, "src").add_sink(
        "sink", dst, "keep")
    async with app:
        out = await read_exactly(transport, dst, 10, timeout=60,
                                 read_committed=guarantee == "exactly_once")
        assert (worker := app.status().worker) is not None and worker.failure is None
    assert [r.value for r in out] == [str(i).encode() for i in range(10)]  # once, in order
    poisoned = [r for r in Keep.seen if r.headers]
    assert [r.value for r in poisoned] == [b"2", b"4"]
    for record in poisoned:  # the name's bytes, losslessly; the null value kept
        name, value = record.headers[0]
        assert name.encode("utf-8", "surrogateescape") == BAD_NAME and value == b"x"
        assert record.headers[1] == ("null", None)
    written = dict(out[2].headers)  # aiokafka writes UTF-8 only: as Java would read it
    assert written["\ufffd\ufffdid"] == b"x"


async def test_other_partitions_fetched_with_the_undecodable_record_lose_nothing(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    """aiokafka drains partitions one after the other in one call; the partitions drained
    before the one that fails moved on and their records were dropped with the error."""
    transport = KafkaTransport(kafka_bootstrap)
    src, dst = topic_name("in"), topic_name("out")
    await create_topic(transport, src, 3)
    expected = []
    for p in range(3):
        values = [f"{p}-{i}".encode() for i in range(50)]
        batch = (batch_with_bad_header_name(values, 25, gzip=False) if p == 1
                 else batch_with_good_headers(values))
        await produce_raw(kafka_bootstrap, src, batch, p)
        expected += values
    app = ais.App(topic_name("app"), broker=f"kafka://{kafka_bootstrap}",
                  commit_interval_ms=100)
    app.topic(src, key=bytes, value=bytes)
    app.topic(dst, key=bytes, value=bytes)
    app.topology.add_source("src", src).add_sink("sink", dst, "src")
    async with app:
        out = await read_exactly(transport, dst, len(expected), timeout=60)
        assert (worker := app.status().worker) is not None and worker.failure is None
    assert sorted(r.value or b"" for r in out) == sorted(expected)  # each exactly once


def batch_with_good_headers(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000 + i, b"k", value, [("ok", b"1")])
    return bytes(builder.build())
