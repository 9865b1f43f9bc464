"""Emit strategy ``on_window_close`` on tumbling, hopping, sliding and session windows gives
Kafka Streams' records: no updates, each window's final aggregate once its window closes,
all keys' due windows in order of start then key (sessions: end, start, key), stamped with
the aggregate's timestamp (sessions: their end) and carrying the headers of the record that
closed them; late and early records, session merges of closed sessions, and sessions Kafka's
store drops unemitted (whole 60 s segments) included.

Kafka throttles these emissions to one per second of wall-clock time; the oracle sets that
interval to 0 (``java/Oracle.java``), which is what aiostreams does (no wall-clock
dependence); see :mod:`aiostreams.processors.emit_final`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
from oracle_strategies import records
from test_oracle_aggregate import finish, grouped

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

RUNS = {"max_in_flight": st.sampled_from(MAX_IN_FLIGHT),
        "ordering": st.sampled_from(["key", "partition"]), "seed": st.integers(0, 2**16)}


@st.composite
def emit_final_cases(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.sampled_from([1000, 2000, 5000, 10000]))
    advance = draw(st.sampled_from([size, size, size // 2, 1000])) if size > 1000 else size
    window = {"op": "windowed_by", "id": "w", "from": "g", "windows": "time", "size": size,
              "advance": advance, "grace": draw(st.sampled_from([0, 500, 1000, 3000])),
              "emit": "on_window_close"}
    return {**finish(draw, [*draw(grouped()), window], "w"), "id": "emit_final"}


@ORACLE_SETTINGS
@given(case=emit_final_cases(), **RUNS)
def test_window_close_emission_matches_kafka_streams(oracle: OracleJVM, case: dict[str, Any],
                                                     max_in_flight: int, ordering: str,
                                                     seed: int) -> None:
    check(oracle, "emit_final", case, max_in_flight=max_in_flight, ordering=ordering,
          seed=seed)


@st.composite
def sliding_emit_final_cases(draw: st.DrawFn) -> dict[str, Any]:
    window = {"op": "windowed_by", "id": "w", "from": "g", "windows": "sliding",
              "diff": draw(st.sampled_from([1, 500, 1000, 2000, 5000])),
              "grace": draw(st.sampled_from([0, 500, 2000])), "emit": "on_window_close"}
    return {**finish(draw, [*draw(grouped()), window], "w"), "id": "emit_final_sliding",
            "inputs": draw(records(max_size=18))}


@st.composite
def session_emit_final_cases(draw: st.DrawFn) -> dict[str, Any]:
    window = {"op": "windowed_by", "id": "w", "from": "g", "windows": "session",
              "gap": draw(st.sampled_from([500, 1000, 2000, 5000])),
              "grace": draw(st.sampled_from([0, 500, 2000])), "emit": "on_window_close"}
    inputs = draw(records(max_size=18))
    if draw(st.booleans()):  # cross Kafka's 60 s store segments
        inputs = [{**r, "ts": r["ts"] + 50_000 * (i * 3 // len(inputs))}
                  for i, r in enumerate(inputs)]
    return {**finish(draw, [*draw(grouped()), window], "w"), "id": "emit_final_session",
            "inputs": inputs}


@ORACLE_SETTINGS
@given(case=sliding_emit_final_cases(), **RUNS)
def test_sliding_window_close_emission_matches_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "emit_final_sliding", case, max_in_flight=max_in_flight,
          ordering=ordering, seed=seed)


@ORACLE_SETTINGS
@given(case=session_emit_final_cases(), **RUNS)
def test_session_close_emission_matches_kafka_streams(
        oracle: OracleJVM, case: dict[str, Any], max_in_flight: int, ordering: str,
        seed: int) -> None:
    check(oracle, "emit_final_session", case, max_in_flight=max_in_flight,
          ordering=ordering, seed=seed)
