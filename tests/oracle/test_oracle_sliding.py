"""Sliding-window aggregations (``SlidingWindows.of_time_difference_and_grace``) give Kafka
Streams' records: left and right windows created from record pairs, early records (before
the time difference) in ``[0, d]``, late records dropped, result timestamps, and suppressed
final results."""

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
def sliding_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "s", "topic": "in"}]
    last = "s"
    if draw(st.booleans()):
        ops.append(filter_op(draw, "f", last))
        last = "f"
    ops += [{"op": "group_by_key", "id": "g", "from": last},
            {"op": "windowed_by", "id": "w", "from": "g", "windows": "sliding",
             "diff": draw(st.sampled_from([1, 500, 1000, 2000, 5000])),
             "grace": draw(st.sampled_from([0, 500, 2000]))},
            {"op": draw(st.sampled_from(["count", "reduce", "aggregate"])), "id": "agg",
             "from": "w", "init": draw(st.integers(-2, 3))}]
    last = "agg"
    if draw(st.integers(0, 3)) == 0:
        ops.append({"op": "suppress", "id": "sup", "from": last, "until": "window_closes"})
        last = "sup"
    ops += [{"op": "to_stream", "id": "changes", "from": last},
            {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "sliding", "ops": ops, "outputs": ["out"],
            "inputs": draw(records(max_size=18))}


@ORACLE_SETTINGS
@given(case=sliding_cases(), **RUNS)
def test_sliding_window_aggregations_match_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "sliding_windows", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
