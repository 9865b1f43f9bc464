"""Joins give Kafka Streams' records: stream-stream inner/left/outer joins (windows with
before/after/grace; non-joined results emitted when the window closes, as Kafka 3.1+),
stream-table inner/left joins (null keys in a left join, KIP-962), table-table
inner/left/outer joins (and a re-grouped aggregate of their results, which subtracts the
join's old results), and table sources and their filter/map_values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_strategies import filter_op, map_values_op, records

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

JOIN_KEYS = st.sampled_from(["a", "b", None])
RUNS = {"max_in_flight": st.sampled_from(MAX_IN_FLIGHT),
        "ordering": st.sampled_from(["key", "partition"]), "seed": st.integers(0, 2**16)}


def maybe_stateless(draw: st.DrawFn, ops: list[dict[str, Any]], source: str,
                    ident: str) -> str:
    """Append a filter or map_values after ``source`` (or nothing); the last variable."""
    kind = draw(st.sampled_from(["", "", "filter", "map_values"]))
    if not kind:
        return source
    ops.append((filter_op if kind == "filter" else map_values_op)(draw, ident, source))
    return ident


def join_case(draw: st.DrawFn, ops: list[dict[str, Any]], last: str,
              topics: tuple[str, ...], family: str) -> dict[str, Any]:
    ops.append({"op": "to", "from": last, "topic": "out"})
    return {"id": family, "ops": ops, "outputs": ["out"],
            "inputs": draw(records(topics, keys=JOIN_KEYS, max_size=16))}


@st.composite
def stream_stream_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "l", "topic": "in"},
                                 {"op": "stream", "id": "r", "topic": "in2"}]
    left = maybe_stateless(draw, ops, "l", "lf")
    right = maybe_stateless(draw, ops, "r", "rf")
    durations = st.sampled_from([0, 500, 1000, 2000, 4000])
    ops.append({"op": draw(st.sampled_from(["join", "left_join", "outer_join"])), "id": "j",
                "from": left, "other": right, "before": draw(durations),
                "after": draw(durations), "grace": draw(st.sampled_from([0, 500, 2000]))})
    return join_case(draw, ops, "j", ("in", "in2"), "stream_stream_join")


@st.composite
def stream_table_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "s", "topic": "in"},
                                 {"op": "table", "id": "t", "topic": "tin"}]
    stream = maybe_stateless(draw, ops, "s", "sf")
    ops.append({"op": draw(st.sampled_from(["join", "left_join"])), "id": "j",
                "from": stream, "other": "t"})
    return join_case(draw, ops, "j", ("in", "tin"), "stream_table_join")


@st.composite
def table_table_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "table", "id": "l", "topic": "tin"},
                                 {"op": "table", "id": "r", "topic": "tin2"}]
    left = maybe_stateless(draw, ops, "l", "lf")
    right = maybe_stateless(draw, ops, "r", "rf")
    ops.append({"op": draw(st.sampled_from(["join", "left_join", "outer_join"])), "id": "j",
                "from": left, "other": right})
    last = "j"
    if draw(st.booleans()):  # re-grouped: the aggregate subtracts the join's old results
        ops.append({"op": "group_by", "id": "g", "from": "j", "n": draw(st.integers(1, 3)),
                    "a": draw(st.integers(0, 2)), "b": draw(st.integers(-2, 2))})
        ops.append({"op": draw(st.sampled_from(["count", "reduce", "aggregate"])),
                    "id": "agg", "from": "g", "init": draw(st.integers(-3, 3))})
        last = "agg"
    ops.append({"op": "to_stream", "id": "changes", "from": last})
    return join_case(draw, ops, "changes", ("tin", "tin2"), "table_table_join")


@st.composite
def table_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "table", "id": "t", "topic": "tin"}]
    last = maybe_stateless(draw, ops, "t", "t1")
    last = maybe_stateless(draw, ops, last, "t2")
    ops.append({"op": "to_stream", "id": "changes", "from": last})
    return join_case(draw, ops, "changes", ("tin",), "table")


@ORACLE_SETTINGS
@given(case=stream_stream_cases(), **RUNS)
def test_stream_stream_joins_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                                 max_in_flight: int, ordering: str,
                                                 seed: int) -> None:
    check(oracle, "stream_stream_join", case, max_in_flight=max_in_flight,
          ordering=ordering, seed=seed)


@ORACLE_SETTINGS
@given(case=stream_table_cases(), **RUNS)
def test_stream_table_joins_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                                max_in_flight: int, ordering: str,
                                                seed: int) -> None:
    check(oracle, "stream_table_join", case, max_in_flight=max_in_flight,
          ordering=ordering, seed=seed)


@ORACLE_SETTINGS
@given(case=table_table_cases(), **RUNS)
def test_table_table_joins_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                               max_in_flight: int, ordering: str,
                                               seed: int) -> None:
    check(oracle, "table_table_join", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


@ORACLE_SETTINGS
@given(case=table_cases(), **RUNS)
def test_table_sources_and_their_operators_match_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "table", case, max_in_flight=max_in_flight, ordering=ordering, seed=seed)
