"""The test driver's private broker: topics as the worker sizes them, records placed as Kafka
places them, and what the tasks produced, read back decoded.

Used by :class:`~aiostreams.testing.driver.TopologyTestDriver`: piped input is appended here,
in order; the tasks' outputs come through the worker's own output path (the core's router
and output channel, :mod:`~aiostreams.engine.worker_core`) to a :class:`DriverProducer`,
which appends them here and notes them for :meth:`DriverBroker.take`; outputs to external
sinks (Parquet, Delta) go to those sinks instead. :attr:`DriverBroker.transport` gives the
core its clients: that producer, and memory consumers and admins of the broker.

Invariants: records are appended in the order given, each to the partition Kafka's
partitioner (or the record itself) chooses; every topic's records are read back once each
(:meth:`DriverBroker.take`), in the order they were produced.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from aiostreams.app import App
from aiostreams.engine.topic_plan import plan_changelogs, plan_topics, sub_widths, wanted_topics
from aiostreams.errors import TopologyError, TransportError
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.serde import BytesSerde, Serde
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import ConsumerOptions, ConsumerSettings
from aiostreams.transport.memory import MemoryAdmin, MemoryBroker
from aiostreams.transport.memory_consumer import MemoryConsumer
from aiostreams.transport.partitioner import default_partition
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition

Serdes = tuple[Serde[Any], Serde[Any]]


class DriverBroker:
    def __init__(self, app: App) -> None:
        self.broker = MemoryBroker()
        self.transport = DriverTransport(self)
        self.source_serdes: dict[str, Serdes] = {}
        self.sink_serdes: dict[str, Serdes] = {}
        self.sinks: dict[str, ExternalSink] = {}
        """The topology's external sinks by name (known once :meth:`create_topics` ran)."""
        self._app = app
        self._emitted: dict[str, list[tuple[int, int]]] = {}
        self._read: dict[str, int] = {}
        self._null_keys = itertools.count()

    def create_topics(self, subs: Sequence[SubTopology]) -> dict[int, int]:
        """Create every topic the tasks read or write (and every declared one, which
        ``ctx.send()`` may write to), sized as the worker would
        (:mod:`~aiostreams.engine.topic_plan`), and learn their serdes and the external
        sinks; returns each sub-topology's width."""
        app = self._app
        declared = app.topology.topics
        wanted = wanted_topics(subs, app.settings.dead_letter_topic) | set(declared)
        specs = plan_topics(wanted, declared, {}, writers=(), create_sources=True,
                            default_partitions=app.settings.default_partitions,
                            where="the driver's broker")
        widths = sub_widths(subs, {name: spec.partitions for name, spec in specs.items()})
        self.sinks.update((s.name, s) for s in app.external_sinks)
        for spec in (*specs.values(), *plan_changelogs(app.name, subs, widths, {})):
            self.broker.create_topic(spec.name, spec.partitions, dict(spec.config) or None)
        for sub in subs:
            for source in sub.sources:
                for topic in source.topics:
                    self.source_serdes[topic] = (source.key_serde, source.value_serde)
            for sink_node in sub.sinks:
                self.sink_serdes.setdefault(sink_node.topic,
                                            (sink_node.key_serde, sink_node.value_serde))
        return widths

    def serdes_of(self, topic: str) -> Serdes:
        """The serdes a source reads ``topic`` with; TopologyError when none reads it."""
        serdes = self.source_serdes.get(topic)
        if serdes is None:
            raise TopologyError(
                f"topic {topic!r} is not read by the topology; its sources read "
                f"{sorted(self.source_serdes)}")
        return serdes

    def append(self, records: Sequence[OutgoingRecord]) -> list[tuple[str, int, int]]:
        """Append in order; returns each record's (topic, partition, offset)."""
        def choose(topic: str, key: bytes | None, partitions: int) -> int:
            return default_partition(key, partitions, counter=self._null_keys)

        placed: list[tuple[str, int, int]] = []
        for record, partition in self.broker.resolve_partitions(records, choose):
            offset = self.broker.end_offset(TopicPartition(record.topic, partition))
            self.broker.append([(record, partition)])
            placed.append((record.topic, partition, offset))
        return placed

    def produce(self, records: Sequence[OutgoingRecord]) -> None:
        """Append what the tasks produced, in order, noting it for :meth:`take`."""
        for topic, partition, offset in self.append(records):
            self._emitted.setdefault(topic, []).append((partition, offset))

    def take(self, topic: str) -> list[RawRecord]:
        """The records tasks produced to ``topic`` since the last ``take`` of it."""
        emitted = self._emitted.get(topic, [])
        start = self._read.get(topic, 0)
        self._read[topic] = len(emitted)
        return [self.broker.records(topic, p)[offset] for p, offset in emitted[start:]]

    def decode(self, raw: RawRecord) -> Record[Any, Any]:
        """With the topic's declared serdes, else its sink's (or source's), else bytes."""
        topic = self._app.topology.topic(raw.topic)
        key_serde: Serde[Any]
        value_serde: Serde[Any]
        if topic is not None:
            key_serde, value_serde = topic.key_serde, topic.value_serde
        else:
            key_serde, value_serde = self.sink_serdes.get(raw.topic) or \
                self.source_serdes.get(raw.topic) or (BytesSerde(), BytesSerde())
        return Record(key_serde.deserialize(raw.topic, raw.key),
                      value_serde.deserialize(raw.topic, raw.value), raw.topic,
                      raw.partition, raw.offset, raw.timestamp, raw.headers)


