"""Tables made from streams and re-grouped tables give Kafka Streams' records:
``stream.to_table()`` (null keys dropped, deletes forwarded, a key-changed stream
repartitioned first) and ``table.group_by(...).count/reduce/aggregate`` (old and new
values through the repartition topic, one change when a row stays in its group, the old
group's subtraction before the new group's addition, Kafka's timestamps) - also of a
windowed table (time, session or sliding windows), whose old values the re-grouping asks
for."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_strategies import filter_op, map_values_op, records

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

RUNS = {"max_in_flight": st.sampled_from(MAX_IN_FLIGHT),
        "ordering": st.sampled_from(["key", "partition"]), "seed": st.integers(0, 2**16)}
TABLE_KEYS = st.sampled_from(["a", "b", "c", "d", None])


def table_op(draw: st.DrawFn, ops: list[dict[str, Any]], last: str, ident: str) -> str:
    """Maybe a table filter or map_values after ``last``; the last variable."""
    kind = draw(st.sampled_from(["", "", "filter", "map_values"]))
    if not kind:
        return last
    ops.append((filter_op if kind == "filter" else map_values_op)(draw, ident, last))
    return ident


@st.composite
def to_table_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "s", "topic": "in"}]
    last = "s"
    if draw(st.booleans()):
        ops.append({"op": "select_key", "id": "k", "from": last, "n": draw(st.integers(1, 3))})
        last = "k"
    ops.append({"op": "to_table", "id": "t", "from": last})
    last = table_op(draw, ops, "t", "tf")
    ops += [{"op": "to_stream", "id": "changes", "from": last},
            {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "to_table", "ops": ops, "outputs": ["out"],
            "inputs": draw(records(("in",), keys=TABLE_KEYS, max_size=16))}


@st.composite
def regrouped_table_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = []
    if draw(st.booleans()):
        ops.append({"op": "table", "id": "t", "topic": "tin"})
        topic = "tin"
    else:
        ops += [{"op": "stream", "id": "s", "topic": "in"},
                {"op": "to_table", "id": "t", "from": "s"}]
        topic = "in"
    last = table_op(draw, ops, "t", "tf")
    ops.append({"op": "group_by", "id": "g", "from": last, "n": draw(st.integers(1, 3)),
                "a": draw(st.integers(0, 2)), "b": draw(st.integers(-2, 2))})
    kind = draw(st.sampled_from(["count", "reduce", "aggregate"]))
    ops += [{"op": kind, "id": "agg", "from": "g", "init": draw(st.integers(-3, 3))},
            {"op": "to_stream", "id": "changes", "from": "agg"},
            {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "regrouped_table", "ops": ops, "outputs": ["out"],
            "inputs": draw(records((topic,), keys=TABLE_KEYS, max_size=16))}


@st.composite
def regrouped_windowed_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A windowed count/reduce/aggregate re-grouped by a bucket of its values and
    aggregated again: the subtractor sees each window's old aggregate."""
    windows = draw(st.sampled_from(["time", "session", "sliding"]))
    window: dict[str, Any] = {"op": "windowed_by", "id": "w", "from": "g", "windows": windows,
                              "grace": draw(st.sampled_from([0, 1000, 5000]))}
    if windows == "time":
        size = draw(st.sampled_from([1000, 2000, 5000]))
        window.update(size=size, advance=draw(st.sampled_from([size, 1000])))
    elif windows == "session":
        window["gap"] = draw(st.sampled_from([500, 1000, 2000]))
    else:
        window["diff"] = draw(st.sampled_from([500, 1000, 2000]))
    ops: list[dict[str, Any]] = [
        {"op": "stream", "id": "s", "topic": "in"},
        {"op": "group_by_key", "id": "g", "from": "s"}, window,
        {"op": draw(st.sampled_from(["count", "reduce", "aggregate"])), "id": "wagg",
         "from": "w", "init": draw(st.integers(-2, 3))},
        {"op": "group_by", "id": "rg", "from": "wagg", "n": draw(st.integers(1, 3)),
         "a": draw(st.integers(0, 2)), "b": draw(st.integers(-2, 2))},
        {"op": draw(st.sampled_from(["count", "reduce", "aggregate"])), "id": "agg",
         "from": "rg", "init": draw(st.integers(-3, 3))},
        {"op": "to_stream", "id": "changes", "from": "agg"},
        {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "regrouped_windowed", "ops": ops, "outputs": ["out"],
            "inputs": draw(records(("in",), keys=TABLE_KEYS, max_size=16))}


@ORACLE_SETTINGS
@given(case=to_table_cases(), **RUNS)
def test_stream_to_table_matches_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                               max_in_flight: int, ordering: str,
                                               seed: int) -> None:
    check(oracle, "to_table", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


@ORACLE_SETTINGS
@given(case=regrouped_table_cases(), **RUNS)
def test_regrouped_table_aggregations_match_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "regrouped_table", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


@ORACLE_SETTINGS
@given(case=regrouped_windowed_cases(), **RUNS)
def test_regrouped_windowed_tables_match_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "regrouped_windowed", case, max_in_flight=max_in_flight,
          ordering=ordering, seed=seed)
