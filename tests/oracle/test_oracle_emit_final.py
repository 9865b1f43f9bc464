"""Emit strategy ``on_window_close`` on tumbling and hopping windows gives Kafka Streams'
records: no updates, each window's final aggregate once its window closes, all keys' due
windows in order of start then key, stamped with the aggregate's timestamp and carrying the
headers of the record that closed them.

Kafka throttles these emissions to one per second of wall-clock time; the oracle sets that
interval to 0 (``java/Oracle.java``), which is what aiostreams does (no wall-clock
dependence); see :mod:`aiostreams.topology.emit_final`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import MAX_IN_FLIGHT, ORACLE_SETTINGS, check
from oracle_jvm import OracleJVM
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
