"""Protobuf messages in the Confluent wire format.

``ProtobufSerde(client, MessageClass)`` registers the message's ``.proto`` file as Confluent's
Python serializer does (the file's ``FileDescriptorProto``, serialized and base64-encoded) and
writes, after the 5-byte header, the message indexes (the message's path among the file's
message types; ``[0]``, the first top-level message, as the single byte 0) and the message
bytes. Decoding parses the payload as ``MessageClass``, after checking that the writer's
indexes name a message of the same full name when the writer's schema is readable.

Imported files become schema references, as with Confluent's serializer: each imported file
is registered (with ``auto_register``) under a subject named after the file
(``common/money.proto``) and referenced by name, subject and version; Google's and
Confluent's well-known files (``google/protobuf/...``, ``google/type/...``,
``confluent/...``) are skipped unless ``skip_known_types=False``, because every registry
knows them. The record name for the subject strategies is the message's full name
(``package.Message``).
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import Message

from aiostreams.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from aiostreams.schema_registry.errors import SchemaRegistryError
from aiostreams.schema_registry.naming import SubjectNameStrategy, topic_name
from aiostreams.schema_registry.serde_base import RegistrySerde
from aiostreams.schema_registry.wire import read_message_indexes, write_message_indexes

__all__ = ["ProtobufSerde"]

_WELL_KNOWN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


def _as_schema_str(file: FileDescriptor) -> str:
    return base64.standard_b64encode(file.serialized_pb).decode("ascii")


def _message_path(file: descriptor_pb2.FileDescriptorProto, full_name: str) -> list[int]:
    """The indexes of the message ``full_name`` among ``file``'s (nested) message types."""
    prefix = f"{file.package}." if file.package else ""
    names = full_name.removeprefix(prefix).split(".")
    path: list[int] = []
    messages: Any = file.message_type
    for name in names:
        index = [m.name for m in messages].index(name)
        path.append(index)
        messages = messages[index].nested_type
    return path


def _full_name_at(file: descriptor_pb2.FileDescriptorProto, path: list[int]) -> str:
    messages: Any = file.message_type
    names = [file.package] if file.package else []
    for index in path:
        if index >= len(messages):
            raise ValueError(f"message indexes {path} point past the writer's .proto file")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(names)


class ProtobufSerde(RegistrySerde[Message, descriptor_pb2.FileDescriptorProto | None]):
    """Protobuf messages of one class through a schema registry; see the module docstring."""

    def __init__(self, client: SchemaRegistryClient, message_class: type[Message], *,
                 is_key: bool = False,
                 subject_name_strategy: SubjectNameStrategy = topic_name,
                 auto_register: bool = True, use_latest: bool = False,
                 skip_known_types: bool = True) -> None:
        super().__init__(client, is_key=is_key, subject_name_strategy=subject_name_strategy,
                         auto_register=auto_register, use_latest=use_latest)
        descriptor = message_class.DESCRIPTOR
        self.message_class = message_class
        self.skip_known_types = skip_known_types
        self.record_name = descriptor.full_name
        self.schema = Schema(_as_schema_str(descriptor.file), "PROTOBUF")
        self._with_references: Schema | None = None
        file = descriptor_pb2.FileDescriptorProto()
        file.ParseFromString(descriptor.file.serialized_pb)
        self._indexes = write_message_indexes(_message_path(file, descriptor.full_name))

    async def _schema_with_references(self) -> Schema:
        if self._with_references is None:
            references = await self._references_of(self.message_class.DESCRIPTOR.file)
            self._with_references = Schema(self.schema.schema_str, "PROTOBUF", references)
        return self._with_references

    async def _references_of(self, file: FileDescriptor) -> tuple[SchemaReference, ...]:
        """The references of ``file``'s imports, registering them first (depth first) with
        ``auto_register``; runs on the client's thread."""
        references = []
        for imported in file.dependencies:
            if self.skip_known_types and imported.name.startswith(_WELL_KNOWN_PREFIXES):
                continue
            schema = Schema(_as_schema_str(imported), "PROTOBUF",
                            await self._references_of(imported))
            subject = imported.name
            if self.auto_register:
                await self.client._register(subject, schema)
            found = await self.client._lookup_registered(subject, schema)
            if found is None:
                raise SchemaRegistryError(
                    f"{file.name} imports {imported.name}, which is not registered under "
                    f"subject {subject!r}, and auto_register is off: register it first or "
                    "pass auto_register=True", status=404)
            references.append(SchemaReference(imported.name, subject, found.version))
        return tuple(references)

    def _parse(self, schema: Schema) -> descriptor_pb2.FileDescriptorProto | None:
        if schema.schema_type != "PROTOBUF":
            raise ValueError(f"the record was written with a {schema.schema_type} schema, "
                             "not Protobuf: read the topic with the matching serde")
        try:
            raw = base64.b64decode(schema.schema_str, validate=True)
        except ValueError:
            return None  # .proto text: readable by the message class, not checked here
        file = descriptor_pb2.FileDescriptorProto()
        file.ParseFromString(raw)
        return file

    def _prefix(self, value: Message) -> bytes:
        return self._indexes

    def _encode(self, value: Message, writer: Any) -> bytes:
        if not isinstance(value, self.message_class):
            raise TypeError(f"expected a {self.record_name} message, got "
                            f"{type(value).__name__}")
        payload: bytes = value.SerializeToString()
        return payload

    def _decode(self, payload: memoryview,
                writer: descriptor_pb2.FileDescriptorProto | None) -> Message:
        path, start = read_message_indexes(payload)
        if writer is not None:
            written = _full_name_at(writer, path)
            if written != self.record_name:
                raise ValueError(f"the record holds a {written} message, not "
                                 f"{self.record_name}")
        message = self.message_class()
        message.ParseFromString(bytes(payload[start:]))
        return message
