"""The Confluent wire format, byte for byte against confluent-kafka's own encoder."""

from __future__ import annotations

import contextlib

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.schema_registry.wire import (
    WireFormatError,
    frame,
    read_message_indexes,
    unframe,
    write_message_indexes,
)

paths = st.lists(st.integers(min_value=0, max_value=2**31), min_size=1, max_size=6)


@given(st.integers(min_value=0, max_value=2**31 - 1), st.binary(max_size=64))
def test_frame_then_unframe_gives_back_id_and_payload(schema_id: int, payload: bytes) -> None:
    data = frame(schema_id, payload)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == schema_id
    got_id, rest = unframe(data)
    assert (got_id, bytes(rest)) == (schema_id, payload)


@given(paths, st.binary(max_size=16))
def test_message_indexes_round_trip_and_end_where_the_payload_starts(
        path: list[int], payload: bytes) -> None:
    data = memoryview(write_message_indexes(path) + payload)
    indexes, end = read_message_indexes(data)
    assert indexes == path
    assert bytes(data[end:]) == payload


@given(st.integers(min_value=0, max_value=2**31 - 1), paths)
def test_header_and_message_indexes_are_the_bytes_confluent_writes(
        schema_id: int, path: list[int]) -> None:
    theirs = SchemaId("PROTOBUF", schema_id, message_indexes=path).id_to_bytes()
    assert frame(schema_id, b"", write_message_indexes(path)) == theirs


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00", b"\x01\x00\x00\x00\x01payload"])
def test_unframe_refuses_bytes_without_the_header(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        unframe(data)


@given(st.binary(max_size=12))
def test_reading_message_indexes_of_any_bytes_raises_only_wire_format_error(
        data: bytes) -> None:
    with contextlib.suppress(WireFormatError):
        read_message_indexes(memoryview(data))
