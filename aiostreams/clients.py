"""The app's public way in and out: a typed producer and a typed consumer.

::

    await app.send("orders", "o-1", Order(...))            # one record, durable on return
    async with app.producer() as producer:                 # many records, batched
        for order in orders:
            await producer.send(orders_topic, order.id, order)
    async with app.consumer("orders-enriched") as records:
        for record in await records.read_to_end():         # Record(key, value, topic, ...)
            print(record.key, record.value.tier)

Both are typed by the topic's serdes: a :class:`~aiostreams.Topic`, or the name of a topic
declared with ``app.topic(...)``. They are clients of the app's broker of their own, apart
from the app's worker: they work before, while and after the app runs.

Invariants: a producer appends records in the order ``send`` was called (per topic-partition,
as Kafka does); ``flush`` returns once everything sent before it is durable. A consumer
returns each partition's records in offset order, never one twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from aiostreams.errors import ConfigError, DeserializationError, UnknownTopicError
from aiostreams.lifecycle.start_stop import StartStop
from aiostreams.topic import Topic
from aiostreams.transport.base import Consumer, IsolationLevel, Producer, TopicSpec, Transport
from aiostreams.types import Headers, OutgoingRecord, RawRecord, Record, TopicPartition

SEND_BATCH = 500
"""Records a producer buffers before it hands them to the broker client in one batch."""

HeadersLike = Mapping[str, str | bytes] | Sequence[tuple[str, str | bytes]] | None
"""Headers as users write them: a mapping or (name, value) pairs; str values are UTF-8."""

TopicResolver = Callable[[Topic | str], Topic]


def to_headers(headers: HeadersLike) -> Headers:
    """Kafka's header shape: ordered (name, bytes) pairs."""
    if headers is None:
        return ()
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes]] = []
    for name, value in pairs:
        if not isinstance(name, str) or not isinstance(value, str | bytes):
            raise TypeError(f"a header is a (str, str | bytes) pair; got ({name!r}, {value!r})")
        out.append((name, value.encode() if isinstance(value, str) else value))
    return tuple(out)


class AppProducer(StartStop):
    """Sends typed records to an app's broker. Use as ``async with app.producer() as p``
    (flushed and closed at the end) or through ``app.send``.

    A topic that does not exist yet is created on first send, with the partitions and
    config it was declared with (or the app's ``default_partitions``), as the app would.

    Cancellation: a cancelled ``send`` either buffered its record or did not; a cancelled
    ``flush`` leaves buffered records unsent (a later ``flush`` or ``stop`` sends them).
    """

    def __init__(self, transport: Transport, resolve: TopicResolver, *,
                 default_partitions: int = 1, client_id: str = "aiostreams") -> None:
        self._transport = transport
        self._resolve = resolve
        self._default_partitions = default_partitions
        self._client_id = client_id
        self._producer: Producer | None = None
        self._pending: list[OutgoingRecord] = []
        self._known_topics: set[str] = set()
        self._lock = asyncio.Lock()

    @property
    def started(self) -> bool:
        return self._producer is not None

    async def start(self) -> None:
        if self._producer is None:
            producer = self._transport.producer(client_id=self._client_id)
            await producer.start()
            self._producer = producer

    async def stop(self) -> None:
        """Flush what is buffered, then close. Idempotent."""
        producer = self._producer
        if producer is None:
            return
        try:
            await self.flush()
        finally:
            self._producer = None
            await producer.stop()

    async def send(self, topic: Topic | str, key: Any, value: Any, *,
                   headers: HeadersLike = None, timestamp: float | None = None,
                   partition: int | None = None) -> None:
        """Buffer one record for ``topic``, serialized by its serdes (a bad key or value
        raises :class:`~aiostreams.SerializationError` here, naming the topic).
        ``timestamp`` is event time in float seconds (default: now); ``partition=None``
        lets Kafka's key partitioner choose. Durable only after :meth:`flush`."""
        resolved = self._resolve(topic)
        record = OutgoingRecord(
            resolved.name,
            resolved.key_serde.serialize(resolved.name, key),
            resolved.value_serde.serialize(resolved.name, value),
            time.time() if timestamp is None else float(timestamp),
            to_headers(headers), partition)
        await self.start()
        if resolved.name not in self._known_topics:
            await self._ensure_topic(resolved)
        self._pending.append(record)
        if len(self._pending) >= SEND_BATCH:
            await self._send_pending()

    async def flush(self) -> None:
        """Return once every record sent before the call is durable; raise if one failed."""
        if self._producer is None:
            return
        await self._send_pending()
        await self._producer.flush()

    async def _send_pending(self) -> None:
        assert self._producer is not None
        batch, self._pending = self._pending, []
        if batch:
            await self._producer.send_batch(batch)

    async def _ensure_topic(self, topic: Topic) -> None:
        async with self._lock:
            if topic.name in self._known_topics:
                return
            admin = self._transport.admin()
            await admin.start()
            try:
                if await admin.partitions_for(topic.name) is None:
                    await admin.create_topics([TopicSpec(
                        topic.name, topic.partitions or self._default_partitions,
                        config=dict(topic.config))])
            finally:
                await admin.stop()
            self._known_topics.add(topic.name)


