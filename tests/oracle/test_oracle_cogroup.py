"""``cogroup`` of grouped streams (each with its own aggregator, one shared store) gives
Kafka Streams' records: one update per record of either stream, in the order the task
reads them, with the latest timestamp of the records that made the aggregate."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_strategies import filter_op, records

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

RUNS = {"max_in_flight": st.sampled_from(MAX_IN_FLIGHT),
        "ordering": st.sampled_from(["key", "partition"]), "seed": st.integers(0, 2**16)}


@st.composite
def cogroup_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "l", "topic": "in"},
                                 {"op": "stream", "id": "r", "topic": "in2"}]
    left, right = "l", "r"
    if draw(st.booleans()):
        ops.append(filter_op(draw, "lf", left))
        left = "lf"
    ops += [{"op": "group_by_key", "id": "gl", "from": left},
            {"op": "group_by_key", "id": "gr", "from": right},
            {"op": "cogroup", "id": "c1", "from": "gl"},
            {"op": "cogroup", "id": "c2", "from": "c1", "other": "gr",
             "a": draw(st.integers(-2, 3)), "b": draw(st.integers(-3, 3))},
            {"op": "aggregate", "id": "agg", "from": "c2", "init": draw(st.integers(-3, 3))},
            {"op": "to_stream", "id": "changes", "from": "agg"},
            {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "cogroup", "ops": ops, "outputs": ["out"],
            "inputs": draw(records(("in", "in2"), max_size=16))}


@ORACLE_SETTINGS
@given(case=cogroup_cases(), **RUNS)
def test_cogrouped_aggregations_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                                    max_in_flight: int, ordering: str,
                                                    seed: int) -> None:
    check(oracle, "cogroup", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


@st.composite
def windowed_cogroup_cases(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.sampled_from([1000, 2000, 5000]))
    advance = draw(st.sampled_from([size, size // 2])) if size > 1000 else size
    ops: list[dict[str, Any]] = [
        {"op": "stream", "id": "l", "topic": "in"}, {"op": "stream", "id": "r", "topic": "in2"},
        {"op": "group_by_key", "id": "gl", "from": "l"},
        {"op": "group_by_key", "id": "gr", "from": "r"},
        {"op": "cogroup", "id": "c1", "from": "gl"},
        {"op": "cogroup", "id": "c2", "from": "c1", "other": "gr",
         "a": draw(st.integers(-2, 3)), "b": draw(st.integers(-3, 3))},
        {"op": "windowed_by", "id": "w", "from": "c2", "windows": "time", "size": size,
         "advance": advance, "grace": draw(st.sampled_from([0, 500, 2000]))},
        {"op": "aggregate", "id": "agg", "from": "w", "init": draw(st.integers(-3, 3))},
        {"op": "to_stream", "id": "changes", "from": "agg"},
        {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "windowed_cogroup", "ops": ops, "outputs": ["out"],
            "inputs": draw(records(("in", "in2"), max_size=16))}


@ORACLE_SETTINGS
@given(case=windowed_cogroup_cases(), **RUNS)
def test_windowed_cogroups_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                               max_in_flight: int, ordering: str,
                                               seed: int) -> None:
    # Each grouped stream's processor keeps its own stream time (Kafka's too), so a
    # record of one stream is late only by the records of its own stream.
    check(oracle, "windowed_cogroup", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
