"""A Kafka Streams consumer reads aiostreams' windowed keys: TimeWindowedDeserializer and
SessionWindowedDeserializer (4.4.0, in the oracle JVM) give back the key and the window
that aiostreams' TimeWindowedSerde / SessionWindowedSerde wrote."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle_check import COUNTS, ORACLE_SETTINGS
from oracle_jvm import OracleJVM

from aiostreams.windows import SessionWindowedSerde, TimeWindowedSerde, Windowed

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(600)]

KEYS = st.text(min_size=0, max_size=8)
MS = st.integers(0, 2**41)


@ORACLE_SETTINGS
@given(keys=st.lists(st.tuples(KEYS, MS), min_size=1, max_size=20),
       size_ms=st.integers(1, 10**7))
def test_kafka_reads_time_windowed_keys(oracle: OracleJVM, keys: list[tuple[str, int]],
                                        size_ms: int) -> None:
    serde = TimeWindowedSerde(str, size=size_ms / 1000)
    raw = [serde.serialize("t", Windowed(k, start / 1000, (start + size_ms) / 1000))
           for k, start in keys]
    (answer,) = oracle.ask([{"id": "time", "mode": "deserialize", "kind": "time",
                             "size": size_ms, "keys": [r.hex() for r in raw if r]}])
    COUNTS["windowed_keys"] += 1
    assert answer["keys"] == [{"key": k, "start": start, "end": start + size_ms}
                              for k, start in keys]


@ORACLE_SETTINGS
@given(keys=st.lists(st.tuples(KEYS, MS, st.integers(0, 10**7)), min_size=1, max_size=20))
def test_kafka_reads_session_windowed_keys(oracle: OracleJVM,
                                           keys: list[tuple[str, int, int]]) -> None:
    serde = SessionWindowedSerde(str)
    raw = [serde.serialize("t", Windowed(k, start / 1000, (start + length) / 1000))
           for k, start, length in keys]
    (answer,) = oracle.ask([{"id": "session", "mode": "deserialize", "kind": "session",
                             "keys": [r.hex() for r in raw if r]}])
    COUNTS["windowed_keys"] += 1
    assert answer["keys"] == [{"key": k, "start": start, "end": start + length}
                              for k, start, length in keys]
