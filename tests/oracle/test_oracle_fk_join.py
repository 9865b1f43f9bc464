"""Foreign-key table-table joins (KIP-213), inner and left, give Kafka Streams' records:
subscriptions and responses through the two internal topics, stale responses dropped by
the value-hash check, a row that moves to another foreign key unsubscribing from the old
one, deletes and updates on both sides, null and missing foreign keys, Kafka's timestamps.

Each input is processed to the end before the next is piped (``"step"``), as Kafka's
driver does (see :func:`oracle_spec.run_aiostreams`)."""

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
KEYS = st.sampled_from(["a", "b", "c", "f0", "f1", "f2", None])


def side(draw: st.DrawFn, ops: list[dict[str, Any]], name: str, topic: str) -> str:
    """A table read from ``topic`` (or a stream turned into one), maybe filtered or
    mapped; returns its variable."""
    if draw(st.booleans()):
        ops.append({"op": "table", "id": name, "topic": topic})
    else:
        ops += [{"op": "stream", "id": f"{name}s", "topic": topic},
                {"op": "to_table", "id": name, "from": f"{name}s"}]
    kind = draw(st.sampled_from(["", "", "filter", "map_values"]))
    if not kind:
        return name
    ops.append((filter_op if kind == "filter" else map_values_op)(draw, f"{name}f", name))
    return f"{name}f"


@st.composite
def fk_join_cases(draw: st.DrawFn) -> dict[str, Any]:
    ops: list[dict[str, Any]] = []
    left = side(draw, ops, "l", "lin")
    right = side(draw, ops, "r", "rin")
    kind = draw(st.sampled_from(["fk_join", "fk_left_join"]))
    ops += [{"op": kind, "id": "j", "from": left, "other": right,
             "n": draw(st.integers(1, 3))},
            {"op": "to_stream", "id": "changes", "from": "j"},
            {"op": "to", "from": "changes", "topic": "out"}]
    return {"id": "fk_join", "ops": ops, "outputs": ["out"], "step": True,
            "inputs": draw(records(("lin", "rin"), keys=KEYS, max_size=18))}


@ORACLE_SETTINGS
@given(case=fk_join_cases(), **RUNS)
def test_foreign_key_joins_match_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                               max_in_flight: int, ordering: str,
                                               seed: int) -> None:
    check(oracle, "fk_join", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)
