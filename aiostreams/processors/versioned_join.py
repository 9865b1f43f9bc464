"""Versioned tables (KIP-889, KIP-914) and stream-table joins with a grace period
(KIP-923), with Kafka Streams 3.9's semantics.

**Source.** :class:`VersionedTableSourceProcessor` puts every record into the table's
versioned store as a version at the record's timestamp (a null value: a tombstone). An
update older than the store's stream time minus its history retention is refused by the
store and not forwarded; every stored update is forwarded - also an out-of-order one,
which Kafka marks ``isLatest = false`` and its stateful table operators drop (aiostreams
refuses those operators on a versioned table at build time, so only ``to_stream``,
``filter``, ``map_values`` and stream-table joins see the updates). Old values, when a
downstream operator asks for them, are the key's newest value before the put.

**Join.** :class:`VersionedStreamTableJoinProcessor` joins a stream record with the table
value valid at the record's timestamp (``get(key, as_of=timestamp)``). With a grace
period, records first wait in a time-ordered buffer (Kafka's
``RocksDBTimeOrderedKeyValueBuffer``):

1. the buffer's stream time is the largest timestamp ever buffered; a record older than
   it minus the grace joins at once, without entering the buffer;
2. otherwise the record is buffered under ``8-byte timestamp + key bytes + 4-byte
   sequence number`` (so the buffer emits by timestamp, then key bytes, then arrival);
3. then every buffered record with ``timestamp <= stream time - grace`` leaves the buffer
   in that order and joins, emitted with its own timestamp, headers and origin.

Records with a null value (and, for an inner join, a null key) are dropped first, as
Kafka does; a left join's null-key record joins at once with no table value (Kafka
would fail to buffer it). The buffer is a changelogged key-value store, its stream time
and sequence number kept in it too, so a restore continues exactly where the run was.

Both processors read state that spans keys (the store's and the buffer's stream time),
so each record first awaits the records issued before it: the node runs in issue order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from aiostreams.errors import SerializationError
from aiostreams.processors.table_changes import NO_TIMESTAMP, OldValues, update
from aiostreams.processors.tables import ValueGetter
from aiostreams.serde import Serde
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import DroppedRecords, to_ms

__all__ = [
    "BufferSerde",
    "VersionedGetter",
    "VersionedStreamTableJoinProcessor",
    "VersionedTableSourceProcessor",
]

AnyRecord = Record[Any, Any]
_TS: Final = struct.Struct(">q")
_SEQ: Final = struct.Struct(">i")
_LEN: Final = struct.Struct(">i")
_META_KEY: Final = b""
_NO_TIME: Final = -(2**62)


class BufferMeta(NamedTuple):
    """The grace buffer's stream time (ms) and last sequence number."""

    stream_ms: int
    seq: int


class VersionedTableSourceProcessor(Processor[Any, Any]):
    """Materializes a topic in a versioned store (see the module docstring)."""

    def __init__(self, store: str, old_values: OldValues,
                 dropped: DroppedRecords | None = None) -> None:
        self.store_name = store
        self.old_values = old_values
        self.dropped = dropped if dropped is not None else DroppedRecords()
        self.null_keys_dropped = 0
        self.expired_dropped = 0

    async def process(self, record: AnyRecord) -> None:
        if record.key is None:
            self.null_keys_dropped += 1
            self.dropped.drop(self.context, "null_key")
            return
        ctx = self.context
        await ctx.wait_for_earlier_records()
        store = ctx.store(self.store_name)
        old = None
        if self.old_values.enabled:
            newest = await store.get(record.key)
            old = None if newest is None else newest.value
        if await store.put(record.key, record.value, record.timestamp) is None:
            self.expired_dropped += 1
            self.dropped.drop(ctx, "expired")
            return
        ctx.forward(update(record, record.value, old))


class VersionedGetter(ValueGetter):
    """Reads a versioned table: the newest value, or the value valid at a time."""

    versioned = True

    def __init__(self, store: str) -> None:
        self.store = store
        self.stores = (store,)

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        found = await ctx.store(self.store).get(key)
        return None if found is None else found.value

    async def get_stamped(self, ctx: ProcessorContext, key: Any) -> tuple[Any, int]:
        found = await ctx.store(self.store).get(key)
        return (None, NO_TIMESTAMP) if found is None else (found.value,
                                                           to_ms(found.timestamp))

    async def get_as_of(self, ctx: ProcessorContext, key: Any, ts_ms: int) -> Any | None:
        found = await ctx.store(self.store).get(key, ts_ms / 1000)
        return None if found is None else found.value


