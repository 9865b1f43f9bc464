"""A dead letter always fits ``max_record_bytes``, whatever the failed record carried."""

from __future__ import annotations

from hashlib import sha256

from hypothesis import given, settings
from hypothesis import strategies as st

from aiostreams.engine.failure import (
    DLQ_HEADER_PREFIX,
    MIN_RECORD_BYTES,
    dead_letter_record,
    record_size,
)
from aiostreams.types import RawRecord

LIMIT = 1_000_000


def raw(key: bytes | None, value: bytes | None, headers=()) -> RawRecord:  # type: ignore[no-untyped-def]
    return RawRecord("orders", 2, 41, 1.5, key, value, tuple(headers))


def failure() -> Exception:
    try:
        raise ValueError("x" * 50_000)  # a long message, as a validation error can have
    except ValueError as e:
        return e


def dead_letter(record: RawRecord, limit: int = LIMIT):  # type: ignore[no-untyped-def]
    return dead_letter_record(record, failure(), topic="dlq", attempts=3, processor="p",
                              now=0.0, max_bytes=limit)


def test_small_dead_letter_keeps_everything_and_says_nothing_was_cut() -> None:
    d = dead_letter(raw(b"k", b"v", [("trace-id", b"1")]))
    headers = dict(d.headers)
    assert (d.key, d.value) == (b"k", b"v")
    assert headers["trace-id"] == b"1"
    assert len(headers[DLQ_HEADER_PREFIX + "message"]) == 4096
    assert DLQ_HEADER_PREFIX + "truncated" not in headers


def test_value_near_the_limit_cuts_error_headers_first_and_keeps_the_value() -> None:
    value = b"v" * (LIMIT - 10_000)
    d = dead_letter(raw(b"k", value))
    headers = dict(d.headers)
    assert d.value == value
    assert headers[DLQ_HEADER_PREFIX + "truncated"] == b"error-headers"
    assert record_size(d.key, d.value, d.headers) <= LIMIT


def test_oversized_value_is_cut_keeping_its_hash_and_size() -> None:
    value = bytes(range(256)) * 4100  # 1,049,600 bytes
    d = dead_letter(raw(b"k", value))
    headers = dict(d.headers)
    assert d.key == b"k"
    assert d.value is not None and value.startswith(d.value) and len(d.value) > LIMIT - 10_000
    assert headers[DLQ_HEADER_PREFIX + "truncated"] == b"error-headers,value"
    assert headers[DLQ_HEADER_PREFIX + "value.sha256"] == sha256(value).hexdigest().encode()
    assert headers[DLQ_HEADER_PREFIX + "value.size"] == str(len(value)).encode()
    assert record_size(d.key, d.value, d.headers) <= LIMIT


def test_oversized_key_is_cut_after_the_value() -> None:
    key = b"k" * 1_047_500
    d = dead_letter(raw(key, b"small value"))
    headers = dict(d.headers)
    assert d.value == b""  # the value goes first, then the key
    assert d.key is not None and key.startswith(d.key) and len(d.key) > LIMIT - 10_000
    assert headers[DLQ_HEADER_PREFIX + "truncated"] == b"error-headers,value,key"
    assert headers[DLQ_HEADER_PREFIX + "key.sha256"] == sha256(key).hexdigest().encode()
    assert headers[DLQ_HEADER_PREFIX + "key.size"] == b"1047500"
    assert record_size(d.key, d.value, d.headers) <= LIMIT


@settings(max_examples=60, deadline=None)
@given(key=st.one_of(st.none(), st.integers(0, 1_100_000)),
       value=st.one_of(st.none(), st.integers(0, 1_100_000)),
       headers=st.lists(st.tuples(st.text(max_size=20), st.integers(0, 300_000)), max_size=5),
       limit=st.integers(MIN_RECORD_BYTES, 1_048_576))
def test_dead_letter_always_fits_the_limit_and_names_its_origin(
        key: int | None, value: int | None, headers: list[tuple[str, int]],
        limit: int) -> None:
    record = raw(None if key is None else b"k" * key, None if value is None else b"v" * value,
                 [(name, b"h" * size) for name, size in headers])
    d = dead_letter(record, limit)
    assert record_size(d.key, d.value, d.headers) <= limit
    found = dict(d.headers)
    assert found[DLQ_HEADER_PREFIX + "offset"] == b"41"
    assert found[DLQ_HEADER_PREFIX + "topic"] == b"orders"
