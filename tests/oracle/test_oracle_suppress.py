"""Suppression gives Kafka Streams' records: ``until_window_closes`` after tumbling, hopping
and session aggregations (final results only, on the suppression's own stream time, never a
tombstone) and ``until_time_limit`` after plain and windowed aggregations (non-resetting
buffer time, a bounded buffer emitting early in (time, key) order, deletes kept)."""

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


def windows_op(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["tumbling", "hopping", "session"]))
    grace = draw(st.sampled_from([0, 500, 1000, 3000]))
    if kind == "session":
        return {"op": "windowed_by", "id": "w", "from": "g", "windows": "session",
                "gap": draw(st.sampled_from([500, 1000, 3000])), "grace": grace}
    size = draw(st.sampled_from([1000, 2000, 5000]))
    op = {"op": "windowed_by", "id": "w", "from": "g", "windows": kind, "size": size,
          "grace": grace}
    if kind == "hopping":
        op["advance"] = draw(st.sampled_from([size // 2, size // 4 or 1]))
    return op


@st.composite
def suppress_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "s", "topic": "in"}]
    last = "s"
    if draw(st.booleans()):
        ops.append(filter_op(draw, "f", last))
        last = "f"
    ops.append({"op": "group_by_key", "id": "g", "from": last})
    until = draw(st.sampled_from(["window_closes", "time_limit"]))
    windowed = until == "window_closes" or draw(st.booleans())
    source = "g"
    if windowed:
        ops.append(windows_op(draw))
        source = "w"
    ops.append({"op": draw(st.sampled_from(["count", "reduce", "aggregate"])), "id": "agg",
                "from": source, "init": draw(st.integers(-2, 3))})
    suppress: dict[str, Any] = {"op": "suppress", "id": "sup", "from": "agg", "until": until}
    if until == "time_limit":
        suppress["wait"] = draw(st.sampled_from([0, 500, 1000, 4000]))
        if draw(st.booleans()):
            suppress["max_records"] = draw(st.integers(0, 3))
    ops += [suppress, {"op": "to_stream", "id": "changes", "from": "sup"},
            {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "suppress", "ops": ops, "outputs": ["out"],
            "inputs": draw(records(max_size=18))}


@ORACLE_SETTINGS
@given(case=suppress_cases(), **RUNS)
def test_suppression_matches_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                           max_in_flight: int, ordering: str,
                                           seed: int) -> None:
    check(oracle, "suppress", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
