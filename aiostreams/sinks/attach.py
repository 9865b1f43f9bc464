"""Attaching a Parquet sink to a topology: a validation step, then the sink.

A value that does not fit the dataset's schema must not reach the sink: the sink sees
results at retire, too late to route a record anywhere, and a bad row would fail the
flush (and so every commit after it). :func:`add_parquet_sink` therefore puts a synchronous
processor in front of the sink that checks each value (and key) against the schema and
raises :class:`~aiostreams.errors.SerializationError` when it does not fit. The engine then
treats the record like any failed record: retry (the check is deterministic, so a retry
fails the same way), then the app's error handler: the dead-letter topic when one is set,
``skip``, or ``fail`` (the task stops, nothing past the record is committed, the error names
the record and the field). Never a corrupt file.

The DSL calls these for ``stream.to_parquet(...)`` and ``stream.to_delta(...)``.
"""

from __future__ import annotations

from typing import Any, Protocol

from aiostreams.errors import SerializationError
from aiostreams.sinks.delta_sink import DeltaSink
from aiostreams.sinks.parquet_sink import ParquetSink
from aiostreams.sinks.schema import SchemaMismatch
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import Topology
from aiostreams.types import Record

__all__ = ["CheckedSink", "ParquetValidator", "add_delta_sink", "add_parquet_sink",
           "add_validated_sink", "validator_name"]


class CheckedSink(Protocol):
    """What the validation step needs of a table sink (Parquet, Delta, Iceberg): the check,
    and where and what it writes, for the error."""

    path: Any
    model: type[Any]
    validated_upstream: bool

    def validate(self, value: Any, key: Any = None) -> None: ...


def validator_name(sink_name: str) -> str:
    """The name of the validation node :func:`add_parquet_sink` puts before ``sink_name``."""
    return f"{sink_name}-validate"


class ParquetValidator(Processor[Any, Any]):
    """Forwards records whose value fits ``sink``'s schema, unchanged; raises
    :class:`SerializationError` naming the record and the field for the others."""

    def __init__(self, sink: CheckedSink) -> None:
        self.sink = sink

    def process(self, record: Record[Any, Any]) -> None:
        try:
            self.sink.validate(record.value, record.key)
        except SchemaMismatch as e:
            raise SerializationError(
                f"the value of {record.topic}[{record.partition}]@{record.offset} does not fit "
                f"the schema of {self.sink.path} ({self.sink.model.__name__}): {e}",
                topic=record.topic,
            ) from None
        self.context.forward(record)


def add_parquet_sink(topology: Topology, name: str, parent: str, sink: ParquetSink) -> None:
    """Add ``sink`` to ``topology`` as node ``name``, fed by ``parent`` through a
    validation processor named :func:`validator_name` (``"<name>-validate"``)."""
    add_validated_sink(topology, name, parent, sink)


def add_delta_sink(topology: Topology, name: str, parent: str, sink: DeltaSink) -> None:
    """Add the Delta ``sink`` to ``topology`` as node ``name``, fed by ``parent`` through a
    validation processor named :func:`validator_name` (``"<name>-validate"``)."""
    add_validated_sink(topology, name, parent, sink)


def add_validated_sink(topology: Topology, name: str, parent: str, sink: CheckedSink) -> None:
    """Add the external ``sink`` to ``topology`` as node ``name``, fed by ``parent``
    through a validation processor named :func:`validator_name` (``"<name>-validate"``)."""
    check = validator_name(name)
    topology.add_processor(check, lambda: ParquetValidator(sink), parent)
    topology.add_external_sink(name, sink, check)
    sink.validated_upstream = True
