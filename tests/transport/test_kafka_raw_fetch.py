"""The tolerant record-batch parser of the consumer's slow path (no broker needed)."""

from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from aiostreams.transport.kafka_raw_fetch import parse_record_batches, wire_header_name
from aiostreams.types import TopicPartition

TP = TopicPartition("t", 0)


def batch(base: int, values: list[bytes], *, producer: int = -1, control: bool = False,
          headers: list[tuple[str, bytes | None]] | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, producer >= 0, producer, 0 if producer >= 0
                                        else -1, -1, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, 1000 + i, value if control else b"k", None if control else value,
                       headers or [])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base)
    if control:
        struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 0x20)
    return bytes(data)


ABORT = struct.pack(">hh", 0, 0)
LOG = (batch(0, [b"a0", b"a1"], producer=7) + batch(2, [ABORT], producer=7, control=True)
       + batch(3, [b"c3", b"c4"], producer=8) + batch(5, [b"p5"]))


def test_read_committed_skips_aborted_transactions_and_control_batches() -> None:
    records = parse_record_batches(TP, LOG, 0, aborted=[(7, 0)])
    assert [(r.offset, r.value) for r in records] == [(3, b"c3"), (4, b"c4"), (5, b"p5")]


def test_read_uncommitted_keeps_aborted_data_and_skips_control_batches() -> None:
    records = parse_record_batches(TP, LOG, 1)
    assert [r.offset for r in records] == [1, 3, 4, 5]
    assert records[0].timestamp == 1.001


def test_a_partial_batch_at_the_end_of_a_response_is_ignored() -> None:
    assert [r.offset for r in parse_record_batches(TP, LOG[:-5], 0)] == [0, 1, 3, 4]


def test_header_names_round_trip_their_bytes_and_null_values_stay_null() -> None:
    data = bytearray(batch(0, [b"v"], headers=[("@@", b"x"), ("n", None)]))
    at = data.index(b"@@")
    data[at:at + 2] = b"\xff\xfe"
    (record,) = parse_record_batches(TP, bytes(data), 0)
    name, value = record.headers[0]
    assert name.encode("utf-8", "surrogateescape") == b"\xff\xfe" and value == b"x"
    assert record.headers[1] == ("n", None)
    assert wire_header_name(name) == "\ufffd\ufffd"
    assert wire_header_name("Größe") == "Größe"
