"""The consumer's slow path for records aiokafka cannot parse: one raw Fetch request per
broker, and a record-batch parser that takes header names as bytes.

Why: Kafka's wire format types a header name as a string, but producers (librdkafka, raw
clients) can write any bytes there. aiokafka decodes header names as strict UTF-8 inside its
record parser, so one such record makes every ``getmany`` raise ``UnicodeDecodeError`` from
then on (and the records it had already drained in that call are dropped with it). Kafka's
Java client decodes them with replacement characters instead, and processes the record.

Here a header name is decoded with ``surrogateescape``: lossless, since
``name.encode("utf-8", "surrogateescape")`` gives the original bytes back, so the engine can
represent the record and processes it like any other (decoding belongs where a user asks for
it). Only aiokafka's producer cannot write such a name back; :func:`wire_header_name` makes it
the name a Java client would have read (U+FFFD for each bad byte).

Parsed: record batches of magic 2 (every Kafka since 0.11), any compression codec; with
``read_committed``, aborted transactions are skipped as Kafka's fetcher does (a transactional
batch of a producer whose abort marker has not been passed yet is dropped). aiokafka
internals used: ``AIOKafkaClient.send`` and ``cluster.leader_for_partition``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka.codec import gzip_decode, lz4_decode, snappy_decode, zstd_decode
from aiokafka.errors import for_code
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.record.util import decode_varint
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.errors import TransportError
from aiostreams.types import Headers, RawRecord, TopicPartition

__all__ = ["fetch_tolerant", "parse_record_batches", "wire_header_name"]

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61 bytes before a batch's records
_CODECS: dict[int, Callable[[bytes], bytes]] = {
    1: gzip_decode, 2: snappy_decode, 3: lz4_decode, 4: zstd_decode}
_LOG_APPEND_TIME, _TRANSACTIONAL, _CONTROL = 0x08, 0x10, 0x20
_ABORT = 0  # a control record's type: 0 abort, 1 commit


def wire_header_name(name: str) -> str:
    """``name`` as aiokafka's producer can write it: unchanged when it is UTF-8, else each
    byte that is not (a surrogate from :func:`parse_record_batches`) becomes U+FFFD."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return name


async def fetch_tolerant(
    client: Any, positions: Mapping[TopicPartition, int], *, read_committed: bool,
    max_bytes: int = 4 * 1024 * 1024,
) -> dict[TopicPartition, list[RawRecord]]:
    """The records of each partition from its position in ``positions`` (what one Fetch
    with no wait returns), parsed by :func:`parse_record_batches`. ``client`` is the
    consumer's ``AIOKafkaClient``; raises :class:`TransportError` on a broker error."""
    by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
    for tp, offset in sorted(positions.items()):
        leader = client.cluster.leader_for_partition(AioTopicPartition(tp.topic, tp.partition))
        if leader is None or leader < 0:
            raise TransportError(f"no leader known for {tp}; retry once the cluster settles")
        by_node.setdefault(leader, []).append((tp, offset))
    records: dict[TopicPartition, list[RawRecord]] = {}
    for node, wanted in by_node.items():
        topics: dict[str, list[tuple[int, int, int]]] = {}
        for tp, offset in wanted:
            topics.setdefault(tp.topic, []).append((tp.partition, offset, max_bytes))
        request = FetchRequest(0, 0, max_bytes, 1 if read_committed else 0,
                               list(topics.items()))
        response = await client.send(node, request)
        for topic, partitions in response.topics:
            for partition, error_code, _high, *rest in partitions:
                # rest: [last stable offset, (log start offset,) aborted, (preferred read
                # replica, v11+,) records]
                data = rest[-1]
                aborted = rest[2] if response.API_VERSION >= 11 else rest[-2]
                tp = TopicPartition(topic, partition)
                if error_code:
                    error = for_code(error_code)
                    raise TransportError(f"fetching {tp} at {positions[tp]} failed: "
                                         f"{error.__name__}: {error.description}")
                records[tp] = parse_record_batches(
                    tp, data or b"", positions[tp],
                    aborted=sorted(aborted or (), key=lambda a: a[1]) if read_committed
                    else None)
    return records


def parse_record_batches(tp: TopicPartition, data: bytes, start: int, *,
                         aborted: list[tuple[int, int]] | None = None) -> list[RawRecord]:
    """The records at or past offset ``start`` in ``data`` (a Fetch response's record set;
    a partial batch at its end is ignored). ``aborted``: the response's (producer id, first
    offset) pairs, sorted by offset, under ``read_committed``; None reads uncommitted."""
    out: list[RawRecord] = []
    pending = list(aborted or ())
    aborting: set[int] = set()
    pos = 0
    view = memoryview(data)
    while pos + _BATCH_HEADER.size <= len(data):
        (base_offset, length, _epoch, magic, _crc, attributes, last_delta, base_ts, max_ts,
         producer_id, _pepoch, _seq, count) = _BATCH_HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        if magic != 2:
            raise TransportError(f"{tp}: a record batch of magic {magic} at offset "
                                 f"{base_offset}; only magic 2 (Kafka 0.11+) is parsed")
        body = bytes(view[pos + _BATCH_HEADER.size:end])
        pos = end
        if aborted is not None and attributes & _TRANSACTIONAL:
            while pending and pending[0][1] <= base_offset + last_delta:
                aborting.add(pending.pop(0)[0])
            if attributes & _CONTROL:
                marker = _records(body, count, base_offset, base_ts, max_ts, attributes, tp)
                key = marker[0].key if marker else None  # version, type: two int16
                if key and len(key) >= 4 and struct.unpack_from(">h", key, 2)[0] == _ABORT:
                    aborting.discard(producer_id)
                continue
            if producer_id in aborting:
                continue
        if attributes & _CONTROL:
            continue
        codec = attributes & 0x07
        if codec:
            body = _CODECS[codec](body)
        out.extend(r for r in _records(body, count, base_offset, base_ts, max_ts, attributes,
                                       tp) if r.offset >= start)
    return out


def _records(body: bytes, count: int, base_offset: int, base_ts: int, max_ts: int,
             attributes: int, tp: TopicPartition) -> list[RawRecord]:
    buffer = bytearray(body)
    pos = 0
    out = []
    for _ in range(count):
        _length, pos = decode_varint(buffer, pos)
        pos += 1  # record attributes: unused
        ts_delta, pos = decode_varint(buffer, pos)
        offset_delta, pos = decode_varint(buffer, pos)
        key, pos = _nullable(buffer, pos)
        value, pos = _nullable(buffer, pos)
        header_count, pos = decode_varint(buffer, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            name, pos = _nullable(buffer, pos)
            header_value, pos = _nullable(buffer, pos)
            headers.append(((name or b"").decode("utf-8", "surrogateescape"), header_value))
        timestamp = max_ts if attributes & _LOG_APPEND_TIME else base_ts + ts_delta
        hs: Headers = tuple(headers)
        out.append(RawRecord(tp.topic, tp.partition, base_offset + offset_delta,
                             timestamp / 1000.0, key, value, hs))
    return out


def _nullable(buffer: bytearray, pos: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buffer, pos)
    if length < 0:
        return None, pos
    return bytes(buffer[pos:pos + length]), pos + length
