"""Protobuf messages in the Confluent wire format.

``ProtobufSerde(client, MessageClass)`` registers the message's ``.proto`` file as Confluent's
Python serializer does (the file's ``FileDescriptorProto``, serialized and base64-encoded) and
writes, after the 5-byte header, the message indexes (the message's path among the file's
message types; ``[0]``, the first top-level message, as the single byte 0) and the message
bytes. Decoding parses the payload as ``MessageClass``, after checking that the writer's
indexes name a message of the same full name when the writer's schema is readable.

Files that import other files (schema references) are refused with a clear error: this serde
does not register references yet. The record name for the subject strategies is the
message's full name (``package.Message``).
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import Message

from aiostreams.schema_registry.client import Schema, SchemaRegistryClient
from aiostreams.schema_registry.naming import SubjectNameStrategy, topic_name
from aiostreams.schema_registry.serde_base import RegistrySerde
from aiostreams.schema_registry.wire import read_message_indexes, write_message_indexes

__all__ = ["ProtobufSerde"]


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
                 auto_register: bool = True, use_latest: bool = False) -> None:
        super().__init__(client, is_key=is_key, subject_name_strategy=subject_name_strategy,
                         auto_register=auto_register, use_latest=use_latest)
        descriptor = message_class.DESCRIPTOR
        if descriptor.file.dependencies:
            raise ValueError(
                f"{descriptor.full_name}'s file {descriptor.file.name} imports "
                f"{[d.name for d in descriptor.file.dependencies]}: schema references are not "
                "supported by ProtobufSerde; put the message and its types in one file")
        self.message_class = message_class
        self.record_name = descriptor.full_name
        self.schema = Schema(
            base64.standard_b64encode(descriptor.file.serialized_pb).decode("ascii"),
            "PROTOBUF")
        file = descriptor_pb2.FileDescriptorProto()
        file.ParseFromString(descriptor.file.serialized_pb)
        self._indexes = write_message_indexes(_message_path(file, descriptor.full_name))

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
