"""Synchronous steps compiled into closures, once per task.

A record's trip through the synchronous part of a sub-topology is the engine's hottest
path: for a sync pipeline it is all the engine does per record. Interpreting the node
graph per record (look up the node's processor, its children, its sink's serdes) costs
more than the work itself, so each node gets a *runner* built once when the task is
built: ``runner(record, slot)`` runs the node and, depth first, every node the record is
forwarded to, with everything it needs bound as closure variables.

Semantics are those of the node graph, exactly:

- a processor's forwards are buffered while ``process`` runs and handed to its children
  afterwards, in forward order (the node context's ``sync_buffer`` is what
  ``ctx.forward`` appends to, so it is set while ``process`` runs and only then);
- ``slot.node`` names the node running, so a failure names the node that raised;
- a sink serializes with its topic's serdes and appends one output to ``slot.outputs``;
  a value over ``max_record_bytes`` is a :class:`SerializationError` (Kafka would refuse
  it), as is a serde's own failure;
- an external sink keys its output by the input record's partition and offset, so only
  records of input records reach it (not punctuation output);
- with lineage on (:mod:`aiostreams.runtime.lineage`) a source's decoder drops any lineage
  header from the record it reads, and a sink (the fused processor-to-sink runner too)
  puts one first among the output's headers, naming the position its record carries, else
  the slot's input record (``slot.raw``), with that input's own lineage when it is the one
  named; a punctuation's record with no position gets none. With lineage off the decoder
  is the plain one and a sink pays one check per output; a source reading a topic the app
  writes origin headers to drops those (:mod:`aiostreams.runtime.origin`);
- where both serdes of a source or a sink have shortcuts (:func:`aiostreams.serde.shortcuts`)
  the compiled code calls those, and on any exception from one falls back to the serde
  methods, so errors (and results) are the methods' own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Protocol

from aiostreams.engine.context import NodeContext
from aiostreams.errors import DeserializationError, SerializationError, TopologyError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.lineage import (
    LINEAGE_HEADER,
    lineage_of,
    lineage_value,
    with_lineage,
    without_lineage,
)
from aiostreams.runtime.origin import without_origin
from aiostreams.runtime.slot import Slot
from aiostreams.serde import Serde, shortcuts
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import SinkNode
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition

_new = object.__new__
# The decoder and the sink build a Record and an OutgoingRecord per record by storing their
# fields on a bare instance: a class call to a dataclass __init__ costs about as much again.
# So these must be every field, and the dataclasses must not grow a __post_init__.
_RECORD_FIELDS = {Record: ("key", "value", "topic", "partition", "offset", "timestamp",
                           "headers"),
                  OutgoingRecord: ("topic", "key", "value", "timestamp", "headers",
                                   "partition")}
for _cls, _names in _RECORD_FIELDS.items():
    assert tuple(f.name for f in fields(_cls)) == _names \
        and not hasattr(_cls, "__post_init__"), f"{_cls.__name__} changed: update sync_chain"

Runner = Callable[[Record[Any, Any], Slot], None]
"""Runs one node (and what it forwards to) for ``record`` on behalf of ``slot``."""

Stamp = Callable[[Record[Any, Any], Slot, OutgoingRecord], None]
"""Puts the lineage header on the output a sink made of ``record`` (lineage on)."""

Decoder = Callable[[RawRecord], Record[Any, Any]]
"""A source's deserializer: raw bytes in, a :class:`Record` out, or a
:class:`DeserializationError` that names the partition, offset and which part failed."""


def compile_decoder(key_serde: Serde[Any], value_serde: Serde[Any], *,
                    lineage: bool = False, origin: bool = False) -> Decoder:
    """The source's decoder; with ``lineage`` it drops lineage headers from what it reads,
    with ``origin`` origin headers (see the module docstring)."""
    decoder = _compile_decoder(key_serde, value_serde)
    if not lineage and not origin:
        return decoder

    def decode_without_marks(raw: RawRecord) -> Record[Any, Any]:
        record = decoder(raw)
        if record.headers:
            headers = without_lineage(record.headers) if lineage else record.headers
            record.headers = without_origin(headers) if origin else headers
        return record

    return decode_without_marks


def _compile_decoder(key_serde: Serde[Any], value_serde: Serde[Any]) -> Decoder:
    deserialize_key = key_serde.deserialize
    deserialize_value = value_serde.deserialize

    def slow_decode(raw: RawRecord) -> Record[Any, Any]:
        try:
            key = deserialize_key(raw.topic, raw.key)
        except DeserializationError as e:
            raise e.at(raw.partition, raw.offset, "key") from e.__cause__
        try:
            value = deserialize_value(raw.topic, raw.value)
        except DeserializationError as e:
            raise e.at(raw.partition, raw.offset, "value") from e.__cause__
        return Record(key, value, raw.topic, raw.partition, raw.offset, raw.timestamp,
                      raw.headers)

    fast_key, fast_value = shortcuts(key_serde)[0], shortcuts(value_serde)[0]
    if fast_key is None or fast_value is None:
        return slow_decode

    def decode(raw: RawRecord) -> Record[Any, Any]:
        k, v = raw.key, raw.value
        try:
            key = None if k is None else fast_key(k)
            value = None if v is None else fast_value(v)
        except Exception:
            return slow_decode(raw)  # the serdes' own error, or their own result
        # Record(key, value, topic, ...) without the class call (see _RECORD_FIELDS)
        record: Record[Any, Any] = _new(Record)
        record.key = key
        record.value = value
        record.topic = raw.topic
        record.partition = raw.partition
        record.offset = raw.offset
        record.timestamp = raw.timestamp
        record.headers = raw.headers
        return record

    return decode


class CompilableNode(Protocol):
    """What the compiler reads of a task's node (``NodeExec``)."""

    name: str
    processor: Processor[Any, Any] | None
    sink: SinkNode | None
    external: str | None
    context: NodeContext | None

    @property
    def children(self) -> list[Any]: ...


