"""Avro values in the Confluent wire format, encoded with fastavro.

``AvroSerde(client, schema)`` takes the Avro schema as a dict or JSON text, or a pydantic
model (its schema comes from :func:`~aiostreams.schema_registry.avro_schema.avro_schema_for`
and values decode to the model). Values are dicts (or model instances); decoding resolves the
writer's schema (by the record's schema id) against the serde's schema as the reader's, so a
consumer with a newer compatible schema reads older records (Avro schema resolution).
The record name for the subject strategies is the schema's full name (``namespace.name``).
From a model it is the class name unless ``record_name=`` sets it: renaming the class
changes the name, which Avro schema resolution and the ``record_name`` subject strategies
treat as another record (an incompatible change), so pin it for records others read.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
from pydantic import BaseModel

from aiostreams.schema_registry.avro_schema import avro_schema_for, avro_value
from aiostreams.schema_registry.client import Schema, SchemaRegistryClient
from aiostreams.schema_registry.naming import SubjectNameStrategy, topic_name
from aiostreams.schema_registry.serde_base import DocumentSerde, SchemaSource

__all__ = ["AvroSerde"]

_Parsed = Any  # fastavro's parsed schema


class AvroSerde(DocumentSerde[Any, _Parsed]):
    """Avro records through a schema registry; see the module docstring. ``record_name``
    (with a pydantic model only) is the Avro full name of the generated record, e.g.
    ``"com.acme.Order"``; a schema given as a document names its record itself."""

    def __init__(self, client: SchemaRegistryClient, schema: SchemaSource, *,
                 record_name: str | None = None, is_key: bool = False,
                 subject_name_strategy: SubjectNameStrategy = topic_name,
                 auto_register: bool = True, use_latest: bool = False) -> None:
        if record_name is not None and not (isinstance(schema, type)
                                            and issubclass(schema, BaseModel)):
            raise ValueError(f"record_name={record_name!r} names the record generated from a "
                             "pydantic model; an Avro schema given as a document names its "
                             "record with its own 'name' and 'namespace'")
        self._record_name_override = record_name
        super().__init__(client, schema, is_key=is_key,
                         subject_name_strategy=subject_name_strategy,
                         auto_register=auto_register, use_latest=use_latest)

    def _document_of(self, model: type[BaseModel]) -> dict[str, Any]:
        return avro_schema_for(model, name=self._record_name_override)

    def _load(self, document: dict[str, Any] | str) -> None:
        parsed_json = json.loads(document) if isinstance(document, str) else document
        self.schema = Schema(json.dumps(parsed_json, separators=(",", ":")), "AVRO")
        self._reader = fastavro.parse_schema(parsed_json)
        self.record_name = (str(self._reader.get("name", ""))
                            if isinstance(self._reader, dict) else "")

    def _parse(self, schema: Schema) -> _Parsed:
        if schema.schema_type != "AVRO":
            raise ValueError(f"the record was written with a {schema.schema_type} schema, "
                             "not Avro: read the topic with the matching serde")
        return fastavro.parse_schema(json.loads(schema.schema_str))

    def _encode(self, value: Any, writer: _Parsed) -> bytes:
        if isinstance(value, BaseModel):
            value = avro_value(value)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, writer, value)
        return out.getvalue()

    def _decode(self, payload: memoryview, writer: _Parsed) -> Any:
        buffer = io.BytesIO(payload)
        value = fastavro.schemaless_reader(buffer, writer, self._reader)
        if buffer.tell() != len(payload):
            raise ValueError(f"{len(payload) - buffer.tell()} bytes left after the Avro "
                             "value: the writer's schema does not match the bytes")
        if self.model is not None:
            return self.model.model_validate(value)
        return value
