"""The store format vocabulary: headers, checks of changelog records and files, conversions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.errors import StoreFormatError
from aiostreams.processors.store_values import TimedSerde, TimestampedSerde, ValueAndTimestamp
from aiostreams.serde import JsonSerde, LongSerde
from aiostreams.state import SQLiteKeyValueStore, StoreContext, StoreKind
from aiostreams.state.store_format import (
    FORMAT_HEADER,
    FORMATS,
    changelog_headers,
    check_records,
    convert,
    format_for,
    format_in,
)
from aiostreams.types import RawRecord

formats = st.sampled_from(sorted(FORMATS.values(), key=lambda f: f.id))
other_headers = st.lists(st.tuples(st.sampled_from(["trace", "aiostreams.owner", "x"]),
                                   st.binary(max_size=8)), max_size=3)


def record(headers: tuple[tuple[str, bytes | None], ...]) -> RawRecord:
    return RawRecord("app-s-changelog", 2, 41, 1.0, b"k", b"v", headers)


@given(formats, other_headers)
def test_a_record_marked_with_the_stores_format_passes_whatever_else_it_carries(
        fmt, extra) -> None:
    headers = (*extra, *changelog_headers(fmt))
    assert format_in(headers) == fmt.id
    check_records(fmt, "s", [record(headers)])


@given(formats, formats, other_headers)
def test_a_record_marked_with_another_format_is_refused(fmt, other, extra) -> None:
    if other == fmt:
        return
    with pytest.raises(StoreFormatError) as caught:
        check_records(fmt, "s", [record((*changelog_headers(other), *extra))])
    message = str(caught.value)
    assert fmt.id in message and other.id in message and "app-s-changelog[2]" in message
    assert "offset 41" in message and "store upgrade" in message and "--store s" in message


@given(formats, other_headers)
def test_an_unmarked_record_passes_only_where_the_bytes_never_changed(fmt, extra) -> None:
    if fmt.accepts_unmarked:
        check_records(fmt, "s", [record(tuple(extra))])
    else:
        with pytest.raises(StoreFormatError, match="unknown"):
            check_records(fmt, "s", [record(tuple(extra))])


def test_the_formats_whose_bytes_changed_refuse_unmarked_data() -> None:
    assert sorted(f.id for f in FORMATS.values() if not f.accepts_unmarked) == [
        "kv-timestamped/2", "window-timestamped/2"]


def test_the_last_format_header_counts() -> None:
    assert format_in(((FORMAT_HEADER, b"kv/1"), (FORMAT_HEADER, b"window/1"))) == "window/1"


def test_each_store_of_the_dsl_has_its_format() -> None:
    json = JsonSerde()
    assert format_for(StoreKind.KEY_VALUE, json).id == "kv/1"
    assert format_for(StoreKind.KEY_VALUE, TimestampedSerde(json)).id == "kv-timestamped/2"
    assert format_for(StoreKind.WINDOW, TimestampedSerde(json)).id == "window-timestamped/2"
    assert format_for(StoreKind.WINDOW, TimedSerde(json)).id == "window-timed/1"
    assert format_for(StoreKind.WINDOW, json).id == "window/1"
    assert format_for(StoreKind.VERSIONED, json).id == "versioned/1"


@given(st.integers(-(2**40), 2**40), st.integers(-(2**62), 2**62))
def test_a_plain_aggregate_converts_with_the_records_timestamp(ms: int, value: int) -> None:
    serde = TimestampedSerde(LongSerde())
    plain = LongSerde().serialize("t", value)
    assert plain is not None
    converted = convert(plain, "kv/1", "kv-timestamped/2", timestamp=ms / 1000)
    assert serde.deserialize("t", converted) == ValueAndTimestamp(value, ms / 1000)


@given(st.integers(0, 2**45), st.text(max_size=20))
def test_an_old_time_window_converts_exactly(ms: int, value: str) -> None:
    old = TimedSerde(JsonSerde()).serialize("t", (ms / 1000, value))
    assert old is not None
    converted = convert(old, "window-timed/1", "window-timestamped/2", timestamp=0.0)
    assert TimestampedSerde(JsonSerde()).deserialize("t", converted) == ValueAndTimestamp(
        value, ms / 1000)


def test_no_conversion_between_unrelated_formats() -> None:
    with pytest.raises(ValueError, match="no conversion"):
        convert(b"x", "window/1", "kv-timestamped/2", timestamp=0.0)


def _old_file(path: Path) -> None:
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
    db.execute("INSERT INTO kv VALUES (?, ?)", (b'"k"', b"12"))
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()


async def test_an_unmarked_file_of_a_timestamped_store_is_refused_untouched(
        tmp_path: Path) -> None:
    _old_file(tmp_path / "0_0" / "agg.sqlite")
    store = SQLiteKeyValueStore("agg", JsonSerde(), TimestampedSerde(JsonSerde()))
    with pytest.raises(StoreFormatError, match=r"agg\.sqlite holds format unknown"):
        await store.open(StoreContext("0_0", tmp_path, 0))
    db = sqlite3.connect(tmp_path / "0_0" / "agg.sqlite")
    assert db.execute("SELECT v FROM kv").fetchall() == [(b"12",)]  # not converted, kept
    db.close()


async def test_an_unmarked_file_of_a_plain_store_is_read_and_marked(tmp_path: Path) -> None:
    _old_file(tmp_path / "0_0" / "mine.sqlite")
    store = SQLiteKeyValueStore("mine", JsonSerde(), JsonSerde())
    await store.open(StoreContext("0_0", tmp_path, 0))
    assert await store.get("k") == 12
    await store.close()
    timestamped = SQLiteKeyValueStore("mine", JsonSerde(), TimestampedSerde(JsonSerde()))
    with pytest.raises(StoreFormatError, match="holds format 'kv/1'"):  # marked now
        await timestamped.open(StoreContext("0_0", tmp_path, 0))
