"""The Confluent wire format: how a registry-encoded record's bytes are laid out.

::

    byte 0      magic byte, always 0
    bytes 1-4   schema id, big-endian signed 32-bit
    (Protobuf)  message indexes: the path of the message type inside its .proto file
    rest        the payload (Avro binary, JSON text, Protobuf binary)

Protobuf's message indexes are a count followed by that many indexes, every number a
zig-zag varint; the common path ``[0]`` (the file's first message) is written as the single
byte ``0`` (a count of zero), as Confluent's serializers do.

Invariant: ``unframe(frame(i, p)) == (i, p)`` and, for Protobuf,
``read_message_indexes(write_message_indexes(ix)) == (ix, len)`` for every valid input;
malformed input raises :class:`WireFormatError`, never another exception.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = [
    "MAGIC_BYTE",
    "WireFormatError",
    "frame",
    "read_message_indexes",
    "unframe",
    "write_message_indexes",
]

MAGIC_BYTE: Final = 0
_HEADER: Final = struct.Struct(">bI")
_MAX_SCHEMA_ID: Final = 2**31 - 1
_MAX_VARINT_BYTES: Final = 10


class WireFormatError(ValueError):
    """Bytes that are not in the Confluent wire format; the message says what is wrong."""


def frame(schema_id: int, payload: bytes, message_indexes: bytes = b"") -> bytes:
    """The record bytes for ``payload`` written with schema ``schema_id``."""
    if not 0 <= schema_id <= _MAX_SCHEMA_ID:
        raise ValueError(f"schema id {schema_id} is outside 0..2**31-1")
    return _HEADER.pack(MAGIC_BYTE, schema_id) + message_indexes + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """``(schema_id, rest)`` of a framed record; ``rest`` still holds Protobuf's indexes."""
    if len(data) < _HEADER.size:
        raise WireFormatError(
            f"{len(data)} bytes is too short for the 5-byte Confluent header (magic byte 0 + "
            "4-byte schema id): the record was not written by a schema-registry serializer")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise WireFormatError(
            f"unknown magic byte {magic} (expected {MAGIC_BYTE}): the record was not written "
            "by a schema-registry serializer")
    return schema_id, memoryview(data)[_HEADER.size:]


def _write_varint(value: int, out: bytearray) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    for i in range(_MAX_VARINT_BYTES):
        if pos + i >= len(data):
            raise WireFormatError("the Protobuf message indexes end in the middle of a varint")
        byte = data[pos + i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos + i + 1
        shift += 7
    raise WireFormatError(f"a Protobuf message-index varint is longer than "
                          f"{_MAX_VARINT_BYTES} bytes")


def write_message_indexes(indexes: list[int]) -> bytes:
    """Protobuf's message-index prefix for the message at ``indexes`` in its file."""
    if not indexes or any(i < 0 for i in indexes):
        raise ValueError(f"message indexes must be a non-empty path of indexes >= 0, "
                         f"got {indexes}")
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(len(indexes), out)
    for index in indexes:
        _write_varint(index, out)
    return bytes(out)


def read_message_indexes(data: memoryview) -> tuple[list[int], int]:
    """``(indexes, end)``: the message path at the start of ``data`` and where it ends."""
    count, pos = _read_varint(data, 0)
    if count == 0:
        return [0], pos
    if count < 0 or count > len(data):
        raise WireFormatError(f"message-index count {count} does not fit in "
                              f"{len(data)} bytes")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(data, pos)
        if index < 0:
            raise WireFormatError(f"negative message index {index}")
        indexes.append(index)
    return indexes, pos
