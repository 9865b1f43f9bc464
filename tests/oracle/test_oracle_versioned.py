"""Versioned tables (KIP-889/914) and stream-table joins with grace (KIP-923) give Kafka
Streams 4.4.0's records: a versioned source table's updates (out-of-order ones stored and
forwarded, ones older than the history retention dropped; filter/map_values after it),
and a stream joined with a versioned table as of each record's timestamp, with and without
a grace buffer, inner and left, with tombstones, null keys and out-of-order timestamps."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_strategies import filter_op, map_values_op, records

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

RUNS = {"max_in_flight": st.sampled_from(MAX_IN_FLIGHT),
        "ordering": st.sampled_from(["key", "partition"]), "seed": st.integers(0, 2**16)}
RETENTION_MS = st.sampled_from([0, 500, 1000, 3000, 10000])


@st.composite
def versioned_table_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "table", "id": "t", "topic": "tin",
                                  "versioned": draw(RETENTION_MS)}]
    last = "t"
    kind = draw(st.sampled_from(["", "", "filter", "map_values"]))
    if kind:
        ops.append((filter_op if kind == "filter" else map_values_op)(draw, "tf", last))
        last = "tf"
    ops += [{"op": "to_stream", "id": "changes", "from": last},
            {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "versioned_table", "ops": ops, "outputs": ["out"],
            "inputs": draw(records(("tin",), max_size=16))}


@st.composite
def versioned_join_cases(draw: st.DrawFn) -> dict[str, Any]:
    retention = draw(RETENTION_MS)
    join: dict[str, Any] = {"op": draw(st.sampled_from(["join", "left_join"])), "id": "j",
                            "from": "s", "other": "t"}
    if draw(st.booleans()):
        join["grace"] = draw(st.sampled_from([0, 500, 1000, 3000]).filter(
            lambda g: g <= max(retention, 0)) if retention else st.just(0))
    ops = [{"op": "stream", "id": "s", "topic": "sin"},
           {"op": "table", "id": "t", "topic": "tin", "versioned": retention},
           join, {"op": "to", "from": "j", "topic": "out"}]
    # A buffered join cannot hold a null key (Kafka Streams fails on one); see the docs.
    keys = st.sampled_from(["a", "b", "c"]) if "grace" in join else st.sampled_from(
        ["a", "b", "c", None])
    inputs = draw(records(("sin", "tin"), max_size=18, keys=keys))
    if draw(st.booleans()):
        # Coarse timestamps: many records share one, so the grace buffer's order among
        # equal timestamps (key bytes, then arrival) is exercised.
        inputs = [{**r, "ts": r["ts"] // 4000 * 4000} for r in inputs]
    return {"id": "versioned_join", "ops": ops, "outputs": ["out"], "inputs": inputs}


@ORACLE_SETTINGS
@given(case=versioned_table_cases(), **RUNS)
def test_versioned_table_updates_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                                     max_in_flight: int, ordering: str,
                                                     seed: int) -> None:
    check(oracle, "versioned_table", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


# Records due together leave the grace buffer by timestamp, then key bytes (not arrival).
EQUAL_TIMESTAMPS = {
    "id": "versioned_join", "outputs": ["out"], "ops": [
        {"op": "stream", "id": "s", "topic": "sin"},
        {"op": "table", "id": "t", "topic": "tin", "versioned": 10000},
        {"op": "left_join", "id": "j", "from": "s", "other": "t", "grace": 1000},
        {"op": "to", "from": "j", "topic": "out"}],
    "inputs": [{"topic": "tin", "key": "a", "value": 7, "ts": 0},
               {"topic": "sin", "key": "b", "value": 1, "ts": 4000},
               {"topic": "sin", "key": "a", "value": 2, "ts": 4000},
               {"topic": "sin", "key": "b", "value": 3, "ts": 4000},
               {"topic": "sin", "key": "c", "value": 4, "ts": 10000}]}


@ORACLE_SETTINGS
@given(case=versioned_join_cases(), **RUNS)
@example(case=EQUAL_TIMESTAMPS, max_in_flight=64, ordering="key", seed=1)
def test_versioned_stream_table_joins_match_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "versioned_join", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
