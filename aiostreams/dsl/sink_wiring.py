"""A stream's exits: a topic (``Stream.to``, ``Stream.through``) and the lake
(``Stream.to_parquet``, ``Stream.to_delta``, ``Stream.to_iceberg``).

Serdes of a topic sink: the ones given, else the topic's declared ones, else the stream's
known ones, else bytes. ``through`` needs a declared :class:`~aiostreams.topic.Topic`, so
its serdes and partitions are known when the records are read back.

The bridge is an optional extra: :mod:`aiostreams.sinks` is imported only when a stream
is written to Parquet or Delta, and a missing extra is a
:class:`~aiostreams.errors.TopologyError` at build time that says what to install.

Invariant: a Spark sink is fed through its validation step (added with it by
:mod:`aiostreams.sinks.attach`), so a value that does not fit the schema fails before the
sink and follows the dead-letter path; files (or the Delta commit) are durable before the
offsets they carry are committed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiostreams.errors import TopologyError
from aiostreams.serde import serde_for
from aiostreams.topic import Topic

if TYPE_CHECKING:
    from aiostreams.dsl.stream import Stream


def add_topic_sink(stream: Stream[Any, Any], topic: Topic | str, *, key_serde: Any,
                   value_serde: Any, partitioner: Callable[[Any, Any, int], int] | None,
                   name: str | None) -> None:
    """``stream.to(topic, ...)``: a sink node writing every record of ``stream``."""
    builder = stream.builder
    topic_name = topic.name if isinstance(topic, Topic) else topic
    declared = isinstance(topic, Topic) or builder.topology.topic(topic_name)
    key_s = serde_for(key_serde) if key_serde is not None else (
        None if declared else stream.key_serde)
    value_s = serde_for(value_serde) if value_serde is not None else (
        None if declared else stream.value_serde)
    builder.add_sink("KSTREAM-SINK", topic, [stream.node], name=name,
                     key_serde=key_s, value_serde=value_s, partitioner=partitioner)


def through_topic(stream: Stream[Any, Any], topic: Topic,
                  name: str | None) -> Stream[Any, Any]:
    """``stream.through(topic)``: ``to(topic)``, and a new source reading it back."""
    from aiostreams.dsl.stream import Stream

    if not isinstance(topic, Topic):
        raise TopologyError(
            f"through({topic!r}) needs a declared Topic (app.topic(name, key=..., "
            "value=..., partitions=N)) so its serdes and partitions are known"
        )
    stream.to(topic, name=None if name is None else f"{name}-sink")
    node = stream.builder.add_source("KSTREAM-SOURCE", [topic],
                                     name=None if name is None else f"{name}-source")
    return Stream(stream.builder, node, key_serde=topic.key_serde,
                  value_serde=topic.value_serde)


def add_spark_sink(stream: Stream[Any, Any], kind: str, path: Any, model: Any,
                   name: str | None, options: dict[str, Any]) -> Any:
    """A ``ParquetSink`` (``kind`` "parquet"), ``DeltaSink`` ("delta") or ``IcebergSink``
    ("iceberg") fed by ``stream`` through its validation step."""
    if kind == "iceberg":
        return _add_iceberg_sink(stream, path, model, name, options)
    try:
        from aiostreams import sinks
    except ImportError as e:  # pragma: no cover - the spark extra is missing
        raise TopologyError(
            f"to_{kind} needs the Spark bridge: pip install 'aiostreams[spark]' ({e})"
        ) from e
    builder = stream.builder
    if kind == "delta":
        sink: Any = sinks.DeltaSink(path, model, **options)
        sinks.add_delta_sink(builder.topology,
                             builder.new_name("KSTREAM-DELTA", name), stream.node, sink)
    else:
        sink = sinks.ParquetSink(path, model, **options)
        sinks.add_parquet_sink(builder.topology,
                               builder.new_name("KSTREAM-PARQUET", name), stream.node, sink)
    return sink


def _add_iceberg_sink(stream: Stream[Any, Any], table: Any, model: Any, name: str | None,
                      options: dict[str, Any]) -> Any:
    try:
        from aiostreams.sinks import iceberg_sink
    except ImportError as e:  # pragma: no cover - the iceberg extra is missing
        raise TopologyError(
            f"to_iceberg needs pyiceberg: pip install 'aiostreams[iceberg]' ({e})") from e
    builder = stream.builder
    sink = iceberg_sink.IcebergSink(table, model, **options)
    iceberg_sink.add_iceberg_sink(builder.topology, builder.new_name("KSTREAM-ICEBERG", name),
                                  stream.node, sink)
    return sink
