"""aiostreams.schema_registry exports exactly its documented API."""

from __future__ import annotations

import aiostreams.schema_registry as schema_registry

EXPECTED = {
    "AvroSerde", "JsonSchemaSerde", "ProtobufSerde", "RegistrySerde",
    "SchemaRegistryClient", "Schema", "SchemaReference", "RegisteredSchema", "SchemaType",
    "SchemaRegistryError", "IncompatibleSchemaError",
    "SubjectNameStrategy", "topic_name", "record_name", "topic_record_name",
    "avro_schema_for",
}


def test_all_lists_exactly_the_public_api() -> None:
    assert set(schema_registry.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    for name in schema_registry.__all__:
        assert hasattr(schema_registry, name), name
