"""count/reduce/aggregate of grouped streams (by key, and re-keyed through a repartition
topic), and the same over tumbling, hopping and session windows with grace, give Kafka
Streams' records: windowed keys, values, result timestamps."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_known import known_lead_area
from oracle_strategies import filter_op, map_values_op, records

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

ORDERINGS = st.sampled_from(["key", "partition"])
AGGREGATIONS = st.sampled_from(["count", "reduce", "aggregate"])


@st.composite
def grouped(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A source, maybe a filter/map_values, then group_by_key / select_key+group_by_key /
    group_by, ending in the variable ``g``."""
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "in", "topic": "in"}]
    current = "in"
    prefix = draw(st.sampled_from(["", "filter", "map_values"]))
    if prefix == "filter":
        ops.append(filter_op(draw, "p", current))
        current = "p"
    elif prefix == "map_values":
        ops.append(map_values_op(draw, "p", current))
        current = "p"
    how = draw(st.sampled_from(["by_key", "select_key", "group_by"]))
    n = draw(st.integers(1, 3))
    if how == "select_key":
        ops.append({"op": "select_key", "id": "rekeyed", "from": current, "n": n})
        current = "rekeyed"
    ops.append({"op": "group_by" if how == "group_by" else "group_by_key", "id": "g",
                "from": current, "n": n})
    return ops


def finish(draw: st.DrawFn, ops: list[dict[str, Any]], source: str) -> dict[str, Any]:
    ops = [*ops, {"op": draw(AGGREGATIONS), "id": "agg", "from": source,
                  "init": draw(st.integers(-2, 5))},
           {"op": "to_stream", "id": "changes", "from": "agg"},
           {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "aggregate", "ops": ops, "inputs": draw(records()), "outputs": ["out"]}


@st.composite
def aggregate_cases(draw: st.DrawFn) -> dict[str, Any]:
    return finish(draw, draw(grouped()), "g")


@st.composite
def time_window_cases(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.sampled_from([1000, 2000, 5000, 10000]))
    advance = draw(st.sampled_from([size, size, size // 2, 1000])) if size > 1000 else size
    window = {"op": "windowed_by", "id": "w", "from": "g", "windows": "time", "size": size,
              "advance": advance, "grace": draw(st.sampled_from([0, 500, 1000, 3000]))}
    return finish(draw, [*draw(grouped()), window], "w")


@st.composite
def session_cases(draw: st.DrawFn) -> dict[str, Any]:
    window = {"op": "windowed_by", "id": "w", "from": "g", "windows": "session",
              "gap": draw(st.sampled_from([500, 1000, 2000, 5000])),
              "grace": draw(st.sampled_from([0, 500, 2000]))}
    return finish(draw, [*draw(grouped()), window], "w")


RUNS = {"max_in_flight": st.sampled_from(MAX_IN_FLIGHT), "ordering": ORDERINGS,
        "seed": st.integers(0, 2**16)}


@known_lead_area("aggregate")
@ORACLE_SETTINGS
@given(case=aggregate_cases(), **RUNS)
def test_stream_aggregations_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                                 max_in_flight: int, ordering: str,
                                                 seed: int) -> None:
    check(oracle, "aggregate", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


@known_lead_area("time_windows")
@ORACLE_SETTINGS
@given(case=time_window_cases(), **RUNS)
def test_time_windowed_aggregations_match_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "time_windows", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


@known_lead_area("session_windows")
@ORACLE_SETTINGS
@given(case=session_cases(), **RUNS)
def test_session_windowed_aggregations_match_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "session_windows", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