def compile_node(node: CompilableNode, runner_of: Callable[[Any], Runner], *,
                 max_record_bytes: int, tp_of: Mapping[str, TopicPartition],
                 lineage: bool = False) -> Runner:
    """The runner of ``node``; ``runner_of(child)`` gives each child's (compile children
    first: the graph is acyclic). ``lineage``: sinks stamp the lineage header."""
    if node.sink is not None:
        return _sink_runner(node.name, node.sink, max_record_bytes, lineage=lineage)
    if node.processor is None:
        assert node.external is not None, f"node {node.name!r} is neither processor nor sink"
        return _external_runner(node.name, node.external, tp_of)
    assert node.context is not None, f"node {node.name!r} has no context yet"
    children = {child.name: runner_of(child) for child in node.children}
    if len(node.children) == 1 and node.children[0].sink is not None:
        fused = _processor_to_sink_runner(node.name, node.processor, node.context, children,
                                          node.children[0].sink, max_record_bytes,
                                          _lineage_stamp() if lineage else None)
        if fused is not None:
            return fused
    return _processor_runner(node.name, node.processor, node.context, children)


def _processor_runner(name: str, processor: Processor[Any, Any], context: NodeContext,
                      children: dict[str, Runner]) -> Runner:
    process = processor.process
    every = list(children.values())
    if len(every) == 1:
        return _one_child_runner(name, process, context, every[0], children)

    def run(record: Record[Any, Any], slot: Slot) -> None:
        buffer: list[tuple[str | None, Record[Any, Any]]] = []
        context.sync_buffer = buffer
        slot.node = name
        try:
            result = process(record)
        finally:
            context.sync_buffer = None
        if result is not None:
            raise _returned(name, result)
        for child, forwarded in buffer:
            if child is not None:
                children[child](forwarded, slot)
            else:
                for each in every:
                    each(forwarded, slot)

    return run


def _one_child_runner(name: str, process: Callable[[Record[Any, Any]], Any],
                      context: NodeContext, only: Runner, children: dict[str, Runner]) -> Runner:
    """A processor's runner when it has one child (so forwarding to all is to ``only``)."""
    def run(record: Record[Any, Any], slot: Slot) -> None:
        buffer: list[tuple[str | None, Record[Any, Any]]] = []
        context.sync_buffer = buffer
        slot.node = name
        try:
            result = process(record)
        finally:
            context.sync_buffer = None
        if result is not None:
            raise _returned(name, result)
        for child, forwarded in buffer:
            if child is None:
                only(forwarded, slot)
            else:
                children[child](forwarded, slot)

    return run


def _processor_to_sink_runner(name: str, processor: Processor[Any, Any],
                              context: NodeContext, children: dict[str, Runner],
                              sink: SinkNode, max_record_bytes: int,
                              stamp: Stamp | None = None) -> Runner | None:
    """The runner of a processor whose one child is a sink, with the sink's common case
    (both serdes have shortcuts that succeed, no partitioner, within max_record_bytes) run
    in place of a call to the sink's runner, which runs every other case (and so raises
    its own errors). None where the sink has no such common case."""
    fast_key, fast_value = shortcuts(sink.key_serde)[1], shortcuts(sink.value_serde)[1]
    if fast_key is None or fast_value is None or sink.partitioner is not None:
        return None
    process = processor.process
    (sink_name, only), = children.items()
    topic = sink.topic

    def run(record: Record[Any, Any], slot: Slot) -> None:
        buffer: list[tuple[str | None, Record[Any, Any]]] = []
        context.sync_buffer = buffer
        slot.node = name
        try:
            result = process(record)
        finally:
            context.sync_buffer = None
        if result is not None:
            raise _returned(name, result)
        for _, forwarded in buffer:  # every child is the sink
            slot.node = sink_name
            k, v = forwarded.key, forwarded.value
            try:
                key = None if k is None else fast_key(k)
                value = None if v is None else fast_value(v)
            except Exception:
                only(forwarded, slot)  # the serdes' own error, or their own result
                continue
            if (len(key) if key else 0) + (len(value) if value else 0) > max_record_bytes:
                only(forwarded, slot)  # raises, saying by how much
                continue
            # as _sink_runner's run (OutgoingRecord field by field, see _RECORD_FIELDS)
            out: OutgoingRecord = _new(OutgoingRecord)
            out.topic = topic
            out.key = key
            out.value = value
            out.timestamp = forwarded.timestamp
            out.headers = forwarded.headers
            out.partition = None
            slot.outputs.append(out)
            if stamp is not None:  # lineage on (the sink's runner stamps the other cases)
                stamp(forwarded, slot, out)

    return run


