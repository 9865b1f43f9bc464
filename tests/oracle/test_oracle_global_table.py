"""Stream-global-table joins, inner and left, give Kafka Streams' records: each stream
record joins the global table's current value of ``key_selector(key, value)``; records with
a null value or a null selected key are dropped (a left join keeps a null *stream* key);
global updates and deletes are seen by the stream records piped after them.

Each input is processed to the end before the next is piped (``"step"``): Kafka's driver
applies a global record the moment it is piped, as aiostreams' driver does when it feeds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_strategies import records, stateless_chain

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

RUNS = {"max_in_flight": st.sampled_from(MAX_IN_FLIGHT),
        "ordering": st.sampled_from(["key", "partition", "unordered"]),
        "seed": st.integers(0, 2**16)}
KEYS = st.sampled_from(["a", "b", "g0", "g1", "g2", None])


@st.composite
def global_join_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"op": "stream", "id": "s", "topic": "in"},
                                 {"op": "global_table", "id": "gt", "topic": "gin"}]
    chain, last = draw(stateless_chain("s"))
    ops += chain
    kind = draw(st.sampled_from(["join_global", "left_join_global"]))
    ops += [{"op": kind, "id": "j", "from": last, "other": "gt",
             "n": draw(st.integers(1, 3))},
            {"op": "to", "from": "j", "topic": "out"}]
    return {"id": "global_join", "ops": ops, "outputs": ["out"], "step": True,
            "inputs": draw(records(("in", "gin"), keys=KEYS, max_size=16))}


@ORACLE_SETTINGS
@given(case=global_join_cases(), **RUNS)
def test_global_table_joins_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                                max_in_flight: int, ordering: str,
                                                seed: int) -> None:
    check(oracle, "global_join", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