class DriverProducer:
    """The producer of the driver's tasks (a :class:`~aiostreams.transport.base.Producer`):
    appends each batch at once, in order, through :meth:`DriverBroker.produce` - so a
    ``flush`` has nothing to wait for. Not transactional: the driver commits as an
    at-least-once worker does, and its outputs are readable as soon as they are sent."""

    def __init__(self, driver_broker: DriverBroker) -> None:
        self._broker = driver_broker

    @property
    def transactional(self) -> bool:
        return False

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send_batch(self, records: Sequence[OutgoingRecord]) -> None:
        self._broker.produce(records)

    async def flush(self) -> None:
        pass

    def partition_for(self, topic: str, key: bytes | None, partitions: int) -> int:
        return default_partition(key, partitions, counter=self._broker._null_keys)

    async def begin_transaction(self) -> None:
        raise _no_transactions()

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int],
                                          group_id: str) -> None:
        raise _no_transactions()

    async def commit_transaction(self) -> None:
        raise _no_transactions()

    async def abort_transaction(self) -> None:
        raise _no_transactions()


def _no_transactions() -> TransportError:
    return TransportError("the test driver's producer has no transactions: the driver "
                          "commits as an at-least-once worker does")


class DriverTransport:
    """The clients of the driver's broker (a :class:`~aiostreams.transport.base.Transport`):
    its producer is a :class:`DriverProducer`; consumers and admins are the memory
    broker's own."""

    def __init__(self, driver_broker: DriverBroker) -> None:
        self._driver_broker = driver_broker

    @property
    def url(self) -> str:
        return f"memory://<test-driver-{id(self._driver_broker.broker):x}>"

    def consumer(self, group_id: str | None = None, *, options: ConsumerOptions | None = None,
                 **settings: Unpack[ConsumerSettings]) -> MemoryConsumer:
        return MemoryConsumer(self._driver_broker.broker,
                              ConsumerOptions.of(group_id, options, settings))

    def producer(self, *, client_id: str = "aiostreams",
                 transactional_id: str | None = None) -> DriverProducer:
        if transactional_id is not None:
            raise _no_transactions()
        return DriverProducer(self._driver_broker)

    def admin(self) -> MemoryAdmin:
        return MemoryAdmin(self._driver_broker.broker)


if TYPE_CHECKING:  # mypy proves the driver's clients satisfy the Protocols structurally
    from aiostreams.transport.base import Producer, Transport

    def _is_transport(transport: DriverTransport) -> Transport:
        return transport

    def _is_producer(producer: DriverProducer) -> Producer:
        return producer
