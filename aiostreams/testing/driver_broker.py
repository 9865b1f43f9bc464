"""The test driver's private broker: topics as the worker sizes them, records placed as Kafka
places them, and what the tasks produced, read back decoded.

Used by :class:`~aiostreams.testing.driver.TopologyTestDriver`, which is the consumer and the
producer of its tasks: piped input and task outputs are appended here, in order; outputs to
external sinks (Parquet, Delta) go to those sinks instead.

Invariants: records are appended in the order given, each to the partition Kafka's
partitioner (or the record itself) chooses; every topic's records are read back once each
(:meth:`DriverBroker.take`), in the order they were produced.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from aiostreams.app import App
from aiostreams.engine.topic_plan import plan_changelogs, plan_topics, sub_widths, wanted_topics
from aiostreams.errors import TopologyError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.serde import BytesSerde, Serde
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.memory import MemoryBroker
from aiostreams.transport.partitioner import default_partition
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition

Serdes = tuple[Serde[Any], Serde[Any]]


class DriverBroker:
    def __init__(self, app: App, on_backlog: Callable[[], None]) -> None:
        self.broker = MemoryBroker()
        self.source_serdes: dict[str, Serdes] = {}
        self.sink_serdes: dict[str, Serdes] = {}
        self.sinks: dict[str, ExternalSink] = {}
        self.emit_error: Exception | None = None
        """Why producing a task's output failed (e.g. an undeclared topic), if it did."""
        self._app = app
        self._on_backlog = on_backlog  # an external sink wants a commit (which flushes it)
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
        self.sinks = {s.name: s for s in app.topology.external_sinks}
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

    def emit(self, records: list[OutgoingRecord | ExternalRecord]) -> None:
        """What a task retired, in order. Called from a task's pump (a loop callback): an
        error is kept in :attr:`emit_error` for the driver to raise in the test."""
        try:
            self._release(records)
        except Exception as e:
            if self.emit_error is None:
                self.emit_error = e

    def _release(self, records: list[OutgoingRecord | ExternalRecord]) -> None:
        outgoing: list[OutgoingRecord] = []
        for record in records:
            if isinstance(record, ExternalRecord):
                sink = self.sinks[record.sink]
                sink.add(record)
                if sink.backlogged:
                    self._on_backlog()
            else:
                outgoing.append(record)
        for topic, partition, offset in self.append(outgoing):
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