def _returned(name: str, result: object) -> TypeError:
    return TypeError(
        f"processor {name!r}: process() returned {type(result).__name__}; "
        "declare it 'async def' if it awaits"
    )


def _sink_runner(name: str, sink: SinkNode, max_record_bytes: int, *,
                 lineage: bool = False) -> Runner:
    topic = sink.topic
    serialize_key = sink.key_serde.serialize
    serialize_value = sink.value_serde.serialize
    partitioner = sink.partitioner
    fast_key, fast_value = shortcuts(sink.key_serde)[1], shortcuts(sink.value_serde)[1]

    def serialize(record: Record[Any, Any]) -> tuple[bytes | None, bytes | None]:
        try:
            return serialize_key(topic, record.key), serialize_value(topic, record.value)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(
                f"sink {name!r} cannot serialize a record for topic {topic!r}: {e}",
                topic=topic,
            ) from e

    def run(record: Record[Any, Any], slot: Slot) -> None:
        slot.node = name
        if fast_key is None or fast_value is None:
            key, value = serialize(record)
        else:
            k, v = record.key, record.value
            try:
                key = None if k is None else fast_key(k)
                value = None if v is None else fast_value(v)
            except Exception:
                key, value = serialize(record)  # the serdes' own error, or their own result
        size = (len(key) if key else 0) + (len(value) if value else 0)
        if size > max_record_bytes:
            raise SerializationError(
                f"sink {name!r}: the record for topic {topic!r} is {size} bytes, "
                f"over max_record_bytes={max_record_bytes} (Kafka would refuse it); "
                "shrink it, or raise both max_record_bytes and the topic's max.message.bytes",
                topic=topic,
            )
        partition = (partitioner(record.key, record.value, -1) if partitioner is not None
                     else None)
        # OutgoingRecord(topic, key, value, ...) without the class call (_RECORD_FIELDS)
        out: OutgoingRecord = _new(OutgoingRecord)
        out.topic = topic
        out.key = key
        out.value = value
        out.timestamp = record.timestamp
        out.headers = record.headers
        out.partition = partition
        slot.outputs.append(out)
        if stamp is not None:  # lineage on: the one check per output it costs when off
            stamp(record, slot, out)

    stamp = _lineage_stamp() if lineage else None
    return run


def _lineage_stamp() -> Stamp:
    """Stamps the output a sink just appended for ``record`` with the lineage header
    naming the input record ``record`` carries the position of (its record context: the
    triggering record, or for a suppressed window the record of its last update), else
    ``slot.raw``, followed by the lineage ``slot.raw`` came with when that is the record
    named; an output with neither (a punctuation's record made from nothing) loses any it
    carries. The header value of the last position named is kept: a record's many outputs
    encode it once."""
    # the position named last, its header value, the headers of an output that had none
    last_topic, last_partition, last_offset = "", -1, -1
    value = b""
    alone: tuple[tuple[str, bytes | None], ...] = ()

    def stamp(record: Record[Any, Any], slot: Slot, out: OutgoingRecord) -> None:
        nonlocal last_topic, last_partition, last_offset, value, alone
        raw = slot.raw
        offset = record.offset
        if offset >= 0 and record.topic:
            topic, partition = record.topic, record.partition
        elif raw is not None:
            topic, partition, offset = raw.topic, raw.partition, raw.offset
        else:
            if out.headers:
                out.headers = without_lineage(out.headers)
            return
        if offset != last_offset or partition != last_partition or topic != last_topic:
            upstream = (lineage_of(raw.headers) if raw is not None and raw.headers
                        and raw.offset == offset and raw.partition == partition
                        and raw.topic == topic else None)
            value = (lineage_value(topic, partition, offset, upstream) if upstream
                     else f"{topic}:{partition}:{offset}".encode())  # lineage_value, no call
            alone = ((LINEAGE_HEADER, value),)
            last_topic, last_partition, last_offset = topic, partition, offset
        out.headers = with_lineage(out.headers, value) if out.headers else alone

    return stamp


def _external_runner(name: str, external: str, tp_of: Mapping[str, TopicPartition]) -> Runner:
    def run(record: Record[Any, Any], slot: Slot) -> None:
        slot.node = name
        raw = slot.raw
        if raw is None:
            raise TopologyError(
                f"sink {name!r} received a record from a punctuation; external sinks "
                "take only results of input records (they deduplicate by input offset)"
            )
        slot.outputs.append(ExternalRecord(external, tp_of[raw.topic], raw.offset,
                                           record.key, record.value, record.timestamp))

    return run
