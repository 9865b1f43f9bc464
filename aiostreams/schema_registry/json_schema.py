"""JSON values checked by a JSON Schema, in the Confluent wire format.

``JsonSchemaSerde(client, schema)`` takes the JSON Schema as a dict or text, or a pydantic
model (its ``model_json_schema()``; values decode to the model). The payload is compact JSON
(orjson, as Confluent's Python serializer writes it); values are validated against the
schema before they are written, and against the writer's schema when read, so a record that
breaks its schema fails on the way in and on the way out. The record name for the subject
strategies is the schema's ``title``.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import orjson
from pydantic import BaseModel

from aiostreams.schema_registry.client import Schema
from aiostreams.schema_registry.serde_base import DocumentSerde

__all__ = ["JsonSchemaSerde"]


def _validator(schema: dict[str, Any]) -> Any:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class JsonSchemaSerde(DocumentSerde[Any, Any]):
    """JSON through a schema registry, validated by JSON Schema; see the module docstring."""

    def _document_of(self, model: type[BaseModel]) -> dict[str, Any]:
        return model.model_json_schema()

    def _load(self, document: dict[str, Any] | str) -> None:
        parsed = json.loads(document) if isinstance(document, str) else document
        self.schema = Schema(document if isinstance(document, str) else json.dumps(parsed),
                             "JSON")
        self._validator = _validator(parsed)
        self.record_name = str(parsed.get("title", ""))

    def _parse(self, schema: Schema) -> Any:
        if schema.schema_type != "JSON":
            raise ValueError(f"the record was written with a {schema.schema_type} schema, "
                             "not JSON Schema: read the topic with the matching serde")
        return _validator(json.loads(schema.schema_str))

    def _encode(self, value: Any, writer: Any) -> bytes:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        error = jsonschema.exceptions.best_match(writer.iter_errors(value))
        if error is not None:
            raise ValueError(f"the value breaks the JSON Schema at "
                             f"{error.json_path}: {error.message}")
        return orjson.dumps(value)

    def _decode(self, payload: memoryview, writer: Any) -> Any:
        value = orjson.loads(payload)
        error = jsonschema.exceptions.best_match(writer.iter_errors(value))
        if error is not None:
            raise ValueError(f"the record breaks its writer's JSON Schema at "
                             f"{error.json_path}: {error.message}")
        if self.model is not None:
            return self.model.model_validate(value)
        return value