class VersionedStreamTableJoinProcessor(Processor[Any, Any]):
    """A stream joined with a versioned table as of each record's timestamp, optionally
    through a grace buffer (see the module docstring). ``buffer`` names the buffer's store
    (None: no grace); ``key_serde`` gives the key bytes that order the buffer."""

    def __init__(self, getter: VersionedGetter, joiner: Callable[[Any, Any], Any],
                 left: bool, *, grace_ms: int | None, buffer: str | None,
                 key_serde: Serde[Any]) -> None:
        assert (grace_ms is None) == (buffer is None), "a grace period needs its buffer"
        self.getter = getter
        self.joiner = joiner
        self.left = left
        self.grace_ms = grace_ms
        self.buffer = buffer
        self.key_serde = key_serde
        self.skipped = 0

    async def process(self, record: AnyRecord) -> None:
        ctx = self.context
        await ctx.wait_for_earlier_records()
        if record.value is None or (record.key is None and not self.left):
            self.skipped += 1
            return
        if self.buffer is None or self.grace_ms is None or record.key is None:
            await self._join(record)
            return
        buffer = ctx.store(self.buffer)
        meta = await buffer.get(_META_KEY) or BufferMeta(_NO_TIME, 0)
        ts = to_ms(record.timestamp)
        if meta.stream_ms - self.grace_ms > ts:
            await self._join(record)
            return
        seq = (meta.seq + 1) & 0x7FFFFFFF
        stream_ms = max(meta.stream_ms, ts)
        key_bytes = self.key_serde.serialize(record.topic, record.key) or b""
        buffer.put(_TS.pack(ts) + key_bytes + _SEQ.pack(seq), record)
        buffer.put(_META_KEY, BufferMeta(stream_ms, seq))
        limit = stream_ms - self.grace_ms
        if limit < 0:  # Kafka's buffer scans timestamps from 0
            return
        due = [(k, entry) async for k, entry in buffer.range(None, _TS.pack(limit + 1))
               if k != _META_KEY]
        for k, entry in due:
            buffer.delete(k)
            await self._join(entry)

    async def _join(self, record: AnyRecord) -> None:
        other = None
        if record.key is not None:
            other = await self.getter.get_as_of(self.context, record.key,
                                                to_ms(record.timestamp))
        if other is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(record.value, other)))


class BufferSerde:
    """The grace buffer's values: a buffered record (its key, value and origin) or the
    buffer's :class:`BufferMeta`."""

    def __init__(self, key_serde: Serde[Any], value_serde: Serde[Any]) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde

    def serialize(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, BufferMeta):
            return b"M" + _TS.pack(value.stream_ms) + _SEQ.pack(value.seq)
        record: AnyRecord = value
        parts = [b"R", _TS.pack(to_ms(record.timestamp)), _TS.pack(record.offset),
                 _SEQ.pack(record.partition), _field(record.topic.encode()),
                 _field(self.key_serde.serialize(topic, record.key)),
                 _field(self.value_serde.serialize(topic, record.value)),
                 _SEQ.pack(len(record.headers))]
        for name, data in record.headers:
            parts += [_field(name.encode()), _field(data)]
        return b"".join(parts)

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if data[:1] == b"M":
            return BufferMeta(_TS.unpack_from(data, 1)[0], _SEQ.unpack_from(data, 9)[0])
        if data[:1] != b"R":
            raise SerializationError(f"{topic!r}: not a grace-buffer entry: {data[:16]!r}",
                                     topic=topic)
        (ts,) = _TS.unpack_from(data, 1)
        (offset,) = _TS.unpack_from(data, 9)
        (partition,) = _SEQ.unpack_from(data, 17)
        pos = 21
        origin, pos = _read(data, pos)
        kb, pos = _read(data, pos)
        vb, pos = _read(data, pos)
        (count,) = _SEQ.unpack_from(data, pos)
        pos += _SEQ.size
        headers = []
        for _ in range(count):
            name, pos = _read(data, pos)
            value, pos = _read(data, pos)
            headers.append(((name or b"").decode(), value))
        return Record(self.key_serde.deserialize(topic, kb),
                      self.value_serde.deserialize(topic, vb), (origin or b"").decode(),
                      partition, offset, ts / 1000, tuple(headers))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BufferSerde) and other.key_serde == self.key_serde
                and other.value_serde == self.value_serde)

    def __hash__(self) -> int:
        return hash(("BufferSerde", self.key_serde, self.value_serde))


def _field(data: bytes | None) -> bytes:
    if data is None:
        return _LEN.pack(-1)
    return _LEN.pack(len(data)) + data


def _read(data: bytes, pos: int) -> tuple[bytes | None, int]:
    (size,) = _LEN.unpack_from(data, pos)
    pos += _LEN.size
    if size < 0:
        return None, pos
    return data[pos:pos + size], pos + size
