"""Schema-registry serdes: Avro, JSON Schema and Protobuf in the Confluent wire format.

::

    from aiostreams.schema_registry import AvroSerde, SchemaRegistryClient

    registry = SchemaRegistryClient("http://127.0.0.1:8080/apis/ccompat/v7")
    orders = app.topic("orders", key=str, value=AvroSerde(registry, Order))

See docs/guides/schemas.md.
"""

from aiostreams.schema_registry.avro import AvroSerde
from aiostreams.schema_registry.avro_schema import avro_schema_for
from aiostreams.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaType,
)
from aiostreams.schema_registry.errors import IncompatibleSchemaError, SchemaRegistryError
from aiostreams.schema_registry.json_schema import JsonSchemaSerde
from aiostreams.schema_registry.naming import (
    SubjectNameStrategy,
    record_name,
    topic_name,
    topic_record_name,
)
from aiostreams.schema_registry.protobuf import ProtobufSerde
from aiostreams.schema_registry.serde_base import RegistrySerde

__all__ = [
    "AvroSerde",
    "IncompatibleSchemaError",
    "JsonSchemaSerde",
    "ProtobufSerde",
    "RegisteredSchema",
    "RegistrySerde",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SchemaType",
    "SubjectNameStrategy",
    "avro_schema_for",
    "record_name",
    "topic_name",
    "topic_record_name",
]
