"""Windowed aggregations: tumbling, hopping and session windows, with out-of-order and
late records, end to end on the memory broker.

Lateness is judged against the operator's own stream time as of each record (the largest
timestamp among the records that reached it, up to and including this one), whatever the
number of records in flight; each test runs with one record in flight and with many.
"""

from __future__ import annotations

from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app

from aiostreams import ConfigError, DeserializationError
from aiostreams.windows import (
    HoppingWindows,
    SessionWindowedSerde,
    SessionWindows,
    TimeWindowedSerde,
    TumblingWindows,
    Windowed,
)

IN_FLIGHT = [1, 64]
IN_FLIGHT_PAST_CLOSE = IN_FLIGHT


def window_app(max_in_flight: int) -> tuple[Any, Any, Any]:
    app = make_app(max_in_flight=max_in_flight)
    clicks = app.topic("clicks", key=str, value=str, partitions=2)
    out = app.topic("out", key=TimeWindowedSerde(str, size=10.0),
                    value=int)  # one partition: one order
    return app, clicks, out


def final(result: Any, store: str) -> dict[tuple[str, float], Any]:
    """A window store's contents as {(key, start): value}, whatever the store layout."""
    return {(k[0], k[1]): v for k, v in result.stores[store].items()}


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT_PAST_CLOSE)
async def test_tumbling_windows_count_per_key_and_window(max_in_flight: int) -> None:
    app, clicks, out = window_app(max_in_flight)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0))
     .count(materialized="clicks-10s", retention=100.0).to_stream().to(out))
    produce(app, clicks, [In("b", "y", 4.0)]
            + [In("a", "x", t) for t in (0.0, 3.0, 9.999, 10.0, 25.0)])
    result = await run_app(app, [out])
    assert [(w.key, w.start, w.end, n) for w, n in result.pairs("out") if w.key == "a"] == [
        ("a", 0.0, 10.0, 1), ("a", 0.0, 10.0, 2), ("a", 0.0, 10.0, 3),
        ("a", 10.0, 20.0, 1), ("a", 20.0, 30.0, 1)]
    assert final(result, "clicks-10s") == {("a", 0.0): 3, ("a", 10.0): 1, ("a", 20.0): 1,
                                           ("b", 0.0): 1}


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_hopping_windows_update_every_window_containing_the_record(
        max_in_flight: int) -> None:
    app, clicks, out = window_app(max_in_flight)
    (app.stream(clicks).group_by_key().windowed_by(HoppingWindows(10.0, 5.0))
     .count().to_stream().to(out))
    produce(app, clicks, [In("a", "x", 12.0), In("a", "x", 14.0)])
    result = await run_app(app, [out])
    assert [(w.start, w.end, n) for w, n in result.pairs("out")] == [
        (5.0, 15.0, 1), (10.0, 20.0, 1), (5.0, 15.0, 2), (10.0, 20.0, 2)]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_out_of_order_record_within_grace_updates_its_window(max_in_flight: int) -> None:
    app, clicks, out = window_app(max_in_flight)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=5.0))
     .count(materialized="c", retention=100.0).to_stream().to(out))
    produce(app, clicks, [In("a", "x", 1.0), In("a", "x", 13.0), In("a", "x", 8.0)])
    result = await run_app(app, [out])
    assert [(w.start, n) for w, n in result.pairs("out")] == [(0.0, 1), (10.0, 1), (0.0, 2)]
    assert app.late_records.total == 0


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT_PAST_CLOSE)
async def test_late_record_is_dropped_counted_and_never_changes_a_closed_window(
        max_in_flight: int) -> None:
    app, clicks, out = window_app(max_in_flight)
    late_seen: list[tuple[str, float]] = []
    late = app.late_records
    late.on_late(lambda node, record: late_seen.append((node, record.timestamp)))
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=2.0))
     .count(materialized="c", retention=100.0, name="windowed-count").to_stream().to(out))
    # stream time 12.0 closes [0, 10) (10 + 2 <= 12); 11.0 does not close it
    produce(app, clicks, [In("a", "x", 5.0), In("a", "x", 11.0), In("a", "x", 9.0),
                          In("b", "x", 12.0), In("a", "x", 7.0), In("a", "x", 6.0)])
    result = await run_app(app, [out])
    assert [(w.key, w.start, n) for w, n in result.pairs("out")] == [
        ("a", 0.0, 1), ("a", 10.0, 1), ("a", 0.0, 2), ("b", 10.0, 1)]
    assert final(result, "c")[("a", 0.0)] == 2
    assert late.by_node == {"windowed-count": 2}
    assert late_seen == [("windowed-count", 7.0), ("windowed-count", 6.0)]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT_PAST_CLOSE)
async def test_windowed_reduce_and_aggregate(max_in_flight: int) -> None:
    app = make_app(max_in_flight=max_in_flight)
    temps = app.topic("temps", key=str, value=float)
    peak = app.topic("peak", key=TimeWindowedSerde(str, size=60.0), value=float)
    stats = app.topic("stats", key=TimeWindowedSerde(str, size=60.0), value="json")
    windowed = app.stream(temps).group_by_key().windowed_by(TumblingWindows(60.0))
    windowed.reduce(max).to_stream().to(peak)
    windowed.aggregate(lambda: [0, 0.0], lambda k, t, acc: [acc[0] + 1, acc[1] + t]
                       ).to_stream().to(stats)
    produce(app, temps, [In("s", 20.5, 1.0), In("s", 22.0, 30.0), In("s", 19.0, 61.0)])
    result = await run_app(app, [peak, stats])
    assert [(w.start, v) for w, v in result.pairs("peak")] == [(0.0, 20.5), (0.0, 22.0),
                                                              (60.0, 19.0)]
    assert [v for _, v in result.pairs("stats")] == [[1, 20.5], [2, 42.5], [1, 19.0]]