class AppConsumer(StartStop):
    """Reads one topic's records, decoded by its serdes, from every partition (no consumer
    group: it commits nothing and does not take partitions from the app). Reads committed
    data only, so an ``exactly_once`` app's aborted output is never seen.

    ``from_beginning=False`` starts at the end: only records produced after it started.
    A record that cannot be decoded raises :class:`~aiostreams.DeserializationError`
    naming its topic, partition and offset.
    """

    def __init__(self, transport: Transport, topic: Topic, *, from_beginning: bool = True,
                 client_id: str = "aiostreams") -> None:
        self._transport = transport
        self.topic = topic
        self._from_beginning = from_beginning
        self._client_id = client_id
        self._consumer: Consumer | None = None
        self.partitions: list[TopicPartition] = []

    async def start(self) -> None:
        if self._consumer is not None:
            return
        admin = self._transport.admin()
        await admin.start()
        try:
            count = await admin.partitions_for(self.topic.name)
        finally:
            await admin.stop()
        if count is None:
            raise UnknownTopicError(f"topic {self.topic.name!r} does not exist on "
                                    f"{self._transport.url}: nothing to consume")
        consumer = self._transport.consumer(
            None, client_id=self._client_id, isolation_level=IsolationLevel.READ_COMMITTED)
        await consumer.start()
        self.partitions = [TopicPartition(self.topic.name, p) for p in range(count)]
        consumer.assign(self.partitions)
        starts = await (consumer.beginning_offsets(self.partitions) if self._from_beginning
                        else consumer.end_offsets(self.partitions))
        for tp, offset in starts.items():
            consumer.seek(tp, offset)
        self._consumer = consumer

    async def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()

    def _running(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError(f"the consumer of {self.topic.name!r} is not started: use "
                               "'async with app.consumer(...) as records'")
        return self._consumer

    async def getmany(self, timeout: float = 1.0) -> list[Record[Any, Any]]:
        """Wait up to ``timeout`` seconds for records; return at once when some are ready
        (per partition in offset order). Cancellation: returns nothing, loses nothing."""
        batch = await self._running().getmany(timeout)
        return [self._decode(raw) for raws in batch.values() for raw in raws]

    async def read_to_end(self, timeout: float | None = None) -> list[Record[Any, Any]]:
        """Every record from the current position up to the end of each partition as it is
        when called (for an ``exactly_once`` producer: its last committed record). Raises
        ``TimeoutError`` after ``timeout`` seconds (None: no limit). Cancellation: returns
        nothing; the position has moved past what was read."""
        consumer = self._running()
        ends = await consumer.end_offsets(self.partitions)
        out: list[Record[Any, Any]] = []
        async with asyncio.timeout(timeout):
            while await self._behind(ends):  # transaction markers move positions too
                batch = await consumer.getmany(0.5)
                for raws in batch.values():
                    out.extend(self._decode(raw) for raw in raws if raw.offset < ends[raw.tp])
        return out

    async def _behind(self, ends: Mapping[TopicPartition, int]) -> bool:
        consumer = self._running()
        for tp in self.partitions:
            if await consumer.position(tp) < ends[tp]:
                return True
        return False

    async def __aiter__(self) -> AsyncIterator[Record[Any, Any]]:
        """Follow the topic: records as they arrive, forever (break out of the loop)."""
        while True:
            for record in await self.getmany():
                yield record

    def _decode(self, raw: RawRecord) -> Record[Any, Any]:
        name = self.topic.name
        try:
            key = self.topic.key_serde.deserialize(name, raw.key)
        except DeserializationError as e:
            raise e.at(raw.partition, raw.offset, "key") from None
        try:
            value = self.topic.value_serde.deserialize(name, raw.value)
        except DeserializationError as e:
            raise e.at(raw.partition, raw.offset, "value") from None
        return Record(key, value, raw.topic, raw.partition, raw.offset, raw.timestamp,
                      raw.headers)


class LazySender:
    """``app.send``'s producer: made by ``make()`` at the first send, and every record
    flushed (durable) before :meth:`send` returns; :meth:`close` closes it, and a later
    send makes a new one.

    Cancellation: a cancelled ``send`` may or may not have sent its record."""

    def __init__(self, make: Callable[[], AppProducer]) -> None:
        self._make = make
        self._producer: AppProducer | None = None

    async def send(self, topic: Topic | str, key: Any, value: Any, *, headers: HeadersLike,
                   timestamp: float | None, partition: int | None) -> None:
        if self._producer is None:
            self._producer = self._make()
        await self._producer.send(topic, key, value, headers=headers, timestamp=timestamp,
                                  partition=partition)
        await self._producer.flush()

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()


def topic_resolver(declared: Callable[[str], Topic | None]) -> TopicResolver:
    """Resolve a :class:`Topic` as given and a name through ``declared`` (the app's topics),
    raising :class:`ConfigError` with what to do when the name is not declared."""

    def resolve(topic: Topic | str) -> Topic:
        if isinstance(topic, Topic):
            return topic
        found = declared(topic)
        if found is None:
            raise ConfigError(f"topic {topic!r} is not declared in this app, so its serdes "
                              f"are unknown: declare it with app.topic({topic!r}, key=..., "
                              "value=...) or pass the Topic")
        return found

    return resolve
