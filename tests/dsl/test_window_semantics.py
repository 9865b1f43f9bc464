"""Windowed aggregations mean what Kafka Streams 3.9 means, whatever the concurrency.

Each case is a reproduction from the Kafka Streams oracle (issue 17), run with one record in
flight and with many, behind an async step whose calls complete in a seeded-random order,
under key and partition ordering. The expected records - window, value and timestamp - are
Kafka Streams' ``TopologyTestDriver`` output for the same input (see ``tests/oracle`` for the
differential suite that checks generated inputs)."""

from __future__ import annotations

from typing import Any

import pytest
from dslkit import In, make_app, produce, random_yields, run_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams.windows import (
    HoppingWindows,
    SessionWindowedSerde,
    SessionWindows,
    TimeWindowedSerde,
    TumblingWindows,
)

IN_FLIGHT = [1, 7, 64, 1024]
ORDERINGS = ["key", "partition"]

Row = tuple[str, float, float, Any, float]  # key, window start, end, value, timestamp


async def run_windowed(records: list[In], windows: Any, *, max_in_flight: int,
                       ordering: str, seed: int = 0, keep: Any = None) -> list[Row]:
    app = make_app(max_in_flight=max_in_flight, ordering=ordering)
    clicks = app.topic("clicks", key=str, value=int)
    key_serde = (SessionWindowedSerde(str) if isinstance(windows, SessionWindows)
                 else TimeWindowedSerde(str, size=windows.size))
    out = app.topic("out", key=key_serde, value=int)
    stream = app.stream(clicks).map_values_async(random_yields(seed))
    if keep is not None:
        stream = stream.filter(keep)
    (stream.group_by_key().windowed_by(windows).count().to_stream().to(out))
    produce(app, clicks, records)
    result = await run_app(app, [out])
    return [(w.key, w.start, w.end, v, ts) for _, w, v, ts in result.outputs["out"]]


@pytest.mark.parametrize("ordering", ORDERINGS)
@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_a_session_closed_by_another_keys_record_is_not_extended(
        max_in_flight: int, ordering: str) -> None:
    # x@12's session could grow until 12 + 5 (gap) + 2 (grace) = 19; y@20 closes it, so
    # x@14 starts a new session, however many records are in flight
    rows = await run_windowed([In("x", 1, 12.0), In("y", 1, 20.0), In("x", 1, 14.0)],
                              SessionWindows(5.0, grace=2.0), max_in_flight=max_in_flight,
                              ordering=ordering, seed=max_in_flight)
    assert rows == [("x", 12.0, 12.0, 1, 12.0), ("y", 20.0, 20.0, 1, 20.0),
                    ("x", 14.0, 14.0, 1, 14.0)]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_a_window_update_is_stamped_with_the_largest_timestamp_that_made_it(
        max_in_flight: int) -> None:
    rows = await run_windowed([In("a", 1, 14.999), In("a", 1, 10.001)],
                              TumblingWindows(10.0, grace=10.0), max_in_flight=max_in_flight,
                              ordering="key")
    assert rows == [("a", 10.0, 20.0, 1, 14.999), ("a", 10.0, 20.0, 2, 14.999)]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_a_merged_away_session_is_deleted_with_a_tombstone_stamped_at_its_end(
        max_in_flight: int) -> None:
    rows = await run_windowed([In("y", 1, 8.0), In("y", 1, 10.0)],
                              SessionWindows(5.0, grace=60.0), max_in_flight=max_in_flight,
                              ordering="key")
    assert rows == [("y", 8.0, 8.0, 1, 8.0), ("y", 8.0, 8.0, None, 8.0),
                    ("y", 8.0, 10.0, 2, 10.0)]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_a_record_at_a_one_point_sessions_time_updates_it_without_a_tombstone(
        max_in_flight: int) -> None:
    rows = await run_windowed([In("x", 1, 1.0), In("x", 1, 1.0)],
                              SessionWindows(5.0), max_in_flight=max_in_flight,
                              ordering="key")
    assert rows == [("x", 1.0, 1.0, 1, 1.0), ("x", 1.0, 1.0, 2, 1.0)]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_a_record_filtered_out_upstream_does_not_advance_the_windows_stream_time(
        max_in_flight: int) -> None:
    # b@30 never reaches the aggregation, so a@7 is not late there (Kafka Streams tracks
    # stream time per window processor, over the records that reach it)
    rows = await run_windowed([In("a", 1, 5.0), In("b", 0, 30.0), In("a", 1, 7.0)],
                              TumblingWindows(10.0), max_in_flight=max_in_flight,
                              ordering="key", keep=lambda _k, v: v > 0)
    assert rows == [("a", 0.0, 10.0, 1, 5.0), ("a", 0.0, 10.0, 2, 7.0)]


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT)
async def test_a_null_key_record_does_not_advance_the_windows_stream_time(
        max_in_flight: int) -> None:
    rows = await run_windowed([In("a", 1, 5.0), In(None, 1, 30.0), In("a", 1, 7.0)],
                              SessionWindows(1.0), max_in_flight=max_in_flight,
                              ordering="key")
    assert rows == [("a", 5.0, 5.0, 1, 5.0), ("a", 7.0, 7.0, 1, 7.0)]


# -- the serial-equivalence property, for stateful window operators -------------------------

WINDOW_KINDS = {
    "tumbling": TumblingWindows(4.0, grace=1.0),
    "hopping": HoppingWindows(4.0, 2.0, grace=2.0),
    "session": SessionWindows(2.0, grace=1.0),
}

records_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 3),
              st.integers(-6, 4)),
    min_size=1, max_size=40)


def as_input(steps: list[tuple[str | None, int, int]]) -> list[In]:
    """Timestamps that mostly increase, with out-of-order and late jumps back."""
    now, records = 0, []
    for key, value, jump in steps:
        now = max(0, now + max(jump, 0))
        records.append(In(key, value, float(max(0, now + min(jump, 0)))))
    return records


@pytest.mark.parametrize("kind", sorted(WINDOW_KINDS))
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=records_strategy, seed=st.integers(0, 2**16),
       max_in_flight=st.sampled_from(IN_FLIGHT[1:]),
       ordering=st.sampled_from([*ORDERINGS, "unordered"]))
async def test_windowed_counts_equal_the_serial_run_for_every_completion_order(
        kind: str, steps: list[tuple[str | None, int, int]], seed: int, max_in_flight: int,
        ordering: str) -> None:
    records = as_input(steps)
    windows = WINDOW_KINDS[kind]
    serial = await run_windowed(records, windows, max_in_flight=1, ordering="key",
                                keep=lambda _k, v: v > 0)
    concurrent = await run_windowed(records, windows, max_in_flight=max_in_flight,
                                    ordering=ordering, seed=seed,
                                    keep=lambda _k, v: v > 0)
    assert concurrent == serial