# -- sessions ---------------------------------------------------------------------------------


def session_app(max_in_flight: int) -> tuple[Any, Any, Any]:
    app = make_app(max_in_flight=max_in_flight)
    clicks = app.topic("clicks", key=str, value=str)
    out = app.topic("out", key=SessionWindowedSerde(str), value=int)
    return app, clicks, out


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_sessions_split_on_gaps_and_merge_when_a_record_bridges_them(
        max_in_flight: int) -> None:
    app, clicks, out = session_app(max_in_flight)
    (app.stream(clicks).group_by_key().windowed_by(SessionWindows(5.0, grace=100.0))
     .count(materialized="sessions").to_stream().to(out))
    produce(app, clicks, [In("a", "x", 0.0), In("a", "x", 3.0), In("a", "x", 12.0),
                          In("a", "x", 7.5)])
    result = await run_app(app, [out])
    assert [(w.start, w.end, n) for w, n in result.pairs("out")] == [
        (0.0, 0.0, 1),
        (0.0, 0.0, None), (0.0, 3.0, 2),  # 3.0 extends the session: old one deleted
        (12.0, 12.0, 1),  # 12.0 is more than 5s after 3.0: a new session
        # 7.5 is within 5s of both: the two sessions merge into one
        (0.0, 3.0, None), (12.0, 12.0, None), (0.0, 12.0, 4),
    ]
    stored = list(result.stores["sessions"].values())
    assert [value[1] for value in stored] == [4]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT_PAST_CLOSE)
async def test_late_session_record_is_dropped(max_in_flight: int) -> None:
    app, clicks, out = session_app(max_in_flight)
    (app.stream(clicks).group_by_key().windowed_by(SessionWindows(5.0, grace=1.0))
     .count().to_stream().to(out))
    # 1.0 would make a@0.0's session [0.0, 1.0], which may grow until 6.0 and is closed
    # with grace 1.0 at 7.0: stream time 20.0 is past that
    produce(app, clicks, [In("a", "x", 0.0), In("b", "x", 20.0), In("a", "x", 1.0)])
    result = await run_app(app, [out])
    assert [(w.key, w.start, n) for w, n in result.pairs("out")] == [("a", 0.0, 1),
                                                                     ("b", 20.0, 1)]
    assert app.late_records.total == 1


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_session_reduce_merges_aggregates(max_in_flight: int) -> None:
    app = make_app(max_in_flight=max_in_flight)
    clicks = app.topic("clicks", key=str, value=str)
    out = app.topic("paths", key=SessionWindowedSerde(str), value=str)
    (app.stream(clicks).group_by_key().windowed_by(SessionWindows(5.0, grace=60.0))
     .reduce(lambda a, b: a + b).to_stream().to(out))
    produce(app, clicks, [In("u", "a", 0.0), In("u", "c", 8.0), In("u", "b", 4.0)])
    result = await run_app(app, [out])
    assert [v for _, v in result.pairs("paths")][-1] == "acb"


# -- building ---------------------------------------------------------------------------------


def test_window_specs_refuse_impossible_sizes() -> None:
    with pytest.raises(ConfigError, match="advance"):
        HoppingWindows(5.0, 10.0)
    with pytest.raises(ConfigError, match="window size"):
        TumblingWindows(0.0)
    with pytest.raises(ConfigError, match="session gap"):
        SessionWindows(-1.0)


def test_retention_shorter_than_size_plus_grace_is_refused() -> None:
    app = make_app()
    grouped = app.stream(app.topic("t", key=str, value=str)).group_by_key()
    with pytest.raises(ConfigError, match="retention"):
        grouped.windowed_by(TumblingWindows(10.0, grace=5.0)).count(retention=12.0)


def test_time_windowed_serde_writes_key_then_start_as_kafka_streams_does() -> None:
    serde = TimeWindowedSerde(str, size=10.0)
    key = Windowed("user-1", 1700000000.5, 1700000010.5)
    data = serde.serialize("t", key)
    assert data == b"user-1" + (1700000000500).to_bytes(8, "big")
    assert serde.deserialize("t", data) == key  # the end comes from the size
    assert serde.serialize("t", None) is None


def test_session_windowed_serde_writes_key_end_then_start_as_kafka_streams_does() -> None:
    serde = SessionWindowedSerde(str)
    key = Windowed("user-1", 1700000000.5, 1700000003.0)
    data = serde.serialize("t", key)
    assert data == (b"user-1" + (1700000003000).to_bytes(8, "big")
                    + (1700000000500).to_bytes(8, "big"))
    assert serde.deserialize("t", data) == key


def test_windowed_serde_refuses_a_key_too_short_for_its_bounds() -> None:
    with pytest.raises(DeserializationError, match="16 bytes of window bounds"):
        SessionWindowedSerde(str).deserialize("t", b"short")
