"""Stateless operators (filter, map_values, select_key, map, flat_map_values, branch,
merge) give Kafka Streams' records, byte for byte, for every max_in_flight, completion
order and ordering mode."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_strategies import records, stateless_chain

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

ORDERINGS = st.sampled_from(["key", "partition", "unordered"])


@st.composite
def stateless_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "in", "topic": "in"}]
    chain, last = draw(stateless_chain("in"))
    ops += chain
    topics: tuple[str, ...] = ("in",)
    if draw(st.booleans()):
        topics = ("in", "in2")
        ops.append({"op": "stream", "id": "in2", "topic": "in2"})
        other, other_last = draw(stateless_chain("in2", prefix="t"))
        ops += other
        ops.append({"op": "merge", "id": "merged", "from": last, "other": other_last})
        last = "merged"
    ops.append({"op": "to", "from": last, "topic": "out"})
    return {"id": "stateless", "ops": ops, "inputs": draw(records(topics)),
            "outputs": ["out"]}


@ORACLE_SETTINGS
@given(case=stateless_cases(), max_in_flight=st.sampled_from(MAX_IN_FLIGHT),
       ordering=ORDERINGS, seed=st.integers(0, 2**16))
def test_stateless_chains_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                              max_in_flight: int, ordering: str,
                                              seed: int) -> None:
    check(oracle, "stateless", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
